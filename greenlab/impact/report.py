"""Reporting: efficiency metrics for your runs, and an energy and carbon statement.

``efficiency_metrics(runs)`` puts five efficiency metrics side by side, one row per
run (a ``RunResult`` from ``gl.train`` or a dict from the results log):

1. time to convergence: seconds to the target accuracy, or the whole run when no
   target was set or reached (the ``time_basis`` column says which);
2. energy: kWh of the whole run, with its source (measured or estimate);
3. FLOPs: training FLOPs (an estimate: FLOPs per sample x samples trained);
4. CO2e: grams, from the energy, a region's grid intensity and a PUE;
5. parameter efficiency: accuracy (0-1) per million parameters.

``carbon_statement(run, region)`` writes the Markdown "energy and carbon statement"
that a paper or model card needs: hardware, duration, energy per component with its
source, the grid intensity with year and source, PUE, CO2e and an honest uncertainty.

Uncertainty: each energy component carries a relative uncertainty (e.g. +-50 % for
a CPU estimate). Components are treated as independent, so absolute uncertainties
add in quadrature: u_E = sqrt(sum (r_i x E_i)^2). CO2e inherits u_E / E; an optional
relative uncertainty of the grid intensity is added in quadrature too. PUE is taken
as exact (it is stated, not measured here).

``how_measured(result)`` (from ``greenlab.energy.provenance``) says the same provenance and
uncertainty in one phrase, for the statements learners write for a general reader.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from greenlab.energy.provenance import combined_uncertainty, how_measured  # how_measured: also gl.report.how_measured
from greenlab.impact import carbon, scaling
from greenlab.base.units import JOULES_PER_KWH, format_energy, plain_number
from greenlab.base.storage import atomic_write_text

METRIC_COLUMNS = (
    ("label", "run", ""),
    ("accuracy", "accuracy", ""),
    ("time_s", "time to convergence", "s"),
    ("time_basis", "time basis", ""),
    ("energy_kwh", "energy", "kWh"),
    ("energy_source", "energy source", ""),
    ("train_flops", "training FLOPs (estimate)", "FLOP"),
    ("co2e_g", "CO2e", "g"),
    ("params", "parameters", ""),
    ("accuracy_per_mparam", "accuracy per million parameters", "1/M"),
)


@dataclass(frozen=True)
class EfficiencyRow:
    """The five efficiency metrics of one run (units in the names)."""

    label: str
    status: str
    accuracy: float | None
    time_s: float
    time_basis: str
    energy_kwh: float
    energy_source: str
    energy_estimated: bool
    train_flops: float | None
    co2e_g: float
    region: str
    pue: float
    params: int | None
    accuracy_per_mparam: float | None
    energy_problems: tuple = ()  # what the energy figure is missing (empty when complete)

    @property
    def gflop_per_joule(self) -> float | None:
        """Training work per joule (GFLOP/J), from the FLOP estimate and the run's energy."""
        joules = self.energy_kwh * JOULES_PER_KWH
        if self.train_flops is None or joules <= 0:
            return None
        return self.train_flops / 1e9 / joules


@dataclass
class EfficiencyTable:
    """Rows of :func:`efficiency_metrics`; shows as an HTML table in a notebook."""

    rows: list[EfficiencyRow]
    region: str
    pue: float
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key):
        if isinstance(key, str):
            for row in self.rows:
                if row.label == key:
                    return row
            raise KeyError(f"no run labelled {key!r}; labels: {', '.join(r.label for r in self.rows)}")
        return self.rows[key]

    def to_dicts(self) -> list[dict]:
        """Plain rows (one dict per run), e.g. for a CSV file."""
        return [dict(r.__dict__) for r in self.rows]

    def markdown(self) -> str:
        """A Markdown table, then the notes."""
        head = [f"{title} ({unit})" if unit else title for _, title, unit in METRIC_COLUMNS]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows:
            lines.append("| " + " | ".join(_cell(row, key) for key, _, _ in METRIC_COLUMNS) + " |")
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes])

    def __str__(self) -> str:
        return self.markdown()

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(title)}{f' ({unit})' if unit else ''}</th>"
                       for _, title, unit in METRIC_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r, k))}</td>" for k, _, _ in METRIC_COLUMNS)
                       + "</tr>" for r in self.rows)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><ul>{notes}</ul>"


