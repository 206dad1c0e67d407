"""Energy sources: every source is read as a cumulative energy counter in joules.

A measurement window reads each source at its start and end and takes the difference, so all
sources look alike to the rest of greenlab. Sources that need regular attention between reads
(power sampling, RAPL wrap-around tracking) say so with ``poll_interval_s`` and the window or
monitor calls ``poll()`` on a background thread.

Source names (shown beside every figure): ``nvml-counter``, ``nvml-power``, ``amd-counter``,
``amd-power``, ``rapl``, ``apple-soc``, ``estimate``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from greenlab.energy import nvml as _nvml
# the base class, importable from here as before
from greenlab.energy.source import CounterSource, EnergySource, SampledPowerSource  # noqa: F401
from greenlab.base import validation
from greenlab.energy.amd import probe_amd
from greenlab.energy.apple import probe_apple
from greenlab.energy.estimate import ATTRIBUTIONS, CpuEstimateSource
from greenlab.energy.rapl import RAPL_ROOT, probe_rapl


# NVML's reference states +-5 % accuracy for power readings on Fermi and Kepler; it gives no
# figure for newer parts, so greenlab's 5 % for both NVML sources is an assumption. On A100 and
# H100 the power sensor is sampled for only part of the time (about 25 % of runtime; Yang et
# al. 2023, "Part-time Power Measurements: nvidia-smi's Lack of Attention"), so short bursts
# can be missed or over-counted: long windows and repeats average this out.
NVML_REL_UNCERTAINTY = 0.05
# The energy counter's update period is not documented; greenlab assumes 100 ms, the upper end
# of the 20-100 ms range used in this project's design notes, so short-window warnings err safe.
NVML_COUNTER_PERIOD_S = 0.1


class NvmlCounterSource(CounterSource):
    """GPU energy from ``nvmlDeviceGetTotalEnergyConsumption`` (mJ, Volta and newer)."""

    name = "nvml-counter"
    rel_uncertainty = NVML_REL_UNCERTAINTY
    update_period_s = NVML_COUNTER_PERIOD_S
    attribution = "device"

    def __init__(self, nvml: _nvml.Nvml, handle, component: str, note: str = ""):
        super().__init__(component, note)
        self._nvml = nvml
        self._handle = handle

    def raw_joules(self) -> float:
        """The GPU's cumulative energy counter, joules (NVML)."""
        return self._nvml.energy_joules(self._handle)


class NvmlPowerSource(SampledPowerSource):
    """GPU energy by integrating ``nvmlDeviceGetPowerUsage`` samples with the trapezoid rule.

    Used where the energy counter is not supported. Uses the instantaneous-power field when the
    GPU offers it; otherwise the plain reading, which is a 1 s average on Ampere and newer
    (except A100), so the update period is then taken as 1 s.
    """

    name = "nvml-power"
    rel_uncertainty = NVML_REL_UNCERTAINTY

    def __init__(self, nvml: _nvml.Nvml, handle, component: str, note: str = "",
                 clock=time.monotonic):
        super().__init__(component, note, clock)
        self._nvml = nvml
        self._handle = handle
        self.instant = nvml.instant_power_watts(handle) is not None
        self.update_period_s = self.poll_interval_s if self.instant else 1.0

    def watts(self) -> float:
        """The GPU's power now, watts: NVML's instantaneous reading when this source asks for one and the GPU gives
        it, else NVML's averaged reading."""
        if self.instant:
            value = self._nvml.instant_power_watts(self._handle)
            if value is not None:
                return value
        return self._nvml.power_watts(self._handle)


def trapezoid_joules(times_s, watts) -> float:
    """Energy in joules of a power trace (seconds, watts) by the trapezoid rule. Times must be
    finite and not decrease; powers finite and >= 0."""
    times_s = [validation.number(f"times_s[{i}]", t) for i, t in enumerate(validation.items("times_s", times_s))]
    watts = [validation.number(f"watts[{i}]", w, low=0) for i, w in enumerate(validation.items("watts", watts))]
    if len(times_s) != len(watts):
        raise ValueError(f"times_s and watts differ in length ({len(times_s)} vs {len(watts)})")
    total = 0.0
    for i in range(1, len(times_s)):
        dt = times_s[i] - times_s[i - 1]
        if dt < 0:
            raise ValueError("times_s must not decrease")
        total += 0.5 * (watts[i] + watts[i - 1]) * dt
    return total


GPU_CHOICES = ("used", "all")


class Sources(list):
    """A list of sources that also carries what discovery could not measure (``problems``),
    so a window given these sources reports them too."""

    def __init__(self, sources=(), problems=(), gpu_selection: str = ""):
        super().__init__(sources)
        self.problems = list(problems)
        self.gpu_selection = gpu_selection


