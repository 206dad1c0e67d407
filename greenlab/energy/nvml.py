"""A thin wrapper over NVML (the ``pynvml`` module from the nvidia-ml-py package).

Everything that touches NVML goes through :class:`Nvml`, so tests can hand in a fake module
with the same function names. Facts this module relies on (NVML API reference):

- ``nvmlDeviceGetTotalEnergyConsumption`` returns millijoules since the driver was loaded;
  Volta and newer only (``NVMLError_NotSupported`` elsewhere).
- ``nvmlDeviceGetPowerUsage`` returns milliwatts. On Ampere and newer GPUs except the GA100
  (A100) it is an average over the last second; the instantaneous reading is the field
  ``NVML_FI_DEV_POWER_INSTANT`` of ``nvmlDeviceGetFieldValues``.
- NVML numbers GPUs in PCI bus order; CUDA numbers the GPUs named by ``CUDA_VISIBLE_DEVICES``.
  Plain integers there are NVML indices only when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (CUDA's
  default order puts the fastest GPU first); UUIDs are exact.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_shared = None  # the process-wide Nvml for the real pynvml, created on first use


@dataclass(frozen=True)
class VisibleGpu:
    """One GPU as CUDA sees it: ``cuda_index`` (``gpu:<cuda_index>``) -> ``nvml_index``."""

    cuda_index: int
    nvml_index: int


class Nvml:
    """NVML calls used by greenlab, on the real ``pynvml`` or an injected stand-in.

    ``available`` is False (with ``reason``) when there is no driver or library: callers then
    simply see no GPUs.
    """

    def __init__(self, module=None):
        self.available = False
        self.reason = ""
        self.module = module
        if self.module is None:
            try:
                import pynvml
            except ImportError:
                self.reason = "pynvml (package nvidia-ml-py) is not installed"
                return
            self.module = pynvml
        try:
            self.module.nvmlInit()
        except Exception as exc:  # no library / no driver: NVMLError subclasses or OSError
            self.reason = f"NVML not available: {exc}"
            return
        self.available = True

    # --- discovery ---
    def device_count(self) -> int:
        return int(self.module.nvmlDeviceGetCount()) if self.available else 0

    def handle(self, nvml_index: int):
        return self.module.nvmlDeviceGetHandleByIndex(nvml_index)

    def handle_by_uuid(self, uuid: str):
        return self.module.nvmlDeviceGetHandleByUUID(uuid)

    def uuid(self, handle) -> str:
        return _text(self.module.nvmlDeviceGetUUID(handle))

    def name(self, handle) -> str:
        return _text(self.module.nvmlDeviceGetName(handle))

    def architecture(self, handle) -> str:
        """Architecture name such as ``"ampere"``, or ``"unknown"``."""
        try:
            code = self.module.nvmlDeviceGetArchitecture(handle)
        except Exception:
            return "unknown"
        for attr in dir(self.module):
            if attr.startswith("NVML_DEVICE_ARCH_") and getattr(self.module, attr) == code:
                return attr[len("NVML_DEVICE_ARCH_"):].lower()
        return "unknown"

    def memory_total_bytes(self, handle) -> int | None:
        try:
            return int(self.module.nvmlDeviceGetMemoryInfo(handle).total)
        except Exception:
            return None

    def power_limit_watts(self, handle) -> float | None:
        try:
            return self.module.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
        except Exception:
            return None

    # --- readings ---
    def energy_joules(self, handle) -> float:
        """Total energy counter (Volta+), joules. Raises the NVML error when unsupported."""
        return self.module.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0

    def power_watts(self, handle) -> float:
        """``nvmlDeviceGetPowerUsage`` in watts (a 1 s average on Ampere+ other than A100)."""
        return self.module.nvmlDeviceGetPowerUsage(handle) / 1000.0

    def instant_power_watts(self, handle) -> float | None:
        """Instantaneous power from ``NVML_FI_DEV_POWER_INSTANT``, watts; None if unavailable."""
        field = getattr(self.module, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None or not hasattr(self.module, "nvmlDeviceGetFieldValues"):
            return None
        try:
            value = self.module.nvmlDeviceGetFieldValues(handle, [field])[0]
        except Exception:
            return None
        if getattr(value, "nvmlReturn", 0) != 0:
            return None
        return _field_number(value) / 1000.0

    def is_not_supported(self, exc: BaseException) -> bool:
        cls = getattr(self.module, "NVMLError_NotSupported", None)
        return cls is not None and isinstance(exc, cls)

    def visible_gpus(self, environ=None) -> list[VisibleGpu]:
        """GPUs CUDA will number, honouring ``CUDA_VISIBLE_DEVICES`` (indices or GPU UUIDs)."""
        count = self.device_count()
        if count == 0:
            return []
        env = os.environ if environ is None else environ
        spec = env.get("CUDA_VISIBLE_DEVICES")
        if spec is None:
            return [VisibleGpu(i, i) for i in range(count)]
        uuids = None
        chosen: list[int] = []
        for entry in (e.strip() for e in spec.split(",")):
            index = None
            if entry.isdigit():
                index = int(entry)
            elif entry.upper().startswith("GPU-"):
                if uuids is None:
                    uuids = [self.uuid(self.handle(i)) for i in range(count)]
                matches = [i for i, u in enumerate(uuids) if u.lower().startswith(entry.lower())]
                index = matches[0] if len(matches) == 1 else None
            # CUDA stops at the first entry it cannot use (bad, MIG-, out of range or repeated).
            if index is None or index >= count or index in chosen:
                break
            chosen.append(index)
        return [VisibleGpu(cuda, nvml) for cuda, nvml in enumerate(chosen)]


def get_nvml(module=None) -> Nvml:
    """The NVML wrapper: for an injected ``module`` a fresh one, else one shared per process."""
    global _shared
    if module is not None:
        return Nvml(module)
    if _shared is None:
        _shared = Nvml()
    return _shared


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _field_number(value) -> float:
    """Number inside an ``nvmlFieldValue_t`` (or a stand-in with ``.value`` as a plain number)."""
    raw = value.value
    if isinstance(raw, (int, float)):
        return float(raw)
    kinds = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(raw, kinds.get(getattr(value, "valueType", 1), "uiVal")))
