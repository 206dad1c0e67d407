"""The measurement context of an experiment: device, energy sources, time share, calibrated
energy windows, the plain training loop and the throughput row built from its windows."""

from __future__ import annotations

import importlib.util
import math
import os
import time
from pathlib import Path

from benchmarks.gpu.probes import gpu_probe
from benchmarks.gpu.records import _max, _median, write_json
from benchmarks.gpu.settings import DRY_SIZES, GPU_SIZES


_PROCESS_T0 = time.monotonic()  # a worker's time share counts from here: start-up included


class Context:
    """What an experiment needs: device, energy sources, sizes, its time share, its record."""

    def __init__(self, args, name: str, cap_s: float, idle_w: float | None = None):
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
        self.warmed_s = None  # seconds of untimed work before this experiment's first window (warm_first)
        self.datasets: dict = {}
        self.tf32 = (f"torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
                     f"torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
                     f"float32_matmul_precision={torch.get_float32_matmul_precision()}")
        # the device's idle power from measurement_core (W), for energy above idle beside gross
        self.idle_w = idle_w if (idle_w is not None and self.energy_ok) else None
        self.probe, why = gpu_probe(torch) if self.device == "cuda" else (None, "dry-run on the CPU")
        self.probe_problem = why
        self.others_at_start = self.probe.others() if self.probe is not None else None
        self.others_at_end = None
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
        if self.probe is not None:
            self.others_at_end = self.probe.others()
        others = [o for o in (self.others_at_start, self.others_at_end) if isinstance(o, list) and o]
        if others:
            self.note("Other processes were on the GPU during this experiment (their energy is in the "
                      f"counter): at start {self.others_at_start}, at end {self.others_at_end}.")
        self._save(status)

    def _save(self, status: str) -> None:
        write_json(self.part, {"status": status, "seconds": time.monotonic() - self.t0,
                               "rows": self.rows, "notes": self.notes,
                               "measured": self.measured,
                               "energy_source": self.energy_source if self.energy_ok else None,
                               "torch_tf32": self.tf32, "idle_watts": self.idle_w,
                               "other_gpu_processes_start": self.others_at_start,
                               "other_gpu_processes_end": self.others_at_end,
                               "nvml_probe_problem": self.probe_problem})

    def above_idle(self, joules, seconds):
        """Energy above idle, joules: gross device ``joules`` less measurement_core's idle power
        times ``seconds`` (gross-minus-idle); None when either figure or the idle power is unknown."""
        if joules is None or seconds is None or self.idle_w is None:
            return None
        return joules - self.idle_w * seconds

    # --- device ---
    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def dataset(self, name: str, n_train: int, n_test: int):
        """A dataset, shared between this suite's workers through a cache file."""
        from greenlab.training import data

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

    def warm_first(self, run_steps, per_step: float) -> None:
        """Before this experiment's first energy window only: ``sizes.first_window_warm_s`` of
        untimed ``run_steps`` (clocks and power settle after the previous worker's start-up and
        the calibration's short timings); recorded in a note."""
        if self.warmed_s is not None:
            return
        steps = max(1, math.ceil(self.sizes.first_window_warm_s / max(per_step, 1e-9)))
        self.sync()
        t0 = time.perf_counter()
        run_steps(min(steps, self.sizes.max_steps))
        self.sync()
        self.warmed_s = time.perf_counter() - t0
        self.note(f"The first energy window followed {self.warmed_s:.2g} s of untimed work of its own "
                  "configuration, beside each configuration's own warm-up and calibration.")

    def window(self, label: str, work) -> dict:
        """Run ``work()`` inside one energy window (synchronised edges); seconds, joules of the
        device (None when not measured), whether the window was long enough, memory added, and
        the SM clock, temperature and clock-event reasons at its start and end (NVML queries)."""
        from greenlab.energy import measure

        mem = _MemoryIncrease(self)
        self.sync()
        start = self.probe.state() if self.probe is not None else {}
        aligned = self.probe is not None and self.probe.wait_for_tick()
        with measure(label, sources=self.sources) as w:
            work()
            self.sync()
            if aligned:  # the end edge on a tick too: the counter has counted up to it
                aligned = self.probe.wait_for_tick()
        r = w.result
        comp = r.components.get(self.component)
        joules = comp.joules if (comp is not None and self.energy_ok) else None
        cpu = r.components.get("cpu")
        return {"seconds": r.seconds, "joules": joules,
                "joules_above_idle": self.above_idle(joules, r.seconds),
                "cpu_joules": cpu.joules if (cpu is not None and self.component != "cpu") else None,
                "cpu_energy_source": (f"{cpu.source}{' (estimate)' if cpu.estimated else ''}"
                                      if (cpu is not None and self.component != "cpu") else None),
                "edges_on_ticks": aligned,
                "window_ok": r.seconds >= self.min_window_s,
                "memory_increase_mib": mem.mib(),
                "energy_complete": bool(r.complete) if joules is not None else None,
                **{f"start_{k}": v for k, v in start.items()},
                **({f"end_{k}": v for k, v in self.probe.state().items()} if self.probe is not None else {})}

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

            self._rss = importlib.import_module("greenlab.training.peak_memory").rss_bytes
            self.base = self._rss()

    def mib(self):
        if self.ctx.device == "cuda":
            self.ctx.torch.cuda.synchronize()
            return (self.ctx.torch.cuda.max_memory_allocated() - self.base) / 2**20
        now = self._rss()
        return None if (now is None or self.base is None) else max(0, now - self.base) / 2**20


