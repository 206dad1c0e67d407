"""How many CPUs this process may use, and how much CPU time it (or the machine) has spent.

Nothing here needs psutil: Linux answers through ``/proc`` and ``/sys/fs/cgroup``; elsewhere
the standard library's ``os.times`` is used, and psutil only when it is installed.

- :func:`allocated_cpus`: CPUs this process may use, from its CPU affinity and its cgroup's
  CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), not the host's count.
- :class:`ProcessTreeCpu`: CPU seconds of this process and its descendants (live ones read
  from ``/proc/<pid>/stat``, exited ones through the ``cutime``/``cstime`` the kernel adds to
  their parent when it reaps them).
- :func:`machine_busy_seconds`: busy CPU seconds of the whole machine (``/proc/stat``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")
LIST_S = 1.0  # look for new descendants at most this often between refresh() calls
RESCAN_S = 5.0  # re-read every process's parent this often (pid reuse)


def clock_ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


@dataclass(frozen=True)
class CpuAllocation:
    """CPUs this process may use: ``cpus`` (may be fractional under a quota), the host's
    ``host_logical`` / ``host_physical`` counts and ``how`` (what limited it)."""

    cpus: float
    host_logical: int
    host_physical: int
    how: str

    @property
    def cores(self) -> float:
        """Physical cores behind ``cpus`` (logical CPUs scaled by the host's cores/threads)."""
        return self.cpus * self.host_physical / max(self.host_logical, 1)


def allocated_cpus(proc_root=PROC, cgroup_root=CGROUP_ROOT, affinity=None) -> CpuAllocation:
    """CPUs this process may use: min(affinity, cgroup quota), with the reason."""
    host_logical = os.cpu_count() or 1
    host_physical = physical_cores(proc_root) or host_logical
    how = [f"host has {host_logical} logical CPUs"]
    cpus = float(host_logical)
    if affinity is None and hasattr(os, "sched_getaffinity"):
        try:
            affinity = len(os.sched_getaffinity(0))
        except OSError:
            affinity = None
    if affinity and affinity < cpus:
        cpus = float(affinity)
        how.append(f"affinity allows {affinity}")
    quota = cgroup_cpu_quota(proc_root, cgroup_root)
    if quota is not None and quota < cpus:
        cpus = quota
        how.append(f"cgroup quota allows {quota:g}")
    return CpuAllocation(cpus, host_logical, host_physical, ", ".join(how))


def cgroup_cpu_quota(proc_root=PROC, cgroup_root=CGROUP_ROOT) -> float | None:
    """CPUs allowed by this process's cgroup CPU quota (smallest along its path), or None."""
    proc_root, cgroup_root = Path(proc_root), Path(cgroup_root)
    try:
        lines = (proc_root / "self" / "cgroup").read_text().splitlines()
    except OSError:
        lines = []
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.strip().lstrip("/")
        if controllers == "":  # cgroup v2
            for d in _ancestors(cgroup_root, rel):
                limits.append(_v2_quota(d / "cpu.max"))
        elif "cpu" in controllers.split(","):
            for base in (cgroup_root / controllers, cgroup_root / "cpu", cgroup_root / "cpu,cpuacct"):
                for d in _ancestors(base, rel):
                    limits.append(_v1_quota(d))
    if not lines:  # no /proc: try the root files only
        limits += [_v2_quota(cgroup_root / "cpu.max"), _v1_quota(cgroup_root / "cpu")]
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


def physical_cores(proc_root=PROC) -> int | None:
    """Distinct (physical id, core id) pairs in ``/proc/cpuinfo``; psutil's count elsewhere."""
    try:
        text = (Path(proc_root) / "cpuinfo").read_text()
    except OSError:
        text = ""
    pairs, phys = set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            pairs.add((phys, value.strip()))
    if pairs:
        return len(pairs)
    try:
        import psutil

        return psutil.cpu_count(logical=False)
    except ImportError:
        return None


class ProcessTreeCpu:
    """Cumulative CPU seconds of process ``pid`` (default: this one) and all its descendants.

    ``how`` names the method: ``/proc`` (live descendants included), ``psutil`` (the same
    through psutil), or ``os.times`` (this process and its reaped children only: live child
    processes are not seen until they exit)."""

    def __init__(self, pid: int | None = None, proc_root=PROC, clock=time.monotonic):
        self.pid = os.getpid() if pid is None else int(pid)
        self.proc = Path(proc_root)
        self.tick = clock_ticks_per_second()
        self._clock = clock
        self._descendants: set[int] = set()
        self._scanned_at = -math.inf
        if (self.proc / str(self.pid) / "stat").exists():
            self.how = "/proc"
        else:
            try:
                import psutil  # noqa: F401

                self.how = "psutil"
            except ImportError:
                self.how = "os.times"

    def seconds(self) -> float:
        if self.how == "/proc":
            return self._proc_seconds()
        if self.how == "psutil":
            return _psutil_tree_seconds(self.pid)
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def refresh(self) -> None:
        """Look for new descendants now (measurement windows call this at their edges; between
        edges a new child is found within ``LIST_S``, its earlier CPU time included)."""
        self._listed_at = -math.inf

    def _proc_seconds(self) -> float:
        now = self._clock()
        if now - getattr(self, "_listed_at", -math.inf) >= LIST_S:
            self._descendants = self._scan()
            self._listed_at = now
        own = _read_stat(self.proc / str(self.pid) / "stat")
        if own is None:
            raise OSError(f"cannot read {self.proc / str(self.pid) / 'stat'}")
        ticks = own[1] + own[2]  # self + reaped children
        for pid in list(self._descendants):
            stat = _read_stat(self.proc / str(pid) / "stat")
            if stat is None:  # exited: its time is in its parent's cutime once reaped
                self._descendants.discard(pid)
            else:
                ticks += stat[1] + stat[2]
        return ticks / self.tick

    def _scan(self) -> set[int]:
        """This process's descendants. Only processes new since the last call are read (their
        parent never changes while they live, except to a reaper when theirs exits, which takes
        them out of our tree: checked every ``RESCAN_S``)."""
        now = self._clock()
        if now - self._scanned_at >= RESCAN_S:
            self._parents = {}  # full re-read now and then catches re-parented processes
            self._scanned_at = now
        parents = getattr(self, "_parents", {})
        pids = {int(e) for e in os.listdir(self.proc) if e.isdigit()}
        for pid in list(parents):
            if pid not in pids:
                del parents[pid]
        for pid in pids - parents.keys():
            stat = _read_stat(self.proc / str(pid) / "stat")
            if stat is not None:
                parents[pid] = stat[0]
        self._parents = parents
        found, frontier = set(), {self.pid}
        while frontier:
            frontier = {p for p, pp in parents.items() if pp in frontier and p not in found}
            found |= frontier
        return found


def machine_busy_seconds(proc_root=PROC) -> float:
    """Busy CPU seconds of the whole machine since boot (``/proc/stat``; psutil elsewhere).

    Busy = user + nice + system + irq + softirq (guest time is already inside user)."""
    try:
        first = (Path(proc_root) / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        first = []
    if first and first[0] == "cpu":
        values = [int(v) for v in first[1:]]
        busy = values[0] + values[1] + values[2] + sum(values[5:7])
        return busy / clock_ticks_per_second()
    try:
        import psutil
    except ImportError as exc:
        raise OSError("machine-wide CPU time needs /proc/stat or psutil") from exc
    t = psutil.cpu_times()._asdict()
    return sum(v for k, v in t.items() if k not in ("idle", "iowait", "steal", "guest", "guest_nice"))


# --- helpers -----------------------------------------------------------------------------

def _read_stat(path: Path):
    """(ppid, utime+stime, cutime+cstime) in clock ticks from a ``/proc/<pid>/stat``, or None."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and ')'
    try:
        return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    except (IndexError, ValueError):
        return None


def _psutil_tree_seconds(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc] + proc.children(recursive=True):
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    return total


def _ancestors(root: Path, rel: str):
    """``root/rel`` and each parent up to ``root`` (a quota anywhere above applies too)."""
    d = root / rel if rel else root
    while True:
        yield d
        if d == root or root not in d.parents:
            return
        d = d.parent


def _v2_quota(path: Path) -> float | None:
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def _v1_quota(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
