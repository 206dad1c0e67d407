"""nbgrader preprocessor that releases each solution cell as the course's learner copy of it.

nbgrader's ``ClearSolutions`` replaces a solution region with one fixed stub for every exercise;
the course's exercises each have their own learner part (``return None``, ``x = None``, ...), so
that a released notebook runs top to bottom. This preprocessor runs right after ``ClearSolutions``
(``greenlab.course.nbgrader`` writes the config that says so) and sets each solution cell's source
to the learner text that the export stored in the cell's ``greenlab.learner_source`` metadata,
then drops that metadata. Imported only by nbgrader's config: it needs nbgrader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import nbformat
from traitlets import List, Unicode

from greenlab.base.optional import require
from greenlab.course import nbgrader as course_export
from greenlab.course.grading import SECRET_VARIABLE
from greenlab.course.needed_cells import needed

_preprocessors = require("nbgrader.preprocessors", "the nbgrader export")
ClearHiddenTests, NbGraderPreprocessor = _preprocessors.ClearHiddenTests, _preprocessors.NbGraderPreprocessor
ClearOutput = _preprocessors.ClearOutput
Execute = _preprocessors.Execute


class LearnerParts(NbGraderPreprocessor):
    """Give every solution cell that carries ``greenlab.learner_source`` that text."""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("greenlab", {})
        if "learner_source" in meta:
            cell.source = meta["learner_source"]
            del cell.metadata["greenlab"]
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """nbgrader's ``ClearHiddenTests`` for the feedback: a learner sees each hidden test's verdict (its
    output), not its code. The HTML exporter configures ``display_data_priority`` on every
    preprocessor, which nbgrader's own class does not declare configurable (a warning on every
    ``generate_feedback``); here it is."""

    display_data_priority = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)


SKIPPED = "# Not run when grading (GREENLAB_GRADING): no grade needs this cell's work.\n"
# nbclient leaves a code cell with this tag unrun, its outputs as they are. Grading mode tags the
# cells it shows as submitted; a learner's own tag is taken off, so no test cell can be left unrun.
SKIP_TAG = "skip-execution"
SUBMITTED = "submitted_outputs"  # cell metadata["greenlab"] key: a shown cell's saved outputs, as text
SHOWN_HEADER = ("Not run again when grading: the output below is what this cell showed when the learner ran the "
                "notebook before submitting it (their run, shown as text). Mark the answer above against it.\n\n")
NOT_RUN_HEADER = ("Not run again when grading, and the submitted notebook saved no output here: the learner did not "
                  "run this cell before submitting, so there is no run of theirs to mark the answer above against.\n")
MAX_SHOWN_CHARS = 20_000  # of a shown cell's saved text; nbgrader's LimitOutput trims too


@dataclass(frozen=True)
class GradingPlan:
    """What grading mode does with each code cell (indices among the code cells, in order): ``run``
    them; ``shown``: the cell after a hand-graded answer, which shows the learner's run (their
    statement and its figures) as the submitted notebook saved it, not run again; ``kept``: a
    hand-graded answer no running cell needs, left as written for the marker and not run; every
    other cell is left out (its source replaced by :data:`SKIPPED`)."""

    run: frozenset
    shown: frozenset
    kept: frozenset

    def left_out(self, n_cells: int) -> list[int]:
        return [i for i in range(n_cells) if i not in self.run | self.shown | self.kept]


def plan(code_cells) -> GradingPlan:
    """What grading mode does with ``code_cells`` (nbformat code cells, in order). Required: the
    first cell (``gl.setup()``), every autograded answer and test. A hand-graded answer runs only
    when a running cell reads what it binds; the code cell after it, unless itself an answer or a
    test, is shown as saved: re-running it would re-run the experiments it cites with new
    measurements, at grading size, which are not the run the learner wrote about (and take most of
    a grade's time). Everything else runs only when a running cell needs it
    (:func:`greenlab.course.needed_cells.needed`, with the shown cells binding nothing)."""
    required, shown, manual = set(), set(), set()
    after_manual = False
    for i, cell in enumerate(code_cells):
        meta = cell.metadata.get("nbgrader", {})
        solution, grade = bool(meta.get("solution")), bool(meta.get("grade"))
        if solution and grade:
            manual.add(i)
        elif i == 0 or solution or grade:
            required.add(i)
        elif after_manual:
            shown.add(i)
        after_manual = solution and grade
    sources = ["" if i in shown else c.source for i, c in enumerate(code_cells)]
    run = needed(sources, required) - shown
    return GradingPlan(frozenset(run), frozenset(shown), frozenset(manual - run))


class ClearOutputKeepingRuns(ClearOutput):
    """nbgrader's ``ClearOutput``, except that the outputs the submitted notebook saved for each cell
    that shows a hand-graded answer are set aside first, as text, in the cell's metadata, for
    :class:`SkipExperiments` to show. As text only: a learner's saved output reaches the marker's
    screen, and text cannot carry a script or markup into it."""

    def preprocess(self, nb, resources):
        code = [c for c in nb.cells if c.cell_type == "code"]
        for cell in code:  # only this preprocessor writes it: whatever a learner put there goes
            ours = cell.metadata.get("greenlab")
            if not isinstance(ours, dict):
                cell.metadata.pop("greenlab", None)
            else:
                ours.pop(SUBMITTED, None)
        for i in plan(code).shown:
            code[i].metadata.setdefault("greenlab", {})[SUBMITTED] = outputs_as_text(code[i].get("outputs", []))
        return super().preprocess(nb, resources)


def outputs_as_text(outputs) -> str:
    """A cell's saved outputs as plain text: streams as written, a result or display by its
    ``text/plain`` form (else named by its kind), an error by its name and message."""
    parts = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(_text(output.get("text")))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            parts.append(_text(data["text/plain"]) + "\n" if "text/plain" in data else
                         f"[an output of kind {', '.join(sorted(data)) or 'none'}, not shown as text]\n")
        elif kind == "error":
            parts.append(f"{_text(output.get('ename'))}: {_text(output.get('evalue'))}\n")
    text = "".join(parts)
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "\n[... cut: longer than shown here]\n"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


class SkipExperiments(NbGraderPreprocessor):
    """In grading mode, run only the cells a grade needs (:func:`plan`): the first code cell
    (``gl.setup()``), every autograded answer and test, and the cells that bind or change a name one
    of those reads before it is bound again (:func:`greenlab.course.needed_cells.needed`, read from
    the submitted notebook, the learner's own cells included). The cell after a hand-graded answer
    shows, as text, what the learner's run of it showed (set aside by
    :class:`ClearOutputKeepingRuns`) and is not run; a hand-graded answer no running cell needs is
    left as written, not run. Any other code cell, a lesson's experiments, figures and measurements,
    is replaced by a comment saying so. On unless ``GREENLAB_GRADING`` is 0; a learner's own
    ``skip-execution`` tag is taken off either way."""

    def preprocess(self, nb, resources):
        code = [c for c in nb.cells if c.cell_type == "code"]
        saved = {}
        for i, cell in enumerate(code):
            tags = cell.metadata.get("tags")
            if isinstance(tags, list) and SKIP_TAG in tags:
                cell.metadata["tags"] = [t for t in tags if t != SKIP_TAG]
            ours = cell.metadata.get("greenlab")
            if isinstance(ours, dict) and SUBMITTED in ours:
                saved[i] = ours.pop(SUBMITTED)
                if not ours:
                    del cell.metadata["greenlab"]
        if os.environ.get("GREENLAB_GRADING", "1").strip().lower() in ("0", "false", "no", "off"):
            return nb, resources
        grading = plan(code)
        for i in grading.shown:
            text = saved.get(i) or ""
            code[i].outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                      text=SHOWN_HEADER + text if text.strip() else NOT_RUN_HEADER)]
        for i in grading.shown | grading.kept:
            code[i].metadata["tags"] = [*code[i].metadata.get("tags", []), SKIP_TAG]
        for i in grading.left_out(len(code)):
            code[i].source = SKIPPED
        return nb, resources


class SeededExecute(Execute):
    """nbgrader's ``Execute``, with each hidden test given its submission's seed for the run only.

    In nbgrader's own process, before the kernel starts: reads the course's grading secret
    (:func:`greenlab.course.nbgrader.course_secret`, outside the course), derives one seed per
    hidden test from it and the submission (:func:`greenlab.course.grading.submission_seed`),
    writes each into its test cell's seed line (in memory: the notebook on disk keeps
    ``_seed = None``) and removes ``GREENLAB_GRADING_SECRET`` from the environment the kernel will
    inherit (older configs set it there). After the run, the seed lines are set back, so the
    autograded notebook holds no seed either. Grading the same submission again draws the same
    cases; without a secret it refuses to grade rather than draw cases no regrade could repeat."""

    course_root = Unicode("", help="The nbgrader course folder, whose grading secret seeds the hidden tests."
                          ).tag(config=True)

    def preprocess(self, nb, resources):
        os.environ.pop(SECRET_VARIABLE, None)
        where = resources.get("nbgrader", {})
        seeds = {}
        if any(c.cell_type == "code" and course_export.SEED_PATTERN.search(c.source) for c in nb.cells):
            seeds = course_export.hidden_test_seeds(
                nb, course_export.course_secret(self.course_root or os.getcwd()),
                assignment=str(where.get("assignment", "")), notebook=str(where.get("notebook", "")),
                student=str(where.get("student", "")))
        for index, seed in seeds.items():
            nb.cells[index].source = course_export.with_seed(nb.cells[index].source, seed)
        try:
            nb, resources = super().preprocess(nb, resources)
        finally:
            for index in seeds:
                nb.cells[index].source = course_export.with_seed(nb.cells[index].source, None)
        return nb, resources
