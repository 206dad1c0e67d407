"""The course's notebook format: where the lessons live, the markers of the instructor copy, a normalised
notebook, and the learner copy made from it.

The instructor copy ``lessons/instructor/NN_slug.ipynb`` holds the worked solutions; the learner copy
``lessons/NN_slug.ipynb`` is generated from it (``learner_notebook``). Markers in the instructor copy:

* Code cells: lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are
  removed from the learner copy. An optional ``# LEARNER:`` line inside the block
  starts the learner's version: the lines after it are written commented out
  (``# ...``) in the instructor copy and appear uncommented in the learner copy.
  Without a ``# LEARNER:`` part the block becomes
  ``# YOUR CODE HERE (see the exercise text above)``. Write a learner part that
  still runs (e.g. a function returning ``None``), so a learner who skips the
  exercise can run the rest; checkers report ``None`` as "not attempted".
  Later cells must not need the solution's result to run (or must check for
  ``None`` themselves), because CI runs the learner copies with nbval.
* Markdown cells: text between ``<!-- BEGIN INSTRUCTOR -->`` and
  ``<!-- END INSTRUCTOR -->`` is removed from the learner copy.
* Cells tagged ``instructor-only`` are dropped from the learner copy.

Outputs are kept only in cells marked ``# NBVAL_CHECK_OUTPUT`` (or tagged
``nbval-check-output``), in both copies. Execution counts are cleared (a checked cell gets its position among
code cells, since nbval skips cells without a count), cell ids are ``<stem>-<index>`` and notebook metadata is
reduced to the kernelspec, so a build is reproducible byte for byte (``normalise``, ``dumps``). Lessons can also
be written from Python with :func:`notebook`, :func:`md` and :func:`code`.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

from greenlab.base.paths import lessons_dir as configured_lessons_dir

SOLUTION_BEGIN = "# BEGIN SOLUTION"
SOLUTION_END = "# END SOLUTION"
LEARNER_MARK = "# LEARNER:"
DEFAULT_STUB = "# YOUR CODE HERE (see the exercise text above)"
INSTRUCTOR_BEGIN = "<!-- BEGIN INSTRUCTOR -->"
INSTRUCTOR_END = "<!-- END INSTRUCTOR -->"
INSTRUCTOR_ONLY_TAG = "instructor-only"
CHECK_OUTPUT_MARK = "# NBVAL_CHECK_OUTPUT"
CHECK_OUTPUT_TAG = "nbval-check-output"
NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
_STEM_RE = re.compile(r"^(?P<number>\d{2})_(?P<slug>[a-z0-9]+(?:_[a-z0-9]+)*)$")


class LessonError(ValueError):
    """A lesson notebook breaks a course convention; the message names file, cell and fix."""


def md(text: str) -> dict[str, Any]:
    """A markdown cell."""
    return {"cell_type": "markdown", "metadata": {}, "source": _dedent(text)}


def code(text: str, check_output: bool = False, tags: Iterable[str] = ()) -> dict[str, Any]:
    """A code cell; ``check_output=True`` adds ``# NBVAL_CHECK_OUTPUT`` so nbval compares its output."""
    source = _dedent(text)
    if check_output and CHECK_OUTPUT_MARK not in source:
        source = f"{CHECK_OUTPUT_MARK}\n{source}"
    metadata = {"tags": list(tags)} if tags else {}
    return {"cell_type": "code", "metadata": metadata, "source": source, "outputs": [], "execution_count": None}


