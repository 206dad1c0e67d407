"""``Comparison``: the paired runs of ``compare``, their statistics, verdicts and renderings
(a plain table, HTML, bars with intervals, a stakeholder paragraph)."""

from __future__ import annotations

import html

from greenlab.base.units import format_energy
from greenlab.experiments.presentation import CLIPPED_NOTE, _ci, _num, _pct
from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL, summarize
from greenlab.experiments.verdicts import _RATIO_METRICS, METRICS, Paired, paired

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
