"""The claims rule for constants: a lesson that states one of the library's constants in words
("a window shorter than 10 update periods") states the value the library holds, so changing the
constant breaks the check instead of leaving a sentence that drifted from the code.

``STATED_CONSTANTS`` lists each constant a lesson states, with the phrases that state it; a number
in such a phrase, in a lesson's markdown or the fixed text of its code (string literals and the
literal parts of f-strings), must equal the constant. A value printed through a replacement field
is the constant itself and is not read. ``python -m greenlab.course check`` runs this rule beside
the others.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable

from greenlab.course.claims_equivalence import readable_texts
from greenlab.experiments import verdicts

# the module, not the function greenlab.energy exports under the same name
_measure = importlib.import_module("greenlab.energy.measure")

_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "fifty": 50}
_NUMBER = r"(?P<n>\d+(?:\.\d+)?|" + "|".join(_WORDS) + r")"


@dataclass(frozen=True)
class StatedConstant:
    """A constant of the library (``name``, read by ``value`` at check time) and the phrases in which
    a lesson states it (``phrase``, whose group ``n`` is the number); ``scale`` turns the constant
    into the number a lesson writes (100 for a fraction written in points)."""

    name: str
    phrase: re.Pattern
    value: Callable[[], float]
    scale: float = 1.0

    def stated(self) -> float:
        return self.value() * self.scale


STATED_CONSTANTS = (
    StatedConstant(
        "greenlab.energy.measure.SHORT_WINDOW_PERIODS",
        re.compile(rf"\b{_NUMBER}\s+(?:of\s+(?:its|the|this|a)\s+)?(?:[\w-]+(?:'s|’s)\s+)?update\s+periods\b",
                   re.IGNORECASE),
        lambda: _measure.SHORT_WINDOW_PERIODS),
    StatedConstant(
        "greenlab.experiments.verdicts.CHANCE_MARGIN",
        re.compile(rf"\b{_NUMBER}\s+(?:accuracy\s+)?points?\s+above\s+chance\b"
                   rf"|\bclears?\s+chance\s+by\s+(?:more\s+than\s+)?{_NUMBER.replace('?P<n>', '?P<m>')}\s+points?\b",
                   re.IGNORECASE),
        lambda: verdicts.CHANCE_MARGIN, scale=100),
)


def drifted_constant(text: str) -> str | None:
    """The first phrase of ``text`` that states a constant of ``STATED_CONSTANTS`` with a value
    other than the library's, described, or None."""
    for constant in STATED_CONSTANTS:
        for match in constant.phrase.finditer(text):
            groups = match.groupdict()
            written = groups.get("n") or groups.get("m")
            number = _WORDS[written.lower()] if written.lower() in _WORDS else float(written)
            if abs(number - constant.stated()) > 1e-9:
                phrase = " ".join(match.group(0).split())
                return (f"\"{phrase}\" states {constant.name} as {written}, but the library holds "
                        f"{constant.stated():g}")
    return None


def notebook_constant_problems(nb: dict[str, Any], where: str = "notebook") -> list[str]:
    """One text per markdown cell or fixed code text of ``nb`` that states a library constant with
    a value the library no longer holds."""
    problems = []
    for index, fixed in readable_texts(nb):
        drift = drifted_constant(fixed)
        if drift:
            problems.append(f"{where}: cell {index}: {drift}; print it from the constant, or correct the text")
    return problems
