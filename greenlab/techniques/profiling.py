"""Where the time goes, and how to watch it (lesson 07).

- ``profile_steps``: a few training steps under ``torch.profiler``; the top operators as rows,
  and a Chrome trace (open in chrome://tracing or https://ui.perfetto.dev).
- ``time_split``: wall-clock seconds spent waiting for the data loader versus computing the
  step, from timers around each; on a GPU also its utilisation from NVML.
- ``to_prometheus`` / ``to_csv``: export ``PowerMonitor`` samples in the Prometheus text
  exposition format (version 0.0.4) or as a CSV file.
- ``save_checkpoint`` / ``load_checkpoint`` / ``CheckpointCallback``: crash-safe checkpoints
  (written to a temporary file, flushed to disk, then renamed over the old one); the callback
  saves the whole training state, for ``gl.train(..., resume_from=path)``.
"""

from __future__ import annotations

import csv
import io
import math
import os  # noqa: F401  (tests patch profiling.os)
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from greenlab.training.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CheckpointCallback,
    check_optimizer_state,
    load_checkpoint,
    save_checkpoint,
)
from greenlab.base.storage import atomic_write_bytes, clean_stale_tmp  # noqa: F401
from greenlab.base.units import plain_number
from greenlab.session.devices import synchronize
from greenlab.energy.nvml import get_nvml
from greenlab.session import config as gl_config
from greenlab.training.data import DeviceLoader, make_dataloader
from greenlab.training.loop import TrainConfig
from greenlab.training.precision import dtype as precision_dtype


# --- profiling ------------------------------------------------------------------------------

