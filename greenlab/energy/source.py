"""The base class of every energy source: one component (``"cpu"``, ``"dram"``, ``"gpu:0"``)
read by one method, with its uncertainty, update period, attribution and recorded faults."""

from __future__ import annotations

import math
import threading
import time
from greenlab.base.units import plain_number

# No single component a greenlab source reads draws more than this (the largest accelerators draw
# about 1 kW, a CPU package well under); a counter that moved faster was reset or is faulty. Generous
# on purpose: it catches impossible readings, never a busy device.
MAX_PLAUSIBLE_WATTS = 5000.0


def impossible_reading(value, unit: str = "J") -> str:
    """Why ``value`` cannot be a reading of energy or power ("" when it can): not a number, not
    finite, or negative. The one check every counter and power source applies to what it reads."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"not a number ({value!r})"
    if not math.isfinite(value):
        return f"{value} {unit}"
    if value < 0:
        return f"negative ({plain_number(value, 6)} {unit})"
    return ""


def implausible_step(joules: float, seconds: float, update_period_s: float = 0.0,
                     max_watts: float = MAX_PLAUSIBLE_WATTS) -> str:
    """Why a counter's rise of ``joules`` over ``seconds`` cannot be energy drawn ("" when it can):
    more than ``max_watts`` for the time between the reads (plus one update period and a second of
    slack, for a counter that updates in steps)."""
    limit = max_watts * (max(0.0, seconds) + update_period_s + 1.0)
    if joules > limit:
        return (f"jumped by {plain_number(joules, 6)} J in {plain_number(seconds)} s, more than "
                f"{plain_number(max_watts)} W could draw (a counter reset or fault)")
    return ""


class EnergySource:
    """Base class: one component (``"cpu"``, ``"dram"``, ``"gpu:0"``) read by one method."""

    name = "abstract"
    estimated = False
    rel_uncertainty = 0.0  # fractional, e.g. 0.05 for +-5 %
    update_period_s = 0.0  # how often the underlying reading changes
    poll_interval_s: float | None = None  # call poll() this often while measuring, or None
    # whose energy the figure holds: "device" (a whole GPU, every process on it), "machine"
    # (a whole CPU package), "process" (this process and its children)
    attribution = "machine"
    MAX_FAULTS = 100

    def __init__(self, component: str, note: str = "", model: str = ""):
        self.component = component
        self.note = note  # why this source was chosen when it is a fallback
        self.model = model  # for estimates: the formula and its parameters
        self._faults: list[str] = []
        self._fault_count = 0

    @property
    def fault_count(self) -> int:
        """How many faults (lost readings, counter resets) this source has recorded."""
        return getattr(self, "_fault_count", 0)

    def faults_since(self, count: int) -> list[str]:
        """Fault texts recorded after ``fault_count`` was ``count`` (oldest first)."""
        faults = getattr(self, "_faults", [])
        new = self.fault_count - count
        return faults[-new:] if new > 0 else []

    def record_fault(self, text: str) -> None:
        """Note something that made this source's total miss energy (shown by windows)."""
        if not hasattr(self, "_faults"):
            self._faults, self._fault_count = [], 0
        self._faults = (self._faults + [f"{self.component}: {self.name}: {text}"])[-self.MAX_FAULTS:]
        self._fault_count += 1

    def read_joules(self) -> float:
        """Energy in joules since an arbitrary origin; only differences matter."""
        raise NotImplementedError

    def poll(self) -> None:
        """Keep the counter honest between reads (sample power, track wrap-around)."""

    def refresh(self) -> None:
        """Bring slow bookkeeping up to date before a window-edge read (e.g. look for new
        child processes); cheap reads in between may skip it."""

    def describe(self) -> dict:
        """Plain-data summary for reports and ``doctor()``."""
        return {
            "component": self.component,
            "source": self.name,
            "attribution": self.attribution,
            "estimated": self.estimated,
            "rel_uncertainty": self.rel_uncertainty,
            "update_period_s": self.update_period_s,
            "note": self.note,
            "model": self.model,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.component} {self.name}>"


