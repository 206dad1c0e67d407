"""What a data-parallel run measured, and how it reads (lesson 08 (08_scaling_out)): ``DDPResult`` (times in
seconds, energy in joules, per worker and per node), ``scaling_report`` (speedup and efficiency against a
baseline), ``stakeholder_summary`` (a paragraph from the measured figures), ``energy_breakdown`` and
``power_profile``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from greenlab.base.units import plain_number
from greenlab.energy.provenance import how_measured
from greenlab.experiments.verdicts import NOT_MEASURABLE
from greenlab.impact.scaling import scaling_efficiency


@dataclass
class DDPResult:
    """One data-parallel run. Times in seconds, energy in joules.

    ``train_seconds``: rank 0's training time between two barriers (all workers start and end
    together), without start-up or evaluation. ``wall_seconds``: the parent's time for the whole
    launch. ``energy``: the parent's ``Measurement`` of the whole launch. ``train_energy``: the
    training window reduced across all workers (``DistributedMeasurement.to_dict()``: every
    worker's process and device, shared devices counted once, with ``ranks`` and ``nodes``
    breakdowns, ``complete`` and ``problems``).
    """

    nprocs: int
    backend: str
    device: str
    threads_per_worker: int
    per_worker_batch: int
    global_batch: int
    accum_steps: int
    epochs: int
    lr: float
    steps: int
    per_rank_steps: list
    per_rank_samples: list
    samples: int
    train_seconds: float
    samples_per_second: float
    final_accuracy: float
    final_loss: float
    loss_history: list
    dataset: dict
    model: dict
    wall_seconds: float
    energy: object = None  # greenlab.energy.Measurement of the whole launch, or None
    train_energy: dict | None = None
    label: str = ""
    notes: list = field(default_factory=list)
    val_accuracy: float | None = None
    launch_runs: int = 1

    @property
    def joules(self) -> float | None:
        """Energy of the whole launch (start-up included), joules; None when not measured."""
        return None if self.energy is None else self.energy.joules

    @property
    def train_joules(self) -> float | None:
        """Energy of the training window, all workers and nodes together, joules."""
        return None if self.train_energy is None else float(self.train_energy["joules"])

    @property
    def energy_complete(self) -> bool:
        """False when a worker failed to measure or lost a component (see ``energy_problems``),
        or when the whole-launch measurement is incomplete."""
        return not self.energy_problems

    @property
    def energy_problems(self) -> list:
        """Why an energy figure of this run is incomplete (empty when complete)."""
        out = list((self.train_energy or {}).get("problems", []))
        if self.energy is not None:
            out += [f"whole launch: {p}" for p in self.energy.problems]
        return out

    @property
    def train_energy_short(self) -> bool:
        """True when the training window of any worker was shorter than its sources read reliably
        (``DistributedMeasurement.short``): the summed training energy is then not measurable at
        this size, and the summary, the scaling table and the stakeholder paragraph say so instead
        of a figure."""
        return bool((self.train_energy or {}).get("short"))

    @property
    def joules_by_rank(self) -> list | None:
        """Each worker's own figures in the training window, joules (shared devices included in
        every worker that reads them, so these need not add up to ``train_joules``)."""
        if self.train_energy is None or "ranks" not in self.train_energy:
            return None
        return [r["joules"] for r in self.train_energy["ranks"]]

    @property
    def joules_by_node(self) -> dict | None:
        """Training-window energy counted on each node, joules; sums to ``train_joules``."""
        if self.train_energy is None or "nodes" not in self.train_energy:
            return None
        return {name: node["joules"] for name, node in self.train_energy["nodes"].items()}

    @property
    def joules_by_kind(self) -> dict | None:
        """Training-window energy per kind of component over all nodes, joules, e.g.
        ``{"cpu": 310.0}`` on a CPU or ``{"cpu": 90.0, "gpu": 1200.0}`` with GPUs; sums to
        ``train_joules``. A kind that no source measures is absent, never 0."""
        if self.train_energy is None or "nodes" not in self.train_energy:
            return None
        out: dict = {}
        for node in self.train_energy["nodes"].values():
            for kind, joules in node.get("joules_by_kind", {}).items():
                out[kind] = out.get(kind, 0.0) + float(joules)
        return out

    @property
    def estimated(self) -> bool:
        """True when any energy figure of this run is an estimate."""
        whole = self.energy is not None and self.energy.estimated
        train = self.train_energy is not None and bool(self.train_energy.get("estimated"))
        return whole or train

    @property
    def device_hours(self) -> float:
        """Worker-hours of the training window: nprocs x train_seconds / 3600."""
        return self.nprocs * self.train_seconds / 3600.0

    @property
    def joules_per_device_hour(self) -> float | None:
        """``k`` in energy = k x device-hours, from the training window (J per worker-hour)."""
        if self.train_joules is None or self.device_hours <= 0:
            return None
        return self.train_joules / self.device_hours

    @property
    def startup_seconds(self) -> float:
        """Launch time outside the training window (process start, imports, rendezvous, evaluation)."""
        return max(0.0, self.wall_seconds - self.train_seconds)

    def summary(self) -> str:
        """One readable line."""
        energy = "energy not measured"
        if self.train_joules is not None and self.train_energy_short:
            energy = f"training energy {NOT_MEASURABLE} (a worker's window was short)"
        elif self.train_joules is not None:
            est = " (estimate)" if self.estimated else ""
            nodes = self.joules_by_node or {}
            where = f" over {self.nprocs} worker(s) on {len(nodes)} node(s)" if nodes else ""
            energy = f"{plain_number(self.train_joules, 4)} J training{where}{est}"
            if self.joules is not None:
                energy += f", {plain_number(self.joules, 4)} J whole launch"
            if not self.energy_complete:
                energy += " (INCOMPLETE: " + "; ".join(self.energy_problems) + ")"
        return (f"{self.label or 'ddp'}: {self.nprocs} worker(s) [{self.backend}/{self.device}], "
                f"global batch {self.global_batch}, {self.steps} steps, {plain_number(self.train_seconds)} s "
                f"training ({plain_number(self.wall_seconds)} s launch), "
                f"{plain_number(self.samples_per_second, 4)} samples/s, "
                f"accuracy {self.final_accuracy:.1%}, {energy}")

    def to_dict(self) -> dict:
        """The result as plain JSON-safe values, with the energy's own dict and the device-hour figures."""
        out = {k: v for k, v in asdict(self).items() if k != "energy"}
        out["energy"] = self.energy.to_dict() if self.energy is not None else None
        out["device_hours"] = self.device_hours
        out["joules_per_device_hour"] = self.joules_per_device_hour
        return out


