"""Live energy meter for a notebook cell.

    with gl.widgets.meter(region="FR", samples=60_000) as m:
        train()

While the work runs, a :class:`~greenlab.energy.PowerMonitor` feeds the meter on its own
thread: the text figures (joules, Wh, g CO2e, joules per sample, each component's power
and source) update on every sample (10 Hz by default) and the power plot is redrawn at most
``plot_hz`` times a second and only while the redraw stays under ``PLOT_BUDGET`` of the
wall time. The final figures come from a :func:`~greenlab.energy.measure` window around
the work (synchronised edges, per-component provenance). Without a notebook front end
the meter draws nothing and prints a short summary at the end.
"""

from __future__ import annotations

import collections
import io
import threading
import time

from greenlab.widgets.common import html_escape, new_figure, resolve_display
from greenlab.impact import carbon
from greenlab.energy import PowerMonitor, measure
from greenlab.widgets import side

PLOT_BUDGET = 0.003  # share of wall time the plot redraws may use (0.3 %)
WH_PER_JOULE = 1.0 / 3600.0  # 1 Wh = 3600 J


class MeterState:
    """What the meter knows, without any widget: fed PowerSamples, returns figures.

    ``region`` and ``pue`` convert joules to grams CO2e via :func:`greenlab.impact.carbon.co2e_g`;
    ``samples`` (or :meth:`add_samples`) gives joules per sample; ``window_s`` is the span of
    the kept power trace in seconds.
    """

    def __init__(self, region: str = "WORLD", samples: int | None = None, window_s: float = 30.0,
                 pue: float | None = None, sources: dict | None = None, estimated: bool = False):
        self.region = carbon.intensity(region)  # ValueError for an unknown region
        self.pue = pue
        carbon.co2e_g(0.0, region=self.region.code, pue=pue)  # validates pue early
        if not isinstance(window_s, (int, float)) or isinstance(window_s, bool) or window_s <= 0:
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s!r}")
        self.window_s = float(window_s)
        self.samples = 0
        if samples is not None:
            self.add_samples(samples)
        self.sources = dict(sources or {})
        self.estimated = bool(estimated)
        self.trace: collections.deque = collections.deque()  # (t_s, {component: watts})
        self.seconds = 0.0
        self.joules_by_component: dict = {}
        self.watts_by_component: dict = {}
        self.n_updates = 0
        self.problems: list = []  # a finished window's lost or doubtful figures (Measurement.problems)
        self._lock = threading.Lock()

    def add_samples(self, n: int) -> None:
        """Count ``n`` more processed samples (images, tokens...) for joules per sample."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"samples must be a non-negative int, got {n!r}")
        self.samples += n

    def add(self, sample) -> None:
        """Take one PowerSample (``t_s``, ``watts``, cumulative ``joules`` per component)."""
        with self._lock:
            self.seconds = sample.t_s
            self.joules_by_component = dict(sample.joules)
            self.watts_by_component = dict(sample.watts)
            self.trace.append((sample.t_s, dict(sample.watts)))
            while self.trace and self.trace[0][0] < sample.t_s - self.window_s:
                self.trace.popleft()
            self.n_updates += 1

    def set_final(self, measurement) -> None:
        """Replace the live figures by a finished Measurement's (its sources included)."""
        with self._lock:
            self.seconds = measurement.seconds
            self.joules_by_component = {k: c.joules for k, c in measurement.components.items()}
            self.watts_by_component = {k: c.watts for k, c in measurement.components.items()}
            self.sources = dict(measurement.sources)
            self.estimated = measurement.estimated
            self.problems = list(getattr(measurement, "problems", []) or [])

    @property
    def joules(self) -> float:
        return sum(self.joules_by_component.values())

    def figures(self) -> dict:
        """Current figures: seconds, joules, wh, g_co2e, joules_per_sample (or None), per component."""
        with self._lock:
            joules = sum(self.joules_by_component.values())
            components = {
                k: {"watts": self.watts_by_component.get(k, 0.0), "joules": j,
                    "source": self.sources.get(k, "unknown")}
                for k, j in sorted(self.joules_by_component.items())
            }
            seconds = self.seconds
            problems = list(self.problems)
        return {
            "seconds": seconds,
            "joules": joules,
            "wh": joules * WH_PER_JOULE,
            "g_co2e": carbon.co2e_g(joules, region=self.region.code, pue=self.pue),
            "region": self.region.code,
            "g_per_kwh": self.region.g_per_kwh,
            "region_year": self.region.year,
            "samples": self.samples,
            "joules_per_sample": joules / self.samples if self.samples else None,
            "estimated": self.estimated,
            "components": components,
            "problems": problems,
        }

    def text(self, final: bool = False) -> str:
        """A short plain-text summary (printed at the end in text mode)."""
        f = self.figures()
        head = f"energy ({_state_label(f, final)})"
        lines = [f"{head}: {f['joules']:.1f} J = {f['wh']:.4f} Wh in {f['seconds']:.1f} s; "
                 f"{f['g_co2e']:.3f} g CO2e at {f['g_per_kwh']:g} g/kWh ({f['region']}, {f['region_year']})"]
        if f["joules_per_sample"] is not None:
            lines.append(f"  {f['joules_per_sample'] * 1000:.3f} mJ per sample ({f['samples']} samples)")
        for name, c in f["components"].items():
            lines.append(f"  {name}: {c['joules']:.1f} J, source {_source_label(c['source'])}")
        if f["estimated"]:
            lines.append("  includes estimates: an estimate is a model, not a measurement")
        if f["problems"]:
            lines.append("  incomplete: " + "; ".join(f["problems"]))
        return "\n".join(lines)

    def html(self, final: bool = False) -> str:
        """The figures as a small HTML block (the widget's text)."""
        f = self.figures()
        state = _state_label(f, final)
        per_sample = ""
        if f["joules_per_sample"] is not None:
            per_sample = (f" &middot; <span class='greenlab-jps'>{f['joules_per_sample'] * 1000:.3f}"
                          f" mJ/sample</span> ({f['samples']} samples)")
        rows = "".join(
            f"<tr><td>{html_escape(name)}</td><td style='text-align:right'>{c['watts']:.1f} W</td>"
            f"<td style='text-align:right'>{c['joules']:.1f} J</td>"
            f"<td>{html_escape(_source_label(c['source']))}</td></tr>"
            for name, c in f["components"].items())
        return (
            f"<div><b>Energy ({state})</b>: <span class='greenlab-joules'>{f['joules']:.1f} J</span>"
            f" = {f['wh']:.4f} Wh in {f['seconds']:.1f} s &middot; "
            f"<span class='greenlab-co2e'>{f['g_co2e']:.3f} g CO2e</span> at {f['g_per_kwh']:g} g/kWh "
            f"({html_escape(f['region'])}, {f['region_year']}){per_sample}</div>"
            f"<table style='font-size:90%'><tr><th>component</th><th>power</th><th>energy</th>"
            f"<th>source</th></tr>{rows}</table>"
            + (f"<div class='greenlab-problems' style='color:#b00'><b>Incomplete:</b> "
               f"{html_escape('; '.join(f['problems']))}</div>" if f["problems"] else "")
        )