@dataclass
class Discovery:
    """What :func:`discover` found: the sources to use and what could not be measured.

    ``problems``: one text per component that should be measured but is not (a GPU seen but
    unreadable, a MIG instance); a window over these sources is then incomplete.
    ``gpu_selection``: which GPUs are counted and why."""

    sources: list[EnergySource]
    problems: list[str] = field(default_factory=list)
    rapl_status: str = "absent"  # "absent" | "permission denied" | "readable" | "unusable"
    rapl_reason: str = ""
    nvml_reason: str = ""
    gpu_selection: str = ""
    attribution: str = "process"
    apple_status: str = "absent"  # "absent" | "missing" | "unusable" | "readable"
    apple_reason: str = ""
    amd_status: str = "missing"  # "missing" | "absent" | "unusable" | "readable"
    amd_reason: str = ""


def discover(nvml_module=None, rapl_root=None, environ=None, gpus="used",
             attribution: str = "process", *, apple_module=None, amd_module=None,
             system: str | None = None, machine: str | None = None) -> Discovery:
    """Probe this machine and pick one source per component, falling back where needed.

    GPU: NVIDIA energy counter -> power sampling -> left out (with a problem note); without an
    NVIDIA GPU, AMD GPUs through ``amdsmi`` the same way (``greenlab.energy.amd``).
    CPU: RAPL package (+ dram) -> on Apple Silicon, the SoC's counters for CPU, GPU, DRAM and
    Neural Engine (``greenlab.energy.apple``) -> labelled estimate, with the reason in ``note``.
    ``apple_module``/``amd_module`` (stand-ins for ``zeus_apple_silicon``/``amdsmi``) and
    ``system``/``machine`` (``platform``'s answers) are for tests.
    ``gpus``: ``"used"`` (the CUDA devices this process uses, when torch has initialised CUDA;
    otherwise every visible GPU), ``"all"`` (every visible GPU) or a list of CUDA indices.
    ``attribution``: ``"process"`` or ``"machine"`` for the CPU estimate (RAPL is always
    machine-wide). ``nvml_module`` (a pynvml stand-in) and ``rapl_root`` (a fake powercap
    tree) are for tests.
    """
    if attribution not in ATTRIBUTIONS:
        raise ValueError(f"attribution must be 'process' or 'machine', got {attribution!r}")
    wanted = _check_gpus(gpus)
    lib = _nvml.get_nvml(nvml_module)
    sources: list[EnergySource] = []
    problems: list[str] = []
    selected, selection, select_problems = _select_gpus(lib, wanted, environ)
    problems += select_problems
    for gpu in selected:
        source, problem = _gpu_source(lib, gpu)
        if source is not None:
            sources.append(source)
        if problem:
            problems.append(problem)

    amd = probe_amd(amd_module) if not selected else None
    if amd is not None and amd.status == "readable":
        sources.extend(amd.sources)
        problems += amd.problems
        selection = "every AMD GPU amdsmi sees"

    rapl = probe_rapl(RAPL_ROOT if rapl_root is None else rapl_root)
    apple = probe_apple(apple_module, system, machine)
    if rapl.status == "readable":
        sources.extend(rapl.sources())
    elif apple.status == "readable":
        sources.extend(apple.sources)
    else:
        note = rapl.fallback_note() if apple.status == "absent" else f"{apple.reason}; using the CPU estimate"
        sources.append(CpuEstimateSource(note=note, attribution=attribution))
    amd_status, amd_reason = (amd.status, amd.reason) if amd is not None else ("not probed", "NVIDIA GPUs found")
    return Discovery(Sources(sources, problems, selection), problems, rapl.status, rapl.reason,
                     lib.reason, selection, attribution, apple.status, apple.reason, amd_status, amd_reason)


def default_sources(nvml_module=None, rapl_root=None, environ=None, gpus="used",
                    attribution: str = "process") -> Sources:
    """The sources this machine will use, one per component (see :func:`discover`); the
    returned list's ``problems`` travel into every window measured with it."""
    return discover(nvml_module, rapl_root, environ, gpus, attribution).sources


def used_cuda_devices(torch_module=None) -> list[int] | None:
    """CUDA indices this process uses: torch's current device and every device where torch's
    allocator holds memory; None when torch has not initialised CUDA. Reading allocator
    statistics creates no CUDA context."""
    torch = sys.modules.get("torch") if torch_module is None else torch_module
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return None
        used = {int(cuda.current_device())}
        for index in range(int(cuda.device_count())):
            if cuda.memory_reserved(index) > 0:
                used.add(index)
        return sorted(used)
    except Exception:
        return None


