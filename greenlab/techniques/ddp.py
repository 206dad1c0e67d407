"""A real data-parallel training run, launched through torchrun.

``run_ddp(nprocs, ...)`` writes a JSON config, starts::

    python -m torch.distributed.run --standalone --nproc_per_node=N -m greenlab.techniques.ddp --config FILE

as a subprocess and waits for it. The parent loads the dataset once (``greenlab.training.data.load``, or a
``Dataset`` you pass) and saves its tensors to the run's temporary folder; each worker process
memory-maps that file, wraps the same
model in ``torch.nn.parallel.DistributedDataParallel`` (gradients are averaged across workers by
DDP's own all-reduce), reads its own shard of every epoch through ``DistributedSampler`` and
trains. Rank 0 evaluates on the test split and writes a JSON result. ``--standalone`` picks a free
local port, so several runs never collide.

Energy: the training window (between two barriers, without start-up or evaluation) is a
collective window (``greenlab.measure(..., distributed=True)``): every worker measures its own
process and its own device, and the figures are reduced across workers, each shared device
counted once (see ``greenlab.energy.distributed``); per-worker and per-node figures are kept.
The parent also wraps the whole launch (start-up included) in ``greenlab.measure``, which counts
the parent and its children (the torchrun tree) on this node.

A "device" is one worker process. On a CPU each worker is one process with one thread
(``threads_per_worker=1``), so two workers on two cores is a fair comparison with one; on a
machine with GPUs each worker drives one GPU (backend NCCL).

``run_ddp_series(nprocs, runs, ...)`` runs several configurations (batch sizes, training-set sizes,
seeds) one after another inside the same torchrun workers, so a comparison pays torchrun's start-up
(process start, imports, rendezvous: seconds) once rather than once per configuration. Every run
builds its model afresh from its own seed and has its own training window, barriers and evaluation.

Gradient accumulation (``accum_steps > 1``) runs the first micro-batches of every optimizer step
inside ``DistributedDataParallel.no_sync()``, so gradients are all-reduced once per step, not
once per micro-batch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from greenlab.base.processes import kill_group
from greenlab.base.units import plain_number
from greenlab.energy.provenance import how_measured
from greenlab.session.devices import synchronize

BACKENDS = ("gloo", "nccl")
DEVICES = ("cpu", "cuda")
STDERR_TAIL_LINES = 40


class DDPError(RuntimeError):
    """A torchrun launch failed or timed out; the message holds the workers' errors and the
    tail of their stderr."""


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
        if self.train_joules is not None:
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
            lines.append(" | ".join([
                str(r["workers"]), _fmt(r["nodes"], "d"), str(r["global_batch"]),
                f"{r['train_seconds']:.3g}", f"{r['speedup']:.2f}x", f"{r['efficiency']:.2f}",
                _fmt(r["train_joules"], ".4g") + mark, f"{r['device_hours']:.3g}",
                _fmt(r["joules_per_device_hour"], ".4g") + mark, f"{r['accuracy']:.1%}"]))
        problems = [f"{r['label'] or r['workers']}: {p}" for r in self.rows for p in r["problems"]]
        if problems:
            lines.append("incomplete energy: " + "; ".join(problems))
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


# --- public API ---------------------------------------------------------------------------------


def run_ddp(nprocs: int, data="synthetic", model="cnn", per_worker_batch: int | None = None,
            global_batch: int | None = None, epochs: int = 1, max_steps: int | None = None,
            lr: float = 0.05, momentum: float = 0.9, accum_steps: int = 1, backend: str | None = None,
            device: str | None = None, threads_per_worker: int = 1, seed: int = 0,
            timeout_s: float = 300.0, measure_energy: bool = True, label: str = "") -> DDPResult:
    """Train with ``nprocs`` data-parallel worker processes via torchrun; return a ``DDPResult``.

    ``data``: a ``greenlab.training.data.Dataset`` (loaded once, reused across runs), a dataset name for
    ``greenlab.training.data.load`` or a dict of its arguments, e.g.
    ``{"name": "fashion-mnist", "n_train": 2000, "n_test": 500}``.
    ``model``: a family name for ``greenlab.training.models.build`` or a dict ``{"name": "cnn", **options}``.
    Give exactly one of ``per_worker_batch`` (global batch = per_worker_batch x nprocs x
    accum_steps, it grows with workers) or ``global_batch`` (must divide by nprocs x accum_steps;
    each worker's batch shrinks as workers are added).
    ``max_steps``: stop after this many optimizer steps (None: run all ``epochs``).
    ``backend``: None picks "nccl" on CUDA and "gloo" on CPU. ``device``: None picks "cuda" when
    there is one GPU per worker, else "cpu" (see ``pick_device``).
    ``threads_per_worker``: CPU threads per worker (OMP_NUM_THREADS and torch.set_num_threads).
    ``timeout_s``: the launch is killed after this long and ``DDPError`` is raised.
    Raises ``ValueError`` for bad arguments and ``DDPError`` when a worker fails.
    """
    config = make_config(nprocs, data=_spec_of(data), model=model, per_worker_batch=per_worker_batch,
                         global_batch=global_batch, epochs=epochs, max_steps=max_steps, lr=lr,
                         momentum=momentum, accum_steps=accum_steps, backend=backend, device=device,
                         threads_per_worker=threads_per_worker, seed=seed)
    config["label"] = label
    return _launch(nprocs, [config], data, timeout_s, measure_energy, label or f"ddp x{nprocs}")[0]


RUN_KEYS = ("label", "workers", "per_worker_batch", "global_batch", "accum_steps", "epochs", "max_steps", "lr",
            "momentum", "seed", "n_train")


def run_ddp_series(nprocs: int, runs, data="synthetic", model="cnn", epochs: int = 1,
                   max_steps: int | None = None, lr: float = 0.05, momentum: float = 0.9,
                   backend: str | None = None, device: str | None = None, threads_per_worker: int = 1,
                   seed: int = 0, timeout_s: float = 300.0, measure_energy: bool = True) -> list:
    """Several data-parallel runs in ONE torchrun launch of ``nprocs`` workers, one after another;
    a list of ``DDPResult`` in the order of ``runs``.

    ``runs``: a list of dicts, one per run, each with exactly one of ``per_worker_batch`` or
    ``global_batch`` and optionally ``label``, ``workers`` (1 to ``nprocs``, default ``nprocs``:
    a run on fewer workers trains on the first ranks, over a process group of its own, while the
    others wait at a barrier, so a 1-worker baseline needs no launch of its own), ``accum_steps``,
    ``n_train`` (train on the first
    ``n_train`` samples of the training split: a training set that grows with the workers is weak
    scaling), and its own ``epochs``, ``max_steps``, ``lr``, ``momentum`` or ``seed`` (the other
    arguments' values otherwise). Every run builds its model from its own seed, so a run gives
    the same updates as it would in a launch of its own. The launch's wall time and whole-launch
    energy are shared: every result carries them with ``launch_runs = len(runs)``.
    Raises ``ValueError`` for bad arguments (naming the run) and ``DDPError`` when a worker fails.
    """
    if not isinstance(runs, (list, tuple)) or not runs:
        raise ValueError("runs must be a non-empty list of dicts, e.g. [{'per_worker_batch': 256}]")
    shared = dict(epochs=epochs, max_steps=max_steps, lr=lr, momentum=momentum, seed=seed)
    configs = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ValueError(f"runs[{i}] must be a dict of run arguments, got {type(run).__name__}")
        unknown = sorted(set(run) - set(RUN_KEYS))
        if unknown:
            raise ValueError(f"runs[{i}] has unknown keys {unknown}; a run takes {', '.join(RUN_KEYS)}")
        args = {**shared, **{k: v for k, v in run.items() if k not in ("label", "n_train", "workers")}}
        workers = run.get("workers", nprocs)
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= nprocs:
            raise ValueError(f"runs[{i}] workers must be an integer from 1 to nprocs={nprocs}, got {workers!r}")
        try:
            config = make_config(workers, data=_spec_of(data), model=model, backend=backend,
                                 device=device, threads_per_worker=threads_per_worker, **args)
        except ValueError as exc:
            raise ValueError(f"runs[{i}]: {exc}") from None
        n_train = run.get("n_train")
        config["n_train"] = None if n_train is None else _positive_int(f"runs[{i}] n_train", n_train)
        config["label"] = str(run.get("label", ""))
        configs.append(config)
    return _launch(nprocs, configs, data, timeout_s, measure_energy, f"ddp x{nprocs} series")


def _spec_of(data):
    return data if isinstance(data, (str, dict)) else {"name": getattr(data, "name", "dataset")}


def _launch(nprocs: int, configs: list, data, timeout_s, measure_energy: bool, window_label: str) -> list:
    """One torchrun launch that trains every config of ``configs`` in turn; their DDPResults."""
    timeout_s = _positive_number("timeout_s", timeout_s)
    dataset = _dataset(data)
    for i, config in enumerate(configs):
        n_train = config.get("n_train")
        if n_train is not None and n_train > dataset.n_train:
            raise ValueError(f"runs[{i}] n_train={n_train} is more than the dataset's {dataset.n_train} "
                             "training samples; load more")
    with tempfile.TemporaryDirectory(prefix="greenlab-ddp-") as tmp:
        folder = Path(tmp)
        launch = dict(configs[0])
        launch["nprocs"] = nprocs
        launch["runs"] = configs
        launch["result_path"] = str(folder / "result.json")
        launch["error_dir"] = str(folder)
        launch["measure_energy"] = bool(measure_energy)
        launch["data"] = _save_dataset(dataset, folder / "data.pt")
        config_path = folder / "config.json"
        config_path.write_text(json.dumps(launch, indent=1), encoding="utf-8")
        command = launch_command(config_path, nprocs)
        window = None
        if measure_energy:
            from greenlab.energy import measure

            window = measure(window_label).start()
        started = time.perf_counter()
        try:
            returncode, stderr = _run(command, _worker_env(launch["threads_per_worker"]), timeout_s)
        except KeyboardInterrupt:  # the workers are already stopped (_run): one line, as gl.train's
            raise _interrupted_launch(nprocs, len(configs), time.perf_counter() - started) from None
        finally:
            wall = time.perf_counter() - started
            energy = window.stop() if window is not None else None
        raw = collect_result(folder, Path(launch["result_path"]), nprocs, returncode, stderr, timeout_s)
    notes = list(raw.get("notes", []))
    out = []
    for run in raw["runs"]:
        run = dict(run)
        label = run.pop("label", "")
        if len(configs) > 1:
            run["notes"] = list(run.get("notes", [])) + [
                f"one of {len(configs)} runs in one torchrun launch: wall time and whole-launch energy "
                "are the launch's"]
        run["notes"] = list(run.get("notes", [])) + notes
        out.append(DDPResult(**run, wall_seconds=wall, energy=energy, label=label,
                             launch_runs=len(configs)))
    return out


def make_config(nprocs: int, data="synthetic", model="cnn", per_worker_batch: int | None = None,
                global_batch: int | None = None, epochs: int = 1, max_steps: int | None = None,
                lr: float = 0.05, momentum: float = 0.9, accum_steps: int = 1,
                backend: str | None = None, device: str | None = None, threads_per_worker: int = 1,
                seed: int = 0) -> dict:
    """The worker config ``run_ddp`` writes as JSON (validated; see ``run_ddp`` for the arguments)."""
    nprocs = _positive_int("nprocs", nprocs)
    accum_steps = _positive_int("accum_steps", accum_steps)
    if (per_worker_batch is None) == (global_batch is None):
        raise ValueError("give exactly one of per_worker_batch (global batch grows with workers) "
                         "or global_batch (split across workers)")
    if per_worker_batch is not None:
        per_worker = _positive_int("per_worker_batch", per_worker_batch)
    else:
        total = _positive_int("global_batch", global_batch)
        if total % (nprocs * accum_steps):
            raise ValueError(f"global_batch {total} must divide by nprocs x accum_steps = "
                             f"{nprocs * accum_steps}")
        per_worker = total // (nprocs * accum_steps)
    device = pick_device(nprocs) if device is None else device
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} or None, got {device!r}")
    if device == "cuda":
        _check_gpus(nprocs)
    if backend is None:
        backend = "nccl" if device == "cuda" else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    if backend == "nccl" and device != "cuda":
        raise ValueError("backend 'nccl' needs device='cuda'; use 'gloo' on the CPU")
    if max_steps is not None:
        max_steps = _positive_int("max_steps", max_steps)
    return {
        "nprocs": nprocs,
        "data": _as_spec(data, "data"),
        "model": _as_spec(model, "model"),
        "per_worker_batch": per_worker,
        "global_batch": per_worker * nprocs * accum_steps,
        "accum_steps": accum_steps,
        "epochs": _positive_int("epochs", epochs),
        "max_steps": max_steps,
        "lr": _positive_number("lr", lr),
        "momentum": _non_negative_number("momentum", momentum),
        "backend": backend,
        "device": device,
        "threads_per_worker": _positive_int("threads_per_worker", threads_per_worker),
        "seed": _non_negative_int("seed", seed),
    }


def launch_command(config_path, nprocs: int, module: str = "greenlab.techniques.ddp") -> list:
    """The torchrun command line ``run_ddp`` starts (a list for ``subprocess``); ``module`` is the
    worker's module, run with ``python -m`` in every process. torchrun runs inside
    ``greenlab/base/processes.py`` run as a script (see ``greenlab.base.processes.supervise_main``; as a
    script it imports only the standard library, so it starts at once): it dies with the process
    that launched it and then removes the run's folder (the config's), which holds the dataset
    copy; each worker dies with torchrun (``run_worker``)."""
    folder = str(Path(config_path).parent)
    from greenlab.base import processes

    supervisor = str(Path(processes.__file__).resolve())
    return [sys.executable, supervisor, "--remove", folder, "--",
            "torch.distributed.run", "--standalone",
            f"--nproc_per_node={_positive_int('nprocs', nprocs)}", "--max-restarts=0",
            "-m", module, "--config", str(config_path)]


def collect_result(folder: Path, result_file: Path, nprocs: int, returncode, stderr: str,
                   timeout_s: float) -> dict:
    """The result rank 0 wrote to ``result_file`` after a torchrun launch (``returncode`` None
    when it was killed at ``timeout_s``). Each worker writes ``error.rank<N>.txt`` in ``folder``
    when it fails and touches ``finished-<N>`` there once it is past its last collective: a
    launch whose workers all finished keeps its result even when one then died in shutdown
    (gloo can abort there), with a note saying so. Otherwise ``DDPError`` with the workers'
    errors and the tail of their stderr."""
    errors = _worker_errors(folder)
    finished = all((folder / f"finished-{r}").exists() for r in range(nprocs))
    if not result_file.is_file() or (returncode != 0 and not finished):
        raise DDPError(_failure_message(nprocs, returncode, timeout_s, errors, stderr))
    raw = json.loads(result_file.read_text(encoding="utf-8"))
    if returncode != 0:  # a worker died in shutdown, after every rank had finished its work
        raw["notes"] = list(raw.get("notes", [])) + [
            f"torchrun exited with code {returncode}: a worker failed while shutting down, "
            "after every worker had finished its work and the result was written "
            f"({_last_line(stderr)})"]
    return raw


def pick_device(nprocs: int) -> str:
    """"cuda" when this machine has at least one GPU per worker, else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() and torch.cuda.device_count() >= nprocs else "cpu"


def scaling_report(results) -> ScalingReport:
    """Compare runs with the first one (the baseline, usually 1 worker).

    speedup = baseline train_seconds / run train_seconds; efficiency =
    ``greenlab.impact.scaling.scaling_efficiency`` scaled to the worker ratio, i.e.
    speedup / (workers / baseline workers). Energy is each run's training window reduced over
    all its workers and nodes (``DDPResult.train_joules``); a run whose energy is incomplete is
    marked so in the table and its problems listed below it.
    """
    from greenlab.impact.scaling import scaling_efficiency

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
            "problems": r.energy_problems,
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
    if baseline.train_joules is not None and scaled.train_joules is not None:
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


def parse_worker_counts(text) -> list:
    """``"1,2,4"`` -> [1, 2, 4] (for ``greenlab run --workers``); ValueError names the problem."""
    counts = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"--workers takes worker counts >= 1 separated by commas, e.g. 1,2; "
                             f"got {text!r}")
        counts.append(int(part))
    if len(set(counts)) != len(counts):
        raise ValueError(f"--workers lists a count twice: {text}")
    return counts


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


