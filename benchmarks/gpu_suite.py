#!/usr/bin/env python
"""Every GPU check, reference recording and lesson run, in one call (``make gpu-check``).

    python benchmarks/gpu_suite.py --out DIR [--budget-s 540] [--only NAME,...] [--lessons all|none|NN,...]
    python benchmarks/gpu_suite.py --out DIR --dry-run        # the CPU rehearsal (tiny sizes)
    python benchmarks/gpu_suite.py --unpack DIR/gpu_suite_records.json --into data/reference_runs

On a lent GPU machine, from the repository root (needs only torch, numpy, nvidia-ml-py and
matplotlib; psutil, tqdm, pytest, torchvision, IPython and ipywidgets are used when present):

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_suite.py --out $OUT --budget-s 540

What it does, within ``--budget-s`` seconds of wall time:

- reads the GPU's state (name, driver, power limit, clocks, modes) with NVML queries only:
  it never changes a limit, clock or mode; measures the energy counter's update period, which
  sets the shortest energy window: max(3 s, 20 update periods);
- runs one experiment per lesson (``EXPERIMENTS``), each in its own subprocess under a
  watchdog: an experiment that hangs or overruns its share is killed, the rows it finished are
  kept, and the others and the summary still run;
- runs every instructor lesson headless in quick mode on the GPU
  (``python -m greenlab.course run``), one subprocess each under the same watchdog, three at a
  time (``--lesson-jobs``: lessons are checked here, not measured);
- runs the ``gpu``-marked tests with pytest when pytest is installed ("not run" otherwise);
- writes, after every step, ``DIR/gpu_suite_records.json``: one record per experiment in the
  ``greenlab.reference`` schema, plus the summary record ``gpu_suite``; and the whole log to
  ``DIR/gpu_suite_log.txt``. Two files, so they come back from machines that return few files.
  ``--unpack`` writes the records as ``data/reference_runs/<gpu>_<date>_<experiment>.json``,
  the files the lessons' ``gl.reference.show(...)`` read.

Measurement rules kept by every experiment: the device is synchronised before every timer
and at every energy-window edge; each configuration is warmed up, then its step time is
measured and its step count chosen so its window lasts at least the shortest window (rows say
``window_ok``); evaluation happens after the timed window; fp32 rows run with PyTorch's default
TF32 settings, recorded as found (``torch_tf32`` in the notes), never forced; energy comes from
the GPU's own NVML source and is "not measured" when there is none (a CPU estimate is never
used for a GPU figure); memory is the increase during the window above what was resident.

Without CUDA it prints "no GPU: nothing to check", writes nothing and exits 0. ``--dry-run``
runs everything on the CPU with tiny sizes; every record says "dry-run, CPU — not a reference"
and ``--unpack`` refuses such records unless ``--allow-dry-run``.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import importlib.util
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

_PROCESS_T0 = time.monotonic()  # a worker's time share counts from here: start-up included
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # so `python benchmarks/gpu_suite.py` finds greenlab
    sys.path.insert(0, str(REPO_ROOT))

EXIT_OK = 0
EXIT_NO_GPU = 0  # documented: no CUDA is not an error, there is simply nothing to check
DRY_RUN_MARK = "dry-run, CPU — not a reference"
DRY_RUN_GPU = "cpu dry-run (not a reference)"
SUMMARY = "gpu_suite"
BUNDLE = "gpu_suite_records.json"
LOG = "gpu_suite_log.txt"
BUNDLE_VERSION = 1
DEFAULT_BUDGET_S = 540.0
# experiment -> (the lesson that reads it with gl.reference.show, seconds of a 540 s plan)
EXPERIMENTS = {
    "measurement_core": ("00", 32),
    "ddp_scaling": ("01", 27),
    "mixed_precision": ("02", 40),
    "mixed_precision-resnet": ("02", 35),
    "gradient_accumulation": ("03", 28),
    "batch_sweep": ("04", 32),
    "architecture_search": ("05", 16),
    "carbon": ("06", 12),
    "compression": ("07", 18),
    "data_pipeline": ("08", 30),
    "capstone": ("09", 31),
    "language_model": ("10", 45),
    "language_model_serving": ("11", 20),
}
LESSONS_SECONDS = 130   # every instructor lesson, quick mode, one subprocess each
PYTEST_SECONDS = 35
OVERHEAD_SECONDS = 9    # start-up, NVML reads, the counter-period poll, writing files
WATCHDOG_GRACE_S = 10.0  # an experiment may overrun its share by this much before it is killed
MIN_WINDOW_S = 3.0
MIN_WINDOW_PERIODS = 20
TARGETS = (
    # key, description, comparison, threshold
    ("bf16_speedup", "bf16 vs fp32 (PyTorch defaults) speed, reference CNN", ">=", 2.0),
    ("bf16_energy_saving_pct", "bf16 energy per sample saving vs fp32 (defaults), %", ">=", 40.0),
    ("monitor_overhead_pct", "PowerMonitor at 10 Hz, training-time overhead, %", "<", 1.0),
    ("counter_vs_power_pct", "energy counter vs integrated instant power, |difference| %", "<=", 3.0),
)
ENERGY_TARGETS = {"bf16_energy_saving_pct", "counter_vs_power_pct"}  # judged on NVML energy only


def experiment_names() -> tuple:
    """The experiments the suite records, in run order (each a name a lesson reads)."""
    return tuple(EXPERIMENTS)


@dataclass(frozen=True)
class Sizes:
    """Work sizes: one set for the H200 (compute-bound, see ``GPU_SIZES``), a tiny one for the CPU
    dry run. Batch sizes are per optimizer step unless named micro."""

    min_window_s: float = MIN_WINDOW_S   # raised to 20 counter periods when the counter is slower
    window_margin: float = 1.15         # steps are chosen for this many times the shortest window
    warmup_s: float = 0.6               # untimed warm-up per configuration (cuDNN choice, clocks)
    calib_s: float = 0.3                # calibration: double the steps until this long
    min_steps: int = 3
    max_steps: int = 100_000
    repeats: int = 3                    # at most; fewer when the share of time runs short
    fmnist: tuple = (60000, 10000)        # FashionMNIST-shaped (train, test), every such experiment
    cifar: tuple = (16384, 4096)
    cnn: dict = field(default_factory=lambda: {"width": 128})      # reference CNN at 2x width
    cnn_batch: int = 4096
    resnet: dict = field(default_factory=lambda: {"depth": 20, "width": 64})
    resnet_batch: int = 2048
    accum: tuple = (1024, 4)            # micro-batch x steps against one batch of the product
    sweep_batches: tuple = (256, 1024, 4096)
    sweep_target: float = 0.85
    sweep_evals: int = 8
    arch_candidates: tuple = (("cnn", {"depth": 3, "width": 32}), ("cnn", {"depth": 3, "width": 64}),
                              ("cnn", {"depth": 3, "width": 128}),
                              ("cnn", {"depth": 3, "width": 128, "separable": True}),
                              ("mlp", {"hidden": (1024, 512)}))
    infer_batch: int = 4096
    loader_batch: int = 1024
    loader_workers: tuple = (0, 4)
    idle_s: float = 3.0
    steady_load_s: float = 8.0
    poll_s: float = 2.0
    power_interval_s: float = 0.005
    matmul_n: int = 8192
    monitor_pairs: int = 3
    monitor_run_s: float = 1.5
    ddp_per_worker_batch: int = 1024
    ddp_epochs: int = 8
    capstone_scale: float = 1.0
    capstone_target: float | None = None  # None: the recipes' own target
    lm: dict = field(default_factory=lambda: {"d_model": 1024, "n_layers": 8, "n_heads": 16, "max_seq_len": 512})
    lm_batch: int = 32                  # windows of max_seq_len bytes per step
    lesson_cap_s: float = 60.0
    dry: bool = False


# Why these sizes are compute-bound on an H200 (989 TFLOP/s dense bf16/fp16, 495 TF32,
# 67 fp32; HBM3e 4.8 TB/s; so a kernel needs about 200 FLOP per byte moved in bf16, about 100 in
# TF32, to be limited by arithmetic rather than memory), counted with gl.flops:
# - reference CNN at width 128 (128, 256, 512 channels): 0.233 GFLOP forward per 28x28 image;
#   its 3x3 convolutions with C in and out channels do 9*C/2 FLOP per byte of bf16 activation
#   (C=128: 576, C=256: 1152), well above 200. One training step at batch 4096 is
#   3 x 0.233 x 4096 = 2.9 TFLOP: about 4 ms of GPU time at 700 TFLOP/s (more in fp32/TF32).
# - ResNet-20 at width 64 (64, 128, 256 channels): 1.3 GFLOP forward per 32x32 image (the lesson's
#   width-16 ResNet-20 has 1/16 of it and is launch-bound at batch 512); at batch 2048 a step is
#   3 x 1.3 x 2048 = 8 TFLOP, about 11 ms.
# - TinyGPT at d_model 1024, 8 layers (about 100 M parameters), 32 windows of 512 bytes per step:
#   its matrix products have 16384 rows and 1024-4096 columns (over 500 FLOP per bf16 byte), and
#   a step is about 6 x 1e8 x 16384 = 10 TFLOP plus attention.
# Launches: torch.profiler counts 76 (CNN) and 412 (ResNet) leaf operators per training step on
# the CPU (SGD's per-parameter loop there; CUDA's foreach path launches fewer). At ~5 us each the
# host needs about 0.4 and 2 ms per step, well under the GPU's 4 and 11 ms, so the host runs
# ahead and the GPU, not launching, sets the pace. The runs record what actually happened:
# achieved TFLOP/s and, from a torch.profiler trace, the share of wall time the GPU spent in
# kernels (``device_busy_fraction``; near 1 means not launch-bound).
GPU_SIZES = Sizes()
DRY_SIZES = Sizes(
    min_window_s=0.25, window_margin=1.2, warmup_s=0.02, calib_s=0.02, min_steps=1, max_steps=40,
    repeats=1, fmnist=(512, 128), cifar=(128, 64), cnn={"width": 8},
    cnn_batch=32, resnet={"depth": 8, "width": 4}, resnet_batch=16, accum=(16, 2),
    sweep_batches=(32, 64), sweep_target=0.3, sweep_evals=2,
    arch_candidates=(("cnn", {"depth": 2, "width": 4}), ("cnn", {"depth": 2, "width": 8, "separable": True})),
    infer_batch=32, loader_batch=32, loader_workers=(0, 1), idle_s=0.2, steady_load_s=0.3,
    poll_s=0.2, power_interval_s=0.01, matmul_n=64, monitor_pairs=1, monitor_run_s=0.1,
    ddp_per_worker_batch=32, ddp_epochs=1, capstone_scale=0.01, capstone_target=0.3,
    lm={"d_model": 32, "n_layers": 2, "n_heads": 2, "max_seq_len": 32}, lm_batch=4,
    lesson_cap_s=240.0, dry=True)


def main(argv=None) -> int:
    """Command-line entry point; returns the exit code."""
    args = _parse_args(argv)
    if args.unpack:
        return unpack(args.unpack, args.into, allow_dry_run=args.allow_dry_run)
    if args.worker:
        return worker_main(args)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no GPU: nothing to check (torch.cuda.is_available() is False). Nothing was written. "
              "Run with --dry-run to exercise every experiment on the CPU with tiny sizes.")
        return EXIT_NO_GPU
    Suite(args).run()
    return EXIT_OK


# --- the orchestrator (no CUDA context of its own) ------------------------------------------

class Suite:
    """One call: provenance, the time plan, one watched subprocess per experiment and lesson."""

    def __init__(self, args):
        import torch

        self.t_start = time.monotonic()
        self.args = args
        self.torch = torch
        self.dry_run = bool(args.dry_run)
        self.sizes = DRY_SIZES if self.dry_run else GPU_SIZES
        self.out = Path(args.out)
        self.date = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
        self.command = "python benchmarks/gpu_suite.py " + shlex.join(args.raw)
        self.budget_s = float(args.budget_s)
        self.deadline = self.t_start + self.budget_s
        self.selected = [n for n in EXPERIMENTS if not args.only or n in args.only]
        self.lessons = select_lessons(args.lessons, self.dry_run)
        plan = {n: EXPERIMENTS[n][1] for n in self.selected}
        lesson_s = LESSONS_SECONDS if self.lessons else 0
        total = sum(plan.values()) + lesson_s + PYTEST_SECONDS + OVERHEAD_SECONDS
        scale = min(1.0, self.budget_s / total) if not self.dry_run else 1.0
        self.shares = {n: s * scale for n, s in plan.items()}
        self.lesson_s = lesson_s * scale
        self.pytest_s = PYTEST_SECONDS * scale
        self.records: dict = {}
        self.results: dict = {}
        self.lesson_rows: list = []
        self.measured: dict = {}
        self.measured_sources: dict = {}
        self.pytest: dict | None = None
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_suite_"))
        self.log = None
        self._say_lock = threading.Lock()

    def run(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / LOG, "w", encoding="utf-8")
        try:
            self._run()
        finally:
            self.log.close()

    def _run(self) -> None:
        self.gpu_state = gpu_state(self.dry_run)
        self.provenance = self._provenance()
        self.counter_period_s = self.gpu_state.get("counter_update_period_ms")
        period = (self.counter_period_s or 0) / 1000.0
        self.min_window_s = max(self.sizes.min_window_s, MIN_WINDOW_PERIODS * period if not self.dry_run else 0)
        self.say(f"gpu_suite: {self.provenance['gpu']} | driver {self.provenance['driver']} | "
                 f"torch {self.provenance['torch']} | "
                 f"{'DRY RUN on the CPU' if self.dry_run else 'GPU run'} | budget {self.budget_s:.0f} s | "
                 f"shortest energy window {self.min_window_s:.2f} s")
        self.say("packages: " + ", ".join(f"{k} {v}" for k, v in preflight().items()))
        reserve = self.lesson_s + self.pytest_s + OVERHEAD_SECONDS / 2
        if self.dry_run:  # one worker process for all: the rehearsal checks code paths, not timing
            scale = 4 * self.budget_s / DEFAULT_BUDGET_S
            self.run_experiments(self.selected, {n: self.shares[n] * scale for n in self.selected})
        for i, name in enumerate(self.selected if not self.dry_run else ()):
            rest = sum(self.shares[n] for n in self.selected[i + 1:])
            left = self.deadline - time.monotonic() - reserve - rest
            cap = min(self.shares[name] + max(0.0, left - self.shares[name]) * 0.5, left)
            self.run_experiments([name], {name: cap})
        if self.lessons:
            self.run_lessons()
            self.write_bundle()
        self.pytest = self.run_pytest()
        self.write_bundle()
        self.say(self.summary_table())

    # --- logging ---
    def say(self, text: str) -> None:
        with self._say_lock:  # lessons run in parallel threads
            print(text, flush=True)
            if self.log is not None:
                self.log.write(text + "\n")
                self.log.flush()

    def stream(self, cmd: list, env: dict, timeout_s: float, prefix: str) -> tuple:
        """Run ``cmd`` in its own process group, its output into the log; kill the group after
        ``timeout_s``. Returns (exit code or None when killed, seconds, last output lines)."""
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        tail: list = []

        def pump():
            for line in proc.stdout:
                line = line.rstrip("\n")
                tail.append(line)
                del tail[:-40]
                self.say(prefix + line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            code = None
        reader.join(timeout=5)
        return code, time.monotonic() - t0, tail

    # --- experiments ---
    def run_experiments(self, names: list, caps: dict) -> None:
        """Run ``names`` in one watched worker process (each with its time share in ``caps``);
        a worker past the sum of the shares plus a grace period is killed, keeping finished rows."""
        names = [n for n in names if caps[n] >= 8.0 or self.dry_run]
        for name in [n for n in caps if n not in names]:
            self.results[name] = {"status": "skipped: out of time", "seconds": 0.0}
            self.record(name, {"rows": [{"label": name, "status": "skipped: out of time"}], "notes": []})
            self.say(f"[{name}] skipped: out of time")
        while names:
            names = self._run_worker(names, caps)  # what a killed worker had not started yet

    def _run_worker(self, names: list, caps: dict) -> list:
        cap_s = sum(caps[n] for n in names)
        grace = min(WATCHDOG_GRACE_S, max(2.0, 0.25 * cap_s))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", ",".join(names),
               "--part", str(self.tmp), "--cap-s", ",".join(f"{caps[n]:.1f}" for n in names),
               "--min-window-s", f"{self.min_window_s:.3f}", "--cache", str(self.tmp),
               "--out", str(self.out)] + (["--dry-run"] if self.dry_run else []) \
            + (["--hang", self.args.hang] if self.args.hang else [])
        tag = names[0] if len(names) == 1 else "experiments"
        self.say(f"[{tag}] start (share {cap_s:.0f} s, watchdog at {cap_s + grace:.0f} s)")
        code, seconds, tail = self.stream(cmd, _child_env(), cap_s + grace, f"  {tag}| ")
        not_started = [n for n in names if not (self.tmp / f"{n}.json").exists()] if code is None else []
        for name in [n for n in names if n not in not_started]:
            data = _read_json(self.tmp / f"{name}.json") or {"rows": [], "notes": [], "measured": {}}
            status = data.get("status")
            if code is None and status in (None, "running"):
                status = (f"killed by the watchdog after {seconds:.0f} s"
                          + (f"; {len(data['rows'])} finished row(s) kept" if data.get("rows") else ""))
            elif code != 0 and status in (None, "running"):
                last = next((ln for ln in reversed(tail) if ln.strip()), "")
                status = f"failed: exit code {code}: {last[-200:]}"
            status = status or "failed: the worker wrote no result"
            if not data.get("rows"):
                data["rows"] = [{"label": name, "status": status}]
            took = seconds if (code is None and status.startswith("killed")) else data.get("seconds", seconds)
            self.results[name] = {"status": status, "seconds": took if took is not None else 0.0}
            for key, value in (data.get("measured") or {}).items():
                self.measured[key] = value
                self.measured_sources[key] = data.get("energy_source")
            self.record(name, data)
            self.say(f"[{name}] {status} in {self.results[name]['seconds']:.1f} s")
        self.write_bundle()
        return not_started

    def record(self, experiment: str, data: dict) -> dict:
        from greenlab import reference

        rows = list(data.get("rows") or [])
        if self.dry_run:
            rows = [{**r, "run": DRY_RUN_MARK} for r in rows]
        notes = ([DRY_RUN_MARK + "."] if self.dry_run else []) + list(data.get("notes") or []) \
            + [self._state_note()]
        if data.get("torch_tf32"):
            notes.append("PyTorch TF32 settings as found (not changed): " + data["torch_tf32"] + ".")
        record = {
            "schema_version": reference.SCHEMA_VERSION, "experiment": experiment, "date": self.date,
            "gpu": self.provenance["gpu"], "driver": self.provenance["driver"],
            "cuda": self.provenance["cuda"], "torch": self.provenance["torch"], "command": self.command,
            "results": [_clean_row(r) for r in rows], "gpu_count": 1,
            "greenlab": self.provenance["greenlab"], "python": self.provenance["python"],
            "units": _units_for(rows), "notes": " ".join(n for n in notes if n),
        }
        source = data.get("energy_source")
        if source in reference.ENERGY_SOURCES:
            record["energy_source"] = source
        if not record["units"]:
            del record["units"]
        try:
            reference.from_dict(record, experiment)
        except reference.ReferenceRunError as exc:  # kept anyway: a measurement is never thrown away
            self.results.setdefault(experiment, {})["schema_problem"] = str(exc)
            self.say(f"WARNING {experiment} does not match the reference schema: {exc}")
        self.records[experiment] = record
        return record

    # --- lessons ---
    def run_lessons(self) -> None:
        """Every selected lesson headless in quick mode, ``--lesson-jobs`` at a time (they are
        checked, not measured), each under a watchdog; none starts after the phase's end."""
        from concurrent.futures import ThreadPoolExecutor

        budget_end = time.monotonic() + self.lesson_s
        if not self.dry_run:
            budget_end = min(budget_end, self.deadline - self.pytest_s - 2)
        else:
            budget_end = time.monotonic() + self.sizes.lesson_cap_s * len(self.lessons)
        with ThreadPoolExecutor(max_workers=max(1, self.args.lesson_jobs)) as pool:
            rows = list(pool.map(lambda path: self.run_lesson(path, budget_end), self.lessons))
        self.lesson_rows.extend(rows)

    def run_lesson(self, path: Path, budget_end: float) -> dict:
        cap = min(budget_end - time.monotonic(), self.sizes.lesson_cap_s)
        row = {"label": f"lesson {path.stem}"}
        if cap < 10.0:
            self.say(f"[lesson {path.stem}] not run: out of time")
            return {**row, "status": "not run: out of time", "seconds": 0.0}
        env = _child_env()
        env.update(GREENLAB_QUICK="1", MPLBACKEND="Agg")
        env.pop("GREENLAB_DEVICE", None)
        if self.dry_run:
            env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [sys.executable, "-m", "greenlab.course", "run", str(path)]
        self.say(f"[lesson {path.stem}] start (watchdog at {cap:.0f} s)")
        code, seconds, tail = self.stream(cmd, env, cap, f"  {path.stem}| ")
        if code == 0:
            status = "passed"
        elif code is None:
            status = f"killed by the watchdog after {seconds:.0f} s"
        else:
            failed = next((ln for ln in reversed(tail) if ln.startswith("FAILED ")), "")
            status = "failed: " + (failed[len("FAILED "):] or f"exit code {code}")[:300]
        self.say(f"[lesson {path.stem}] {status} in {seconds:.1f} s")
        return {**row, "status": status, "seconds": seconds, "device": "cpu" if self.dry_run else "cuda",
                "mode": "quick", "jobs": self.args.lesson_jobs}

    # --- pytest ---
    def run_pytest(self) -> dict:
        files = gpu_test_files()
        shown = "python -m pytest -m gpu " + " ".join(str(f.relative_to(REPO_ROOT)) for f in files)
        if importlib.util.find_spec("pytest") is None:
            self.say("pytest -m gpu: not run (pytest is not installed)")
            return {"outcome": "not run", "summary": "pytest is not installed", "command": shown}
        if not files:
            return {"outcome": "not run", "summary": "no test file has gpu-marked tests", "command": shown}
        left = self.deadline - time.monotonic() - 2 if not self.dry_run else 120.0
        if left < 10:
            return {"outcome": "not run", "summary": "out of time", "command": shown}
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", *map(str, files), "-q", "-rs",
               "-p", "no:cacheprovider"]
        self.say("pytest: " + shown)
        code, seconds, tail = self.stream(cmd, _child_env(), left, "  pytest| ")
        summary = next((ln.strip("= ") for ln in reversed(tail)
                        if any(w in ln for w in ("passed", "failed", "skipped", "error", "no tests"))), "")
        outcome = {0: "passed", 1: "failed", 5: "no tests collected", None: "killed by the watchdog"}.get(code, "error")
        return {"outcome": outcome, "exit_code": code, "summary": summary[:300], "seconds": seconds,
                "command": shown}

    # --- summary and files ---
    def summary_rows(self) -> list:
        rows = []
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                rows.append({"label": name, "lesson": EXPERIMENTS[name][0], "status": r["status"],
                             "seconds": r.get("seconds"), "schema_problem": r.get("schema_problem")})
            elif name not in self.selected:
                rows.append({"label": name, "lesson": EXPERIMENTS[name][0], "status": "not selected (--only)"})
        rows.extend(self.lesson_rows)
        for key, text, op, threshold in TARGETS:
            value, verdict = self.target(key, op, threshold)
            rows.append({"label": "target: " + text, "measured": value, "threshold": f"{op} {threshold:g}",
                         "result": verdict})
        p = self.pytest or {"outcome": "not run yet"}
        rows.append({"label": "pytest -m gpu", **p})
        rows.append({"label": "gpu state", **{k: v for k, v in self.gpu_state.items()}})
        rows.append({"label": "python packages", **preflight()})
        rows.append({"label": "total", "seconds": time.monotonic() - self.t_start,
                     "budget_seconds": self.budget_s, "shortest_window_s": self.min_window_s})
        return rows

    def target(self, key: str, op: str, threshold: float) -> tuple:
        value = self.measured.get(key)
        if key in ENERGY_TARGETS and value is not None \
                and not str(self.measured_sources.get(key) or "").startswith("nvml"):
            return value, "not measured (no GPU energy counter: not judged on an estimate)"
        return value, judge(value, op, threshold)

    def write_bundle(self) -> None:
        self.record(SUMMARY, {"rows": self.summary_rows(), "notes": [
            "Summary of one gpu_suite call: experiment status, the lessons run headless in quick "
            "mode, targets (measured, not assumed), the GPU-only pytest run."]})
        bundle = {"bundle": "greenlab gpu_suite records", "bundle_version": BUNDLE_VERSION,
                  "command": self.command, "records": [self.records[k] for k in self.records]}
        write_json(self.out / BUNDLE, bundle)

    def summary_table(self) -> str:
        """The short table printed last: experiments, lessons, targets, pytest."""
        lines = ["", "=" * 78, f"gpu_suite summary: {self.provenance['gpu']}, {self.date}"
                 + (f"  [{DRY_RUN_MARK}]" if self.dry_run else ""), "-" * 78]
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                lines.append(f"{name:<26} {r['seconds']:6.1f} s  {r['status']}")
        for row in self.lesson_rows:
            lines.append(f"{row['label']:<26} {row.get('seconds', 0):6.1f} s  {row['status']}")
        lines.append("-" * 78)
        for key, text, op, threshold in TARGETS:
            value, verdict = self.target(key, op, threshold)
            shown = "not measured" if value is None else f"{value:.3g}"
            lines.append(f"{text:<58} {shown:>12} {op} {threshold:g}  {verdict}")
        lines.append("-" * 78)
        p = self.pytest or {}
        lines.append(f"pytest -m gpu: {p.get('outcome', 'not run')} ({p.get('summary', '')})")
        lines.append(f"files: {BUNDLE} ({len(self.records)} records) and {LOG} in {self.out}")
        lines.append(f"total {time.monotonic() - self.t_start:.0f} s")
        return "\n".join(lines)

    def _provenance(self) -> dict:
        import greenlab

        torch = self.torch
        if self.dry_run:
            gpu, driver = DRY_RUN_GPU, "none (dry-run, CPU)"
        else:
            gpu = self.gpu_state.get("name")
            if not isinstance(gpu, str) or gpu.startswith("unavailable"):
                gpu = torch.cuda.get_device_name(0)
            driver = self.gpu_state.get("driver") or "unknown (NVML not available)"
        return {"gpu": gpu, "driver": str(driver), "cuda": str(torch.version.cuda or "none (CPU build)"),
                "torch": torch.__version__, "greenlab": greenlab.__version__,
                "python": platform.python_version()}

    def _state_note(self) -> str:
        s = self.gpu_state
        keys = ("power_limit_w", "default_power_limit_w", "sm_clock_mhz", "max_sm_clock_mhz",
                "persistence_mode", "compute_mode", "mig_mode", "counter_update_period_ms")
        parts = [f"{k}={s[k]}" for k in keys if s.get(k) is not None]
        return ("GPU state at start (read-only): " + ", ".join(parts) + ".") if parts else ""


