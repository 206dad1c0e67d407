"""Lesson 13 (operating training): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import Check, check_function, drawn_inputs, graded, variant_hint
from greenlab.techniques import preemption
from greenlab.techniques.monitoring import alert_times

_INTERVAL_INPUTS = [(0.07, 1.0), (30.0, 36000.0), (1.0, 2.0), (0.5, 100.0), (5.0, 4.0), (10.0, 3.0)]


@graded(reference=("greenlab.techniques.preemption:young_interval",))
def young_interval(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(checkpoint_s, mtbf_s) -> seconds`` against Young's (1974) optimum,
    ``sqrt(2 * checkpoint_s * mtbf_s)``."""
    inputs = _INTERVAL_INPUTS[:4] + drawn_inputs(seed, "young_interval", _draw_interval)
    cases = [(args, preemption.young_interval(*args)) for args in inputs]
    wrong = [
        (lambda d, m: math.sqrt(d * m), "Young's interval has a factor 2 under the root: sqrt(2 * d * M)."),
        (lambda d, m: math.sqrt(2 * d / m), "multiply the checkpoint cost by the mean time between failures, "
                                            "do not divide: rarer failures allow longer intervals."),
        (lambda d, m: 2 * d * m, "take the square root of 2 * d * M: the cost of writing (d / tau) and the "
                                 "expected loss (tau / 2M) balance at tau = sqrt(2 d M)."),
        (lambda d, m: m / 2, "the interval depends on the checkpoint cost as well as on M: sqrt(2 * d * M)."),
    ]
    return check_function(fn, cases, rtol=1e-6, name="young_interval", hint=variant_hint(wrong))


@graded(reference=("greenlab.techniques.preemption:daly_interval",))
def daly_interval(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(checkpoint_s, mtbf_s) -> seconds`` against Daly's (2006)
    higher-order optimum (``gl.preemption.daly_interval``), including its ``d >= 2M`` case."""
    inputs = _INTERVAL_INPUTS + drawn_inputs(seed, "daly_interval", _draw_interval)
    cases = [(args, preemption.daly_interval(*args)) for args in inputs]

    def young(d, m):
        return math.sqrt(2 * d * m)

    def no_minus(d, m):
        if d >= 2 * m:
            return m
        x = d / (2 * m)
        return young(d, m) * (1 + math.sqrt(x) / 3 + x / 9)

    def no_cap(d, m):
        x = d / (2 * m)
        return young(d, m) * (1 + math.sqrt(x) / 3 + x / 9) - d

    def no_third(d, m):
        if d >= 2 * m:
            return m
        x = d / (2 * m)
        return young(d, m) * (1 + math.sqrt(x) + x) - d

    wrong = [
        (young, "that is Young's first-order interval; Daly multiplies it by "
                "(1 + sqrt(d/2M)/3 + (d/2M)/9) and subtracts d."),
        (no_minus, "subtract the checkpoint cost d at the end: Daly's tau is compute time between the end "
                   "of one write and the start of the next."),
        (no_cap, "when the checkpoint costs at least twice the mean time between failures (d >= 2M), "
                 "Daly's optimum is tau = M."),
        (no_third, "the correction terms are sqrt(d/2M) / 3 and (d/2M) / 9, not sqrt(d/2M) and d/2M."),
    ]
    return check_function(fn, cases, rtol=1e-6, name="daly_interval", hint=variant_hint(wrong))


@graded(reference=("greenlab.techniques.monitoring:alert_times",))
def idle_alert(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(times_s, values, below, for_s) -> list of seconds`` against
    ``gl.monitoring.alert_times``: fire once per stretch of samples below ``below``, at the first
    sample at least ``for_s`` seconds into the stretch."""
    inputs = [
        ([0, 1, 2, 3, 4, 5], [50, 5, 5, 5, 50, 50], 10, 2),
        ([0, 1, 2, 3, 4, 5, 6], [5, 5, 5, 5, 5, 5, 5], 10, 2),
        ([0, 1, 2, 3, 4, 5, 6, 7], [5, 5, 50, 5, 5, 50, 5, 5], 10, 2),
        ([0, 1, 2, 3, 4, 5, 6, 7, 8], [5, 5, 5, 50, 5, 5, 5, 5, 50], 10, 2),
        ([0, 1, 2, 3], [10, 10, 10, 10], 10, 1),
        ([0.0, 0.1, 0.2, 3.0, 3.1], [5, 5, 5, 5, 5], 10, 2.5),
        ([0, 1, 2], [50, 50, 50], 10, 0),
        ([0, 1, 2, 3], [5, 50, 5, 50], 10, 0),
        ([], [], 10, 1),
    ] + drawn_inputs(seed, "idle_alert", _draw_samples)
    cases = [(args, alert_times(*args)) for args in inputs]

    def every_sample(times, values, below, for_s):
        out, since = [], None
        for t, v in zip(times, values):
            since = (t if since is None else since) if v < below else None
            if since is not None and t - since >= for_s:
                out.append(t)
        return out

    def at_or_below(times, values, below, for_s):
        return alert_times(times, values, below + 1e-9, for_s)

    def never_resets(times, values, below, for_s):
        out, total, last, done = [], 0.0, None, False
        for t, v in zip(times, values):
            if v < below:
                total += 0.0 if last is None else t - last
                last = t
                if not done and total >= for_s:
                    out.append(t)
                    done = True
        return out

    def counts_samples(times, values, below, for_s):
        out, run = [], 0
        for t, v in zip(times, values):
            run = run + 1 if v < below else 0
            if run == int(for_s) + 1:
                out.append(t)
        return out

    def at_stretch_start(times, values, below, for_s):
        out, since = [], None
        for t, v in zip(times, values):
            if v < below:
                if since is None:
                    since = t
            else:
                if since is not None and t - since >= for_s:
                    out.append(since)
                since = None
        return out

    wrong = [
        (every_sample, "fire once per stretch below the threshold, not at every sample of it: one idle "
                       "period is one alert."),
        (at_or_below, "a value equal to the threshold is not below it: use values < below."),
        (never_resets, "a sample at or above the threshold ends the stretch: the time below must be "
                       "continuous, so start counting again at the next low sample."),
        (counts_samples, "for_s is in seconds: compare the sample's time with the time the stretch began, "
                         "not the number of samples (monitors do not sample evenly)."),
        (at_stretch_start, "the alert fires when the condition has held for for_s (the time you learn of it), "
                           "not at the time the stretch began, and it fires while the stretch goes on."),
    ]

    def as_list(times, values, below, for_s):
        got = fn(times, values, below, for_s)
        if got is None:
            return None
        try:
            return [float(t) for t in got]
        except TypeError:
            return got

    if fn is None or not callable(fn):
        return check_function(fn, cases, name="idle_alert")
    as_list.__name__ = "idle_alert"
    return check_function(as_list, cases, name="idle_alert", hint=variant_hint(wrong))


def _draw_interval(rng) -> tuple:
    mtbf_s = round(rng.uniform(0.5, 50_000.0), 1)
    # mostly a checkpoint far cheaper than M, sometimes one of at least 2 M (Daly's other case)
    return (round(mtbf_s * rng.choice([rng.uniform(1e-4, 0.1), rng.uniform(2.0, 4.0)]), 3), mtbf_s)


def _draw_samples(rng) -> tuple:
    # whole seconds and watts, a threshold between them: no float tie decides a case
    times = sorted(rng.sample(range(0, 40), rng.randint(0, 14)))
    return (times, [rng.choice([3, 5, 8, 60, 90]) for _ in times], 10, rng.choice([0, 1, 2, 3, 5]))