@dataclass
class CarbonStatement:
    """An energy and carbon statement; ``markdown`` is the text, ``values`` the numbers."""

    markdown: str
    values: dict

    def __str__(self) -> str:
        return self.markdown

    def _repr_markdown_(self) -> str:
        return self.markdown

    def save(self, path) -> Path:
        """Write the Markdown to ``path`` atomically (a temporary file in the same folder,
        then a rename), creating parent folders; returns the path."""
        target = Path(path).expanduser()
        atomic_write_text(target, self.markdown)
        return target


# --- public API ---------------------------------------------------------------


def efficiency_metrics(runs, region: str | None = None, pue=None) -> EfficiencyTable:
    """One table of the five efficiency metrics for ``runs``.

    ``runs``: a list (or dict label -> run) of ``RunResult`` objects or results-log dicts.
    ``region``: grid for CO2e (None: each run's own ``region``, else 'WORLD').
    ``pue``: a number >= 1 or a ``carbon.PueReference`` (None: ``carbon.DEFAULT_PUE``).
    """
    if isinstance(runs, dict):
        items = list(runs.items())
    elif isinstance(runs, (list, tuple)):
        items = [(None, r) for r in runs]
    else:
        items = [(None, runs)]
    if not items:
        raise ValueError("runs is empty; pass a list of RunResult objects (from gl.train) or results-log dicts")
    pue_value, _ = _pue(pue)
    rows = []
    for index, (label, run) in enumerate(items):
        rows.append(_row(run, label, index, region, pue_value))
    used = sorted({r.region for r in rows})
    notes = [
        "time to convergence = seconds to the target accuracy when one was reached, else the whole run.",
        "energy and CO2e cover the whole run (training and evaluation); CO2e = kWh x grid intensity x PUE "
        f"(PUE {pue_value:g}; grid {', '.join(used)}: " + "; ".join(_intensity_note(c) for c in used) + ").",
        "training FLOPs are an estimate (FLOPs per training sample x samples trained).",
        "accuracy per million parameters = final test accuracy (0-1) / (parameters / 1e6).",
    ]
    if any(r.energy_estimated for r in rows):
        notes.append("at least one energy figure is an estimate (a model, not a meter); see energy source.")
    for r in rows:
        if r.energy_problems:
            notes.append(f"{r.label}: energy INCOMPLETE (a lower bound): " + "; ".join(r.energy_problems))
    return EfficiencyTable(rows=rows, region=", ".join(used), pue=pue_value, notes=notes)


