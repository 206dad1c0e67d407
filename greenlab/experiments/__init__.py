"""A/B comparisons: paired repeats, spread, confidence intervals and verdicts.

    cmp = gl.compare({"fp32": cfg_a, "bf16": cfg_b}, model_fn=make_model, data=ds, repeats=3)
    print(cmp)                            # a plain table
    cmp.verdict("bf16", "fp32", "joules")  # "bf16 is 23% lower in energy than fp32 (95% CI 15–31%)"
    print(cmp.stakeholder_summary())

Runs are *paired*: repeat r gives every variant the same seed (so the same initial weights,
sample order and augmentations), and the verdicts compare each variant with the baseline within
a repeat (a t-interval on the log of the per-repeat ratios), so noise shared by a repeat cancels.
Schedule evaluations in samples (``TrainConfig(eval_every_samples=...)``) when variants differ in
batch size, so that every variant is checked after the same amount of data.

``equal_accuracy_saving`` states a saving only beside the accuracy it was bought at.

The ``greenlab run`` command that drives it is ``greenlab.cli.run``.
"""

from __future__ import annotations

import dataclasses
import html
import math

from greenlab.base import progress, validation
from greenlab.base.units import format_energy

METRICS = ("seconds", "joules", "final_accuracy", "val_accuracy", "seconds_to_target", "joules_to_target",
           "samples_per_second", "co2e_g")
_RATIO_METRICS = ("seconds", "joules", "seconds_to_target", "joules_to_target", "samples_per_second", "co2e_g")
_ACCURACY_METRICS = ("final_accuracy", "val_accuracy")
# plain words for each metric, used in verdicts
METRIC_WORDS = {"seconds": "time", "joules": "energy", "seconds_to_target": "time to target",
                "joules_to_target": "energy to target", "samples_per_second": "throughput",
                "co2e_g": "CO2e", "final_accuracy": "test accuracy", "val_accuracy": "validation accuracy"}
# An interval needs at least this many paired repeats: with 2, Student's t has one degree of
# freedom (t = 12.7) and the interval is too wide to read, so none is printed.
MIN_REPEATS_FOR_INTERVAL = 3
# run statuses that mean "cut short by the user": such a run is kept but left out of every mean
PARTIAL_STATUSES = ("interrupted",)


@dataclasses.dataclass
class Stat:
    """Summary of one metric over repeats. ``ci95``: half-width of a 95% Student-t interval
    for the mean (None with fewer than 2 values). ``n`` counts runs that had a value."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci95: float | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def interval(self):
        """(low, high) of the 95% interval for the mean, clipped at 0 (these metrics are never
        negative), or None with fewer than MIN_REPEATS_FOR_INTERVAL values."""
        if self.ci95 is None or self.n < MIN_REPEATS_FOR_INTERVAL:
            return None
        return max(0.0, self.mean - self.ci95), self.mean + self.ci95

    @property
    def clipped(self) -> bool:
        """True when :meth:`interval`'s low end was raised to 0 (mean - half-width < 0)."""
        return self.interval() is not None and self.mean - self.ci95 < 0


CLIPPED_NOTE = ("* a low end shown as 0 is clipped: the interval (mean +- 95% half-width) reached "
                "below zero, which energy and time cannot; it says the runs spread widely (more "
                "repeats narrow it), not that 0 is a possible value")


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


