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
* the exercise cell is cut before its first ``gl.check`` statement: the solution cell holds only the
  learner's definitions, and what checks and uses them (``check.pick(...)``) follows in a cell of
  its own that first gives every name the solution cell should define a ``None`` default, so a
  solution cell that does not run (a syntax error) costs only its own exercise: the checker says
  "not attempted" and the lesson goes on with the library's implementation;
* every ``gl.check.NAME(...)`` call in an exercise cell becomes an *autograded test cell* after it,
  worth :data:`EXERCISE_POINTS`. Its visible line runs the learner's check; its grading is an nbgrader
  *hidden test* (removed from the release, and from the feedback) that loads
  :mod:`greenlab.course.grading` from its file under a fresh name and checks the answer with a fresh
  copy of the checker, on cases drawn at grade time: a solution cell that rebinds ``gl.check.NAME``
  or the library's reference cannot reach it, and an answer fitted to the visible cases fails the
  drawn ones. Their seed is written into the hidden test, in memory, just before the kernel starts
  (:class:`greenlab.course.nbgrader_preprocessor.SeededExecute`), derived from the course's grading
  secret and the submission (:func:`greenlab.course.grading.submission_seed`), and taken out again
  after the run: no file, no environment variable and no cell the learner's code can read before
  the tests holds the seed or the secret. The secret is written once by the export, outside the
  course folder (:func:`secret_path`), and never released. A failing check raises with its hint,
  which is what the learner's feedback shows;
* an exercise cell without a checker (a written answer) becomes a *manually graded* answer, and
  so does the stakeholder statement, whose checker finds its elements but cannot know it true: its
  rubric (:data:`greenlab.course.checks.statement.RUBRIC`) follows it;
