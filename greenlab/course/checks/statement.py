"""The learner's stakeholder statement (lessons 05 and 09): the elements a decision needs.

A statement for a non-technical reader passes when it holds all five, each found by a pattern:

1. a figure with a unit the reader knows (J, kJ, MJ, Wh, kWh, mg/g/kg/t CO2e), written plainly;
2. whether that figure is measured or estimated, and from what (a meter, a counter, a power model);
3. its uncertainty: a +/- band, an interval, or "no detectable difference";
4. the accuracy it was bought at (a percentage beside the word accuracy);
5. the decision, and the condition under which it holds ("if", "as long as", "unless", ...).

Feedback names every missing element with what to add. The patterns alone check that an element is
there, not that it is true: "The meter measured 1 J (±1 J). At 1 % accuracy we recommend it if you
like." has all five. Given ``facts`` about the run the statement describes (:func:`check_against`),
the checker also requires its figures to be the run's (within the rounding they are written with),
its uncertainty the run's, its accuracy the run's and its recommendation to agree with the verdict
(no saving claimed where the verdict is "no detectable difference"). A graded course marks the
statement by hand with :data:`RUBRIC` (``greenlab.course.nbgrader``).

A graded course's autograder does not run the statement's cell again: it shows the output the
learner's own run saved (``greenlab.course.nbgrader_preprocessor``). Where a lesson is run again
all the same (:func:`grade_time_rerun`: nbgrader autograding with grading mode off, or grading
mode), the run has new measurements, so its facts are not those of the run the learner wrote
about and a statement that disagrees with them is not failed for it: the check then passes on the
five elements and lists each disagreement as a note for the person who marks the statement
against the learner's own run. Every verdict ends with the statement as written.
"""

from __future__ import annotations

import os
import re
from typing import Any

from greenlab.course.checks.core import FAILED, NOT_ATTEMPTED, PASSED, Check, graded, is_placeholder
from greenlab.session.devices import grading_mode

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
DECISION = re.compile(r"\b(?:recommend\w*|advi[cs]e|suggest\w*|we (?:will|should|choose|chose|keep|switch|run)|"
                      r"decid\w*|should|choose|adopt|switch to|go with|serve|deploy)\b", re.IGNORECASE)
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


RUBRIC = (
    ("figures", 1, "The energy (or CO2e) figures are the run's, within the rounding they are written with, "
                   "in a unit the reader knows."),
    ("provenance", 1, "Says whether each figure is measured or estimated, and from what."),
    ("uncertainty", 1, "Gives the run's uncertainty, or 'no detectable difference' where the verdict says so."),
    ("accuracy", 1, "States the accuracy the result was bought at, the run's."),
    ("recommendation", 2, "Recommends what the verdict supports (no saving claimed that the intervals do not "
                          "show) and names the condition under which it holds."),
)
_ENERGY_UNITS = {"j": 1.0, "kj": 1e3, "mj": 1e6, "wh": 3600.0, "kwh": 3.6e6, "mwh": 3.6e9}
_MASS_UNITS = {"mg": 1e-3, "g": 1.0, "gram": 1.0, "grams": 1.0, "kg": 1e3, "t": 1e6, "tonne": 1e6, "tonnes": 1e6}
_ENERGY = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(kWh|MWh|Wh|kJ|MJ|J)\b")
_MASS = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(mg|kg|g|grams?|t|tonnes?)\s*(?:of\s+)?CO2e?\b")
_PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*%")
_PLUS_MINUS = re.compile(r"(?:±|\+/-)\s*(\d[\d,]*(?:\.\d+)?)\s*(%|kWh|MWh|Wh|kJ|MJ|J)?")
_SAVING = re.compile(r"\b(?:saves?|saving|saved|less energy|lower energy|reduc\w*|cuts?|cheaper|greener)\b",
                     re.IGNORECASE)