def compare(variants: dict, model_fn, data, repeats: int = 3, warmup: int = 1, callbacks=(),
            log: bool = False, device=None, sources=None, idle=None, save: bool = True,
            results_path=None, stop_event=None, seed: int | None = None,
            show_progress: bool = True) -> "Comparison":
    """Train each variant ``repeats`` times, paired, and summarise.

    variants: {name: TrainConfig}; the first is the baseline for ratios and verdicts. The
      variants must share one seed (leave ``seed`` at its default in each).
    model_fn: returns a fresh model; it is called after seeding, so within a repeat every
      variant starts from the same weights. A dict {name: model_fn} gives each variant its
      own model (a ladder row that changes the architecture); every variant needs one.
    data: a Dataset, or a dict {name: Dataset} giving each variant its own (a row that changes
      the data itself: a subset, more samples); every variant needs one.
    seed: repeat r runs every variant with seed ``seed + r`` (default: the variants' seed), so
      within a repeat all variants see the same initial weights and sample order, and repeats
      differ from each other.
    warmup: rounds of every variant run first and discarded (not saved), to warm caches,
      clocks and allocators. Repeat r runs the variants in an order rotated by r, so no
      variant always goes first.
    stop_event: a threading.Event; setting it stops the whole comparison. Runs finished before
      are kept; the run cut short is kept in ``partial`` and left out of every mean and verdict.
    Ctrl-C does the same, then raises ``greenlab.training.loop.Interrupted``: one line with the time
      and energy spent, the partial Comparison in ``gl.last_interrupted()``.
    show_progress: a line per run (which variant and repeat, then its time and energy).
    """
    from greenlab.session.config import seed_everything
    from greenlab.training.loop import TrainConfig, train

    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict {name: TrainConfig}")
    for name, cfg in variants.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"variant names must be non-empty strings, got {name!r}")
        if not isinstance(cfg, TrainConfig):
            raise ValueError(f"variant {name!r} must be a TrainConfig, got {type(cfg).__name__}")
    datasets = data if isinstance(data, dict) else {name: data for name in variants}
    if set(datasets) != set(variants):
        raise ValueError(f"data must be a Dataset or a dict with one for every variant; got {sorted(datasets)} "
                         f"for variants {sorted(variants)}")
    model_fns = model_fn if isinstance(model_fn, dict) else {name: model_fn for name in variants}
    missing = [name for name in variants if not callable(model_fns.get(name))]
    if missing:
        raise ValueError("model_fn must be a callable that returns a fresh torch.nn.Module, or a dict "
                         f"with one for every variant (missing or not callable: {', '.join(missing)})")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    seeds = {cfg.seed for cfg in variants.values()}
    if seed is None:
        if len(seeds) > 1:
            raise ValueError(f"the variants differ in seed ({sorted(seeds)}); a paired comparison gives "
                             "every variant the same seed in each repeat: leave TrainConfig.seed alone "
                             "and pass compare(..., seed=N) to choose it")
        seed = seeds.pop()
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")

    validation.flag("show_progress", show_progress)
    names = list(variants)
    configs = {n: (c if c.label else dataclasses.replace(c, label=n)) for n, c in variants.items()}

    def one(name, repeat_seed, keep):
        cfg = dataclasses.replace(configs[name], seed=repeat_seed)
        seed_everything(repeat_seed)
        model = model_fns[name]()
        return train(model, datasets[name], cfg, callbacks=callbacks, device=device, log=log, sources=sources,
                     idle=idle, save=save and keep, results_path=results_path, stop_event=stop_event)

    def cut_short(result) -> bool:
        return result.status in PARTIAL_STATUSES or (stop_event is not None and stop_event.is_set())

    repeat_runs = []  # one {name: RunResult} per repeat (finished runs only)
    order, partial, interrupted, ctrl_c = [], [], False, False
    where = "before the first run"
    steps = progress.Steps("greenlab.compare", (warmup + repeats) * len(names), unit="run", show=show_progress)
    try:
        for _ in range(warmup):
            for name in names:
                where = f"the warm-up run of {name!r}"
                steps.start(f"warm-up {name} (discarded)")
                try:
                    result = _train_kept(one, name, seed, False)
                except _CutShort:
                    raise KeyboardInterrupt from None
                if cut_short(result):
                    raise KeyboardInterrupt
                steps.done(_run_note(result))
        for r in range(repeats):
            shift = r % len(names)
            repeat_runs.append({})
            for name in names[shift:] + names[:shift]:
                where = f"{name!r} repeat {r + 1} of {repeats}"
                steps.start(f"{name} repeat {r + 1}/{repeats}")
                try:
                    result = _train_kept(one, name, seed + r, True)
                except _CutShort as cut:
                    partial.append((name, r, cut.result))
                    raise KeyboardInterrupt from None
                if cut_short(result):
                    partial.append((name, r, result))
                    raise KeyboardInterrupt
                order.append(name)
                repeat_runs[r][name] = result
                steps.done(_run_note(result))
    except KeyboardInterrupt:
        interrupted = True
        ctrl_c = not (stop_event is not None and stop_event.is_set())
    finally:
        steps.close()
    cmp = Comparison(names, repeat_runs, order, partial=partial, interrupted=interrupted,
                     requested_repeats=repeats)
    if ctrl_c:
        raise _interrupted(cmp, where) from None
    return cmp


