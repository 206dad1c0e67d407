"""AMD GPU energy through ``amdsmi``, AMD's own Python bindings (ROCm).

``amdsmi.amdsmi_get_energy_count(handle)`` returns the GPU's energy accumulator and its
``counter_resolution`` (microjoules per tick); the key holding the accumulator is ``power`` in
older releases and ``energy_accumulator`` in newer ones. greenlab reads it as a cumulative
counter (``amd-counter``): energy = accumulator x resolution. Where the accumulator cannot be read,
``amdsmi_get_power_info(handle)`` gives the socket power in watts (``current_socket_power``, or
``average_socket_power`` on older parts; ``"N/A"`` where not reported), which greenlab integrates
(``amd-power``), as it does NVML power samples. Errors are ``amdsmi.AmdSmiException`` (and its
``AmdSmiLibraryException``). Like NVML, the figure is the whole GPU's, every process on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from greenlab.energy.source import CounterSource, EnergySource, SampledPowerSource

PACKAGE = "amdsmi"
DRM_ROOT = "/sys/class/drm"
AMD_PCI_VENDOR = "0x1002"
# AMD documents no accuracy for these counters; greenlab assumes +-5 %, as for NVML.
AMD_REL_UNCERTAINTY = 0.05
# The energy accumulator's update period is not documented here; greenlab assumes 1 ms ticks but
# warns on windows shorter than 10 x 100 ms, as for NVML, to err safe.
AMD_COUNTER_PERIOD_S = 0.1


class AmdCounterSource(CounterSource):
    """A GPU's energy accumulator (microjoules = ticks x ``counter_resolution``)."""

    name = "amd-counter"
    counter = "energy accumulator"
    rel_uncertainty = AMD_REL_UNCERTAINTY
    update_period_s = AMD_COUNTER_PERIOD_S
    attribution = "device"

    def __init__(self, smi, handle, component: str, note: str = ""):
        super().__init__(component, note)
        self._smi = smi
        self._handle = handle

    def raw_joules(self) -> float:
        return energy_joules(self._smi, self._handle)


class AmdPowerSource(SampledPowerSource):
    """A GPU's socket power, sampled and integrated (see :class:`SampledPowerSource`)."""

    name = "amd-power"
    rel_uncertainty = AMD_REL_UNCERTAINTY
    update_period_s = 1.0  # socket power is commonly a 1 s average; assumed

    def __init__(self, smi, handle, component: str, note: str = "", clock=time.monotonic):
        super().__init__(component, note, clock)
        self._smi = smi
        self._handle = handle

    def watts(self) -> float:
        return power_watts(self._smi, self._handle)


def energy_joules(smi, handle) -> float:
    """The accumulator in joules, whichever key this ``amdsmi`` release uses."""
    info = smi.amdsmi_get_energy_count(handle)
    ticks = info.get("energy_accumulator", info.get("power"))
    resolution = info.get("counter_resolution")
    if not isinstance(ticks, (int, float)) or not isinstance(resolution, (int, float)) or resolution <= 0:
        raise RuntimeError(f"amdsmi_get_energy_count gave no usable accumulator: {info!r}")
    return float(ticks) * float(resolution) / 1e6


def power_watts(smi, handle) -> float:
    """Socket power in watts (``current_socket_power``, else ``average_socket_power``)."""
    info = smi.amdsmi_get_power_info(handle)
    for key in ("current_socket_power", "socket_power", "average_socket_power"):
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    raise RuntimeError(f"amdsmi_get_power_info reported no socket power: {info!r}")


@dataclass
class AmdProbe:
    """What looking for AMD GPUs found: ``status`` is ``missing`` (no ``amdsmi``), ``absent``
    (no AMD GPU), ``unusable`` (the library failed) or ``readable``; ``problems``: GPUs seen
    but not readable."""

    status: str
    reason: str
    sources: list[EnergySource] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def probe_amd(module=None, drm_root: str = DRM_ROOT) -> AmdProbe:
    """One source per AMD GPU: the energy accumulator, else sampled power, else a problem.
    Without ``amdsmi``, whether an AMD GPU is there at all is read from ``drm_root``."""
    if module is None:
        if not amd_gpu_present(drm_root):
            return AmdProbe("absent", f"no AMD graphics device under {drm_root}")
        try:
            import amdsmi as module
        except ImportError:
            return AmdProbe("missing", f"an AMD GPU is present but {PACKAGE} is not installed "
                                       "(it comes with ROCm; pip install amdsmi matching your ROCm)")
        except Exception as exc:  # the bindings import but their C library is missing
            return AmdProbe("missing", f"{PACKAGE} could not load its library: {exc}")
    try:
        module.amdsmi_init()
        handles = list(module.amdsmi_get_processor_handles())
    except Exception as exc:
        return AmdProbe("unusable", f"amdsmi_init failed: {exc}")
    if not handles:
        return AmdProbe("absent", "amdsmi sees no AMD GPU")
    sources: list[EnergySource] = []
    problems: list[str] = []
    for index, handle in enumerate(handles):
        component = f"gpu:{index}"
        device_id = _uuid(module, handle)
        try:
            energy_joules(module, handle)
            source: EnergySource = AmdCounterSource(module, handle, component)
        except Exception as exc:
            note = f"energy accumulator unreadable ({exc}); integrating sampled power instead"
            try:
                power_watts(module, handle)
                source = AmdPowerSource(module, handle, component, note=note)
            except Exception as exc2:
                problems.append(f"{component}: AMD GPU visible but unreadable: neither the energy "
                                f"accumulator nor power readings work ({exc2}); its energy is not measured")
                continue
        source.device_id = device_id
        sources.append(source)
    return AmdProbe("readable" if sources else "unusable", f"{len(sources)} of {len(handles)} AMD GPU(s) readable",
                    sources, problems)


def amd_gpu_present(drm_root: str = DRM_ROOT) -> bool:
    """True when a graphics device of AMD's PCI vendor (0x1002) is listed under ``drm_root``."""
    for vendor in Path(drm_root).glob("card*/device/vendor"):
        try:
            if vendor.read_text().strip().lower() == AMD_PCI_VENDOR:
                return True
        except OSError:
            continue
    return False


def _uuid(module, handle) -> str:
    try:
        return str(module.amdsmi_get_gpu_device_uuid(handle))
    except Exception:
        return ""