class EnergyMeter:
    """A live meter around some work; see the module docstring.

    ``display``: ``"auto"`` (widget in a notebook kernel, text otherwise), ``"widget"`` or
    ``"text"``. ``show=False`` builds the widget without displaying it (for embedding,
    e.g. in :class:`ExperimentPanel`). ``hz``: monitor samples per second. ``plot_hz``: the
    most plot redraws per second. ``sources``: energy sources (default: this machine's).
    """

    def __init__(self, region: str = "WORLD", samples: int | None = None, display: str = "auto",
                 window_s: float = 30.0, hz: float = 5, plot_hz: float = 2, pue: float | None = None,
                 label: str = "meter", sources: list | None = None, show: bool = True):
        if isinstance(plot_hz, bool) or not isinstance(plot_hz, (int, float)) or not 0 < plot_hz <= 10:
            raise ValueError(f"plot_hz must be a number in (0, 10], got {plot_hz!r}")
        self.mode = resolve_display(display)
        self.state = MeterState(region=region, samples=samples, window_s=window_s, pue=pue)
        self.hz = hz
        self.plot_hz = float(plot_hz)
        self.label = label
        self.show = show
        self._sources = sources
        self._monitor = None
        self._window = None
        self.result = None  # Measurement after stop()
        self.errors: list[str] = []
        self.busy_seconds = 0.0  # CPU seconds spent in the meter's sample callback
        self.setup_seconds = 0.0  # of which one-off: y-axis rescales and figure rebuilds
        self.wall_seconds = 0.0
        self.plot_redraws = 0
        self.text_updates = 0
        self._next_plot_t = 0.0
        self.view = _MeterView(self.state) if self.mode == "widget" else None

    # --- public ---
    @property
    def widget(self):
        """The ipywidgets box (None in text mode)."""
        return self.view.widget if self.view else None

    @property
    def steady_overhead_fraction(self) -> float:
        """Like ``overhead_fraction`` without one-off costs (y-axis rescales): the long-run cost."""
        if not self.wall_seconds:
            return 0.0
        return (self.busy_seconds - self.setup_seconds) / self.wall_seconds

    @property
    def overhead_fraction(self) -> float:
        """CPU time spent updating the meter as a share of the metered wall time."""
        return self.busy_seconds / self.wall_seconds if self.wall_seconds else 0.0

    def add_samples(self, n: int) -> None:
        """Count ``n`` processed samples, for joules per sample."""
        self.state.add_samples(n)

    def figures(self) -> dict:
        return self.state.figures()

    def start(self) -> "EnergyMeter":
        if self._monitor is not None:
            raise RuntimeError("this meter is already running")
        if self.result is not None:
            raise RuntimeError("a meter measures one window; create a new one for the next")
        self._monitor = PowerMonitor(hz=self.hz, window_s=self.state.window_s, sources=self._sources)
        self.state.sources = self._monitor.sources
        self.state.estimated = self._monitor.estimated
        self._monitor.subscribe(self._on_sample)
        if self.view is not None:  # the figure is built before it is shown: no empty image
            self.view.prepare(sorted(self.state.sources))
        if self.view is not None and self.show:
            from IPython.display import display

            display(self.view.widget)
            side.show(self.view.widget)  # a second view that stays in sight while Run All goes on
        if self.view is not None:
            self.view.status.value = "running"
        self._t0 = time.perf_counter()
        self._window = measure(self.label, sources=self._sources).start()
        self._monitor.start()
        return self

    def stop(self):
        """Stop metering; returns the window's Measurement and shows the final figures."""
        if self._monitor is None:
            raise RuntimeError("this meter was not started")
        monitor, self._monitor = self._monitor, None
        monitor.stop()
        if monitor.error is not None:
            self.errors.append(f"power monitor stopped: {monitor.error!r}")
        self.result = self._window.stop()
        self.wall_seconds = time.perf_counter() - self._t0
        self.state.set_final(self.result)
        if self.view is not None:
            self.view.update_text(final=True)
            self.view.redraw()
            self.view.status.value = "finished"
        else:
            print(self.state.text(final=True))
        return self.result

    def __enter__(self) -> "EnergyMeter":
        return self.start()

    def __exit__(self, *exc) -> bool:
        if self._monitor is not None:
            self.stop()
        return False

    def _ipython_display_(self):
        from IPython.display import display

        if self.view is not None:
            display(self.view.widget)
        else:
            print(self.state.text(final=self.result is not None))

    # --- monitor thread ---
    def _on_sample(self, sample) -> None:
        t0 = time.thread_time()
        try:
            self.state.add(sample)
            if self.view is not None:
                self.view.update_text()
                self.text_updates += 1
                if sample.t_s >= self._next_plot_t:
                    cost, setup = self.view.redraw()
                    self.setup_seconds += setup
                    self.plot_redraws += 1
                    self._next_plot_t = sample.t_s + max(1.0 / self.plot_hz, cost / PLOT_BUDGET)
        except Exception as err:  # never stop the monitor thread because of the display
            if len(self.errors) < 10:
                self.errors.append(f"meter update failed: {err!r}")
        finally:
            self.busy_seconds += time.thread_time() - t0


