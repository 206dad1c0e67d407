"""Lesson 05 (carbon metrics): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import Check, check_function, drawn, graded, number_or_none, variant_hint
from greenlab.impact import scheduling


@graded
def co2e_grams(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(kwh, g_per_kwh, pue) -> grams CO2e`` (energy x intensity x PUE);
    with ``seed`` (grade time), on four more cases drawn from it."""
    cases = [
        ((1.0, 100.0, 1.0), 100.0),
        ((0.5, 400.0, 1.5), 300.0),
        ((2.0, 50.0, 1.1), 110.0),
        ((0.0, 471.84, 1.58), 0.0),
    ]
    rng = drawn(seed, "co2e_grams")
    for _ in range(4 if rng else 0):
        kwh, g, pue = round(rng.uniform(0.01, 80), 3), round(rng.uniform(15, 900), 1), round(rng.uniform(1.05, 2.2), 2)
        cases.append(((kwh, g, pue), kwh * g * pue))

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


@graded(reference=("greenlab.impact.scheduling:best_window", "greenlab.impact.scheduling:window_means",))
def best_start_hour(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(values, hours_needed) -> start hour`` with the lowest mean
    intensity over a contiguous window (no wrap past the end; ties: earliest hour); with
    ``seed`` (grade time), on four more forecasts drawn from it."""
    cases = [
        (([300, 200, 100, 50, 60, 400], 2), 3),
        (([5, 1, 1, 5], 1), 1),
        (([10, 500, 500, 10, 10], 2), 3),
        (([7, 7, 7], 3), 0),
        (([90, 80, 70, 200, 10], 3), 0),
    ]
    rng = drawn(seed, "best_start_hour")
    for _ in range(4 if rng else 0):
        values = [rng.randint(20, 700) for _ in range(rng.randint(4, 24))]
        hours = rng.randint(1, len(values))
        sums = [sum(values[i:i + hours]) for i in range(len(values) - hours + 1)]
        cases.append(((values, hours), sums.index(min(sums))))

    def hint(args, expected, got):
        values, hours = args
        if got == values.index(min(values)):
            return ("compare the mean of each whole window of hours_needed hours, "
                    "not single hours: the cheapest hour may sit next to expensive ones.")
        return None

    return check_function(fn, cases, name="best_start_hour", hint=hint)


@graded(reference=("greenlab.impact.scheduling:schedule_jobs",))
def schedule_jobs(fn: Any) -> Check:
    """Check a learner's ``fn(values, jobs) -> {name: sorted hours or None}`` against
    ``gl.scheduling.schedule_jobs``: one machine, earliest deadline first, each job in the
    cleanest free hours before its deadline (contiguous unless it is interruptible)."""
    def job(name, hours, deadline, interruptible):
        return {"name": name, "hours": hours, "deadline": deadline, "interruptible": interruptible}

    inputs = [
        ([5, 1, 4, 2, 3], [job("a", 2, 5, True)]),
        ([5, 1, 4, 2, 3], [job("a", 2, 5, False)]),
        ([9, 1, 1, 9, 0, 0], [job("late", 2, 6, True), job("soon", 1, 3, True)]),
        ([3, 3, 1, 1, 2, 8], [job("x", 2, 6, False), job("y", 2, 6, False)]),
        ([4, 2, 6, 1], [job("a", 3, 3, True), job("b", 2, 4, True)]),
        ([1, 7, 1, 7, 1, 2, 2], [job("block", 2, 7, False), job("bits", 2, 7, True)]),
        ([2, 2, 2, 2], [job("first", 1, 4, True), job("second", 1, 4, False)]),
        ([1, 5, 9, 9], [job("later", 1, 4, True), job("now", 1, 1, True)]),
        ([6, 1, 2, 8], [job("long", 3, 4, True), job("short", 2, 2, False)]),
    ]
    cases = [(args, scheduling.schedule_jobs(*args)) for args in inputs]

    def ignores_deadlines(values, jobs):
        relaxed = [{**j, "deadline": len(values)} for j in jobs]
        return scheduling.schedule_jobs(values, relaxed)

    def given_order(values, jobs):  # no earliest-deadline-first
        taken, plan = set(), {}
        for j in jobs:
            free = [h for h in range(j["deadline"]) if h not in taken]
            if j["interruptible"]:
                chosen = sorted(sorted(free, key=lambda h: (values[h], h))[:j["hours"]])
            else:
                runs = [list(range(s, s + j["hours"])) for s in range(j["deadline"] - j["hours"] + 1)
                        if not taken.intersection(range(s, s + j["hours"]))]
                chosen = min(runs, key=lambda r: (sum(values[h] for h in r), r[0]), default=[])
            plan[j["name"]] = chosen if len(chosen) == j["hours"] else None
            taken.update(chosen or [])
        return plan

    def never_interrupts(values, jobs):
        return scheduling.schedule_jobs(values, [{**j, "interruptible": False} for j in jobs])

    def overlaps(values, jobs):  # each job planned as if alone on the machine
        return {j["name"]: scheduling.schedule_jobs(values, [j])[j["name"]] for j in jobs}

    wrong = [
        (ignores_deadlines, "a job may only use hours before its deadline (hours 0 .. deadline - 1)."),
        (overlaps, "there is one machine: an hour given to one job is not free for the next."),
        (never_interrupts, "an interruptible job may take any free hours, not only a contiguous block: "
                           "pick its cleanest free hours one by one."),
        (given_order, "plan the job with the earliest deadline first (ties: the order given); a later "
                      "deadline can wait for the hours left."),
    ]

    def unsorted(args, expected, got):
        if isinstance(got, dict) and any(isinstance(v, list) and v != sorted(v) for v in got.values()):
            return "return each job's hours sorted."
        return None

    return check_function(fn, cases, name="schedule_jobs", hint=variant_hint(wrong, unsorted))
