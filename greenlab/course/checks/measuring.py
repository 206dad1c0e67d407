"""Lesson 00 (measuring energy): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.base.units import plain_number
from greenlab.course.checks.core import (
    CheckerArgumentError, FAILED, FLOAT32_RTOL, NOT_ATTEMPTED, PASSED, Check, check_function, drawn_inputs, graded,
    is_placeholder, number_or_none)
from greenlab.energy.rapl import unwrap_delta


@graded
def joules_per_gflop(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(joules, flops) -> joules per GFLOP`` (1 GFLOP = 1e9 FLOP)."""
    cases = [
        ((100.0, 2e9), 50.0),
        ((3.0, 1e9), 3.0),
        ((3.6e6, 1e12), 3600.0),
        ((0.25, 5e8), 0.5),
    ]
    cases += [((j, f), j / (f / 1e9)) for j, f in drawn_inputs(seed, "joules_per_gflop", lambda rng: (
        round(rng.uniform(0.01, 5000.0), 3), rng.choice([1e8, 5e8, 1e9, 3e9, 2e12]) * rng.randint(1, 9)))]

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






@graded(code=False)
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
        raise CheckerArgumentError(f"min_seconds must be a finite number >= 0, got {min_seconds!r}")
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
    joules, seconds = measurement.joules, measurement.seconds
    for what, value in (("joules", joules), ("seconds", seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):  # a text "2" is no duration
            return Check(name, FAILED, f"the measurement's {what} is not a number (got {type(value).__name__}).",
                         ["with gl.measure('label') as window: ... then use window.result"])
    joules, seconds = float(joules), float(seconds)
    if not (math.isfinite(joules) and joules > 0):
        problems.append(f"the energy is {joules!r} J; a real window uses more than 0 J.")
    if not (math.isfinite(seconds) and seconds > 0):
        problems.append(f"the window lasted {seconds!r} s; a real window lasts a finite time > 0 s.")
    short = [w for w in measurement.warnings if "shorter than" in str(w)]
    if short:
        problems.append("the window was shorter than 10 of its counter's update periods; repeat "
                        "the work many times inside one window and divide by the number of calls.")
    lost = list(getattr(measurement, "problems", []) or [])
    if lost:
        problems.append("the measurement is incomplete: " + "; ".join(lost))
    if seconds < min_seconds:
        problems.append(f"the window lasted {plain_number(seconds)} s; make it last at least "
                        f"{min_seconds:g} s so the counters move many times.")
    if problems:
        return Check(name, FAILED, f"{len(problems)} problem(s) with this window.", problems)
    sources = ", ".join(f"{k} {c.source}{' (estimate)' if c.estimated else ''}"
                        for k, c in components.items())
    return Check(name, PASSED, f"{plain_number(joules, 4)} J over {plain_number(seconds)} s from {sources}.")


@graded(reference=("greenlab.energy.rapl:unwrap_delta",))
def counter_joules(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(before_uj, after_uj, max_range_uj) -> joules``: the energy between
    two reads of a RAPL-style counter in microjoules that wraps to zero after ``max_range_uj``
    (``/sys/class/powercap/.../max_energy_range_uj``), allowing for one wrap. Expected values
    come from ``greenlab.energy.rapl.unwrap_delta`` (microjoules) / 1e6."""
    max_range = 262_143_328_850  # a package domain's range on many Intel CPUs (about 262 kJ)
    inputs = [(1_000_000, 6_000_000, max_range), (max_range - 2_000_000, 3_000_000, max_range),
              (5, 5, 1000), (900, 100, 1000), (0, 999, 1000)]
    inputs += drawn_inputs(seed, "counter_joules", _draw_counter)
    cases = [(args, unwrap_delta(*args) / 1e6) for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        before, after, max_range_uj = args
        if math.isclose(value, (after - before) / 1e6, rel_tol=1e-9) and after < before:
            return ("the counter wrapped (the second read is smaller than the first): add the part up to "
                    "max_range_uj, (max_range_uj - before) + after.")
        if math.isclose(value, expected * 1e6, rel_tol=1e-9) and expected:
            return "the counter counts microjoules: divide by 1e6 for joules."
        if math.isclose(value, abs(after - before) / 1e6, rel_tol=1e-9):
            return ("abs() gives the distance between the two reads, not the energy that passed the wrap: "
                    "after a wrap it is (max_range_uj - before) + after.")
        if after < before and math.isclose(value, (after - before + 2 * max_range_uj) / 1e6, rel_tol=1e-9):
            return "one wrap adds max_range_uj once, not twice."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="counter_joules", hint=hint)


@graded
def integrate_power(fn: Any) -> Check:
    """Check a learner's ``fn(times_s, watts, max_gap_s) -> (joules, missing_s)``: the energy of
    irregular power samples by the trapezoid rule, never bridging two samples more than
    ``max_gap_s`` apart (a failed read); ``missing_s`` is the total length of such gaps, whose
    energy is unknown. Expected values: ``torch.trapezoid`` over each run of samples between gaps."""
    cases = [(args, _power_reference(*args)) for args in _POWER_CASES]

    def hint(args, expected, got):
        try:
            joules, missing = float(got[0]), float(got[1])
        except (TypeError, ValueError, IndexError, KeyError):
            return "return two numbers: (joules, missing_s)."
        times, watts, max_gap = args
        if expected[1] > 0 and math.isclose(joules, _power_reference(times, watts, math.inf)[0], rel_tol=1e-9):
            return ("the gap was bridged: two samples more than max_gap_s apart say nothing about the power "
                    "between them, so leave that interval out and count it in missing_s.")
        left = sum(w0 * (t1 - t0) for t0, t1, w0 in zip(times, times[1:], watts)
                   if t1 - t0 <= max_gap)
        right = sum(w1 * (t1 - t0) for t0, t1, w1 in zip(times, times[1:], watts[1:])
                    if t1 - t0 <= max_gap)
        if (math.isclose(joules, left, rel_tol=1e-9) or math.isclose(joules, right, rel_tol=1e-9)) \
                and not math.isclose(joules, expected[0], rel_tol=1e-9):
            return "that is a rectangle rule (one end's power x dt); the trapezoid uses the mean of both ends."
        if math.isclose(joules, expected[0], rel_tol=1e-9) and not math.isclose(missing, expected[1]):
            return "the energy is right; missing_s is the total length of the intervals longer than max_gap_s."
        if expected[1] > 0 and joules < expected[0]:
            return ("only the interval across the gap is unknown: keep the samples on both sides of it and "
                    "integrate each side.")
        return None

    # torch.trapezoid on torch.tensor(times) is float32: a right answer returned with float() is off by its rounding
    return check_function(fn, cases, rtol=FLOAT32_RTOL, atol=1e-12, name="integrate_power", hint=hint)


# irregular samples (seconds, watts, max gap); the third and fifth have a gap that must not be bridged
_POWER_CASES = [
    ([0.0, 0.1, 0.25, 0.3, 0.45], [10.0, 12.0, 11.0, 30.0, 30.0], 0.5),
    ([0.0, 1.0, 2.0, 4.0], [100.0, 100.0, 100.0, 100.0], 1.5),
    ([0.0, 0.1, 0.2, 1.7, 1.8, 1.95], [5.0, 7.0, 6.0, 40.0, 42.0, 41.0], 0.5),
    ([2.0, 2.5], [3.0, 9.0], 1.0),
    ([0.0, 0.2, 1.0, 1.2, 3.0, 3.1], [20.0, 22.0, 21.0, 25.0, 19.0, 18.0], 0.5),
]


def _power_reference(times_s, watts, max_gap_s):
    """(joules, missing seconds) with ``torch.trapezoid`` over each run of samples between gaps."""
    import torch

    t = torch.tensor(times_s, dtype=torch.float64)
    w = torch.tensor(watts, dtype=torch.float64)
    dt = t[1:] - t[:-1]
    gaps = torch.nonzero(dt > max_gap_s).flatten().tolist()
    joules, start = 0.0, 0
    for g in gaps + [len(t) - 1]:
        joules += float(torch.trapezoid(w[start:g + 1], t[start:g + 1]))
        start = g + 1
    return joules, float(dt[dt > max_gap_s].sum())


def _draw_counter(rng) -> tuple:
    max_range = rng.choice([1000, 65_532_610_987, 262_143_328_850])
    return (rng.randrange(max_range), rng.randrange(max_range), max_range)