def meter(region: str = "WORLD", samples: int | None = None, display: str = "auto",
          **kwargs) -> EnergyMeter:
    """A live :class:`EnergyMeter`; use it as ``with gl.widgets.meter(...) as m: work()``."""
    return EnergyMeter(region=region, samples=samples, display=display, **kwargs)


def metered(fn, *args, region: str = "WORLD", samples: int | None = None, display: str = "auto",
            **kwargs):
    """Run ``fn(*args, **kwargs)`` under a live meter; returns ``(fn's result, meter)``."""
    m = EnergyMeter(region=region, samples=samples, display=display)
    with m:
        value = fn(*args, **kwargs)
    return value, m


# --- view ------------------------------------------------------------------


class _MeterView:
    """ipywidgets: an HTML block of figures and a PNG power trace, redrawn cheaply by blitting."""

    def __init__(self, state: MeterState):
        import ipywidgets as w

        self.state = state
        self.status = w.HTML("starting")
        self.status.add_class("greenlab-meter-status")
        self.text = w.HTML(state.html())
        self.text.add_class("greenlab-meter-figures")
        self.image = w.Image(format="png", layout=w.Layout(width="480px"))
        self.widget = w.VBox([self.status, self.text, self.image])
        self.widget.add_class("greenlab-meter")
        self._fig = None
        self._lines: dict = {}
        self._background = None
        self._y_max = 10.0

    def update_text(self, final: bool = False) -> None:
        self.text.value = self.state.html(final=final)

    def prepare(self, components: list) -> None:
        """Build the empty figure and encode it once now, before the work starts (the first
        draw pays for imports, font loading and layout)."""
        self._build(components)
        self.image.value = _canvas_png(self._fig.canvas)

    def redraw(self) -> tuple:
        """Redraw the trace; returns CPU seconds (blit and PNG encoding, one-off rebuilds).

        A full rebuild (new component, or power above the y range) is rare and not counted,
        so one slow rebuild does not throttle the plot for the rest of the run.
        """
        t0 = time.thread_time()
        setup = 0.0
        with self.state._lock:
            trace = list(self.state.trace)
        if not trace:
            return 0.0, 0.0
        now = trace[-1][0]
        components = sorted({k for _, watts in trace for k in watts})
        peak = max((v for _, watts in trace for v in watts.values()), default=0.0)
        if self._fig is None or set(components) != set(self._lines):
            t_build = time.thread_time()
            self._build(components)
            setup += time.thread_time() - t_build
        if peak > self._y_max:  # rare: the axis at least doubles each time
            t_build = time.thread_time()
            self._y_max = max(self._y_max * 2, peak * 1.5)
            self._ax.set_ylim(0, self._y_max)
            self._fig.canvas.draw()
            self._background = self._fig.canvas.copy_from_bbox(self._fig.bbox)
            setup += time.thread_time() - t_build
        for name, line in self._lines.items():
            line.set_data([t - now for t, _ in trace], [watts.get(name, 0.0) for _, watts in trace])
        canvas = self._fig.canvas
        canvas.restore_region(self._background)
        for line in self._lines.values():
            self._ax.draw_artist(line)
        self.image.value = _canvas_png(canvas)
        return time.thread_time() - t0 - setup, setup

    def _build(self, components: list) -> None:
        fig = new_figure(6.0, 2.2, layout=None)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.22, top=0.95)
        ax = fig.add_subplot()
        self._lines = {}
        for name in components:
            source = _source_label(self.state.sources.get(name, "unknown"))
            (self._lines[name],) = ax.plot([], [], label=f"{name} ({source})", animated=True)
        ax.set_xlim(-self.state.window_s, 0)
        ax.set_ylim(0, self._y_max)
        ax.set_xlabel("seconds ago")
        ax.set_ylabel("power (W)")
        ax.grid(alpha=0.3)
        if components:
            ax.legend(loc="upper left", fontsize=8)
        fig.canvas.draw()
        self._background = fig.canvas.copy_from_bbox(fig.bbox)
        self._fig, self._ax = fig, ax


def _canvas_png(canvas) -> bytes:
    from PIL import Image

    width, height = canvas.get_width_height()
    img = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buf = io.BytesIO()
    img.save(buf, format="png", compress_level=1)
    return buf.getvalue()


def _state_label(figures: dict, final: bool) -> str:
    """What the figures are: "live" or "live estimate" while the work runs; when done, "final,
    measured window", "final, estimate" (every component a model) or "final, measured window
    with estimates" (some components), from the components' sources."""
    sources = [c["source"] for c in figures["components"].values()]
    estimated = [s == "estimate" for s in sources]
    if final:
        if sources and all(estimated):
            return "final, estimate"
        if any(estimated) or (figures["estimated"] and not sources):
            return "final, measured window with estimates"
        return "final, measured window"
    return "live estimate" if sources and all(estimated) else "live"


def _source_label(source: str) -> str:
    if source == "estimate":
        return "estimate"
    if source in ("unknown", ""):
        return "unknown"
    return f"measured: {source}"
