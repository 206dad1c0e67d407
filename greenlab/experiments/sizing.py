"""Work sized so that its energy window is long enough to read (lessons 00, 02, 03, 07).

A window shorter than ``SHORT_WINDOW_PERIODS`` update periods of its slowest energy source is
"not measurable at this size" (``ShortWindowWarning``, ``Measurement.short``), and verdicts built
on it say so. Lesson 00's advice is to repeat the work inside one window until it is long enough;
these helpers say how much:

    min_s = gl.experiments.min_window_seconds()          # e.g. 0.1 s for a CPU estimate (10 ms ticks)
    n = gl.experiments.repeats_to_fill(seconds_once)     # repeats of a piece of work
    epochs = gl.experiments.epochs_to_fill(model_fn, data, cfg)   # epochs of a training run

``FILL_MARGIN`` (3) asks for three times the shortest readable window, so a run that goes faster
next time (a quieter machine) still clears it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings

from greenlab.base import progress, validation
from greenlab.energy.measure import SHORT_WINDOW_PERIODS, ShortWindowWarning

FILL_MARGIN = 3.0  # aim at this many times the shortest readable window


def min_window_seconds(sources=None) -> float:
    """The shortest window ``sources`` (default: this machine's CPU sources, or its GPUs' when
    torch uses CUDA) read reliably: ``SHORT_WINDOW_PERIODS`` update periods of the slowest, in
    seconds (0.0 when every source updates continuously)."""
    if sources is None:
        from greenlab.energy.sources import default_sources  # lazy: discovery reads the hardware

        sources = default_sources()
    periods = [float(getattr(s, "update_period_s", 0.0) or 0.0) for s in sources]
    return SHORT_WINDOW_PERIODS * max(periods, default=0.0)


def repeats_to_fill(seconds_once: float, min_seconds: float | None = None, margin: float = FILL_MARGIN,
                    max_repeats: int = 100_000) -> int:
    """How many times to repeat work that took ``seconds_once`` inside one window so that the
    window lasts ``margin`` times ``min_seconds`` (default ``min_window_seconds()``); at least 1."""
    seconds_once = validation.number("seconds_once", seconds_once, low=0)
    margin = validation.number("margin", margin, low=1)
    floor = min_window_seconds() if min_seconds is None else validation.number("min_seconds", min_seconds, low=0)
    if floor == 0:
        return 1
    if seconds_once <= 0:
        return max_repeats
    return max(1, min(max_repeats, math.ceil(margin * floor / seconds_once - 1e-9)))  # 30.000000004 is 30


def epochs_to_fill(model_fn, data, config, margin: float = FILL_MARGIN, sources=None, train_fn=None,
                   max_epochs: int = 1000) -> int:
    """Epochs for a training run of ``config`` (a TrainConfig) long enough for its energy window:
    one epoch is timed (after a discarded warm-up epoch, so one-off costs do not count), and the
    answer is ``config.epochs`` or the epochs that last ``margin`` times ``min_window_seconds()``,
    whichever is more. ``train_fn``: default ``greenlab.training.loop.train``."""
    if train_fn is None:
        from greenlab.training.loop import train as train_fn  # lazy: torch only when training

    one = dataclasses.replace(config, epochs=1, max_steps=None, target_accuracy=None, patience=None,
                              label=f"{config.label or 'run'} (timing one epoch)")
    lines = progress.Steps("greenlab.epochs_to_fill", 2, unit="epoch")
    with warnings.catch_warnings(), contextlib.closing(lines):  # timings, never shown: shortness expected
        warnings.simplefilter("ignore", ShortWindowWarning)
        lines.start(f"{config.label or 'run'}: a warm-up epoch (discarded)")
        with lines.ticking():
            train_fn(model_fn(), data, one, log=False, save=False)
        lines.done()
        lines.start(f"{config.label or 'run'}: timing one epoch")
        t0 = time.perf_counter()
        with lines.ticking():
            result = train_fn(model_fn(), data, one, log=False, save=False)
        lines.done()
    # the energy window's own length (setup and the final test pass excluded), else the wall time
    seconds = getattr(result, "seconds", None) or time.perf_counter() - t0
    needed = repeats_to_fill(seconds, min_window_seconds(sources), margin, max_repeats=max_epochs)
    return max(int(config.epochs), needed)
