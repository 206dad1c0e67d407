"""Measurement windows: energy between two instants, per component, with provenance.

    with gl.measure("train") as m:
        train()
    print(m.result.summary())

A window reads every source at its start and end ("counter at end minus counter at start").
CUDA work is synchronised at both edges when ``torch.cuda`` is initialised, so asynchronous
kernels belong to the window that launched them. Windows nest: a window opened inside another
is attached to it as a child.
"""

from __future__ import annotations

import contextvars
import functools
import math
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field

from greenlab.energy.sources import EnergySource, discover


class ShortWindowWarning(UserWarning):
    """A window was shorter than the update period of one of its sources."""


@dataclass
class ComponentEnergy:
    """Energy of one component over one window (joules, seconds, watts)."""

    component: str
    source: str
    joules: float
    seconds: float
    watts: float
    estimated: bool
    rel_uncertainty: float
    note: str = ""
    model: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class IdlePower:
    """Mean idle power per component (watts), measured over ``seconds``."""

    watts_by_component: dict
    seconds: float
    sources: dict = field(default_factory=dict)

    @property
    def watts(self) -> float:
        return sum(self.watts_by_component.values())

    def to_dict(self) -> dict:
        return {"watts_by_component": dict(self.watts_by_component), "seconds": self.seconds,
                "sources": dict(self.sources), "watts": self.watts}


@dataclass
class Measurement:
    """The result of one window. ``joules`` is the sum over components."""

    label: str
    seconds: float
    components: dict
    idle_watts: float | None = None
    warnings: list = field(default_factory=list)
    children: list = field(default_factory=list)

    @property
    def joules(self) -> float:
        return sum(c.joules for c in self.components.values())

    @property
    def watts(self) -> float:
        """Mean power over the window, watts."""
        return self.joules / self.seconds if self.seconds > 0 else float("nan")

    @property
    def estimated(self) -> bool:
        return any(c.estimated for c in self.components.values())

    @property
    def sources(self) -> dict:
        return {name: c.source for name, c in self.components.items()}

    @property
    def joules_above_idle(self) -> float | None:
        """Energy above idle power (joules), or None when no idle figure was given."""
        if self.idle_watts is None:
            return None
        return self.joules - self.idle_watts * self.seconds

    def summary(self) -> str:
        """One readable line: time, energy, power, and where each figure comes from."""
        parts = [f"{self.label}: {self.seconds:.3g} s, {self.joules:.4g} J ({self.watts:.3g} W)"]
        if self.idle_watts is not None:
            parts.append(f"{self.joules_above_idle:.4g} J above idle "
                         f"({self.idle_watts:.3g} W idle)")
        detail = ", ".join(
            f"{c.component} {c.joules:.4g} J {c.source}"
            f"{' (estimate)' if c.estimated and c.source != 'estimate' else ''}"
            f" +-{c.rel_uncertainty:.0%}" for c in self.components.values())
        parts.append(f"[{detail or 'no components'}]")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "seconds": self.seconds,
            "joules": self.joules,
            "watts": self.watts,
            "estimated": self.estimated,
            "sources": self.sources,
            "idle_watts": self.idle_watts,
            "joules_above_idle": self.joules_above_idle,
            "components": {k: c.to_dict() for k, c in self.components.items()},
            "warnings": list(self.warnings),
            "children": [c.to_dict() for c in self.children],
        }

    def __repr__(self) -> str:
        return f"<Measurement {self.summary()}>"


_current: contextvars.ContextVar = contextvars.ContextVar("greenlab_window", default=None)


class EnergyWindow:
    """One named window; see :func:`measure`. ``result`` is the latest Measurement and
    ``results`` keeps every one (one per call when used as a decorator)."""

    def __init__(self, label: str = "window", idle: IdlePower | None = None,
                 sources: list | None = None, sync: bool = True):
        if idle is not None and not isinstance(idle, IdlePower):
            raise ValueError("idle must be an IdlePower from measure_idle(), or None")
        self.label = str(label)
        self.idle = idle
        self.sync = bool(sync)
        self._given_sources = list(sources) if sources is not None else None
        self.result: Measurement | None = None
        self.results: list[Measurement] = []
        self._run: _Run | None = None

    # --- start/stop ---
    def start(self) -> "EnergyWindow":
        if self._run is not None:
            raise RuntimeError(f"window {self.label!r} is already running; stop() it first")
        self._run = _Run(self)
        self._run.begin()
        return self

    def stop(self) -> Measurement:
        if self._run is None:
            raise RuntimeError(f"window {self.label!r} was not started")
        run, self._run = self._run, None
        result = run.end()
        self.result = result
        self.results.append(result)
        return result

    @property
    def running(self) -> bool:
        return self._run is not None

    # --- context manager ---
    def __enter__(self) -> "EnergyWindow":
        return self.start()

    def __exit__(self, *exc) -> bool:
        if self._run is not None:
            self.stop()
        return False

    # --- decorator ---
    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            run = _Run(self)  # one run per call, so recursion and threads do not collide
            run.begin()
            try:
                return fn(*args, **kwargs)
            finally:
                self.result = run.end()
                self.results.append(self.result)

        wrapper.window = self
        return wrapper