class StepLoop:
    """A plain training loop on device-resident batches (or a loader's), for throughput windows.

    One step: ``accum`` micro-batches under autocast (bf16/fp16), one optimizer step, through the
    same step as ``gl.train`` (``greenlab.training.step``); fp16 uses a GradScaler, whose inf
    check reads a value back to the host each step (a sync inside the step).
    """

    def __init__(self, ctx: Context, model, ds, batch: int, precision: str, accum: int = 1,
                 lr: float = 0.05, loader=None):
        from greenlab.training.precision import dtype as precision_dtype
        from greenlab.training.step import make_scaler

        torch = ctx.torch
        self.ctx, self.torch, self.batch, self.precision, self.accum = ctx, torch, batch, precision, accum
        dev = ctx.device
        self.channels_last = dev == "cuda" and model is not None and _has_conv(model)
        self.model = model.to(dev)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.dtype = precision_dtype(precision)
        self.scaler = make_scaler(dev, precision)
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
        from greenlab.training.step import backward, classifier_loss, optimizer_step

        amp = self.precision != "fp32"
        for _ in range(steps):
            for _k in range(self.accum):
                xb, yb = self._next()
                loss = classifier_loss(self.model, xb, yb, int(yb.shape[0]) * self.accum, self.dtype, amp)
                backward(loss, self.scaler)
            optimizer_step(self.opt, self.scaler)

    def accuracy(self, ds) -> float:
        """Test accuracy after training (outside any window)."""
        from greenlab.training.accuracy import accuracy

        amp = self.precision != "fp32"
        return accuracy(self.model, ds.test_x, ds.test_y, batch_size=1024, device=self.ctx.device,
                        autocast_dtype=self.dtype if amp else None, channels_last=self.channels_last)


def throughput_row(ctx: Context, label: str, loop: StepLoop, extra: dict, repeats: int,
                   flops_per_sample: float | None = None, profile: bool = False, ds=None) -> dict:
    """Calibrate ``loop``, then ``repeats`` windows of at least the shortest window; medians."""
    return interleaved_rows(ctx, [Config(label, loop, extra, flops_per_sample, profile, ds)], repeats)[0]


class Config:
    """One configuration of a throughput comparison: a label, its loop (``run(n)``,
    ``samples_per_step``), the row's extra columns and what to measure beside the windows."""

    def __init__(self, label: str, loop, extra: dict, flops_per_sample: float | None = None,
                 profile: bool = False, ds=None, math_mode: str | None = None):
        self.label, self.loop, self.extra = label, loop, dict(extra)
        self.flops_per_sample, self.profile, self.ds, self.math_mode = flops_per_sample, profile, ds, math_mode
        self.steps = self.per_step = None
        self.windows: list = []


