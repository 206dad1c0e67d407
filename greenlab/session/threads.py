"""How many CPU threads PyTorch uses here: decided once, when ``gl.setup()`` runs, and said why.

PyTorch's default is one intra-op thread per core. Its OpenMP threads wait for each other at
the end of every parallel operation, so when another program holds one of those cores the
whole operation waits for the thread that lost its core: on a busy 2-core machine the same
deterministic run then varies several-fold in time and energy. The choice here:

- ``GREENLAB_THREADS=N`` (or ``gl.setup(threads=N)``) wins; ``GREENLAB_THREADS=auto`` (or
  unset) decides as below;
- on a machine with 2 cores or fewer: 1 thread, whatever the load at start-up (a neighbour that
  starts later cannot be seen in advance) and whatever the wait policy;
- on a larger one, with ``OMP_WAIT_POLICY=PASSIVE`` in the environment (``make lab``, ``greenlab
  lab`` and ``make test`` set it), one thread per core this process may use: a thread that has to
  wait sleeps instead of spinning, so it leaves its core to the thread that has the work;
- on a larger one with spinning threads, the cores this process may use (CPU affinity and
  container quota, physical cores only) less the cores other programs keep busy when ``setup()``
  runs (read from ``/proc/stat``, or the load average where there is none), a core more than half
  in use counting as taken; at least 1.

Measured with ``benchmarks/threads.py`` (lesson 10's baseline, fresh processes taking turns) on a
2-core AMD EPYC, 2026-12-01/02. Quiet, 3 runs per choice: 1 thread 2.07 s and 29.7 J (estimate),
2 passive threads 2.22 s and 39.3 J, 2 spinning threads 1.47 s and 35.1 J. Beside one busy
program, 5 runs: 1 thread 2.40 s and 34 J, 2 passive 2.89 s and 41 J, 2 spinning 6.21 s and 106 J.
On 2 cores one thread costs the least energy quiet and beside a neighbour, and is the fastest
beside one; two spinning threads are faster only on an idle machine, and several-fold slower and
uneven as soon as another program runs. On a machine shared with many other jobs (load average
11-18), two spinning threads ran over 100 s every time, against 15-37 s for one thread and 7-23 s
for two passive ones (one run in five of each went over 100 s at the busiest moment): there, more
threads buy a larger share of an oversubscribed machine; ``GREENLAB_THREADS=2`` asks for that.

``OMP_WAIT_POLICY`` is read by OpenMP once, when PyTorch loads it, before any greenlab code
runs, so it can only come from the environment the process (the notebook kernel) starts with.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from greenlab.energy import cpus

SMALL_MACHINE_CORES = 2  # at or below this many cores, one thread (see the module docstring)
BUSY_SAMPLE_S = 0.3  # how long setup() watches the machine's CPU time, seconds
TAKEN_FRACTION = 0.5  # a core busier than this (with other programs) counts as taken
MAX_THREADS = 1024


@dataclass(frozen=True)
class ThreadChoice:
    """``threads`` for ``torch.set_num_threads`` and ``reason``, one phrase saying why."""

    threads: int
    reason: str


def choose(environ, cores: float, busy_cores: float | None, requested=None) -> ThreadChoice:
    """Decide the thread count (pure: no reading of the machine, so it can be tested).

    ``environ``: the environment (reads ``GREENLAB_THREADS``); ``cores``: CPUs this process may
    use (physical cores, may be fractional under a quota); ``busy_cores``: CPUs other programs
    keep busy, or None when unknown; ``requested``: ``setup(threads=...)``, which wins.
    """
    if requested is not None:
        return ThreadChoice(_count("threads", requested), "set by setup(threads=...)")
    raw = str(environ.get("GREENLAB_THREADS", "") or "").strip()
    if raw and raw.lower() != "auto":
        value = int(raw) if raw.isdigit() else raw
        return ThreadChoice(_count("GREENLAB_THREADS", value), f"GREENLAB_THREADS={raw}")
    if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not cores > 0:
        raise ValueError(f"cores must be a positive number of CPUs, got {cores!r}")
    usable = max(1, int(math.floor(cores + 1e-9)))
    if usable <= SMALL_MACHINE_CORES:
        return ThreadChoice(1, f"{usable} core(s): one thread costs the least energy here and keeps runs "
                               "repeatable when another program is busy (GREENLAB_THREADS=N to change)")
    if passive_waiting(environ):
        return ThreadChoice(usable, f"{usable} cores, OpenMP waiting passively "
                                    "(OMP_WAIT_POLICY=PASSIVE): a thread that loses its core to "
                                    "another program sleeps instead of spinning")
    if busy_cores is None or not math.isfinite(busy_cores) or busy_cores < 0:
        return ThreadChoice(usable - 1, f"{usable} cores, the load of other programs unknown: one "
                                        "left for them (GREENLAB_THREADS=N to change)")
    taken = int(math.floor(busy_cores + (1 - TAKEN_FRACTION)))
    threads = max(1, min(usable, usable - taken))
    return ThreadChoice(threads, f"{usable} cores, {busy_cores:.1f} kept busy by other programs "
                                 "at start-up (GREENLAB_THREADS=N to change)")


def passive_waiting(environ) -> bool:
    """True when ``OMP_WAIT_POLICY`` in ``environ`` asks OpenMP to wait passively. (OpenMP read
    it when PyTorch loaded; set in the environment a process starts with, it was read.)"""
    return str(environ.get("OMP_WAIT_POLICY", "")).strip().upper() == "PASSIVE"


def busy_cores(interval_s: float = BUSY_SAMPLE_S) -> float | None:
    """CPUs that other programs keep busy, averaged over ``interval_s`` seconds (machine-wide
    busy CPU time from ``/proc/stat`` less this process's own); the 1-minute load average where
    ``/proc/stat`` cannot be read; None when neither can."""
    try:
        m0, c0, t0 = cpus.machine_busy_seconds(), time.process_time(), time.perf_counter()
        time.sleep(interval_s)
        m1, c1, t1 = cpus.machine_busy_seconds(), time.process_time(), time.perf_counter()
        return max(0.0, ((m1 - m0) - (c1 - c0)) / max(t1 - t0, 1e-9))
    except OSError:
        pass
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def usable_cores() -> float:
    """Physical cores this process may use (CPU affinity and cgroup quota)."""
    return max(cpus.allocated_cpus().cores, 1.0)


def _count(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{name} must be a whole number of threads from 1 to {MAX_THREADS} "
                         f"(GREENLAB_THREADS may also be 'auto'), got {value!r}")
    return value
