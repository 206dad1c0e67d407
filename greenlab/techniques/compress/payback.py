"""Does compression pay back? (lesson 06): the measured cost of an inference, paired
comparisons of inference speed and energy, and the break-even in predictions.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from greenlab.base import progress, validation
from greenlab.base.units import format_energy
from greenlab.energy import ShortWindowWarning, measure
from greenlab.energy.flags import MeasuredFlags, PooledFlags
from greenlab.experiments import paired, summarize
from greenlab.session.devices import synchronize


@dataclass
class InferenceCost(MeasuredFlags):
    """Cost of inference per sample: seconds and joules (from one ``measure`` window over all
    repeats), the median seconds per batch over the repeats, the window's provenance and
    whether it was still too short to read (``short_window``; show ``flag`` beside it)."""

    seconds_per_sample: float
    joules_per_sample: float
    median_seconds_per_batch: float
    batch_size: int
    repeats: int
    energy: object  # greenlab.energy Measurement: estimated / complete / problems / sources
    short_window: bool = False  # the window stayed too short to read even at max_repeats

    @property
    def flag(self) -> str:
        """"" or the mark every table showing this figure carries: " (short window)"."""
        return " (short window)" if self.short_window else ""

    def to_dict(self) -> dict:
        return {"seconds_per_sample": self.seconds_per_sample, "short_window": self.short_window,
                "joules_per_sample": self.joules_per_sample,
                "median_seconds_per_batch": self.median_seconds_per_batch,
                "batch_size": self.batch_size, "repeats": self.repeats,
                **self.flags(), "energy": self.energy.to_dict()}


def energy_per_inference(model: nn.Module, x: torch.Tensor, repeats: int = 20,
                         warmup: int = 2, max_repeats: int = 5000) -> InferenceCost:
    """Run ``model(x)`` ``repeats`` times (after ``warmup`` untimed runs) in eval mode without
    gradients inside one energy window; report seconds and joules per sample. While the
    energy library flags the window as too short to read (``ShortWindowWarning``), the passes
    are doubled and measured again, up to ``max_repeats``; a figure still from a short window
    says so (``short_window=True``, and "short window" in ``to_dict``)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[0] < 1:
        raise ValueError("x must be a batch tensor with at least one sample")
    max_repeats = validation.integer("max_repeats", max_repeats, low=repeats)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for _ in range(warmup):
                model(x)
            r, times, repeats, short = _timed_window(model, x, repeats, max_repeats)
    finally:
        model.train(was_training)
    n = repeats * x.shape[0]
    return InferenceCost(seconds_per_sample=r.seconds / n, joules_per_sample=r.joules / n,
                         median_seconds_per_batch=statistics.median(times), batch_size=x.shape[0],
                         repeats=repeats, energy=r, short_window=short)


