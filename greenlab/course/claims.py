"""The claims rules of the lessons: no printed sentence about a measured outcome (a saving, a test-set figure,
a verdict) without the verdict or interval it rests on. ``claim_problems`` reads every instructor copy;
``notebook_claim_problems`` one notebook; a statement that is not a claim about a measured difference says so
with the mark ``CLAIM_OK_MARK``. Beside these, ``notebook_claim_problems`` runs the rules of
``claims_equivalence`` ("as good" only from an equivalence verdict), ``claims_paths`` (project paths that
exist), ``claims_outcomes`` (no outcome in markdown written before the run) and ``claims_constants``
(a library constant stated as the library holds it).
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from greenlab.course.claims_constants import notebook_constant_problems
from greenlab.course.claims_equivalence import notebook_equivalence_problems
from greenlab.course.claims_outcomes import notebook_outcome_problems
from greenlab.course.claims_paths import notebook_path_problems
from greenlab.course.headless import _strip_magics
from greenlab.course.notebook_format import _read_json, _rel, _source, instructor_notebooks, lessons_dir

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
    # the "as good as" rule, paths to project files that exist, no outcome in fixed text, and the
    # library's constants as the library holds them
    return (problems + notebook_equivalence_problems(nb, where) + notebook_path_problems(nb, where)
            + notebook_outcome_problems(nb, where) + notebook_constant_problems(nb, where))


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