# --- the worker (runs inside each torchrun process) ---------------------------------------------


def worker_main(argv=None) -> int:
    """Entry point of one torchrun worker: train, and on rank 0 write the result JSON."""
    return run_worker(argv, _train_worker, "greenlab.techniques.ddp", "one worker of a greenlab data-parallel run")


def run_worker(argv, work, module: str, description: str) -> int:
    """A torchrun worker's shell: read ``--config`` (the JSON file the launcher wrote), run
    ``work(config)``, and on any failure leave ``error.rank<N>.txt`` for the launcher's report."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--config", required=True, help="JSON file written by the launcher")
    args = parser.parse_args(argv)
    from greenlab.base.processes import die_with_parent

    die_with_parent(sig=signal.SIGKILL)  # torchrun's death (or kill) ends this worker too
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        work(config)
    except BaseException as exc:
        folder = Path(config.get("error_dir") or Path(args.config).parent)
        (folder / f"error.rank{rank}.txt").write_text(f"{type(exc).__name__}: {exc}", encoding="utf-8")
        raise
    return 0


def _train_worker(config: dict) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(config["threads_per_worker"]))
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if world != config["nprocs"]:
        raise RuntimeError(f"torchrun started {world} workers but the config asks for {config['nprocs']}")
    if config["device"] == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=config["backend"])
    try:
        ds = _load_dataset(config["data"])
        runs = config.get("runs") or [config]
        # every rank creates every subgroup, in the same order (torch.distributed.new_group's rule)
        groups = {k: dist.new_group(list(range(k))) for k in sorted({r["nprocs"] for r in runs}) if k < world}
        results = []
        for run in runs:
            run = {**run, "measure_energy": config.get("measure_energy"), "launch_nprocs": world}
            group = groups.get(run["nprocs"])
            if rank < run["nprocs"]:
                results.append(_train_one(run, ds, device, rank, local_rank, group))
            dist.barrier()  # a rank outside a smaller run's group waits here while it trains
        finish_worker(dist, config, rank, {"runs": results} if rank == 0 else None)
    finally:
        dist.destroy_process_group()


def _train_one(config: dict, ds, device, rank: int, local_rank: int, group=None) -> dict | None:
    """One run on the first ``config["nprocs"]`` ranks (``group``: their process group, None for
    the whole job): a fresh model from the run's seed, its own training window between two
    barriers, rank 0's evaluation. Returns rank 0's result dict (None elsewhere)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data.distributed import DistributedSampler

    from greenlab.training import models
    from greenlab.training.step import backward, classifier_loss, make_scaler, optimizer_step

    torch.manual_seed(config["seed"])
    model_spec = dict(config["model"])
    model_name = model_spec.pop("name")
    if model_name in ("cnn", "resnet"):
        model_spec.setdefault("in_channels", ds.input_shape[0])
    if model_name == "mlp":
        model_spec.setdefault("input_shape", ds.input_shape)
    model_spec.setdefault("num_classes", ds.num_classes)
    net = models.build(model_name, **model_spec).to(device)
    world = config["nprocs"]
    ddp = DistributedDataParallel(net, device_ids=[local_rank] if device.type == "cuda" else None,
                                  process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=config["lr"], momentum=config["momentum"])
    scaler = make_scaler(device.type, "fp32")  # data-parallel runs are fp32 (passes through)
    n_train = config.get("n_train") or ds.n_train
    train_x, train_y = ds.train_x[:n_train].to(device), ds.train_y[:n_train].to(device)
    sampler = DistributedSampler(range(n_train), num_replicas=world, rank=rank, shuffle=True,
                                 seed=config["seed"], drop_last=True)
    batch, accum = config["per_worker_batch"], config["accum_steps"]
    steps, samples, losses = 0, 0, []
    window = None
    dist.barrier(group=group)
    if config.get("measure_energy"):  # every rank of the run: a collective window, reduced at stop()
        from greenlab.energy.distributed import CollectiveWindow

        window = CollectiveWindow("ddp training", group=group).start()
    t0 = time.perf_counter()
    for epoch in range(config["epochs"]):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.long, device=device)
        micro = [order[i:i + batch] for i in range(0, len(order) - batch + 1, batch)]
        for start in range(0, len(micro) - accum + 1, accum):
            step_loss = 0.0
            for j, idx in enumerate(micro[start:start + accum]):
                last = j == accum - 1
                with (ddp.no_sync() if not last else _nullcontext()):
                    loss = classifier_loss(ddp, train_x[idx], train_y[idx], idx.numel() * accum,
                                           torch.float32, autocast=False)
                    backward(loss, scaler)
                step_loss += float(loss.detach())
                samples += int(idx.numel())
            optimizer_step(opt, scaler)
            steps += 1
            losses.append(step_loss)
            if config["max_steps"] is not None and steps >= config["max_steps"]:
                break
        if config["max_steps"] is not None and steps >= config["max_steps"]:
            break
    synchronize(device)
    dist.barrier(group=group)
    train_seconds = time.perf_counter() - t0
    train_energy = window.stop().to_dict() if window is not None else None
    gathered = [None] * world
    dist.all_gather_object(gathered, {"steps": steps, "samples": samples, "losses": losses}, group=group)
    if rank != 0:
        return None
    accuracy = _accuracy(net, ds.test_x.to(device), ds.test_y.to(device))
    val_accuracy = _accuracy(net, ds.val_x.to(device), ds.val_y.to(device))
    n_steps = min(len(g["losses"]) for g in gathered)
    history = [sum(g["losses"][i] for g in gathered) / world for i in range(n_steps)]
    total_samples = sum(g["samples"] for g in gathered)
    return {
        "nprocs": world, "backend": config["backend"], "device": config["device"],
        "threads_per_worker": config["threads_per_worker"],
        "per_worker_batch": batch, "global_batch": config["global_batch"],
        "accum_steps": accum, "epochs": config["epochs"], "lr": config["lr"],
        "steps": steps, "per_rank_steps": [g["steps"] for g in gathered],
        "per_rank_samples": [g["samples"] for g in gathered], "samples": total_samples,
        "train_seconds": train_seconds,
        "samples_per_second": total_samples / train_seconds if train_seconds > 0 else 0.0,
        "final_accuracy": accuracy, "val_accuracy": val_accuracy,
        "final_loss": history[-1] if history else float("nan"), "loss_history": history,
        "dataset": {"name": ds.name, "source": ds.source, "n_train": n_train,
                    "n_test": ds.n_test, "n_val": ds.n_val, "note": ds.note},
        "model": dict(config["model"]), "train_energy": train_energy,
        "notes": _notes(config, ds), "label": config.get("label", ""),
    }


