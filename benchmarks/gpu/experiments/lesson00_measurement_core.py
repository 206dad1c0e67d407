"""Lesson 00's experiment: idle power, the energy counter against integrated power, the
counter's update period, the PowerMonitor's overhead."""

from __future__ import annotations

import math
import statistics
import time

from benchmarks.gpu.context import Context, StepLoop, _cnn_fn
from benchmarks.gpu.probes import (
    SteadyLoad, _nvml_handle, counter_update_period, counter_vs_power_windows, paired_overhead)

IDLE_DIVERGENCE_PCT = 3.0  # idle windows whose median difference passes this are flagged (judged under load)


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
    idle_w = idle.watts_by_component.get(ctx.component) if ctx.energy_ok else None
    if idle_w is not None and ctx.device == "cuda":  # later experiments report energy above it
        ctx.measured["idle_watts"] = idle_w
    lib = handle = None
    why = "dry-run on the CPU" if ctx.dry_run else "no NVML handle for this GPU"
    try:
        lib = _nvml.get_nvml() if ctx.device == "cuda" else None
        handle = _nvml_handle(lib, ctx.torch) if lib is not None and lib.available else None
        if lib is not None and not lib.available:
            why = f"NVML not available ({lib.reason})"
    except Exception as exc:  # recorded; the monitor-overhead row below still runs
        why = f"NVML handle failed: {type(exc).__name__}: {exc}"[:300]
    if handle is None:
        ctx.row({"label": "counter vs instant power", "status": f"not measured: {why}"})
        ctx.row({"label": "counter vs instant power, idle", "status": f"not measured: {why}"})
        ctx.row({"label": "counter update period", "status": f"not measured: {why}"})
    else:
        instant = _safe(lambda: lib.instant_power_watts(handle)) is not None
        read_power = (lambda: _safe(lambda: lib.instant_power_watts(handle))) if instant \
            else (lambda: _safe(lambda: lib.power_watts(handle)))
        counter = lambda: _safe(lambda: lib.energy_joules(handle))  # noqa: E731
        m = lib.module
        temperature = lambda: m.nvmlDeviceGetTemperature(handle, m.NVML_TEMPERATURE_GPU)  # noqa: E731
        reading = ("NVML_FI_DEV_POWER_INSTANT" if instant
                   else "nvmlDeviceGetPowerUsage (1 s average on Ampere+ other than A100)")
        with SteadyLoad(ctx.torch, ctx.device, z.matmul_n):
            time.sleep(1.0)  # clocks and power settle
            check = counter_vs_power_windows(counter, read_power, z.steady_load_s, z.power_windows,
                                             z.power_interval_s, read_temperature=temperature)
            try:
                period = counter_update_period(lambda: lib.energy_joules(handle), z.poll_s)
            except Exception as exc:
                period = {"status": f"not measured: {type(exc).__name__}: {exc}"[:300]}
        ctx.row({"label": "counter vs instant power", "load": "steady", **check, "power_reading": reading})
        time.sleep(1.0)  # power falls back after the load
        idle_check = counter_vs_power_windows(counter, read_power, z.steady_load_s, z.power_windows,
                                              z.power_interval_s, read_temperature=temperature)
        idle_diff = idle_check.get("difference_pct")
        diverges = idle_diff is not None and abs(idle_diff) > IDLE_DIVERGENCE_PCT
        ctx.row({"label": "counter vs instant power, idle", "load": "idle", **idle_check, "power_reading": reading,
                 "idle_divergence": diverges})
        ctx.row({"label": "counter update period", **period})
        if check.get("difference_pct") is not None:
            ctx.measured["counter_vs_power_pct"] = abs(check["difference_pct"])
            ctx.measured["counter_vs_power_spread_pct"] = check["difference_spread_pct"]
        if diverges:
            ctx.note(f"Idle divergence: at idle ({_fmt(idle_check.get('mean_watts'))} W) the counter and the "
                     f"integrated power differ by a median {idle_diff:+.2f} % over {idle_check['windows_measured']} "
                     f"windows (more than {IDLE_DIVERGENCE_PCT:g} %); the target is judged under load "
                     f"({_fmt(check.get('difference_pct'), '+.2f')} %).")
        ctx.note(f"Counter against power: {z.power_windows} windows of {z.steady_load_s:g} s under a steady load "
                 "(repeated bf16 "
                 f"{z.matmul_n}x{z.matmul_n} matrix products in a background thread), then {z.power_windows} at "
                 "idle; each window starts and ends on a tick of the energy counter; power sampled every "
                 f"{z.power_interval_s * 1000:g} ms, trapezoid rule; difference_pct is the median over the "
                 "windows, difference_spread_pct their max - min (percentage points), window_end_temperature_c "
                 "each window's GPU temperature (NVML query).")
    overhead = monitor_overhead(ctx)
    ctx.row({"label": "PowerMonitor overhead (10 Hz)", **overhead})
    if overhead.get("overhead_pct_median") is not None:
        ctx.measured["monitor_overhead_pct"] = overhead["overhead_pct_median"]
    ctx.note("Monitor overhead: the same fixed training loop of the reference CNN with and without a "
             "PowerMonitor(hz=10) whose subscriber reads every sample, alternating which runs first; "
             "the median of per-pair time ratios.")


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


def _fmt(value, spec: str = ".0f") -> str:
    return "unknown" if value is None else format(value, spec)


def _safe(read):
    """``read()``, or None when it raises (a transient NVML error is a missed sample, not a crash)."""
    try:
        return read()
    except Exception:
        return None