class CounterSource(EnergySource):
    """A device's own cumulative energy counter, kept monotonic: a step backwards (a driver
    reload, a reset) is recorded as a fault and the energy between those two reads is missing.
    Subclasses give :meth:`raw_joules`, the counter as the device reports it."""

    counter = "energy counter"  # how the fault message names it
    max_plausible_watts = MAX_PLAUSIBLE_WATTS  # a rise faster than this is a reset or a fault

    def __init__(self, component: str, note: str = "", clock=time.monotonic):
        super().__init__(component, note)
        self._lock = threading.Lock()
        self._raw: float | None = None
        self._t: float | None = None
        self._total = 0.0
        self._started = False
        self._clock = clock

    def raw_joules(self) -> float:
        raise NotImplementedError

    def read_joules(self) -> float:
        """The counter's total since the first read; an impossible reading (not finite, negative)
        or an impossible rise (faster than ``max_plausible_watts``) is recorded as a fault, adds
        nothing, and the next good reading starts afresh."""
        with self._lock:
            raw = self.raw_joules()
            now = self._clock()
            bad = impossible_reading(raw)
            if bad:
                self.record_fault(f"{self.counter} gave an impossible reading ({bad}): the energy since "
                                  "the last good reading is missing")
                self._raw, self._started = None, True
                return self._total
            raw = float(raw)
            if self._raw is None:
                if not self._started:
                    self._total = raw
                self._started = True
            elif raw < self._raw:
                self.record_fault(f"{self.counter} went backwards ({plain_number(self._raw, 6)} J -> "
                                  f"{plain_number(raw, 6)} J; driver reload or reset?): the energy "
                                  "between those reads is missing")
            else:
                jump = implausible_step(raw - self._raw, now - self._t, self.update_period_s,
                                        self.max_plausible_watts)
                if jump:
                    self.record_fault(f"{self.counter} {jump}: the energy between those reads is missing")
                else:
                    self._total += raw - self._raw
            self._raw, self._t = raw, now
            return self._total


class SampledPowerSource(EnergySource):
    """Energy by integrating power samples (:meth:`watts`) with the trapezoid rule, for devices
    without a usable energy counter. A failed reading is never bridged: the time from the last
    good sample to the next good one is left out and recorded as a fault with its length."""

    poll_interval_s = 0.05
    attribution = "device"
    max_plausible_watts = MAX_PLAUSIBLE_WATTS  # a sample above this is a faulty reading

    def __init__(self, component: str, note: str = "", clock=time.monotonic):
        super().__init__(component, note)
        self._clock = clock
        self._lock = threading.Lock()
        self._joules = 0.0
        self._last: tuple[float, float] | None = None  # (t_s, watts)
        self._gap_from: float | None = None  # time of the last good sample before failures
        self._gap_error = ""

    def watts(self) -> float:
        raise NotImplementedError

    def poll(self) -> None:
        self.read_joules()

    def read_joules(self) -> float:
        with self._lock:
            try:
                watts = self.watts()
                bad = impossible_reading(watts, "W") or (
                    f"{plain_number(watts)} W, more than {plain_number(self.max_plausible_watts)} W"
                    if watts > self.max_plausible_watts else "")
                if bad:
                    raise ValueError(f"impossible power reading: {bad}")
                watts = float(watts)
            except Exception as exc:
                if self._last is not None:
                    self._gap_from, self._last = self._last[0], None
                    self._gap_error = str(exc) or type(exc).__name__
                raise
            now = self._clock()
            if self._last is not None:
                t_prev, w_prev = self._last
                self._joules += 0.5 * (watts + w_prev) * max(0.0, now - t_prev)
            elif self._gap_from is not None:
                self.record_fault(f"power readings failed ({self._gap_error}); "
                                  f"{plain_number(now - self._gap_from)} s were not sampled and their "
                                  "energy is missing")
                self._gap_from = None
            self._last = (now, watts)
            return self._joules
