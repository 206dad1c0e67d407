"""Verdicts: a variant against the baseline, paired by repeat (``Paired``: "23% lower", "no
detectable difference", "too few repeats to tell"), and a saving stated beside its accuracy."""

from __future__ import annotations

import dataclasses
import math

from greenlab.base import validation
from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL, _values, t_quantile_975

METRICS = ("seconds", "joules", "final_accuracy", "val_accuracy", "seconds_to_target", "joules_to_target",
           "samples_per_second", "co2e_g")
_RATIO_METRICS = ("seconds", "joules", "seconds_to_target", "joules_to_target", "samples_per_second", "co2e_g")
_ACCURACY_METRICS = ("final_accuracy", "val_accuracy")
# plain words for each metric, used in verdicts
METRIC_WORDS = {"seconds": "time", "joules": "energy", "seconds_to_target": "time to target",
                "joules_to_target": "energy to target", "samples_per_second": "throughput",
                "co2e_g": "CO2e", "final_accuracy": "test accuracy", "val_accuracy": "validation accuracy"}


@dataclasses.dataclass
class Paired:
    """A variant against the baseline on one metric, over the repeats where both have a value.

    Ratio metrics (energy, time, ...): ``estimate`` is the geometric mean of the per-repeat
    ratios variant / baseline, ``low``/``high`` its 95% interval (a t-interval on the log
    ratios). Accuracy metrics: ``estimate`` is the mean difference variant - baseline (fraction),
    ``low``/``high`` its 95% t-interval. ``low``/``high`` are None with fewer than
    MIN_REPEATS_FOR_INTERVAL pairs."""

    variant: str
    baseline: str
    metric: str
    n: int
    kind: str  # "ratio" or "difference"
    estimate: float | None
    low: float | None
    high: float | None

    @property
    def detectable(self) -> bool | None:
        """True when the interval excludes "no difference", False when it includes it, None
        without an interval."""
        if self.low is None:
            return None
        null = 1.0 if self.kind == "ratio" else 0.0
        return not (self.low <= null <= self.high)

    def sentence(self) -> str:
        """The verdict as a sentence, e.g. "green is 23% lower in energy than naive (95% CI 15–31%)"."""
        what = METRIC_WORDS.get(self.metric, self.metric)
        pair = f"{self.variant} vs {self.baseline}"
        if self.n == 0 or self.estimate is None:
            return f"{pair}: no repeat in which both have a figure for {what}, so nothing to compare"
        if self.low is None:
            return (f"{pair}: {self._point(what)} over {self.n} paired repeat(s); too few repeats for "
                    f"an interval (at least {MIN_REPEATS_FOR_INTERVAL} are needed), so no difference is claimed")
        if not self.detectable:
            return (f"no detectable difference in {what} between {self.variant} and {self.baseline} at "
                    f"{self.n} repeats (95% CI {self._range()})")
        return f"{self.variant} is {self._effect(what)} than {self.baseline} (95% CI {self._range()})"

    def plain(self) -> str:
        """The verdict in words a stakeholder reads, without interval figures: "about 23% lower",
        "no detectable difference", or "too few repeats to tell"."""
        if self.estimate is None or self.low is None:
            return "too few repeats to tell"
        if not self.detectable:
            return "no detectable difference"
        if self.kind == "difference":
            return f"about {abs(self.estimate) * 100:.1f} points {'higher' if self.estimate > 0 else 'lower'}"
        if self.estimate >= 2:
            return f"about {self.estimate:.2g} times higher"
        return f"about {abs(self.estimate - 1):.0%} {'higher' if self.estimate > 1 else 'lower'}"

    def short(self) -> str:
        """A table cell: "-23% (-31% to -15%)", "no detectable difference", "no interval"."""
        if self.n == 0 or self.estimate is None:
            return "-"
        if self.low is None:
            return f"{self._signed(self.estimate)} (no interval)"
        if not self.detectable:
            return "no detectable difference"
        return f"{self._signed(self.estimate)} ({self._signed(self.low)} to {self._signed(self.high)})"

    # --- wording helpers ---
    def _signed(self, v) -> str:
        if self.kind == "difference":
            return f"{v * 100:+.1f} pt"
        if v >= 2:
            return f"{v:.3g}x"
        return f"{v - 1:+.0%}"

    def _point(self, what) -> str:
        if self.kind == "difference":
            return f"{what} differs by {self.estimate * 100:+.1f} points"
        return f"{self.variant} used {self.estimate:.0%} of {self.baseline}'s {what}"

    def _effect(self, what) -> str:
        if self.kind == "difference":
            word = "higher" if self.estimate > 0 else "lower"
            return f"{abs(self.estimate) * 100:.1f} points {word} in {what}"
        if self.estimate >= 2:
            return f"{self.estimate:.3g} times higher in {what}"
        if self.estimate > 1:
            return f"{self.estimate - 1:.0%} higher in {what}"
        return f"{1 - self.estimate:.0%} lower in {what}"

    def _range(self) -> str:
        lo, hi = self.low, self.high
        if self.kind == "difference":
            if self.detectable and self.estimate < 0:
                lo, hi = -hi, -lo
            return f"{lo * 100:.1f}–{hi * 100:.1f} points"
        if not self.detectable:
            return f"of the ratio {lo:.3g}–{hi:.3g}"
        if self.estimate >= 2:
            return f"{lo:.3g}–{hi:.3g} times"
        if self.estimate > 1:
            return f"{(lo - 1) * 100:.0f}–{(hi - 1) * 100:.0f}%"
        return f"{(1 - hi) * 100:.0f}–{(1 - lo) * 100:.0f}%"


