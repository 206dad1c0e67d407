"""Measurement windows: energy between two instants, per component, with provenance.

    with gl.measure("train") as m:
        train()
    print(m.result.summary())

A window reads every source at its start and end ("counter at end minus counter at start").
CUDA work is synchronised at both edges when ``torch.cuda`` is initialised, so asynchronous
kernels belong to the window that launched them; only the devices this process uses are
synchronised, so no CUDA context is created on anyone else's GPU. Windows nest: a window opened
inside another is attached to it as a child.

Nothing is lost silently: a component that could not be read (at the start or end, by the
background poller, a counter that went backwards, a GPU seen but unreadable) is listed in
``Measurement.problems`` and the result is ``complete == False``; ``summary()`` says
"incomplete" and names the component and the reason.
"""

from __future__ import annotations

import contextvars
import functools
import math
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field, fields, replace

from greenlab.base.units import plain_number
from greenlab.energy.sources import EnergySource, _check_gpus, discover, used_cuda_devices
from greenlab.base import limits, validation
from greenlab.energy.estimate import ATTRIBUTIONS
from greenlab.base.validation import ArgumentTypeError


SHORT_WINDOW_PERIODS = 10  # warn when a window lasts fewer update periods than this


class ShortWindowWarning(UserWarning):
    """A window lasted fewer than ``SHORT_WINDOW_PERIODS`` update periods of a source."""


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
    attribution: str = ""  # "device", "machine" or "process": whose energy this is

    def to_dict(self) -> dict:
        """The component's fields as a plain dict."""
        return dict(self.__dict__)


@dataclass
class IdlePower:
    """Mean idle power per component (watts), measured over ``seconds``."""

    watts_by_component: dict
    seconds: float
    sources: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # what the idle window could not measure

    def __post_init__(self):
        if not isinstance(self.watts_by_component, dict):
            raise validation.ArgumentTypeError(
                "watts_by_component must be a dict {component: idle watts}, e.g. {'cpu': 5.0}, "
                f"got {type(self.watts_by_component).__name__}")
        checked = {}
        for name, watts in self.watts_by_component.items():
            validation.text("watts_by_component keys (component names)", name, allow_empty=False)
            checked[name] = validation.number(f"watts_by_component[{name!r}] (idle watts)", watts,
                                              low=0, high=1e6)
        self.watts_by_component = checked
        self.seconds = limits.duration("seconds", self.seconds, low=0)
        # the provenance a report prints: a number or a string here was accepted and printed as is
        if not isinstance(self.sources, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                         for k, v in self.sources.items()):
            raise validation.ArgumentTypeError(
                "sources must be a dict {component: source name}, e.g. {'cpu': 'RAPL'}, "
                f"got {validation._show(self.sources)}")
        if not isinstance(self.problems, (list, tuple)) or not all(isinstance(p, str) for p in self.problems):
            raise validation.ArgumentTypeError(
                f"problems must be a list of strings, got {validation._show(self.problems)}")
        self.problems = list(self.problems)

    @property
    def watts(self) -> float:
        """Idle power of all components together, watts."""
        return sum(self.watts_by_component.values())

    def to_dict(self) -> dict:
        """The idle reading as plain values, its total watts included."""
        return {"watts_by_component": dict(self.watts_by_component), "seconds": self.seconds,
                "sources": dict(self.sources), "watts": self.watts, "problems": list(self.problems)}