def check_against(text: str, facts: dict) -> list[str]:
    """What in ``text`` disagrees with ``facts`` about the run it describes; empty when nothing does.

    ``facts`` may hold ``joules`` (a number or a list: the run's energies, J), ``g_co2e`` (grams),
    ``accuracy`` (a fraction 0-1, or a list), ``uncertainty`` (the relative uncertainty of the
    energy, a fraction) and ``verdict`` (the comparison's words, e.g. "no detectable difference").
    A figure matches when the run's value, written with the figure's own number of decimals, is
    that figure (or within 2 %, for a figure rounded further)."""
    problems = []
    joules = _as_list(facts.get("joules"))
    grams = _as_list(facts.get("g_co2e"))
    accuracies = [100 * a for a in _as_list(facts.get("accuracy"))]
    if joules:
        for number, unit in _ENERGY.findall(text):
            value, scale = _number(number), _ENERGY_UNITS[unit.lower()]
            if not any(_agrees(number, value, j / scale) for j in joules):
                problems.append(f"{number} {unit} is not the run's energy (the run: "
                                f"{', '.join(f'{j:,.0f} J' for j in joules)}).")
    if grams:
        for number, unit in _MASS.findall(text):
            value, scale = _number(number), _MASS_UNITS[unit.lower()]
            if not any(_agrees(number, value, g / scale) for g in grams):
                problems.append(f"{number} {unit} CO2e is not the run's ({', '.join(f'{g:,.3g} g' for g in grams)}).")
    if accuracies:
        for match in ACCURACY.finditer(text):
            found = _PERCENT.findall(match.group(0))
            # the percentage nearest the word: the first after "accuracy", the last before it
            for number in found[:1] if match.group(0).lower().startswith("accura") else found[-1:]:
                if not any(_agrees(number, float(number), a, tolerance=0.02) for a in accuracies):
                    problems.append(f"{number} % is not the run's accuracy "
                                    f"({', '.join(f'{a:.1f} %' for a in accuracies)}).")
    uncertainty = facts.get("uncertainty")
    if uncertainty is not None:
        for number, unit in _PLUS_MINUS.findall(text):
            value = _number(number)
            if unit == "%" or not unit:
                want = 100 * uncertainty
            elif joules:
                want = uncertainty * joules[0] / _ENERGY_UNITS[unit.lower()]
            else:
                continue
            if not _agrees(number, value, want, tolerance=0.1):
                problems.append(f"±{number}{' ' + unit if unit else ''} is not the run's uncertainty "
                                f"(±{100 * uncertainty:.0f} %).")
    verdict = str(facts.get("verdict") or "")
    if "no detectable difference" in verdict.lower() and _SAVING.search(text) \
            and "no detectable difference" not in text.lower():
        problems.append(f"the statement claims a saving ('{_SAVING.search(text).group(0)}') but the verdict is "
                        "'no detectable difference': say so, and recommend on other grounds.")
    return list(dict.fromkeys(problems))


@graded(code=False)
def stakeholder_statement(text: Any, facts: dict | None = None) -> Check:
    """Check a learner's stakeholder statement (a str) for the five elements a decision needs;
    the details name each missing one with what to add, and flag figures a reader cannot read
    (``4.08e+03``, microjoules). With ``facts`` about the run it describes (see
    :func:`check_against`), its figures, uncertainty, accuracy and recommendation must agree
    with the run's."""
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
    written = f"the statement as written: {text}"  # what the learner's run wrote, for them and the marker
    if details:
        have = sum(found.values())
        return Check(name, FAILED, f"{have} of {len(ELEMENTS)} elements found.", details + [written])
    disagreements = check_against(text, facts) if facts else []
    rerun = grade_time_rerun() if facts else None
    elements = ("the statement has a figure with its unit, its provenance, its uncertainty, the accuracy it was "
                "bought at and a decision with its condition")
    if rerun is not None:  # these facts are the rerun's, not those of the run the statement was written about
        notes = [f"differs from the grade-time run (a note for the marker, no fault by itself): {d}"
                 for d in disagreements]
        agree = ("its figures agree with the grade-time run" if not disagreements else
                 "its figures are for the marker to check against the learner's own run")
        return Check(name, PASSED, f"{elements}; {agree}: the lesson ran again at grade time ({rerun}), at its "
                     "smallest size, with new measurements.", notes + [written])
    if disagreements:
        return Check(name, FAILED, "the statement does not describe the run it is about.", disagreements + [written])
    return Check(name, PASSED, elements + ".", [written])


def grade_time_rerun(environ=None) -> str | None:
    """Why this process is a grade-time rerun of a lesson (nbgrader autograding it, or grading mode,
    ``GREENLAB_GRADING``), or None: then a statement's facts are not those of the run it describes."""
    environ = os.environ if environ is None else environ
    if environ.get("NBGRADER_EXECUTION") == "autograde":
        return "nbgrader is autograding"
    try:
        return "grading mode (GREENLAB_GRADING)" if grading_mode(environ) else None
    except ValueError:  # a value grading mode cannot read: the lesson's own setup says so
        return None


# --- helpers ----------------------------------------------------------------------------------

def _as_list(value) -> list[float]:
    if value is None:
        return []
    values = value if isinstance(value, (list, tuple)) else [value]
    return [float(v) for v in values if v is not None]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _agrees(written: str, value: float, truth: float, tolerance: float = 0.02) -> bool:
    """True when ``truth`` written with ``written``'s decimals reads ``value``, or is within ``tolerance``
    (relative) of it."""
    decimals = len(written.split(".", 1)[1]) if "." in written else 0
    if round(truth, decimals) == round(value, decimals):
        return True
    return abs(value - truth) <= tolerance * max(abs(truth), 1e-12)
