"""Verdicts: a variant against the baseline, paired by repeat (``Paired``: "23% lower", "no
detectable difference", "too few repeats to tell", "not measurable at this size"), and a saving
stated beside its accuracy.

An energy verdict refuses windows that the energy library calls short (``ShortWindowWarning``,
``Measurement.short``): pass ``short=`` (one flag per repeat, see ``short_flags``) and the
verdict says "not measurable at this size" instead of a figure."""

from __future__ import annotations

import dataclasses
import math

from greenlab.base import validation
from greenlab.base.units import format_energy, plain_number
from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL, _values, summarize, t_quantile, t_quantile_975

METRICS = ("seconds", "joules", "final_accuracy", "val_accuracy", "seconds_to_target", "joules_to_target",
           "samples_per_second", "co2e_g")
_RATIO_METRICS = ("seconds", "joules", "seconds_to_target", "joules_to_target", "samples_per_second", "co2e_g")
_ACCURACY_METRICS = ("final_accuracy", "val_accuracy")
# metrics read from an energy window: a window too short for its sources cannot carry them
ENERGY_METRICS = ("joules", "joules_to_target", "co2e_g", "joules_per_token", "joules_per_sample",
                  "joules_per_inference")
NOT_MEASURABLE = "not measurable at this size"
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
    short_windows: int = 0

    @property
    def measurable(self) -> bool:
        """False when any pair rests on an energy window too short to read (``short_windows``)."""
        return not self.short_windows

    @property
    def detectable(self) -> bool | None:
        """True when the interval excludes "no difference", False when it includes it, None
        without an interval or when the windows were too short to measure."""
        if self.low is None or not self.measurable:
            return None
        null = 1.0 if self.kind == "ratio" else 0.0
        return not (self.low <= null <= self.high)

    def inverted(self) -> "Paired":
        """The same verdict read the other way round: baseline / variant for a ratio (estimate
        and interval inverted: 0.25 (0.2-0.3) becomes 4 (3.33-5)), baseline - variant for a
        difference. A lesson's headline reads "how many times less" this way."""
        if self.kind == "ratio":
            def flip(v):
                return None if v is None else 1.0 / v
        else:
            def flip(v):
                return None if v is None else -v
        estimate, low, high = flip(self.estimate), flip(self.high), flip(self.low)
        return dataclasses.replace(self, variant=self.baseline, baseline=self.variant, estimate=estimate,
                                   low=low, high=high)

    def sentence(self) -> str:
        """The verdict as a sentence, e.g. "green is 23% lower in energy than naive (95% CI 15–31%)"."""
        what = METRIC_WORDS.get(self.metric, self.metric)
        pair = f"{self.variant} vs {self.baseline}"
        if self.n == 0 or self.estimate is None:
            return f"{pair}: no repeat in which both have a figure for {what}, so nothing to compare"
        if not self.measurable:
            return (f"{pair}: {what} {NOT_MEASURABLE}: {self.short_windows} of {self.n} paired repeat(s) "
                    "rest on energy windows shorter than their meters read reliably (ShortWindowWarning); "
                    "lengthen the work (more samples, or repeat it inside one window) to compare it")
        if self.low is None:
            return (f"{pair}: {self._point(what)} over {self.n} paired repeat(s); too few repeats for "
                    f"an interval (at least {MIN_REPEATS_FOR_INTERVAL} are needed), so no difference is claimed")
        if not self.detectable:
            return (f"no detectable difference in {what} between {self.variant} and {self.baseline} at "
                    f"{self.n} repeats (95% CI {self._range()})")
        return f"{self.variant} is {self._effect(what)} than {self.baseline} (95% CI {self._range()})"

    def plain(self) -> str:
        """The verdict in words a stakeholder reads, without interval figures: "about 23% lower",
        "no detectable difference", "too few repeats to tell" or "not measurable at this size"."""
        if self.estimate is not None and not self.measurable:
            return NOT_MEASURABLE
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
        if not self.measurable:
            return NOT_MEASURABLE
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
           baseline: str = "baseline", short=None) -> Paired:
    """Compare two lists of per-repeat values (same length, None or a non-finite value where a
    run had no value).

    ``short``: None, or one flag per repeat, True where either run's energy window was too short
    for its sources (``short_flags(variant_results, baseline_results, metric)`` reads them from
    the results); on an energy metric any such pair makes the verdict "not measurable at this
    size"."""
    variant_values = _values("variant_values", variant_values)
    baseline_values = _values("baseline_values", baseline_values)
    if short is None:
        short = [False] * len(variant_values)
    short = list(short)
    if len(short) != len(variant_values):
        raise ValueError(f"short needs one flag per repeat ({len(variant_values)}), got {len(short)}")
    if not isinstance(metric, str):
        raise validation.ArgumentTypeError(f"metric must be a metric name such as 'joules', got {metric!r}")
    if len(variant_values) != len(baseline_values):
        raise ValueError(f"variant_values and baseline_values need the same number of repeats, got "
                         f"{len(variant_values)} and {len(baseline_values)}")
    kind = "difference" if metric in _ACCURACY_METRICS else "ratio"
    pairs = [(float(a), float(b), bool(s)) for a, b, s in zip(variant_values, baseline_values, short)
             if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))]
    if kind == "ratio":
        pairs = [(a, b, s) for a, b, s in pairs if a > 0 and b > 0]
        diffs = [math.log(a / b) for a, b, _ in pairs]
    else:
        diffs = [a - b for a, b, _ in pairs]
    n = len(diffs)
    n_short = sum(1 for *_, s in pairs if s) if metric in ENERGY_METRICS else 0
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
                      None if low is None else math.exp(low), None if high is None else math.exp(high), n_short)
    return Paired(variant, baseline, metric, n, kind, mean, low, high, n_short)


