"""The claims rule for "as good as": a lesson may say that two models are equally accurate only in
the words of the library's equivalence verdict (``greenlab.experiments.Equivalence``: "equivalent
within ±1 point" / "not shown equivalent within ±1 point"), printed from a measured comparison.

Equivalence words ("as good as", "same accuracy", "no worse", "matches fp32's accuracy",
"equally accurate", "close to fp32's accuracy", "without losing accuracy", ...) are refused in
a lesson's markdown and in the fixed text of its code (string literals and the literal parts of
f-strings), because fixed text is written before the run and cannot know its outcome. A mention
of the words themselves, in double quotes or backticks (an `"as good"` claim needs a margin), is
not a claim and passes. ``python -m greenlab.course check`` runs this rule beside the others.
"""

from __future__ import annotations

import ast
import re
from typing import Any

# an accuracy (or quality) word, for phrases that claim sameness only next to one
_ACC = r"(?:accura\w*|quality|score\w*|loss(?:es)?|perplexit\w*)"
EQUIVALENCE_WORDS_RE = re.compile(
    r"\bas good as\b|\bas good\b|\bjust as good\b"
    r"|\b(?:the )?same (?:test |validation |final )?(?:accuracy|quality|score)\b"
    r"|\bno worse\b|\bnot worse\b|\bnowhere near worse\b"
    r"|\bequally (?:accurate|good)\b|\bas accurate as\b|\bjust as accurate\b"
    rf"|\bmatch(?:es|ed|ing)?\b[^.;:!?\n]{{0,40}}\b{_ACC}"
    rf"|\b{_ACC}\b[^.;:!?\n]{{0,40}}\bmatch(?:es|ed|ing)?\b"
    rf"|\bclose to\b[^.;:!?\n]{{0,30}}\b{_ACC}|\b{_ACC}\b[^.;:!?\n]{{0,30}}\b(?:is|are|stays?|remains?) close to\b"
    rf"|\bwithout (?:any )?(?:losing|loss of|hurting|harming|a loss of|a drop in|sacrificing) (?:\w+ )?{_ACC}"
    rf"|\bno (?:loss|drop|cost) (?:of |in )(?:\w+ )?{_ACC}|\bno {_ACC} (?:loss|drop|cost)\b"
    r"|\b(?:accuracy|quality) (?:is |was )?(?:preserved|unchanged|unaffected|intact)\b",
    re.IGNORECASE)
# a mention of the words, not a claim: inside double quotes (straight or curly) or backticks
_MENTION_RE = re.compile(r'"[^"\n]{0,80}"|“[^”\n]{0,80}”|`[^`\n]{0,80}`')
# not a claim of sameness: a target ("energy to reach the same accuracy"), the idiom "only as good
# as", or a condition, question or expectation ("only if it reaches the same accuracy", "say whether
# both are equally good", "they should reach the same accuracy")
_NOT_A_CLAIM_BEFORE_RE = re.compile(
    r"(?:\b(?:to|at|until)\s+(?:reach\w*\s+)?(?:\*\*)?(?:the\s+)?|\bonly\s+"
    r"|\b(?:if|when|whether|should|must|would|could|unless)\b[^.;:!?\n]{0,60})$",
    re.IGNORECASE)
# a published finding, cited on its line (author and year): reported, not this run's outcome
_CITED_RE = re.compile(r"\b(?:et al\.?|[A-Z][A-Za-z-]+),?\s*(?:\(|\w+ )?(?:19|20)\d{2}\b")
# where a cited statement starts and ends: a bullet, a table row or a paragraph
_STATEMENT_EDGE_RE = re.compile(r"\n(?:\s*[-*] |\||\s*\n)")


def equivalence_word(text: str) -> str | None:
    """The first equivalence phrase ``text`` states as a claim, or None. Quoted mentions, targets
    ("to reach the same accuracy"), questions ("whether ... as good") and a line that cites the
    paper it reports (author and year) are not claims about this run."""
    text = _MENTION_RE.sub(" ", text)
    for match in EQUIVALENCE_WORDS_RE.finditer(text):
        if _NOT_A_CLAIM_BEFORE_RE.search(text[max(0, match.start() - 80):match.start()]):
            continue
        starts = [m.end() for m in _STATEMENT_EDGE_RE.finditer(text, 0, match.start())]
        end = _STATEMENT_EDGE_RE.search(text, match.end())
        if _CITED_RE.search(text[starts[-1] if starts else 0:end.start() if end else len(text)]):
            continue
        return match.group(0)
    return None


def notebook_equivalence_problems(nb: dict[str, Any], where: str = "notebook") -> list[str]:
    """One text per markdown cell or fixed code text of ``nb`` (nbformat 4, as a dict) that states
    an equivalence in its own words instead of printing the library's equivalence verdict."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        at = f"{where}: cell {index}"
        if cell.get("cell_type") == "markdown":
            texts = [text]
        elif cell.get("cell_type") == "code":
            texts = fixed_texts(text)
        else:
            continue
        for fixed in texts:
            word = equivalence_word(fixed)
            if word:
                problems.append(f"{at}: \"{_clip(word)}\" claims equivalence in fixed text; print the "
                                "library's equivalence verdict instead (Comparison.equivalence(...).words(), "
                                "gl.experiments.equivalence), which states its margin")
    return problems


def readable_texts(nb: dict[str, Any], code_texts=None):
    """(cell index, text) for what a learner reads in ``nb`` without running it: each markdown
    cell's source, and the texts ``code_texts(source)`` finds in each code cell (default
    :func:`fixed_texts`). The walk every claims rule over fixed text shares."""
    code_texts = fixed_texts if code_texts is None else code_texts
    for index, cell in enumerate(nb.get("cells", [])):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown":
            yield index, text
        elif cell.get("cell_type") == "code":
            for fixed in code_texts(text):
                yield index, fixed


def fixed_texts(source: str) -> list[str]:
    """The fixed text of a code cell a learner may read: every string literal, and the literal
    parts of each f-string (replacement fields are the run's own values). Comments are not
    shown and are left out; a cell that is not plain Python (a magic) gives none."""
    lines = [line for line in source.split("\n") if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    inside_fstring = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(p.value if isinstance(p, ast.Constant) else " {} " for p in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
            out.append(node.value)
    return out


def _clip(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
