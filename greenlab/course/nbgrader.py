"""The course as an nbgrader course: assignments and autograded tests from the instructor copies.

    python -m greenlab.course.nbgrader --out COURSE_DIR             # every lesson
    python -m greenlab.course.nbgrader --out COURSE_DIR --only 03 06   # some lessons

writes ``COURSE_DIR/source/lessonNN/NN_slug.ipynb`` for each lesson and ``COURSE_DIR/nbgrader_config.py``.
From there the instructor uses nbgrader as usual (``nbgrader generate_assignment lessonNN``, release,
collect, ``nbgrader autograde lessonNN``, ``nbgrader generate_feedback lessonNN``).

How the course's own markers become nbgrader's:

* a code cell with a ``# BEGIN SOLUTION`` block becomes a *solution cell*; nbgrader's default
  delimiters find the block, and :class:`greenlab.course.nbgrader_preprocessor.LearnerParts` (named in the
  written config) then gives the released cell exactly the text of the course's learner copy (the
  ``# LEARNER:`` part, e.g. ``return None``), so a released notebook runs top to bottom as the
  learner copies do;
* every ``gl.check.NAME(...)`` call in an exercise cell becomes an *autograded test cell* after it,
  ``gl.check.NAME(...).assert_passed()``, worth :data:`EXERCISE_POINTS`; a failing check raises with
  its hint, which is what the learner's feedback shows;
* an exercise cell without a checker (a written answer) becomes a *manually graded* answer;
* the knowledge check ``gl.quiz("NN")`` is followed by a solution cell ``quiz_answers = [...]``
  (the correct option texts in the source, ``[None] * n`` when released) and one autograded test
  cell per question (``gl.check.quiz_answer(...)``), :data:`QUESTION_POINTS` each;
* instructor notes and ``instructor-only`` cells are left out, as in the learner copies.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from greenlab.course.notebook_format import (
    INSTRUCTOR_ONLY_TAG,
    SOLUTION_BEGIN,
    LessonError,
    _check_stem,
    _read_json,
    _source,
    dumps,
    instructor_notebooks,
    lessons_dir,
    normalise,
    strip_instructor_notes,
    strip_solutions,
)

EXERCISE_POINTS = 2
QUESTION_POINTS = 1
SCHEMA_VERSION = 3
_QUIZ_CALL = re.compile(r"""gl\.quiz\(\s*["'](\d{2})["']\s*\)""")

CONFIG_TEMPLATE = '''\
"""nbgrader configuration for the greenlab course (written by greenlab.course.nbgrader)."""
from nbgrader import preprocessors as pre

from greenlab.course.nbgrader_preprocessor import LearnerParts

c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_assignments = {assignments!r}
# The released cell is the course's learner copy of it (its "# LEARNER:" part), not nbgrader's stub.
c.GenerateAssignment.preprocessors = [
    pre.IncludeHeaderFooter, pre.InstantiateTests, pre.LockCells, pre.ClearSolutions, LearnerParts,
    pre.ClearOutput, pre.CheckCellMetadata, pre.ComputeChecksums, pre.SaveCells, pre.ClearHiddenTests,
    pre.ClearMarkScheme, pre.ComputeChecksums, pre.CheckCellMetadata,
]
# Lessons train real (small) models: a cell may take longer than nbgrader's 30 s default.
c.Execute.timeout = 600
'''


def assignment_name(stem: str) -> str:
    """The nbgrader assignment for lesson ``NN_slug``: ``lessonNN``."""
    return f"lesson{stem[:2]}"


def export(out: str | os.PathLike, only: list[str] | None = None,
           folder: str | os.PathLike | None = None) -> list[Path]:
    """Write the nbgrader course for the instructor copies (``only``: lesson numbers such as
    ``["03"]``) into ``out``; returns the notebooks written. The config is written last."""
    out = Path(out)
    paths = instructor_notebooks(lessons_dir(folder))
    if only is not None:
        wanted = {str(n).zfill(2) for n in only}
        unknown = wanted - {p.name[:2] for p in paths}
        if unknown:
            raise ValueError(f"no lesson numbered {', '.join(sorted(unknown))}; "
                             f"the lessons are {', '.join(p.name[:2] for p in paths)}")
        paths = [p for p in paths if p.name[:2] in wanted]
    if not paths:
        raise ValueError(f"no instructor notebooks found under {lessons_dir(folder) / 'instructor'}")
    written = []
    for path in paths:
        stem = _check_stem(path)
        target = out / "source" / assignment_name(stem) / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(dumps(nbgrader_notebook(_read_json(path), stem)), encoding="utf-8")
        written.append(target)
    assignments = [{"name": assignment_name(_check_stem(p))} for p in paths]
    (out / "nbgrader_config.py").write_text(
        CONFIG_TEMPLATE.format(root=str(out.resolve()), assignments=assignments), encoding="utf-8")
    return written


def nbgrader_notebook(instructor_nb: dict[str, Any], stem: str) -> dict[str, Any]:
    """The nbgrader source version of one instructor notebook (see the module docstring)."""
    nb = normalise(instructor_nb, stem)
    cells: list[dict[str, Any]] = []
    ids: set[str] = set()
    for index, cell in enumerate(nb["cells"]):
        if INSTRUCTOR_ONLY_TAG in cell["metadata"].get("tags", []):
            continue
        cell = copy.deepcopy(cell)
        text = _source(cell)
        where = f"{stem}.ipynb cell {index}"
        if cell["cell_type"] == "markdown":
            text = strip_instructor_notes(text, where)
            if not text.strip():
                continue
            cell["source"] = text
            cells.append(cell)
            continue
        if cell["cell_type"] != "code":
            cells.append(cell)
            continue
        if SOLUTION_BEGIN in text:
            cells.extend(_exercise_cells(cell, text, stem, where, ids))
        else:
            cells.append(cell)
            quiz = _QUIZ_CALL.search(text)
            if quiz:
                cells.extend(_quiz_cells(quiz.group(1), stem, ids))
    return {**nb, "cells": cells, "metadata": {**nb["metadata"], "greenlab": {"lesson": stem}}}


# --- cells ----------------------------------------------------------------------------------------


def _exercise_cells(cell: dict, text: str, stem: str, where: str, ids: set[str]) -> list[dict]:
    calls = checker_calls(text)
    name = calls[0][0] if calls else _first_defined_name(text) or "answer"
    grade_id = _unique(f"{stem[:2]}-{name}", ids)
    manual = not calls
    cell["metadata"] = {**cell["metadata"],
                        "nbgrader": _meta(grade_id, solution=True, grade=manual,
                                          points=EXERCISE_POINTS if manual else None),
                        "greenlab": {"learner_source": strip_solutions(text, where)}}
    out = [cell]
    for checker, call in calls:
        test_id = _unique(f"{stem[:2]}-{checker}-test", ids)
        out.append(_code(f"# Autograded: {checker} must pass its checker.\n{call}.assert_passed()",
                         _meta(test_id, grade=True, locked=True, points=EXERCISE_POINTS), test_id))
    return out


def _quiz_cells(lesson: str, stem: str, ids: set[str]) -> list[dict]:
    from greenlab.course.quiz import load

    questions = load(lesson).questions
    answers = [_correct_answer(q) for q in questions]
    solution = ("# Knowledge check, graded: one entry per question, in order: the text of the option you\n"
                "# choose (a list of texts for 'choose all that apply'), or a number.\n"
                "quiz_answers = [\n    # BEGIN SOLUTION\n"
                + "".join(f"    {a!r},\n" for a in answers)
                + f"    # LEARNER:\n    # *[None] * {len(questions)}\n    # END SOLUTION\n]")
    answer_id = _unique(f"{stem[:2]}-quiz-answers", ids)
    learner = strip_solutions(solution)
    out = [_code(solution, {**_meta(answer_id, solution=True)}, answer_id,
                 greenlab={"learner_source": learner})]
    for number in range(1, len(questions) + 1):
        test_id = _unique(f"{stem[:2]}-quiz-q{number}", ids)
        out.append(_code(f'gl.check.quiz_answer("{lesson}", quiz_answers, {number}).assert_passed()',
                         _meta(test_id, grade=True, locked=True, points=QUESTION_POINTS), test_id))
    return out


def checker_calls(source: str) -> list[tuple[str, str]]:
    """``(name, call text)`` for every ``gl.check.NAME(...)`` call in ``source``, in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None) if isinstance(node, ast.Call) else None
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and func.value.attr == "check" and isinstance(func.value.value, ast.Name)
                and func.value.value.id == "gl"):
            found.append((node.lineno, node.col_offset, func.attr, ast.get_source_segment(source, node)))
    return [(name, text) for _, _, name, text in sorted(found)]


def _correct_answer(question) -> Any:
    if question.kind == "numeric":
        return question.answer
    texts = [o.text for o in question.options if o.correct]
    return texts if question.kind == "multiple" else texts[0]


def _first_defined_name(source: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return node.name
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
    return None


def _meta(grade_id: str, solution: bool = False, grade: bool = False, locked: bool = False,
          points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution}
    if grade:
        meta["points"] = points
    return meta


def _code(source: str, nbgrader: dict, cell_id: str, **extra: Any) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cell_id,
            "metadata": {"nbgrader": nbgrader, **extra}, "outputs": [], "source": source}


def _unique(grade_id: str, ids: set[str]) -> str:
    base, n = grade_id, 2
    while grade_id in ids:
        grade_id, n = f"{base}-{n}", n + 1
    ids.add(grade_id)
    return grade_id


def points(nb: dict[str, Any]) -> dict[str, int]:
    """Points per autograded or manually graded cell of an exported notebook, by grade id."""
    out = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            out[meta["grade_id"]] = meta["points"]
    return out


def load(path: str | os.PathLike) -> dict[str, Any]:
    """An exported (or released, or graded) notebook as a dict."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    """``python -m greenlab.course.nbgrader --out DIR [--only NN ...]``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m greenlab.course.nbgrader",
                                     description="Write an nbgrader course (source/ and nbgrader_config.py) "
                                                 "from the instructor copies.")
    parser.add_argument("--out", required=True, help="the nbgrader course folder to write")
    parser.add_argument("--only", nargs="+", default=None, metavar="NN", help="lesson numbers (default: every lesson)")
    parser.add_argument("--lessons", default=None, help="lessons folder (default: lessons/ beside the package)")
    args = parser.parse_args(argv)
    try:
        written = export(args.out, only=args.only, folder=args.lessons)
    except (LessonError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} assignment(s) and {Path(args.out) / 'nbgrader_config.py'}; next, in {args.out}: "
          'nbgrader generate_assignment "lesson*"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
