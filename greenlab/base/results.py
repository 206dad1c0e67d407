"""The results log: one JSON object per line (JSONL) in ``greenlab.base.paths.results_dir()``.

Appends are crash-safe and safe between processes (each takes the OS file lock
``runs.jsonl.lock``, see ``greenlab.base.filelock``): a record is serialised completely before the file is opened, then
written as one line with a single ``write`` followed by ``flush`` and ``os.fsync``. A line torn
by a crash is skipped by ``load()`` (with a warning that says how many), and the next append
starts on a fresh line so it is never glued onto the torn one.
"""

from __future__ import annotations

import errno
import json
import math
import os
import warnings
from datetime import date, datetime
from pathlib import Path

from greenlab.base.filelock import locked
from greenlab.base.paths import results_dir

FILENAME = "runs.jsonl"


def log_path(path=None) -> Path:
    """The log file: ``path`` if given, else ``<results_dir>/runs.jsonl``."""
    if path is not None:
        return Path(path)

    return results_dir() / FILENAME


def append(record: dict, path=None) -> Path:
    """Append ``record`` (a dict, or an object with ``to_dict()``) as one line; returns the path.

    Non-finite floats (NaN, inf) are stored as null. Anything that cannot be written as JSON
    raises ``ValueError`` before the file is touched.
    """
    if hasattr(record, "to_dict"):
        record = record.to_dict()
    if not isinstance(record, dict):
        raise ValueError(f"a results record must be a dict, got {type(record).__name__}")
    try:
        line = json.dumps(_plain(record), allow_nan=False, sort_keys=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ValueError(f"record cannot be stored as JSON: {exc}") from None
    data = line.encode("utf-8")
    target = log_path(path)
    try:
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        with locked(target), open(target, "ab+") as f:  # the torn-line check and the write as one step
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn last line: start ours on a new line
                    data = b"\n" + data
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise ResultsLogError(f"cannot write the results log {target}: "
                              f"{exc.strerror or exc}", path=target) from exc
    return target


class ResultsLogError(OSError):
    """The results log could not be written; ``path`` is the file."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path


def load(path=None) -> list[dict]:
    """All records in the log (oldest first); [] if there is none.

    Lines that are not complete JSON objects (e.g. torn by a crash) are skipped, with a warning
    that says how many.
    """
    target = log_path(path)
    if not target.exists():
        return []
    records, skipped = [], 0
    with open(target, "rb") as f:
        for raw in f:
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                item = json.loads(text)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(item, dict):
                records.append(item)
            else:
                skipped += 1
    if skipped:
        warnings.warn(f"skipped {skipped} damaged line(s) in {target}", RuntimeWarning, stacklevel=2)
    return records


# --- helpers ---------------------------------------------------------------------------

def _plain(value):
    """A JSON-ready copy: tuples -> lists, Paths/dates -> strings, non-finite floats -> None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (Path, datetime, date)):
        return str(value)
    if hasattr(value, "to_dict"):
        return _plain(value.to_dict())
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return _plain(value.item())
        except (TypeError, ValueError, RuntimeError):
            pass
    raise TypeError(f"cannot store {type(value).__name__} in the results log")