# --- the worker: one experiment in its own process ------------------------------------------

def worker_main(args) -> int:
    """Run the experiments named in ``args.worker`` in turn; each one's rows go to
    ``<args.part>/<name>.json`` as they are finished. Exit code 1 when any failed."""
    failed = 0
    for name, cap_s in zip(args.worker, args.cap_s):
        ctx = Context(args, name, cap_s)
        print(f"[{name}] running (share {cap_s:.0f} s)", flush=True)
        try:
            if name == args.hang:  # rehearses the watchdog: one row, then no progress
                ctx.row({"label": "before the hang", "status": "ok"})
                time.sleep(10 * 86400)
            globals()["exp_" + name.replace("-", "_")](ctx)
        except Exception as exc:  # recorded, with the rows finished so far; the next one still runs
            import traceback

            traceback.print_exc()
            ctx.finish(f"failed: {type(exc).__name__}: {exc}"[:400])
            failed += 1
            continue
        ctx.finish("partial: out of time" if ctx.ran_out else "ok")
    return 1 if failed else 0


class Context:
    """What an experiment needs: device, energy sources, sizes, its time share, its record."""

    def __init__(self, args, name: str, cap_s: float):
        import torch

        from greenlab.energy import default_sources

        global _PROCESS_T0
        self.t0, _PROCESS_T0 = min(time.monotonic(), _PROCESS_T0), float("inf")  # first: from start-up
        self.name = name
        self.torch = torch
        self.dry_run = bool(args.dry_run)
        self.sizes = DRY_SIZES if self.dry_run else GPU_SIZES
        self.device = "cpu" if self.dry_run else "cuda"
        if self.dry_run:
            torch.set_num_threads(1)
        self.cap_s = float(cap_s)
        self.min_window_s = float(args.min_window_s)
        self.part = Path(args.part) / f"{name}.json"
        self.cache = Path(args.cache) if args.cache else None
        self.sources = default_sources()
        if self.device == "cuda":
            torch.cuda.init()
            self.component = f"gpu:{torch.cuda.current_device()}"
        else:
            self.component = "cpu"
        by_component = {s.component: s for s in self.sources}
        source = by_component.get(self.component)
        self.energy_source = source.name if source is not None else None
        # a GPU figure comes from the GPU's own NVML source or is not measured
        self.energy_ok = source is not None and (self.dry_run or source.name.startswith("nvml"))
        # gl.train runs read only the device's source, so their joules (and joules to target)
        # are the device's alone
        self.device_sources = [source] if self.energy_ok else self.sources
        self.rows: list = []
        self.notes: list = []
        self.measured: dict = {}
        self.ran_out = False
        self.datasets: dict = {}
        self.tf32 = (f"torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
                     f"torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}")
        if not self.energy_ok:
            self.note(f"No GPU energy source for {self.component} "
                      f"({self.energy_source or 'none'}): energy columns are not measured.")

    # --- time ---
    def left(self) -> float:
        return self.cap_s - (time.monotonic() - self.t0)

    def enough_for(self, seconds: float) -> bool:
        """True when ``seconds`` of work still fits in the share; otherwise marks the run partial."""
        if self.left() >= seconds:
            return True
        self.ran_out = True
        return False

    # --- record ---
    def row(self, row: dict) -> dict:
        self.rows.append(row)
        self._save("running")
        return row

    def note(self, text: str) -> None:
        self.notes.append(text)

    def finish(self, status: str) -> None:
        self._save(status)

    def _save(self, status: str) -> None:
        write_json(self.part, {"status": status, "seconds": time.monotonic() - self.t0,
                               "rows": self.rows, "notes": self.notes,
                               "measured": self.measured,
                               "energy_source": self.energy_source if self.energy_ok else None,
                               "torch_tf32": self.tf32})

    # --- device ---
    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def dataset(self, name: str, n_train: int, n_test: int):
        """A dataset, shared between this suite's workers through a cache file."""
        from greenlab import data

        key = (name, n_train, n_test)
        if key in self.datasets:
            return self.datasets[key]
        path = self.cache / f"data_{name}_{n_train}_{n_test}.pt" if self.cache else None
        ds = None
        if path is not None and path.exists():
            try:
                ds = self.torch.load(path, weights_only=False)
            except Exception:
                ds = None
        if ds is None:
            ds = data.load(name, n_train=n_train, n_test=n_test, verbose=False)
            if path is not None:
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                self.torch.save(ds, tmp)
                tmp.replace(path)
        self.datasets[key] = ds
        return ds

    # --- measuring ---
    def calibrate(self, run_steps) -> tuple:
        """Warm up ``run_steps(n)``, then double n until a synchronised timing lasts
        ``sizes.calib_s``. Returns (steps for one window, measured seconds per step)."""
        z = self.sizes
        self.sync()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < z.warmup_s:
            run_steps(1)
            self.sync()
        n = 1
        while True:
            self.sync()
            t = time.perf_counter()
            run_steps(n)
            self.sync()
            dt = time.perf_counter() - t
            if dt >= z.calib_s or n >= z.max_steps:
                break
            n *= 2
        per_step = max(dt / n, 1e-9)
        steps = math.ceil(self.min_window_s * z.window_margin / per_step)
        return max(z.min_steps, min(z.max_steps, steps)), per_step

    def window(self, label: str, work) -> dict:
        """Run ``work()`` inside one energy window (synchronised edges); seconds, joules of the
        device (None when not measured), whether the window was long enough, memory added."""
        from greenlab.energy import measure

        mem = _MemoryIncrease(self)
        self.sync()
        with measure(label, sources=self.sources) as w:
            work()
            self.sync()
        r = w.result
        comp = r.components.get(self.component)
        joules = comp.joules if (comp is not None and self.energy_ok) else None
        return {"seconds": r.seconds, "joules": joules,
                "window_ok": r.seconds >= self.min_window_s,
                "memory_increase_mib": mem.mib(),
                "energy_complete": bool(r.complete) if joules is not None else None}

    def busy(self, run_steps, steps: int = 3) -> dict:
        """torch.profiler over ``steps`` steps: CPU-side operator time and (CUDA) kernel time
        against wall time; ``device_busy_fraction`` near 1 means the GPU, not launches, limits."""
        from torch.profiler import ProfilerActivity, profile

        torch = self.torch
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device == "cuda" else [])
        self.sync()
        t0 = time.perf_counter()
        with profile(activities=acts) as prof:
            run_steps(steps)
            self.sync()
        wall = time.perf_counter() - t0
        cpu_s = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e6
        dev_us = None
        if self.device == "cuda":  # kernels only (each counted once), one stream
            from torch.autograd import DeviceType

            dev_us = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
        del torch
        return {"profile_steps": steps, "profile_wall_s": wall, "profile_cpu_op_s": cpu_s,
                "profile_device_kernel_s": dev_us / 1e6 if dev_us is not None else None,
                "device_busy_fraction": (dev_us / 1e6 / wall) if (dev_us is not None and wall > 0) else None}

    def per_sample(self, w: dict, samples: int) -> dict:
        j = w["joules"]
        return {"samples": samples, "samples_per_second": samples / w["seconds"] if w["seconds"] > 0 else None,
                "joules_per_sample": j / samples if (j is not None and samples) else None}


