"""Instructor and learner notebooks from one source of truth.

The instructor copy ``lessons/instructor/NN_slug.ipynb`` holds the worked
solutions; the learner copy ``lessons/NN_slug.ipynb`` is generated from it::

    python -m greenlab.course build            # normalise instructor copies, write learner copies
    python -m greenlab.course check            # exit 1 with a summary when anything is out of sync
    python -m greenlab.course new 03 gradient_accumulation "Gradient accumulation"
    python -m greenlab.course run lessons/instructor/03_gradient_accumulation.ipynb   # headless
    python -m greenlab.course.nbgrader --out COURSE_DIR   # an nbgrader course from the instructor copies

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

``run`` executes a lesson's code cells in order in one plain Python namespace, without Jupyter,
a kernel or ipywidgets (widgets fall back to text, figures go to matplotlib's Agg backend), as
the GPU suite does on a bare GPU machine. IPython magics run through IPython when it is
installed; without it, ``%line`` magics and ``!shell`` lines are skipped, ``%%energy`` runs its body
in one ``greenlab.measure`` window (kept as ``_energy``) and another ``%%cell`` magic's body runs as
plain Python, each with a note. A failing cell stops the run with the lesson and
cell number (:class:`LessonRunError`).
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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from greenlab.course.claims_equivalence import notebook_equivalence_problems
from greenlab.course.claims_paths import notebook_path_problems

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
    """The lessons folder: ``folder``, else ``greenlab.base.paths.lessons_dir()``
    (``$GREENLAB_LESSONS_DIR``, else ``lessons/`` beside the package)."""
    if folder is not None:
        return Path(folder)
    from greenlab.base.paths import lessons_dir as configured_lessons_dir

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
            problems.append(f"{_rel(path, root)}: learner notebook without an instructor copy in "
                            f"instructor/{path.name}")
    return problems


# --- claims a lesson's text must not make --------------------------------------------------------

# "test accuracy" (or "test acc") as learners read it
_TEST_ACC_RE = re.compile(r"\btest[- ]acc(?:uracy)?\b", re.IGNORECASE)
# expressions that hold a validation figure: gl.train's history and targets read the validation split
_VALIDATION_EXPR_RE = re.compile(
    r"\bval(?:_\w+|idation\w*)?\b|\btarget\w*\b|\w*_to_target\b|\bbest_accuracy\b|\bhistory\b")
# expressions that hold a test-split figure
_TEST_EXPR_RE = re.compile(r"\bfinal_accuracy\b|\btest_\w+|\bx_test\b|\.test\b")
# prose that ties "test accuracy" to a target or a stopping rule within one clause
_TEST_TARGET_TEXT_RE = re.compile(
    r"\b(?:reach\w*|stop\w*|target\w*|early[- ]stopping)\b[^.;:!?\n]{0,60}\btest[- ]acc(?:uracy)?\b"
    r"|\btest[- ]acc(?:uracy)?\b[^.;:!?\n]{0,25}\btarget\w*\b", re.IGNORECASE)
_LABEL_CALLS = {"set_ylabel", "set_xlabel", "ylabel", "xlabel", "set_title", "title", "suptitle"}
_PLOT_CALLS = {"plot", "bar", "barh", "scatter", "errorbar", "step", "fill_between", "axhline", "hlines"}
# a break-even or a saving stated as a finding
_SAVING_TEXT_RE = re.compile(
    r"\bbreak[- ]?even\b|\bpays? (?:for )?(?:it|them)sel(?:f|ves)\b|\bpays? off\b|\bpays? after\b"
    r"|\bsaves\b|\bsaved \{|\bsavings? (?:of|is|was)\b", re.IGNORECASE)
# a saving of something counted, not measured (bytes, FLOPs, parameters): no verdict needed
_COUNTED_TEXT_RE = re.compile(r"\b(?:bytes?|[kKMG]i?B|FLOPs?|GFLOPs?|parameters?|params)\b")
# a statement an author marks as arithmetic rather than a measured difference, with the reason
CLAIM_OK_MARK = "# not a measured difference:"
# what shows the statement follows a verdict
_VERDICT_EXPR_RE = re.compile(r"\bdetectable\b|\bverdict\w*\b|\bpaired\b|\bequal_accuracy_saving\b"
                              r"|\bno_detectable\w*\b|\.sentence\(\)")  # a Paired's sentence() is its verdict
# the same words in the text itself: the sentence states its verdict
_VERDICT_TEXT_RE = re.compile(r"no detectable difference|\bdetectable\b|\bverdict\b", re.IGNORECASE)


def claim_problems(folder: str | os.PathLike | None = None) -> list[str]:
    """Sentences the lessons' instructor copies must not show a learner, one text each (empty
    when none): a "test accuracy" label on a validation figure (targets, histories and early
    stopping read the validation split), and a break-even or "saves" sentence built without a
    verdict (a saving exists only when the paired verdict says the difference is detectable).
    A saving of something counted (bytes, FLOPs, parameters) needs no verdict, nor a statement
    marked ``# not a measured difference: <why>`` (arithmetic on cited data, say).
    ``python -m greenlab.course check`` reports these beside the sync problems."""
    root = lessons_dir(folder)
    problems: list[str] = []
    for path in instructor_notebooks(root):
        problems += notebook_claim_problems(_read_json(path), _rel(path, root))
    return problems


def notebook_claim_problems(nb: dict[str, Any], where: str = "notebook") -> list[str]:
    """:func:`claim_problems` for one notebook (a dict in nbformat 4)."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        text = _source(cell)
        at = f"{where}: cell {index}"
        if cell.get("cell_type") == "markdown":
            for match in _TEST_TARGET_TEXT_RE.finditer(text):
                problems.append(f"{at}: \"{_clip(match.group(0))}\": a target or stopping rule reads "
                                "the validation split; call it validation accuracy")
        elif cell.get("cell_type") == "code":
            problems += [f"{at}: {p}" for p in _code_claim_problems(text)]
    # the "as good as" rule, and paths to project files that exist
    return problems + notebook_equivalence_problems(nb, where) + notebook_path_problems(nb, where)


