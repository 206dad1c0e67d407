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

from greenlab.base import validation

_shared = None  # the process-wide Nvml for the real pynvml, created on first use


@dataclass(frozen=True)
class VisibleGpu:
    """One GPU as CUDA sees it: ``cuda_index`` (``gpu:<cuda_index>``) -> ``nvml_index``.

    ``mig`` is the ``MIG-...`` entry when CUDA sees a MIG instance (``nvml_index`` is then
    None: NVML has no per-instance energy)."""

    cuda_index: int
    nvml_index: int | None
    mig: str = ""

    @property
    def component(self) -> str:
        return f"gpu:{self.cuda_index}"


class Nvml:
    """NVML calls used by greenlab, on the real ``pynvml`` or an injected stand-in.

    ``available`` is False (with ``reason``) when there is no driver or library: callers then
    simply see no GPUs.
    """

    def __init__(self, module=None):
        self.available = False
        self.reason = ""
        if module is not None and not callable(getattr(module, "nvmlInit", None)):
            # a stand-in without NVML's calls was taken for "no GPU" without a word
            raise validation.ArgumentTypeError(
                "nvml_module must be the pynvml module or a stand-in with its calls (nvmlInit, ...), "
                f"got {validation._show(module)}")
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
        return _number_read("the energy counter", self.module.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0

    def power_watts(self, handle) -> float:
        """``nvmlDeviceGetPowerUsage`` in watts (a 1 s average on Ampere+ other than A100)."""
        return _number_read("the power reading", self.module.nvmlDeviceGetPowerUsage(handle)) / 1000.0

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
        try:
            raw = _field_number(value)
        except (AttributeError, TypeError, ValueError) as exc:  # a field that holds no number: a faulty reading
            raise ValueError(f"NVML's instantaneous power field holds no number ({exc})") from None
        return _number_read("the instantaneous power field", raw) / 1000.0

    def is_not_supported(self, exc: BaseException) -> bool:
        cls = getattr(self.module, "NVMLError_NotSupported", None)
        return cls is not None and isinstance(exc, cls)

    def visible_gpus(self, environ=None) -> list[VisibleGpu]:
        """GPUs CUDA will number, honouring ``CUDA_VISIBLE_DEVICES`` (indices, GPU UUIDs or
        MIG instances). Plain indices are taken in NVML's (PCI bus) order; see
        :meth:`order_problem` for when CUDA's own order may differ."""
        count = self.device_count()
        if count == 0:
            return []
        env = os.environ if environ is None else environ
        spec = env.get("CUDA_VISIBLE_DEVICES")
        if spec is None:
            return [VisibleGpu(i, i) for i in range(count)]
        uuids = None
        chosen: list[int] = []
        found: list[VisibleGpu] = []
        for entry in (e.strip() for e in spec.split(",")):
            if entry.upper().startswith("MIG-"):
                found.append(VisibleGpu(len(found), None, mig=entry))
                continue
            index = None
            if entry.isdigit():
                index = int(entry)
            elif entry.upper().startswith("GPU-"):
                if uuids is None:
                    uuids = [self.uuid(self.handle(i)) for i in range(count)]
                matches = [i for i, u in enumerate(uuids) if u.lower().startswith(entry.lower())]
                index = matches[0] if len(matches) == 1 else None
            # CUDA stops at the first entry it cannot use (bad, out of range or repeated).
            if index is None or index >= count or index in chosen:
                break
            chosen.append(index)
            found.append(VisibleGpu(len(found), index))
        return found

    def order_problem(self, environ=None) -> str:
        """Why plain CUDA indices may not be NVML's order ("" when they are).

        CUDA numbers GPUs fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; NVML numbers
        them in PCI bus order. The two agree when every GPU is the same model (ties keep bus
        order); with mixed models only UUIDs (or PCI_BUS_ID order) identify a GPU."""
        env = os.environ if environ is None else environ
        if env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper() == "PCI_BUS_ID":
            return ""
        spec = env.get("CUDA_VISIBLE_DEVICES")
        entries = [e.strip() for e in spec.split(",")] if spec is not None else None
        if entries is not None and not any(e.isdigit() for e in entries):
            return ""  # UUIDs or MIG entries only: exact
        count = self.device_count()
        names = {self.name(self.handle(i)) for i in range(count)}
        if len(names) <= 1:
            return ""
        return ("CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ "
                f"({', '.join(sorted(names))}): CUDA numbers the fastest first, which NVML cannot "
                "reproduce, so gpu:N may name the wrong GPU; set CUDA_DEVICE_ORDER=PCI_BUS_ID or "
                "list GPU UUIDs in CUDA_VISIBLE_DEVICES")

    def index_of_uuid(self, uuid: str) -> int | None:
        """NVML index of the GPU whose UUID is ``uuid`` (with or without ``GPU-``), or None."""
        want = _bare_uuid(uuid)
        for i in range(self.device_count()):
            try:
                if _bare_uuid(self.uuid(self.handle(i))) == want:
                    return i
            except Exception:
                continue
        return None


def get_nvml(module=None) -> Nvml:
    """The NVML wrapper: for an injected ``module`` a fresh one, else one shared per process."""
    global _shared
    if module is not None:
        return Nvml(module)
    if _shared is None:
        _shared = Nvml()
    return _shared


def _bare_uuid(uuid) -> str:
    text = _text(uuid).strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _number_read(what: str, raw):
    """``raw`` when NVML gave a real number (milli-units), else a ValueError naming ``what``: a
    bool, None or text divided by 1000 would pass as a plausible reading."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"NVML's {what} is not a number ({raw!r})")
    return raw


def _field_number(value) -> float:
    """Number inside an ``nvmlFieldValue_t`` (or a stand-in with ``.value`` as a plain number)."""
    raw = value.value
    if isinstance(raw, bool):
        raise ValueError(f"a field value of {raw!r} is no number")
    if isinstance(raw, (int, float)):
        return float(raw)
    kinds = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(raw, kinds.get(getattr(value, "valueType", 1), "uiVal")))