def window_short(result, metric: str = "joules") -> bool:
    """True when ``result`` (a ``Measurement``, or a result holding one as ``.energy``, such as a
    ``RunResult``) cannot carry ``metric`` because its energy window was shorter than its sources
    read reliably. For a ``*_to_target`` metric the span up to the target is what counts. Metrics
    not read from an energy window (time, accuracy) are never short."""
    if metric not in ENERGY_METRICS or result is None:
        return False
    energy = result if callable(getattr(result, "is_short", None)) else getattr(result, "energy", None)
    if energy is None or not callable(getattr(energy, "is_short", None)):
        return bool(getattr(result, "short", False))
    if metric.endswith("_to_target"):
        return energy.is_short(getattr(result, "seconds_to_target", None))
    return energy.short


def short_flags(variant_results, baseline_results, metric: str = "joules") -> list:
    """One flag per repeat for ``paired(short=...)``: True where either result's window was too
    short for ``metric`` (``window_short``)."""
    return [window_short(a, metric) or window_short(b, metric)
            for a, b in zip(list(variant_results), list(baseline_results))]


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
            return (f"{self.candidate} {change} {self.baseline}, at most {self.tolerance * 100:g} point(s) less "
                    f"accurate ({accs}; single figures, not an equivalence test)")
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


# --- equivalence: "as good as" needs a stated margin ---------------------------------------------

EQUIVALENCE_LEVEL = 0.90  # two one-sided tests at 5% each: the 90% interval within +-margin


