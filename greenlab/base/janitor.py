"""What a started job leaves behind, removed when the process that started it ends, however it ends.

A process killed outright (SIGKILL, a killed kernel) runs no ``finally`` and no ``atexit``: its
children go on running and its temporary files stay. ``Janitor`` starts a small watcher process
(this file run as a script: the standard library only, no torch to import) that learns, over a
pipe, the folders and process groups the starter owns, and when the starter ends (the pipe
closes, or its pid is no longer the watcher's parent) kills those groups and removes those folders.

    with Janitor() as janitor:
        tmp = janitor.make_temp_dir("greenlab-study-")       # registered before it exists
        proc = subprocess.Popen(cmd, start_new_session=True)   # its own process group
        janitor.watch_group(proc.pid)
        ...
    # on leaving: the groups are killed and the folders removed, here or by the watcher

A folder is registered *before* it is created, and every child should also die with its parent by
itself (``processes.die_with_parent`` at its start): a kill between a fork and its registration
then leaves nothing either.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script: this file's folder (the package's) must not shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import secrets
import select
import shutil
import signal
import subprocess
import time


class Janitor:
    """The watcher of one job (see the module's docstring). ``close()`` (or leaving the ``with``
    block) does the cleanup in this process and ends the watcher."""

    def __init__(self):
        self.folders: list = []
        self.groups: list = []
        self._closed = False
        self._proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(os.getpid())],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, bufsize=1,
                                      start_new_session=True)  # a Ctrl-C to the terminal's group is not its end

    def remove_on_exit(self, path) -> None:
        """Remove ``path`` (a folder, or a file) when the job ends."""
        path = os.path.abspath(os.fspath(path))
        self.folders.append(path)
        self._tell("path", path)

    def make_temp_dir(self, prefix: str = "greenlab-", dir=None) -> str:
        """A new private folder (like ``tempfile.mkdtemp``), registered before it is created."""
        import tempfile

        parent = os.path.abspath(os.fspath(dir) if dir is not None else tempfile.gettempdir())
        for _ in range(100):
            path = os.path.join(parent, f"{prefix}{secrets.token_hex(6)}")
            self.remove_on_exit(path)
            try:
                os.mkdir(path, 0o700)
                return path
            except FileExistsError:  # someone else's: never removed by this job
                self.forget(path)
        raise FileExistsError(f"could not create a new folder in {parent}")

    def forget(self, path) -> None:
        """Stop watching ``path`` (it is not this job's to remove)."""
        path = os.path.abspath(os.fspath(path))
        if path in self.folders:
            self.folders.remove(path)
        self._tell("forget", path)

    def watch_group(self, pgid: int) -> None:
        """Kill process group ``pgid`` (SIGKILL) when the job ends (a child started with
        ``start_new_session=True`` leads a group of its own pid)."""
        self.groups.append(int(pgid))
        self._tell("group", str(int(pgid)))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _cleanup(self.groups, self.folders)
        end_by_closing_stdin(self._proc)  # the watcher finds nothing left to do

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _tell(self, kind: str, value: str) -> None:
        if "\n" in value:
            raise ValueError(f"a path with a newline cannot be watched: {value!r}")
        try:
            self._proc.stdin.write(f"{kind} {value}\n")
            self._proc.stdin.flush()
        except OSError as exc:
            raise RuntimeError("the cleanup watcher process has ended") from exc


def end_by_closing_stdin(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """End a child that stops when its standard input closes (this watcher, the pre-emption
    server): close it, wait up to ``timeout_s`` seconds, then kill the child if it is still there."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _cleanup(groups, folders) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 10.0
    for path in folders:
        while True:  # a killed process may still be writing for a moment
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    break
            if not os.path.lexists(path) or time.monotonic() > deadline:
                break
            time.sleep(0.05)


def _watch(parent: int) -> int:
    groups, folders = [], []
    stdin = sys.stdin
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.2)
        if ready:
            line = stdin.readline()
            if not line:
                break  # the starter closed the pipe, or died
            kind, _, value = line.rstrip("\n").partition(" ")
            if kind == "path":
                folders.append(value)
            elif kind == "forget" and value in folders:
                folders.remove(value)
            elif kind == "group":
                groups.append(int(value))
        if os.getppid() != parent:
            break  # the starter is gone (even if a forked child of it still holds the pipe)
    _cleanup(groups, folders)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(_watch(int(sys.argv[1])))