@dataclass
class ProfileReport:
    """Top operators of a profiled run. ``rows``: dicts with name, calls, self_cpu_ms,
    cpu_total_ms, self_device_ms, device_total_ms, self_percent (share of all self time on the
    sorted-by clock), sorted by ``sort_by``. Times are totals over ``steps`` steps, milliseconds."""

    rows: list
    steps: int
    device: str
    sort_by: str
    profiler: object = field(repr=False, default=None)

    def table(self, limit: int = 15) -> str:
        """A plain-text table of the top ``limit`` operators."""
        header = f"{'operator':<44} {'calls':>6} {'self CPU ms':>12} {'self device ms':>15} {'self %':>7}"
        lines = [header, "-" * len(header)]
        for r in self.rows[:limit]:
            lines.append(f"{r['name'][:44]:<44} {r['calls']:>6} {r['self_cpu_ms']:>12.2f} "
                         f"{r['self_device_ms']:>15.2f} {r['self_percent']:>6.1f}%")
        lines.append(f"({self.steps} training steps on {self.device}, sorted by {self.sort_by}; "
                     "source: torch.profiler)")
        return "\n".join(lines)

    def export_chrome_trace(self, path) -> Path:
        """Write the trace as Chrome trace-event JSON; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.profiler.export_chrome_trace(str(path))
        return path


def profile_steps(model, data, config=None, steps: int = 5, warmup: int = 2, device=None,
                  sort_by: str | None = None) -> ProfileReport:
    """Profile ``steps`` training steps (after ``warmup`` unprofiled ones) of ``model``.

    ``data``: a greenlab ``Dataset`` (fed as ``config.loader`` says) or any iterable of (x, y)
    batches such as a ``DataLoader``. ``config``: a ``TrainConfig`` (batch size, lr, momentum,
    precision, loader settings) or None for its defaults. ``sort_by``: "self_cpu" or
    "self_device" (default: self_device on CUDA, else self_cpu). Each step is labelled in the
    trace as ``greenlab.training.data`` (waiting for the batch) and ``greenlab.step`` (forward, backward,
    optimizer). The model is trained for real (warmup + steps optimizer steps).
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    _check_count("steps", steps, 1)
    _check_count("warmup", warmup, 0)
    step, batches, dev = _stepper(model, data, config, device)
    if sort_by is None:
        sort_by = "self_device" if dev.type == "cuda" else "self_cpu"
    if sort_by not in ("self_cpu", "self_device"):
        raise ValueError(f"sort_by must be 'self_cpu' or 'self_device', got {sort_by!r}")
    for _ in range(warmup):
        step(*next(batches))
    activities = [ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            with record_function("greenlab.data"):
                xb, yb = next(batches)
            with record_function("greenlab.step"):
                step(xb, yb)
        synchronize(dev)
    rows = _operator_rows(prof.key_averages(), sort_by)
    return ProfileReport(rows=rows, steps=steps, device=str(dev), sort_by=sort_by, profiler=prof)


@dataclass
class TimeSplit:
    """Seconds spent waiting for batches (``data_seconds``) and running steps (``compute_seconds``)
    over ``steps`` steps; on CUDA the step timer includes a synchronise, so queued GPU work is
    counted. ``gpu_utilization_percent``: mean NVML utilisation sampled after each step (None
    without a GPU or NVML)."""

    data_seconds: float
    compute_seconds: float
    steps: int
    device: str
    median_data_seconds: float
    median_compute_seconds: float
    gpu_utilization_percent: float | None = None
    note: str = ""

    @property
    def data_fraction(self) -> float:
        """Share (0..1) of the measured time spent waiting for data."""
        total = self.data_seconds + self.compute_seconds
        return self.data_seconds / total if total > 0 else float("nan")

    def summary(self) -> str:
        line = (f"{self.steps} steps on {self.device}: data {plain_number(self.data_seconds)} s, compute "
                f"{plain_number(self.compute_seconds)} s ({self.data_fraction:.0%} of the time waiting for data)")
        if self.gpu_utilization_percent is not None:
            line += f", GPU utilisation {self.gpu_utilization_percent:.0f}% (NVML)"
        return line + (f"; {self.note}" if self.note else "")

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out["data_fraction"] = self.data_fraction
        return out


def time_split(model, data, config=None, steps: int = 20, warmup: int = 2, device=None) -> TimeSplit:
    """Time ``steps`` training steps, splitting wall-clock time into waiting for the loader and
    computing the step (``time.perf_counter`` around each). Arguments as in ``profile_steps``."""
    _check_count("steps", steps, 1)
    _check_count("warmup", warmup, 0)
    step, batches, dev = _stepper(model, data, config, device)
    for _ in range(warmup):
        step(*next(batches))
    synchronize(dev)
    gpu = _GpuUtilization(dev)
    data_times, step_times, utils = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        xb, yb = next(batches)
        t1 = time.perf_counter()
        step(xb, yb)
        synchronize(dev)
        t2 = time.perf_counter()
        data_times.append(t1 - t0)
        step_times.append(t2 - t1)
        u = gpu.read()
        if u is not None:
            utils.append(u)
    return TimeSplit(data_seconds=sum(data_times), compute_seconds=sum(step_times), steps=steps,
                     device=str(dev), median_data_seconds=statistics.median(data_times),
                     median_compute_seconds=statistics.median(step_times),
                     gpu_utilization_percent=statistics.fmean(utils) if utils else None,
                     note=gpu.note)


# --- monitoring export ----------------------------------------------------------------------

def to_prometheus(samples, job: str = "greenlab", labels: dict | None = None,
                  sources: dict | None = None) -> str:
    """The latest power sample in the Prometheus text exposition format (0.0.4):

    - gauge ``greenlab_power_watts{component, source}``: mean power since the previous sample, W;
    - counter ``greenlab_energy_joules_total{component, source}``: energy since the monitor
      started, J;
    - gauge ``greenlab_power_estimated{component, source}``: 1 when the figure is an estimate.

    ``samples``: a ``PowerMonitor`` (its sources are used) or a list of ``PowerSample``.
    ``sources``: component -> source name (e.g. ``{"cpu": "estimate"}``) for a plain list.
    ``job`` and ``labels`` are added to every series (label names: letters, digits, underscores).
    """
    samples, sources = _samples_and_sources(samples, sources)
    common = {"job": str(job), **{str(k): str(v) for k, v in (labels or {}).items()}}
    for name in common:
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__") or name in ("component", "source"):
            raise ValueError(f"label name {name!r} is not allowed: use letters, digits and underscores, "
                             "not starting with a digit or '__', and not 'component' or 'source'")
    latest = samples[-1] if samples else None
    blocks = [
        ("greenlab_power_watts", "gauge", "Mean power per component since the previous sample, watts.",
         lambda s, c: s.watts.get(c)),
        ("greenlab_energy_joules_total", "counter",
         "Energy per component since the power monitor started, joules.", lambda s, c: s.joules.get(c)),
        ("greenlab_power_estimated", "gauge",
         "1 when the component's figures are an estimate from a power model, 0 when measured.",
         lambda s, c: 1 if sources.get(c, "unknown") in ("estimate", "unknown") else 0),
    ]
    lines = []
    for metric, kind, text, value_of in blocks:
        lines.append(f"# HELP {metric} {text}")
        lines.append(f"# TYPE {metric} {kind}")
        if latest is None:
            continue
        for component in sorted(set(latest.watts) | set(latest.joules)):
            value = value_of(latest, component)
            if value is None:
                continue
            series = {**common, "component": component, "source": sources.get(component, "unknown")}
            label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in series.items())
            lines.append(f"{metric}{{{label_text}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def to_csv(samples, path, sources: dict | None = None) -> Path:
    """Write every sample as rows ``t_s, component, source, watts, joules`` (one row per component
    per sample; joules cumulative since the monitor started). Written crash-safely; returns the path."""
    samples, sources = _samples_and_sources(samples, sources)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["t_s", "component", "source", "watts", "joules"])
    for s in samples:
        for component in sorted(set(s.watts) | set(s.joules)):
            writer.writerow([repr(float(s.t_s)), component, sources.get(component, "unknown"),
                             repr(float(s.watts.get(component, math.nan))),
                             repr(float(s.joules.get(component, math.nan)))])
    path = Path(path)
    atomic_write_bytes(path, text.getvalue().encode("utf-8"))
    return path


