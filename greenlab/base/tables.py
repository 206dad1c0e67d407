"""Reading the cited CSV tables (``greenlab/cited_tables/``): a damaged file (not UTF-8, a
missing column, a truncated or short row, an empty cell or a non-number where a number belongs) raises
``DataTableError`` naming the file, the line and the problem, never a bare KeyError."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path


class DataTableError(ValueError):
    """A data table that cannot be read as the table it should be."""


def read_table(path, columns, *, optional=(), comment: str | None = None) -> list[dict]:
    """Rows of the CSV file ``path`` as dicts with every column in ``columns`` (non-empty
    strings) and in ``optional`` (present in the header, '' where a row leaves it empty). Each row also carries ``_line`` (its
    1-based line number). Lines starting with ``comment`` are skipped."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data table not found: {path}; set GREENLAB_DATA_DIR to the folder holding it")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataTableError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); "
                             "restore the file from the repository") from None
    lines = text.splitlines()
    numbered = [(i + 1, line) for i, line in enumerate(lines)
                if line.strip() and not (comment and line.lstrip().startswith(comment))]
    if not numbered:
        raise DataTableError(f"{path}: the table is empty (expected columns {', '.join(columns)})")
    try:
        reader = csv.reader(io.StringIO("\n".join(line for _, line in numbered)), strict=True)
        parsed = list(reader)
    except csv.Error as exc:
        raise DataTableError(f"{path}: not valid CSV ({exc}; a truncated or damaged file)") from None
    if len(parsed) != len(numbered):  # a quoted field spanning lines: fall back to row order
        numbered = [(None, "")] * len(parsed)
    header = [h.strip() for h in parsed[0]]
    missing = [c for c in (*columns, *optional) if c not in header]
    if missing:
        raise DataTableError(f"{path}: missing column(s) {', '.join(missing)} (header has "
                             f"{', '.join(header) or 'nothing'})")
    rows = []
    for (line_no, _), values in zip(numbered[1:], parsed[1:]):
        where = f"{path} line {line_no}" if line_no else f"{path} row {len(rows) + 2}"
        if len(values) != len(header):
            raise DataTableError(f"{where}: {len(values)} field(s), expected {len(header)} "
                                 "(a truncated or damaged row)")
        row = {h: v.strip() for h, v in zip(header, values)}
        for c in columns:
            if not row[c]:
                raise DataTableError(f"{where}: empty {c!r}")
        row["_line"] = line_no
        rows.append(row)
    if not rows:
        raise DataTableError(f"{path}: the table has a header but no rows")
    return rows


def number(row: dict, column: str, path, *, low: float | None = None) -> float:
    """``row[column]`` as a finite float (>= ``low`` when given)."""
    try:
        value = float(row[column])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (low is not None and value < low):
        bound = "" if low is None else f" >= {low:g}"
        raise DataTableError(f"{path} line {row.get('_line')}: {column} must be a finite number{bound}, "
                             f"got {row[column]!r}")
    return value


def integer(row: dict, column: str, path) -> int:
    """``row[column]`` as an int."""
    try:
        return int(row[column])
    except ValueError:
        raise DataTableError(f"{path} line {row.get('_line')}: {column} must be an integer, "
                             f"got {row[column]!r}") from None