@dataclass
class Measurement:
    """The result of one window. ``joules`` is the sum over the components measured.

    ``problems``: one text per lost or doubtful figure ("component: what happened"); when there
    are any the result is not ``complete`` and ``joules`` may be too small.

    ``reliable_from_s``: the shortest window its sources read reliably (``SHORT_WINDOW_PERIODS``
    update periods of the slowest source, seconds; None when unknown). ``short`` is True when
    this window lasted less (a ``ShortWindowWarning`` was raised): verdicts read it and say
    "not measurable at this size" instead of a figure."""

    label: str
    seconds: float
    components: dict
    idle_watts: float | None = None
    warnings: list = field(default_factory=list)
    children: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    reliable_from_s: float | None = None

    @property
    def short(self) -> bool:
        """True when the window lasted fewer than ``SHORT_WINDOW_PERIODS`` update periods of its
        slowest source: its energy is not measurable at this size."""
        return self.is_short(self.seconds)

    def is_short(self, seconds: float | None) -> bool:
        """True when a span of ``seconds`` inside this window (e.g. the time to a target) is
        shorter than its sources read reliably."""
        return (self.reliable_from_s is not None and seconds is not None
                and seconds < self.reliable_from_s)

    @property
    def complete(self) -> bool:
        """True when every component was measured for the whole window with no fault."""
        return not self.problems

    @property
    def joules(self) -> float:
        """Energy of all components together, joules."""
        return sum(c.joules for c in self.components.values())

    @property
    def watts(self) -> float:
        """Mean power over the window, watts."""
        return self.joules / self.seconds if self.seconds > 0 else float("nan")

    @property
    def estimated(self) -> bool:
        """True when any component's figure is an estimate rather than a reading."""
        return any(c.estimated for c in self.components.values())

    @property
    def sources(self) -> dict:
        """The source of each component's figure: {component: source}."""
        return {name: c.source for name, c in self.components.items()}

    @property
    def joules_above_idle(self) -> float | None:
        """Energy above idle power (joules), or None when no idle figure was given."""
        if self.idle_watts is None:
            return None
        return self.joules - self.idle_watts * self.seconds

    def summary(self) -> str:
        """One readable line: time, energy, power, where each figure comes from, and what is
        missing ("incomplete: ...") when something could not be measured."""
        parts = [f"{self.label}: {plain_number(self.seconds)} s, {plain_number(self.joules, 4)} J "
                 f"({plain_number(self.watts)} W)"]
        if self.idle_watts is not None:
            parts.append(f"{plain_number(self.joules_above_idle, 4)} J above idle "
                         f"({plain_number(self.idle_watts)} W idle)")
        if self.problems:
            parts.append("incomplete: " + "; ".join(self.problems))
        parts.append(f"[{component_text(self.components.values()) or 'no components'}]")
        return "; ".join(parts)

    def with_problems(self, extra) -> "Measurement":
        """This measurement with the texts of ``extra`` added to its problems (once each): a
        figure that lost something after the window closed (a meter failing mid-run) says so here,
        in the one place every result reads it from."""
        added = [str(p) for p in extra if str(p) not in self.problems]
        return replace(self, problems=list(self.problems) + added) if added else self

    def to_dict(self) -> dict:
        """The measurement as plain JSON-safe values."""
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
            "complete": self.complete,
            "problems": list(self.problems),
            "reliable_from_s": self.reliable_from_s,
            "short": self.short,
            "children": [c.to_dict() for c in self.children],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Measurement":
        """The measurement ``to_dict`` wrote (as stored in the results log or passed between
        processes); the derived figures (joules, watts, flags) are computed again from it."""
        known = {f.name for f in fields(ComponentEnergy)}
        return cls(label=data["label"], seconds=data["seconds"],
                   components={k: ComponentEnergy(**{n: v for n, v in c.items() if n in known})
                               for k, c in data["components"].items()},
                   idle_watts=data.get("idle_watts"), warnings=list(data.get("warnings", [])),
                   children=[cls.from_dict(c) for c in data.get("children", [])],
                   problems=list(data.get("problems", [])),
                   reliable_from_s=data.get("reliable_from_s"))

    def __repr__(self) -> str:
        return f"<Measurement {self.summary()}>"


def component_text(components) -> str:
    """``cpu 3 J estimate (process) +-100%, gpu:0 40 J nvml-counter +-5%`` for ComponentEnergy."""
    out = []
    for c in components:
        how = c.source
        if c.estimated and c.source != "estimate":
            how += " (estimate)"
        elif c.source == "estimate" and c.attribution:
            how += f" ({c.attribution})"
        out.append(f"{c.component} {plain_number(c.joules, 4)} J {how} +-{c.rel_uncertainty:.0%}")
    return ", ".join(out)


_current: contextvars.ContextVar = contextvars.ContextVar("greenlab_window", default=None)


class EnergyWindow:
    """One named window; see :func:`measure`. ``result`` is the latest Measurement and
    ``results`` keeps every one (one per call when used as a decorator)."""

    def __init__(self, label: str = "window", idle: IdlePower | None = None,
                 sources: list | None = None, sync: bool = True, gpus="used",
                 attribution: str = "process"):
        if idle is not None and not isinstance(idle, IdlePower):
            raise ArgumentTypeError(f"idle must be an IdlePower from measure_idle(), or None, "
                                    f"got {type(idle).__name__}")
        if attribution not in ATTRIBUTIONS:
            raise ValueError(f"attribution must be 'process' or 'machine', got {attribution!r}")
        self.label = str(label)
        self.idle = idle
        self.sync = bool(sync)
        self.gpus = _check_gpus(gpus)
        self.attribution = attribution
        self._given_sources = check_sources(sources) if sources is not None else None
        self._given_problems = list(getattr(sources, "problems", []))
        self.result: Measurement | None = None
        self.results: list[Measurement] = []
        self._run: _Run | None = None

    # --- start/stop ---
    def start(self) -> "EnergyWindow":
        """Begin the window (RuntimeError when it is already running); returns the window."""
        if self._run is not None:
            raise RuntimeError(f"window {self.label!r} is already running; stop() it first")
        run = _Run(self)
        run.begin()  # an interrupt here (Ctrl-C during the first read) leaves the window not running
        self._run = run
        return self

    def stop(self) -> Measurement:
        """End the window; the ``Measurement`` of it, also kept as ``result``."""
        if self._run is None:
            raise RuntimeError(f"window {self.label!r} was not started")
        run, self._run = self._run, None
        result = run.end()
        self.result = result
        self.results.append(result)
        return result

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
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