class _CutShort(Exception):
    """A run of the comparison was interrupted; ``result`` is its partial RunResult."""

    def __init__(self, result):
        super().__init__("interrupted")
        self.result = result


def _train_kept(one, name, seed, keep):
    """One run; an ``Interrupted`` from gl.train becomes ``_CutShort`` carrying its partial run."""
    from greenlab.training.loop import Interrupted

    try:
        return one(name, seed, keep)
    except Interrupted as exc:
        raise _CutShort(exc.result) from None


def _run_note(result) -> str:
    est = " (estimate)" if result.estimated else ""
    return f"{result.seconds:.3g} s, {result.joules:.4g} J{est}"


def _interrupted(cmp, where):
    """The ``Interrupted`` (one line) for a comparison stopped by Ctrl-C during ``where``."""
    from greenlab.training.loop import remember_interrupted

    every = [r for rs in cmp.runs.values() for r in rs] + [p[2] for p in cmp.partial]
    seconds = sum(r.seconds for r in every)
    joules = sum(r.joules for r in every)
    est = " (estimate)" if cmp.estimated else ""
    finished = sum(len(rs) for rs in cmp.runs.values())
    line = (f"greenlab.compare: interrupted during {where}, after {finished} finished run(s), "
            f"{seconds:.3g} s and {joules:.4g} J{est} in all; the partial comparison (finished "
            "runs only in its means) is in gl.last_interrupted(); a variable this cell assigns "
            "keeps its previous value")
    return remember_interrupted(line, cmp)


