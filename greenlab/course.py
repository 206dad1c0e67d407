"""Instructor and learner notebooks from one source of truth.

The instructor copy ``lessons/instructor/NN_slug.ipynb`` holds the worked
solutions; the learner copy ``lessons/NN_slug.ipynb`` is generated from it::

    python -m greenlab.course build            # normalise instructor copies, write learner copies
    python -m greenlab.course check            # exit 1 with a summary when anything is out of sync
    python -m greenlab.course new 03 gradient_accumulation "Gradient accumulation"

Markers in the instructor copy:

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
``nbval-check-output``), in both copies, so run those cells and save before
building; ``check`` reports a checked cell with no stored output. Execution
counts are cleared (a checked cell gets its position among code cells, since
nbval skips cells without a count), cell ids are ``<stem>-<index>`` and notebook
metadata is reduced to the kernelspec, so a build is reproducible byte for byte. Lessons can also be written from Python
with :func:`notebook`, :func:`md` and :func:`code`.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

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


# --- authoring helpers ------------------------------------------------------------------------


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


def notebook(cells: Iterable[dict[str, Any]], path: str | os.PathLike | None = None, stem: str | None = None) -> dict[str, Any]:
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


# --- the transformation -----------------------------------------------------------------------


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


# --- build, check, new ------------------------------------------------------------------------


def lessons_dir(folder: str | os.PathLike | None = None) -> Path:
    """The lessons folder: ``folder``, else ``greenlab.config.lessons_dir()``
    (``$GREENLAB_LESSONS_DIR``, else ``lessons/`` beside the package)."""
    if folder is not None:
        return Path(folder)
    from greenlab.config import lessons_dir as configured_lessons_dir

    return configured_lessons_dir()


def instructor_notebooks(folder: str | os.PathLike | None = None) -> list[Path]:
    """The instructor copies ``<lessons>/instructor/NN_slug.ipynb``, sorted."""
    inst = lessons_dir(folder) / "instructor"
    return sorted(inst.glob("*.ipynb")) if inst.is_dir() else []


def expected_files(folder: str | os.PathLike | None = None) -> dict[Path, str]:
    """Every file the build should produce (instructor and learner copies) mapped to its text."""
    root = lessons_dir(folder)
    files: dict[Path, str] = {}
    for path in instructor_notebooks(root):
        stem = _check_stem(path)
        raw = _read_json(path)
        files[path] = dumps(normalise(raw, stem))
        files[root / path.name] = dumps(learner_notebook(raw, stem))
    return files


def build(folder: str | os.PathLike | None = None) -> list[Path]:
    """Normalise every instructor copy and (re)write its learner copy; returns the files that changed."""
    changed = []
    for path, text in expected_files(folder).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def check(folder: str | os.PathLike | None = None) -> list[str]:
    """Problems that keep the lessons out of sync (empty when all is well).

    Covers stale or missing learner copies, instructor copies that are not
    normalised, learner notebooks without an instructor source, and broken markers.
    """
    root = lessons_dir(folder)
    problems: list[str] = []
    try:
        expected = expected_files(root)
    except LessonError as exc:
        return [str(exc)]
    for path, text in expected.items():
        rel = _rel(path, root)
        if not path.exists():
            problems.append(f"{rel}: missing (it is generated from the instructor copy)")
            continue
        actual = path.read_text(encoding="utf-8")
        if actual != text:
            problems.append(f"{rel}: out of sync\n" + _diff_summary(actual, text))
    for path in instructor_notebooks(root):
        for index, cell in enumerate(json.loads(expected[path])["cells"]):
            if cell["cell_type"] == "code" and _checks_output(cell) and not cell["outputs"]:
                problems.append(
                    f"{_rel(path, root)}: cell {index} ({cell['id']}) is marked {CHECK_OUTPUT_MARK} "
                    "but has no stored output, so nbval would not compare it; run it, save, then build"
                )
    sources = {p.name for p in instructor_notebooks(root)}
    for path in sorted(root.glob("*.ipynb")) if root.is_dir() else []:
        if path.name not in sources:
            problems.append(f"{_rel(path, root)}: learner notebook without an instructor copy in instructor/{path.name}")
    return problems


def new_lesson(number: int | str, slug: str, title: str, folder: str | os.PathLike | None = None) -> Path:
    """Scaffold ``instructor/NN_slug.ipynb`` in the course's lesson shape and build its learner copy."""
    try:
        stem = f"{int(number):02d}_{slug}"
    except ValueError:
        raise ValueError(f"lesson number must be a whole number 0-99, got {number!r}") from None
    if not _STEM_RE.match(stem):
        raise ValueError(
            f"lesson number must be 0-99 and slug lower-case words joined by '_' (e.g. mixed_precision), got {number!r} {slug!r}"
        )
    if not title.strip():
        raise ValueError("the lesson title must not be empty")
    root = lessons_dir(folder)
    path = root / "instructor" / f"{stem}.ipynb"
    if path.exists():
        raise FileExistsError(f"{path} already exists; edit it instead")
    notebook(_scaffold_cells(slug, title, int(number)), path)
    build(root)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m greenlab.course build|check|new``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m greenlab.course", description="Build and check the lesson notebooks.")
    parser.add_argument("--lessons", default=None, help="lessons folder (default: lessons/ beside the package)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="normalise instructor copies and write learner copies")
    sub.add_parser("check", help="exit 1 if any learner copy or instructor copy is out of sync")
    new = sub.add_parser("new", help="scaffold a new lesson")
    new.add_argument("number", help="two-digit lesson number, e.g. 03")
    new.add_argument("slug", help="lower-case words joined by '_', e.g. gradient_accumulation")
    new.add_argument("title", help="the lesson title")
    args = parser.parse_args(argv)
    root = lessons_dir(args.lessons)
    try:
        if args.command == "build":
            changed = build(root)
            for path in changed:
                print(f"wrote {_rel(path, root)}")
            print(f"{len(instructor_notebooks(root))} lesson(s) built, {len(changed)} file(s) changed.")
            return 0
        if args.command == "check":
            problems = check(root)
            if problems:
                print("\n".join(problems))
                print(f"\n{len(problems)} problem(s). Run `python -m greenlab.course build` after editing lessons/instructor/.")
                return 1
            print(f"{len(instructor_notebooks(root))} lesson(s) in sync.")
            return 0
        path = new_lesson(args.number, args.slug, args.title, root)
        print(f"created {_rel(path, root)} and its learner copy")
        return 0
    except (LessonError, ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


# --- helpers ----------------------------------------------------------------------------------


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
        raise LessonError(f"{path.name}: lesson files are named NN_slug.ipynb (two digits, lower-case words joined by '_')")
    return path.stem


def _read_json(path: Path) -> dict[str, Any]:
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LessonError(f"{path.name}: not valid notebook JSON ({exc})") from None
    if not isinstance(nb, dict) or nb.get("nbformat") != 4:
        raise LessonError(f"{path.name}: only nbformat 4 notebooks are supported")
    return nb


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def _diff_summary(actual_text: str, expected_text: str, max_cells: int = 5, max_lines: int = 12) -> str:
    """A short, readable account of how a file on disk differs from what the build would write."""
    try:
        actual = json.loads(actual_text)
        actual_cells = actual.get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return "    the file on disk is not valid notebook JSON"
    expected = json.loads(expected_text)
    lines = []
    if actual.get("metadata") != expected["metadata"] or actual.get("nbformat_minor") != expected["nbformat_minor"]:
        lines.append("    notebook metadata differs (only kernelspec and language_info are kept)")
    exp_cells = expected["cells"]
    if len(actual_cells) != len(exp_cells):
        lines.append(f"    {len(actual_cells)} cells on disk, {len(exp_cells)} expected")
    shown_diff = False
    reported = 0
    for index in range(max(len(actual_cells), len(exp_cells))):
        if reported == max_cells:
            lines.append("    ... (more cells differ)")
            break
        a = actual_cells[index] if index < len(actual_cells) else None
        e = exp_cells[index] if index < len(exp_cells) else None
        if a == e:
            continue
        reported += 1
        if a is None or e is None:
            lines.append(f"    cell {index}: {'missing on disk' if a is None else 'extra on disk'}")
            continue
        reasons = [key for key in ("cell_type", "id", "metadata", "source", "outputs", "execution_count", "attachments")
                   if a.get(key) != e.get(key)]
        lines.append(f"    cell {index} ({e.get('id')}): {', '.join(reasons) or 'layout'} differ(s)")
        if "source" in reasons and not shown_diff:
            shown_diff = True
            diff = list(difflib.unified_diff(
                _joined(a.get("source", "")).splitlines(), _joined(e.get("source", "")).splitlines(),
                "on disk", "expected", lineterm="", n=1,
            ))
            lines += ["      " + d for d in diff[:max_lines]]
            if len(diff) > max_lines:
                lines.append("      ...")
    return "\n".join(lines) if lines else "    formatting differs (run build to rewrite it)"


def _scaffold_cells(slug: str, title: str, number: int) -> list[dict[str, Any]]:
    """The cells of a new lesson, in the shape every lesson follows."""
    return [
        md(f"""
            # {number:02d} · {title}

            **Goals.** By the end of this lesson you can: (1) ...; (2) ...; (3) ...

            **Time.** About 45 minutes in class; quick mode (`GREENLAB_QUICK=1`) runs in a few minutes on a CPU.

            <!-- BEGIN INSTRUCTOR -->
            **Instructor notes.** Timing per section, common questions, what to demo live.
            <!-- END INSTRUCTOR -->
        """),
        code("""
            import greenlab as gl

            settings = gl.setup()
        """),
        md("""
            ## Why it matters

            The cost and benefit of this technique in time, money, energy and carbon: what it saves,
            what it can cost (accuracy, complexity), and when it is not worth it.
        """),
        md("""
            ## A measured baseline

            Measure the unchanged training run first, so every later change is compared with it.
        """),
        code("""
            # Train the baseline here with gl.train(...) inside gl.measure(...), and keep the result.
        """),
        md("""
            ## One change at a time

            Each change gets its own measured run and is compared with the baseline.
        """),
        code("""
            # Make one change (one TrainConfig field), measure it, and compare with gl.compare(...).
        """),
        md("""
            ## What it means on a real GPU

            Runs recorded on a named GPU (or a plain statement that none has been recorded yet).
        """),
        code(f"""
            gl.reference.show("{slug}")
        """),
        md("""
            ## Exercise 1

            Describe the task, its inputs with units, and what the function should return.
        """),
        code("""
            def exercise_1(x):
                # BEGIN SOLUTION
                return x
                # LEARNER:
                # return None  # replace with your answer
                # END SOLUTION
        """),
        code("""
            gl.check.check_function(exercise_1, cases=[((1.0,), 1.0), ((2.5,), 2.5)])
        """),
        md("""
            ## Explain it to a non-technical stakeholder

            A short summary generated from your own measured numbers (for example
            `comparison.stakeholder_summary()`).
        """),
        code("""
            # Print the stakeholder summary of your comparison here.
        """),
        md("""
            ## Knowledge check

            A few questions with feedback on every option (gl.quiz).
        """),
        code("""
            # Show the knowledge-check questions here.
        """),
        md("""
            ## Summary

            - What we measured, and on which hardware.
            - What changed, by how much, and at what cost.
        """),
        md("""
            ## References

            - Sources for every figure that is not measured in this notebook (author, title, year).
        """),
    ]


if __name__ == "__main__":
    sys.exit(main())