def _timed_window(model, x, repeats: int, max_repeats: int):
    """One energy window over ``repeats`` forward passes (per-pass times kept), doubling the
    passes and measuring again while the library flags the window as too short, up to
    ``max_repeats``. Returns (Measurement, per-pass seconds, passes, still_short)."""
    while True:
        times = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ShortWindowWarning)
            window = measure("inference")
            with window:
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    model(x)
                    synchronize(x.device)
                    times.append(time.perf_counter() - t0)
        short = any(issubclass(w.category, ShortWindowWarning) for w in caught)
        for w in caught:  # pass on everything but the short-window warnings this loop handles
            if not issubclass(w.category, ShortWindowWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if not short or repeats >= max_repeats:
            return window.result, times, repeats, short
        repeats = min(2 * repeats, max_repeats)


@dataclass
class SpeedComparison:
    """Inference timings of several models on the same batch, measured in interleaved rounds
    (one forward pass of each model per round), so background load hits all of them alike.
    ``median_seconds``: per model, median seconds per batch; ``ratios``: per model, median over
    rounds of (its time / the baseline's time in the same round); ``round_ratios``: those
    per-round ratios, the spread ``verdict`` reads."""

    median_seconds: dict
    ratios: dict
    baseline: str
    rounds: int
    batch_size: int
    round_ratios: dict = field(default_factory=dict)

    def verdict(self, name: str) -> str:
        """``name``'s time against the baseline's, in words, with its spread: "faster" or "slower"
        only when the middle half of the rounds' ratios (quartiles) lies on one side of 1,
        otherwise "no clear difference". Timings on a shared machine are noisy: show this,
        don't assert on it."""
        if name not in self.ratios:
            raise ValueError(f"name must be one of {list(self.ratios)}, got {name!r}")
        ratios = self.round_ratios.get(name, [])
        median = self.ratios[name]
        if len(ratios) < 4:
            return (f"{median:.2f}x the time of {self.baseline} (median of {len(ratios) or self.rounds} "
                    "rounds; too few rounds to tell a difference from noise)")
        low, _, high = statistics.quantiles(ratios, n=4)
        spread = (f"median {median:.2f}x the time of {self.baseline}, "
                  f"middle half of {len(ratios)} rounds {low:.2f}-{high:.2f}x")
        if high < 1:
            return f"faster than {self.baseline}: {spread}"
        if low > 1:
            return f"slower than {self.baseline}: {spread}"
        return f"no clear difference from {self.baseline}: {spread}"

    def table(self) -> str:
        lines = [f"{'model':<20} {'median ms/batch':>16} {'x ' + self.baseline:>14}"]
        for name, seconds in self.median_seconds.items():
            lines.append(f"{name:<20} {seconds * 1000:>16.2f} {self.ratios[name]:>14.2f}")
        lines.append(f"(median of {self.rounds} interleaved rounds, batch of {self.batch_size}; "
                     "time.perf_counter)")
        return "\n".join(lines)


def compare_inference_speed(variants: dict, x: torch.Tensor, rounds: int = 25, warmup: int = 3,
                            baseline: str | None = None) -> SpeedComparison:
    """Time ``model(x)`` for each model in ``variants`` (name -> model) in eval mode without
    gradients, over ``rounds`` interleaved rounds after ``warmup`` untimed passes each.
    ``baseline``: the name the ratios are relative to (default: the first)."""
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict of name -> model")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    baseline = baseline if baseline is not None else next(iter(variants))
    if baseline not in variants:
        raise ValueError(f"baseline must be one of {list(variants)}, got {baseline!r}")
    times = {name: [] for name in variants}
    with _evaluating(variants, x, warmup):
        for _ in range(rounds):
            for name, m in variants.items():
                t0 = time.perf_counter()
                m(x)
                synchronize(x.device)
                times[name].append(time.perf_counter() - t0)
    base = times[baseline]
    round_ratios = {name: [t / b for t, b in zip(ts, base)] for name, ts in times.items()}
    ratios = {name: statistics.median(rs) for name, rs in round_ratios.items()}
    return SpeedComparison(median_seconds={n: statistics.median(ts) for n, ts in times.items()},
                           ratios=ratios, baseline=baseline, rounds=rounds, batch_size=x.shape[0],
                           round_ratios=round_ratios)


def joules_text(joules: float) -> str:
    """Energy in words a reader takes in: "2.13 mJ", "4.1 J", "3.6 kJ" (three significant figures)."""
    return format_energy(joules, small_units=True)


@dataclass
class BreakEven:
    """When a one-off cost (joules) is repaid by a per-use saving measured in paired rounds.

    ``saving``: mean per-use saving (joules; before - after) over ``rounds`` paired rounds,
    ``low``/``high`` its 95% t-interval (None with fewer than 3 rounds). ``uses``/``uses_low``/
    ``uses_high``: the break-even count at the mean saving and across the interval, stated only
    when the whole interval is a saving (``detectable``); otherwise None: with a saving that may
    be zero or negative the honest break-even is "possibly never"."""

    one_off_joules: float
    saving: float
    low: float | None
    high: float | None
    rounds: int
    what: str = "use"
    short_windows: int = 0  # rounds resting on a window too short to read: then no break-even at all

    @property
    def detectable(self) -> bool:
        """True when the interval of the per-use saving lies above zero (and every window was
        long enough to read)."""
        return self.low is not None and self.low > 0 and not self.short_windows

    @property
    def costs_more(self) -> bool:
        """True when the interval lies below zero: each use costs more, it never pays back."""
        return self.high is not None and self.high < 0 and not self.short_windows

    def _count(self, saving) -> int:
        if self.one_off_joules == 0:
            return 0
        n = self.one_off_joules / saving
        return math.ceil(n - 1e-9 * n)

    @property
    def uses(self) -> int | None:
        return self._count(self.saving) if self.detectable else None

    @property
    def uses_low(self) -> int | None:
        return self._count(self.high) if self.detectable else None

    @property
    def uses_high(self) -> int | None:
        return self._count(self.low) if self.detectable else None

    def sentence(self) -> str:
        """The break-even in words, following the verdict on the saving."""
        format_energy = joules_text
        once = format_energy(self.one_off_joules)
        if self.short_windows:
            return (f"{once} spent once; the saving per {self.what} is not measurable at this size "
                    f"({self.short_windows} of {self.rounds} round(s) rest on energy windows too short to read), "
                    "so no break-even is stated")
        if self.low is None:
            return (f"{once} spent once; {self.rounds} paired round(s) are too few for an interval on "
                    f"the saving per {self.what}, so no break-even is stated")
        if self.detectable:
            return (f"{once} spent once is repaid after about {self.uses:,} {self.what}s "
                    f"(95% interval {self.uses_low:,}-{self.uses_high:,}; saving per {self.what} "
                    f"{format_energy(self.saving)}, {self.rounds} paired rounds)")
        if self.costs_more:
            return (f"{once} spent once is never repaid: each {self.what} costs more "
                    f"({format_energy(-self.saving)} more on average, {self.rounds} paired rounds)")
        return (f"{once} spent once; no detectable saving per {self.what} over {self.rounds} paired "
                f"rounds (the interval includes zero), so no break-even to report: it may never be repaid")

    def to_dict(self) -> dict:
        return {"one_off_joules": self.one_off_joules, "saving": self.saving, "low": self.low,
                "high": self.high, "rounds": self.rounds, "what": self.what,
                "detectable": self.detectable, "uses": self.uses, "uses_low": self.uses_low,
                "uses_high": self.uses_high}


def break_even_interval(one_off_joules: float, before, after, what: str = "use", short=None) -> BreakEven:
    """The break-even of a one-off cost (joules) from paired per-round figures: ``before[i]`` and
    ``after[i]`` are the joules per use of the old and new model in round i (measured side by
    side, so shared noise cancels in the difference). ``short``: None, or one flag per round,
    True where either window was too short to read; any such round means no break-even ("not
    measurable at this size"). See ``BreakEven``."""
    one_off_joules = validation.number("one_off_joules", one_off_joules, low=0)
    before, after = list(before), list(after)
    if len(before) != len(after) or not before:
        raise ValueError(f"before and after need the same number of rounds (>= 1), got "
                         f"{len(before)} and {len(after)}")
    diffs = [validation.number("before", b) - validation.number("after", a) for b, a in zip(before, after)]
    stat = summarize(diffs)
    low = high = None
    if stat.ci95 is not None and len(diffs) >= 3:
        low, high = stat.mean - stat.ci95, stat.mean + stat.ci95
    flags = [False] * len(diffs) if short is None else [bool(f) for f in short]
    if len(flags) != len(diffs):
        raise ValueError(f"short needs one flag per round ({len(diffs)}), got {len(flags)}")
    return BreakEven(one_off_joules, stat.mean, low, high, len(diffs), validation.text("what", what), sum(flags))


@dataclass
class InferenceComparison(PooledFlags):
    """Inference of several models measured side by side: ``rounds`` interleaved rounds, each
    giving every model one energy window (in a rotating order), so background load and drift hit
    all of them alike. Per model: ``joules`` (joules per sample, one per round), ``seconds``
    (median seconds per batch within each round's window), ``short`` (rounds whose window
    stayed too short to read) and ``windows`` (each round's ``Measurement``, from which
    ``estimated``, ``complete``, ``problems`` and ``sources`` are read). Every figure of one
    table comes from one such comparison."""

    names: list
    joules: dict
    seconds: dict
    short: dict
    baseline: str
    rounds: int
    batch_size: int
    windows: dict  # name -> one greenlab.energy Measurement per round

    def measurements(self) -> list:
        """(label, Measurement) of every window: "name round r"."""
        return [(f"{name} round {r + 1}", m) for name in self.names
                for r, m in enumerate(self.windows[name])]

    def _check(self, name):
        if name not in self.joules:
            raise ValueError(f"name must be one of {self.names}, got {name!r}")

    def joules_per_sample(self, name: str) -> float:
        """Median over the rounds of ``name``'s joules per sample."""
        self._check(name)
        return statistics.median(self.joules[name])

    def seconds_per_batch(self, name: str) -> float:
        """Median over the rounds of ``name``'s median seconds per batch."""
        self._check(name)
        return statistics.median(self.seconds[name])

    def flag(self, name: str) -> str:
        """" (short window)" when any of ``name``'s windows stayed too short to read, else ""."""
        self._check(name)
        return " (short window)" if any(self.short[name]) else ""

    def verdict(self, name: str, metric: str = "joules"):
        """``name`` against the baseline, paired by round: a ``greenlab.experiments.Paired`` on
        the per-round ratios of ``metric`` ("joules" per sample or "seconds" per batch)."""
        self._check(name)
        if metric not in ("joules", "seconds"):
            raise ValueError(f"metric must be 'joules' or 'seconds', got {metric!r}")
        values = self.joules if metric == "joules" else self.seconds
        return paired(values[name], values[self.baseline], metric, name, self.baseline,
                      short=[a or b for a, b in zip(self.short[name], self.short[self.baseline])])

    def break_even(self, name: str, one_off_joules: float, baseline: str | None = None) -> BreakEven:
        """How many inferences of ``name`` repay ``one_off_joules`` against ``baseline``
        (default: the comparison's baseline), from the paired per-round energies."""
        self._check(name)
        base = self.baseline if baseline is None else baseline
        self._check(base)
        return break_even_interval(one_off_joules, self.joules[base], self.joules[name], what="prediction",
                                   short=[a or b for a, b in zip(self.short[base], self.short[name])])

    def table(self) -> str:
        """Median time per batch and energy per sample, with each model's paired energy verdict."""
        format_energy = joules_text
        lines = [f"{'model':<20} {'ms/batch':>9} {'energy/image':>13}  energy vs {self.baseline}"]
        for name in self.names:
            verdict = "-" if name == self.baseline else self.verdict(name).short()
            lines.append(f"{name:<20} {self.seconds_per_batch(name) * 1e3:>9.2f} "
                         f"{format_energy(self.joules_per_sample(name)):>13}  {verdict}{self.flag(name)}")
        kind = "estimate" if self.estimated else "measured"
        lines.append(f"(medians of {self.rounds} interleaved rounds, batch of {self.batch_size}; "
                     f"energy {kind}, sources {self.sources})")
        if self.problems:
            lines.append("energy INCOMPLETE (lower bounds): " + "; ".join(self.problems))
        return "\n".join(lines)


def compare_inference(variants: dict, x: torch.Tensor, rounds: int = 5, repeats: int = 10,
                      warmup: int = 2, baseline: str | None = None,
                      max_repeats: int = 5000) -> InferenceComparison:
    """Measure ``model(x)`` for each model of ``variants`` (name -> model) in ``rounds``
    interleaved rounds: each round runs every model, in an order rotated round by round, inside
    its own energy window of ``repeats`` passes (doubled while the window is too short to read,
    up to ``max_repeats``; the count found is kept for later rounds). Eval mode, no gradients.
    ``baseline``: the name verdicts and break-evens compare against (default: the first)."""
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict of name -> model")
    rounds = validation.integer("rounds", rounds, low=1)
    repeats = validation.integer("repeats", repeats, low=1)
    warmup = validation.integer("warmup", warmup, low=0)
    max_repeats = validation.integer("max_repeats", max_repeats, low=repeats)
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[0] < 1:
        raise ValueError("x must be a batch tensor with at least one sample")
    names = list(variants)
    baseline = names[0] if baseline is None else baseline
    if baseline not in variants:
        raise ValueError(f"baseline must be one of {names}, got {baseline!r}")
    passes = {name: repeats for name in names}
    joules = {name: [] for name in names}
    seconds = {name: [] for name in names}
    short = {name: [] for name in names}
    windows = {name: [] for name in names}
    with _evaluating(variants, x, warmup), \
            progress.heartbeat(f"greenlab.compress: {rounds} round(s) of {len(names)} models' energy windows"):
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                result, times, passes[name], is_short = _timed_window(
                    variants[name], x, passes[name], max_repeats)
                joules[name].append(result.joules / (passes[name] * x.shape[0]))
                seconds[name].append(statistics.median(times))
                short[name].append(is_short)
                windows[name].append(result)
    return InferenceComparison(names=names, joules=joules, seconds=seconds, short=short,
                               baseline=baseline, rounds=rounds, batch_size=x.shape[0], windows=windows)


def break_even_inferences(compression_joules: float, joules_per_inference_before: float,
                          joules_per_inference_after: float) -> float:
    """How many inferences the compressed model must serve before the energy spent compressing
    it (pruning, fine-tuning, distilling; joules) is paid back: the smallest whole n with
    ``n * (before - after) >= compression_joules``. ``math.inf`` when it never pays back
    (the compressed model does not use less energy per inference)."""
    values = {"compression_joules": compression_joules,
              "joules_per_inference_before": joules_per_inference_before,
              "joules_per_inference_after": joules_per_inference_after}
    for label, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise ValueError(f"{label} must be a finite number >= 0 (joules), got {value!r}")
    if joules_per_inference_before == 0:  # every inference costs energy: 0 J is a reading that failed
        raise ValueError("joules_per_inference_before must be > 0 (joules: an inference costs energy), got 0")
    saving = joules_per_inference_before - joules_per_inference_after
    if compression_joules == 0:
        return 0
    if saving <= 0:
        return math.inf
    n = compression_joules / saving
    return math.ceil(n - 1e-9 * n)  # 1e-9: so 1.0 / (0.3 - 0.1) counts 5, not 6


@contextlib.contextmanager
def _evaluating(variants: dict, x: torch.Tensor, warmup: int):
    """Every model of ``variants`` in eval mode under ``torch.inference_mode``, after ``warmup``
    untimed passes on ``x`` each; their train/eval modes are restored on the way out."""
    modes = {name: m.training for name, m in variants.items()}
    try:
        with torch.inference_mode():
            for m in variants.values():
                m.eval()
                for _ in range(warmup):
                    m(x)
            yield
    finally:
        for name, m in variants.items():
            m.train(modes[name])