class Comparison:
    """Results of ``compare``.

    ``runs``: name -> list of finished RunResults (the partial run of an interrupted comparison
    is not among them); ``repeat_runs``: one {name: RunResult} per repeat, for pairing;
    ``stats``: name -> metric -> Stat; ``ratios``: name -> metric -> mean / baseline mean;
    ``order``: run order; ``partial``: [(name, repeat, RunResult)] cut short by an interrupt;
    ``interrupted``: True when the comparison was stopped before it finished."""

    def __init__(self, names, repeat_runs, order, partial=(), interrupted=False, requested_repeats=None):
        self.names = list(names)
        self.baseline = self.names[0]
        self.repeat_runs = [dict(r) for r in repeat_runs]
        self.runs = {n: [rr[n] for rr in self.repeat_runs if n in rr] for n in self.names}
        self.order = list(order)
        self.partial = list(partial)
        self.interrupted = bool(interrupted)
        self.requested_repeats = requested_repeats if requested_repeats is not None else len(self.repeat_runs)
        self.stats = {n: {m: summarize([getattr(r, m, None) for r in self.runs[n]]) for m in METRICS}
                      for n in self.names}
        self.ratios = {}
        for n in self.names:
            self.ratios[n] = {}
            for m in _RATIO_METRICS:
                a, b = self.stats[n][m].mean, self.stats[self.baseline][m].mean
                self.ratios[n][m] = a / b if (a is not None and b) else None
        every = [r for rs in self.runs.values() for r in rs] + [p[2] for p in self.partial]
        first = every[0] if every else None
        self.provenance = first.provenance if first is not None else {}
        self.estimated = any(r.estimated for r in every)
        # energy figures that lost a component (RunResult.problems): "variant repeat k: ..."
        self.problems = [f"{n} repeat {i + 1}: {p}" for n, rs in self.runs.items()
                         for i, r in enumerate(rs) for p in r.problems]
        self.target = first.config.get("target_accuracy") if first is not None else None

    @property
    def repeats(self) -> int:
        """Repeats in which every variant finished."""
        return sum(1 for rr in self.repeat_runs if all(n in rr for n in self.names))

    def reached_target(self, name) -> bool:
        """True when every finished run of ``name`` reached the target accuracy."""
        runs = self.runs[name]
        return self.target is not None and bool(runs) and all(r.joules_to_target is not None for r in runs)

    def paired(self, variant, baseline=None, metric: str = "joules") -> Paired:
        """``variant`` against ``baseline`` (default: the first variant) on ``metric``, paired by
        repeat (see ``Paired``)."""
        baseline = self.baseline if baseline is None else baseline
        for name in (variant, baseline):
            if name not in self.names:
                raise ValueError(f"unknown variant {name!r}; this comparison has {', '.join(self.names)}")
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        rows = [rr for rr in self.repeat_runs if variant in rr and baseline in rr]
        return paired([getattr(rr[variant], metric, None) for rr in rows],
                      [getattr(rr[baseline], metric, None) for rr in rows], metric, variant, baseline)

    def verdict(self, variant, baseline=None, metric: str = "joules") -> str:
        """One sentence: "X is 23% lower in energy than Y (95% CI 15–31%)", "no detectable
        difference in energy between X and Y at 3 repeats (...)", or, with fewer than
        MIN_REPEATS_FOR_INTERVAL paired repeats, the point ratio and "too few repeats for an
        interval"."""
        return self.paired(variant, baseline, metric).sentence()

    def headline_metric(self, kind: str = "joules") -> str:
        """``joules_to_target`` (or ``seconds_to_target``) when every variant reached the target in
        every finished run, else ``joules`` (``seconds``)."""
        to_target = self.target is not None and all(self.reached_target(n) for n in self.names)
        return f"{kind}_to_target" if to_target else kind

    def table(self) -> list:
        """One dict per variant: means, 95% intervals (None with too few repeats) and paired
        verdicts against the baseline."""
        rows = []
        energy = self.headline_metric("joules")
        for n in self.names:
            s, q = self.stats[n], self.ratios[n]
            rows.append({
                "variant": n, "runs": len(self.runs[n]),
                "accuracy": s["final_accuracy"].mean, "val_accuracy": s["val_accuracy"].mean,
                "seconds": s["seconds"].mean, "seconds_interval": s["seconds"].interval(),
                "seconds_interval_clipped": s["seconds"].clipped,
                "joules": s["joules"].mean, "joules_interval": s["joules"].interval(),
                "joules_interval_clipped": s["joules"].clipped,
                "seconds_to_target": s["seconds_to_target"].mean,
                "joules_to_target": s["joules_to_target"].mean,
                "joules_to_target_interval": s["joules_to_target"].interval(),
                "joules_to_target_interval_clipped": s["joules_to_target"].clipped,
                "reached_target": f"{s['joules_to_target'].n}/{len(self.runs[n])}" if self.target else None,
                "samples_per_second": s["samples_per_second"].mean,
                "energy_ratio": q["joules"], "time_ratio": q["seconds"],
                "energy_metric": energy,
                "energy_vs_baseline": None if n == self.baseline else self.paired(n, metric=energy).short(),
                "estimated": any(r.estimated for r in self.runs[n]),
                "complete": all(r.complete for r in self.runs[n]),
            })
        return rows

    def __str__(self) -> str:
        lines = self._cells()
        widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
        text = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines]
        text.insert(1, "  ".join("-" * w for w in widths))
        text.append(self._footnote())
        return "\n".join(text)

    def _repr_html_(self) -> str:
        head, *body = self._cells()
        th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        return f"<table><tr>{th}</tr>{rows}</table><p>{html.escape(self._footnote())}</p>"

    def _cells(self) -> list:
        """Header and one row of display strings per variant."""
        energy = self.headline_metric("joules")
        lines = [["variant", "runs", "test acc", "time s", "energy J", "to target J", "samples/s",
                  "energy" + (" to target" if energy != "joules" else "") + " vs " + self.baseline]]
        for row in self.table():
            lines.append([
                row["variant"], str(row["runs"]), _pct(row["accuracy"]),
                _ci(row["seconds"], row["seconds_interval"], row["seconds_interval_clipped"]),
                _ci(row["joules"], row["joules_interval"], row["joules_interval_clipped"]),
                _ci(row["joules_to_target"], row["joules_to_target_interval"],
                    row["joules_to_target_interval_clipped"]) if self.target else "-",
                _num(row["samples_per_second"]), row["energy_vs_baseline"] or "(baseline)"])
        return lines

    def __repr__(self) -> str:
        return str(self)

    def plot(self, ax=None):
        """Bars of energy and time per variant with 95% intervals for the mean (clipped at 0;
        none with fewer than MIN_REPEATS_FOR_INTERVAL runs, which the title says).

        ``ax``: None (a new figure with two axes), or a pair of matplotlib axes, or one axes
        (energy only). Energy to target is used when every variant reached the target.
        Returns the axes.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        elif isinstance(ax, (list, tuple)) or hasattr(ax, "__len__"):
            axes = list(ax)
        else:
            axes = [ax]
        energy_metric, time_metric = self.headline_metric("joules"), self.headline_metric("seconds")
        to_target = energy_metric != "joules"
        specs = [(energy_metric, "energy (J)" + (" to target" if to_target else "")),
                 (time_metric, "time (s)" + (" to target" if to_target else ""))]
        for a, (metric, label) in zip(axes, specs):
            means, lows, highs, missing, clipped = [], [], [], False, False
            for n in self.names:
                st = self.stats[n][metric]
                clipped = clipped or st.clipped
                mean = st.mean or 0.0
                iv = st.interval()
                missing = missing or iv is None
                means.append(mean)
                lows.append(mean - iv[0] if iv else 0.0)
                highs.append(iv[1] - mean if iv else 0.0)
            a.bar(self.names, means, yerr=None if missing else [lows, highs], capsize=4, color="#4c9a6a")
            a.set_ylabel(label + (" [estimate]" if self.estimated and "J" in label else ""))
            note = "no intervals: too few repeats" if missing else "95% intervals"
            if clipped and not missing:
                note += "\n(a bar reaching 0 is clipped there: wide spread, not a possible 0)"
            a.set_title(f"{label}, mean of {self.repeats} run(s); {note}", fontsize=9)
        return axes

    def stakeholder_summary(self) -> str:
        """A plain-language paragraph built only from the measured numbers and the paired
        verdicts, with units; a difference is claimed only where the interval shows one."""
        base = self.baseline
        e_metric, t_metric = self.headline_metric("joules"), self.headline_metric("seconds")
        to_target = e_metric != "joules"
        goal = (f"to reach {self.target:.0%} validation accuracy" if to_target
                else "for the same training budget")
        sentences = []
        if self.interrupted:
            sentences.append(f"This comparison was interrupted after {self.repeats} of "
                             f"{self.requested_repeats} repeat(s); the run cut short is left out.")
        for n in self.names[1:]:
            e_n, e_b = self.stats[n][e_metric].mean, self.stats[base][e_metric].mean
            t_n, t_b = self.stats[n][t_metric].mean, self.stats[base][t_metric].mean
            if e_n is None or e_b is None:
                continue
            sentences.append(f"Energy {goal}: {n} {format_energy(e_n)}, {base} {format_energy(e_b)} "
                             f"(means); {n} against {base}: {self.paired(n, base, e_metric).plain()}.")
            if t_n is not None and t_b is not None:
                sentences.append(f"Time {goal}: {n} {t_n:.3g} s, {base} {t_b:.3g} s; "
                                 f"{n} against {base}: {self.paired(n, base, t_metric).plain()}.")
            a_n, a_b = self.stats[n]["final_accuracy"].mean, self.stats[base]["final_accuracy"].mean
            if not to_target and a_n is not None and a_b is not None and abs(a_n - a_b) >= 0.005:
                sentences.append(f"The two did not reach the same accuracy ({n} {a_n:.1%}, {base} "
                                 f"{a_b:.1%} on the test split), so the energy figures are not a "
                                 "like-for-like saving.")
        if self.target is not None and not to_target:
            missed = [n for n in self.names if not self.reached_target(n)]
            sentences.append(f"Not every run reached the {self.target:.0%} target ({', '.join(missed)} "
                             "missed it at least once), so totals for the whole run are compared instead.")
        acc = ", ".join(f"{n} {_pct(self.stats[n]['final_accuracy'].mean)}" for n in self.names)
        sentences.append(f"Test accuracy at the end: {acc}.")
        p = self.provenance
        where = p.get("gpu") or p.get("cpu") or p.get("device")
        sentences.append(f"Each figure is the mean of {self.repeats} paired run(s) per variant (same seed "
                         f"and sample order within a repeat), measured on {where} ({p.get('device')}) on "
                         f"{str(p.get('date', ''))[:10]} with torch {p.get('torch')} and greenlab "
                         f"{p.get('greenlab')}; energy sources: "
                         f"{', '.join(f'{k} {v}' for k, v in p.get('energy_sources', {}).items())}.")
        if self.estimated:
            sentences.append("The CPU figures are estimates from a power model, not meter readings.")
        if self.problems:
            sentences.append("Some energy figures are INCOMPLETE (lower bounds): "
                             + "; ".join(self.problems) + ".")
        return " ".join(sentences)

    def _footnote(self) -> str:
        est = "; CPU energy is an estimate" if self.estimated else ""
        if self.problems:
            est += f"; energy INCOMPLETE in {len(self.problems)} case(s): " + "; ".join(self.problems)
        tgt = f"; target validation accuracy {self.target:.0%}" if self.target else ""
        spread = (f"mean (95% interval) over {self.repeats} paired run(s)"
                  if self.repeats >= MIN_REPEATS_FOR_INTERVAL else
                  f"mean of {self.repeats} run(s): too few repeats for an interval "
                  f"(at least {MIN_REPEATS_FOR_INTERVAL} needed)")
        stop = ""
        if self.interrupted:
            cut = ", ".join(f"{n} (repeat {r + 1}, {res.status})" for n, r, res in self.partial) or "none"
            stop = (f"; INTERRUPTED after {self.repeats} of {self.requested_repeats} repeats, "
                    f"cut short and left out: {cut}")
        clipped = ""
        if any(self.stats[n][m].clipped for n in self.names
               for m in ("seconds", "joules", "joules_to_target")):
            clipped = "; " + CLIPPED_NOTE
        return (f"{spread}; verdicts vs {self.baseline} from per-repeat ratios{tgt}{est}{stop}{clipped}")


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


def summarize(values) -> Stat:
    """Mean, sample standard deviation, min, max and 95% t-interval of the values; None and
    non-finite values (a run without that figure) are left out and not counted in ``n``."""
    xs = [float(v) for v in _values("values", values) if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Stat(0, None, None, None, None, None)
    mean = sum(xs) / n
    if n < 2:
        return Stat(1, mean, None, xs[0], xs[0], None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Stat(n, mean, std, min(xs), max(xs), t_quantile_975(n - 1) * std / math.sqrt(n))


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF,
    which is integrated numerically from the density)."""
    df = validation.integer("df", df, low=1, high=10**6)
    lo, hi = 0.0, 20.0 if df > 1 else 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_from_zero(mid, df) < 0.475:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- helpers ----------------------------------------------------------------------------------

