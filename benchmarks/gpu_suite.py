#!/usr/bin/env python
"""Every GPU check and reference recording, in one call (``make gpu-check``).

    python benchmarks/gpu_suite.py --out DIR [--only NAME,...] [--minutes 8] [--dry-run]

On a lent GPU machine, from the repository root (torch, nvidia-ml-py, psutil and pytest there):

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/gpu_suite.py --out $OUT --minutes 8

What it does, within ``--minutes`` (each experiment has a time cap; a global deadline skips
the rest, recorded as "skipped: out of time"):

- reads the GPU's state (name, driver, CUDA, power limit, clocks, persistence and compute mode)
  with NVML queries only: it never changes a limit, clock or mode;
- checks the measurement core: the NVML energy counter against integrated instantaneous power
  over a steady load, idle power, the counter's update period, the PowerMonitor's overhead;
- records, with repeats and provenance: precisions on the reference CNN and on a ResNet,
  gradient accumulation against a true large batch, a batch-size sweep to a target accuracy,
  the device-resident loader against DataLoaders, the capstone's naive and green recipes;
- runs ``pytest -m gpu tests/`` in a subprocess;
- writes one reference-run JSON file per experiment (``greenlab.reference`` schema, at most 8
  files with the summary) to DIR and prints a summary table with the targets, last.

Without CUDA it prints "no GPU: nothing to check", writes nothing and exits 0. ``--dry-run``
runs every experiment on the CPU with tiny sizes; every file it writes says
"dry-run, CPU — not a reference".
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # so `python benchmarks/gpu_suite.py` finds greenlab
    sys.path.insert(0, str(REPO_ROOT))

EXIT_OK = 0
EXIT_NO_GPU = 0  # documented: no CUDA is not an error, there is simply nothing to check
DRY_RUN_MARK = "dry-run, CPU — not a reference"
DRY_RUN_GPU = "cpu dry-run (not a reference)"
SUMMARY = "gpu_suite"
# experiment name -> share of an 8-minute plan, seconds (scaled by --minutes / 8)
PLAN_SECONDS = {
    "measuring_energy": 55,
    "mixed_precision": 80,
    "mixed_precision-resnet": 70,
    "gradient_accumulation": 40,
    "dynamic_batch_sizing": 50,
    "data_pipeline": 50,
    "capstone": 45,
}
PYTEST_SECONDS = 60
STARTUP_SECONDS = 30  # imports, CUDA start, dataset generation
EXPERIMENTS = tuple(PLAN_SECONDS)
TARGETS = (
    # key, description, comparison, threshold
    ("bf16_speedup", "bf16 vs fp32 (TF32 off) speed, reference CNN", ">=", 2.0),
    ("bf16_energy_saving_pct", "bf16 energy per sample saving vs fp32 (TF32 off), %", ">=", 40.0),
    ("monitor_overhead_pct", "PowerMonitor at 10 Hz, training-time overhead, %", "<", 1.0),
    ("counter_vs_power_pct", "energy counter vs integrated instant power, |difference| %", "<=", 3.0),
)


@dataclass(frozen=True)
class Sizes:
    """Work sizes: one set for the GPU, a tiny one for the CPU dry run."""

    fmnist: tuple = (60000, 10000)   # (n_train, n_test)
    cifar: tuple = (25000, 5000)
    cnn: dict = field(default_factory=lambda: {})  # overrides of recipes.REFERENCE_CNN
    resnet: dict = field(default_factory=lambda: {})
    batch: int = 1024               # the "full batch" of the precision runs
    resnet_batch: int = 512
    run_seconds: float = 4.0        # length of one fp32 (TF32 off) run, set by calibration
    calib_steps: int = 30
    min_steps: int = 20
    max_steps: int = 5000
    repeats: int = 3
    warmup: bool = True             # one untimed short run per configuration first
    evals_per_run: int = 4
    steady_load_s: float = 12.0
    idle_s: float = 5.0
    poll_s: float = 3.0
    power_interval_s: float = 0.005
    matmul_n: int = 8192
    monitor_pairs: int = 5
    monitor_work_s: float = 2.0
    accum: tuple = (256, 4)         # micro-batch, accumulation steps (vs one batch of the product)
    sweep_batches: tuple = (128, 256, 512, 1024, 2048)
    sweep_max_epochs: int = 6
    target_accuracy: float = 0.90
    loader_batch: int = 512
    loader_workers: tuple = (0, 4)
    capstone_scale: float = 1.0     # fraction of the recipe's data kept
    capstone_repeats: int = 3


GPU_SIZES = Sizes()
DRY_SIZES = Sizes(
    fmnist=(384, 128), cifar=(128, 64), cnn={"width": 8}, resnet={"depth": 8, "width": 4},
    batch=64, resnet_batch=32, run_seconds=0.2, calib_steps=2, min_steps=2, max_steps=3,
    repeats=1, warmup=False, evals_per_run=2, steady_load_s=0.6, idle_s=0.3, poll_s=0.3,
    power_interval_s=0.01, matmul_n=64, monitor_pairs=2, monitor_work_s=0.15, accum=(32, 2),
    sweep_batches=(32, 64), sweep_max_epochs=1,
    target_accuracy=0.3, loader_batch=64, loader_workers=(0, 2), capstone_scale=0.006,
    capstone_repeats=1)


def main(argv=None) -> int:
    """Command-line entry point; returns the exit code."""
    args = _parse_args(argv)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no GPU: nothing to check (torch.cuda.is_available() is False). Nothing was written. "
              "Run with --dry-run to exercise every experiment on the CPU with tiny sizes.")
        return EXIT_NO_GPU
    suite = Suite(args, torch)
    suite.run()
    return EXIT_OK


# --- the suite -----------------------------------------------------------------------------

class Suite:
    """One call of the suite: provenance, deadlines, datasets, records."""

    def __init__(self, args, torch):
        self.t_start = time.monotonic()
        self.torch = torch
        self.args = args
        self.dry_run = bool(args.dry_run)
        self.sizes = DRY_SIZES if self.dry_run else GPU_SIZES
        self.device = "cpu" if self.dry_run else "cuda"
        if self.dry_run:  # one thread: the dry run only exercises code paths, and stays quick on busy CPUs
            torch.set_num_threads(1)
        self.out = Path(args.out)
        self.date = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
        self.command = "python benchmarks/gpu_suite.py " + shlex.join(args.raw)
        total = float(args.minutes) * 60.0
        scale = total / (8 * 60.0)
        self.pytest_seconds = PYTEST_SECONDS * scale
        self.deadline = self.t_start + total - self.pytest_seconds
        self.caps = {name: PLAN_SECONDS[name] * scale for name in EXPERIMENTS}
        self.only = args.only
        self.results: dict = {}    # experiment -> summary dict
        self.measured: dict = {}   # target key -> value
        self.datasets: dict = {}
        self.notes_common: list = []
        self.written: list = []

    # --- orchestration ---
    def run(self) -> None:
        from greenlab.energy import default_sources

        self.out.mkdir(parents=True, exist_ok=True)
        self.preflight = preflight()
        self.sources = default_sources()
        self.nvml, self.handle, self.gpu_state = gpu_state_for(self.device)
        self.component = self._device_component()
        self.provenance = self._provenance()
        _log(f"gpu_suite: {self.provenance['gpu']} | driver {self.provenance['driver']} | "
             f"torch {self.provenance['torch']} | energy {self._source_names()} | "
             f"{'DRY RUN on the CPU' if self.dry_run else 'GPU run'} | budget {self.args.minutes} min")
        for name in EXPERIMENTS:
            if self.only and name not in self.only:
                continue
            self._run_one(name)
            self._write_summary()
        self.pytest = run_gpu_pytest(self.dry_run, self.pytest_seconds)
        self._write_summary()
        print(self.summary_table(), flush=True)

    def _run_one(self, name: str) -> None:
        fn = getattr(self, "exp_" + name.replace("-", "_"))
        now = time.monotonic()
        left = self.deadline - now
        if left < min(10.0, 0.25 * self.caps[name]):
            self.results[name] = {"status": "skipped: out of time", "seconds": 0.0}
            self._record(name, [{"label": name, "status": "skipped: out of time"}], [])
            _log(f"[{name}] skipped: out of time")
            return
        budget = Budget(min(self.caps[name], left), self.deadline)
        _log(f"[{name}] start (cap {budget.seconds:.0f} s)")
        status = "ok"
        try:
            rows, notes = fn(budget)
        except Exception as exc:  # one broken experiment must not lose the others
            status = f"failed: {type(exc).__name__}: {exc}"
            rows, notes = [{"label": name, "status": status}], []
            import traceback

            traceback.print_exc()
        if status == "ok" and budget.ran_out:
            status = "partial: time cap reached"
        seconds = time.monotonic() - now
        self.results[name] = {"status": status, "seconds": seconds}
        self._record(name, rows, notes)
        _log(f"[{name}] {status} in {seconds:.1f} s")

    # --- records ---
    def _record(self, experiment: str, rows: list, notes: list, energy_source: str | None = "auto"):
        from greenlab import reference

        if self.dry_run:
            rows = [{**r, "run": DRY_RUN_MARK} for r in rows]
        record = {
            "schema_version": reference.SCHEMA_VERSION,
            "experiment": experiment,
            "date": self.date,
            "gpu": self.provenance["gpu"],
            "driver": self.provenance["driver"],
            "cuda": self.provenance["cuda"],
            "torch": self.provenance["torch"],
            "command": self.command,
            "results": [_clean_row(r) for r in rows],
            "gpu_count": 1,
            "greenlab": self.provenance["greenlab"],
            "python": self.provenance["python"],
            "units": _units_for(rows),
            "notes": " ".join(([DRY_RUN_MARK + "."] if self.dry_run else []) + list(notes)
                              + self.notes_common + [self._state_note()]),
        }
        source = self._device_source() if energy_source == "auto" else energy_source
        if source in reference.ENERGY_SOURCES:
            record["energy_source"] = source
        if not record["units"]:
            del record["units"]
        path = self.out / f"{reference.gpu_slug(record['gpu'])}_{self.date}_{experiment}.json"
        problem = ""
        try:
            reference.from_dict(record, path.name)
        except reference.ReferenceRunError as exc:
            problem = str(exc)  # written anyway: a measurement is never thrown away
        write_json(path, record)
        if path not in self.written:
            self.written.append(path)
        if problem:
            self.results.setdefault(experiment, {})["schema_problem"] = problem
            _log(f"WARNING {path.name} does not match the reference schema: {problem}")
        return path

    def _write_summary(self) -> None:
        rows = []
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                rows.append({"label": name, "status": r["status"], "seconds": r.get("seconds"),
                             "schema_problem": r.get("schema_problem")})
            elif self.only and name not in self.only:
                rows.append({"label": name, "status": "not selected (--only)"})
        for key, text, op, threshold in TARGETS:
            value = self.measured.get(key)
            rows.append({"label": "target: " + text, "measured": value, "threshold": f"{op} {threshold:g}",
                         "result": judge(value, op, threshold)})
        pytest = getattr(self, "pytest", None)
        if pytest is not None:
            rows.append({"label": "pytest -m gpu", **pytest})
        rows.append({"label": "gpu state", **self.gpu_state})
        rows.append({"label": "python packages", **self.preflight})
        rows.append({"label": "total", "seconds": time.monotonic() - self.t_start,
                     "minutes_allowed": float(self.args.minutes),
                     "energy_sources": self._source_names()})
        self._record(SUMMARY, rows, ["Summary of one gpu_suite call: experiment status, targets "
                                     "(measured, not assumed), the GPU-only pytest run."])

    def summary_table(self) -> str:
        """The short table printed last: experiments, targets, pytest."""
        lines = ["", "=" * 78, f"gpu_suite summary: {self.provenance['gpu']}, {self.date}"
                 + (f"  [{DRY_RUN_MARK}]" if self.dry_run else ""), "-" * 78]
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                lines.append(f"{name:<26} {r['seconds']:6.1f} s  {r['status']}")
        lines.append("-" * 78)
        for key, text, op, threshold in TARGETS:
            value = self.measured.get(key)
            shown = "not measured" if value is None else f"{value:.3g}"
            lines.append(f"{text:<58} {shown:>12} {op} {threshold:g}  {judge(value, op, threshold)}")
        lines.append("-" * 78)
        p = getattr(self, "pytest", {}) or {}
        lines.append(f"pytest -m gpu: {p.get('outcome', 'not run')} ({p.get('summary', '')})")
        lines.append(f"files: {len(self.written)} in {self.out}")
        lines.append(f"total {time.monotonic() - self.t_start:.0f} s")
        return "\n".join(lines)

    # --- provenance ---
    def _provenance(self) -> dict:
        import greenlab

        torch = self.torch
        state = self.gpu_state
        if self.dry_run:
            gpu, driver = DRY_RUN_GPU, "none (dry-run, CPU)"
        else:
            gpu = state.get("name") or torch.cuda.get_device_name(0)
            driver = state.get("driver") or "unknown (NVML not available)"
        return {"gpu": gpu, "driver": driver, "cuda": str(torch.version.cuda or "none (CPU build)"),
                "torch": torch.__version__, "greenlab": greenlab.__version__,
                "python": platform.python_version()}

    def _device_component(self) -> str:
        names = [s.component for s in self.sources]
        if self.dry_run:
            return "cpu"
        index = self.torch.cuda.current_device()
        return f"gpu:{index}" if f"gpu:{index}" in names else names[0]

    def _device_source(self) -> str | None:
        for s in self.sources:
            if s.component == self.component:
                return s.name
        return None

    def _source_names(self) -> str:
        return ", ".join(f"{s.component}={s.name}" for s in self.sources) or "none"

    def _state_note(self) -> str:
        s = self.gpu_state
        keys = ("power_limit_w", "default_power_limit_w", "sm_clock_mhz", "max_sm_clock_mhz",
                "persistence_mode", "compute_mode", "mig_mode")
        parts = [f"{k}={s[k]}" for k in keys if s.get(k) is not None]
        return ("GPU state at start (read-only): " + ", ".join(parts) + ".") if parts else ""

    # --- data and models ---
    def dataset(self, name: str):
        from greenlab import data

        n_train, n_test = self.sizes.fmnist if name == "fashion-mnist" else self.sizes.cifar
        key = (name, n_train, n_test)
        if key not in self.datasets:
            ds = data.load(name, n_train=n_train, n_test=n_test, verbose=False)
            self.datasets[key] = ds
            _log(f"data: {ds.describe()}")
        return self.datasets[key]

    def cnn_fn(self, in_channels=1):
        from greenlab import recipes
        from greenlab import models

        opts = {**recipes.REFERENCE_CNN, **self.sizes.cnn}
        return lambda: models.build("cnn", in_channels=in_channels, **opts)

    def resnet_fn(self):
        from greenlab import recipes
        from greenlab import models

        opts = {**recipes.REFERENCE_RESNET, **self.sizes.resnet}
        return lambda: models.build("resnet", in_channels=3, **opts)

    def train(self, model_fn, ds, cfg, budget, tf32=False, per_run_s=None):
        """One gl.train run with TF32 as asked and a stop at the budget's end."""
        from greenlab.train import train

        tf32_flags(self.torch, tf32)
        self.torch.manual_seed(cfg.seed)
        with budget.watch(per_run_s) as stop:
            return train(model_fn(), ds, cfg, stop_event=stop, device=self.device, log=False,
                         save=False, sources=self.sources)

    def calibrate_steps(self, model_fn, ds, cfg, budget, tf32=False) -> int:
        """Optimizer steps for one run of about ``sizes.run_seconds`` (measured on ``cfg``)."""
        z = self.sizes
        res = self.train(model_fn, ds, replace(cfg, max_steps=z.calib_steps, eval_every=None,
                                               target_accuracy=None, label="calibration"),
                         budget, tf32=tf32)
        per_step = res.train_seconds / max(1, res.steps)
        steps = int(z.run_seconds / per_step) if per_step > 0 else z.max_steps
        return max(z.min_steps, min(z.max_steps, steps))

    def row_from_runs(self, label: str, runs: list, extra: dict) -> dict:
        """One result row: medians over repeats (and spread) of the measured figures."""
        ok = [r for r in runs if r is not None]
        row = {"label": label, **extra, "repeats": len(ok)}
        if not ok:
            row["status"] = "skipped: out of time"
            return row
        dev = [device_joules(r, self.component) for r in ok]
        per_sample = [j / r.samples if (j is not None and r.samples) else None for j, r in zip(dev, ok)]
        row.update({
            "status": ",".join(sorted({r.status for r in ok})),
            "steps": _median([r.steps for r in ok]),
            "samples": _median([r.samples for r in ok]),
            "seconds": _median([r.seconds for r in ok]),
            "train_seconds": _median([r.train_seconds for r in ok]),
            "samples_per_second": _median([r.samples_per_second for r in ok]),
            "samples_per_second_min": _min([r.samples_per_second for r in ok]),
            "samples_per_second_max": _max([r.samples_per_second for r in ok]),
            "joules": _median(dev),
            "joules_all_components": _median([r.joules for r in ok]),
            "joules_per_sample": _median(per_sample),
            "joules_per_sample_min": _min(per_sample),
            "joules_per_sample_max": _max(per_sample),
            "peak_memory_mib": _max([r.peak_memory_bytes / 2**20 if r.peak_memory_bytes is not None
                                     else None for r in ok]),
            "final_accuracy": _median([r.final_accuracy for r in ok]),
            "reached_target": sum(r.seconds_to_target is not None for r in ok),
            "seconds_to_target": _median([r.seconds_to_target for r in ok]),
            "joules_to_target": _median([r.joules_to_target for r in ok]),
            "energy_source": ok[0].sources.get(self.component, "none"),
        })
        return row

    # --- experiments: each returns (rows, notes) ---
    def exp_measuring_energy(self, budget):
        return measuring_energy(self, budget)

    def exp_mixed_precision(self, budget):
        ds = self.dataset("fashion-mnist")
        return precision_experiment(self, budget, self.cnn_fn(), ds, self.sizes.batch, "reference CNN",
                                    targets=True)

    def exp_mixed_precision_resnet(self, budget):
        ds = self.dataset("cifar10")
        return precision_experiment(self, budget, self.resnet_fn(), ds, self.sizes.resnet_batch,
                                    "ResNet", targets=False)

    def exp_gradient_accumulation(self, budget):
        return accumulation_experiment(self, budget)

    def exp_dynamic_batch_sizing(self, budget):
        return batch_sweep_experiment(self, budget)

    def exp_data_pipeline(self, budget):
        return loader_experiment(self, budget)

    def exp_capstone(self, budget):
        return capstone_experiment(self, budget)