def finish_worker(dist, config: dict, rank: int, result: dict | None) -> None:
    """A worker's last collective step: rank 0 writes ``result`` to ``config["result_path"]``
    (atomically), every rank waits at a barrier, then marks itself finished. Past that marker a
    crash in the process group's shut-down no longer loses the run (see ``collect_result``)."""
    if rank == 0:
        from greenlab.base.storage import atomic_write_text

        atomic_write_text(config["result_path"], json.dumps(result))
    dist.barrier()
    (Path(config["error_dir"]) / f"finished-{rank}").touch()


# --- helpers ------------------------------------------------------------------------------------


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _accuracy(net, x, y, batch: int = 1000) -> float:
    from greenlab.training.accuracy import accuracy

    return accuracy(net, x, y, batch_size=batch)


def _notes(config: dict, ds) -> list:
    notes = []
    if ds.source == "generated":
        notes.append("dataset is a generated stand-in (no cached download): " + ds.note)
    if config["device"] == "cpu":
        notes.append(f"each worker is one CPU process with {config['threads_per_worker']} thread(s)")
    launched = config.get("launch_nprocs", config["nprocs"])
    if config["nprocs"] < launched:
        notes.append(f"trained by the first {config['nprocs']} of the launch's {launched} worker processes "
                     "(a process group of their own); the others waited at a barrier, outside its "
                     "energy window")
    return notes


