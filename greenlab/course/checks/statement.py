"""The learner's stakeholder statement (lessons 06 and 09): the elements a decision needs.

A statement for a non-technical reader passes when it holds all five, each found by a pattern:

1. a figure with a unit the reader knows (J, kJ, MJ, Wh, kWh, mg/g/kg/t CO2e), written plainly;
2. whether that figure is measured or estimated, and from what (a meter, a counter, a power model);
3. its uncertainty: a +/- band, an interval, or "no detectable difference";
4. the accuracy it was bought at (a percentage beside the word accuracy);
5. the decision, and the condition under which it holds ("if", "as long as", "unless", ...).

Feedback names every missing element with what to add. The patterns are deliberately plain:
they check that an element is there, not that it is true; the lesson's numbers make it true.
"""

from __future__ import annotations

import re
from typing import Any

from greenlab.course.checks.core import FAILED, NOT_ATTEMPTED, PASSED, Check, is_placeholder
from greenlab.course.checks.core import graded

_NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(_NUMBER + r"\s*(?:[kM]?J|[kM]?Wh|(?:m|k)?g\s*CO2e?|t\s*CO2e?|tonnes?\s+CO2e?|"
                    r"grams?\s+(?:of\s+)?CO2e?)\b", re.IGNORECASE)
UNREADABLE = re.compile(r"\d(?:\.\d+)?[eE][+-]?\d+|\b[mM]icro-?joules?\b|\bµJ\b|\bmJ\b")  # mJ, not MJ
PROVENANCE = re.compile(r"\b(?:measured|estimated|an estimate|estimates?)\b", re.IGNORECASE)
SOURCE = re.compile(r"\b(?:meters?|counters?|RAPL|NVML|power model|model of|sensors?|datasheet|published|"
                    r"CPU time|from the|readings?)\b", re.IGNORECASE)
UNCERTAINTY = re.compile(r"±|\+/-|\binterval\b|\buncertain|\bno detectable difference\b|\bbetween "
                         + _NUMBER + r".{0,20}\band\b|\bfactor of (?:two|2)\b|\bspread\b|\bCI\b", re.IGNORECASE)
ACCURACY = re.compile(r"accura\w*\D{0,40}" + _NUMBER + r"\s*%|" + _NUMBER + r"\s*%[^.]{0,40}accura",
                      re.IGNORECASE)
DECISION = re.compile(r"\b(?:recommend|we (?:will|should|choose|chose|keep|switch|run)|decid\w*|"
                      r"should|choose|adopt|switch to|go with)\b", re.IGNORECASE)
CONDITION = re.compile(r"\b(?:if|unless|as long as|provided|only when|when|while|on condition)\b",
                       re.IGNORECASE)

ELEMENTS = ("figure", "provenance", "uncertainty", "accuracy", "decision")
_ADVICE = {
    "figure": "give the energy (or CO2e) as a number with a unit a reader knows: J, Wh, kWh, g CO2e.",
    "provenance": "say whether the figure is measured or estimated, and from what (e.g. 'estimated "
                  "from a CPU power model', 'measured by the GPU's energy counter').",
    "uncertainty": "give its uncertainty: a ± band, an interval, or 'no detectable difference' when "
                   "the verdict says so.",
    "accuracy": "say what accuracy the saving was bought at, as a percentage (e.g. 'at 71% test "
                "accuracy, within 1 point of the baseline').",
    "decision": "end with the decision and its condition (e.g. 'we recommend the green recipe as "
                "long as the model keeps 70% accuracy').",
}


def statement_elements(text: str) -> dict:
    """{element: True/False} for the five elements of ELEMENTS found in ``text``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return {
        "figure": bool(FIGURE.search(text)),
        "provenance": bool(PROVENANCE.search(text)) and bool(SOURCE.search(text)),
        "uncertainty": bool(UNCERTAINTY.search(text)),
        "accuracy": bool(ACCURACY.search(text)),
        "decision": bool(DECISION.search(text)) and bool(CONDITION.search(text)),
    }


@graded(code=False)
def stakeholder_statement(text: Any) -> Check:
    """Check a learner's stakeholder statement (a str) for the five elements a decision needs;
    the details name each missing one with what to add, and flag figures a reader cannot read
    (``4.08e+03``, microjoules)."""
    name = "stakeholder_statement"
    if is_placeholder(text) or (isinstance(text, str) and not text.strip()):
        return Check(name, NOT_ATTEMPTED, "the statement is still empty: write it in my_statement().")
    if not isinstance(text, str):
        return Check(name, FAILED, f"the statement must be text (a str), got {type(text).__name__}.")
    found = statement_elements(text)
    details = [f"missing {element}: {_ADVICE[element]}" for element in ELEMENTS if not found[element]]
    unreadable = UNREADABLE.search(text)
    if unreadable:
        details.append(f"'{unreadable.group(0)}' is hard for a reader: write plain numbers in J, Wh or "
                       "g CO2e (e.g. 4,080 J or 1.1 Wh).")
    if details:
        have = sum(found.values())
        return Check(name, FAILED, f"{have} of {len(ELEMENTS)} elements found.", details)
    return Check(name, PASSED, "the statement has a figure with its unit, its provenance, its uncertainty, "
                 "the accuracy it was bought at and a decision with its condition.")
