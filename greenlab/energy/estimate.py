"""A labelled CPU energy estimate for machines where RAPL cannot be read.

Model (linear in utilisation)::

    E = P_idle * dt + (P_max - P_idle) * busy_cpu_seconds / n_logical_cpus
    P_max  = TDP_per_core * n_physical_cores
    P_idle = IDLE_FRACTION * P_max

``busy_cpu_seconds`` is system-wide busy CPU time (all processes, from ``psutil.cpu_times``),
so other work on the machine is counted too.

Parameters and where they come from:

- ``TDP_per_core = 12 W``: the default per-core TDP ("Any" CPU row of ``TDP_cpu.csv``) of
  the Green Algorithms calculator, Lannelongue, Grealey & Inouye, "Green Algorithms:
  Quantifying the Carbon Footprint of Computation", Advanced Science 2021,
  doi:10.1002/advs.202100707. TDP is a cooling design figure, not a measured draw.
- ``IDLE_FRACTION = 0.2``: Cloud Carbon Footprint (Thoughtworks, 2021) uses SPECpower-derived
  averages of 0.74 W (idle) and 3.5 W (full load) per AWS vCPU, an idle share of about 0.21.
  Applying that share to a desktop or laptop CPU is an assumption of this model.

The estimate is uncertain by a large factor; greenlab states +-50 % (``rel_uncertainty``).
"""

from __future__ import annotations

import os
import threading
import time

from greenlab.energy.sources import EnergySource

TDP_PER_CORE_W = 12.0
IDLE_FRACTION = 0.2
ESTIMATE_REL_UNCERTAINTY = 0.5
_NOT_BUSY = ("idle", "iowait", "steal", "guest", "guest_nice")  # guest time is inside user


class CpuEstimateSource(EnergySource):
    """CPU energy from the model above; always ``estimated=True``."""

    name = "estimate"
    estimated = True
    rel_uncertainty = ESTIMATE_REL_UNCERTAINTY

    def __init__(self, component: str = "cpu", note: str = "", tdp_per_core_w: float | None = None,
                 idle_fraction: float = IDLE_FRACTION, n_logical: int | None = None,
                 n_physical: int | None = None, cpu_times=None, clock=time.monotonic):
        import psutil

        self.n_logical = n_logical or psutil.cpu_count(logical=True) or os.cpu_count() or 1
        self.n_physical = n_physical or psutil.cpu_count(logical=False) or self.n_logical
        self.tdp_per_core_w = TDP_PER_CORE_W if tdp_per_core_w is None else float(tdp_per_core_w)
        if self.tdp_per_core_w <= 0 or not 0.0 <= idle_fraction <= 1.0:
            raise ValueError("tdp_per_core_w must be > 0 and idle_fraction within [0, 1]")
        self.max_watts = self.tdp_per_core_w * self.n_physical
        self.idle_watts = idle_fraction * self.max_watts
        self._cpu_times = cpu_times or psutil.cpu_times
        self._clock = clock
        self._lock = threading.Lock()
        self._t_last = clock()
        self._busy_last = self._busy_seconds()
        self._joules = 0.0
        model = (f"estimate: E = P_idle*dt + (P_max - P_idle)*busy_cpu_s/{self.n_logical} "
                 "logical CPUs; "
                 f"P_max = {self.tdp_per_core_w:g} W/core x {self.n_physical} cores = "
                 f"{self.max_watts:g} W (per-core TDP default of Green Algorithms, Lannelongue "
                 f"et al. 2021); P_idle = {idle_fraction:g} x P_max = {self.idle_watts:g} W "
                 "(idle share ~0.21 in Cloud Carbon Footprint's SPECpower averages, 2021; "
                 "assumed to apply here); busy time is system-wide")
        super().__init__(component, note, model)
        try:
            tick = os.sysconf("SC_CLK_TCK")
        except (ValueError, OSError, AttributeError):
            tick = 100
        self.update_period_s = 1.0 / tick  # CPU times advance in clock ticks

    def read_joules(self) -> float:
        """Energy since this source was created, accumulated read by read: each interval's
        busy time is capped at what the CPUs could do in it (clock-tick rounding can report
        more), so no window, however short, reads above P_max."""
        with self._lock:
            now, busy_now = self._clock(), self._busy_seconds()
            dt = max(now - self._t_last, 0.0)
            busy = min(max(busy_now - self._busy_last, 0.0), self.n_logical * dt)
            self._joules += self.idle_watts * dt + (self.max_watts - self.idle_watts) * busy / self.n_logical
            self._t_last, self._busy_last = now, busy_now
            return self._joules

    def _busy_seconds(self) -> float:
        times = self._cpu_times()
        fields = times._asdict() if hasattr(times, "_asdict") else dict(times)
        return sum(v for k, v in fields.items() if k not in _NOT_BUSY)
