"""Energy sources: every source is read as a cumulative energy counter in joules.

A measurement window reads each source at its start and end and takes the difference, so all
sources look alike to the rest of greenlab. Sources that need regular attention between reads
(power sampling, RAPL wrap-around tracking) say so with ``poll_interval_s`` and the window or
monitor calls ``poll()`` on a background thread.

Source names (shown beside every figure): ``nvml-counter``, ``nvml-power``, ``rapl``, ``estimate``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from greenlab.energy import nvml as _nvml


class EnergySource:
    """Base class: one component (``"cpu"``, ``"dram"``, ``"gpu:0"``) read by one method."""

    name = "abstract"
    estimated = False
    rel_uncertainty = 0.0  # fractional, e.g. 0.05 for +-5 %
    update_period_s = 0.0  # how often the underlying reading changes
    poll_interval_s: float | None = None  # call poll() this often while measuring, or None

    def __init__(self, component: str, note: str = "", model: str = ""):
        self.component = component
        self.note = note  # why this source was chosen when it is a fallback
        self.model = model  # for estimates: the formula and its parameters

    def read_joules(self) -> float:
        """Energy in joules since an arbitrary origin; only differences matter."""
        raise NotImplementedError

    def poll(self) -> None:
        """Keep the counter honest between reads (sample power, track wrap-around)."""

    def describe(self) -> dict:
        """Plain-data summary for reports and ``doctor()``."""
        return {
            "component": self.component,
            "source": self.name,
            "estimated": self.estimated,
            "rel_uncertainty": self.rel_uncertainty,
            "update_period_s": self.update_period_s,
            "note": self.note,
            "model": self.model,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.component} {self.name}>"


# NVML's reference states +-5 % accuracy for power readings on Fermi and Kepler; it gives no
# figure for newer parts, so greenlab assumes the same 5 % for both NVML sources.
NVML_REL_UNCERTAINTY = 0.05
# The energy counter's update period is not documented; greenlab assumes 100 ms, the upper end
# of the 20-100 ms range used in this project's design notes, so short-window warnings err safe.
NVML_COUNTER_PERIOD_S = 0.1


class NvmlCounterSource(EnergySource):
    """GPU energy from ``nvmlDeviceGetTotalEnergyConsumption`` (mJ, Volta and newer)."""

    name = "nvml-counter"
    rel_uncertainty = NVML_REL_UNCERTAINTY
    update_period_s = NVML_COUNTER_PERIOD_S

    def __init__(self, nvml: _nvml.Nvml, handle, component: str, note: str = ""):
        super().__init__(component, note)
        self._nvml = nvml
        self._handle = handle

    def read_joules(self) -> float:
        return self._nvml.energy_joules(self._handle)


class NvmlPowerSource(EnergySource):
    """GPU energy by integrating ``nvmlDeviceGetPowerUsage`` samples with the trapezoid rule.

    Used where the energy counter is not supported. Uses the instantaneous-power field when the
    GPU offers it; otherwise the plain reading, which is a 1 s average on Ampere and newer
    (except A100), so the update period is then taken as 1 s.
    """

    name = "nvml-power"
    rel_uncertainty = NVML_REL_UNCERTAINTY
    poll_interval_s = 0.05

    def __init__(self, nvml: _nvml.Nvml, handle, component: str, note: str = "",
                 clock=time.monotonic):
        super().__init__(component, note)
        self._nvml = nvml
        self._handle = handle
        self._clock = clock
        self._lock = threading.Lock()
        self._joules = 0.0
        self._last: tuple[float, float] | None = None  # (t_s, watts)
        self.instant = nvml.instant_power_watts(handle) is not None
        self.update_period_s = self.poll_interval_s if self.instant else 1.0

    def watts(self) -> float:
        if self.instant:
            value = self._nvml.instant_power_watts(self._handle)
            if value is not None:
                return value
        return self._nvml.power_watts(self._handle)

    def poll(self) -> None:
        self.read_joules()

    def read_joules(self) -> float:
        with self._lock:
            watts = self.watts()
            now = self._clock()
            if self._last is not None:
                t_prev, w_prev = self._last
                self._joules += 0.5 * (watts + w_prev) * max(0.0, now - t_prev)
            self._last = (now, watts)
            return self._joules


def trapezoid_joules(times_s, watts) -> float:
    """Energy in joules of a power trace (seconds, watts) by the trapezoid rule."""
    times_s, watts = list(times_s), list(watts)
    if len(times_s) != len(watts):
        raise ValueError(f"times_s and watts differ in length ({len(times_s)} vs {len(watts)})")
    total = 0.0
    for i in range(1, len(times_s)):
        dt = times_s[i] - times_s[i - 1]
        if dt < 0:
            raise ValueError("times_s must not decrease")
        total += 0.5 * (watts[i] + watts[i - 1]) * dt
    return total


@dataclass
class Discovery:
    """What :func:`discover` found: the sources to use and notes on what could not be read."""

    sources: list[EnergySource]
    problems: list[str] = field(default_factory=list)
    rapl_status: str = "absent"  # "absent" | "permission denied" | "readable" | "unusable"
    rapl_reason: str = ""
    nvml_reason: str = ""


def discover(nvml_module=None, rapl_root=None, environ=None) -> Discovery:
    """Probe this machine and pick one source per component, falling back where needed.

    GPU: energy counter -> power sampling -> left out (with a problem note).
    CPU: RAPL package (+ dram) -> labelled estimate, with the reason in ``note``.
    ``nvml_module`` (a pynvml stand-in) and ``rapl_root`` (a fake powercap tree) are for tests.
    """
    from greenlab.energy.estimate import CpuEstimateSource
    from greenlab.energy.rapl import RAPL_ROOT, probe_rapl

    problems: list[str] = []
    lib = _nvml.get_nvml(nvml_module)
    sources: list[EnergySource] = []
    for gpu in lib.visible_gpus(environ):
        source, problem = _gpu_source(lib, gpu)
        if source is not None:
            sources.append(source)
        if problem:
            problems.append(problem)

    rapl = probe_rapl(RAPL_ROOT if rapl_root is None else rapl_root)
    if rapl.status == "readable":
        sources.extend(rapl.sources())
    else:
        sources.append(CpuEstimateSource(note=rapl.fallback_note()))
    return Discovery(sources, problems, rapl.status, rapl.reason, lib.reason)


def default_sources(nvml_module=None, rapl_root=None, environ=None) -> list[EnergySource]:
    """The sources this machine will use, one per component (see :func:`discover`)."""
    return discover(nvml_module, rapl_root, environ).sources


def _gpu_source(lib: _nvml.Nvml, gpu: _nvml.VisibleGpu):
    """(source or None, problem text) for one visible GPU."""
    component = f"gpu:{gpu.cuda_index}"
    try:
        handle = lib.handle(gpu.nvml_index)
    except Exception as exc:
        return None, f"{component}: no NVML handle ({exc}); its energy is not measured"
    try:
        lib.energy_joules(handle)
        return NvmlCounterSource(lib, handle, component), ""
    except Exception as exc:
        why = "not supported" if lib.is_not_supported(exc) else f"failed: {exc}"
        counter_note = f"energy counter {why}; integrating sampled power instead"
    try:
        lib.power_watts(handle)
        return NvmlPowerSource(lib, handle, component, note=counter_note), ""
    except Exception as exc:
        return None, (f"{component}: neither the energy counter nor power readings work ({exc}); "
                      "its energy is not measured")
