"""Lesson 00 (measuring energy): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Check,
    check_function,
    is_placeholder,
)


def joules_per_gflop(fn: Any) -> Check:
    """Check a learner's ``fn(joules, flops) -> joules per GFLOP`` (1 GFLOP = 1e9 FLOP)."""
    cases = [
        ((100.0, 2e9), 50.0),
        ((3.0, 1e9), 3.0),
        ((3.6e6, 1e12), 3600.0),
        ((0.25, 5e8), 0.5),
    ]

    def hint(args, expected, got):
        try:
            ratio = float(got) / float(expected)
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        if math.isclose(ratio, 1e-9, rel_tol=1e-6):
            return "divide by GFLOPs (flops / 1e9), not by raw FLOPs."
        if math.isclose(ratio, 1e9, rel_tol=1e-6):
            return "the factor 1e9 went the wrong way: GFLOPs = flops / 1e9."
        joules, flops = args
        if math.isclose(float(got), (flops / 1e9) / joules, rel_tol=1e-6):
            return "that is GFLOPs per joule; the question asks for joules per GFLOP."
        return None

    return check_function(fn, cases, rtol=1e-9, name="joules_per_gflop", hint=hint)






def energy_window(measurement: Any, min_seconds: float = 0.0, name: str = "energy window") -> Check:
    """Check a learner's measurement window (a ``greenlab.energy.Measurement``).

    Passes when the window has at least one component, every component names its source,
    the energy is a finite number > 0, the window raised no short-window warning (it lasted
    at least 10 of its counters' update periods), nothing was lost (``problems`` is empty) and
    it lasted at least ``min_seconds``.
    ``None`` is "not attempted".
    """
    if not (isinstance(min_seconds, (int, float)) and not isinstance(min_seconds, bool)
            and math.isfinite(min_seconds) and min_seconds >= 0):
        raise ValueError(f"min_seconds must be a finite number >= 0, got {min_seconds!r}")
    if is_placeholder(measurement):
        return Check(name, NOT_ATTEMPTED, "no measurement yet (the value is still None).")
    if not all(hasattr(measurement, a) for a in ("joules", "seconds", "components", "warnings")):
        return Check(name, FAILED, f"expected the Measurement of a gl.measure window (its .result), "
                                   f"got {type(measurement).__name__}.",
                     ["with gl.measure('label') as window: ... then use window.result"])
    problems: list[str] = []
    try:
        components = dict(measurement.components)
    except Exception as exc:  # an odd object: a wrong answer, never an error
        return Check(name, FAILED, f"the measurement's components are not a mapping ({type(exc).__name__}).")
    if not components:
        problems.append("the window has no energy components: no source could measure it.")
    unlabelled = sorted(k for k, c in components.items() if not getattr(c, "source", ""))
    if unlabelled:
        problems.append(f"components without a source label: {', '.join(unlabelled)}.")
    try:
        joules = float(measurement.joules)
        seconds = float(measurement.seconds)
    except Exception as exc:  # an odd object: a wrong answer, never an error
        return Check(name, FAILED, f"the measurement's joules/seconds are not numbers ({type(exc).__name__}: {exc}).")
    if not (math.isfinite(joules) and joules > 0):
        problems.append(f"the energy is {joules!r} J; a real window uses more than 0 J.")
    short = [w for w in measurement.warnings if "shorter than" in str(w)]
    if short:
        problems.append("the window was shorter than 10 of its counter's update periods; repeat "
                        "the work many times inside one window and divide by the number of calls.")
    lost = list(getattr(measurement, "problems", []) or [])
    if lost:
        problems.append("the measurement is incomplete: " + "; ".join(lost))
    if seconds < min_seconds:
        problems.append(f"the window lasted {seconds:.3g} s; make it last at least "
                        f"{min_seconds:g} s so the counters move many times.")
    if problems:
        return Check(name, FAILED, f"{len(problems)} problem(s) with this window.", problems)
    sources = ", ".join(f"{k} {c.source}{' (estimate)' if c.estimated else ''}"
                        for k, c in components.items())
    return Check(name, PASSED, f"{joules:.4g} J over {seconds:.3g} s from {sources}.")