# --- helpers --------------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _samples_and_sources(samples, sources):
    if hasattr(samples, "samples") and callable(samples.samples):
        monitor = samples
        samples = monitor.samples()
        sources = {**getattr(monitor, "sources", {}), **(sources or {})}
    try:
        samples = list(samples)
    except TypeError:
        raise ValueError("samples must be a PowerMonitor or a list of PowerSample") from None
    for s in samples:
        if not all(hasattr(s, a) for a in ("t_s", "watts", "joules")):
            raise ValueError(f"samples must hold PowerSample objects (t_s, watts, joules), got {type(s).__name__}")
    return samples, dict(sources or {})


def _check_count(label, value, minimum) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{label} must be an integer >= {minimum}, got {value!r}")


def _stepper(model, data, config, device):
    """(step(x, y), endless batch iterator, device) for plain training steps as gl.train does them."""
    cfg = config if config is not None else TrainConfig()
    if device is None:
        device = gl_config.device()
    dev = torch.device(device)
    model.to(dev).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=getattr(cfg, "lr", 0.05),
                                momentum=getattr(cfg, "momentum", 0.9))
    precision = getattr(cfg, "precision", "fp32")

    dtype = precision_dtype(precision)

    def step(xb, yb):
        xb = xb.to(dev, non_blocking=True)
        yb = yb.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=dtype, enabled=precision != "fp32"):
            loss = F.cross_entropy(model(xb).float(), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step, _endless(_loader_for(data, cfg, dev)), dev


def _loader_for(data, cfg, dev):
    if hasattr(data, "train_x") and hasattr(data, "train_y"):
        bs = getattr(cfg, "batch_size", 128)
        if getattr(cfg, "loader", "device") == "dataloader":
            return make_dataloader(data, bs, num_workers=cfg.num_workers, pin_memory=cfg.pin_memory,
                                   prefetch_factor=cfg.prefetch_factor, augment=cfg.augment, seed=cfg.seed)
        return DeviceLoader(data.train_x, data.train_y, bs, shuffle=True, augment=getattr(cfg, "augment", None),
                            device=dev, seed=getattr(cfg, "seed", 0))
    if hasattr(data, "__iter__"):
        return data
    raise ValueError("data must be a greenlab Dataset or an iterable of (x, y) batches")


def _endless(loader):
    """Batches from ``loader``, starting a new pass when one ends."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch[0], batch[1]
        if empty:
            raise ValueError("the data loader yielded no batches")


def _operator_rows(averages, sort_by: str) -> list:
    rows = []
    for e in averages:
        self_device = getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        device_total = getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0))
        rows.append({"name": e.key, "calls": int(e.count),
                     "self_cpu_ms": e.self_cpu_time_total / 1000.0,
                     "cpu_total_ms": e.cpu_time_total / 1000.0,
                     "self_device_ms": self_device / 1000.0,
                     "device_total_ms": device_total / 1000.0})
    key = "self_cpu_ms" if sort_by == "self_cpu" else "self_device_ms"
    total = sum(r[key] for r in rows)
    for r in rows:
        r["self_percent"] = 100.0 * r[key] / total if total > 0 else 0.0
    rows.sort(key=lambda r: r[key], reverse=True)
    return rows


class _GpuUtilization:
    """NVML utilisation (percent of time a kernel ran over the driver's last sample period) of
    the CUDA device in use; ``read()`` gives None with a ``note`` when it cannot be had."""

    def __init__(self, dev: torch.device):
        self.handle = None
        self.lib = None
        self.note = ""
        if dev.type != "cuda":
            return

        lib = get_nvml()
        if not lib.available:
            self.note = f"GPU utilisation unavailable: {lib.reason}"
            return
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        visible = {g.cuda_index: g.nvml_index for g in lib.visible_gpus()}
        if index not in visible:
            self.note = "GPU utilisation unavailable: CUDA device not found in NVML"
            return
        self.lib, self.handle = lib, lib.handle(visible[index])

    def read(self) -> float | None:
        if self.handle is None:
            return None
        try:
            return float(self.lib.module.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception as exc:  # NVMLError subclasses: not supported, lost GPU, ...
            self.note = f"GPU utilisation unavailable: {exc}"
            self.handle = None
            return None