def _code_claim_problems(source: str) -> list[str]:
    """The claims problems of one code cell (nothing when it is not plain Python)."""
    try:
        tree = ast.parse(_strip_magics(source, lambda _text: None))
    except SyntaxError:
        return []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = source.split("\n")
    plotted = " ".join(ast.unparse(node) for node in ast.walk(tree)
                       if isinstance(node, ast.Call) and _call_name(node) in _PLOT_CALLS)
    plots_validation = bool(_VALIDATION_EXPR_RE.search(plotted)) and not _TEST_EXPR_RE.search(plotted)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) in _LABEL_CALLS and plots_validation:
            for arg in node.args[:1]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and _TEST_ACC_RE.search(arg.value):
                    problems.append(f"the plot of a validation figure is labelled \"{_clip(arg.value)}\"; "
                                    "call it validation accuracy")
        if isinstance(node, ast.JoinedStr):
            problems += _fstring_test_label(node)
        if _is_text(node) and not isinstance(parents.get(node), ast.JoinedStr):
            text = _literal_text(node)
            match = _SAVING_TEXT_RE.search(text)
            if match and not _VERDICT_TEXT_RE.search(text) and not _COUNTED_TEXT_RE.search(text) \
                    and not _under_verdict(node, parents) and not _marked_ok(node, parents, lines):
                problems.append(f"\"{_clip(text)}\" states a break-even or saving without a verdict: "
                                "build it only where the paired verdict is detectable")
    return problems


def _fstring_test_label(node: ast.JoinedStr) -> list[str]:
    """"{target:.0%} test accuracy": a test-accuracy phrase next to a validation figure."""
    problems = []
    parts = node.values
    for i, part in enumerate(parts):
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            continue
        for match in _TEST_ACC_RE.finditer(part.value):
            before = part.value[:match.start()]
            after = part.value[match.end():]
            near = []
            if i > 0 and isinstance(parts[i - 1], ast.FormattedValue) and len(before.strip()) <= 3:
                near.append(parts[i - 1])
            if i + 1 < len(parts) and isinstance(parts[i + 1], ast.FormattedValue) and len(after.strip()) <= 6:
                near.append(parts[i + 1])
            for value in near:
                expr = ast.unparse(value.value)
                if _VALIDATION_EXPR_RE.search(expr) and not _TEST_EXPR_RE.search(expr):
                    problems.append(f"\"{_clip(_literal_text(node))}\" calls {{{expr}}}, a validation "
                                    "figure, test accuracy; call it validation accuracy")
    return problems


