"""Lesson 06 (carbon metrics): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import Check, check_function, number_or_none


def co2e_grams(fn: Any) -> Check:
    """Check a learner's ``fn(kwh, g_per_kwh, pue) -> grams CO2e`` (energy x intensity x PUE)."""
    cases = [
        ((1.0, 100.0, 1.0), 100.0),
        ((0.5, 400.0, 1.5), 300.0),
        ((2.0, 50.0, 1.1), 110.0),
        ((0.0, 471.84, 1.58), 0.0),
    ]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        kwh, g_per_kwh, pue = args
        if math.isclose(value, kwh * g_per_kwh, rel_tol=1e-9) and pue != 1.0:
            return "multiply by the PUE too: the facility's overhead counts."
        if pue and math.isclose(value, kwh * g_per_kwh / pue, rel_tol=1e-9):
            return "PUE multiplies (total facility energy = IT energy x PUE); do not divide by it."
        if math.isclose(value, kwh * g_per_kwh * pue / 1000, rel_tol=1e-9):
            return "the answer is in grams: kWh x g/kWh is already grams, no /1000 needed."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="co2e_grams", hint=hint)


def best_start_hour(fn: Any) -> Check:
    """Check a learner's ``fn(values, hours_needed) -> start hour`` with the lowest mean
    intensity over a contiguous window (no wrap past the end; ties: earliest hour)."""
    cases = [
        (([300, 200, 100, 50, 60, 400], 2), 3),
        (([5, 1, 1, 5], 1), 1),
        (([10, 500, 500, 10, 10], 2), 3),
        (([7, 7, 7], 3), 0),
        (([90, 80, 70, 200, 10], 3), 0),
    ]

    def hint(args, expected, got):
        values, hours = args
        if got == values.index(min(values)):
            return ("compare the mean of each whole window of hours_needed hours, "
                    "not single hours: the cheapest hour may sit next to expensive ones.")
        return None

    return check_function(fn, cases, name="best_start_hour", hint=hint)