def interleaved_rows(ctx: Context, configs: list, repeats: int) -> list:
    """Calibrate every configuration, then run their windows interleaved (A B C A B C ...), so
    drift in clocks and temperature falls on all of them alike; one row per configuration with
    medians, min/max over its windows, and each window's SM clock, temperature and clock-event
    reasons at its end (GPU only). A configuration whose windows do not fit is "skipped"."""
    ready = []
    for c in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        c.steps, c.per_step = ctx.calibrate(c.loop.run)
        if c.profile:
            c.extra.update(ctx.busy(c.loop.run))
        ready.append(c)
    if ready:
        ctx.warm_first(ready[0].loop.run, ready[0].per_step)
    for _ in range(repeats):
        for c in ready:
            if not ctx.enough_for(c.steps * c.per_step * 1.1 + 1):
                break
            c.windows.append(ctx.window(c.label, lambda c=c: c.loop.run(c.steps)))
    return [_summarise(ctx, c) for c in configs]


def _summarise(ctx: Context, c: Config) -> dict:
    row = {"label": c.label, **c.extra, "steps": c.steps,
           "calibrated_step_ms": c.per_step * 1000 if c.per_step else None, "repeats": len(c.windows)}
    if c.math_mode:
        row["math_mode"] = c.math_mode
    windows = c.windows
    if not windows:
        row["status"] = "skipped: out of time"
        return row
    samples = c.steps * c.loop.samples_per_step
    sps = [samples / w["seconds"] for w in windows]
    jps = [w["joules"] / samples for w in windows if w["joules"] is not None]
    above = [w["joules_above_idle"] / samples for w in windows if w.get("joules_above_idle") is not None]
    row.update({
        "status": "ok", "samples": samples,
        "window_seconds": _median([w["seconds"] for w in windows]),
        "window_ok": all(w["window_ok"] for w in windows),
        "edges_on_counter_ticks": all(w.get("edges_on_ticks") for w in windows),
        "samples_per_second": _median(sps), "samples_per_second_min": min(sps), "samples_per_second_max": max(sps),
        "joules": _median([w["joules"] for w in windows]),
        "joules_per_sample": _median(jps) if jps else None,
        "joules_per_sample_min": min(jps) if jps else None, "joules_per_sample_max": max(jps) if jps else None,
        "joules_per_sample_spread_pct": (100 * (max(jps) - min(jps)) / _median(jps))
        if len(jps) > 1 and _median(jps) else None,
        "joules_above_idle_per_sample": _median(above) if above else None,
        "memory_increase_mib": _max([w["memory_increase_mib"] for w in windows]),
        "energy_source": ctx.energy_source if ctx.energy_ok else "not measured",
    })
    cpu = [w["cpu_joules"] / samples for w in windows if w.get("cpu_joules") is not None]
    if cpu:  # the host's share of the same windows (an estimate unless RAPL is readable)
        row["cpu_joules_per_sample"] = _median(cpu)
        row["cpu_energy_source"] = windows[0].get("cpu_energy_source")
    _window_states(row, windows)
    if c.flops_per_sample:
        row["tflops_achieved"] = 3 * c.flops_per_sample * row["samples_per_second"] / 1e12
    if c.ds is not None:
        row["test_accuracy_after"] = c.loop.accuracy(c.ds)
    return row


def _window_states(row: dict, windows: list) -> None:
    """Each window's SM clock, temperature and clock-event reasons at its end (and temperature at
    its start) as comma-separated columns, in window order (GPU only: NVML queries)."""
    for edge, keys in (("end", ("sm_clock_mhz", "temperature_c", "clock_event_reasons")),
                       ("start", ("temperature_c",))):
        for key in keys:
            values = [w.get(f"{edge}_{key}") for w in windows]
            if any(v is not None for v in values):
                row[f"window_{edge}_{key}"] = ",".join(str(v) for v in values)


def math_mode(ctx: Context, precision: str, convolutions: bool) -> str:
    """The arithmetic a row's matrix products and convolutions actually use (PyTorch's flags as
    found): e.g. "TF32 convolutions, IEEE fp32 matmuls" for fp32 defaults on CUDA."""
    if precision in ("bf16", "fp16"):
        return f"{precision} autocast (fp32 weights and accumulation)"
    if ctx.device != "cuda":
        return "IEEE fp32 (CPU)"
    torch = ctx.torch
    mm = "TF32" if (torch.backends.cuda.matmul.allow_tf32
                    or torch.get_float32_matmul_precision() != "highest") else "IEEE fp32"
    text = f"{mm} matmuls"
    if convolutions:
        text = ("TF32" if torch.backends.cudnn.allow_tf32 else "IEEE fp32") + " convolutions, " + text
    return text


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


