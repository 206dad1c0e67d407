"""An OS file lock for files that several processes read, modify and write (the leaderboard,
the results log).

    with locked(path):          # takes <path>.lock exclusively; blocks until it is free
        entries = read(path)
        write(path, entries + [new])

POSIX: ``fcntl.flock`` on ``<path>.lock``. Windows: ``msvcrt.locking`` on the first byte of the
same file. The lock file is created group-writable (``0o664``: a class folder's group shares it)
and never removed: removing it would need the right to delete another user's file, which a
sticky-bit folder (``chmod +t``, as ``/tmp`` and most shared class folders) refuses, and a lock
file that stays costs nothing. Another user's lock file is opened read-only where it cannot be
opened for writing, which is enough for ``flock``. The lock belongs to the open file, so the OS
releases it when the process ends: a crashed writer never leaves a stale lock.
A folder this user cannot write in raises ``PermissionError`` naming the folder.
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


LOCK_MODE = 0o664  # every member of the folder's group can take it


@contextlib.contextmanager
def locked(path, timeout_s: float = 60.0):
    """Hold an exclusive lock for ``path`` inside the ``with`` block. Raises TimeoutError
    (naming the lock file) when another process holds it for longer than ``timeout_s``, and
    PermissionError (naming the folder) when the lock file cannot be created or opened."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = _open(lock)
    try:
        _acquire(fd, lock, timeout_s)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield lock
    finally:
        try:
            _release(fd)
        finally:
            os.close(fd)


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
    """The lock file, created group-writable; another user's lock file (a class folder shared by
    several learners) is opened read-only where it cannot be opened for writing."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, LOCK_MODE)
    except FileExistsError:
        pass
    except PermissionError as exc:
        raise PermissionError(exc.errno, f"cannot create the lock file {lock.name} in {lock.parent}: "
                                         "this user may not write in that folder") from None
    else:
        try:
            os.fchmod(fd, LOCK_MODE)  # whatever the umask took away: the group shares this lock
        except (OSError, AttributeError):
            pass
        return fd
    try:
        return os.open(lock, os.O_RDWR)
    except PermissionError:
        pass
    try:
        return os.open(lock, os.O_RDONLY)
    except PermissionError as exc:
        raise PermissionError(exc.errno, f"cannot open the lock file {lock} (owned by another user and "
                                         "not readable by this one)") from None
    except FileNotFoundError:  # removed between the two opens (an older greenlab removed its lock)
        return _open(lock)