def _under_verdict(node: ast.AST, parents: dict) -> bool:
    """True when the statement holding ``node``, or an ``if`` around it, reads a verdict."""
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and _VERDICT_EXPR_RE.search(ast.unparse(node.test)):
            return True
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.If, ast.For, ast.While, ast.With,
                                                                 ast.FunctionDef, ast.Try)):
            if _VERDICT_EXPR_RE.search(ast.unparse(node)):
                return True
    return False


def _marked_ok(node: ast.AST, parents: dict, lines: list) -> bool:
    """True when a line of the statement holding ``node``, or of the comment lines right above it,
    carries :data:`CLAIM_OK_MARK` and a reason."""
    while node in parents and not isinstance(node, ast.stmt):
        node = parents[node]
    if not hasattr(node, "lineno"):
        return False
    first = node.lineno - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    span = lines[first:node.end_lineno]
    return any(CLAIM_OK_MARK in line and line.split(CLAIM_OK_MARK, 1)[1].strip() for line in span)


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _literal_text(node: ast.AST) -> str:
    """The text a learner reads from a string or f-string (replacement fields as {expr})."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(p.value if isinstance(p, ast.Constant) else "{" + ast.unparse(p.value) + "}"
                   for p in node.values)


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _clip(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def new_lesson(number: int | str, slug: str, title: str, folder: str | os.PathLike | None = None) -> Path:
    """Scaffold ``instructor/NN_slug.ipynb`` in the course's lesson shape and build its learner copy."""
    try:
        stem = f"{int(number):02d}_{slug}"
    except ValueError:
        raise ValueError(f"lesson number must be a whole number 0-99, got {number!r}") from None
    if not _STEM_RE.match(stem):
        raise ValueError(
            f"lesson number must be 0-99 and slug lower-case words joined by '_' (e.g. mixed_precision), "
            f"got {number!r} {slug!r}"
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


class LessonRunError(RuntimeError):
    """A lesson cell failed in a headless run; the message names the lesson, the cell and the error."""


@dataclass
class LessonRun:
    """The outcome of one headless lesson run. Times in seconds."""

    lesson: str
    cells_run: int
    seconds: float
    notes: list = field(default_factory=list)


def run_notebook(path: str | os.PathLike, quick: bool | None = True, echo: bool = True) -> LessonRun:
    """Execute ``path``'s code cells in order in a fresh namespace, headless.

    The working folder is the notebook's own (as under Jupyter and nbval) and
    matplotlib uses the Agg backend. ``quick=True`` sets ``GREENLAB_QUICK=1`` for the run
    (None leaves the environment as it is). ``echo`` prints a line per cell. Raises
    :class:`LessonRunError` naming the lesson and cell when a cell fails.
    """
    path = Path(path).resolve()
    nb = _read_json(path)
    lesson = path.stem
    env = {"MPLBACKEND": os.environ.get("MPLBACKEND") or "Agg"}
    if quick is not None:
        env["GREENLAB_QUICK"] = "1" if quick else "0"
    saved_env = {k: os.environ.get(k) for k in env}
    saved_cwd = os.getcwd()
    os.environ.update(env)
    os.chdir(path.parent)
    runner = _CellRunner(lesson, echo)
    t0 = time.perf_counter()
    cells = 0
    try:
        for index, cell in enumerate(nb.get("cells", [])):
            if cell.get("cell_type") != "code":
                continue
            source = _joined(cell.get("source", ""))
            if not source.strip():
                continue
            cells += 1
            runner.run_cell(index, cells, source)
    finally:
        runner.close()
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return LessonRun(lesson, cells, time.perf_counter() - t0, runner.notes)


def run_notebooks(paths: Iterable[str | os.PathLike], quick: bool | None = True, echo: bool = True) -> list[LessonRun]:
    """:func:`run_notebook` for each path in turn; stops at the first failing lesson."""
    return [run_notebook(p, quick=quick, echo=echo) for p in paths]


class _CellRunner:
    """Runs cells in one namespace: plain ``exec``, IPython for cells with magics when installed."""

    def __init__(self, lesson: str, echo: bool):
        self.lesson, self.echo = lesson, echo
        self.ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.notes: list[str] = []
        self.shell = None
        self._display_shim = _install_display_shim()
        self.ns["display"] = _kernel_display()  # a Jupyter kernel's namespace has display() built in

    def run_cell(self, index: int, ordinal: int, source: str) -> None:
        where = f"{self.lesson}.ipynb cell {index} (code cell {ordinal})"
        if self.echo:
            print(f"--- {where}", flush=True)
        try:
            if _has_magic(source) and self._ipython() is not None:
                self._run_ipython(source)
            elif _cell_magic(source) == "%%energy":
                self._run_energy_cell(source, where)
            else:
                self._exec(_strip_magics(source, lambda text: self._note(where, text)), where)
        except LessonRunError:
            raise
        except (Exception, SystemExit) as exc:  # report the lesson and cell, keep the traceback
            import traceback

            traceback.print_exc()
            raise LessonRunError(f"{where} failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        if self.shell is not None:
            from IPython.core.interactiveshell import InteractiveShell

            InteractiveShell.clear_instance()
        if self._display_shim:
            sys.modules.pop(_TEXT_DISPLAY, None)
        try:
            import matplotlib.pyplot as plt

            plt.close("all")
        except ImportError:
            pass

    def _exec(self, source: str, where: str) -> None:
        tree = ast.parse(source, filename=where)
        if self._display_shim and _use_text_display(tree):
            self._note(where, "IPython.display replaced by printed text (IPython is not installed)")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, where, "exec"), self.ns)
        if last is not None:
            value = eval(compile(last, where, "eval"), self.ns)
            if value is not None:
                print(_text_of(value), flush=True)

    def _ipython(self):
        if self.shell is None:
            try:
                from IPython.core.interactiveshell import InteractiveShell
            except ImportError:
                return None
            InteractiveShell.clear_instance()  # a fresh shell on this lesson's namespace
            self.shell = InteractiveShell.instance(user_ns=self.ns)
        return self.shell

    def _run_energy_cell(self, source: str, where: str) -> None:
        """``%%energy`` without IPython: the body inside one ``greenlab.measure`` window, its
        Measurement kept as ``_energy`` and summarised, as the magic does."""
        from greenlab.energy import measure
        from greenlab.course.energy_cell import parse_options, readout

        first, _, body = source.lstrip().partition("\n")
        opts = parse_options(first.strip()[len("%%energy"):], cell=True)  # --region and all, as the magic
        self._note(where, "ran the %%energy cell as a greenlab.measure window, kept as _energy "
                          "(IPython is not installed)")
        window = measure(opts.label, attribution=opts.attribution).start()
        try:
            self._exec("\n" + body, where)
        finally:
            result = window.stop()
            self.ns["_energy"] = result
            print(readout(result, opts.region, opts.pue), flush=True)

    def _run_ipython(self, source: str) -> None:
        result = self.shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise error

    def _note(self, where: str | None, text: str) -> None:
        line = f"{where}: {text}" if where else text
        self.notes.append(line)
        print(f"[headless] {line}", flush=True)


