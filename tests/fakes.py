"""Fake hardware shared by the tests: real greenlab logic runs over it.

- ``SlopeSource``: an estimated CPU meter rising at a known rate;
- ``FakePynvml`` / ``FakeGpu``: a pynvml stand-in whose readings tests script (numbers,
  callables, or None for "not supported" / "fails").
"""

import time

from greenlab.energy.sources import EnergySource


class SlopeSource(EnergySource):
    """A fake estimated CPU meter whose counter rises at a known rate: joules = watts x seconds."""

    name = "estimate"
    estimated = True

    def __init__(self, watts: float = 10.0):
        super().__init__("cpu", note="test counter", model=f"{watts} W x time")
        self.watts = watts

    def read_joules(self):
        return self.watts * time.perf_counter()


class FakeNVMLError(Exception):
    pass


class FakeNotSupported(FakeNVMLError):
    pass


class FakeLibraryNotFound(FakeNVMLError):
    pass


class FakeGpu:
    def __init__(self, uuid, arch=7, energy_mj=None, power_mw=100_000, instant_mw=None, name=""):
        self.uuid, self.arch, self.name = uuid, arch, name
        self.energy_mj = energy_mj  # None -> counter not supported; a callable -> reading
        self.power_mw = power_mw  # number, callable, or None -> power fails too
        self.instant_mw = instant_mw


class FakeField:
    def __init__(self, value):
        self.nvmlReturn, self.valueType, self.value = 0, 1, value


class FakePynvml:
    NVMLError = FakeNVMLError
    NVMLError_NotSupported = FakeNotSupported
    NVMLError_LibraryNotFound = FakeLibraryNotFound
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_DEVICE_ARCH_PASCAL = 4
    NVML_DEVICE_ARCH_VOLTA = 5
    NVML_DEVICE_ARCH_AMPERE = 7

    def __init__(self, gpus, driver=True):
        self.gpus, self.driver = gpus, driver

    def nvmlInit(self):
        if not self.driver:
            raise FakeLibraryNotFound("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return next(g for g in self.gpus if g.uuid == uuid)

    def nvmlDeviceGetName(self, h):
        return (h.name or "Fake GPU " + h.uuid[-4:]).encode()

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlDeviceGetArchitecture(self, h):
        return h.arch

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("Mem", (), {"total": 16 * 2**30})()

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 250_000

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if h.energy_mj is None:
            raise FakeNotSupported("Not Supported")
        return h.energy_mj()

    def nvmlDeviceGetPowerUsage(self, h):
        if h.power_mw is None:
            raise FakeNVMLError("Unknown Error")
        return h.power_mw() if callable(h.power_mw) else h.power_mw

    def nvmlDeviceGetFieldValues(self, h, fields):
        if h.instant_mw is None:
            raise FakeNotSupported("Not Supported")
        value = h.instant_mw() if callable(h.instant_mw) else h.instant_mw
        return [FakeField(value)]
