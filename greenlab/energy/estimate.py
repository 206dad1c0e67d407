"""A labelled CPU energy estimate for machines where RAPL cannot be read.

Model (linear in utilisation)::

    E = P_idle * dt + (P_max - P_idle) * busy_cpu_seconds / n_cpus
    P_max  = TDP_per_core * cores
    P_idle = IDLE_FRACTION * P_max

``n_cpus`` is what this process may use (CPU affinity and cgroup quota, see
:mod:`greenlab.energy.cpus`), not the host's count; ``cores`` the physical cores behind them.

``attribution`` says whose busy time counts:

- ``"process"`` (default): the CPU time of the measuring process and its children (DataLoader
  workers, launched workers, the command under ``greenlab measure``), so another program on
  the same machine does not change the figure;
- ``"machine"``: all busy time on the machine (``/proc/stat``), everyone's work included.

In both modes the idle share of the CPUs this process may use is charged to the window.

Parameters and where they come from:

- ``TDP_per_core``: this processor's row of ``cited_tables/cpu_tdp.csv`` (TDP / cores) when it is
  listed there, else 12 W, the default ("Any" row) of the same table: the CPU table of the
  Green Algorithms calculator, Lannelongue, Grealey & Inouye, "Green Algorithms: Quantifying
  the Carbon Footprint of Computation", Advanced Science 2021, doi:10.1002/advs.202100707.
  TDP is a cooling design figure, not a measured draw, and the per-core figures in that table
  differ about six-fold between processors (3.8 to 23.8 W).
- ``IDLE_FRACTION = 0.2``: Cloud Carbon Footprint (Thoughtworks, 2021) uses SPECpower-derived
  averages of 0.74 W (idle) and 3.5 W (full load) per AWS vCPU, an idle share of about 0.21.
  Applying that share to a desktop or laptop CPU is an assumption of this model.

This is a model, not a measurement. Because its constants alone span several-fold, greenlab
states +-100 % (``rel_uncertainty`` 1.0): the true figure may be about half or double.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from greenlab.energy import cpus as _cpus
from greenlab.energy.source import EnergySource
from greenlab.base import tables
from greenlab.base.paths import tables_dir

TDP_PER_CORE_W = 12.0
IDLE_FRACTION = 0.2
ESTIMATE_REL_UNCERTAINTY = 1.0
ATTRIBUTIONS = ("process", "machine")
_NOT_BUSY = ("idle", "iowait", "steal", "guest", "guest_nice")  # guest time is inside user


class CpuEstimateSource(EnergySource):
    """CPU energy from the model above; always ``estimated=True``.

    ``n_logical``/``n_physical``: CPUs and cores to size the model by (default: this
    process's allocation). ``busy_seconds``: a function giving cumulative busy CPU seconds
    (default: by ``attribution``); ``cpu_times``: a function giving machine CPU-time fields
    (psutil-style), kept for machine attribution in tests.
    """

    name = "estimate"
    estimated = True
    rel_uncertainty = ESTIMATE_REL_UNCERTAINTY

    def __init__(self, component: str = "cpu", note: str = "", tdp_per_core_w: float | None = None,
                 idle_fraction: float = IDLE_FRACTION, n_logical: float | None = None,
                 n_physical: float | None = None, cpu_times=None, clock=time.monotonic,
                 attribution: str = "process", busy_seconds=None):
        if attribution not in ATTRIBUTIONS:
            raise ValueError(f"attribution must be 'process' or 'machine', got {attribution!r}")
        if tdp_per_core_w is None:
            tdp_per_core_w, self.tdp_source = lookup_tdp_per_core(cpu_model_name())
        else:
            self.tdp_source = "given"
        self.tdp_per_core_w = float(tdp_per_core_w)
        if self.tdp_per_core_w <= 0 or not 0.0 <= idle_fraction <= 1.0:
            raise ValueError("tdp_per_core_w must be > 0 and idle_fraction within [0, 1]")
        if n_logical is None or n_physical is None:
            alloc = _cpus.allocated_cpus()
            self.sizing = alloc.how
            n_logical = n_logical or alloc.cpus
            n_physical = n_physical or alloc.cores
        else:
            self.sizing = "given"
        if n_logical <= 0 or n_physical <= 0:
            raise ValueError("n_logical and n_physical must be positive")
        self.n_logical, self.n_physical = float(n_logical), float(n_physical)
        self.attribution = attribution
        self.max_watts = self.tdp_per_core_w * self.n_physical
        self.idle_watts = idle_fraction * self.max_watts
        if busy_seconds is not None:
            self._busy = busy_seconds
            self.busy_how = "given"
        elif cpu_times is not None:
            self._busy = lambda: _busy_of_fields(cpu_times())
            self.busy_how = "given CPU times"
        elif attribution == "process":
            tree = _cpus.ProcessTreeCpu(clock=clock)
            self._busy = tree.seconds
            self.refresh = tree.refresh  # windows look for new child processes at their edges
            self.busy_how = tree.how
        else:
            self._busy = _cpus.machine_busy_seconds
            self.busy_how = "/proc/stat"
        self._clock = clock
        self._lock = threading.Lock()
        self._t_last = clock()
        self._busy_last = self._busy()
        self._joules = 0.0
        whose = ("this process and its children" if attribution == "process"
                 else "all processes on the machine")
        model = (f"estimate ({attribution}): E = P_idle*dt + (P_max - P_idle)*busy_cpu_s/"
                 f"{self.n_logical:g} CPUs; busy time of {whose} ({self.busy_how}); "
                 f"P_max = {self.tdp_per_core_w:g} W/core x {self.n_physical:g} cores = "
                 f"{self.max_watts:g} W (per-core TDP: {self.tdp_source}); "
                 f"P_idle = {idle_fraction:g} x P_max = {self.idle_watts:g} W "
                 "(idle share ~0.21 in Cloud Carbon Footprint's SPECpower averages, 2021; "
                 f"assumed to apply here); CPUs: {self.sizing}; a model, uncertain by about a "
                 "factor of 2 (+-100 %) because per-core TDPs differ several-fold between CPUs")
        super().__init__(component, note, model)
        self.update_period_s = 1.0 / _cpus.clock_ticks_per_second()  # CPU times advance in ticks

    def read_joules(self) -> float:
        """Energy since this source was created, accumulated read by read: each interval's
        busy time is capped at what the CPUs could do in it (clock-tick rounding can report
        more), so no window, however short, reads above P_max."""
        with self._lock:
            now, busy_now = self._clock(), self._busy()
            dt = max(now - self._t_last, 0.0)
            busy = min(max(busy_now - self._busy_last, 0.0), self.n_logical * dt)
            self._joules += self.idle_watts * dt + (self.max_watts - self.idle_watts) * busy / self.n_logical
            self._t_last, self._busy_last = now, busy_now
            return self._joules

    def describe(self) -> dict:
        """What this source is, with how it attributes the CPU's power, the CPUs and cores it counts and how they
        were sized."""
        out = super().describe()
        out.update(attribution=self.attribution, cpus=self.n_logical, cores=self.n_physical,
                   sizing=self.sizing)
        return out


def lookup_tdp_per_core(model_name: str, table=None) -> tuple[float, str]:
    """(watts per core, where it comes from) for a processor name as ``/proc/cpuinfo`` writes
    it: its row of ``cited_tables/cpu_tdp.csv`` (Green Algorithms' table) when listed, else the
    table's default of 12 W."""
    if table is None:
        rows, unreadable = _tdp_table()
    else:
        rows, unreadable = table, None
    name = _normalise(model_name)
    best = None
    for row in rows:
        model = _normalise(row["model"])
        if model and re.search(r"(?<![\w-])" + re.escape(model) + r"(?![\w-])", name):
            if best is None or len(model) > len(_normalise(best["model"])):
                best = row
    if best is None:
        shown = model_name.strip() or "unknown"
        why = f"could not be read ({unreadable})" if unreadable else f"has no row for {shown!r}"
        return TDP_PER_CORE_W, (f"{TDP_PER_CORE_W:g} W, the default of Green Algorithms' CPU table "
                                f"(Lannelongue et al. 2021), which {why}")
    return float(best["tdp_per_core_w"]), (
        f"{best['model']}, {best['tdp_w']} W TDP / {best['cores']} cores in Green Algorithms' CPU "
        f"table (Lannelongue et al. {best['year']}; {best['source']})")


def cpu_model_name(proc_root="/proc") -> str:
    """The processor's name from ``/proc/cpuinfo`` ("" when unknown)."""
    try:
        with open(Path(proc_root) / "cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


_TABLE = None
TDP_COLUMNS = ("model", "tdp_w", "cores", "tdp_per_core_w", "source", "year")


def _tdp_table() -> tuple:
    """(rows of ``cited_tables/cpu_tdp.csv``, None), or ([], why) when the file is missing or damaged:
    the estimate then uses the default per-core power and its label says the table was unreadable."""
    global _TABLE
    if _TABLE is None:
        path = tables_dir() / "cpu_tdp.csv"
        try:
            rows = tables.read_table(path, TDP_COLUMNS)
            for row in rows:
                row["tdp_per_core_w"] = tables.number(row, "tdp_per_core_w", path, low=0.0)
                if row["tdp_per_core_w"] <= 0:
                    raise tables.DataTableError(f"{path} line {row['_line']}: tdp_per_core_w must be positive")
            _TABLE = (rows, None)
        except (OSError, tables.DataTableError) as exc:
            _TABLE = ([], str(exc))
    return _TABLE


def _normalise(text: str) -> str:
    text = re.sub(r"\((r|tm)\)", " ", str(text).lower())
    return " ".join(text.split())


def _busy_of_fields(times) -> float:
    fields = times._asdict() if hasattr(times, "_asdict") else dict(times)
    return sum(v for k, v in fields.items() if k not in _NOT_BUSY)