def paired(variant_values, baseline_values, metric: str, variant: str = "variant",
           baseline: str = "baseline") -> Paired:
    """Compare two lists of per-repeat values (same length, None or a non-finite value where a
    run had no value)."""
    variant_values = _values("variant_values", variant_values)
    baseline_values = _values("baseline_values", baseline_values)
    if not isinstance(metric, str):
        raise validation.ArgumentTypeError(f"metric must be a metric name such as 'joules', got {metric!r}")
    if len(variant_values) != len(baseline_values):
        raise ValueError(f"variant_values and baseline_values need the same number of repeats, got "
                         f"{len(variant_values)} and {len(baseline_values)}")
    kind = "difference" if metric in _ACCURACY_METRICS else "ratio"
    pairs = [(float(a), float(b)) for a, b in zip(variant_values, baseline_values)
             if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))]
    if kind == "ratio":
        pairs = [(a, b) for a, b in pairs if a > 0 and b > 0]
        diffs = [math.log(a / b) for a, b in pairs]
    else:
        diffs = [a - b for a, b in pairs]
    n = len(diffs)
    if n == 0:
        return Paired(variant, baseline, metric, 0, kind, None, None, None)
    mean = sum(diffs) / n
    low = high = None
    if n >= MIN_REPEATS_FOR_INTERVAL:
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
    if kind == "ratio":
        return Paired(variant, baseline, metric, n, kind, math.exp(mean),
                      None if low is None else math.exp(low), None if high is None else math.exp(high))
    return Paired(variant, baseline, metric, n, kind, mean, low, high)


@dataclasses.dataclass
class Saving:
    """An energy (or time) saving stated beside the accuracy it was bought at; see
    ``equal_accuracy_saving``. ``fraction``: 1 - candidate / baseline (negative: it cost more);
    ``accuracy_change``: candidate - baseline accuracy (fraction; negative: less accurate)."""

    candidate: str
    baseline: str
    fraction: float
    candidate_accuracy: float
    baseline_accuracy: float
    tolerance: float
    what: str = "energy"

    @property
    def accuracy_change(self) -> float:
        return self.candidate_accuracy - self.baseline_accuracy

    @property
    def equal_accuracy(self) -> bool:
        """True when the two accuracies are within ``tolerance`` (or the candidate is better)."""
        return self.accuracy_change >= -self.tolerance

    def sentence(self) -> str:
        if self.fraction > 0:
            change = f"used {self.fraction:.0%} less {self.what} than"
        elif self.fraction < 0:
            change = f"used {-self.fraction:.0%} more {self.what} than"
        else:
            change = f"used the same {self.what} as"
        accs = f"{self.candidate_accuracy:.1%} vs {self.baseline_accuracy:.1%}"
        if self.equal_accuracy:
            return f"{self.candidate} {change} {self.baseline} at the same accuracy or better ({accs})"
        return (f"{self.candidate} {change} {self.baseline} but is {-self.accuracy_change * 100:.1f} "
                f"points less accurate ({accs}): not a like-for-like saving")


def equal_accuracy_saving(candidate_joules: float, baseline_joules: float, candidate_accuracy: float,
                          baseline_accuracy: float, candidate: str = "candidate",
                          baseline: str = "baseline", tolerance: float = 0.01, what: str = "energy") -> Saving:
    """A saving with its accuracy cost beside it. Accuracies are fractions in [0, 1];
    ``tolerance`` (fraction, default one point) is how much less accurate the candidate may be
    and still count as equal. Use ``Saving.equal_accuracy`` to refuse an unequal comparison,
    or print ``Saving.sentence()``, which states the accuracy cost when there is one."""
    for label, v in (("candidate_joules", candidate_joules), ("baseline_joules", baseline_joules)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{label} must be a finite number >= 0, got {v!r}")
    if baseline_joules == 0:
        raise ValueError("baseline_joules must be > 0 to state a saving against it")
    for label, v in (("candidate_accuracy", candidate_accuracy), ("baseline_accuracy", baseline_accuracy)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"{label} must be a fraction in [0, 1], got {v!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be a fraction in [0, 1), got {tolerance!r}")
    return Saving(candidate, baseline, 1 - candidate_joules / baseline_joules, float(candidate_accuracy),
                  float(baseline_accuracy), float(tolerance), what)