def check_sources(sources, name: str = "sources") -> list:
    """``sources`` as a list, or a TypeError naming the argument: a list (or other iterable)
    of energy sources, each with ``read_joules()``, a ``component`` and a ``name``."""
    if isinstance(sources, (str, bytes, dict)) or not hasattr(sources, "__iter__"):
        raise ArgumentTypeError(f"{name} must be a list of energy sources "
                                f"(greenlab.energy.default_sources()), got {type(sources).__name__}")
    out = list(sources)
    for i, s in enumerate(out):
        if not (callable(getattr(s, "read_joules", None)) and isinstance(getattr(s, "component", None), str)
                and isinstance(getattr(s, "name", None), str)):
            raise ArgumentTypeError(f"{name}[{i}] must be an energy source (with read_joules(), "
                                    f"a component and a name), got {type(s).__name__}")
    return out


def measure_idle(seconds: float = 2.0, sources: list | None = None) -> IdlePower:
    """Measure mean power per component while this process sleeps for ``seconds``."""
    if isinstance(seconds, bool) or not (isinstance(seconds, (int, float)) and math.isfinite(seconds)
                                         and 0 < seconds <= 86_400):
        raise ValueError(f"seconds must be a number in (0, 86400] (a day at most), got {seconds!r}")
    window = EnergyWindow("idle", sources=sources, sync=True)
    with window:
        time.sleep(seconds)
    r = window.result
    watts, problems = {}, list(r.problems)
    for k, c in r.components.items():
        if math.isfinite(c.watts) and c.watts >= 0:
            watts[k] = c.watts
        else:
            problems.append(f"{k}: idle power read {c.watts} W, which is not a power; left out")
    return IdlePower(watts, r.seconds, r.sources, problems)