# --- experiments ----------------------------------------------------------------------------

def measuring_energy(suite: Suite, budget: "Budget"):
    """Counter vs integrated instant power, idle power, counter update period, monitor overhead."""
    from greenlab.energy import measure_idle

    z = suite.sizes
    torch = suite.torch
    rows, notes = [], []
    idle = measure_idle(z.idle_s, sources=suite.sources)
    rows.append({"label": "idle power", "seconds": idle.seconds,
                 "watts": idle.watts_by_component.get(suite.component),
                 "energy_source": idle.sources.get(suite.component),
                 "watts_all_components": idle.watts})
    nvml, handle = suite.nvml, suite.handle
    if nvml is None:
        notes.append("NVML is not available here, so the energy counter checks were not run "
                     f"({suite.gpu_state.get('nvml', 'no NVML')}).")
        rows.append({"label": "counter vs instant power", "status": "not measured: no NVML"})
        rows.append({"label": "counter update period", "status": "not measured: no NVML"})
    else:
        instant = nvml.instant_power_watts(handle) is not None
        read_power = (lambda: nvml.instant_power_watts(handle)) if instant else (lambda: nvml.power_watts(handle))
        read_counter = lambda: nvml.energy_joules(handle)  # noqa: E731
        with SteadyLoad(torch, suite.device, z.matmul_n):
            time.sleep(min(1.0, z.steady_load_s / 4))  # let clocks and power settle
            check = counter_vs_power(read_counter, read_power, z.steady_load_s, z.power_interval_s)
            period = counter_update_period(read_counter, z.poll_s)
        check.update({"label": "counter vs instant power",
                      "power_reading": "NVML_FI_DEV_POWER_INSTANT" if instant
                      else "nvmlDeviceGetPowerUsage (1 s average on Ampere+ other than A100)"})
        rows.append(check)
        rows.append({"label": "counter update period", **period})
        if check.get("difference_pct") is not None:
            suite.measured["counter_vs_power_pct"] = abs(check["difference_pct"])
        notes.append("Steady load: repeated bf16 matrix products "
                     f"({z.matmul_n}x{z.matmul_n}) in a background thread; power sampled every "
                     f"{z.power_interval_s * 1000:g} ms and integrated with the trapezoid rule.")
    overhead = monitor_overhead(suite, budget)
    rows.append({"label": "PowerMonitor overhead (10 Hz)", **overhead})
    if overhead.get("overhead_pct_median") is not None:
        suite.measured["monitor_overhead_pct"] = overhead["overhead_pct_median"]
    notes.append("Monitor overhead: the same fixed training loop of the reference CNN with and without "
                 "a PowerMonitor(hz=10) whose subscriber reads each sample (as a live meter does), "
                 "alternating which runs first; the median of per-pair time ratios.")
    return rows, notes


