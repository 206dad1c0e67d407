"""Files written so that a reader sees the old content or the new, never a torn file.

``atomic_write_bytes`` / ``atomic_write_text``: a temporary file in the same folder, flushed and
fsynced, renamed over the target, then the folder fsynced. ``clean_stale_tmp`` removes the
temporary files a killed writer left behind.
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
from pathlib import Path


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a torn
    one: write a temporary file in the same folder, flush and fsync it, ``os.replace`` it over
    ``path``, then fsync the folder. The temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    """``atomic_write_bytes`` for text (``encoding``, default UTF-8)."""
    atomic_write_bytes(path, text.encode(encoding))


def clean_stale_tmp(path, max_age_s: float = 3600.0) -> list:
    """Remove temporary files that ``atomic_write_bytes`` left beside ``path`` when its process
    was killed mid-write: those of processes no longer running on this machine, and any older
    than ``max_age_s``. Returns the paths removed."""
    path = Path(path)
    removed = []
    try:
        candidates = list(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))
    except OSError:
        return removed
    now = time.time()
    for tmp in candidates:
        pid = _writer_pid(tmp.name[len(path.name) + 2:])
        try:
            stale = (pid is not None and pid != os.getpid() and not _pid_alive(pid)) \
                or now - tmp.stat().st_mtime > max_age_s
            if stale:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            pass
    return removed


def _writer_pid(rest: str) -> int | None:
    head = rest.split("-", 1)[0]
    return int(head) if head.isdigit() and "-" in rest else None


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would end the process there; rely on the age rule
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
