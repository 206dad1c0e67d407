"""An OS file lock for files that several processes read, modify and write (the leaderboard,
the results log).

    with locked(path):          # takes <path>.lock exclusively; blocks until it is free
        entries = read(path)
        write(path, entries + [new])

POSIX: ``fcntl.flock`` on ``<path>.lock``; the holder removes the lock file before releasing it,
and a waiter that then gets the lock on a removed file retries on the new one, so no lock file
is left behind. Windows: ``msvcrt.locking`` on the first byte of the same file, which stays
(an open file cannot be removed there). The lock belongs to the open file, so the OS releases it
when the process ends: a crashed writer never leaves a stale lock (on POSIX a killed holder
leaves an empty, unlocked ``.lock`` file, which the next writer uses and removes).
Limitation: on network file systems that do not implement these locks (some NFS set-ups),
the lock may not exclude writers on other machines.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt


def lock_path(path) -> Path:
    """The lock file used for ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(path, timeout_s: float = 60.0):
    """Hold an exclusive lock for ``path`` inside the ``with`` block. Raises TimeoutError
    (naming the lock file) when another process holds it for longer than ``timeout_s``."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        fd = _open(lock)
        try:
            _acquire(fd, lock, max(0.0, deadline - time.monotonic()))
        except BaseException:
            os.close(fd)
            raise
        if fcntl is None or _same_file(fd, lock):
            break
        _release(fd)  # we locked a file its holder had already removed: use the new one
        os.close(fd)
    try:
        yield lock
    finally:
        try:
            if fcntl is not None:
                try:
                    os.unlink(lock)
                except FileNotFoundError:
                    pass
            _release(fd)
        finally:
            os.close(fd)


def _same_file(fd, lock) -> bool:
    try:
        st = os.stat(lock)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _acquire(fd, lock, timeout_s):
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return
        except (BlockingIOError, PermissionError, OSError) as exc:
            if fcntl is not None and not isinstance(exc, BlockingIOError):
                raise
            if time.monotonic() >= deadline:
                raise TimeoutError(f"another process has held the lock {lock} for over "
                                   f"{timeout_s:g} s") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _release(fd):
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def _open(lock) -> int:
    """The lock file, created readable by all; another user's lock file (a class folder shared by
    several learners) is opened read-only, which is enough for ``flock``."""
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:
        return os.open(lock, os.O_RDONLY)