@dataclasses.dataclass
class Equivalence:
    """Whether a variant is *equivalent* to the baseline on one metric within a stated margin:
    two one-sided tests at 5%, i.e. the 90% paired t-interval of the difference lies inside
    ``±margin``. Accuracy metrics: ``estimate``/``low``/``high`` are the mean difference
    variant - baseline and its 90% interval (fractions; ``margin`` 0.01 is one point). Ratio
    metrics: the ratio variant / baseline (geometric mean), equivalent when the interval lies in
    ``[1 - margin, 1 + margin]``. ``low``/``high`` are None with fewer than
    MIN_REPEATS_FOR_INTERVAL pairs, and then nothing is shown equivalent.

    The only words a lesson may use for "as good / the same / no worse" come from here:
    ``words()`` gives "equivalent within ±1 point" or "not shown equivalent within ±1 point"."""

    variant: str
    baseline: str
    metric: str
    n: int
    kind: str  # "ratio" or "difference"
    margin: float
    estimate: float | None
    low: float | None
    high: float | None
    short_windows: int = 0

    @property
    def equivalent(self) -> bool:
        """True only when the 90% interval lies inside ±margin (and the windows could carry it)."""
        if self.low is None or self.short_windows:
            return False
        if self.kind == "difference":
            return -self.margin < self.low and self.high < self.margin
        return 1 - self.margin < self.low and self.high < 1 + self.margin

    def margin_text(self) -> str:
        """"±1 point" (accuracy) or "±5%" (a ratio)."""
        if self.kind == "difference":
            points = self.margin * 100
            return f"±{points:g} point{'' if points == 1 else 's'}"
        return f"±{self.margin:.0%}"

    def words(self) -> str:
        """"equivalent within ±1 point" or "not shown equivalent within ±1 point"."""
        return f"{'' if self.equivalent else 'not shown '}equivalent within {self.margin_text()}"

    def sentence(self) -> str:
        """The verdict with its figures, e.g. "bf16 is equivalent within ±1 point to fp32 in test
        accuracy: +0.2 points (90% CI -0.3 to +0.7 points) over 3 paired repeats"."""
        what = METRIC_WORDS.get(self.metric, self.metric)
        head = f"{self.variant} is {self.words()} to {self.baseline} in {what}"
        if self.n == 0 or self.estimate is None:
            return f"{head}: no repeat in which both have a figure"
        if self.short_windows:
            return f"{head}: {NOT_MEASURABLE} ({self.short_windows} window(s) too short to read)"
        if self.low is None:
            return (f"{head}: {self._fmt(self.estimate)} over {self.n} paired repeat(s), too few for an "
                    f"interval (at least {MIN_REPEATS_FOR_INTERVAL} are needed)")
        return (f"{head}: {self._fmt(self.estimate)} ({EQUIVALENCE_LEVEL:.0%} CI {self._fmt(self.low)} to "
                f"{self._fmt(self.high)}) over {self.n} paired repeats")

    def _fmt(self, v) -> str:
        if self.kind == "difference":
            return f"{v * 100:+.1f} points"
        return f"{v - 1:+.1%}"


def equivalence(variant_values, baseline_values, metric: str, margin: float, variant: str = "variant",
                baseline: str = "baseline", short=None) -> Equivalence:
    """The equivalence verdict of two lists of per-repeat values (paired by repeat, as
    ``paired``) within ``margin``: a fraction, e.g. 0.01 (one accuracy point, or 1% of a ratio).
    ``short``: as in ``paired``. See ``Equivalence``."""
    margin = validation.number("margin", margin, low=0, high=1, low_open=True, high_open=True)
    p = paired(variant_values, baseline_values, metric, variant, baseline, short=short)
    low = high = None
    if p.n >= MIN_REPEATS_FOR_INTERVAL:
        variant_values, baseline_values = list(variant_values), list(baseline_values)
        pairs = [(float(a), float(b)) for a, b in zip(variant_values, baseline_values)
                 if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))]
        if p.kind == "ratio":
            diffs = [math.log(a / b) for a, b in pairs if a > 0 and b > 0]
        else:
            diffs = [a - b for a, b in pairs]
        n = len(diffs)
        mean = sum(diffs) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = t_quantile((1 + EQUIVALENCE_LEVEL) / 2, n - 1) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        if p.kind == "ratio":
            low, high = math.exp(low), math.exp(high)
    return Equivalence(variant, baseline, metric, p.n, p.kind, margin, p.estimate, low, high, p.short_windows)


# --- a baseline at chance compares no accuracy ---------------------------------------------------

CHANCE_MARGIN = 0.05  # a baseline must clear chance by more than this (5 points) to compare accuracies