def _check_gpus(gpus):
    if isinstance(gpus, str):
        if gpus not in GPU_CHOICES:
            raise ValueError(f"gpus must be 'used', 'all' or a list of CUDA indices, got {gpus!r}")
        return gpus
    try:
        indices = list(gpus)
    except TypeError:
        raise ValueError(f"gpus must be 'used', 'all' or a list of CUDA indices, got {gpus!r}") from None
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices):
        raise ValueError(f"gpus: CUDA indices must be integers >= 0, got {gpus!r}")
    return sorted(set(indices))


def _select_gpus(lib: _nvml.Nvml, wanted, environ):
    """(VisibleGpus to measure, description, problems) for ``wanted`` ('used'/'all'/indices)."""
    visible = lib.visible_gpus(environ)
    if wanted == "used":
        used = used_cuda_devices()
        if used is None:
            return visible, ("every visible GPU (torch has not initialised CUDA in this process, "
                             "so which GPUs the work uses is unknown)"), []
        wanted, how = used, "the GPUs this process uses"
    elif wanted == "all":
        return visible, "every visible GPU", []
    else:
        how = "the GPUs asked for"
    problems = []
    by_index = {g.cuda_index: g for g in visible}
    uuids = _torch_uuids(wanted)
    chosen = []
    for index in wanted:
        gpu = by_index.get(index)
        if index in uuids and (gpu is None or gpu.mig == ""):
            nvml_index = lib.index_of_uuid(uuids[index])  # exact, whatever the order
            if nvml_index is not None:
                gpu = _nvml.VisibleGpu(index, nvml_index)
        elif gpu is not None and gpu.mig == "":
            order = lib.order_problem(environ)
            if order:
                problems.append(f"gpu:{index}: {order}")
        if gpu is None:
            why = lib.reason or "NVML does not list it"
            problems.append(f"gpu:{index}: used by this work but not readable through NVML "
                            f"({why}); its energy is not measured")
            continue
        chosen.append(gpu)
    return chosen, f"{how}: {', '.join(f'gpu:{i}' for i in wanted) or 'none'}", problems


def _torch_uuids(indices) -> dict:
    """CUDA index -> UUID from torch for ``indices``, when torch has initialised CUDA."""
    torch = sys.modules.get("torch")
    out = {}
    try:
        if torch is None or not torch.cuda.is_initialized():
            return out
        for index in indices:
            uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
            if uuid is not None:
                out[index] = str(uuid)
    except Exception:
        return {}
    return out


def _gpu_source(lib: _nvml.Nvml, gpu: _nvml.VisibleGpu):
    """(source or None, problem text) for one visible GPU."""
    component = gpu.component
    if gpu.mig:
        return None, (f"{component}: {gpu.mig} is a MIG instance; NVML measures energy and power "
                      "only for the whole physical GPU, which other instances share, so greenlab "
                      "does not count it: its energy is not measured")
    try:
        handle = lib.handle(gpu.nvml_index)
    except Exception as exc:
        return None, f"{component}: no NVML handle ({exc}); its energy is not measured"
    try:
        device_id = lib.uuid(handle)  # names the GPU across processes (distributed runs)
    except Exception:
        device_id = ""
    try:
        lib.energy_joules(handle)
        source = NvmlCounterSource(lib, handle, component)
        source.device_id = device_id
        return source, ""
    except Exception as exc:
        why = "not supported" if lib.is_not_supported(exc) else f"failed: {exc}"
        counter_note = f"energy counter {why}; integrating sampled power instead"
    try:
        lib.power_watts(handle)
        source = NvmlPowerSource(lib, handle, component, note=counter_note)
        source.device_id = device_id
        return source, ""
    except Exception as exc:
        return None, (f"{component}: visible but unreadable: neither the energy counter nor power "
                      f"readings work ({exc}); its energy is not measured")


def gap_aware_joules(times_s, watts, max_gap_s: float) -> tuple:
    """(joules, missing seconds) of a power trace (seconds, watts) by the trapezoid rule, without
    bridging two samples more than ``max_gap_s`` apart: the power between them is unknown, so
    their interval adds no energy and counts as missing (the figure is then incomplete)."""
    max_gap_s = validation.number("max_gap_s", max_gap_s, low=0, low_open=True)
    times_s = list(validation.items("times_s", times_s))
    watts = list(validation.items("watts", watts))
    if len(times_s) != len(watts):
        raise ValueError(f"times_s and watts differ in length ({len(times_s)} vs {len(watts)})")
    joules = missing = 0.0
    start = 0
    for i in range(1, len(times_s) + 1):
        if i == len(times_s) or times_s[i] - times_s[i - 1] > max_gap_s:
            joules += trapezoid_joules(times_s[start:i], watts[start:i])
            if i < len(times_s):
                missing += times_s[i] - times_s[i - 1]
            start = i
    return joules, missing
