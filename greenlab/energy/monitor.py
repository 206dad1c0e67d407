"""PowerMonitor: watch power in the background (for live meters and plots).

    with gl.PowerMonitor(hz=10) as mon:
        train()
    trace = mon.samples()

One daemon thread reads every source ``hz`` times a second into a bounded ring buffer of
``window_s`` seconds. Each read is a few file or library calls (tens of microseconds), so at
10 Hz watching costs far below 1 % of a core; ``benchmarks/monitor_overhead.py`` measures it.
"""

from __future__ import annotations

import atexit
import collections
import math
import threading
import time
import weakref
from dataclasses import dataclass

from greenlab.energy.sources import EnergySource, discover
from greenlab.energy.measure import check_sources

MAX_HZ = 1000.0
MAX_SAMPLES = 1_000_000
_running: "weakref.WeakSet[PowerMonitor]" = weakref.WeakSet()
_atexit_registered = False


@dataclass(frozen=True)
class PowerSample:
    """One reading: ``t_s`` since start; per-component ``watts`` (mean since the previous
    sample) and ``joules`` (cumulative since start); their totals."""

    t_s: float
    watts: dict
    joules: dict
    total_watts: float
    total_joules: float


class PowerMonitor:
    """Background power monitor; see the module docstring.

    ``hz``: samples per second, 0 < hz <= 1000. ``window_s``: seconds of history kept.
    ``error`` holds the exception that stopped the thread, if any (a failing source or
    subscriber stops it cleanly). ``problems`` lists what is not being measured (discovery
    problems, a source that failed, counter resets), naming the component and the reason;
    ``complete`` is False when there are any.
    """

    def __init__(self, hz: float = 10, window_s: float = 60, sources: list | None = None):
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isfinite(hz) \
                or not 0 < hz <= MAX_HZ:
            raise ValueError(f"hz must be a number with 0 < hz <= {MAX_HZ:g}, got {hz!r}")
        if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) \
                or not math.isfinite(window_s) or window_s <= 0:
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s!r}")
        maxlen = max(1, math.ceil(hz * window_s))
        if maxlen > MAX_SAMPLES:
            raise ValueError(f"hz * window_s must be at most {MAX_SAMPLES} samples, got {maxlen}")
        self.hz = float(hz)
        self.window_s = float(window_s)
        self.problems: list[str] = []
        if sources is None:
            found = discover()
            sources, self.problems = found.sources, list(found.problems)
        else:
            self.problems = list(getattr(sources, "problems", []))
            sources = check_sources(sources)
        self._sources: list[EnergySource] = list(sources)
        self._buffer: collections.deque = collections.deque(maxlen=maxlen)
        self._subscribers: list = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    # --- public ---
    @property
    def sources(self) -> dict:
        """Component -> source name, e.g. ``{"cpu": "estimate"}``."""
        return {s.component: s.name for s in self._sources}

    @property
    def estimated(self) -> bool:
        """True when any of the monitor's sources gives estimates rather than readings."""
        return any(s.estimated for s in self._sources)

    @property
    def complete(self) -> bool:
        """True when no source has failed so far."""
        return not self.problems

    @property
    def running(self) -> bool:
        """True while the sampling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "PowerMonitor":
        """Start sampling (no-op if already running). Clears the previous trace."""
        global _atexit_registered
        with self._lock:
            if self.running:
                return self
            self._buffer.clear()
            self.error = None
            self._stop_event = threading.Event()
            self._thread = threading.Thread(target=self._loop, args=(self._stop_event,),
                                            name="greenlab-power-monitor", daemon=True)
            self._thread.start()
            _running.add(self)
            if not _atexit_registered:
                atexit.register(_stop_all)
                _atexit_registered = True
        return self

    def stop(self) -> "PowerMonitor":
        """Stop sampling and wait for the thread to end (no-op if not running)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop_event.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        _running.discard(self)
        return self

    def samples(self) -> list[PowerSample]:
        """The kept samples, oldest first (at most ``hz * window_s``)."""
        return list(self._buffer)

    def latest(self) -> PowerSample | None:
        """The newest sample, or None before the first."""
        return self._buffer[-1] if self._buffer else None

    def subscribe(self, callback) -> None:
        """Call ``callback(sample)`` on the monitor thread after every sample."""
        if not callable(callback):
            raise ValueError("callback must be callable")
        with self._lock:
            self._subscribers = self._subscribers + [callback]

    def unsubscribe(self, callback) -> None:
        """Stop calling ``callback`` after each sample (no-op when it was not subscribed)."""
        with self._lock:
            self._subscribers = [c for c in self._subscribers if c != callback]

    def __enter__(self) -> "PowerMonitor":
        return self.start()

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False

    # --- thread ---
    def _loop(self, stop_event: threading.Event) -> None:
        period = 1.0 / self.hz
        faults = {s.component: s.fault_count for s in self._sources}
        try:
            start = {s.component: self._read(s) for s in self._sources}
            t0 = time.perf_counter()
            prev_t, prev = 0.0, {k: 0.0 for k in start}
            tick = 1
            while not stop_event.wait(max(0.0, t0 + tick * period - time.perf_counter())):
                t = time.perf_counter() - t0
                joules = {s.component: self._read(s) - start[s.component] for s in self._sources}
                for s in self._sources:
                    if s.fault_count != faults[s.component]:
                        self.problems.extend(s.faults_since(faults[s.component]))
                        faults[s.component] = s.fault_count
                dt = t - prev_t
                watts = {k: (joules[k] - prev[k]) / dt if dt > 0 else 0.0 for k in joules}
                sample = PowerSample(t, watts, joules, sum(watts.values()), sum(joules.values()))
                self._buffer.append(sample)
                for callback in self._subscribers:
                    callback(sample)
                prev_t, prev = t, joules
                # skip ticks already missed rather than bursting to catch up
                tick = max(tick + 1, math.floor((time.perf_counter() - t0) / period) + 1)
        except BaseException as exc:  # a dead poller is never a complete trace
            self.error = exc
            if not any("monitoring stopped" in p for p in self.problems):
                self.problems.append(f"monitor: sampling stopped ({type(exc).__name__}: {exc}); "
                                     "the trace ends there")
        finally:
            _running.discard(self)


    def _read(self, source: EnergySource) -> float:
        try:
            return source.read_joules()
        except Exception as exc:
            self.problems.append(f"{source.component}: {source.name} failed "
                                 f"({type(exc).__name__}: {exc}); monitoring stopped")
            raise


def _stop_all() -> None:
    for monitor in list(_running):
        monitor.stop()