@dataclasses.dataclass
class AboveChance:
    """Whether a run's accuracy is clearly above chance (1 / ``classes``): its lower end (the
    95% interval's low end with MIN_REPEATS_FOR_INTERVAL values or more, else the lowest value)
    must exceed chance + ``margin``. A comparison of accuracies against a baseline that is not
    clearly above chance compares noise, so ``accuracy_verdict`` refuses it."""

    name: str
    classes: int
    margin: float
    n: int
    mean: float | None
    lower_end: float | None

    @property
    def chance(self) -> float:
        return 1 / self.classes

    @property
    def clear(self) -> bool:
        return self.lower_end is not None and self.lower_end > self.chance + self.margin

    def sentence(self) -> str:
        if self.mean is None:
            return f"{self.name} has no accuracy to compare"
        head = (f"{self.name}'s test accuracy ({self.mean:.1%} mean of {self.n}, lower end {self.lower_end:.1%}) is "
                f"{'clearly' if self.clear else 'not clearly'} above chance ({self.chance:.1%} for {self.classes} "
                f"classes, plus a {self.margin * 100:g}-point margin)")
        return head if self.clear else head + ", so no accuracy comparison is made against it"


def above_chance(values, classes: int, margin: float = CHANCE_MARGIN, name: str = "baseline") -> AboveChance:
    """``AboveChance`` of per-repeat accuracies (fractions; None for a run without one)."""

    classes = validation.integer("classes", classes, low=2)
    margin = validation.number("margin", margin, low=0, high=1, high_open=True)
    stat = summarize(values)
    if stat.n == 0:
        return AboveChance(name, classes, margin, 0, None, None)
    lower = stat.mean - stat.ci95 if stat.n >= MIN_REPEATS_FOR_INTERVAL else stat.min
    return AboveChance(name, classes, margin, stat.n, stat.mean, lower)


@dataclasses.dataclass
class AccuracyVerdict:
    """What may be said of a variant's accuracy against the baseline's: nothing when the baseline
    is at chance (``chance``), else the equivalence verdict within ``margin`` (``equivalence``)
    beside the paired difference (``difference``). ``sentence()`` is the one sentence to print."""

    chance: AboveChance
    equivalence: Equivalence | None
    difference: Paired | None

    @property
    def comparable(self) -> bool:
        return self.chance.clear

    def sentence(self) -> str:
        if not self.chance.clear:
            return self.chance.sentence() + "."
        eq, d = self.equivalence, self.difference
        out = eq.sentence()
        if d is not None and d.detectable:
            out += f"; the paired difference is detectable ({d.short()})"
        return out + "."


def accuracy_verdict(variant_values, baseline_values, classes: int, margin: float = 0.01,
                     metric: str = "final_accuracy", variant: str = "variant", baseline: str = "baseline",
                     chance_margin: float = CHANCE_MARGIN) -> AccuracyVerdict:
    """The accuracy comparison a lesson may print: refused when the baseline is not clearly
    above chance (``above_chance``), else equivalence within ``margin`` (fraction: 0.01 = one
    point) and the paired difference."""
    if metric not in _ACCURACY_METRICS:
        raise ValueError(f"metric must be one of {', '.join(_ACCURACY_METRICS)}, got {metric!r}")
    chance = above_chance(baseline_values, classes, chance_margin, name=baseline)
    if not chance.clear:
        return AccuracyVerdict(chance, None, None)
    return AccuracyVerdict(chance, equivalence(variant_values, baseline_values, metric, margin, variant, baseline),
                           paired(variant_values, baseline_values, metric, variant, baseline))


# --- energy to a target exists only for the repeats that reached it -------------------------------

class TargetNotReached(ValueError):
    """A ratio of energy (or time) to target was asked of a recipe that missed the target in
    some repeat: there is no such figure for that repeat, so no ratio is stated."""