def precision_experiment(suite: Suite, budget, model_fn, ds, batch: int, model_name: str, targets: bool):
    """fp32 (TF32 off/on), bf16, fp16 at one full batch, fixed steps, interleaved repeats."""
    from greenlab.train import TrainConfig

    z = suite.sizes
    on_cuda = suite.device == "cuda"
    configs = [("fp32 TF32 off", "fp32", False), ("fp32 TF32 on", "fp32", True),
               ("bf16", "bf16", False), ("fp16", "fp16", False)]
    if on_cuda and not suite.torch.cuda.is_bf16_supported():
        configs = [c for c in configs if c[1] != "bf16"]
    base = TrainConfig(precision="fp32", batch_size=batch, lr=0.05, epochs=1000,
                       target_accuracy=z.target_accuracy, stop_at_target=False, seed=0,
                       channels_last=on_cuda, label="precision")
    steps = suite.calibrate_steps(model_fn, ds, base, budget, tf32=False)
    base = replace(base, max_steps=steps, eval_every=max(1, steps // z.evals_per_run))
    for label, precision, tf32 in configs if z.warmup else ():  # cuDNN algorithm choice, allocator
        suite.train(model_fn, ds, replace(base, precision=precision, max_steps=min(steps, z.calib_steps),
                                          eval_every=None, target_accuracy=None, label="warm-up"),
                    budget, tf32=tf32)
    runs = {label: [] for label, _, _ in configs}
    remaining = z.repeats * len(configs)
    for rep in range(z.repeats):
        order = configs[rep % len(configs):] + configs[:rep % len(configs)]
        for label, precision, tf32 in order:
            if budget.expired():
                break
            per_run = budget.left() / remaining
            remaining -= 1
            res = suite.train(model_fn, ds, replace(base, precision=precision, label=label), budget,
                              tf32=tf32, per_run_s=max(per_run, 2 * z.run_seconds))
            runs[label].append(res)
    tf32_flags(suite.torch, False)
    rows = [suite.row_from_runs(label, runs[label], {"precision": precision, "tf32": tf32, "batch_size": batch})
            for label, precision, tf32 in configs]
    base_row = rows[0]
    for row in rows:
        row["speedup_vs_fp32"] = _ratio(row.get("samples_per_second"), base_row.get("samples_per_second"))
        jps, jps0 = row.get("joules_per_sample"), base_row.get("joules_per_sample")
        row["energy_saving_pct_vs_fp32"] = (100 * (1 - jps / jps0)) if (jps and jps0) else None
    if targets:
        bf = next((r for r in rows if r["label"] == "bf16"), None)
        if bf is not None and bf.get("repeats", 0) >= 1 and base_row.get("repeats", 0) >= 1:
            suite.measured["bf16_speedup"] = bf["speedup_vs_fp32"]
            suite.measured["bf16_energy_saving_pct"] = bf["energy_saving_pct_vs_fp32"]
    notes = [f"{model_name} ({_model_text(model_fn)}) on {ds.describe()}. Each run: {steps} optimizer "
             f"steps at batch {batch} (calibrated so fp32 with TF32 off takes about {z.run_seconds:g} s), "
             f"SGD lr 0.05, evaluated {z.evals_per_run} times on the test split (fp32 evaluation). "
             f"{z.repeats} repeats, configurations interleaved with a rotating order after one warm-up "
             "each; medians shown, min/max for throughput and energy per sample. "
             "Energy per sample includes the evaluation passes. TF32 is set for matrix products and "
             "cuDNN convolutions together; it is off for the bf16 and fp16 rows. "
             + ("channels_last memory format. " if on_cuda else ""),
             f"Dataset source: {ds.source}."]
    return rows, notes


def accumulation_experiment(suite: Suite, budget):
    """Gradient accumulation (micro-batch x steps) against a true batch of the same size."""
    from greenlab.train import TrainConfig

    z = suite.sizes
    ds = suite.dataset("fashion-mnist")
    model_fn = suite.cnn_fn()
    micro, k = z.accum
    big = micro * k
    base = TrainConfig(precision="fp32", batch_size=big, lr=0.05, epochs=1000,
                       target_accuracy=z.target_accuracy, stop_at_target=False, seed=0, label="accum")
    steps = suite.calibrate_steps(model_fn, ds, base, budget)
    base = replace(base, max_steps=steps, eval_every=max(1, steps // z.evals_per_run))
    configs = [(f"true batch {big}", big, 1), (f"accumulated {micro} x {k}", micro, k),
               (f"small batch {micro}", micro, 1)]
    for label, bs, acc in configs if z.warmup else ():
        suite.train(model_fn, ds, replace(base, batch_size=bs, accum_steps=acc,
                                          max_steps=min(steps, z.calib_steps), eval_every=None,
                                          target_accuracy=None, label="warm-up"), budget)
    runs = {c[0]: [] for c in configs}
    for rep in range(z.repeats):
        for label, bs, acc in configs[rep % 3:] + configs[:rep % 3]:
            if budget.expired():
                break
            # the small-batch row takes the same number of optimizer steps (k times fewer samples)
            runs[label].append(suite.train(model_fn, ds, replace(base, batch_size=bs, accum_steps=acc,
                                                                 label=label), budget))
    rows = [suite.row_from_runs(label, runs[label], {"batch_size": bs, "accum_steps": acc,
                                                      "effective_batch": bs * acc})
            for label, bs, acc in configs]
    notes = [f"Reference CNN on {ds.describe()}; fp32 with TF32 off; {steps} optimizer steps per run, "
             f"same lr 0.05; {z.repeats} repeats interleaved. Accumulation sums micro-batch losses "
             "divided by the window's sample count, so its update equals the true batch's except "
             "for batch-norm statistics (computed per micro-batch).", f"Dataset source: {ds.source}."]
    return rows, notes


def batch_sweep_experiment(suite: Suite, budget):
    """Time and energy to a target accuracy across batch sizes (lr scaled by sqrt of batch)."""
    from greenlab.train import TrainConfig

    z = suite.sizes
    ds = suite.dataset("fashion-mnist")
    model_fn = suite.cnn_fn()
    precision = "bf16" if suite.device == "cuda" and suite.torch.cuda.is_bf16_supported() else "fp32"
    base_lr, base_bs = 0.05, 128
    if z.warmup:
        suite.train(model_fn, ds, TrainConfig(precision=precision, batch_size=z.sweep_batches[0],
                                              max_steps=z.calib_steps, label="warm-up"), budget)
    runs = {bs: [] for bs in z.sweep_batches}
    remaining = z.repeats * len(z.sweep_batches)
    for rep in range(z.repeats):
        for bs in z.sweep_batches:
            if budget.expired():
                break
            per_run = budget.left() / remaining
            remaining -= 1
            steps_per_epoch = math.ceil(ds.n_train / bs)
            cfg = TrainConfig(precision=precision, batch_size=bs, lr=base_lr * math.sqrt(bs / base_bs),
                              epochs=z.sweep_max_epochs, target_accuracy=z.target_accuracy,
                              stop_at_target=True, eval_every=max(1, steps_per_epoch // 4), seed=rep,
                              label=f"batch {bs}")
            runs[bs].append(suite.train(model_fn, ds, cfg, budget, per_run_s=per_run))
    rows = [suite.row_from_runs(f"batch {bs}", runs[bs], {"batch_size": bs, "precision": precision,
                                                          "lr": base_lr * math.sqrt(bs / base_bs)})
            for bs in z.sweep_batches]
    notes = [f"Reference CNN on {ds.describe()}; {precision}; target test accuracy "
             f"{z.target_accuracy:g}, checked 4 times per epoch, at most {z.sweep_max_epochs} epochs; "
             f"lr = {base_lr} x sqrt(batch / {base_bs}); seed = repeat index. Rows that never reached "
             "the target have null time/energy to target (reached_target counts the repeats that did).",
             f"Dataset source: {ds.source}."]
    return rows, notes


def loader_experiment(suite: Suite, budget):
    """The device-resident loader against torch DataLoaders (workers, pinned memory)."""
    from greenlab.train import TrainConfig

    z = suite.sizes
    ds = suite.dataset("fashion-mnist")
    model_fn = suite.cnn_fn()
    precision = "bf16" if suite.device == "cuda" and suite.torch.cuda.is_bf16_supported() else "fp32"
    w0, w1 = z.loader_workers
    configs = [("device loader", dict(loader="device")),
               (f"DataLoader workers={w0}", dict(loader="dataloader", num_workers=w0)),
               (f"DataLoader workers={w0} pinned", dict(loader="dataloader", num_workers=w0, pin_memory=True)),
               (f"DataLoader workers={w1} pinned", dict(loader="dataloader", num_workers=w1, pin_memory=True))]
    steps = max(z.min_steps, min(z.max_steps, math.ceil(ds.n_train / z.loader_batch)))
    base = TrainConfig(precision=precision, batch_size=z.loader_batch, lr=0.05, epochs=1000,
                       max_steps=steps, seed=0, label="loader")
    if z.warmup:
        suite.train(model_fn, ds, replace(base, max_steps=z.calib_steps, label="warm-up"), budget)
    runs = {c[0]: [] for c in configs}
    remaining = z.repeats * len(configs)
    for rep in range(z.repeats):
        for label, opts in configs[rep % 4:] + configs[:rep % 4]:
            if budget.expired():
                break
            per_run = budget.left() / remaining
            remaining -= 1
            runs[label].append(suite.train(model_fn, ds, replace(base, label=label, **opts), budget,
                                           per_run_s=per_run))
    rows = [suite.row_from_runs(label, runs[label], {"batch_size": z.loader_batch, **opts})
            for label, opts in configs]
    for row in rows:
        row["speedup_vs_device_loader"] = _ratio(row.get("samples_per_second"), rows[0].get("samples_per_second"))
    notes = [f"Reference CNN on {ds.describe()}; {precision}; {steps} steps (one epoch) per run at "
             f"batch {z.loader_batch}; {z.repeats} repeats interleaved; DataLoader worker start-up is "
             "inside each run (persistent_workers off), as in a lesson cell.", f"Dataset source: {ds.source}.",
             f"CPU: {os.cpu_count()} logical cores."]
    return rows, notes


def capstone_experiment(suite: Suite, budget):
    """The capstone's naive and green recipes (greenlab/recipes.py), to the same target."""
    from greenlab import recipes
    from greenlab import data

    z = suite.sizes
    rows, notes, by_label = [], [], {}
    for recipe in (recipes.naive_recipe, recipes.green_recipe):
        model_fn, cfg, spec = recipe(device=suite.device)
        if z.capstone_scale != 1.0:
            spec = {**spec, "n_train": max(64, int(spec["n_train"] * z.capstone_scale)),
                    "n_test": max(64, int(spec["n_test"] * z.capstone_scale))}
            cfg = replace(cfg, target_accuracy=z.target_accuracy, eval_every=2, max_steps=z.max_steps)
        if suite.sizes is DRY_SIZES:
            model_fn = suite.cnn_fn()
        key = (spec["name"], spec["n_train"], spec["n_test"])
        if key not in suite.datasets:
            suite.datasets[key] = data.load(**spec, verbose=False)
        by_label[cfg.label] = (model_fn, cfg, suite.datasets[key])
    runs = {label: [] for label in by_label}
    remaining = z.capstone_repeats * len(by_label)
    for rep in range(z.capstone_repeats):
        for label, (model_fn, cfg, ds) in by_label.items():
            if budget.expired():
                break
            per_run = budget.left() / remaining
            remaining -= 1
            runs[label].append(suite.train(model_fn, ds, cfg, budget, per_run_s=per_run))
    for label, (model_fn, cfg, ds) in by_label.items():
        rows.append(suite.row_from_runs(label, runs[label], {
            "precision": cfg.precision, "batch_size": cfg.batch_size, "loader": cfg.loader,
            "epochs_max": cfg.epochs, "target_accuracy": cfg.target_accuracy,
            "stop_at_target": cfg.stop_at_target, "dataset_source": ds.source}))
    if len(rows) == 2:
        for key in ("joules_to_target", "seconds_to_target", "joules"):
            rows[1][f"{key}_ratio_green_over_naive"] = _ratio(rows[1].get(key), rows[0].get(key))
    notes.append("Recipes from greenlab/recipes.py (naive_recipe, green_recipe): the naive one runs "
                 "its fixed epochs and records when it passed the target; the green one stops there. "
                 f"{z.capstone_repeats} repeat(s), alternating.")
    return rows, notes


# --- measurement-core checks (pure functions of readers; testable with fakes) -------------

def counter_vs_power(read_counter, read_power, seconds: float, interval_s: float = 0.005,
                     clock=time.perf_counter, sleep=time.sleep) -> dict:
    """Compare an energy counter (joules) with power samples (watts) integrated over ``seconds``.

    Returns counter joules, integrated joules (trapezoid rule), their difference in percent of
    the integrated value, the number of power samples and the mean power.
    """
    from greenlab.energy import trapezoid_joules

    if not seconds > 0 or not interval_s > 0:
        raise ValueError(f"seconds and interval_s must be > 0, got {seconds!r}, {interval_s!r}")
    c0 = read_counter()
    t0 = clock()
    times, watts = [0.0], [read_power()]
    while times[-1] < seconds:
        sleep(interval_s)
        watts.append(read_power())
        times.append(clock() - t0)
    c1 = read_counter()
    integrated = trapezoid_joules(times, watts)
    counter = c1 - c0
    diff = 100.0 * (counter - integrated) / integrated if integrated > 0 else None
    return {"seconds": times[-1], "counter_joules": counter, "integrated_joules": integrated,
            "difference_pct": diff, "power_samples": len(watts),
            "mean_watts": integrated / times[-1] if times[-1] > 0 else None}


def counter_update_period(read_counter, seconds: float, clock=time.perf_counter) -> dict:
    """Poll a counter in a tight loop for ``seconds``; intervals between value changes (ms)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    t0 = clock()
    last = read_counter()
    reads, change_times = 1, []
    now = t0
    while now - t0 < seconds:
        value = read_counter()
        now = clock()
        reads += 1
        if value != last:
            change_times.append(now)
            last = value
    intervals_ms = [1000.0 * (b - a) for a, b in zip(change_times, change_times[1:])]
    elapsed = now - t0
    return {"seconds": elapsed, "reads": reads, "changes": len(change_times),
            "read_microseconds": 1e6 * elapsed / reads if reads else None,
            "interval_ms_median": statistics.median(intervals_ms) if intervals_ms else None,
            "interval_ms_p90": percentile(intervals_ms, 90),
            "interval_ms_min": min(intervals_ms) if intervals_ms else None,
            "interval_ms_max": max(intervals_ms) if intervals_ms else None}


def paired_overhead(run_without, run_with, pairs: int) -> dict:
    """Time ``run_with`` against ``run_without`` in alternating pairs; median overhead in %.

    Each callable runs the same work and returns its duration in seconds.
    """
    if not isinstance(pairs, int) or pairs < 1:
        raise ValueError(f"pairs must be a positive integer, got {pairs!r}")
    overheads = []
    with_s, without_s = [], []
    for i in range(pairs):
        if i % 2 == 0:
            a, b = run_without(), run_with()
        else:
            b, a = run_with(), run_without()
        without_s.append(a)
        with_s.append(b)
        overheads.append(100.0 * (b / a - 1.0))
    return {"pairs": pairs, "overhead_pct_median": statistics.median(overheads),
            "overhead_pct_min": min(overheads), "overhead_pct_max": max(overheads),
            "seconds_without_median": statistics.median(without_s),
            "seconds_with_median": statistics.median(with_s)}


def monitor_overhead(suite: Suite, budget) -> dict:
    """PowerMonitor(hz=10) overhead on a fixed training loop of the reference CNN."""
    from greenlab.energy import PowerMonitor

    torch = suite.torch
    z = suite.sizes
    ds = suite.dataset("fashion-mnist")
    model = suite.cnn_fn()().to(suite.device)
    if suite.device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bs = min(suite.sizes.loader_batch, ds.n_train)
    x = ds.train_x[:bs].to(suite.device)
    y = ds.train_y[:bs].to(suite.device)
    amp = suite.device == "cuda" and torch.cuda.is_bf16_supported()

    def steps(n):
        t0 = time.perf_counter()
        for _ in range(n):
            with torch.autocast(suite.device, dtype=torch.bfloat16, enabled=amp):
                loss = torch.nn.functional.cross_entropy(model(x).float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if suite.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    steps(z.calib_steps)  # warm-up
    t_one = max(steps(z.calib_steps) / z.calib_steps, 1e-6)
    n = max(z.min_steps, min(z.max_steps, int(z.monitor_work_s / t_one)))
    samples_seen = []

    def with_monitor():
        mon = PowerMonitor(hz=10, window_s=120, sources=suite.sources)
        seen = []
        mon.subscribe(lambda s: seen.append(s.total_watts))
        with mon:
            dt = steps(n)
        samples_seen.append(len(seen) / dt if dt > 0 else 0.0)
        return dt

    one_run_s = max(steps(n), 1e-3)
    pairs = max(1, min(z.monitor_pairs, int(budget.left() / (2.5 * one_run_s))))
    result = paired_overhead(lambda: steps(n), with_monitor, pairs)
    result.update({"steps_per_run": n, "batch_size": bs, "monitor_hz_achieved_median":
                   statistics.median(samples_seen) if samples_seen else None,
                   "precision": "bf16" if amp else "fp32"})
    return result


class SteadyLoad:
    """Repeated square matrix products on ``device`` in a background thread (a steady load)."""

    def __init__(self, torch, device: str, n: int):
        self.torch, self.device, self.n = torch, device, n
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-suite-load", daemon=True)
        self.products = 0

    def _loop(self):
        torch = self.torch
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        a = torch.randn(self.n, self.n, device=self.device, dtype=dtype)
        b = torch.randn(self.n, self.n, device=self.device, dtype=dtype)
        while not self._stop.is_set():
            for _ in range(8):
                c = a @ b
            if self.device == "cuda":
                torch.cuda.synchronize()
            self.products += 8
        del c

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


# --- GPU state (read-only) ------------------------------------------------------------------

def gpu_state_for(device: str):
    """(Nvml or None, handle or None, flat dict of the GPU's state) for the current CUDA device.

    Only NVML queries are used: nothing about the GPU is changed.
    """
    from greenlab.energy import nvml as _nvml

    if device != "cuda":
        return None, None, {"nvml": "not used (dry-run on the CPU)"}
    lib = _nvml.get_nvml()
    if not lib.available:
        return None, None, {"nvml": lib.reason}
    import torch

    gpus = lib.visible_gpus()
    cuda_index = torch.cuda.current_device()
    match = [g for g in gpus if g.cuda_index == cuda_index]
    if not match:
        return None, None, {"nvml": f"no NVML device for CUDA device {cuda_index}"}
    handle = lib.handle(match[0].nvml_index)
    return lib, handle, read_gpu_state(lib, handle)


def read_gpu_state(lib, handle) -> dict:
    """Name, driver, CUDA driver version, power limits, clocks, modes: NVML Get calls only."""
    m = lib.module
    queries = {
        "name": lambda: lib.name(handle),
        "architecture": lambda: lib.architecture(handle),
        "driver": lambda: _text(m.nvmlSystemGetDriverVersion()),
        "cuda_driver_version": lambda: _cuda_version(m.nvmlSystemGetCudaDriverVersion_v2()),
        "memory_gib": lambda: lib.memory_total_bytes(handle) / 2**30,
        "power_limit_w": lambda: lib.power_limit_watts(handle),
        "default_power_limit_w": lambda: m.nvmlDeviceGetPowerManagementDefaultLimit(handle) / 1000.0,
        "sm_clock_mhz": lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_SM),
        "memory_clock_mhz": lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: m.nvmlDeviceGetMaxClockInfo(handle, m.NVML_CLOCK_SM),
        "applications_sm_clock_mhz": lambda: m.nvmlDeviceGetApplicationsClock(handle, m.NVML_CLOCK_SM),
        "persistence_mode": lambda: _enabled(m.nvmlDeviceGetPersistenceMode(handle)),
        "compute_mode": lambda: _compute_mode(m, m.nvmlDeviceGetComputeMode(handle)),
        "mig_mode": lambda: _enabled(m.nvmlDeviceGetMigMode(handle)[0]),
        "performance_state": lambda: f"P{int(m.nvmlDeviceGetPerformanceState(handle))}",
        "temperature_c": lambda: m.nvmlDeviceGetTemperature(handle, m.NVML_TEMPERATURE_GPU),
        "energy_counter_supported": lambda: lib.energy_joules(handle) is not None,
        "instant_power_available": lambda: lib.instant_power_watts(handle) is not None,
    }
    state = {}
    for key, query in queries.items():
        try:
            value = query()
        except Exception as exc:  # not supported on this GPU/driver: say so, keep going
            value = f"unavailable ({type(exc).__name__})"
        state[key] = value
    return state


def tf32_flags(torch, enabled: bool) -> None:
    """TF32 for matrix products and cuDNN convolutions together (process-wide torch flags)."""
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)


# --- pytest ---------------------------------------------------------------------------------

def run_gpu_pytest(dry_run: bool, timeout_s: float) -> dict:
    """Run the GPU-only tests in a subprocess; outcome, exit code, last summary line, seconds."""
    target = "tests/test_gpu.py" if dry_run else "tests/"
    pytest_args = ["-m", "gpu", target, "-q", "-rs", "-p", "no:cacheprovider", "--continue-on-collection-errors"]
    cmd = [sys.executable, "-m", "pytest", *pytest_args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    shown = shlex.join(["python", "-m", "pytest"] + pytest_args)
    _log("pytest: " + shown)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=max(5.0, timeout_s))
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "exit_code": None, "summary": f"killed after {timeout_s:.0f} s",
                "seconds": time.monotonic() - t0, "command": shown}
    lines = [ln for ln in (proc.stdout + proc.stderr).strip().splitlines() if ln.strip()]
    summary = next((ln.strip("= ") for ln in reversed(lines)
                    if any(w in ln for w in ("passed", "failed", "skipped", "error", "no tests"))), "")
    sys.stdout.write(proc.stdout[-3000:])
    outcome = {0: "passed", 1: "failed", 5: "no tests collected"}.get(proc.returncode, "error")
    if proc.returncode == 1 and " failed" not in summary and "error" in summary:
        outcome = "passed, with collection errors in other test files"
    return {"outcome": outcome, "exit_code": proc.returncode, "summary": summary[:300],
            "seconds": time.monotonic() - t0, "command": shown}


# --- helpers --------------------------------------------------------------------------------

class Budget:
    """A time cap for one experiment, never past the suite's global deadline (monotonic s)."""

    def __init__(self, seconds: float, deadline: float, clock=time.monotonic):
        self.clock = clock
        self.start = clock()
        self.end = min(self.start + seconds, deadline)
        self.seconds = self.end - self.start
        self.ran_out = False

    def left(self) -> float:
        return max(0.0, self.end - self.clock())

    def expired(self) -> bool:
        if self.clock() >= self.end:
            self.ran_out = True
        return self.ran_out

    def watch(self, per_run_s: float | None = None) -> "_Watch":
        """Context manager giving a threading.Event set when this budget (or ``per_run_s``) ends."""
        left = self.left()
        if per_run_s is not None:
            left = min(left, per_run_s)
        return _Watch(self, max(0.0, left))


class _Watch:
    def __init__(self, budget: Budget, seconds: float):
        self.budget = budget
        self.event = threading.Event()
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True

    def _fire(self):
        self.event.set()

    def __enter__(self):
        if self.budget.left() <= 0:
            self.event.set()
        self.timer.start()
        return self.event

    def __exit__(self, *exc):
        self.timer.cancel()
        self.budget.expired()  # a per-run stop alone does not mark the experiment partial
        return False


def preflight() -> dict:
    """Versions of the packages the suite relies on (or "missing")."""
    out = {}
    for name, module in (("torch", "torch"), ("nvidia_ml_py", "pynvml"), ("psutil", "psutil"),
                         ("numpy", "numpy"), ("tqdm", "tqdm"), ("pytest", "pytest")):
        try:
            mod = __import__(module)
            out[name] = str(getattr(mod, "__version__", "present"))
        except Exception as exc:
            out[name] = f"missing ({type(exc).__name__})"
    return out


def device_joules(res, component: str):
    comp = getattr(res.energy, "components", {}).get(component)
    return comp.joules if comp is not None else None


def judge(value, op: str, threshold: float) -> str:
    """"pass"/"fail" for a measured value against a target; "not measured" for None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not measured"
    ok = {">=": value >= threshold, "<": value < threshold, "<=": value <= threshold}[op]
    return "pass" if ok else "fail"


def percentile(values, pct: float):
    """Linear-interpolated percentile (0-100) of ``values``; None when empty."""
    vals = sorted(values)
    if not vals:
        return None
    pos = (len(vals) - 1) * pct / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def write_json(path: Path, record: dict) -> None:
    """Write ``record`` as JSON (NaN/inf stored as null) through a temporary file."""
    import json

    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_finite(record), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="gpu_suite.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the JSON records (created)")
    p.add_argument("--only", default="", help=f"comma-separated experiments: {', '.join(EXPERIMENTS)}")
    p.add_argument("--minutes", type=float, default=8.0, help="total time budget (default 8)")
    p.add_argument("--dry-run", action="store_true",
                   help="run every experiment on the CPU with tiny sizes (not a reference)")
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    args.raw = raw
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in EXPERIMENTS]
    if unknown:
        p.error(f"unknown experiment(s) {unknown}; allowed: {', '.join(EXPERIMENTS)}")
    args.only = set(only)
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        p.error(f"--minutes must be a positive number, got {args.minutes}")
    return args


def _units_for(rows) -> dict:
    units = {"seconds": "s", "train_seconds": "s", "seconds_to_target": "s", "joules": "J",
             "joules_all_components": "J", "joules_to_target": "J", "joules_per_sample": "J",
             "joules_per_sample_min": "J", "joules_per_sample_max": "J", "watts": "W",
             "watts_all_components": "W", "mean_watts": "W", "counter_joules": "J",
             "integrated_joules": "J", "peak_memory_mib": "MiB", "samples_per_second": "1/s",
             "difference_pct": "%", "overhead_pct_median": "%", "interval_ms_median": "ms",
             "interval_ms_p90": "ms", "read_microseconds": "us", "power_limit_w": "W",
             "energy_saving_pct_vs_fp32": "%"}
    present = {k for r in rows for k in r}
    return {k: v for k, v in units.items() if k in present}


def _clean_row(row: dict) -> dict:
    """A flat row for the reference schema: scalars only (others become text)."""
    out = {}
    for key, value in row.items():
        if value is None or isinstance(value, (str, bool, int)):
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else None
        else:
            out[key] = str(value)
    return out


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _model_text(model_fn) -> str:
    from greenlab.models import count_params

    model = model_fn()
    return f"{type(model).__name__}, {count_params(model):,} parameters"


def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _min(values):
    vals = [v for v in values if v is not None]
    return min(vals) if vals else None


def _max(values):
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _ratio(a, b):
    return a / b if (a is not None and b) else None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(code: int) -> str:
    return f"{code // 1000}.{(code % 1000) // 10}"


def _enabled(value) -> str:
    return {0: "disabled", 1: "enabled"}.get(int(value), str(value))


def _compute_mode(m, value) -> str:
    for name in ("DEFAULT", "EXCLUSIVE_THREAD", "PROHIBITED", "EXCLUSIVE_PROCESS"):
        if getattr(m, "NVML_COMPUTEMODE_" + name, None) == value:
            return name.lower()
    return str(value)


def _log(text: str) -> None:
    print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
