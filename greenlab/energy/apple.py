"""Apple Silicon energy from the SoC's own counters, through ``zeus-apple-silicon``.

On M-series Macs, ``zeus_apple_silicon.AppleEnergyMonitor().get_cumulative_energy()`` returns the
energy each part of the SoC used since the monitor was made, in millijoules (integers), from
Apple's IOReport energy model, without sudo: ``cpu_total_mj`` (every core and its managers),
``gpu_mj`` (and ``gpu_sram_mj``), ``dram_mj`` and ``ane_mj`` (the Neural Engine); a field is None
where the chip does not report it. greenlab reads each as its own cumulative counter:
components ``cpu``, ``gpu:0``, ``dram`` and ``ane``, source name ``apple-soc``.

What is not measured there: the display, storage, networking, the power adapter's losses; the
counters are the SoC's own estimate of its energy (a model inside the chip, as RAPL's are on Intel
and AMD CPUs), so greenlab states the same 10 % as for RAPL, as an assumption.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from greenlab.energy.source import CounterSource

SOURCE_NAME = "apple-soc"
PACKAGE = "zeus-apple-silicon"
APPLE_REL_UNCERTAINTY = 0.10  # an assumption, as for RAPL: a model inside the chip
APPLE_UPDATE_PERIOD_S = 0.001  # IOReport samples on request; greenlab assumes 1 ms resolution
# component -> the metrics fields summed into it (missing fields are skipped, all missing = absent)
FIELDS = {"cpu": ("cpu_total_mj",), "gpu:0": ("gpu_mj", "gpu_sram_mj"), "dram": ("dram_mj",),
          "ane": ("ane_mj",)}


class AppleSocSource(CounterSource):
    """One component of an Apple Silicon SoC, read from the monitor's cumulative millijoules."""

    name = SOURCE_NAME
    counter = "SoC energy counter"
    rel_uncertainty = APPLE_REL_UNCERTAINTY
    update_period_s = APPLE_UPDATE_PERIOD_S

    def __init__(self, monitor, component: str, fields: tuple[str, ...], note: str = ""):
        super().__init__(component, note)
        self.attribution = "device" if component.startswith("gpu") else "machine"
        self._monitor = monitor
        self._fields = fields

    def raw_joules(self) -> float:
        """The component's fields summed, in joules; a field set that stops being reported raises."""
        metrics = self._monitor.get_cumulative_energy()
        values = [getattr(metrics, f, None) for f in self._fields]
        if all(v is None for v in values):
            raise RuntimeError(f"{PACKAGE} no longer reports {', '.join(self._fields)}")
        return sum(float(v) for v in values if v is not None) / 1000.0


@dataclass
class AppleProbe:
    """What looking for Apple Silicon counters found: ``status`` is ``absent`` (not an Apple
    Silicon Mac), ``missing`` (the library is not installed), ``unusable`` or ``readable``."""

    status: str
    reason: str
    sources: list[AppleSocSource] = field(default_factory=list)


def probe_apple(module=None, system: str | None = None, machine: str | None = None) -> AppleProbe:
    """Find the SoC's counters. ``module`` replaces ``zeus_apple_silicon`` and ``system`` /
    ``machine`` replace ``platform.system()`` / ``platform.machine()`` (for tests)."""
    system = platform.system() if system is None else system
    machine = platform.machine() if machine is None else machine
    if system != "Darwin" or machine != "arm64":
        return AppleProbe("absent", f"not an Apple Silicon Mac ({system} {machine})")
    if module is None:
        try:
            import zeus_apple_silicon as module
        except ImportError:
            return AppleProbe("missing", f"{PACKAGE} is not installed: pip install {PACKAGE} "
                                         "(make lab installs it on Apple Silicon)")
    try:
        monitor = module.AppleEnergyMonitor()
        metrics = monitor.get_cumulative_energy()
    except Exception as exc:  # the library's own error for a chip or OS it cannot read
        return AppleProbe("unusable", f"{PACKAGE} could not read the SoC's counters: {exc}")
    sources = [AppleSocSource(monitor, component, names) for component, names in FIELDS.items()
               if any(getattr(metrics, n, None) is not None for n in names)]
    if not sources:
        return AppleProbe("unusable", f"{PACKAGE} reports no energy field on this chip")
    return AppleProbe("readable", "SoC counters for " + ", ".join(s.component for s in sources), sources)
