"""How a ``Comparison`` is shown: a plain-text and an HTML table with a footnote, bars with 95%
intervals, and a stakeholder paragraph built only from its measured numbers and verdicts."""

from __future__ import annotations

import html

from greenlab.base.units import format_energy, plain_number
from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL
from greenlab.experiments.verdicts import NOT_MEASURABLE

ACCURACY_MARGIN = 0.01  # the paragraph calls two accuracies equivalent only within one point
SHORT_CELL = "too short*"
SHORT_NOTE = ("* too short: the energy window was shorter than its meters read reliably "
              "(ShortWindowWarning), so its energy is " + NOT_MEASURABLE)
CLIPPED_NOTE = ("* a low end shown as 0 is clipped: the interval (mean +- 95% half-width) reached "
                "below zero, which energy and time cannot; it says the runs spread widely (more "
                "repeats narrow it), not that 0 is a possible value")


def text(cmp) -> str:
    """The comparison as a plain-text table with its footnote."""
    lines = cells(cmp)
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append(footnote(cmp))
    return "\n".join(out)


def html_table(cmp) -> str:
    """The comparison as an HTML table with its footnote (Jupyter's rich display)."""
    head, *body = cells(cmp)
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><tr>{th}</tr>{rows}</table><p>{html.escape(footnote(cmp))}</p>"


def cells(cmp) -> list:
    """Header and one row of display strings per variant."""
    energy = cmp.headline_metric("joules")
    lines = [["variant", "runs", "test acc", "time s", "energy J", "to target J", "samples/s",
              "energy" + (" to target" if energy != "joules" else "") + " vs " + cmp.baseline]]
    for row in cmp.table():
        lines.append([
            row["variant"], str(row["runs"]), _pct(row["accuracy"]),
            _ci(row["seconds"], row["seconds_interval"], row["seconds_interval_clipped"]),
            SHORT_CELL if cmp.short(row["variant"], "joules") else
            _ci(row["joules"], row["joules_interval"], row["joules_interval_clipped"]),
            "-" if not cmp.target else SHORT_CELL if cmp.short(row["variant"], "joules_to_target") else
            _ci(row["joules_to_target"], row["joules_to_target_interval"],
                row["joules_to_target_interval_clipped"]),
            _num(row["samples_per_second"]), row["energy_vs_baseline"] or "(baseline)"])
    return lines


def plot(cmp, ax=None):
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
    energy_metric, time_metric = cmp.headline_metric("joules"), cmp.headline_metric("seconds")
    to_target = energy_metric != "joules"
    specs = [(energy_metric, "energy (J)" + (" to target" if to_target else "")),
             (time_metric, "time (s)" + (" to target" if to_target else ""))]
    for a, (metric, label) in zip(axes, specs):
        means, lows, highs, missing, clipped = [], [], [], False, False
        for n in cmp.names:
            st = cmp.stats[n][metric]
            clipped = clipped or st.clipped
            mean = st.mean or 0.0
            iv = st.interval()
            missing = missing or iv is None
            means.append(mean)
            lows.append(mean - iv[0] if iv else 0.0)
            highs.append(iv[1] - mean if iv else 0.0)
        a.bar(cmp.names, means, yerr=None if missing else [lows, highs], capsize=4, color="#4c9a6a")
        a.set_ylabel(label + (" [estimate]" if cmp.estimated and "J" in label else ""))
        note = "no intervals: too few repeats" if missing else "95% intervals"
        if clipped and not missing:
            note += "\n(a bar reaching 0 is clipped there: wide spread, not a possible 0)"
        a.set_title(f"{label}, mean of {cmp.repeats} run(s); {note}", fontsize=9)
    return axes