def carbon_statement(run, region: str = "WORLD", pue=None, hardware: str | None = None,
                     title: str | None = None, intensity_rel_uncertainty: float = 0.0) -> CarbonStatement:
    """A Markdown energy and carbon statement for ``run``.

    ``run``: a ``RunResult`` (from ``gl.train``), a ``Measurement`` (from ``gl.measure``),
    or a dict of either from the results log. ``region``: code or name in
    ``gl.carbon.regions()``. ``pue``: a number >= 1 or a ``carbon.PueReference``
    (None: 1.0, the machine only). ``hardware``: overrides the hardware line.
    ``intensity_rel_uncertainty``: relative uncertainty of the grid figure (e.g. 0.1),
    added in quadrature; 0 leaves it out (and the statement says so).
    """
    info = _energy_info(run)
    grid = carbon.intensity(region)
    pue_value, pue_source = _pue(pue)
    r_int = _fraction(intensity_rel_uncertainty, "intensity_rel_uncertainty")
    joules = info["joules"]
    kwh = joules / JOULES_PER_KWH
    rel_energy = combined_uncertainty((c["joules"], c["rel_uncertainty"]) for c in info["components"])
    grams = carbon.co2e_g(joules, grid, pue_value)
    rel_co2e = math.sqrt(rel_energy ** 2 + r_int ** 2)
    estimated = any(c["estimated"] for c in info["components"])
    hw = hardware or info["hardware"]
    name = title or info["label"] or "training run"

    comp_lines = []
    for c in info["components"]:
        kind = "estimate" if c["estimated"] else "measured"
        how = f"; model: {c['model']}" if c["estimated"] and c["model"] else ""
        comp_lines.append(f"  - `{c['component']}`: {format_energy(c['joules'])} ({kind}, source `{c['source']}`, "
                          f"+-{c['rel_uncertainty']:.0%}{how})")
    word = "estimated" if estimated else "measured"
    lines = [
        f"## Energy and carbon statement: {name}",
        "",
        f"- **Hardware:** {hw}",
        f"- **Duration:** {plain_number(info['seconds'], 4)} s ({plain_number(info['seconds'] / 3600)} h)",
        f"- **Energy ({word}):** {plain_number(kwh)} kWh ({format_energy(joules)}) +- {rel_energy:.0%}",
        *comp_lines,
        f"- **Grid:** {grid.name} (`{grid.code}`), {grid.g_per_kwh:g} gCO2e/kWh, annual average for "
        f"{grid.year}; source: {grid.source}",
        f"- **PUE:** {pue_value:g} ({pue_source})",
        f"- **Emissions:** {carbon.format_mass(grams)} CO2e +- {rel_co2e:.0%} "
        f"(= {plain_number(kwh)} kWh x {grid.g_per_kwh:g} g/kWh x PUE {pue_value:g})",
        "",
        "**Uncertainty.** Component uncertainties are combined in quadrature (treated as independent): "
        f"+-{rel_energy:.0%} on energy. "
        + (f"The grid figure adds +-{r_int:.0%}, giving +-{rel_co2e:.0%} on CO2e. " if r_int > 0 else
           "The grid figure's own uncertainty is not included. ")
        + "The intensity is an annual average, not the hour-by-hour or marginal intensity of the grid "
        "while the job ran, and embodied emissions of the hardware (manufacturing) are not included.",
    ]
    if info["short"]:  # the window cannot carry a figure: say so instead of giving one
        lines = [f"## Energy and carbon statement: {name}", "",
                 f"- **Hardware:** {hw}",
                 f"- **Duration:** {plain_number(info['seconds'], 4)} s",
                 f"- **Energy and emissions:** not measurable at this size: the energy window lasted "
                 f"{plain_number(info['seconds'], 4)} s, shorter than its meters read reliably "
                 f"({plain_number(info['reliable_from_s'], 4)} s); measure more work in one window."]
    if estimated:
        lines += ["", "**This is an estimate, not a measurement:** at least one component's energy comes "
                  "from a power model (see the model above), because no hardware energy counter could be read."]
    if info["problems"]:
        lines += ["", "**Incomplete:** part of the energy could not be measured, so the figures above are "
                  "a lower bound: " + "; ".join(info["problems"]) + "."]
    values = {
        "label": name, "hardware": hw, "seconds": info["seconds"], "joules": joules, "kwh": kwh,
        "energy_rel_uncertainty": rel_energy, "estimated": estimated, "region": grid.code,
        "g_per_kwh": grid.g_per_kwh, "intensity_year": grid.year, "intensity_source": grid.source,
        "pue": pue_value, "pue_source": pue_source, "co2e_g": grams, "co2e_rel_uncertainty": rel_co2e,
        "components": info["components"], "complete": not info["problems"],
        "problems": list(info["problems"]), "short": info["short"],
    }
    return CarbonStatement(markdown="\n".join(lines) + "\n", values=values)


def datasheet_efficiency(precision: str = "bf16") -> list[dict]:
    """Peak TFLOPS per TDP watt of each GPU in ``cited_tables/gpus.csv`` for ``precision``
    ("fp32", "tf32", "bf16", "fp16" or "int8"), highest first.

    These are *datasheet ratios*, not measurements: peak dense throughput over the
    board's maximum power. Real training reaches a fraction of peak at a different power.
    """
    columns = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops",
               "fp16": "fp16_tflops", "int8": "int8_tops"}
    if not isinstance(precision, str) or precision not in columns:
        raise ValueError(f"precision must be one of {', '.join(columns)}, got {precision!r}")
    out = []
    for spec in scaling.gpus():
        peak = getattr(spec, columns[precision])
        if peak is None:
            continue
        out.append({"gpu": spec.name, "year": spec.year, "precision": precision, "peak_tflops": peak,
                    "tdp_w": spec.tdp_w, "gflops_per_watt": peak * 1000 / spec.tdp_w,
                    "spec_checked": spec.spec_checked, "kind": "datasheet ratio (peak / TDP), not a measurement"})
    return sorted(out, key=lambda r: -r["gflops_per_watt"])


# --- helpers ------------------------------------------------------------------


def _get(run, name, default=None):
    if isinstance(run, dict):
        return run.get(name, default)
    return getattr(run, name, default)