def _interrupted_launch(nprocs: int, runs: int, seconds: float):
    """The one-line ``Interrupted`` for a Ctrl-C during a torchrun launch (no partial result: the
    workers report only when every run of the launch is done)."""
    from greenlab.base.interrupts import Interrupted

    what = f"{runs} runs" if runs > 1 else "the run"
    return Interrupted(f"greenlab.ddp: interrupted a {nprocs}-worker torchrun launch ({what}) after "
                       f"{plain_number(seconds)} s; its workers are stopped and nothing was recorded", None)


def _run(command: list, env: dict, timeout_s: float) -> tuple:
    """Run ``command`` in its own process group; kill the whole group on timeout or on any
    exception here (Ctrl-C, SIGTERM turned into SystemExit). Returns (returncode or None on
    timeout, stderr text). The command learns this process's pid (it dies with it)."""
    from greenlab.base.processes import PARENT_ENV

    env = {**env, PARENT_ENV: str(os.getpid())}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, (err or "") + (out or "")
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        return None, (err or "") + (out or "")
    except BaseException:  # KeyboardInterrupt in a notebook: leave no workers behind
        kill_group(proc)
        proc.communicate()
        raise


def _worker_env(threads: int) -> dict:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    from greenlab.base.paths import package_folder

    package_parent = str(package_folder().parent)
    parts = [package_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # runpy warns when greenlab/__init__ already imported greenlab.techniques.ddp; harmless here
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), "ignore::RuntimeWarning:runpy"]))
    return env