def _values(name: str, values) -> list:
    """A list of numbers or None (missing), else a clear error naming ``name``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise validation.ArgumentTypeError(f"{name} must be a list of numbers (None for missing), got {values!r}")
    out = list(values)
    for i, v in enumerate(out):
        if v is not None and (isinstance(v, (bool, str, bytes)) or not hasattr(v, "__float__")):
            raise validation.ArgumentTypeError(f"{name}[{i}] must be a number or None, got {v!r}")
    return out


def _t_cdf_from_zero(t: float, df: int, intervals: int = 2000) -> float:
    """P(0 <= T <= t) for Student's t, by Simpson's rule on the density."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def pdf(x):
        return c * (1 + x * x / df) ** (-(df + 1) / 2)

    h = t / intervals
    total = pdf(0.0) + pdf(t)
    for i in range(1, intervals):
        total += (4 if i % 2 else 2) * pdf(i * h)
    return total * h / 3


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(mean, interval, clipped: bool = False) -> str:
    """"mean (low–high)"; a low end clipped at 0 is marked "0*" (see CLIPPED_NOTE)."""
    if mean is None:
        return "-"
    if interval is None:
        return f"{mean:.4g}"
    low = "0*" if clipped else f"{interval[0]:.3g}"
    return f"{mean:.4g} ({low}–{interval[1]:.3g})"
