"""The claims rule for outcomes: a lesson's markdown is written before its cells run, so it never
states what a run of the lesson found ("You will see that memory-bound work costs far more joules
per GFLOP", "accuracy stays close to fp32's", "we saw accuracy hold at 8 bits"). The outcome is
printed from the outcome, by the cell that holds its verdict; the markdown says what to look for.

A sentence is refused when it holds an **outcome**, a measured quantity that moves or compares
("accuracy holds", "costs far more joules", "faster", "the price is small"), and either a
**report** of this run ("you will see", "we saw", "in our test", "here") or a **universal** that
no one run can show ("on any hardware"). A few outcomes are refused on their own, because they only
ever report a run ("accuracy holds at 8 bits", "the final accuracy stays close to fp32's").

Not refused: a question, a conditional or hedged sentence ("if", "whether", "may", "depends"),
a mention in quotes or backticks, a published finding cited with author and year (unless it also
says this run reproduced it), and a sentence an author marks with :data:`OUTCOME_OK_MARK` and a
reason, right after it: ``<!-- not this run's outcome: Han et al.'s published figure -->``. The
mark is an HTML comment (a learner never reads it) that a reviewer reads in the diff.
The same holds for the fixed text of a code cell that is printed whatever the run found (a string
or the literal parts of an f-string that no condition chooses): ``print(f"bf16 is {r:.2f}x faster
here")`` fixes the direction before the run, while text an ``if`` on the verdict chooses is printed
from the outcome. ``python -m greenlab.course check`` runs this rule beside the others.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from greenlab.course.claims_equivalence import _CITED_RE, readable_texts
from greenlab.course.headless import _strip_magics

# the mark, an HTML comment right after the sentence it covers, with a reason before "-->"
OUTCOME_OK_MARK = "<!-- not this run's outcome:"
_MARK_RE = re.compile(r"<!--\s*not this run's outcome:(?P<why>.*?)-->", re.DOTALL)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)

# a measured quantity, as a lesson names it
_QTY = (r"(?:accura\w*|loss(?:es)?|perplexit\w*|energy|joules?|J|time|seconds|wall[- ]clock|power|watts|W"
        r"|throughput|latency|speed|cost|price|bill|memory use|peak memory|carbon|emissions?|gCO2e?)")
_CMP = (r"(?:faster|slower|quicker|cheaper|costlier|dearer|greener|more expensive|less expensive"
        r"|more efficient|less efficient|fastest|slowest|cheapest|greenest|most efficient|least efficient)")
_SIZE = r"(?:small|smaller|large|larger|big|bigger|tiny|negligible|modest|significant|huge|noticeable|minor|marginal)"
# an outcome: a comparison or a movement of a measured quantity
OUTCOME_RE = re.compile(
    rf"\b{_CMP}\b"
    rf"|\b(?:far |much |many times |several times |\d+(?:\.\d+)?\s?[x×] )?(?:more|less|fewer|higher|lower)"
    rf"(?: \w+)? {_QTY}\b"
    rf"|\b{_QTY} (?:is|are|was|were|stays?|stayed|remains?|remained) (?:far |much |very |quite )?"
    rf"(?:{_SIZE}|higher|lower|close to)\b"
    rf"|\b(?:price|gain|saving|speed-?up|slow-?down|overhead|penalty|difference|drop|loss) (?:is|are|was|were)"
    rf" (?:far |much |very |quite )?{_SIZE}\b"
    rf"|\b{_QTY} (?:holds?|held|slips?|slipped|drops?|dropped|falls?|fell|rises?|rose|doubles|doubled|halves"
    rf"|halved|suffers?|suffered|degrades?|degraded)\b"
    rf"|(?<!that )(?<!which )\b(?:wins?|won|beats?|beat|outperforms?|outperformed)\b",
    re.IGNORECASE)
# outcomes that only ever report a run: refused without a further cue
_REPORT_OUTCOME_RE = re.compile(
    r"\b(?:accura\w*|loss(?:es)?|perplexit\w*)\b[^.,;:!?()\n]{0,30}?\b(?:holds?|held(?!-)|slips?|slipped|stays? close"
    r"|stayed close|remains? close|is close|was close|are close|were close)\b",
    re.IGNORECASE)
# a report of this run: a prediction of what the learner will see, or a past run told
REPORT_RE = re.compile(
    r"\byou(?: will|'ll|’ll) (?:see|find|notice|observe|get)\b|\b(?:will|would) show\b|\bturns? out\b"
    r"|\b(?:we|you|I) (?:saw|see|measured|found|observed|got)\b|\bsaw\b|\bwe measure\b"
    r"|\bin (?:our|my|this|the) (?:test|tests|run|runs|measurement|measurements|experiment)\b"
    r"|\bthis (?:run|lesson's run|measurement)\b|\bin the (?:table|plot|figure|chart)\b|\bhere\b|\bon this (?:machine|laptop|CPU|model)\b"
    r"|\bon (?:this|a) (?:tiny|small) model\b|\bon a CPU\b|\bon (?:your|a) laptop\b",
    re.IGNORECASE)
# a sentence that only points back at the one before it as this run's outcome
_POINTER_RE = re.compile(r"(?:as |and )?(?:you(?: will|'ll|’ll)|we) "
                         r"(?:see|saw|find|found|notice|noticed|measure|measured)"
                         r"(?: (?:that|this|it|so|why|for yourself))?(?: (?:in|below|above|later)\b[^.!?]{0,40})?[.!]?$",
                         re.IGNORECASE)
# a universal no run can show
UNIVERSAL_RE = re.compile(r"\bon (?:any|all|every) (?:hardware|machines?|devices?|CPUs?|GPUs?)\b|(?<!not )\balways\b",
                          re.IGNORECASE)
# a condition or a hedge before the outcome: not a statement of one ("whether bf16 is faster",
# "is expected to be smaller", "may win"); "depends" anywhere in the sentence
HEDGE_RE = re.compile(
    r"\b(?:if|whether|unless|may|might|can|could|should|would|expected|expect|predict\w*"
    r"|likely|possibly|perhaps|look for|check|see whether|see if|(?:that|which|who) (?:is|are))\b",
    re.IGNORECASE)
_DEPENDS_RE = re.compile(r"\bdepends?\b|\bdepending\b", re.IGNORECASE)
# a mention, not a claim: quoted or in backticks; inline code and maths carry no claim either
_MENTION_RE = re.compile(r'"[^"\n]{0,120}"|“[^”\n]{0,120}”|`[^`\n]*`|\$[^$\n]*\$')
_FENCE_RE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
# where one sentence ends: a full stop, a blank line, a bullet, a heading, a table row
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[*_)\]]*\s+|\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#|\|))|\|")
# a full stop that ends an abbreviation or an initial, not a sentence
_ABBREVIATION_RE = re.compile(r"(?:\bet al|\be\.g|\bi\.e|\bcf|\bvs|\bFig|\bNo|\bapprox|\bca|\b[A-Z])\.[*_)\]]*$")


def outcome_sentence(text: str) -> str | None:
    """The first sentence of markdown ``text`` that states an outcome of the run, or None."""
    found = outcome_sentences(text)
    return found[0] if found else None


def outcome_sentences(text: str) -> list[str]:
    """Every sentence of markdown ``text`` that states an outcome of the run and is not marked. A
    short pointer after a sentence ("You will see that.") reports the sentence before it."""
    found = []
    parts = sentences(text)
    for i, (sentence, marked) in enumerate(parts):
        pointer = parts[i + 1][0] if i + 1 < len(parts) else ""
        if not _POINTER_RE.match(pointer):
            pointer = ""
        if not marked and states_outcome(f"{sentence} {pointer}".strip()):
            found.append(sentence)
    return found


def states_outcome(sentence: str) -> bool:
    """True when one sentence (already free of comments) states a run's outcome in fixed text."""
    plain = _MENTION_RE.sub(" ", sentence)
    plain = re.sub(r"[*_]{1,3}", "", plain)
    if plain.rstrip().endswith("?") or _DEPENDS_RE.search(plain):
        return False
    report = REPORT_RE.search(plain)
    if _CITED_RE.search(plain) and not report:
        return False
    for outcome in (*_REPORT_OUTCOME_RE.finditer(plain), *OUTCOME_RE.finditer(plain)):
        if HEDGE_RE.search(plain, 0, outcome.start()):
            continue
        if outcome.re is _REPORT_OUTCOME_RE or report or UNIVERSAL_RE.search(plain):
            return True
    return False