def notebook(cells: Iterable[dict[str, Any]], path: str | os.PathLike | None = None,
             stem: str | None = None) -> dict[str, Any]:
    """A normalised notebook (nbformat 4.5 dict) from cells made with :func:`md`/:func:`code`.

    With ``path`` it is also written there (cell ids use the file name); ``stem``
    sets the cell-id prefix otherwise (default ``"lesson"``).
    """
    if stem is None:
        stem = Path(path).stem if path is not None else "lesson"
    nb = normalise({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, stem)
    if path is not None:
        write(nb, path)
    return nb


def write(nb: dict[str, Any], path: str | os.PathLike) -> bool:
    """Write ``nb`` in the canonical on-disk form; returns True when the file changed."""
    path = Path(path)
    text = dumps(nb)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def dumps(nb: dict[str, Any]) -> str:
    """The canonical text of a notebook: the layout Jupyter itself writes (indent 1, sorted keys)."""
    return json.dumps(_split_lines(nb), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def normalise(nb: dict[str, Any], stem: str) -> dict[str, Any]:
    """The canonical form of a notebook: outputs only in checked cells, no execution counts,
    ids ``<stem>-<index>``, minimal metadata. Does not change cell text."""
    cells = []
    code_cells = 0
    for index, cell in enumerate(nb.get("cells", [])):
        code_cells += cell.get("cell_type") == "code"
        cells.append(_normalise_cell(cell, _cell_id(stem, index), code_cells))
    return {"cells": cells, "metadata": copy.deepcopy(NOTEBOOK_METADATA), "nbformat": 4, "nbformat_minor": 5}


def learner_notebook(instructor_nb: dict[str, Any], stem: str) -> dict[str, Any]:
    """The learner copy of an instructor notebook (already normalised or not).

    Learner cells keep the id of the instructor cell they come from.
    Raises :class:`LessonError` for unbalanced markers or a learner cell that is not valid Python.
    """
    source_nb = normalise(instructor_nb, stem)
    cells = []
    for index, cell in enumerate(source_nb["cells"]):
        where = f"{stem}.ipynb cell {index}"
        if INSTRUCTOR_ONLY_TAG in cell["metadata"].get("tags", []):
            continue
        cell = copy.deepcopy(cell)
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            text = strip_instructor_notes(text, where)
            if not text.strip():
                continue
        elif cell["cell_type"] == "code":
            new_text = strip_solutions(text, where)
            if new_text != text and _checks_output(cell):
                raise LessonError(
                    f"{where}: a cell with a solution block cannot also be {CHECK_OUTPUT_MARK}, "
                    "because the learner's output differs; move the checked print into its own cell"
                )
            _require_valid_python(new_text, where)
            text = new_text
        cell["source"] = text
        cells.append(cell)
    return {**source_nb, "cells": cells}


def strip_solutions(source: str, where: str = "cell") -> str:
    """Replace every ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` block by its learner part or the stub."""
    out: list[str] = []
    state = None  # None, "solution" or "learner"
    indent = ""
    learner: list[str] = []
    has_learner = False
    for number, line in enumerate(source.split("\n"), start=1):
        mark = line.strip()
        if mark == SOLUTION_BEGIN:
            if state is not None:
                raise LessonError(f"{where}, line {number}: '{SOLUTION_BEGIN}' inside another solution block")
            state, indent, learner = "solution", line[: len(line) - len(line.lstrip())], []
            has_learner = False
        elif mark == LEARNER_MARK:
            if state != "solution":
                raise LessonError(f"{where}, line {number}: '{LEARNER_MARK}' must be inside a solution block, once")
            state, has_learner = "learner", True
        elif mark == SOLUTION_END:
            if state is None:
                raise LessonError(f"{where}, line {number}: '{SOLUTION_END}' without '{SOLUTION_BEGIN}'")
            out.extend(learner if has_learner else [indent + DEFAULT_STUB])
            state = None
        elif state == "learner":
            learner.append(_uncomment(line, indent, f"{where}, line {number}"))
        elif state is None:
            out.append(line)
    if state is not None:
        raise LessonError(f"{where}: '{SOLUTION_BEGIN}' is never closed by '{SOLUTION_END}'")
    return "\n".join(out)


def strip_instructor_notes(text: str, where: str = "cell") -> str:
    """Remove ``<!-- BEGIN INSTRUCTOR -->`` ... ``<!-- END INSTRUCTOR -->`` spans from markdown."""
    pattern = re.compile(re.escape(INSTRUCTOR_BEGIN) + r".*?" + re.escape(INSTRUCTOR_END), re.DOTALL)
    stripped = pattern.sub("", text)
    for marker in (INSTRUCTOR_BEGIN, INSTRUCTOR_END):
        if marker in stripped:
            raise LessonError(f"{where}: unbalanced '{marker}'; every note needs both markers")
    stripped = re.sub(r"\n{3,}", "\n\n", stripped)
    return "\n".join(line.rstrip() for line in stripped.split("\n")).strip("\n")


def lessons_dir(folder: str | os.PathLike | None = None) -> Path:
    """The lessons folder: ``folder``, else ``greenlab.base.paths.lessons_dir()``
    (``$GREENLAB_LESSONS_DIR``, else ``lessons/`` beside the package)."""
    if folder is not None:
        return Path(folder)

    return configured_lessons_dir()


def instructor_notebooks(folder: str | os.PathLike | None = None) -> list[Path]:
    """The instructor copies ``<lessons>/instructor/NN_slug.ipynb``, sorted."""
    inst = lessons_dir(folder) / "instructor"
    return sorted(inst.glob("*.ipynb")) if inst.is_dir() else []


def _normalise_cell(cell: dict[str, Any], cell_id: str, ordinal: int) -> dict[str, Any]:
    """One cell in canonical form. A checked cell that keeps outputs gets execution count
    ``ordinal`` (its position among code cells): nbval only compares cells with a count."""
    kind = cell.get("cell_type")
    if kind not in ("code", "markdown", "raw"):
        raise LessonError(f"cell {cell_id}: unknown cell_type {kind!r}")
    text = _joined(cell.get("source", "")).rstrip()
    tags = list(dict.fromkeys(cell.get("metadata", {}).get("tags", [])))
    out: dict[str, Any] = {"cell_type": kind, "id": cell_id, "metadata": {"tags": tags} if tags else {}, "source": text}
    if kind == "code":
        keep = _checks_output({"source": text, "metadata": out["metadata"]})
        out["outputs"] = [_normalise_output(o, ordinal) for o in cell.get("outputs", [])] if keep else []
        out["execution_count"] = ordinal if out["outputs"] else None
    elif cell.get("attachments"):
        out["attachments"] = copy.deepcopy(cell["attachments"])
    return out


def _normalise_output(output: dict[str, Any], ordinal: int) -> dict[str, Any]:
    output = copy.deepcopy(output)
    if output.get("output_type") == "execute_result":
        output["execution_count"] = ordinal
    if "text" in output:
        output["text"] = _joined(output["text"])
    for mime, value in output.get("data", {}).items():
        if not _is_json_mime(mime):
            output["data"][mime] = _joined(value)
    return output


def _checks_output(cell: dict[str, Any]) -> bool:
    return CHECK_OUTPUT_MARK in _source(cell) or CHECK_OUTPUT_TAG in cell.get("metadata", {}).get("tags", [])


def _cell_id(stem: str, index: int) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_-]', '-', stem)[:56]}-{index:03d}"


def _source(cell: dict[str, Any]) -> str:
    return _joined(cell.get("source", ""))


def _joined(value: Any) -> Any:
    return "".join(value) if isinstance(value, list) else value


def _is_json_mime(mime: str) -> bool:
    return mime == "application/json" or mime.endswith("+json")


def _split_lines(nb: dict[str, Any]) -> dict[str, Any]:
    """Store multi-line strings as lists of lines, as Jupyter does."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        cell["source"] = _lines(cell["source"])
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = _lines(output["text"])
            for mime, value in output.get("data", {}).items():
                if not _is_json_mime(mime) and isinstance(value, str):
                    output["data"][mime] = _lines(value)
    return nb


def _lines(value: Any) -> Any:
    return value.splitlines(keepends=True) if isinstance(value, str) else value


def _uncomment(line: str, indent: str, where: str) -> str:
    if not line.strip():
        return ""
    if line.startswith(indent + "#"):
        skip = 2 if line.startswith(indent + "# ") else 1
        text = indent + line[len(indent) + skip:]
        return text if text.strip() else ""
    raise LessonError(
        f"{where}: lines after '{LEARNER_MARK}' must be commented out in the instructor copy "
        f"('# ' at the marker's indentation), got {line!r}"
    )


def _require_valid_python(text: str, where: str) -> None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        text = TransformerManager().transform_cell(text)
    except ImportError:  # without IPython, blank out magics and shell lines
        text = "\n".join("" if line.lstrip()[:1] in ("%", "!") else line for line in text.split("\n"))
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise LessonError(
            f"{where}: the learner copy is not valid Python ({exc.msg}, line {exc.lineno}); "
            f"give the solution block a '{LEARNER_MARK}' part that runs, e.g. 'return None'"
        ) from None


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text).strip("\n")


def _check_stem(path: Path) -> str:
    if not _STEM_RE.match(path.stem):
        raise LessonError(f"{path.name}: lesson files are named NN_slug.ipynb "
                          "(two digits, lower-case words joined by '_')")
    return path.stem


def _read_json(path: Path) -> dict[str, Any]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LessonError(f"{path}: not valid notebook JSON ({exc})") from None
    if not isinstance(nb, dict) or nb.get("nbformat") != 4:
        raise LessonError(f"{path}: only nbformat 4 notebooks are supported")
    return nb


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)