def measure(label: str = "window", idle: IdlePower | None = None, sources: list | None = None,
            sync: bool = True, distributed: bool | None = False) -> EnergyWindow:
    """A measurement window: context manager, decorator, or ``start()``/``stop()``.

    ``sources``: EnergySource objects (default: what this machine offers, see
    ``default_sources()``). ``idle``: an :class:`IdlePower` to report energy above idle too.
    ``sync``: synchronise CUDA at the window edges when torch.cuda is initialised.
    ``distributed``: True for a window every rank of a ``torch.distributed`` job opens, reduced
    across ranks (see ``greenlab.energy.distributed``); None for that whenever a process group
    is initialised; False for this process alone.
    """
    if distributed is None or distributed:
        from greenlab.energy.distributed import CollectiveWindow, process_group_active

        if distributed or process_group_active():
            return CollectiveWindow(label, idle=idle, sources=sources, sync=sync)
    return EnergyWindow(label, idle=idle, sources=sources, sync=sync)


def measure_idle(seconds: float = 2.0, sources: list | None = None) -> IdlePower:
    """Measure mean power per component while this process sleeps for ``seconds``."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    window = EnergyWindow("idle", sources=sources, sync=True)
    with window:
        time.sleep(seconds)
    r = window.result
    return IdlePower({k: c.watts for k, c in r.components.items()}, r.seconds, r.sources)


class _Run:
    """State of one running window (so a decorated function can be re-entered safely)."""

    def __init__(self, window: EnergyWindow):
        self.window = window
        self.warnings: list[str] = []
        self.children: list[Measurement] = []
        self.parent: _Run | None = None
        self._token = None
        self._poller: _Poller | None = None

    def begin(self) -> None:
        if self.window._given_sources is not None:
            self.sources: list[EnergySource] = self.window._given_sources
        else:
            found = discover()
            self.sources = found.sources
            self.warnings.extend(found.problems)
        self.parent = _current.get()
        self._token = _current.set(self)
        try:
            self._poller = _Poller.start_for(self.sources)
            if self.window.sync:
                _cuda_sync()
            self.start_joules = {s.component: s.read_joules() for s in self.sources}
            self.t0 = time.perf_counter()
        except BaseException:
            self._finish_threads()
            raise

    def end(self) -> Measurement:
        try:
            if self.window.sync:
                _cuda_sync()
            t1 = time.perf_counter()
            end_joules = {}
            for s in self.sources:
                try:
                    end_joules[s.component] = s.read_joules()
                except Exception as exc:
                    self.warnings.append(f"{s.component}: {s.name} failed at window end ({exc}); "
                                         "left out of this result")
        finally:
            self._finish_threads()
        seconds = t1 - self.t0
        components = {}
        for s in self.sources:
            if s.component not in end_joules:
                continue
            joules = end_joules[s.component] - self.start_joules[s.component]
            components[s.component] = ComponentEnergy(
                s.component, s.name, joules, seconds, joules / seconds if seconds > 0 else 0.0,
                s.estimated, s.rel_uncertainty, s.note, s.model)
        self._warn_if_short(seconds)
        idle = self.window.idle
        idle_watts = None
        if idle is not None:
            idle_watts = sum(idle.watts_by_component.get(k, 0.0) for k in components)
        result = Measurement(self.window.label, seconds, components, idle_watts,
                             self.warnings, self.children)
        if self.parent is not None:
            self.parent.children.append(result)
        return result

    def _warn_if_short(self, seconds: float) -> None:
        slowest = max(self.sources, key=lambda s: s.update_period_s, default=None)
        if slowest is not None and seconds < slowest.update_period_s:
            text = (f"window {self.window.label!r} lasted {seconds * 1000:.1f} ms, shorter than "
                    f"the {slowest.update_period_s * 1000:.0f} ms update period of "
                    f"{slowest.component} ({slowest.name}); its energy is unreliable. Repeat the work in a loop inside "
                    "one window (e.g. 100 times) and divide.")
            self.warnings.append(text)
            warnings.warn(text, ShortWindowWarning, stacklevel=_caller_stacklevel())

    def _finish_threads(self) -> None:
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        if self._token is not None:
            try:
                _current.reset(self._token)
            except ValueError:  # stopped in another context (e.g. another notebook cell)
                _current.set(self.parent)
            self._token = None


class _Poller:
    """Background thread that calls ``poll()`` on sources that need it during a window."""

    def __init__(self, sources: list[EnergySource], interval_s: float):
        self.sources = sources
        self.interval_s = interval_s
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="greenlab-window-poller",
                                        daemon=True)

    @classmethod
    def start_for(cls, sources: list[EnergySource]):
        polled = [s for s in sources if s.poll_interval_s]
        if not polled:
            return None
        poller = cls(polled, min(s.poll_interval_s for s in polled))
        poller._thread.start()
        return poller

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                for s in self.sources:
                    s.poll()
            except Exception as exc:  # the window's end read will report the failure
                self.error = exc
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _caller_stacklevel() -> int:
    """stacklevel that points a warning at the first frame outside this module."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


def _cuda_sync() -> None:
    """Wait for queued CUDA work on every device, if torch has already initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if not torch.cuda.is_initialized():
            return
        for index in range(torch.cuda.device_count()):
            torch.cuda.synchronize(index)
    except Exception as exc:  # a broken CUDA context must not hide the window's result
        warnings.warn(f"CUDA synchronise failed at a window edge: {exc}", RuntimeWarning)
