"""NVML probes (read-only queries) and the measurement-core checks, pure functions of readers."""

from __future__ import annotations

import os
import statistics
import threading
import time

from benchmarks.gpu.records import percentile


def counter_vs_power(read_counter, read_power, seconds: float, interval_s: float = 0.005,
                     clock=time.perf_counter, sleep=time.sleep, align: bool = False,
                     tick_poll_s: float = 0.0002, tick_timeout_s: float = 0.5) -> dict:
    """Compare an energy counter (joules) with power samples (watts) integrated over ``seconds``.

    Returns counter joules, integrated joules (trapezoid rule), their difference in percent of
    the integrated value, the number of power samples and the mean power. With ``align`` both
    edges are on counter ticks: the window starts when the counter's value changes (polled every
    ``tick_poll_s``) and, after ``seconds``, ends at its next change, with a power sample at each
    edge, so the counter's update period does not quantise the comparison (``edges_on_ticks``
    says whether both ticks came within ``tick_timeout_s``).
    """
    from greenlab.energy import trapezoid_joules

    if not seconds > 0 or not interval_s > 0:
        raise ValueError(f"seconds and interval_s must be > 0, got {seconds!r}, {interval_s!r}")
    aligned = None
    c0 = read_counter()
    if align:
        c0, aligned = _next_tick(read_counter, c0, clock, sleep, tick_poll_s, tick_timeout_s)
    t0 = clock()
    times, watts, missed = [], [], 0
    now = 0.0
    while True:
        value = read_power()  # a transient read can give None: skipped, counted
        if value is None:
            missed += 1
        else:
            times.append(now)
            watts.append(value)
        if now >= seconds:
            break
        sleep(interval_s)
        now = clock() - t0
    c1 = read_counter()
    if align:
        c1, end_aligned = _next_tick(read_counter, c1, clock, sleep, tick_poll_s, tick_timeout_s)
        aligned = aligned and end_aligned
        now = clock() - t0
        value = read_power()
        if value is None:
            missed += 1
        elif not times or now > times[-1]:
            times.append(now)
            watts.append(value)
    out = {"seconds": now, "power_samples": len(watts), "power_reads_missed": missed}
    if align:
        out["edges_on_ticks"] = bool(aligned)
    if c0 is None or c1 is None or len(watts) < 2:
        why = "the energy counter gave no value" if (c0 is None or c1 is None) else "fewer than 2 power readings"
        return {**out, "counter_joules": None, "integrated_joules": None, "difference_pct": None,
                "mean_watts": None, "status": f"not measured: {why}"}
    integrated = trapezoid_joules(times, watts)
    counter = c1 - c0
    diff = 100.0 * (counter - integrated) / integrated if integrated > 0 else None
    span = times[-1] - times[0]
    return {**out, "counter_joules": counter, "integrated_joules": integrated, "difference_pct": diff,
            "mean_watts": integrated / span if span > 0 else None}


def _next_tick(read_counter, last, clock, sleep, poll_s: float, timeout_s: float) -> tuple:
    """(the counter's first value other than ``last``, True), or (its value, False) after ``timeout_s``."""
    end = clock() + timeout_s
    while clock() < end:
        sleep(poll_s)
        value = read_counter()
        if value != last:
            return value, True
    return read_counter(), False


def counter_vs_power_windows(read_counter, read_power, seconds: float, windows: int, interval_s: float = 0.005,
                             read_temperature=None, clock=time.perf_counter, sleep=time.sleep) -> dict:
    """``windows`` counter-vs-power windows of ``seconds`` each, edges on counter ticks
    (``counter_vs_power(align=True)``): the median difference, its spread (max - min, percentage
    points), each window's difference, mean power and temperature at its end (``read_temperature``,
    an NVML query, when given)."""
    if not isinstance(windows, int) or windows < 1:
        raise ValueError(f"windows must be a positive integer, got {windows!r}")
    each = []
    for _ in range(windows):
        r = counter_vs_power(read_counter, read_power, seconds, interval_s, clock=clock, sleep=sleep, align=True)
        if read_temperature is not None:
            try:
                r["temperature_c"] = read_temperature()
            except Exception:
                r["temperature_c"] = None
        each.append(r)
    diffs = [r["difference_pct"] for r in each if r.get("difference_pct") is not None]
    out = {"windows": windows, "window_seconds": seconds, "windows_measured": len(diffs),
           "edges_on_ticks": all(r.get("edges_on_ticks") for r in each),
           "power_samples": sum(r["power_samples"] for r in each),
           "power_reads_missed": sum(r["power_reads_missed"] for r in each),
           "difference_pct": statistics.median(diffs) if diffs else None,
           "difference_pct_min": min(diffs) if diffs else None,
           "difference_pct_max": max(diffs) if diffs else None,
           "difference_spread_pct": (max(diffs) - min(diffs)) if diffs else None,
           "difference_pct_each": ",".join(f"{d:.3f}" for d in diffs),
           "mean_watts": _median_of(r.get("mean_watts") for r in each),
           "counter_joules": sum(r["counter_joules"] for r in each if r.get("counter_joules") is not None),
           "integrated_joules": sum(r["integrated_joules"] for r in each if r.get("integrated_joules") is not None)}
    temps = [r.get("temperature_c") for r in each]
    if any(t is not None for t in temps):
        out["window_end_temperature_c"] = ",".join(str(t) for t in temps)
    if not diffs:
        out["status"] = next((r["status"] for r in each if r.get("status")), "not measured")
    return out


