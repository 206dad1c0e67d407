"""nbgrader preprocessor that releases each solution cell as the course's learner copy of it.

nbgrader's ``ClearSolutions`` replaces a solution region with one fixed stub for every exercise;
the course's exercises each have their own learner part (``return None``, ``x = None``, ...), so
that a released notebook runs top to bottom. This preprocessor runs right after ``ClearSolutions``
(``greenlab.course.nbgrader`` writes the config that says so) and sets each solution cell's source
to the learner text that the export stored in the cell's ``greenlab.learner_source`` metadata,
then drops that metadata. Imported only by nbgrader's config: it needs nbgrader.
"""

from __future__ import annotations

import ast
import os

from traitlets import List, Unicode

from greenlab.base.optional import require
from greenlab.course import nbgrader as course_export
from greenlab.course.grading import SECRET_VARIABLE

_preprocessors = require("nbgrader.preprocessors", "the nbgrader export")
ClearHiddenTests, NbGraderPreprocessor = _preprocessors.ClearHiddenTests, _preprocessors.NbGraderPreprocessor
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


class SkipExperiments(NbGraderPreprocessor):
    """In grading mode, run only the cells a grade needs: the first code cell (``gl.setup()``),
    every solution and graded cell, the cell after a hand-graded answer (which shows it, e.g. the
    statement with the run's figures), cells that only import or define, and every cell that
    defines a name those cells use (found again for each cell kept, so a run the statement cites
    runs). Any other code cell, a lesson's experiments and measurements, is replaced by a comment
    saying so. On unless ``GREENLAB_GRADING`` is 0."""

    def preprocess(self, nb, resources):
        if os.environ.get("GREENLAB_GRADING", "1").strip().lower() in ("0", "false", "no", "off"):
            return nb, resources
        code = [c for c in nb.cells if c.cell_type == "code"]
        keep = set()
        after_manual = False
        for i, cell in enumerate(code):
            meta = cell.metadata.get("nbgrader", {})
            if i == 0 or meta.get("solution") or meta.get("grade") or after_manual or _only_definitions(cell.source):
                keep.add(i)
            after_manual = bool(meta.get("solution") and meta.get("grade"))
        needed: set[str] = set()
        changed = True
        while changed:
            changed = False
            for i in sorted(keep):
                needed |= _loaded(code[i].source)
            for i, cell in enumerate(code):
                if i not in keep and _defined(cell.source) & needed:
                    keep.add(i)
                    changed = True
        for i, cell in enumerate(code):
            if i not in keep:
                cell.source = SKIPPED
        return nb, resources


def _tree(source: str):
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _only_definitions(source: str) -> bool:
    tree = _tree(source)
    return tree is not None and all(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
                                    for n in tree.body)


def _loaded(source: str) -> set[str]:
    """The global names ``source`` reads: at the top level, and inside its functions those that are
    neither arguments nor assigned there (approximately: comprehension variables count as local)."""
    tree = _tree(source)
    if tree is None:
        return set()
    names: set[str] = set()
    for node in tree.body:
        names |= _free(node)
    return names


def _free(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        body = node.body if isinstance(node.body, list) else [node.body]
        inner = set()
        for child in body:
            local |= {n.id for n in ast.walk(child) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            local |= {n.name for n in ast.walk(child) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            local |= {(a.asname or a.name).split(".")[0] for n in ast.walk(child)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
            inner |= {n.id for n in ast.walk(child) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        defaults = set()
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            defaults |= {n.id for n in ast.walk(d) if isinstance(n, ast.Name)}
        return (inner - local) | defaults
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _defined(source: str) -> set[str]:
    tree = _tree(source)
    if tree is None:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node in tree.body:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


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