def sentences(text: str) -> list[tuple[str, bool]]:
    """The sentences of markdown ``text`` (fenced code left out), each with whether an
    :data:`OUTCOME_OK_MARK` with a reason follows it (inside it or before the next sentence)."""
    text = _FENCE_RE.sub(lambda m: " " * len(m.group(0)), text)
    marks = [m.start() for m in _MARK_RE.finditer(text) if m.group("why").strip()]
    blank = _COMMENT_RE.sub(lambda m: " " * len(m.group(0)), text)
    spans, start = [], 0
    for end in _SENTENCE_END_RE.finditer(blank):
        if _ABBREVIATION_RE.search(blank, max(0, end.start() - 12), end.start()):
            continue
        spans.append((start, end.start(), end.end()))
        start = end.end()
    spans.append((start, len(blank), len(blank)))
    out = []
    for begin, end, next_begin in spans:
        body = blank[begin:end].strip()
        if body:
            out.append((" ".join(body.split()), any(begin <= m < max(next_begin, end + 1) for m in marks)))
    return out


def unconditional_texts(source: str) -> list[str]:
    """The fixed text of a code cell that prints whatever the run found: each string literal and
    the literal parts of each f-string that no ``if``, ``elif``, ``else``, conditional expression,
    loop guard or ``match`` chooses. Text a condition chooses is printed from the outcome (the
    verdict picks the sentence) and is not read; nor is a cell that is not plain Python."""
    try:
        tree = ast.parse(_strip_magics(source, lambda _text: None))
    except SyntaxError:
        return []
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(parents.get(node), ast.JoinedStr):
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(p.value if isinstance(p, ast.Constant) else " {} " for p in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if not _chosen_by_a_condition(node, parents):
            out.append(text)
    return out


def _chosen_by_a_condition(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Match, ast.BoolOp, ast.comprehension)):
            return True
    return False


def notebook_outcome_problems(nb: dict[str, Any], where: str = "notebook") -> list[str]:
    """One text per sentence in a markdown cell of ``nb`` (nbformat 4, as a dict), or in the fixed
    text a code cell prints whatever the run found (:func:`unconditional_texts`), that states a
    run's outcome."""
    problems = []
    for index, text in readable_texts(nb, unconditional_texts):
        for sentence in outcome_sentences(text):
            problems.append(f"{where}: cell {index}: \"{_clip(sentence)}\" states an outcome before the run; "
                            "say what to look for, or print it from the outcome where its verdict is "
                            f"(a published finding or a definition: cite it, or mark it `{OUTCOME_OK_MARK} why -->`)")
    return problems


def _clip(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