def _row(run, label, index, region, pue_value) -> EfficiencyRow:
    if not (isinstance(run, dict) or hasattr(run, "joules")):
        raise ValueError(f"run {index} must be a RunResult (from gl.train) or a results-log dict, "
                         f"got {type(run).__name__}")
    joules = _get(run, "joules")
    seconds = _get(run, "seconds")
    if joules is None or seconds is None:
        raise ValueError(f"run {index} has no 'joules'/'seconds'; is it a training result?")
    name = label or _get(run, "label") or f"run {index + 1}"
    to_target = _get(run, "seconds_to_target")
    if to_target is not None:
        time_s, basis = float(to_target), "to target"
    else:
        time_s, basis = float(seconds), "whole run (no target reached)" if _target(run) else "whole run"
    sources = _get(run, "sources") or {}
    estimated = bool(_get(run, "estimated", False))
    source_text = ", ".join(f"{k}: {v}" for k, v in sources.items()) or ("estimate" if estimated else "unknown")
    flops = _get(run, "flops") or {}
    train_flops = flops.get("train_total_estimate") if isinstance(flops, dict) else None
    params = _get(run, "params")
    accuracy = _get(run, "final_accuracy")
    per_m = accuracy / (params / 1e6) if accuracy is not None and params else None
    grid = region or _get(run, "region") or "WORLD"
    code = carbon.intensity(grid).code
    return EfficiencyRow(
        label=str(name), status=str(_get(run, "status", "")), accuracy=accuracy, time_s=time_s,
        time_basis=basis, energy_kwh=float(joules) / JOULES_PER_KWH, energy_source=source_text,
        energy_estimated=estimated, train_flops=None if train_flops is None else float(train_flops),
        co2e_g=carbon.co2e_g(float(joules), code, pue_value), region=code, pue=pue_value,
        params=params, accuracy_per_mparam=per_m, energy_problems=tuple(_problems(run)))


def _target(run) -> bool:
    config = _get(run, "config") or {}
    return isinstance(config, dict) and config.get("target_accuracy") is not None


def _energy_info(run) -> dict:
    """Normalise a RunResult / Measurement / dict into label, seconds, hardware, components."""
    measurement = run
    hardware = "not recorded"
    label = ""
    if _get(run, "energy") is not None and _get(run, "components") is None:  # a training result
        measurement = _get(run, "energy")
        label = _get(run, "label") or ""
        hardware = _hardware(_get(run, "provenance") or {})
    components = _get(measurement, "components")
    seconds = _get(measurement, "seconds")
    if components is None or seconds is None:
        raise ValueError("run must be a RunResult from gl.train, a Measurement from gl.measure, "
                         "or a dict of either from the results log")
    label = label or _get(measurement, "label") or ""
    comps = []
    for name, c in components.items():
        comps.append({
            "component": _get(c, "component", name), "source": _get(c, "source", "unknown"),
            "joules": float(_get(c, "joules", 0.0)), "estimated": bool(_get(c, "estimated", True)),
            "rel_uncertainty": float(_get(c, "rel_uncertainty", 0.0) or 0.0),
            "model": _get(c, "model", "") or "", "note": _get(c, "note", "") or ""})
    if not comps:
        raise ValueError("the measurement has no energy components; nothing to report")
    reliable = _get(measurement, "reliable_from_s")
    return {"label": label, "seconds": float(seconds), "hardware": hardware,
            "joules": math.fsum(c["joules"] for c in comps), "components": comps,
            "problems": _problems(run) or _problems(measurement),
            # the shortest window its sources read reliably; a shorter one is not measurable at this size
            "reliable_from_s": None if reliable is None else float(reliable),
            "short": reliable is not None and float(seconds) < float(reliable)}


def _problems(run) -> list:
    """What a result's energy is missing: its ``problems`` (RunResult, Measurement or dict)."""
    problems = _get(run, "problems")
    if problems is None and _get(run, "energy") is not None:
        problems = _get(_get(run, "energy"), "problems")
    return [str(p) for p in (problems or [])]


def _hardware(prov: dict) -> str:
    parts = []
    if prov.get("gpu"):
        parts.append(f"GPU: {prov['gpu']}")
    if prov.get("cpu"):
        threads = f" ({prov['cpu_threads']} threads used)" if prov.get("cpu_threads") else ""
        parts.append(f"CPU: {prov['cpu']}{threads}")
    if prov.get("device"):
        parts.append(f"training device `{prov['device']}`")
    return "; ".join(parts) or "not recorded"


def _pue(pue) -> tuple[float, str]:
    if isinstance(pue, carbon.PueReference):
        return carbon._check_pue(pue.pue), f"{pue.name}, {pue.year}; source: {pue.source}"
    value = carbon._check_pue(pue)
    if pue is None:
        return value, "default: the machine only, no facility overhead (cooling, power distribution) counted"
    return value, "given by the user"