class _MemoryIncrease:
    """Peak memory added during a window, above what was allocated at its start (MiB)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        torch = ctx.torch
        if ctx.device == "cuda":
            torch.cuda.synchronize()
            self.base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        else:
            import importlib

            self._rss = importlib.import_module("greenlab.train")._rss_bytes
            self.base = self._rss()

    def mib(self):
        if self.ctx.device == "cuda":
            self.ctx.torch.cuda.synchronize()
            return (self.ctx.torch.cuda.max_memory_allocated() - self.base) / 2**20
        now = self._rss()
        return None if (now is None or self.base is None) else max(0, now - self.base) / 2**20


class StepLoop:
    """A plain training loop on device-resident batches (or a loader's), for throughput windows.

    One step: ``accum`` micro-batches under autocast (bf16/fp16), one optimizer step; fp16 uses a
    GradScaler, whose inf check reads a value back to the host each step (a sync inside the step).
    """

    def __init__(self, ctx: Context, model, ds, batch: int, precision: str, accum: int = 1,
                 lr: float = 0.05, loader=None):
        torch = ctx.torch
        self.ctx, self.torch, self.batch, self.precision, self.accum = ctx, torch, batch, precision, accum
        dev = ctx.device
        self.channels_last = dev == "cuda" and model is not None and _has_conv(model)
        self.model = model.to(dev)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        self.scaler = torch.amp.GradScaler(dev) if precision == "fp16" else None
        self.loader = loader
        self._iter = None
        if loader is None:
            self.x = ds.train_x.to(dev)
            self.y = ds.train_y.to(dev)
            g = torch.Generator(device="cpu").manual_seed(0)
            self.order = torch.randperm(self.x.shape[0], generator=g).to(dev)
            self.pos = 0
        self.samples_per_step = batch * accum

    def _next(self):
        torch = self.torch
        if self.loader is not None:
            if self._iter is None:
                self._iter = iter(self.loader)
            try:
                xb, yb = next(self._iter)
            except StopIteration:
                self._iter = iter(self.loader)
                xb, yb = next(self._iter)
            xb = xb.to(self.ctx.device, non_blocking=True)
            yb = yb.to(self.ctx.device, non_blocking=True)
        else:
            n = self.x.shape[0]
            if self.pos + self.batch > n:
                self.pos = 0
            idx = self.order[self.pos:self.pos + self.batch]
            self.pos += self.batch
            xb, yb = self.x.index_select(0, idx), self.y.index_select(0, idx)
        if self.channels_last and xb.dim() == 4:
            xb = xb.contiguous(memory_format=torch.channels_last)
        return xb, yb

    def run(self, steps: int) -> None:
        torch = self.torch
        F = torch.nn.functional
        amp = self.precision != "fp32"
        for _ in range(steps):
            for _k in range(self.accum):
                xb, yb = self._next()
                with torch.autocast(self.ctx.device, dtype=self.dtype, enabled=amp):
                    loss = F.cross_entropy(self.model(xb).float(), yb) / self.accum
                if self.scaler is not None:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()
            if self.scaler is not None:
                self.scaler.step(self.opt)
                self.scaler.update()
            else:
                self.opt.step()
            self.opt.zero_grad(set_to_none=True)

    def accuracy(self, ds) -> float:
        """Test accuracy after training (outside any window)."""
        torch = self.torch
        self.model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast(self.ctx.device, dtype=self.dtype, enabled=self.precision != "fp32"):
            for s in range(0, ds.test_x.shape[0], 1024):
                xb = ds.test_x[s:s + 1024].to(self.ctx.device)
                if self.channels_last:
                    xb = xb.contiguous(memory_format=torch.channels_last)
                correct += int((self.model(xb).argmax(1).cpu() == ds.test_y[s:s + 1024]).sum())
        self.model.train()
        return correct / max(1, ds.test_x.shape[0])


def throughput_row(ctx: Context, label: str, loop: StepLoop, extra: dict, repeats: int,
                   flops_per_sample: float | None = None, profile: bool = False, ds=None) -> dict:
    """Calibrate ``loop``, then ``repeats`` windows of at least the shortest window; medians."""
    steps, per_step = ctx.calibrate(loop.run)
    est = steps * per_step
    if profile:
        extra = {**extra, **ctx.busy(loop.run)}
    windows = []
    for _ in range(repeats):
        if not ctx.enough_for(est * 1.1 + 1):
            break
        windows.append(ctx.window(label, lambda: loop.run(steps)))
    row = {"label": label, **extra, "steps": steps, "calibrated_step_ms": per_step * 1000,
           "repeats": len(windows)}
    if not windows:
        row["status"] = "skipped: out of time"
        return row
    samples = steps * loop.samples_per_step
    sps = [samples / w["seconds"] for w in windows]
    jps = [w["joules"] / samples for w in windows if w["joules"] is not None]
    row.update({
        "status": "ok", "samples": samples,
        "window_seconds": _median([w["seconds"] for w in windows]),
        "window_ok": all(w["window_ok"] for w in windows),
        "samples_per_second": _median(sps), "samples_per_second_min": min(sps), "samples_per_second_max": max(sps),
        "joules": _median([w["joules"] for w in windows]),
        "joules_per_sample": _median(jps) if jps else None,
        "joules_per_sample_min": min(jps) if jps else None, "joules_per_sample_max": max(jps) if jps else None,
        "memory_increase_mib": _max([w["memory_increase_mib"] for w in windows]),
        "energy_source": ctx.energy_source if ctx.energy_ok else "not measured",
    })
    if flops_per_sample:
        row["tflops_achieved"] = 3 * flops_per_sample * row["samples_per_second"] / 1e12
    if ds is not None:
        row["test_accuracy_after"] = loop.accuracy(ds)
    return row


def _repeats(ctx: Context, configs: int, seconds_each: float) -> int:
    """How many windows of ``seconds_each`` per configuration fit in what is left after each
    configuration's warm-up and calibration: at most sizes.repeats, at least 1."""
    z = ctx.sizes
    fixed = configs * (z.warmup_s + 2 * z.calib_s + 1.0)
    return max(1, min(z.repeats, int((ctx.left() - fixed) / max(configs * seconds_each * 1.1, 1e-6))))


def _precisions(ctx: Context) -> list:
    torch = ctx.torch
    out = ["fp32"]
    if ctx.device != "cuda" or torch.cuda.is_bf16_supported():
        out.append("bf16")
    out.append("fp16")
    return out


# --- experiments: one per lesson, each named as the lesson reads it ------------------------

def exp_measurement_core(ctx: Context) -> None:
    """Lesson 00: idle power, the counter against integrated instant power, the counter's update
    period, and the PowerMonitor's overhead on a training loop."""
    from greenlab.energy import measure_idle
    from greenlab.energy import nvml as _nvml

    z = ctx.sizes
    idle = measure_idle(z.idle_s, sources=ctx.sources)
    ctx.row({"label": "idle power", "seconds": idle.seconds,
             "watts": idle.watts_by_component.get(ctx.component) if ctx.energy_ok else None,
             "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    lib = _nvml.get_nvml() if ctx.device == "cuda" else None
    handle = _nvml_handle(lib, ctx.torch) if lib is not None and lib.available else None
    if handle is None:
        why = "dry-run on the CPU" if ctx.dry_run else "no NVML handle for this GPU"
        ctx.row({"label": "counter vs instant power", "status": f"not measured: {why}"})
        ctx.row({"label": "counter update period", "status": f"not measured: {why}"})
    else:
        instant = lib.instant_power_watts(handle) is not None
        read_power = (lambda: lib.instant_power_watts(handle)) if instant else (lambda: lib.power_watts(handle))
        with SteadyLoad(ctx.torch, ctx.device, z.matmul_n):
            time.sleep(1.0)  # clocks and power settle
            check = counter_vs_power(lambda: lib.energy_joules(handle), read_power, z.steady_load_s,
                                     z.power_interval_s)
            period = counter_update_period(lambda: lib.energy_joules(handle), z.poll_s)
        ctx.row({"label": "counter vs instant power", **check,
                 "power_reading": "NVML_FI_DEV_POWER_INSTANT" if instant
                 else "nvmlDeviceGetPowerUsage (1 s average on Ampere+ other than A100)"})
        ctx.row({"label": "counter update period", **period})
        if check.get("difference_pct") is not None:
            ctx.measured["counter_vs_power_pct"] = abs(check["difference_pct"])
        ctx.note(f"Steady load: repeated bf16 {z.matmul_n}x{z.matmul_n} matrix products in a background "
                 f"thread; power sampled every {z.power_interval_s * 1000:g} ms, trapezoid rule.")
    overhead = monitor_overhead(ctx)
    ctx.row({"label": "PowerMonitor overhead (10 Hz)", **overhead})
    if overhead.get("overhead_pct_median") is not None:
        ctx.measured["monitor_overhead_pct"] = overhead["overhead_pct_median"]
    ctx.note("Monitor overhead: the same fixed training loop of the reference CNN with and without a "
             "PowerMonitor(hz=10) whose subscriber reads every sample, alternating which runs first; "
             "the median of per-pair time ratios.")


def exp_ddp_scaling(ctx: Context) -> None:
    """Lesson 01: a real DistributedDataParallel run via torchrun, one worker per GPU."""
    from greenlab import ddp, recipes

    z = ctx.sizes
    torch = ctx.torch
    gpus = torch.cuda.device_count() if ctx.device == "cuda" else 1
    counts = [1] + ([2] if gpus >= 2 else [])
    n_train, n_test = z.fmnist
    model = {"name": "cnn", **recipes.REFERENCE_CNN, **({"width": 8} if ctx.dry_run else {})}
    data = ctx.dataset("fashion-mnist", n_train, n_test)
    for n in counts:
        if not ctx.enough_for(15 if not ctx.dry_run else 1):
            break
        res = ddp.run_ddp(n, data=data, model=model, per_worker_batch=z.ddp_per_worker_batch,
                          epochs=z.ddp_epochs, device=ctx.device, timeout_s=max(10.0, ctx.left() - 2),
                          label=f"{n} worker(s)")
        energy = res.train_energy or {}
        comps = energy.get("components") or {}
        gpu_j = comps.get("gpu", {}).get("joules") if isinstance(comps.get("gpu"), dict) else None
        ctx.row({"label": f"{n} worker(s)", "workers": n, "backend": res.backend, "device": res.device,
                 "global_batch": res.global_batch, "steps": res.steps, "samples": res.samples,
                 "train_seconds": res.train_seconds, "window_ok": res.train_seconds >= ctx.min_window_s,
                 "samples_per_second": res.samples_per_second, "wall_seconds": res.wall_seconds,
                 "train_joules_gpu": gpu_j if ctx.energy_ok else None,
                 "train_joules_all_components": res.train_joules,
                 "final_accuracy": res.final_accuracy, "energy_complete": res.energy_complete})
    if gpus < 2:
        ctx.note("This machine has one GPU: the one-worker DDP run is recorded (its overhead is "
                 "DDP's wrapper and the launch); scaling to more GPUs was not measured here.")
    ctx.note(f"greenlab.ddp.run_ddp via torchrun (NCCL on CUDA, gloo on the CPU); reference CNN, "
             f"{n_train} training images, {z.ddp_epochs} epoch(s), batch {z.ddp_per_worker_batch} per "
             "worker. train_joules_all_components also counts the CPU (a model estimate unless RAPL "
             "is readable); train_joules_gpu is the GPU's NVML figure.")


def _precision_experiment(ctx: Context, model_fn, ds, batch: int, what: str, targets: bool) -> None:
    from greenlab.models import flops

    precisions = _precisions(ctx)
    model_flops = flops(model_fn(), ds.input_shape, batch_size=1).forward
    repeats = _repeats(ctx, len(precisions), ctx.min_window_s * ctx.sizes.window_margin)
    rows = {}
    for precision in precisions:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        ctx.torch.manual_seed(0)
        loop = StepLoop(ctx, model_fn(), ds, batch, precision)
        label = {"fp32": "fp32 (PyTorch defaults)", "bf16": "bf16 autocast",
                 "fp16": "fp16 autocast + GradScaler"}[precision]
        row = throughput_row(ctx, label, loop, {"precision": precision, "batch_size": batch},
                             repeats, flops_per_sample=model_flops, profile=True, ds=ds)
        if precision == "fp16":
            row["includes"] = "GradScaler's per-step inf check (a device-to-host sync each step)"
        rows[precision] = ctx.row(row)
        del loop
        if ctx.device == "cuda":
            ctx.torch.cuda.empty_cache()
    base = rows.get("fp32", {})
    for row in rows.values():
        row["speedup_vs_fp32"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        jps, jps0 = row.get("joules_per_sample"), base.get("joules_per_sample")
        row["energy_saving_pct_vs_fp32"] = (100 * (1 - jps / jps0)) if (jps and jps0) else None
    ctx._save("running")
    if targets and "bf16" in rows and rows["bf16"].get("speedup_vs_fp32") is not None:
        ctx.measured["bf16_speedup"] = rows["bf16"]["speedup_vs_fp32"]
        if rows["bf16"].get("energy_saving_pct_vs_fp32") is not None:
            ctx.measured["bf16_energy_saving_pct"] = rows["bf16"]["energy_saving_pct_vs_fp32"]
    ctx.note(f"{what} ({_model_text(model_fn)}, {model_flops / 1e9:.3g} GFLOP forward per sample) on "
             f"{ds.describe()}; batch {batch}; SGD lr 0.05 momentum 0.9; device-resident batches. "
             "Per configuration: warm-up, a synchronised calibration of the step time, then "
             f"{repeats} window(s) of at least {ctx.min_window_s:.2g} s; medians with min/max. "
             "fp32 runs with PyTorch's default TF32 settings as found (cuDNN convolutions may use TF32). "
             "tflops_achieved counts 3x the forward FLOPs per sample (forward + backward). "
             "device_busy_fraction: GPU kernel time over wall time in a 3-step torch.profiler trace. "
             "Test accuracy is measured after the windows. channels_last on CUDA.")


def exp_mixed_precision(ctx: Context) -> None:
    """Lesson 02: fp32 (defaults), bf16, fp16 on the reference CNN at a compute-bound size."""
    ds = ctx.dataset("fashion-mnist", *ctx.sizes.fmnist)
    _precision_experiment(ctx, _cnn_fn(ctx), ds, ctx.sizes.cnn_batch, "Reference CNN", targets=True)


def exp_mixed_precision_resnet(ctx: Context) -> None:
    """Lesson 02: the same comparison on a ResNet-20 (CIFAR-shaped images)."""
    ds = ctx.dataset("cifar10", *ctx.sizes.cifar)
    _precision_experiment(ctx, _resnet_fn(ctx), ds, ctx.sizes.resnet_batch, "ResNet", targets=False)


def exp_gradient_accumulation(ctx: Context) -> None:
    """Lesson 03: accumulation (micro x k) against one true batch of the same size, and the
    small batch alone; time, energy and the memory each adds."""
    z = ctx.sizes
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    micro, k = z.accum
    configs = [(f"true batch {micro * k}", micro * k, 1), (f"accumulated {micro} x {k}", micro, k),
               (f"small batch {micro}", micro, 1)]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    for label, bs, acc in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        ctx.torch.manual_seed(0)
        loop = StepLoop(ctx, _cnn_fn(ctx)(), ds, bs, "fp32", accum=acc)
        ctx.row(throughput_row(ctx, label, loop, {"batch_size": bs, "accum_steps": acc,
                                                  "effective_batch": bs * acc}, repeats))
        del loop
        if ctx.device == "cuda":
            ctx.torch.cuda.empty_cache()
    ctx.note(f"Reference CNN ({_model_text(_cnn_fn(ctx))}) on {ds.describe()}; fp32 with PyTorch's "
             "defaults; each micro-batch loss divided by the accumulation steps. memory_increase_mib "
             "is the peak allocated above what was resident (model, optimizer state, data) during the "
             "window: activations and gradients, which accumulation shrinks.")


def exp_batch_sweep(ctx: Context) -> None:
    """Lesson 04: time and energy to a target accuracy across batch sizes (gl.train)."""
    from greenlab.train import TrainConfig, train

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    base_lr, base_bs = 0.05, 128
    for bs in z.sweep_batches:
        if not ctx.enough_for(ctx.min_window_s * 1.6 + 3):
            break
        lr = base_lr * math.sqrt(bs / base_bs)
        probe = StepLoop(ctx, _cnn_fn(ctx, lesson=True)(), ds, bs, precision, lr=lr)
        steps, per_step = ctx.calibrate(probe.run)
        del probe
        cfg = TrainConfig(precision=precision, batch_size=bs, lr=lr, epochs=10**5, max_steps=steps,
                          eval_every=max(1, steps // z.sweep_evals), target_accuracy=z.sweep_target,
                          stop_at_target=False, seed=0, channels_last=ctx.device == "cuda",
                          label=f"batch {bs}")
        torch.manual_seed(0)
        stop = threading.Event()
        timer = threading.Timer(max(1.0, ctx.left() - 1), stop.set)
        timer.start()
        try:
            res = train(_cnn_fn(ctx, lesson=True)(), ds, cfg, stop_event=stop, device=ctx.device, log=False,
                        save=False, sources=ctx.device_sources)
        finally:
            timer.cancel()
        dev_j = _device_joules(res, ctx)
        ctx.row({"label": f"batch {bs}", "batch_size": bs, "lr": lr, "precision": precision,
                 "status": res.status, "steps": res.steps, "samples": res.samples,
                 "seconds": res.seconds, "window_ok": res.seconds >= ctx.min_window_s,
                 "train_seconds": res.train_seconds, "samples_per_second": res.samples_per_second,
                 "joules": dev_j, "final_accuracy": res.final_accuracy,
                 "reached_target": res.seconds_to_target is not None,
                 "seconds_to_target": res.seconds_to_target,
                 "joules_to_target": res.joules_to_target if ctx.energy_ok else None,
                 "evaluations": len(res.history),
                 "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    ctx.note(f"Lesson 04's reference CNN ({_model_text(_cnn_fn(ctx, lesson=True))}) with gl.train on "
             f"{ds.describe()}; {precision}; lr = {base_lr} x sqrt(batch / {base_bs}); target accuracy "
             f"{z.sweep_target:g} on the validation split, checked {z.sweep_evals} times per run. Each "
             f"run's length is calibrated to at least {ctx.min_window_s:.2g} s and does not stop at the "
             "target, so its energy window is long enough; time and energy to target are read at the "
             "first evaluation that reached it (evaluations run inside the window, as in the lesson; "
             "joules_to_target then has the counter's resolution, one update period).")


def exp_architecture_search(ctx: Context) -> None:
    """Lesson 05: candidate architectures' FLOPs against measured inference time and energy."""
    from greenlab import models
    from greenlab.models import count_params, flops

    z = ctx.sizes
    torch = ctx.torch
    shape = (1, 28, 28)
    x = torch.randn((z.infer_batch, *shape), device=ctx.device)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    for family, opts in z.arch_candidates:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 1):
            break
        kw = dict(opts)
        if family == "mlp":
            kw["input_shape"] = shape
        net = models.build(family, **kw).to(ctx.device).eval()
        fwd = flops(net, shape, batch_size=1).forward
        label = family + " " + ", ".join(f"{k}={v}" for k, v in opts.items())
        row = _inference_row(ctx, label, net, x, precision)
        row.update({"family": family, "params": count_params(net), "gflop_forward_per_sample": fwd / 1e9,
                    "joules_per_gflop": (row["joules_per_sample"] / (fwd / 1e9))
                    if row.get("joules_per_sample") and fwd else None})
        ctx.row(row)
    ctx.note(f"Inference on random 28x28 inputs, batch {z.infer_batch}, {precision} autocast, "
             "inference_mode; one window per candidate of at least the shortest window after a "
             "warm-up and a calibration. FLOPs from gl.flops (forward, per sample).")


def _inference_row(ctx: Context, label: str, net, x, precision: str) -> dict:
    torch = ctx.torch
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32

    def run(n):
        with torch.inference_mode(), torch.autocast(ctx.device, dtype=dtype, enabled=precision != "fp32"):
            for _ in range(n):
                net(x)

    steps, per_step = ctx.calibrate(run)
    w = ctx.window(label, lambda: run(steps))
    samples = steps * x.shape[0]
    return {"label": label, "precision": precision, "batches": steps, "window_seconds": w["seconds"],
            "window_ok": w["window_ok"], **ctx.per_sample(w, samples),
            "memory_increase_mib": w["memory_increase_mib"],
            "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"}


def exp_carbon(ctx: Context) -> None:
    """Lesson 06: one measured training window turned into CO2e for several regions and PUEs."""
    from greenlab import carbon

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    loop = StepLoop(ctx, _cnn_fn(ctx)(), ds, z.cnn_batch, precision)
    steps, _ = ctx.calibrate(loop.run)
    w = ctx.window("carbon", lambda: loop.run(steps))
    joules = w["joules"]
    ctx.row({"label": "training window", "precision": precision, "steps": steps,
             "window_seconds": w["seconds"], "window_ok": w["window_ok"], "joules": joules,
             **ctx.per_sample(w, steps * loop.samples_per_step),
             "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    samples = steps * loop.samples_per_step
    for region in ("NOR", "FRA", "GBR", "USA", "DEU", "IND", "ZAF"):
        try:
            r = carbon.intensity(region)
        except (KeyError, ValueError):
            continue
        for pue in sorted(ref.pue for ref in carbon.PUE_REFERENCES):
            ctx.row({"label": f"{region} PUE {pue:g}", "region": region, "pue": pue,
                     "g_co2e_per_kwh": r.g_per_kwh, "intensity_year": r.year,
                     "g_co2e": carbon.co2e_g(joules, region=region, pue=pue) if joules is not None else None,
                     "g_co2e_per_million_samples": (carbon.co2e_g(joules, region=region, pue=pue) * 1e6
                                                    / samples)
                     if joules is not None else None})
    ctx.note("CO2e = measured GPU energy x PUE x the region's grid intensity from data/carbon_intensity.csv "
             "(gl.carbon, cited there); only the energy is measured. PUEs: "
             + "; ".join(f"{ref.pue:g} {ref.name} ({ref.year})" for ref in carbon.PUE_REFERENCES) + ".")


def exp_compression(ctx: Context) -> None:
    """Lesson 07: dense against pruned models, inference time and energy per sample."""
    import copy

    from greenlab import compress
    from greenlab.models import count_params

    z = ctx.sizes
    torch = ctx.torch
    shape = (1, 28, 28)
    x = torch.randn((z.infer_batch, *shape), device=ctx.device)
    dense = _cnn_fn(ctx)().to(ctx.device).eval()
    variants = {"dense": dense}
    variants["unstructured 50%"] = compress.prune_unstructured(copy.deepcopy(dense), 0.5)
    variants["channels 50%"] = compress.prune_channels(copy.deepcopy(dense).cpu(), 0.5).to(ctx.device).eval()
    base = None
    for label, net in variants.items():
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 1):
            break
        row = _inference_row(ctx, label, net, x, "fp32")
        row.update({"params": count_params(net), "sparsity": compress.sparsity(net),
                    "model_size_mib": compress.model_size_bytes(net) / 2**20})
        base = base or row
        row["speedup_vs_dense"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        ctx.row(row)
    ctx.row({"label": "int8 dynamic quantisation", "status": "not run on the GPU: torch.ao dynamic "
             "quantisation has CPU kernels only (GPU int8 goes through other tools)"})
    ctx.note(f"Reference CNN ({_model_text(_cnn_fn(ctx))}), fp32 inference (PyTorch defaults), batch "
             f"{z.infer_batch}; gl.compress.prune_unstructured (zeros kept in dense tensors) and "
             "prune_channels (a smaller dense model).")


def exp_data_pipeline(ctx: Context) -> None:
    """Lesson 08: the device-resident loader against DataLoaders (workers, pinned memory)."""
    from greenlab.data import make_dataloader

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    w0, w1 = z.loader_workers
    configs = [("device loader", None), (f"DataLoader workers={w0}", dict(num_workers=w0)),
               (f"DataLoader workers={w0} pinned", dict(num_workers=w0, pin_memory=True)),
               (f"DataLoader workers={w1} pinned", dict(num_workers=w1, pin_memory=True))]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    base = None
    for label, opts in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 3):
            break
        loader = None
        if opts is not None:
            loader = make_dataloader(ds, z.loader_batch, **opts, seed=0)
        torch.manual_seed(0)
        loop = StepLoop(ctx, _cnn_fn(ctx, lesson=True)(), ds, z.loader_batch, precision, loader=loader)
        row = throughput_row(ctx, label, loop, {"batch_size": z.loader_batch, **(opts or {"loader": "device"})},
                             repeats)
        base = base or row
        row["speedup_vs_device_loader"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        ctx.row(row)
        del loop, loader
    ctx.note(f"Lesson 08's reference CNN on {ds.describe()}; {precision}; batch {z.loader_batch}. Each "
             "loader is greenlab.data.make_dataloader (persistent_workers off, as gl.train uses it), so "
             "worker start-up at each new pass over the data falls inside the windows, as in a lesson. "
             f"CPU: {os.cpu_count()} logical cores.")


def exp_capstone(ctx: Context) -> None:
    """Lesson 09: the capstone's naive and green recipes (greenlab/recipes.py), to the same target."""
    from dataclasses import replace

    from greenlab import recipes
    from greenlab.train import train

    z = ctx.sizes
    torch = ctx.torch
    plan = []
    for recipe in (recipes.naive_recipe, recipes.green_recipe):
        model_fn, cfg, spec = recipe(device=ctx.device)
        if z.capstone_scale != 1.0:
            spec = {**spec, "n_train": max(64, int(spec["n_train"] * z.capstone_scale)),
                    "n_test": max(64, int(spec["n_test"] * z.capstone_scale))}
            cfg = replace(cfg, max_steps=z.max_steps, **_eval_every_steps(cfg, 2))
            model_fn = _cnn_fn(ctx, lesson=True)
        if z.capstone_target is not None:
            cfg = replace(cfg, target_accuracy=z.capstone_target)
        plan.append((model_fn, cfg, spec))
    rows = []
    for i, (model_fn, cfg, spec) in enumerate(plan):
        share = ctx.left() / (len(plan) - i) - 1
        if share < 3:
            ctx.ran_out = True
            break
        ds = ctx.dataset(spec["name"], spec["n_train"], spec["n_test"])
        stop = threading.Event()
        timer = threading.Timer(share, stop.set)
        timer.start()
        torch.manual_seed(cfg.seed)
        try:
            res = train(model_fn(), ds, cfg, stop_event=stop, device=ctx.device, log=False, save=False,
                        sources=ctx.device_sources)
        finally:
            timer.cancel()
        rows.append(ctx.row({
            "label": cfg.label, "status": res.status, "precision": cfg.precision, "batch_size": cfg.batch_size,
            "loader": cfg.loader, "epochs_max": cfg.epochs, "target_accuracy": cfg.target_accuracy,
            "stop_at_target": cfg.stop_at_target, "seconds": res.seconds,
            "window_ok": res.seconds >= ctx.min_window_s, "joules": _device_joules(res, ctx),
            "final_accuracy": res.final_accuracy, "reached_target": res.seconds_to_target is not None,
            "seconds_to_target": res.seconds_to_target,
            "joules_to_target": res.joules_to_target if ctx.energy_ok else None,
            "to_target_window_ok": (res.seconds_to_target or 0) >= ctx.min_window_s
            if res.seconds_to_target is not None else None,
            "dataset_source": ds.source, "time_share_s": share,
            "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"}))
    if len(rows) == 2:
        for key in ("joules_to_target", "seconds_to_target", "joules"):
            rows[1][f"{key}_ratio_green_over_naive"] = _ratio(rows[1].get(key), rows[0].get(key))
        ctx._save("running")
    ctx.note("Recipes from greenlab/recipes.py (naive_recipe, green_recipe) trained with gl.train: the "
             "naive one runs its fixed epochs and records when it passed the target; the green one "
             "stops there. A run stopped by its time share has status 'stopped'. One repeat each. "
             "to_target_window_ok says whether the time to target was at least the shortest window.")


def exp_language_model(ctx: Context) -> None:
    """Lesson 10: a byte-level transformer's training throughput in tokens per second and
    joules per token: fp32 (PyTorch defaults), bf16 autocast, bf16 with activation checkpointing,
    and torch.compile (its first step, the compiled step and the break-even against eager)."""
    from greenlab import lm

    z = ctx.sizes
    torch = ctx.torch
    corpus = lm.load_corpus()
    seq = z.lm["max_seq_len"]
    probe = lm.TinyGPT(**z.lm).to(ctx.device)
    step_flops = lm.train_step_flops(probe, seq, batch_size=1)["total"]
    params = sum(p.numel() for p in probe.parameters())
    del probe
    configs = [("fp32 (PyTorch defaults)", "fp32", False), ("bf16 autocast", "bf16", False),
               ("bf16 + activation checkpointing", "bf16", True)]
    if ctx.device == "cuda" and not torch.cuda.is_bf16_supported():
        configs = configs[:1]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    rows = {}
    for label, precision, checkpoint in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        torch.manual_seed(0)
        model = lm.TinyGPT(**{**z.lm, "checkpoint": checkpoint}).to(ctx.device)
        loop = _lm_training_loop(ctx, model, corpus, precision)
        row = throughput_row(ctx, label, loop, {"precision": precision, "checkpointing": checkpoint,
                                                "batch_windows": z.lm_batch, "seq_len": seq}, repeats,
                             flops_per_sample=step_flops / seq / 3, profile=not checkpoint)
        row["tokens_per_second"] = row.get("samples_per_second")
        row["joules_per_token"] = row.get("joules_per_sample")
        rows[label] = ctx.row(row)
        del model, loop
        if ctx.device == "cuda":
            torch.cuda.empty_cache()
    eager_label, eager_precision, _ = configs[min(1, len(configs) - 1)]  # bf16 where the GPU has it
    if eager_label in rows and ctx.enough_for(ctx.min_window_s * (repeats + 1) + 20):
        rows["torch.compile"] = ctx.row(_lm_compile_row(ctx, lm, corpus, eager_precision, rows[eager_label],
                                                        repeats, step_flops / seq / 3))
    base = rows.get(configs[0][0], {})
    for row in rows.values():
        row["speedup_vs_fp32"] = _ratio(row.get("tokens_per_second"), base.get("tokens_per_second"))
    ctx._save("running")
    ctx.note(f"greenlab.lm.TinyGPT {z.lm} ({params:,} parameters) on {corpus.describe()}; {z.lm_batch} "
             f"random windows of {seq} bytes per step (a token is a byte), fused AdamW on CUDA. "
             f"{step_flops / seq / 1e6:.4g} MFLOP per token per training step (torch.utils.flop_counter, "
             "forward and backward); tflops_achieved uses it. Per configuration: warm-up, a synchronised "
             f"calibration, then {repeats} window(s) of at least {ctx.min_window_s:.2g} s. fp32 runs with "
             "PyTorch's default TF32 settings as found.")


def _lm_training_loop(ctx: Context, model, corpus, precision: str) -> SimpleNamespace:
    """``run(n)``: n AdamW steps of ``model`` on 8 fixed batches (fused AdamW on CUDA)."""
    from greenlab import lm

    torch, z = ctx.torch, ctx.sizes
    seq = z.lm["max_seq_len"]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, **({"fused": True} if ctx.device == "cuda" else {}))
    gen = torch.Generator().manual_seed(0)
    batches = [lm.batch(corpus.train, seq, z.lm_batch, generator=gen, device=ctx.device) for _ in range(8)]
    state = {"i": 0}

    def run(n):
        for _ in range(n):
            x, y = batches[state["i"] % len(batches)]
            state["i"] += 1
            lm.train_step(model, opt, x, y, precision)

    return SimpleNamespace(run=run, samples_per_step=z.lm_batch * seq)


def _lm_compile_row(ctx: Context, lm, corpus, precision: str, eager: dict, repeats: int,
                    flops_per_sample: float) -> dict:
    """``torch.compile`` on the lesson-10 model: the first compiled step (tracing and code
    generation included) in its own window, then calibrated windows of compiled steps; the compile
    cost is the first step minus a compiled step, the break-even is cost / saving per step against
    the eager row of the same precision (None where the compiled step is not cheaper)."""
    torch, z = ctx.torch, ctx.sizes
    torch.manual_seed(0)
    model = torch.compile(lm.TinyGPT(**z.lm).to(ctx.device))
    loop = _lm_training_loop(ctx, model, corpus, precision)
    run_one = loop.run
    first = ctx.window("torch.compile: first step", lambda: run_one(1))
    row = throughput_row(ctx, f"{precision} + torch.compile", loop,
                         {"precision": precision, "checkpointing": False, "compiled": True,
                          "batch_windows": z.lm_batch, "seq_len": z.lm["max_seq_len"]},
                         repeats, flops_per_sample=flops_per_sample)
    row["first_step_seconds"] = first["seconds"]
    row["first_step_joules"] = first["joules"]
    row["tokens_per_second"] = row.get("samples_per_second")
    row["joules_per_token"] = row.get("joules_per_sample")
    tokens = loop.samples_per_step
    for metric, per_token, first_value in (("seconds", lambda r: 1 / r["samples_per_second"], first["seconds"]),
                                           ("joules", lambda r: r["joules_per_sample"], first["joules"])):
        key = "samples_per_second" if metric == "seconds" else "joules_per_sample"
        if row.get(key) is None or eager.get(key) is None or first_value is None:
            row[f"compile_{metric}"] = row[f"break_even_steps_{metric}"] = None
            continue
        compiled_step, eager_step = per_token(row) * tokens, per_token(eager) * tokens
        cost = max(0.0, first_value - compiled_step)
        steps = lm.compile_break_even_steps(cost, eager_step, compiled_step)
        row[f"compile_{metric}"] = cost
        row[f"break_even_steps_{metric}"] = steps if steps != float("inf") else None
    ctx.note(f"torch.compile (default mode) of the same model, {precision}: the first compiled step is "
             "measured in its own window (tracing and kernel generation included; PyTorch's on-disk "
             "compile cache as found); compile_* = first step minus one compiled step; "
             f"break_even_steps_* against the '{eager['label']}' row; None where the compiled step is "
             "not cheaper.")
    del model, loop
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    return row


def exp_language_model_serving(ctx: Context) -> None:
    """Lesson 11: joules per generated token for greedy generation with and without a KV cache,
    at batch 1 and at a larger batch, and with int8 weights (torchao; a row marked not measured
    where torchao is not installed) (a lesson-sized model, untrained: generation cost does not
    depend on what the weights say)."""
    from greenlab import lm, lm_serve, optional

    z = ctx.sizes
    torch = ctx.torch
    seq = z.lm["max_seq_len"]
    prompt_len = max(1, seq // 4)
    new_tokens = seq - prompt_len
    torch.manual_seed(0)
    model = lm.TinyGPT(**z.lm).to(ctx.device).eval()
    int8_label = f"int8 weights, KV cache, batch {z.lm_batch}"
    int8_missing = optional.missing("torchao")
    int8 = None
    if not int8_missing:
        int8 = lm_serve.quantize_weights_int8(copy.deepcopy(model).cpu()).to(ctx.device).eval()
    configs = [("KV cache, batch 1", model, True, 1), ("no KV cache, batch 1", model, False, 1),
               (f"KV cache, batch {z.lm_batch}", model, True, z.lm_batch)]
    if int8 is None:
        ctx.row({"label": int8_label, "status": f"not measured: {int8_missing}"})
    else:
        configs.append((int8_label, int8, True, z.lm_batch))
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    for label, net, cache, batch in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        prompts = torch.randint(0, 256, (batch, prompt_len), generator=torch.Generator().manual_seed(0))

        def run(n, net=net, prompts=prompts, cache=cache):
            for _ in range(n):
                lm_serve.generate(net, prompts, new_tokens, kv_cache=cache)

        loop = SimpleNamespace(run=run, samples_per_step=batch * new_tokens)
        row = throughput_row(ctx, label, loop, {"kv_cache": cache, "batch": batch, "prompt_len": prompt_len,
                                                "new_tokens": new_tokens,
                                                "weights": "int8" if net is int8 else "fp32"}, repeats)
        row["tokens_per_second"] = row.get("samples_per_second")
        row["joules_per_generated_token"] = row.get("joules_per_sample")
        ctx.row(row)
    ctx._save("running")
    ctx.note(f"greenlab.lm.TinyGPT {z.lm}, greedy generation of {new_tokens} bytes after a {prompt_len}-byte "
             "prompt (greenlab.lm_serve.generate); a token is a byte. Per configuration: warm-up, a "
             f"synchronised calibration, then {repeats} window(s) of at least {ctx.min_window_s:.2g} s.")


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


def monitor_overhead(ctx: Context) -> dict:
    """PowerMonitor(hz=10) overhead on a fixed training loop of the reference CNN."""
    from greenlab.energy import PowerMonitor

    z = ctx.sizes
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and ctx.torch.cuda.is_bf16_supported() else "fp32"
    loop = StepLoop(ctx, _cnn_fn(ctx, lesson=True)(), ds, z.loader_batch, precision)
    steps_per_window, per_step = ctx.calibrate(loop.run)
    n = max(z.min_steps, min(z.max_steps, math.ceil(z.monitor_run_s / per_step)))
    rates = []

    def timed():
        ctx.sync()
        t0 = time.perf_counter()
        loop.run(n)
        ctx.sync()
        return time.perf_counter() - t0

    def with_monitor():
        mon = PowerMonitor(hz=10, window_s=120, sources=ctx.sources)
        seen = []
        mon.subscribe(lambda s: seen.append(s.total_watts))
        with mon:
            dt = timed()
        rates.append(len(seen) / dt if dt > 0 else 0.0)
        return dt

    pairs = max(1, min(z.monitor_pairs, int(ctx.left() / (2.3 * n * per_step + 0.5))))
    result = paired_overhead(timed, with_monitor, pairs)
    result.update({"steps_per_run": n, "batch_size": z.loader_batch, "precision": precision,
                   "monitor_hz_achieved_median": statistics.median(rates) if rates else None})
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
                a @ b
            if self.device == "cuda":
                torch.cuda.synchronize()
            self.products += 8

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


# --- GPU state (read-only) ------------------------------------------------------------------

def gpu_state(dry_run: bool) -> dict:
    """The GPU's state and its energy counter's update period (idle poll), NVML queries only."""
    from greenlab.energy import nvml as _nvml

    if dry_run:
        return {"nvml": "not used (dry-run on the CPU)"}
    lib = _nvml.get_nvml()
    if not lib.available:
        return {"nvml": lib.reason}
    gpus = lib.visible_gpus()
    if not gpus or gpus[0].nvml_index is None:
        return {"nvml": "no NVML device for CUDA device 0 (MIG or not visible)"}
    handle = lib.handle(gpus[0].nvml_index)
    state = read_gpu_state(lib, handle)
    try:
        period = counter_update_period(lambda: lib.energy_joules(handle), 1.0)
        state["counter_update_period_ms"] = period["interval_ms_median"]
    except Exception as exc:
        state["counter_update_period_ms"] = None
        state["counter_update_period_problem"] = f"{type(exc).__name__}: {exc}"
    return state


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


def _nvml_handle(lib, torch):
    match = [g for g in lib.visible_gpus() if g.cuda_index == torch.cuda.current_device()]
    if not match or match[0].nvml_index is None:
        return None
    return lib.handle(match[0].nvml_index)


# --- lessons, pytest, unpacking -------------------------------------------------------------

def select_lessons(spec: str, dry_run: bool) -> list:
    """Lessons for ``--lessons``: "all", "none", instructor lesson numbers "00,03" or notebook
    paths; the dry run's default is lesson 03 alone (a short one), the GPU run's every lesson."""
    from greenlab.course import instructor_notebooks

    found = instructor_notebooks(REPO_ROOT / "lessons")
    if spec in (None, ""):
        spec = "03" if dry_run else "all"
    if spec == "none":
        return []
    if spec == "all":
        return found
    chosen, missing = [], []
    for want in (w.strip() for w in spec.split(",") if w.strip()):
        if want.endswith(".ipynb"):  # a notebook path
            (chosen if Path(want).is_file() else missing).append(Path(want).resolve())
            continue
        match = [p for p in found if p.stem[:2] == want or p.stem == want]
        chosen.extend(match) if match else missing.append(want)
    if missing:
        raise SystemExit(f"--lessons: no lesson {[str(m) for m in missing]}; have {[p.stem for p in found]}")
    return chosen


def gpu_test_files() -> list:
    """Test files that hold ``gpu``-marked tests (pytest then runs only those)."""
    import re

    mark = re.compile(r"^\s*(@|pytestmark\s*=\s*\[?\s*)?pytest\.mark\.gpu\b", re.MULTILINE)
    return sorted(p for p in (REPO_ROOT / "tests").glob("test_*.py")
                  if mark.search(p.read_text(encoding="utf-8", errors="replace")))


def unpack(bundle_path, into, allow_dry_run: bool = False) -> int:
    """Write each record of a bundle as ``<gpu-slug>_<date>_<experiment>.json`` in ``into``,
    after checking it against the reference schema. Dry-run records are refused unless allowed."""
    from greenlab import reference

    bundle = _read_json(Path(bundle_path))
    if not bundle or bundle.get("bundle_version") != BUNDLE_VERSION or not isinstance(bundle.get("records"), list):
        print(f"error: {bundle_path} is not a gpu_suite bundle (version {BUNDLE_VERSION})", file=sys.stderr)
        return 2
    folder = Path(into)
    records = bundle["records"]
    dry = [r.get("experiment") for r in records if r.get("gpu") == DRY_RUN_GPU]
    if dry and not allow_dry_run:
        print(f"error: {bundle_path} holds dry-run records ({DRY_RUN_MARK}); they are not references. "
              "Nothing was written (--allow-dry-run writes them anyway, e.g. for a test).", file=sys.stderr)
        return 2
    problems = []
    for record in records:
        try:
            reference.from_dict(record, f"{bundle_path}: {record.get('experiment')}")
        except reference.ReferenceRunError as exc:
            problems.append(str(exc))
    if problems:
        print("error: records that do not match the reference schema; nothing was written:\n"
              + "\n".join(problems), file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        path = folder / f"{reference.gpu_slug(record['gpu'])}_{record['date']}_{record['experiment']}.json"
        write_json(path, record)
        reference.load_file(path)
        print(f"wrote {path}")
    return 0


# --- helpers --------------------------------------------------------------------------------

def preflight() -> dict:
    """Versions of the packages the suite can use (or "missing"), without importing them."""
    from importlib import metadata

    out = {}
    for name, module in (("torch", "torch"), ("numpy", "numpy"), ("nvidia-ml-py", "pynvml"),
                         ("matplotlib", "matplotlib"), ("psutil", "psutil"), ("tqdm", "tqdm"),
                         ("pytest", "pytest"), ("torchvision", "torchvision"), ("IPython", "IPython"),
                         ("ipywidgets", "ipywidgets"), ("bitsandbytes", "bitsandbytes"), ("torchao", "torchao")):
        if importlib.util.find_spec(module) is None:
            out[name] = "missing"
            continue
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "present"
    return out


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
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_finite(record), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="gpu_suite.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", help="folder for gpu_suite_records.json and gpu_suite_log.txt (created)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"total wall-time budget in seconds (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--only", default="", help=f"comma-separated experiments: {', '.join(EXPERIMENTS)}")
    p.add_argument("--lessons", default="", help="instructor lessons to run headless: all, none or "
                   "numbers such as 00,03 (default: all; the dry run: 03)")
    p.add_argument("--lesson-jobs", type=int, default=None,
                   help="lessons run at the same time (default 3 on the GPU, 1 in the dry run)")
    p.add_argument("--dry-run", action="store_true",
                   help="run everything on the CPU with tiny sizes (not a reference)")
    p.add_argument("--unpack", help="a gpu_suite_records.json to write out as reference-run files")
    p.add_argument("--into", default=str(REPO_ROOT / "data" / "reference_runs"),
                   help="folder for --unpack (default data/reference_runs)")
    p.add_argument("--allow-dry-run", action="store_true", help="let --unpack write dry-run records")
    p.add_argument("--hang", default="", help="rehearse the watchdog: this experiment hangs after one row")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--cap-s", default="60", help=argparse.SUPPRESS)
    p.add_argument("--min-window-s", type=float, default=MIN_WINDOW_S, help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    args.raw = raw
    if args.unpack:
        return args
    if args.worker:
        args.worker = args.worker.split(",")
        args.cap_s = [float(c) for c in str(args.cap_s).split(",")]
        if [w for w in args.worker if w not in EXPERIMENTS] or len(args.cap_s) != len(args.worker):
            p.error(f"--worker takes known experiments with one --cap-s each, got {args.worker} {args.cap_s}")
    if not args.out:
        p.error("--out is required (a folder for the records and the log)")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in EXPERIMENTS]
    if unknown:
        p.error(f"unknown experiment(s) {unknown}; allowed: {', '.join(EXPERIMENTS)}")
    args.only = set(only)
    if args.lesson_jobs is None:
        args.lesson_jobs = 1 if args.dry_run else 3
    if not 1 <= args.lesson_jobs <= 8:
        p.error(f"--lesson-jobs must be 1 to 8, got {args.lesson_jobs}")
    if not (math.isfinite(args.budget_s) and 60 <= args.budget_s <= 3600):
        p.error(f"--budget-s must be between 60 and 3600 seconds, got {args.budget_s}")
    return args


def _child_env() -> dict:
    env = dict(os.environ)
    # datasets come from the cache or the announced generated stand-in: no download attempt (and
    # its network timeouts) inside a timed share, unless the caller asked for one
    env.setdefault("GREENLAB_DOWNLOAD", "0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _kill_group(proc) -> None:
    from greenlab.processes import kill_group

    kill_group(proc)


def _cnn_fn(ctx: Context, lesson: bool = False):
    """The reference CNN: the lessons' width (``lesson=True``) or the suite's compute-bound width."""
    from greenlab import models, recipes

    opts = {**recipes.REFERENCE_CNN, **({} if lesson else ctx.sizes.cnn)}
    if ctx.dry_run:
        opts.update(ctx.sizes.cnn)
    return lambda: models.build("cnn", in_channels=1, **opts)


def _resnet_fn(ctx: Context):
    from greenlab import models, recipes

    opts = {**recipes.REFERENCE_RESNET, **ctx.sizes.resnet}
    return lambda: models.build("resnet", in_channels=3, **opts)


def _eval_every_steps(cfg, steps: int) -> dict:
    """TrainConfig changes for an evaluation every ``steps`` optimizer steps (clearing a
    samples-based schedule where the config has one)."""
    from dataclasses import fields

    names = {f.name for f in fields(cfg)}
    change = {"eval_every": steps}
    if "eval_every_samples" in names:
        change["eval_every_samples"] = None
    return change


def _has_conv(model) -> bool:
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in model.modules())


def _device_joules(res, ctx: Context):
    if not ctx.energy_ok:
        return None
    comp = getattr(res.energy, "components", {}).get(ctx.component)
    return comp.joules if comp is not None else None


def _units_for(rows) -> dict:
    units = {"seconds": "s", "train_seconds": "s", "window_seconds": "s", "seconds_to_target": "s",
             "wall_seconds": "s", "joules": "J", "joules_to_target": "J", "joules_per_sample": "J",
             "joules_per_sample_min": "J", "joules_per_sample_max": "J", "train_joules_gpu": "J",
             "train_joules_all_components": "J", "watts": "W", "mean_watts": "W", "counter_joules": "J",
             "integrated_joules": "J", "memory_increase_mib": "MiB", "samples_per_second": "1/s",
             "difference_pct": "%", "overhead_pct_median": "%", "interval_ms_median": "ms",
             "interval_ms_p90": "ms", "read_microseconds": "us", "calibrated_step_ms": "ms",
             "energy_saving_pct_vs_fp32": "%", "tflops_achieved": "TFLOP/s", "g_co2e": "g",
             "g_co2e_per_million_samples": "g", "g_co2e_per_kwh": "g/kWh", "model_size_mib": "MiB",
             "joules_per_gflop": "J/GFLOP", "gflop_forward_per_sample": "GFLOP",
             "profile_wall_s": "s", "profile_cpu_op_s": "s", "profile_device_kernel_s": "s"}
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


if __name__ == "__main__":
    sys.exit(main())