def _worker_errors(folder: Path) -> list:
    return [f"rank {p.name.split('rank')[1].split('.')[0]}: {p.read_text(encoding='utf-8').strip()}"
            for p in sorted(folder.glob("error.rank*.txt"))]


def _last_line(stderr: str) -> str:
    """The first line of the workers' stderr that says why a process ended, or 'no message'."""
    for line in (stderr or "").splitlines():
        if "terminate called" in line or "exitcode" in line:
            return line.strip()[:200]
    return "no message"


def _failure_message(nprocs: int, returncode, timeout_s: float, errors: list, stderr: str) -> str:
    if returncode is None:
        head = f"the {nprocs}-worker torchrun launch was killed after its timeout of {timeout_s:g} s"
    else:
        head = f"the {nprocs}-worker torchrun launch failed (exit code {returncode})"
    lines = [head + "."]
    if errors:
        lines.append("worker errors:")
        lines += [f"  {e}" for e in errors]
    tail = (stderr or "").strip().splitlines()[-STDERR_TAIL_LINES:]
    lines.append(f"last {len(tail)} lines of the workers' stderr:")
    lines += [f"  | {line}" for line in tail] or ["  | (empty)"]
    return "\n".join(lines)


def _check_gpus(nprocs: int) -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < nprocs:
        raise ValueError(f"device='cuda' needs one GPU per worker: {nprocs} workers but {count} GPU(s) "
                         "here; use device='cpu' (or None to choose automatically)")