def _median_of(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


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
    """The GPU's state and its energy counter's update period (idle poll), NVML queries only.
    Never raises: a query that fails is recorded with its reason (``nvml``, ``*_problem`` keys)."""
    if dry_run:
        return {"nvml": "not used (dry-run on the CPU)"}
    try:
        from greenlab.energy import nvml as _nvml

        lib = _nvml.get_nvml()
        if not lib.available:
            return {"nvml": lib.reason}
        gpus = lib.visible_gpus()
        if not gpus or gpus[0].nvml_index is None:
            return {"nvml": "no NVML device for CUDA device 0 (MIG or not visible)"}
        handle = lib.handle(gpus[0].nvml_index)
    except Exception as exc:  # a first NVML call that fails must not end the suite
        return {"nvml": f"unavailable: {type(exc).__name__}: {exc}"[:300]}
    state = read_gpu_state(lib, handle)
    state.update(mig_problem(state.get("mig_mode"), os.environ.get("CUDA_VISIBLE_DEVICES")))
    state["other_processes_at_start"] = other_gpu_processes(lib, handle)
    try:
        period = counter_update_period(lambda: lib.energy_joules(handle), 1.0)
        state["counter_update_period_ms"] = period["interval_ms_median"]
    except Exception as exc:
        state["counter_update_period_ms"] = None
        state["counter_update_period_problem"] = f"{type(exc).__name__}: {exc}"
    return state


def mig_problem(mig_mode, visible_devices) -> dict:
    """``{"mig_problem": text}`` when MIG is enabled but ``CUDA_VISIBLE_DEVICES`` names no MIG
    instance (the energy counter then covers the whole GPU, other instances' work included)."""
    if mig_mode != "enabled":
        return {}
    if visible_devices and any(part.strip().startswith("MIG-") for part in visible_devices.split(",")):
        return {}
    return {"mig_problem": "MIG is enabled but CUDA_VISIBLE_DEVICES names no MIG instance "
                           f"({visible_devices or 'unset'}): the counter covers the whole GPU"}


def other_gpu_processes(lib, handle, own_pids=None):
    """Compute processes on the GPU other than this one and its children (pid and used MiB,
    ``nvmlDeviceGetComputeRunningProcesses``), or a text saying why they could not be read."""
    own = set(own_pids or ()) | {os.getpid()}
    try:
        procs = lib.module.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
    out = []
    for proc in procs or ():
        pid = getattr(proc, "pid", None)
        if pid in own:
            continue
        used = getattr(proc, "usedGpuMemory", None)
        out.append({"pid": pid, "used_mib": used / 2**20 if isinstance(used, (int, float)) else None})
    return out


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


class GpuProbe:
    """Read-only NVML reads an energy window needs: wait for the energy counter's next tick (to
    align a window's edge on it), and the SM clock, temperature and clock-event reasons."""

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle

    def wait_for_tick(self, timeout_s: float = 0.5) -> bool:
        """Poll the energy counter until its value changes (True) or ``timeout_s`` passes."""
        try:
            first = self.lib.energy_joules(self.handle)
            end = time.perf_counter() + timeout_s
            while time.perf_counter() < end:
                if self.lib.energy_joules(self.handle) != first:
                    return True
        except Exception:
            return False
        return False

    def state(self) -> dict:
        """SM clock (MHz), temperature (C) and the clock-event (throttle) reasons bitmask now."""
        m = self.lib.module
        reasons = getattr(m, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or getattr(m, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        out = {}
        for key, read in (("sm_clock_mhz", lambda: m.nvmlDeviceGetClockInfo(self.handle, m.NVML_CLOCK_SM)),
                          ("temperature_c", lambda: m.nvmlDeviceGetTemperature(self.handle, m.NVML_TEMPERATURE_GPU)),
                          ("clock_event_reasons", lambda: f"0x{int(reasons(self.handle)):x}")):
            try:
                out[key] = read()
            except Exception:
                out[key] = None
        return out

    def others(self, own_pids=None):
        return other_gpu_processes(self.lib, self.handle, own_pids)


def gpu_probe(torch):
    """A ``GpuProbe`` for the current CUDA device, or (None, why) when NVML cannot give one."""
    try:
        from greenlab.energy import nvml as _nvml

        lib = _nvml.get_nvml()
        if not lib.available:
            return None, f"NVML not available ({lib.reason})"
        handle = _nvml_handle(lib, torch)
        if handle is None:
            return None, "no NVML handle for this CUDA device"
        return GpuProbe(lib, handle), None
    except Exception as exc:
        return None, f"NVML failed: {type(exc).__name__}: {exc}"[:300]