def _inference_row(ctx: Context, label: str, net, x, precision: str) -> dict:
    """One inference configuration's row (``inference_rows`` with one item, one window)."""
    return inference_rows(ctx, [(label, net, x)], precision, repeats=1)[0]


def inference_rows(ctx: Context, items: list, precision: str, repeats: int | None = None) -> list:
    """Inference rows for ``items`` ((label, net, x) each): every one warmed up and calibrated,
    then their windows interleaved (A B A B ...), ``repeats`` each (default: as many as fit, at
    most ``sizes.repeats``); per row the medians, min/max and each window's temperatures. An
    item whose windows do not fit gets a "skipped: out of time" row."""
    from greenlab.training.precision import dtype as precision_dtype

    torch = ctx.torch
    dtype = precision_dtype(precision)

    def runner(net, x):
        def run(n):
            with torch.inference_mode(), torch.autocast(ctx.device, dtype=dtype, enabled=precision != "fp32"):
                for _ in range(n):
                    net(x)
        return run

    if repeats is None:
        repeats = _repeats(ctx, len(items), ctx.min_window_s * ctx.sizes.window_margin)
    ready = []
    for label, net, x in items:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 1):
            break
        run = runner(net, x)
        steps, per_step = ctx.calibrate(run)
        ready.append((label, run, steps, per_step, x.shape[0], []))
    if ready:
        ctx.warm_first(ready[0][1], ready[0][3])
    for r in range(repeats):
        for label, run, steps, per_step, _batch, windows in ready:
            if r and not ctx.enough_for(steps * per_step * 1.1 + 1):
                break
            windows.append(ctx.window(label, lambda run=run, steps=steps: run(steps)))
    rows = []
    for label, *_rest in items[len(ready):]:
        rows.append({"label": label, "precision": precision, "status": "skipped: out of time"})
    done = []
    for label, _run, steps, _per_step, batch, windows in ready:
        samples = steps * batch
        sps = [samples / w["seconds"] for w in windows if w["seconds"] > 0]
        jps = [w["joules"] / samples for w in windows if w["joules"] is not None]
        row = {"label": label, "precision": precision, "batches": steps, "repeats": len(windows),
               "window_seconds": _median([w["seconds"] for w in windows]),
               "window_ok": all(w["window_ok"] for w in windows), "samples": samples,
               "samples_per_second": _median(sps), "joules_per_sample": _median(jps) if jps else None,
               "memory_increase_mib": _max([w["memory_increase_mib"] for w in windows]),
               "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"}
        if len(windows) > 1:
            row.update({"samples_per_second_min": min(sps), "samples_per_second_max": max(sps),
                        "joules_per_sample_min": min(jps) if jps else None,
                        "joules_per_sample_max": max(jps) if jps else None})
        _window_states(row, windows)
        done.append(row)
    return done + rows


def _cnn_fn(ctx: Context, lesson: bool = False):
    """The reference CNN: the lessons' width (``lesson=True``) or the suite's compute-bound width."""
    from greenlab.training import models
    from greenlab.course import recipes

    opts = {**recipes.REFERENCE_CNN, **({} if lesson else ctx.sizes.cnn)}
    if ctx.dry_run:
        opts.update(ctx.sizes.cnn)
    return lambda: models.build("cnn", in_channels=1, **opts)


def _resnet_fn(ctx: Context):
    from greenlab.training import models
    from greenlab.course import recipes

    opts = {**recipes.REFERENCE_RESNET, **ctx.sizes.resnet}
    return lambda: models.build("resnet", in_channels=3, **opts)


def _has_conv(model) -> bool:
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in model.modules())


def _device_joules(res, ctx: Context):
    if not ctx.energy_ok:
        return None
    comp = getattr(res.energy, "components", {}).get(ctx.component)
    return comp.joules if comp is not None else None


def _model_text(model_fn) -> str:
    from greenlab.training.models import count_params

    model = model_fn()
    return f"{type(model).__name__}, {count_params(model):,} parameters"