@dataclass
class ScalingReport:
    """Speedup, scaling efficiency and energy of several runs against the first (the baseline)."""

    rows: list

    def text(self) -> str:
        """A plain-text table."""
        head = ("workers", "nodes", "global batch", "train s", "speedup", "efficiency", "train J",
                "worker-hours", "J per worker-hour", "accuracy")
        lines = [" | ".join(head)]
        for r in self.rows:
            mark = "" if r["complete"] else " (incomplete)"
            short = r.get("short", False)
            lines.append(" | ".join([
                str(r["workers"]), _fmt(r["nodes"], "d"), str(r["global_batch"]),
                f"{r['train_seconds']:.3g}", f"{r['speedup']:.2f}x", f"{r['efficiency']:.2f}",
                NOT_MEASURABLE if short else _fmt(r["train_joules"], ".4g") + mark, f"{r['device_hours']:.3g}",
                NOT_MEASURABLE if short else _fmt(r["joules_per_device_hour"], ".4g") + mark,
                f"{r['accuracy']:.1%}"]))
        problems = [f"{r['label'] or r['workers']}: {p}" for r in self.rows for p in r["problems"]]
        if problems:
            lines.append("incomplete energy: " + "; ".join(problems))
        if any(r.get("short") for r in self.rows):
            lines.append(f"energy {NOT_MEASURABLE}: a worker's training window was shorter than its "
                         "meter reads reliably (a sum of windows is short when any part is)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        lines = [line for line in self.text().splitlines() if " | " in line]
        head = "".join(f"<th>{c}</th>" for c in lines[0].split(" | "))
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in line.split(" | ")) + "</tr>"
                       for line in lines[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def scaling_report(results) -> ScalingReport:
    """Compare runs with the first one (the baseline, usually 1 worker).

    speedup = baseline train_seconds / run train_seconds; efficiency =
    ``greenlab.impact.scaling.scaling_efficiency`` scaled to the worker ratio, i.e.
    speedup / (workers / baseline workers). Energy is each run's training window reduced over
    all its workers and nodes (``DDPResult.train_joules``); a run whose energy is incomplete is
    marked so in the table and its problems listed below it.
    """
    results = list(results)
    if not results or not all(isinstance(r, DDPResult) for r in results):
        raise ValueError("scaling_report needs a non-empty list of DDPResult, baseline first")
    base = results[0]
    rows = []
    for r in results:
        speedup = base.train_seconds / r.train_seconds
        if base.nprocs == 1:
            efficiency = scaling_efficiency(base.train_seconds, r.train_seconds, r.nprocs)
        else:
            efficiency = speedup * base.nprocs / r.nprocs
        rows.append({
            "label": r.label, "workers": r.nprocs, "global_batch": r.global_batch,
            "per_worker_batch": r.per_worker_batch, "steps": r.steps,
            "train_seconds": r.train_seconds, "wall_seconds": r.wall_seconds,
            "speedup": speedup, "efficiency": efficiency, "train_joules": r.train_joules,
            "joules": r.joules, "device_hours": r.device_hours,
            "joules_per_device_hour": r.joules_per_device_hour, "accuracy": r.final_accuracy,
            "estimated": r.estimated, "nodes": len(r.joules_by_node) if r.joules_by_node else None,
            "joules_by_node": r.joules_by_node, "complete": r.energy_complete,
            "problems": r.energy_problems, "short": r.train_energy_short,
        })
    return ScalingReport(rows)


def stakeholder_summary(baseline: DDPResult, scaled: DDPResult) -> str:
    """A plain-language paragraph comparing a scaled run with its baseline, from the measured figures."""
    speedup = baseline.train_seconds / scaled.train_seconds
    efficiency = speedup * baseline.nprocs / scaled.nprocs
    text = (f"We trained the same model with {baseline.nprocs} and with {scaled.nprocs} worker "
            f"processes. Training took {baseline.train_seconds:.1f} s and {scaled.train_seconds:.1f} s: "
            f"a speedup of {speedup:.2f}x, or {efficiency:.0%} of the ideal "
            f"{scaled.nprocs / baseline.nprocs:g}x. ")
    if baseline.train_energy_short or scaled.train_energy_short:
        text += (f"The training energy is {NOT_MEASURABLE}: a worker's window was shorter than its meter "
                 "reads reliably. ")
    elif baseline.train_joules is not None and scaled.train_joules is not None:
        kind = how_measured(scaled.train_energy, short=True)
        ratio = scaled.train_joules / baseline.train_joules
        text += (f"The training energy, summed over every worker, was {baseline.train_joules:.0f} J "
                 f"and {scaled.train_joules:.0f} J ({ratio:.2f}x; {kind}). ")
        missing = [r.label or f"{r.nprocs} worker(s)" for r in (baseline, scaled) if not r.energy_complete]
        if missing:
            text += (f"The energy of {' and '.join(missing)} is incomplete (a worker could not be "
                     "measured), so the true figure is higher. ")
    text += (f"Accuracy on held-out data was {baseline.final_accuracy:.1%} and "
             f"{scaled.final_accuracy:.1%} (global batch {baseline.global_batch} and "
             f"{scaled.global_batch}). ")
    if efficiency < 1:
        text += ("Below-ideal efficiency means some of the extra hardware time went on coordination "
                 "rather than learning, and that time is paid for in money and energy.")
    else:
        text += "Scaling was ideal or better in this run."
    return text


def energy_breakdown(result: DDPResult) -> list:
    """Lines naming each node and worker with the training energy counted there, joules."""
    e = result.train_energy or {}
    lines = []
    for name, node in (e.get("nodes") or {}).items():
        ranks = ", ".join(str(r) for r in node["ranks"])
        lines.append(f"node {name}: worker(s) {ranks}; {plain_number(node['joules'], 4)} J counted here")
    for r in e.get("ranks") or []:
        own = ", ".join(f"{k}{' (' + c['part'] + ')' if c.get('part') == 'busy' else ''} "
                        f"{plain_number(c['joules'], 4)} J {c['source']}" for k, c in r["components"].items())
        state = "" if r["ok"] else f" FAILED: {r['error']}"
        lines.append(f"worker {r['rank']} on {r['node']} (pid {r['pid']}): {own or 'nothing'}{state}")
    return lines


def power_profile(samples) -> dict:
    """How steady a ``PowerMonitor`` trace's total power is, in watts: ``mean_watts``,
    ``std_watts``, ``cv`` (std / mean; 0 is a perfectly steady draw), ``min_watts``,
    ``max_watts``, ``seconds`` (the trace's span) and ``n`` (samples). ``samples``: a
    ``PowerMonitor`` or its ``samples()``. ValueError with fewer than two samples."""
    import statistics

    samples = samples.samples() if hasattr(samples, "samples") else list(samples)
    if len(samples) < 2:
        raise ValueError(f"samples must hold at least 2 power samples, got {len(samples)}")
    watts = [float(s.total_watts) for s in samples]
    mean = statistics.fmean(watts)
    std = statistics.pstdev(watts)
    return {"mean_watts": mean, "std_watts": std, "cv": std / mean if mean > 0 else float("nan"),
            "min_watts": min(watts), "max_watts": max(watts),
            "seconds": float(samples[-1].t_s - samples[0].t_s), "n": len(watts)}


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