def _cell_magic(source: str) -> str:
    """The cell magic (``%%name``) a cell starts with, or ""."""
    first = source.lstrip().split("\n", 1)[0].strip()
    return first.split()[0] if first.startswith("%%") else ""


def _has_magic(source: str) -> bool:
    return any(line.lstrip()[:1] in ("%", "!") for line in source.split("\n"))


def _strip_magics(source: str, note) -> str:
    """Plain Python from a cell with magics: ``%%cell`` magics keep their body, ``%line``
    magics and ``!shell`` lines are blanked (line numbers kept); each change is noted."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].strip().split()[0]
        note(f"ran the cell body without the {magic} magic (IPython is not installed)")
        lines = [""] + lines[1:]
    out = []
    for line in lines:
        head = line.lstrip()[:1]
        if head in ("%", "!"):
            note(f"skipped {line.strip()!r} (IPython is not installed)")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _text_of(value: Any) -> str:
    for method in ("_repr_markdown_",):
        text = getattr(value, method, None)
        if callable(text):
            try:
                out = text()
            except Exception:
                out = None
            if isinstance(out, str):
                return out
    return repr(value)


_TEXT_DISPLAY = "_greenlab_text_display"  # module name of the text stand-in for IPython.display


def _install_display_shim() -> bool:
    """Without IPython, register a text-only stand-in for ``IPython.display`` (display,
    Markdown, HTML, clear_output) under a private name; cells' ``from IPython.display import``
    lines are pointed at it (:func:`_use_text_display`). Returns True when it was installed.
    No fake ``IPython`` module is registered: libraries that look for IPython still find none."""
    try:
        import IPython.display  # noqa: F401

        return False
    except ImportError:
        pass
    import types

    class _Text:
        def __init__(self, data: Any = "", **_kwargs: Any):
            self.data = data

        def __repr__(self) -> str:
            return str(self.data)

    def display(*objs: Any, **_kwargs: Any) -> None:
        for obj in objs:
            print(_text_of(obj), flush=True)

    module = types.ModuleType(_TEXT_DISPLAY)
    module.display = display
    module.Markdown = type("Markdown", (_Text,), {})
    module.HTML = type("HTML", (_Text,), {})
    module.clear_output = lambda wait=False: None
    sys.modules[_TEXT_DISPLAY] = module
    return True


def _kernel_display():
    """The ``display`` an IPython kernel puts in every notebook's namespace: IPython's own where it
    is installed (text outside a front end), else the text stand-in's."""
    try:
        from IPython.display import display
    except ImportError:
        display = sys.modules[_TEXT_DISPLAY].display
    return display