def _intensity_note(code: str) -> str:
    r = carbon.intensity(code)
    return f"{r.code} {r.g_per_kwh:g} gCO2e/kWh ({r.year})"


def _fraction(value, name) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0 (e.g. 0.1 for +-10%), got {value!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0 (e.g. 0.1 for +-10%), got {value!r}")
    return number




def _cell(row: EfficiencyRow, key: str) -> str:
    value = getattr(row, key)
    if value is None:
        return "n/a"
    if key == "accuracy":
        return f"{value:.1%}"
    if key == "params":
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def recipe_statement(comparison, baseline: str, candidate: str, region: str = "WORLD",
                     tuning_joules: dict | None = None, tolerance: float = 0.01,
                     names: dict | None = None) -> str:
    """A paragraph for a non-technical reader on ``candidate`` against ``baseline`` in a
    ``gl.compare`` result: the energy each spent to deliver its model (the whole run) in J and
    Wh with g CO2e on ``region``'s grid, the paired verdict in words, the test accuracies and
    whether they are within ``tolerance`` (fraction), the search bill when ``tuning_joules``
    ({name: J}) is given, and a decision with its condition. ``names`` ({row: word}) renames
    rows for the reader. Claims a saving only when the verdict shows one."""
    label = {baseline: baseline, candidate: candidate, **(names or {})}

    grid = carbon.intensity(region)
    factor = comparison.paired(baseline, candidate, metric="joules")  # baseline / candidate
    mean = {n: comparison.stats[n]["joules"].mean for n in (baseline, candidate)}
    acc = {n: comparison.stats[n]["final_accuracy"].mean for n in (baseline, candidate)}
    if None in mean.values() or None in acc.values():
        return (f"No statement: {baseline} or {candidate} has no complete run to compare "
                f"({comparison.repeats} repeat(s)).")

    def amount(j):
        grams = carbon.co2e_g(j, grid)
        return (f"{format_energy(j)} ({plain_number(j / 3600, 2)} Wh, {carbon.format_mass(grams)} CO2e "
                f"on the {grid.name} grid)")

    how = how_measured(comparison)
    parts = [f"To deliver a trained model, the {label[candidate]} recipe used {amount(mean[candidate])} and the "
             f"{label[baseline]} recipe {amount(mean[baseline])}, each the mean of {comparison.repeats} paired runs; "
             f"the energy is {how}."]
    gap = acc[candidate] - acc[baseline]
    same = gap >= -tolerance
    if factor.detectable:
        word = "less" if factor.estimate > 1 else "more"
        times = factor.estimate if factor.estimate > 1 else 1 / factor.estimate
        lo, hi = sorted(((factor.low, factor.high) if factor.estimate > 1 else (1 / factor.high, 1 / factor.low)))
        parts.append(f"The {label[candidate]} recipe used {times:.1f} times {word} energy (95% interval "
                     f"{lo:.1f} to {hi:.1f} times).")
    elif not factor.measurable:
        parts.append("The energy windows were shorter than their meters read reliably, so the difference is "
                     "not measurable at this size.")
    elif factor.low is None:
        parts.append(f"With {factor.n} paired run(s) there is no interval, so no difference is claimed.")
    else:
        parts.append("The repeats show no detectable difference in energy between the two.")
    if not same:
        accuracy_note = (f": the {label[candidate]} model is {-gap * 100:.1f} points less accurate, so the saving "
                         "was bought with accuracy.")
    elif gap <= tolerance:
        accuracy_note = f" (within {tolerance * 100:.0f} point)."
    else:
        accuracy_note = "."
    parts.append(f"Test accuracy: {label[candidate]} {acc[candidate]:.1%}, "
                 f"{label[baseline]} {acc[baseline]:.1%}{accuracy_note}")
    if tuning_joules:
        parts.append("Choosing the learning rates cost " + ", ".join(
            f"{format_energy(j)} for {label.get(n, n)}" for n, j in tuning_joules.items())
            + ", paid once before training.")
    if factor.detectable and factor.estimate > 1:
        condition = ("as long as its model meets the accuracy target" if same else
                     f"if {-gap * 100:.1f} points of test accuracy are an acceptable price")
        parts.append(f"We recommend the {label[candidate]} recipe {condition}; on other hardware, measure again "
                     "before relying on the factor.")
    else:
        parts.append(f"We keep the {label[baseline]} recipe unless more repeats show a difference.")
    return " ".join(parts)
