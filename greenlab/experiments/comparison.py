"""``Comparison``: the paired runs of ``compare``, their statistics and verdicts, and a table of
them (``greenlab.experiments.presentation`` writes its text, HTML, bars and paragraph)."""

from __future__ import annotations

from greenlab.experiments import presentation
from greenlab.experiments.stats import summarize
from greenlab.experiments.verdicts import (
    _RATIO_METRICS,
    CHANCE_MARGIN,
    METRICS,
    AccuracyVerdict,
    Equivalence,
    Paired,
    ToTarget,
    accuracy_verdict,
    equivalence,
    paired,
    short_flags,
    target_ratio,
    to_target,
    window_short,
)

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
                      [getattr(rr[baseline], metric, None) for rr in rows], metric, variant, baseline,
                      short=short_flags([rr[variant] for rr in rows], [rr[baseline] for rr in rows], metric))

    def short(self, name, metric: str = "joules") -> bool:
        """True when any finished run of ``name`` had an energy window too short to carry
        ``metric`` (see ``greenlab.experiments.window_short``)."""
        return any(window_short(r, metric) for r in self.runs[name])

    def equivalence(self, variant, baseline=None, metric: str = "final_accuracy",
                    margin: float = 0.01) -> Equivalence:
        """Is ``variant`` equivalent to ``baseline`` on ``metric`` within ``margin`` (fraction:
        0.01 = one accuracy point)? Two one-sided tests: the 90% paired interval inside ±margin.
        ``.words()`` is the only way to say "as good": "equivalent within ±1 point" or "not shown
        equivalent within ±1 point"."""
        baseline = self.baseline if baseline is None else baseline
        p = self.paired(variant, baseline, metric)  # checks the names and the metric
        rows = [rr for rr in self.repeat_runs if variant in rr and baseline in rr]
        return equivalence([getattr(rr[variant], metric, None) for rr in rows],
                           [getattr(rr[baseline], metric, None) for rr in rows], metric, margin, p.variant,
                           p.baseline, short=short_flags([rr[variant] for rr in rows],
                                                         [rr[baseline] for rr in rows], metric))

    def accuracy_verdict(self, variant, baseline=None, margin: float = 0.01, classes: int | None = None,
                         metric: str = "final_accuracy", chance_margin: float = CHANCE_MARGIN) -> AccuracyVerdict:
        """The accuracy sentence a lesson may print about ``variant`` against ``baseline``: none
        when the baseline is not clearly above chance (1 / ``classes``, default the data's number
        of classes), else equivalence within ``margin`` and the paired difference."""
        baseline = self.baseline if baseline is None else baseline
        self.paired(variant, baseline, metric)  # checks the names and the metric
        if classes is None:
            found = {getattr(r, "num_classes", None) for rs in self.runs.values() for r in rs} - {None}
            if len(found) != 1:
                raise ValueError("the runs do not say how many classes the task has: pass classes=")
            classes = found.pop()
        rows = [rr for rr in self.repeat_runs if variant in rr and baseline in rr]
        return accuracy_verdict([getattr(rr[variant], metric, None) for rr in rows],
                                [getattr(rr[baseline], metric, None) for rr in rows], classes, margin,
                                metric, variant, baseline, chance_margin)

    def to_target(self, name, metric: str = "joules_to_target") -> ToTarget:
        """Energy (or time) to the target for ``name``'s repeats, only those that reached it,
        with the count ("2 of 3 repeats reached 85%")."""
        if name not in self.names:
            raise ValueError(f"unknown variant {name!r}; this comparison has {', '.join(self.names)}")
        return to_target(self.runs[name], metric, name, self.target)

    def target_ratio(self, variant, baseline=None, metric: str = "joules_to_target") -> Paired:
        """The paired verdict on energy (or time) to target, refused (``TargetNotReached``) unless
        both reached the target in every repeat."""
        baseline = self.baseline if baseline is None else baseline
        rows = [rr for rr in self.repeat_runs if variant in rr and baseline in rr]
        return target_ratio([rr[variant] for rr in rows], [rr[baseline] for rr in rows], metric, variant, baseline)

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
        return presentation.text(self)

    def _repr_html_(self) -> str:
        return presentation.html_table(self)

    def __repr__(self) -> str:
        return str(self)

    def plot(self, ax=None):
        """Bars of energy and time per variant with 95% intervals for the mean (clipped at 0;
        none with fewer than MIN_REPEATS_FOR_INTERVAL runs, which the title says).

        ``ax``: None (a new figure with two axes), or a pair of matplotlib axes, or one axes
        (energy only). Energy to target is used when every variant reached the target.
        Returns the axes.
        """
        return presentation.plot(self, ax)

    def stakeholder_summary(self) -> str:
        """A plain-language paragraph built only from the measured numbers and the paired
        verdicts, with units; a difference is claimed only where the interval shows one."""
        return presentation.stakeholder_summary(self)