def _use_text_display(tree: ast.Module) -> bool:
    """Point ``from IPython.display import ...`` at the text stand-in; True when any was."""
    changed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "IPython.display" and not node.level:
            node.module = _TEXT_DISPLAY
            changed = True
    return changed


def main(argv: list[str] | None = None) -> int:
    """``python -m greenlab.course build|check|new|run``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m greenlab.course",
                                     description="Build and check the lesson notebooks.")
    parser.add_argument("--lessons", default=None, help="lessons folder (default: lessons/ beside the package)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="normalise instructor copies and write learner copies")
    sub.add_parser("check", help="exit 1 if any learner copy or instructor copy is out of sync, or a "
                   "lesson calls a validation figure test accuracy or states a saving without a verdict")
    new = sub.add_parser("new", help="scaffold a new lesson")
    new.add_argument("number", help="two-digit lesson number, e.g. 03")
    new.add_argument("slug", help="lower-case words joined by '_', e.g. gradient_accumulation")
    new.add_argument("title", help="the lesson title")
    run = sub.add_parser("run", help="execute lessons' code cells in order, headless (no Jupyter needed)")
    run.add_argument("notebooks", nargs="+", help="notebook files, e.g. lessons/instructor/00_measuring_energy.ipynb")
    run.add_argument("--full", action="store_true", help="full mode (default: quick mode, GREENLAB_QUICK=1)")
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run_command(args.notebooks, quick=not args.full)
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
            claims = claim_problems(root)
            if problems:
                print("\n".join(problems))
                print(f"\n{len(problems)} problem(s). "
                      "Run `python -m greenlab.course build` after editing lessons/instructor/.")
            if claims:
                print("\n".join(claims))
                print(f"\n{len(claims)} claim(s) the lessons must not make (validation figures called test "
                      "accuracy, break-evens or savings without a verdict, equivalence in fixed text, paths "
                      "that do not exist).")
            if problems or claims:
                return 1
            print(f"{len(instructor_notebooks(root))} lesson(s) in sync; no claim without its verdict.")
            return 0
        path = new_lesson(args.number, args.slug, args.title, root)
        print(f"created {_rel(path, root)} and its learner copy")
        return 0
    except (LessonError, ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


# --- helpers ----------------------------------------------------------------------------------


def _run_command(paths: list[str], quick: bool) -> int:
    """``run``: each lesson in turn; exit 1 at the first failing cell, 2 for a missing file.
    Started by a program that set ``$GREENLAB_PARENT_PID`` (the GPU suite), it dies with it."""
    if os.environ.get("GREENLAB_PARENT_PID"):
        from greenlab.base.processes import die_with_parent

        die_with_parent()
    for name in paths:
        if not Path(name).is_file():
            print(f"error: no notebook at {name}", file=sys.stderr)
            return 2
    for name in paths:
        try:
            done = run_notebook(name, quick=quick)
        except LessonRunError as exc:
            print(f"FAILED {exc}", file=sys.stderr, flush=True)
            return 1
        except LessonError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"passed {done.lesson}: {done.cells_run} code cells in {done.seconds:.1f} s"
              + (f" ({len(done.notes)} headless note(s))" if done.notes else ""), flush=True)
    return 0


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
    code = main()
    if sys.argv[1:2] == ["run"]:
        # A headless run's outcome is printed; the interpreter's teardown has nothing left to do
        # but meet the lessons' leftover daemon threads (a loader thread inside a torch call aborts
        # it with "terminate called without an active exception"), so the process leaves here, as
        # the torchrun workers do once their result is written.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
