"""The base class of every energy source: one component (``"cpu"``, ``"dram"``, ``"gpu:0"``)
read by one method, with its uncertainty, update period, attribution and recorded faults."""

from __future__ import annotations


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