@dataclasses.dataclass
class ToTarget:
    """Energy (or time) to a target accuracy over a recipe's repeats, kept only for the repeats
    that reached it. ``values``: one per repeat, None where the target was not reached;
    ``reached``/``repeats`` count them; ``mean`` is over the repeats that reached it (None when
    none did). ``sentence()``: "2 of 3 repeats reached 85%: 1.2 kJ to target (mean of those 2)"."""

    name: str
    target: float | None
    metric: str
    values: list
    short_windows: int = 0

    @property
    def repeats(self) -> int:
        return len(self.values)

    @property
    def reached(self) -> int:
        return sum(1 for v in self.values if v is not None)

    @property
    def every_repeat(self) -> bool:
        return self.repeats > 0 and self.reached == self.repeats

    @property
    def mean(self) -> float | None:
        hits = [v for v in self.values if v is not None]
        return sum(hits) / len(hits) if hits else None

    def count_text(self) -> str:
        """"2 of 3 repeats reached 85%"."""
        target = "the target" if self.target is None else f"{self.target:.0%}"
        return f"{self.reached} of {self.repeats} repeat{'' if self.repeats == 1 else 's'} reached {target}"

    def sentence(self) -> str:

        head = f"{self.name}: {self.count_text()}"
        if self.mean is None:
            return f"{head}, so it has no {METRIC_WORDS.get(self.metric, self.metric)}"
        if self.short_windows:
            return f"{head}; {METRIC_WORDS.get(self.metric, self.metric)} {NOT_MEASURABLE}"
        amount = format_energy(self.mean) if self.metric.startswith("joules") else f"{plain_number(self.mean)} s"
        return f"{head}: {amount} to target (mean of {'that' if self.reached == 1 else 'those'} {self.reached})"


def to_target(results, metric: str = "joules_to_target", name: str = "", target: float | None = None) -> ToTarget:
    """Energy (``metric="joules_to_target"``) or time (``"seconds_to_target"``) to the target
    for each of a recipe's runs (RunResults, one per repeat), kept only where the run reached
    it. ``target`` defaults to the runs' own ``target_accuracy``.

        t = gl.experiments.to_target(cmp.runs["green"], name="green")
        print(t.sentence())          # "green: 2 of 3 repeats reached 85%: 1.2 kJ to target (mean of those 2)"
        gl.experiments.target_ratio(cmp.runs["green"], cmp.runs["naive"])  # raises unless all 6 reached it
    """
    if metric not in ("joules_to_target", "seconds_to_target"):
        raise ValueError(f"metric must be 'joules_to_target' or 'seconds_to_target', got {metric!r}")
    results = list(results)
    if target is None:
        targets = {(getattr(r, "config", None) or {}).get("target_accuracy") for r in results}
        target = targets.pop() if len(targets) == 1 else None
    values = [getattr(r, metric, None) for r in results]
    short = sum(1 for r, v in zip(results, values) if v is not None and window_short(r, metric))
    return ToTarget(name or "recipe", target, metric, values, short)


def target_ratio(variant_results, baseline_results, metric: str = "joules_to_target",
                 variant: str = "variant", baseline: str = "baseline") -> Paired:
    """The paired verdict of ``variant`` against ``baseline`` on energy (or time) to target,
    only when both reached the target in every repeat; else ``TargetNotReached`` saying how many
    repeats of each reached it (a recipe that missed the target has no energy to target, and a
    ratio over the repeats that happened to reach it would flatter it)."""
    v = to_target(variant_results, metric, variant)
    b = to_target(baseline_results, metric, baseline)
    if v.repeats != b.repeats:
        raise ValueError(f"{variant} has {v.repeats} repeat(s) and {baseline} {b.repeats}: pair them by repeat")
    missing = [t for t in (v, b) if not t.every_repeat]
    if missing:
        raise TargetNotReached("no ratio to target: " + "; ".join(f"{t.name}: {t.count_text()}" for t in missing))
    return paired(v.values, b.values, metric, variant, baseline,
                  short=short_flags(variant_results, baseline_results, metric))