class _Run:
    """State of one running window (so a decorated function can be re-entered safely)."""

    def __init__(self, window: EnergyWindow):
        self.window = window
        self.warnings: list[str] = []
        self.problems: list[str] = []
        self.children: list[Measurement] = []
        self.parent: _Run | None = None
        self._token = None
        self._poller: _Poller | None = None

    def begin(self) -> None:
        if self.window._given_sources is not None:
            sources = self.window._given_sources
            self.problems.extend(self.window._given_problems)
        else:
            found = discover(gpus=self.window.gpus, attribution=self.window.attribution)
            sources = found.sources
            self.problems.extend(found.problems)
        if not sources:
            self.problems.append("no energy sources were given, so nothing was measured: "
                                 "0 J here is not a measurement")
        self.parent = _current.get()
        self._token = _current.set(self)
        try:
            if self.window.sync:
                _cuda_sync()
            self.start_joules, self.sources = {}, []
            for s in sources:
                try:
                    _refresh(s)
                    self.start_joules[s.component] = s.read_joules()
                    self.sources.append(s)
                except Exception as exc:
                    self.problems.append(f"{s.component}: {s.name} failed at window start "
                                         f"({_why(exc)}); its energy is missing")
            self.t0 = time.perf_counter()
            self.start_faults = {s.component: s.fault_count for s in self.sources}
            self._poller = _Poller.start_for(self.sources)
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
                    _refresh(s)
                    end_joules[s.component] = s.read_joules()
                except Exception as exc:
                    self.problems.append(f"{s.component}: {s.name} failed at window end "
                                         f"({_why(exc)}); its energy is missing from this total")
        finally:
            poller = self._poller
            self._finish_threads()
        if poller is not None:
            self.problems.extend(poller.problems())
        seconds = t1 - self.t0
        components = {}
        for s in self.sources:
            self.problems.extend(s.faults_since(self.start_faults[s.component]))
            if s.component not in end_joules:
                continue
            joules = end_joules[s.component] - self.start_joules[s.component]
            if joules < 0:
                self.problems.append(f"{s.component}: {s.name} went backwards ({plain_number(joules, 4)} J; "
                                     "counter reset?); its energy is missing from this total")
                continue
            components[s.component] = ComponentEnergy(
                s.component, s.name, joules, seconds, joules / seconds if seconds > 0 else 0.0,
                s.estimated, s.rel_uncertainty, s.note, s.model,
                getattr(s, "attribution", ""))
        self._warn_if_short(seconds)
        idle = self.window.idle
        idle_watts = None
        if idle is not None:
            idle_watts = sum(idle.watts_by_component.get(k, 0.0) for k in components)
            self.problems.extend(f"idle: {p}" for p in idle.problems)
            lacking = [k for k in components if k not in idle.watts_by_component]
            if lacking:
                self.problems.append(f"idle: no idle power for {', '.join(lacking)}, so the "
                                     "above-idle figure counts all of their energy")
        result = Measurement(self.window.label, seconds, components, idle_watts,
                             self.warnings, self.children, self.problems, self._reliable_from_s())
        above = result.joules_above_idle
        if above is not None and above < 0:
            self.problems.append(
                f"above idle: negative ({plain_number(above, 4)} J): the idle power given "
                f"({plain_number(idle_watts)} W) is above this window's mean power ({plain_number(result.watts)} W), "
                "so the idle figure does not fit this window (measure idle again, same sources)")
        if self.parent is not None:
            self.parent.children.append(result)
        return result

    def _reliable_from_s(self) -> float | None:
        slowest = max(self.sources, key=lambda s: s.update_period_s, default=None)
        return None if slowest is None else SHORT_WINDOW_PERIODS * slowest.update_period_s

    def _warn_if_short(self, seconds: float) -> None:
        slowest = max(self.sources, key=lambda s: s.update_period_s, default=None)
        if slowest is None or seconds >= SHORT_WINDOW_PERIODS * slowest.update_period_s:
            return
        period_ms = slowest.update_period_s * 1000
        text = (f"window {self.window.label!r} lasted {seconds * 1000:.1f} ms, shorter than "
                f"{SHORT_WINDOW_PERIODS} update periods of {slowest.component} ({slowest.name}, "
                f"{period_ms:.0f} ms each = {SHORT_WINDOW_PERIODS * period_ms:.0f} ms); its energy "
                "is unreliable. Repeat the work in a loop inside one window (e.g. 100 times) "
                "and divide.")
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
    """Background thread that calls ``poll()`` on sources that need it during a window.

    A failing poll is counted per source (``errors``) and polling goes on, so a passing
    glitch costs one interval; ``problems()`` reports every failure, and ``error`` keeps the
    first exception."""

    def __init__(self, sources: list[EnergySource], interval_s: float):
        self.sources = sources
        self.interval_s = interval_s
        self.error: BaseException | None = None
        self.errors: dict = {}  # component -> (count, first exception)
        self.died: BaseException | None = None
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
        try:
            while not self._stop.wait(self.interval_s):
                for s in self.sources:
                    try:
                        s.poll()
                    except Exception as exc:
                        count, first = self.errors.get(s.component, (0, exc))
                        self.errors[s.component] = (count + 1, first)
                        if self.error is None:
                            self.error = exc
        except BaseException as exc:  # the thread itself failed: the window reports it
            self.died = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def problems(self) -> list[str]:
        names = {s.component: s.name for s in self.sources}
        out = [f"{component}: {names[component]} polling failed {count} time(s) during the "
               f"window (first: {_why(first)}); readings were lost"
               for component, (count, first) in self.errors.items()]
        if self.died is not None:
            out.append(f"{', '.join(names)}: the background poller stopped ({_why(self.died)}); "
                       "readings after that were lost")
        return out


def _refresh(source) -> None:
    refresh = getattr(source, "refresh", None)  # sources written before refresh() existed lack it
    if callable(refresh):
        refresh()


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _caller_stacklevel() -> int:
    """stacklevel that points a warning at the first frame outside this module."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


def _cuda_sync() -> None:
    """Wait for queued CUDA work on the devices this process uses (torch's current device and
    any holding torch memory), if torch has initialised CUDA. Other GPUs are never touched, so
    no CUDA context is created on them."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        for index in used_cuda_devices(torch) or []:
            torch.cuda.synchronize(index)
    except Exception as exc:  # a broken CUDA context must not hide the window's result
        warnings.warn(f"CUDA synchronise failed at a window edge: {exc}", RuntimeWarning)
