"""NVML probes (read-only queries) and the measurement-core checks, pure functions of readers."""

from __future__ import annotations

import statistics
import threading
import time

from benchmarks.gpu.records import percentile


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