* the knowledge check ``gl.quiz("NN")`` shows its options in an order fixed for the exported course
  (``gl.quiz("NN", seed=...)``), so the order a learner answered is the order graded. Its key ships
  with the package (``gl.quiz(..., show_answers=True)`` prints it), so by default the quiz is left
  ungraded; ``quiz_points=N`` (``--quiz-points N``) adds a solution cell ``quiz_answers = [...]``
  (letters as shown, an index, or an option's text) and one hidden test per question, worth N, that
  compares a salted hash of the chosen options with the instructor's (the key itself is in no test);
* instructor notes and ``instructor-only`` cells are left out, as in the learner copies;
* the written config turns grading mode on (``GREENLAB_GRADING=1``: quick sizes, offline, a leaderboard
  and results log of the course's own) and autogrades only the cells a grade needs
  (:class:`greenlab.course.nbgrader_preprocessor.SkipExperiments`): the learner's answers, the tests and
  what they read; the lesson's experiments are left out, and the cell under a hand-graded answer
  shows, as text, the learner's own run of it as the submission saved it.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any

from greenlab.base.paths import output_folder
from greenlab.course import quiz as course_quiz
from greenlab.course.grading import answers_digest, option_digest, submission_seed
from greenlab.course.notebook_format import (
    INSTRUCTOR_ONLY_TAG, SOLUTION_BEGIN, LessonError, _check_stem, _read_json, _source, dumps, instructor_notebooks,
    lessons_dir, normalise, strip_instructor_notes, strip_solutions)

EXERCISE_POINTS = 2
# The most points one knowledge-check question may carry (a limit the library sets): fifty exercises' worth;
# more would let the quiz, whose key ships with the package, outweigh every exercise of a course.
MAX_QUIZ_POINTS = 50 * EXERCISE_POINTS
QUESTION_POINTS = 1
SCHEMA_VERSION = 3
COURSE_ID = "greenlab"
MANUAL_CHECKER = "stakeholder_statement"  # graded by hand with checks.statement.RUBRIC
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"
_QUIZ_CALL = re.compile(r"""gl\.quiz\(\s*["'](\d{2})["']\s*\)""")
# A hidden test's first lines: greenlab.course.grading loaded from its file under a fresh name, so
# nothing a learner's cell rebound in the kernel's modules is used to grade.
_LOADER = ("import importlib.machinery as _ma, importlib.util as _iu, pathlib as _pl, secrets as _se\n"
           "_found = _ma.PathFinder.find_spec('greenlab') or _iu.find_spec('greenlab')\n"
           "_spec = _iu.spec_from_file_location('_grading_' + _se.token_hex(8),\n"
           "                                    _pl.Path(_found.origin).parent / 'course' / 'grading.py')\n"
           "_grading = _iu.module_from_spec(_spec)\n"
           "_spec.loader.exec_module(_grading)\n")
# The line of a hidden test that the grader rewrites with the submission's seed while the kernel
# runs (SeededExecute), and rewrites back after: outside an autograde the cases are drawn at random.
SEED_LINE = "_seed = None  # this submission's seed: written in by the grader while it runs the tests\n"
SEED_PATTERN = re.compile(r"^_seed = (?:None|\d+)  # this submission's seed: written in by the grader while it runs "
                          r"the tests$", re.MULTILINE)
SECRETS_VARIABLE = "GREENLAB_GRADING_SECRETS"  # the folder of grading secrets (default ~/.greenlab/grading-secrets)

CONFIG_TEMPLATE = '''\
"""nbgrader configuration for the greenlab course (written by greenlab.course.nbgrader)."""
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader import preprocessors as pre

from nbgrader.converters import Autograde

from greenlab.course.nbgrader_preprocessor import (
    ClearOutputKeepingRuns, HideHiddenTests, LearnerParts, SeededExecute, SkipExperiments)

c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))  # the course goes where this file goes
# An exchange folder beside the course by default (nbgrader's /srv/nbgrader/exchange needs root);
# a JupyterHub sets its own.
c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")
# The released cell is the course's learner copy of it (its "# LEARNER:" part), not nbgrader's stub.
c.GenerateAssignment.preprocessors = [
    pre.IncludeHeaderFooter, pre.InstantiateTests, pre.LockCells, pre.ClearSolutions, LearnerParts,
    pre.ClearOutput, pre.CheckCellMetadata, pre.ComputeChecksums, pre.SaveCells, pre.ClearHiddenTests,
    pre.ClearMarkScheme, pre.ComputeChecksums, pre.CheckCellMetadata,
]
# Grading mode runs only the cells a grade needs (the lesson's other experiments are left out); the
# cell under a hand-graded statement shows the learner's own run, as the submission saved it.
c.Autograde.sanitize_preprocessors = [ClearOutputKeepingRuns, pre.DeduplicateIds, pre.OverwriteKernelspec, pre.OverwriteCells,
                                      SkipExperiments, pre.CheckCellMetadata]
# The hidden tests get each submission's seed (from the course's grading secret, which stays in this
# process: the learner's kernel never sees it) just before they run, and lose it after.
c.Autograde.autograde_preprocessors = [SeededExecute if p is pre.Execute else p
                                       for p in Autograde.class_traits()["autograde_preprocessors"].default()]
c.SeededExecute.course_root = c.CourseDirectory.root
# Feedback shows each hidden test's verdict, not its code.
c.GenerateFeedback.preprocessors = [pre.GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
# Lessons train real (small) models: a cell may take longer than nbgrader's 30 s default.
c.Execute.timeout = 600
# Grading mode: the lessons run at the smallest size, offline, and whatever a lesson would add to a
# class leaderboard or the results log goes to a folder of the course's own (nbgrader's kernels
# inherit this environment).
os.environ.setdefault("GREENLAB_GRADING", "1")
os.environ.setdefault("GREENLAB_DOWNLOAD", "0")
os.environ.setdefault("GREENLAB_PROGRESS", "0")
os.environ["GREENLAB_LEADERBOARD_DIR"] = os.path.join(c.CourseDirectory.root, ".grading", "leaderboard")
os.environ["GREENLAB_RESULTS_DIR"] = os.path.join(c.CourseDirectory.root, ".grading", "results")
'''


def assignment_name(stem: str) -> str:
    """The nbgrader assignment for lesson ``NN_slug``: ``lessonNN``."""
    return f"lesson{stem[:2]}"


def export(out: str | os.PathLike, only: list[str] | None = None,
           folder: str | os.PathLike | None = None, quiz_points: int = 0,
           seed: int | None = None) -> list[Path]:
    """Write the nbgrader course for the instructor copies (``only``: lesson numbers such as
    ``["02"]``) into ``out``; returns the notebooks written. The config is written last.
    ``quiz_points`` per knowledge-check question (0: the quiz is left ungraded, its key being
    public); ``seed`` fixes the quiz order and the salt of its hashed key (default: drawn now)."""
    if isinstance(quiz_points, bool) or not isinstance(quiz_points, int) or not 0 <= quiz_points <= MAX_QUIZ_POINTS:
        raise ValueError(f"quiz_points must be a whole number in [0, {MAX_QUIZ_POINTS}] (points per knowledge-check "
                         f"question; an exercise is worth {EXERCISE_POINTS}), got {quiz_points!r}")
    seed = secrets.randbits(31) if seed is None else int(seed)
    out = output_folder("out", out)
    paths = instructor_notebooks(lessons_dir(folder))
    if only is not None:
        odd = [n for n in only if not re.fullmatch(r"\d{1,2}", str(n))]
        if odd:
            raise ValueError(f"only must list lesson numbers such as 03 (or 3), got {', '.join(map(repr, odd))}")
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
        nb = nbgrader_notebook(_read_json(path), stem, quiz_points=quiz_points, seed=seed)
        target.write_text(dumps(nb), encoding="utf-8")
        written.append(target)
    course_secret(out, create=True)  # kept across exports: grading again draws the same cases
    (out / "nbgrader_config.py").write_text(
        CONFIG_TEMPLATE.format(course_id=COURSE_ID), encoding="utf-8")
    return written


# --- the grading secret --------------------------------------------------------------------------
#
# The learner's code runs at grade time in a kernel that nbgrader starts as the grading user, with
# the course folder as its neighbourhood: whatever lies under the course, in the kernel's
# environment or in the notebook on disk, that code can read before the hidden tests run. So the
# secret lies outside the course, in a folder of the grading user's own (one file per course, named
# by the course's key, which is public), readable by that user only; it is read by the grader's own
# process, never by the kernel, and the tests get only the seeds derived from it.


def secrets_folder() -> Path:
    """The folder of grading secrets: ``$GREENLAB_GRADING_SECRETS``, else ``~/.greenlab/grading-secrets``."""
    configured = os.environ.get(SECRETS_VARIABLE, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".greenlab" / "grading-secrets"


def course_key(course: str | os.PathLike, create: bool = False) -> str | None:
    """The course's key (``.grading/course_key``, public: it names the secret's file, it is not
    the secret), made when ``create``; None when it has none."""
    path = Path(course) / ".grading" / "course_key"
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    if not create:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    key = f"{COURSE_ID}-{secrets.token_hex(8)}"
    path.write_text(key + "\n", encoding="utf-8")
    return key


def secret_path(course: str | os.PathLike) -> Path | None:
    """Where the grading secret of ``course`` lies (outside it), or None before its first export."""
    key = course_key(course)
    return None if key is None else secrets_folder() / f"{key}.secret"


def course_secret(course: str | os.PathLike, create: bool = False) -> str:
    """The grading secret of the nbgrader course in ``course``: read from :func:`secret_path`, made
    there (readable by its owner only) when ``create``. An older export's ``.grading/secret``,
    inside the course where the learner's code could read it, is moved out first (the same secret,
    so the same cases). Raises ``FileNotFoundError`` when there is none and ``create`` is false."""
    course = Path(course)
    legacy = course / ".grading" / "secret"
    key = course_key(course, create=create or legacy.is_file())
    path = None if key is None else secrets_folder() / f"{key}.secret"
    if path is not None and legacy.is_file() and not path.exists():
        _write_private(path, legacy.read_text(encoding="utf-8").strip())
    if path is not None and legacy.is_file() and path.exists():
        legacy.unlink()
    if path is None or not path.is_file():
        if not create:
            raise FileNotFoundError(f"no grading secret for the course in {course} (looked for "
                                    f"{path or course / '.grading' / 'course_key'}): export the course first, "
                                    f"or copy the secret file there from where the course was exported")
        _write_private(path, secrets.token_hex(16))
    secret = path.read_text(encoding="utf-8").strip()
    if not secret:
        raise ValueError(f"the grading secret in {path} is empty")
    return secret


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text + "\n")


def hidden_test_seeds(nb: Any, secret: str, *, assignment: str, notebook: str, student: str) -> dict[int, int]:
    """{cell index: seed} for every hidden test of ``nb`` (an nbformat notebook or a dict) that
    takes a seed (holds :data:`SEED_LINE`), from :func:`greenlab.course.grading.submission_seed`
    over the submission's solution cells."""
    cells = nb["cells"]
    solutions = [(c["metadata"]["nbgrader"].get("grade_id", ""), _source(c)) for c in cells
                 if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    answers = answers_digest(solutions)
    seeds = {}
    for index, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and SEED_PATTERN.search(_source(cell)):
            seeds[index] = submission_seed(secret, assignment=assignment, notebook=notebook, student=student,
                                           test=meta.get("grade_id", str(index)), answers=answers)
    return seeds


def with_seed(source: str, seed: int | None) -> str:
    """A hidden test's source with its seed line set to ``seed`` (None: back to :data:`SEED_LINE`)."""
    line = SEED_LINE.rstrip("\n") if seed is None else SEED_LINE.rstrip("\n").replace("None", str(int(seed)), 1)
    return SEED_PATTERN.sub(line, source)


def nbgrader_notebook(instructor_nb: dict[str, Any], stem: str, quiz_points: int = 0,
                     seed: int = 0) -> dict[str, Any]:
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
            quiz = _QUIZ_CALL.search(text)
            if quiz:  # the order shown is the order graded: fixed for the course
                cell["source"] = _QUIZ_CALL.sub(lambda m: f'gl.quiz("{m.group(1)}", seed={seed})', text)
            cells.append(cell)
            if quiz and quiz_points:
                cells.extend(_quiz_cells(quiz.group(1), stem, ids, quiz_points, seed))
    return {**nb, "cells": cells, "metadata": {**nb["metadata"], "greenlab": {"lesson": stem}}}


# --- cells ----------------------------------------------------------------------------------------


def _exercise_cells(cell: dict, text: str, stem: str, where: str, ids: set[str]) -> list[dict]:
    # the checkers load PyTorch, which nbgrader's grading process (it imports this module for its
    # preprocessors) does not need
    from greenlab.course.checks.statement import RUBRIC  # lazy: loads PyTorch, see above

    calls = checker_calls(text)
    name = calls[0][0] if calls else _first_defined_name(text) or "answer"
    grade_id = _unique(f"{stem[:2]}-{name}", ids)
    statement = bool(calls) and all(c == MANUAL_CHECKER for c, _ in calls)
    manual = not calls or statement
    points = sum(p for _, p, _ in RUBRIC) if statement else EXERCISE_POINTS
    answer, follow = split_exercise(text) if calls else (text, "")
    cell["source"] = answer
    cell["metadata"] = {**cell["metadata"],
                        "nbgrader": _meta(grade_id, solution=True, grade=manual, points=points if manual else None),
                        "greenlab": {"learner_source": strip_solutions(answer, where)}}
    out = [cell]
    if follow:
        out.append(_code(follow, {}, _unique(f"{stem[:2]}-{name}-use", ids)))
        del out[-1]["metadata"]["nbgrader"]
    if statement:  # its keywords prove nothing: marked by hand, by the rubric
        rows = "".join(f"| {what} | {p} | {text} |\n" for what, p, text in RUBRIC)
        rubric = ("**How this statement is marked** (by hand; the instant check above finds its elements and is "
                  "feedback only):\n\n| element | points | full marks when |\n| --- | --- | --- |\n" + rows
                  + "\nGrading does not run the lesson's experiments again (new measurements, at the smallest size, would "
                  "not be the run the learner wrote about): the cell below shows, as text, what it showed when the "
                  "learner ran the notebook before submitting, their statement and the instant check against their "
                  "run's figures. Mark the figures against that run; a submission that saved no run says so there.\n")
        out.append({"cell_type": "markdown", "id": _unique(f"{stem[:2]}-{name}-rubric", ids),
                    "metadata": {}, "source": rubric})
        return out
    for checker, call, args in checker_call_args(text):
        test_id = _unique(f"{stem[:2]}-{checker}-test", ids)
        source = (f"# Graded at grade time by a fresh copy of the {checker} checker, on cases drawn then.\n"
                  f"{call}\n{HIDDEN_BEGIN}\n{SEED_LINE}{_LOADER}"
                  f"_grading.grade({checker!r}{', ' + args if args else ''}, seed=_seed)\n{HIDDEN_END}")
        out.append(_code(source, _meta(test_id, grade=True, locked=True, points=EXERCISE_POINTS), test_id))
    return out


def split_exercise(text: str) -> tuple[str, str]:
    """An exercise cell cut before its first top-level statement that calls ``gl.check``: the
    learner's part, and the rest, which starts by giving each name the learner's part defines a
    ``None`` default (``globals().setdefault``), so it runs when the learner's part did not."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, ""
    cut = next((node for node in tree.body if checker_calls(ast.get_source_segment(text, node) or "")), None)
    if cut is None or cut is tree.body[0]:
        return text, ""
    lines = text.splitlines(keepends=True)
    answer, rest = "".join(lines[:cut.lineno - 1]).rstrip() + "\n", "".join(lines[cut.lineno - 1:])
    names = []
    for node in tree.body[:tree.body.index(cut)]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    defaults = "".join(f"globals().setdefault({n!r}, None)\n" for n in dict.fromkeys(names))
    note = "# None stands for a name the exercise cell above did not define (it did not run).\n" if names else ""
    return answer.rstrip("\n"), note + defaults + rest


def checker_call_args(source: str) -> list[tuple[str, str, str]]:
    """``(name, call text, arguments text)`` for every ``gl.check.NAME(...)`` call in ``source``."""
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
            parts = [ast.get_source_segment(source, a) for a in node.args]
            parts += [f"{k.arg}={ast.get_source_segment(source, k.value)}" if k.arg
                      else f"**{ast.get_source_segment(source, k.value)}" for k in node.keywords]
            found.append((node.lineno, node.col_offset, func.attr, ast.get_source_segment(source, node),
                          ", ".join(parts)))
    return [(name, text, args) for _, _, name, text, args in sorted(found)]


def _quiz_cells(lesson: str, stem: str, ids: set[str], points: int, seed: int) -> list[dict]:
    shown = course_quiz.shuffled(course_quiz.load(lesson), seed=seed)
    answers = [_shown_answer(q) for q in shown.questions]
    solution = ("# Knowledge check, graded: one entry per question, in order: the letter of the option you\n"
                "# choose as shown above ('a', 'b', ...; or its index, a = 0, or its text), a list of them for\n"
                "# 'choose all that apply', or a number.\n"
                "quiz_answers = [\n    # BEGIN SOLUTION\n"
                + "".join(f"    {a!r},\n" for a in answers)
                + f"    # LEARNER:\n    # *[None] * {len(shown.questions)}\n    # END SOLUTION\n]")
    answer_id = _unique(f"{stem[:2]}-quiz-answers", ids)
    learner = strip_solutions(solution)
    out = [_code(solution, {**_meta(answer_id, solution=True)}, answer_id,
                 greenlab={"learner_source": learner})]
    salt = f"{COURSE_ID}:{seed}:{lesson}"
    for number, question in enumerate(shown.questions, start=1):
        test_id = _unique(f"{stem[:2]}-quiz-q{number}", ids)
        key = ({"answer": question.answer, "tolerance": question.tolerance} if question.kind == "numeric"
               else {"digest": option_digest(salt, [o.text for o in question.options if o.correct])})
        # the key's line stays out of a failing test's traceback (it shows the failing line and 4 before)
        source = (f"# Question {number}, graded at grade time.\n{HIDDEN_BEGIN}\n"
                  f"_key = {dict(seed=seed, salt=salt, **key)!r}\n{_LOADER}"
                  f"_right, _text = _grading.quiz_verdict({lesson!r}, quiz_answers, {number}, **_key)\n"
                  f"print(_text)\nassert _right, _text\n{HIDDEN_END}")
        out.append(_code(source, _meta(test_id, grade=True, locked=True, points=points), test_id))
    return out


def _shown_answer(question) -> Any:
    """The instructor's answer to ``question`` as shown: the letter(s) of its correct option(s),
    or the number."""
    if question.kind == "numeric":
        return question.answer
    letters = ["abcdefghijklmnopqrstuvwxyz"[j] for j in question.correct_indices]
    return letters if question.kind == "multiple" else letters[0]


def checker_calls(source: str) -> list[tuple[str, str]]:
    """``(name, call text)`` for every ``gl.check.NAME(...)`` call in ``source``, in order."""
    return [(name, text) for name, text, _ in checker_call_args(source)]


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
    parser.add_argument("--quiz-points", type=int, default=0, metavar="N",
                        help="points per knowledge-check question (default 0: ungraded, since the package "
                             "ships the quiz key)")
    args = parser.parse_args(argv)
    try:
        output_folder("--out", args.out)
        written = export(args.out, only=args.only, folder=args.lessons, quiz_points=args.quiz_points)
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
