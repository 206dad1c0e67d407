"""Watching a running job (lesson 13): an idle / data-stall alert rule over a power trace, and a
callback that stalls a run's input on purpose so there is something to catch.

- ``alert_times``: the times an alert fires when ``values`` stay below a threshold for at least
  ``for_s`` seconds (once per such stretch), the rule Prometheus writes as ``expr`` plus ``for``;
- ``trace``: (seconds, watts) of one component from a ``PowerMonitor``'s samples;
- ``Stall``: a ``gl.train`` callback that waits ``seconds`` after step ``at_step``, as a run waits
  for a slow network file system.
"""

from __future__ import annotations

import math
import time

from greenlab.base import validation


def alert_times(times_s, values, below: float, for_s: float) -> list:
    """Seconds at which the alert fires: in each stretch of consecutive samples whose value is
    ``< below``, the first sample at least ``for_s`` seconds after the stretch began (a stretch
    shorter than that fires nothing; one that goes on fires once)."""
    times_s, values = validation.items("times_s", times_s), validation.items("values", values)
    for t in times_s:  # checked, kept as given (the times it returns are the caller's own)
        validation.number("each of times_s", t)
    for v in values:
        validation.number("each of values", v)
    if any(b < a for a, b in zip(times_s, times_s[1:])):
        raise ValueError("times_s must not decrease (samples in time order)")
    if len(times_s) != len(values):
        raise ValueError(f"times_s and values differ in length: {len(times_s)} and {len(values)}")
    validation.number("below", below)
    validation.number("for_s", for_s, low=0)
    fired, since, done = [], None, False
    for t, v in zip(times_s, values):
        if v < below:
            if since is None:
                since, done = t, False
            if not done and t - since >= for_s:
                fired.append(t)
                done = True
        else:
            since = None
    return fired


def trace(samples, component: str = "cpu") -> tuple:
    """(times in s, watts) of ``component`` from a ``PowerMonitor`` or a list of its samples;
    samples without that component are left out."""
    if hasattr(samples, "samples") and callable(samples.samples):
        samples = samples.samples()
    times, watts = [], []
    for s in samples:
        w = s.watts.get(component)
        if w is not None and math.isfinite(w):
            times.append(float(s.t_s))
            watts.append(float(w))
    return times, watts


class Stall:
    """A ``gl.train`` callback: after optimizer step ``at_step`` it sleeps ``seconds`` (the
    process holds its memory and device but does no work, as when its input stalls)."""

    def __init__(self, at_step: int, seconds: float):
        self.at_step = validation.integer("at_step", at_step, low=1)
        self.seconds = validation.number("seconds", seconds, low=0)
        self.started_s: float | None = None  # time.monotonic() when the stall began

    def on_step(self, state) -> None:
        if state.step == self.at_step:
            self.started_s = time.monotonic()
            time.sleep(self.seconds)
