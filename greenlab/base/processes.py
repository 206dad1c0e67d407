"""Child processes that must not outlive the work that started them.

- ``kill_group(proc)`` / ``kill_groups(procs)``: SIGTERM to each process group, then SIGKILL to
  the whole group after the grace period, whether or not the leader has exited (members that
  outlive their leader are killed too).
- ``die_with_parent(expected_parent)``: called at a process's start, makes it receive a signal
  when its parent exits (Linux ``prctl(PR_SET_PDEATHSIG)`` through ctypes; elsewhere a watchdog
  thread on the parent's pid), and ends it at once when the parent is already gone.
- ``run_in_foreground(cmd, env)``: ``subprocess.call`` for a long-lived program (JupyterLab) that
  must end with this process: SIGTERM or SIGHUP here is passed on to it and waited for, and it
  gets a parent-death signal of its own, so a SIGKILL here ends it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_ENV = "GREENLAB_PARENT_PID"  # the pid a started process should die with


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End ``proc`` and everything in its process group (it must lead its own group, e.g.
    ``start_new_session=True``): SIGTERM, ``grace_s`` seconds for the leader to exit, then SIGKILL
    to the group always, so that members that outlive the leader are killed too."""
    kill_groups([proc], grace_s)


def kill_groups(procs, grace_s: float = 5.0) -> None:
    """``kill_group`` for several process-group leaders at once (one grace period for all)."""
    procs = [p for p in procs if p is not None]
    if not isinstance(grace_s, (int, float)) or not grace_s >= 0:
        raise ValueError(f"grace_s must be a number >= 0 seconds, got {grace_s!r}")
    for proc in procs:
        _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        _signal_group(proc.pid, signal.SIGKILL)
    for proc in procs:
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): nothing more to do
            pass


def die_with_parent(expected_parent: int | None = None, sig: int = signal.SIGTERM) -> str:
    """Make this process receive ``sig`` when its parent exits; returns how ("prctl" or
    "watchdog"). ``expected_parent``: the pid the parent had (default: ``$GREENLAB_PARENT_PID``,
    else the current parent); when the parent is already another process (it died before this
    call), ``sig`` is sent at once."""
    if expected_parent is None:
        expected_parent = _parent_from_env()
    how = "prctl" if _prctl_pdeathsig(sig) else "watchdog"
    if how == "watchdog":
        threading.Thread(target=_watch_parent, args=(expected_parent, sig), daemon=True,
                         name="greenlab-parent-watchdog").start()
    if os.getppid() != expected_parent:
        os.kill(os.getpid(), sig)
    return how


def run_in_foreground(cmd, env=None) -> int:
    """Run ``cmd`` and return its exit code (as ``subprocess.call``), with the child tied to this
    process: SIGTERM or SIGHUP received here is forwarded to it and its exit awaited (it shuts down
    cleanly: JupyterLab stops its kernels and removes its token file), a Ctrl-C reaches it from
    the terminal as before, and should this process die outright the child receives SIGTERM
    (its parent-death signal, set in the child itself before it runs ``cmd``)."""
    me = os.getpid()

    def tie():  # in the child, before exec: the signal survives exec
        _prctl_pdeathsig(signal.SIGTERM)
        if os.getppid() != me:
            os.kill(os.getpid(), signal.SIGTERM)

    proc = subprocess.Popen(cmd, env=env, preexec_fn=tie if sys.platform.startswith("linux") else None)

    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)
                if threading.current_thread() is threading.main_thread()}
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # the terminal's Ctrl-C went to the child too: it decides
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _parent_from_env() -> int:
    """``$GREENLAB_PARENT_PID`` when it names this process's parent, or names a process that is
    gone (the parent died before this call); the current parent when the variable is absent or
    was inherited from further up (it names a living process that is not the parent)."""
    env = os.environ.get(PARENT_ENV, "")
    parent = os.getppid()
    if not env.isdigit() or int(env) == parent:
        return parent
    return parent if _state(int(env)) not in (None, "Z", "X") else int(env)


def _prctl_pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int, sig: int, interval_s: float = 0.5) -> None:
    while os.getppid() == parent:
        time.sleep(interval_s)
    os.kill(os.getpid(), sig)


def _exit_on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def supervise_main(argv=None) -> int:
    """``python greenlab/base/processes.py [--remove DIR] -- MODULE ARGS...``: run ``python -m MODULE
    ARGS...`` in this process so that it dies with the process that started this one (see
    ``die_with_parent``); its own children learn this pid through ``$GREENLAB_PARENT_PID``. When
    the starter is gone by the time MODULE ends, ``DIR`` (the starter's temporary folder) is
    removed here, since nobody else is left to remove it."""
    import argparse
    import runpy
    import shutil

    parser = argparse.ArgumentParser(prog="python greenlab/base/processes.py", description=supervise_main.__doc__)
    parser.add_argument("--remove", default=None, help="folder to remove when the starter has died")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- MODULE ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give a module to run after --, e.g. -- torch.distributed.run ...")
    starter = _parent_from_env()
    signal.signal(signal.SIGTERM, _exit_on_signal)  # until MODULE installs its own: cleanup runs
    die_with_parent(starter)
    os.environ[PARENT_ENV] = str(os.getpid())
    sys.argv = list(command)
    ended_by_exception = True
    try:
        runpy.run_module(command[0], run_name="__main__", alter_sys=True)
        ended_by_exception = False
    finally:
        # a signal from the starter's death may come while its other threads still exit (the
        # pid is then still this process's parent for a moment): wait a little in that case
        if args.remove and parent_gone(starter, wait_s=3.0 if ended_by_exception else 0.0):
            shutil.rmtree(args.remove, ignore_errors=True)
    return 0


def parent_gone(parent: int, wait_s: float = 0.0) -> bool:
    """True when ``parent`` is no longer this process's living parent (reparented, exited, or a
    zombie), checked for up to ``wait_s`` seconds."""
    end = time.monotonic() + wait_s
    while True:
        if os.getppid() != parent or _state(parent) in ("Z", "X", None):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)


def _state(pid: int):
    """The process state letter from /proc (Linux), "?" where /proc is not there, None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return None if os.path.isdir("/proc") else "?"
    except (OSError, IndexError):
        return "?"


if __name__ == "__main__":
    # run as a script: this file's folder (the package's) must not shadow top-level modules
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.exit(supervise_main())