def _dataset(data):
    """A ``greenlab.training.data.Dataset`` from a Dataset, a name, or a dict of ``load`` arguments."""
    from greenlab.training import data as gl_data

    if isinstance(data, gl_data.Dataset):
        return data
    spec = _as_spec(data, "data")
    name = spec.pop("name")
    return gl_data.load(name, verbose=False, **spec)


def _save_dataset(ds, path: Path) -> dict:
    import torch

    # the validation split travels too, so workers train on exactly the parent's training split
    torch.save({"train_x": ds.train_x.cpu(), "train_y": ds.train_y.cpu(), "test_x": ds.test_x.cpu(),
                "test_y": ds.test_y.cpu(), "val_x": ds.val_x.cpu(), "val_y": ds.val_y.cpu()}, path)
    return {"name": ds.name, "path": str(path), "source": ds.source, "note": ds.note,
            "num_classes": ds.num_classes}


def _load_dataset(spec: dict):
    import torch

    from greenlab.training import data as gl_data

    tensors = torch.load(spec["path"], mmap=True, weights_only=True)
    return gl_data.Dataset(name=spec["name"], num_classes=spec["num_classes"], source=spec["source"],
                           note=spec["note"], **tensors)


def _as_spec(value, what: str) -> dict:
    if isinstance(value, str) and value.strip():
        return {"name": value.strip()}
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return json.loads(json.dumps(value))  # a JSON-safe copy (tuples become lists)
    example = ('"synthetic" or {"name": "fashion-mnist", "n_train": 2000}' if what == "data"
               else '"cnn" or {"name": "cnn", "width": 8, "norm": "none"}')
    raise ValueError(f"{what} must be a name or a dict with a 'name' key, e.g. {example}; got {value!r}")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _non_negative_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return value


def _positive_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _non_negative_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


if __name__ == "__main__":
    code = worker_main()
    # The result is written, every rank passed the last barrier and the process group is destroyed:
    # skip the interpreter's teardown, where gloo's threads sometimes aborted the process ("terminate
    # called without an active exception", about 1 launch in 8 here) and which costs about a second.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