def stakeholder_summary(cmp) -> str:
    """A plain-language paragraph built only from the measured numbers and the paired
    verdicts, with units; a difference is claimed only where the interval shows one."""
    base = cmp.baseline
    e_metric, t_metric = cmp.headline_metric("joules"), cmp.headline_metric("seconds")
    to_target = e_metric != "joules"
    goal = (f"to reach {cmp.target:.0%} validation accuracy" if to_target
            else "for the same training budget")
    sentences = []
    if cmp.interrupted:
        sentences.append(f"This comparison was interrupted after {cmp.repeats} of "
                         f"{cmp.requested_repeats} repeat(s); the run cut short is left out.")
    for n in cmp.names[1:]:
        e_n, e_b = cmp.stats[n][e_metric].mean, cmp.stats[base][e_metric].mean
        t_n, t_b = cmp.stats[n][t_metric].mean, cmp.stats[base][t_metric].mean
        if e_n is None or e_b is None:
            continue
        if not cmp.paired(n, base, e_metric).measurable:
            sentences.append(f"Energy {goal}, {n} against {base}: {NOT_MEASURABLE} (the runs' energy windows "
                             "were shorter than the meters read reliably), so no energy figure is given.")
        else:
            sentences.append(f"Energy {goal}: {n} {format_energy(e_n)}, {base} {format_energy(e_b)} "
                             f"(means); {n} against {base}: {cmp.paired(n, base, e_metric).plain()}.")
        if t_n is not None and t_b is not None:
            sentences.append(f"Time {goal}: {n} {plain_number(t_n)} s, {base} {plain_number(t_b)} s; "
                             f"{n} against {base}: {cmp.paired(n, base, t_metric).plain()}.")
        a_n, a_b = cmp.stats[n]["final_accuracy"].mean, cmp.stats[base]["final_accuracy"].mean
        if not to_target and a_n is not None and a_b is not None:
            same = cmp.equivalence(n, base, "final_accuracy", ACCURACY_MARGIN)
            if not same.equivalent:
                sentences.append(f"Their test accuracies ({n} {a_n:.1%}, {base} {a_b:.1%}) are {same.words()}, "
                                 "so the energy figures are not shown to be a like-for-like saving.")
    if cmp.target is not None and not to_target:
        missed = [n for n in cmp.names if not cmp.reached_target(n)]
        sentences.append(f"Not every run reached the {cmp.target:.0%} target ({', '.join(missed)} "
                         "missed it at least once), so totals for the whole run are compared instead.")
    acc = ", ".join(f"{n} {_pct(cmp.stats[n]['final_accuracy'].mean)}" for n in cmp.names)
    sentences.append(f"Test accuracy at the end: {acc}.")
    p = cmp.provenance
    where = p.get("gpu") or p.get("cpu") or p.get("device")
    sentences.append(f"Each figure is the mean of {cmp.repeats} paired run(s) per variant (same seed "
                     f"and sample order within a repeat), measured on {where} ({p.get('device')}) on "
                     f"{str(p.get('date', ''))[:10]} with torch {p.get('torch')} and greenlab "
                     f"{p.get('greenlab')}; energy sources: "
                     f"{', '.join(f'{k} {v}' for k, v in p.get('energy_sources', {}).items())}.")
    if cmp.estimated:
        sentences.append("The CPU figures are estimates from a power model, not meter readings.")
    if cmp.problems:
        sentences.append("Some energy figures are INCOMPLETE (lower bounds): "
                         + "; ".join(cmp.problems) + ".")
    return " ".join(sentences)


def footnote(cmp) -> str:
    """What the table's figures are: spread, pairing, target, estimates, interruptions."""
    est = "; CPU energy is an estimate" if cmp.estimated else ""
    if cmp.problems:
        est += f"; energy INCOMPLETE in {len(cmp.problems)} case(s): " + "; ".join(cmp.problems)
    tgt = f"; target validation accuracy {cmp.target:.0%}" if cmp.target else ""
    spread = (f"mean (95% interval) over {cmp.repeats} paired run(s)"
              if cmp.repeats >= MIN_REPEATS_FOR_INTERVAL else
              f"mean of {cmp.repeats} run(s): too few repeats for an interval "
              f"(at least {MIN_REPEATS_FOR_INTERVAL} needed)")
    stop = ""
    if cmp.interrupted:
        cut = ", ".join(f"{n} (repeat {r + 1}, {res.status})" for n, r, res in cmp.partial) or "none"
        stop = (f"; INTERRUPTED after {cmp.repeats} of {cmp.requested_repeats} repeats, "
                f"cut short and left out: {cut}")
    short = ""
    if any(cmp.short(n, m) for n in cmp.names for m in ("joules", "joules_to_target")):
        short = "; " + SHORT_NOTE
    clipped = ""
    if any(cmp.stats[n][m].clipped for n in cmp.names
           for m in ("seconds", "joules", "joules_to_target")):
        clipped = "; " + CLIPPED_NOTE
    return (f"{spread}; verdicts vs {cmp.baseline} from per-repeat ratios{tgt}{est}{stop}{short}{clipped}")


# --- helpers ----------------------------------------------------------------------------------

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
