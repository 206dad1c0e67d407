"""ExperimentPanel: turn a lesson's knobs, run, stop, and compare runs in a growing table.

    panel = gl.widgets.ExperimentPanel(ds, lambda: gl.models.build("cnn"),
                                       knobs=["precision", "batch_size", "accum_steps"],
                                       base_config=gl.TrainConfig(epochs=2, target_accuracy=0.8))
    panel            # shows it; or drive it: panel.run_button.click(); panel.wait(); panel.results

Run trains on a background thread (``greenlab.training.loop.train``) so Stop can be clicked; Stop sets
the ``threading.Event`` passed to ``train``, which ends the run between steps and keeps the
partial result (status "stopped"). A run that fails shows its error and leaves the panel usable.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import threading
import time
from dataclasses import dataclass

from greenlab.widgets.common import figure_png, html_escape, new_figure, resolve_display, widget_kit
from greenlab.training import loop
from greenlab.training.loop import LR_SCHEDULES, OPTIMIZERS, PRECISIONS, TrainConfig
from greenlab.widgets.meter import EnergyMeter

PROGRESS_PERIOD_S = 0.25  # at most 4 progress updates a second


@dataclass(frozen=True)
class Knob:
    """One bounded control for a ``TrainConfig`` field.

    Give ``options`` for a dropdown, or ``low``/``high`` (and ``step``) for a slider
    (ints give an integer slider). Values outside these cannot be entered.
    """

    name: str
    options: tuple | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None
    label: str = ""


def default_knobs() -> dict:
    """Knobs a lesson can name without describing them: name -> :class:`Knob`."""
    return {
        "precision": Knob("precision", options=PRECISIONS),
        "batch_size": Knob("batch_size", options=(16, 32, 64, 128, 256, 512)),
        "accum_steps": Knob("accum_steps", low=1, high=16, step=1, label="accumulation steps"),
        "lr_schedule": Knob("lr_schedule", options=LR_SCHEDULES, label="lr schedule"),
        "lr": Knob("lr", options=(0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.3)),
        "optimizer": Knob("optimizer", options=OPTIMIZERS),
        "epochs": Knob("epochs", low=1, high=20, step=1),
        "channels_last": Knob("channels_last", options=(False, True), label="channels last"),
        "warmup_steps": Knob("warmup_steps", low=0, high=1000, step=10, label="warm-up steps"),
    }


class ExperimentPanel:
    """Controls, Run/Stop, a live meter, and a results table and plot that grow with each run.

    ``data``: a ``greenlab.training.data.Dataset``. ``model_fn``: called with no arguments for a fresh
    model per run. ``knobs``: names from :func:`default_knobs`, or a dict name -> options list
    (dropdown), ``(low, high)`` (slider) or :class:`Knob`. ``base_config``: the TrainConfig the
    knobs modify. ``region``: grid region for the meter's g CO2e. ``train_kwargs``: extra
    keyword arguments for ``greenlab.training.loop.train`` (e.g. ``save=False``). ``display`` picks the
    live meter's mode (``"auto"``, ``"widget"``, ``"text"``).
    """

    def __init__(self, data, model_fn, knobs=("precision", "batch_size", "accum_steps", "lr_schedule"),
                 base_config=None, region: str = "WORLD", train_kwargs: dict | None = None,
                 display: str = "auto", meter_sources: list | None = None):
        if not callable(model_fn):
            raise ValueError("model_fn must be a function returning a fresh torch model")
        if base_config is None:
            base_config = TrainConfig()
        if not isinstance(base_config, TrainConfig):
            raise ValueError(f"base_config must be a TrainConfig, got {type(base_config).__name__}")
        self.data = data
        self.model_fn = model_fn
        self.base_config = base_config
        self.region = region
        self.mode = resolve_display(display)
        self.train_kwargs = dict(train_kwargs or {})
        self.meter_sources = meter_sources
        self.knobs = _resolve_knobs(knobs, base_config)
        EnergyMeter(region=region, display="text")  # validates the region now, not in a run

        self.results: list[dict] = []  # one row per finished run (stopped runs included)
        self.run_results: list = []  # the RunResult objects, same order
        self.errors: list[str] = []
        self.meter: EnergyMeter | None = None
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._last_progress = 0.0

        w = widget_kit(self.mode)  # text stand-ins where ipywidgets is missing: same attributes
        self.controls = {k.name: _control_for(w, k, getattr(base_config, k.name)) for k in self.knobs}
        self.run_button = w.Button(description="Run", button_style="success", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop",
                                    disabled=True)
        self.export_button = w.Button(description="Export CSV + JSON", icon="download")
        self.export_path = w.Text(value="panel_results.csv", description="file",
                                  layout=w.Layout(width="300px"))
        self.status = w.HTML("ready")
        self.status.add_class("greenlab-panel-status")
        self.progress = w.HTML("")
        self.progress.add_class("greenlab-panel-progress")
        self.meter_box = w.VBox([])
        self.table = w.HTML(_table_html([], [k.name for k in self.knobs]))
        # hidden until the first run has a plot (an empty image shows as a broken one)
        self.plot = w.Image(format="png", layout=w.Layout(width="640px", display="none"))
        self.run_button.on_click(lambda _b: self.start())
        self.stop_button.on_click(lambda _b: self.stop())
        self.export_button.on_click(lambda _b: self._export_from_widgets())
        self.widget = w.VBox([
            w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")),
            w.HBox([self.run_button, self.stop_button, self.status]),
            self.progress, self.meter_box, self.table, self.plot,
            w.HBox([self.export_path, self.export_button]),
        ])
        self.widget.add_class("greenlab-panel")

    # --- driving from Python ---
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def knob_values(self) -> dict:
        """The current control values: TrainConfig field -> value."""
        return {name: control.value for name, control in self.controls.items()}

    def config(self):
        """The TrainConfig the next run would use (ValueError if the combination is invalid)."""
        return dataclasses.replace(self.base_config, **self.knob_values(),
                                   label=f"panel run {len(self.results) + 1}")

    def start(self) -> bool:
        """Start a run on a background thread (what Run does); False if one is running."""
        if self.running:
            self.status.value = "a run is already in progress; Stop it or wait"
            return False
        try:
            cfg = self.config()
        except (ValueError, TypeError) as err:
            self._show_error("invalid settings", err)
            return False
        self._stop_event = threading.Event()
        self.run_button.disabled = True
        self.stop_button.disabled = False
        self.progress.value = ""
        self.status.value = f"running {html_escape(cfg.label)}"
        self._thread = threading.Thread(target=self._run, args=(cfg, self.knob_values()),
                                        name="greenlab-panel-run", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Ask the running run to end after its current step (what Stop does)."""
        if self.running:
            self._stop_event.set()
            self.status.value = "stopping after the current step..."

    def wait(self, timeout: float | None = None):
        """Wait for the current run to end; returns the latest results row (or None).

        TimeoutError if the run is still going after ``timeout`` seconds.
        """
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"the run is still going after {timeout} s")
        return self.results[-1] if self.results else None

    def export_csv(self, path) -> None:
        """Write one row per run to a CSV file at ``path``."""
        fields = _fieldnames(self.results, [k.name for k in self.knobs])
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            for row in self.results:
                writer.writerow({k: _csv_value(row.get(k)) for k in fields})

    def export_json(self, path) -> None:
        """Write the runs as JSON: ``{"runs": [...], "base_config": {...}}``."""
        base = self.base_config.to_dict() if hasattr(self.base_config, "to_dict") else {}
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"runs": self.results, "base_config": base}, f, indent=2, default=str)

    def text(self) -> str:
        """The panel as plain text: its knobs, the status and one line per finished run."""
        lines = [f"ExperimentPanel with knobs {', '.join(self.controls)} "
                 f"({', '.join(f'{k}={v!r}' for k, v in self.knob_values().items())}); "
                 f"{len(self.results)} run(s). Drive it with panel.run_button.click(), panel.wait(), "
                 "panel.results."]
        for r in self.results:
            knobs = ", ".join(f"{k}={r.get(k)!r}" for k in self.controls)
            lines.append(f"  run {r['run']} ({knobs}): {r['status']}, {_fmt(r['seconds'], '.1f')} s, "
                         f"{_fmt(r['joules'], '.1f')} J [{_source_text(r)}], accuracy "
                         f"{_fmt(r['final_accuracy'], '.1%')}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)

    def _ipython_display_(self):
        if self.mode == "widget":
            from IPython.display import display

            display(self.widget)
        else:
            print(self.text())

    # --- the run thread ---
    def _run(self, cfg, values: dict) -> None:
        number = len(self.results) + 1
        try:
            self.meter = EnergyMeter(region=self.region, display=self.mode, show=False,
                                     label=cfg.label, sources=self.meter_sources)
            if self.meter.widget is not None:
                self.meter_box.children = [self.meter.widget]
            kwargs = {"log": False, **self.train_kwargs}
            with self.meter:
                result = loop.train(self.model_fn(), self.data, cfg, callbacks=[_Progress(self)],
                               stop_event=self._stop_event, **kwargs)
            row = _row(number, values, result)
            self.results.append(row)
            self.run_results.append(result)
            self.table.value = _table_html(self.results, list(values))
            if self.mode == "widget":
                self.plot.value = figure_png(_plot(self.results), dpi=72)
                self.plot.layout.display = None  # shown from the first plot on
            note = " (partial result kept)" if result.status == "stopped" else ""
            self.status.value = f"run {number} {html_escape(result.status)}{note}"
        except Exception as err:  # show it in the panel and stay usable
            self._show_error(f"run {number} failed", err)
        finally:
            self.run_button.disabled = False
            self.stop_button.disabled = True

    def _show_error(self, what: str, err: BaseException) -> None:
        message = f"{what}: {type(err).__name__}: {err}"
        self.errors.append(message)
        self.status.value = f"<span style='color:#b42318'>{html_escape(message)}</span>"

    def _export_from_widgets(self) -> None:
        path = self.export_path.value.strip() or "panel_results.csv"
        stem = path[:-4] if path.endswith(".csv") else path
        try:
            self.export_csv(stem + ".csv")
            self.export_json(stem + ".json")
        except OSError as err:
            self._show_error("export failed", err)
            return
        self.status.value = f"exported {len(self.results)} runs to {html_escape(stem)}.csv and .json"


class _Progress:
    """train() callback: shows step, samples, loss and accuracy, at most 4 times a second."""

    def __init__(self, panel: ExperimentPanel):
        self.panel = panel
        self.last = 0.0

    def on_step(self, state) -> None:
        now = time.perf_counter()
        if now - self.last >= PROGRESS_PERIOD_S:
            self.last = now
            self._show(state)

    def on_eval(self, state) -> None:
        self._show(state)

    def _show(self, state) -> None:
        loss = state.loss
        acc = "n/a" if state.accuracy is None else f"{state.accuracy:.1%}"
        loss_text = "n/a" if loss is None else f"{loss:.4f}"
        self.panel.progress.value = (
            f"step {state.step}, epoch {state.epoch + 1}, {state.samples} samples, "
            f"{state.seconds:.1f} s, loss {loss_text}, accuracy {acc}")


# --- helpers ---------------------------------------------------------------


def _resolve_knobs(knobs, base_config) -> list[Knob]:
    known = default_knobs()
    fields = {f.name for f in dataclasses.fields(base_config)}
    if isinstance(knobs, dict):
        items = list(knobs.items())
    elif isinstance(knobs, (list, tuple)):
        items = [(k.name, k) if isinstance(k, Knob) else (k, None) for k in knobs]
    else:
        raise ValueError("knobs must be a list of names or a dict name -> options")
    out = []
    for name, spec in items:
        if name not in fields:
            raise ValueError(f"knob {name!r} is not a TrainConfig field; allowed: {sorted(fields)}")
        if name == "label":
            raise ValueError("'label' is set by the panel, not a knob")
        if spec is None:
            if name not in known:
                raise ValueError(f"knob {name!r} has no default control; give options, e.g. "
                                 f"{{{name!r}: [a, b, c]}} or (low, high); named knobs: {sorted(known)}")
            spec = known[name]
        elif isinstance(spec, (list,)) or (isinstance(spec, tuple) and len(spec) != 2):
            spec = Knob(name, options=tuple(spec))
        elif isinstance(spec, tuple):
            low, high = spec
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in spec) \
                    or not low < high:
                raise ValueError(f"knob {name!r}: (low, high) must be numbers with low < high")
            step = 1 if isinstance(low, int) and isinstance(high, int) else None
            spec = Knob(name, low=low, high=high, step=step)
        elif not isinstance(spec, Knob):
            raise ValueError(f"knob {name!r}: give a list of options, (low, high) or a Knob")
        if spec.options is not None and len(spec.options) == 0:
            raise ValueError(f"knob {name!r} needs at least one option")
        if spec.options is None and (spec.low is None or spec.high is None):
            raise ValueError(f"knob {name!r} needs options or low and high")
        out.append(spec)
    if not out:
        raise ValueError("give at least one knob")
    return out


def _control_for(w, knob: Knob, base_value):
    label = knob.label or knob.name.replace("_", " ")
    style = {"description_width": "initial"}
    if knob.options is not None:
        options = list(knob.options)
        if base_value not in options:
            options = [base_value] + options  # the base config's own value stays selectable
        labelled = [(str(o), o) for o in options]
        return w.Dropdown(options=labelled, value=base_value, description=label, style=style)
    if not isinstance(base_value, (int, float)) or not knob.low <= base_value <= knob.high:
        raise ValueError(f"base_config.{knob.name} = {base_value!r} is outside the knob's range "
                         f"[{knob.low}, {knob.high}]")
    if isinstance(knob.low, int) and isinstance(knob.high, int) and isinstance(base_value, int):
        return w.IntSlider(value=base_value, min=knob.low, max=knob.high, step=int(knob.step or 1),
                           description=label, style=style, continuous_update=False)
    return w.FloatSlider(value=base_value, min=knob.low, max=knob.high,
                         step=knob.step or (knob.high - knob.low) / 100, description=label,
                         style=style, continuous_update=False)


def _row(number: int, values: dict, result) -> dict:
    row = {"run": number, **values, "status": result.status}
    row.update({
        "seconds": result.seconds,
        "joules": result.joules,
        "energy_sources": ", ".join(f"{k}: {v}" for k, v in sorted(result.sources.items())),
        "estimated": result.estimated,
        "final_accuracy": result.final_accuracy,
        "best_accuracy": result.best_accuracy,
        "seconds_to_target": result.seconds_to_target,
        "joules_to_target": result.joules_to_target,
        "co2e_g": result.co2e_g,
        "region": result.region,
        "steps": result.steps,
        "samples_per_second": result.samples_per_second,
    })
    return row


def _fieldnames(rows: list, knob_names: list) -> list:
    fields = ["run", *knob_names, "status", "seconds", "joules", "energy_sources", "estimated",
              "final_accuracy", "best_accuracy", "seconds_to_target", "joules_to_target", "co2e_g",
              "region", "steps", "samples_per_second"]
    for row in rows:
        fields += [k for k in row if k not in fields]
    return fields


def _csv_value(v):
    return "" if v is None else v


def _fmt(v, spec: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def _source_text(row: dict) -> str:
    """The run's energy sources, saying once that the figure includes an estimate."""
    text = row["energy_sources"]
    if row["estimated"] and "estimate" not in text:
        text += " (includes an estimate)"
    return text


def _table_html(rows: list, knob_names: list) -> str:
    head = ["run", *knob_names, "status", "time (s)", "energy (J)", "accuracy", "J to target",
            "s to target", "g CO2e", "energy source"]
    cells = "".join(f"<th>{html_escape(h)}</th>" for h in head)
    body = ""
    for r in rows:
        values = [r["run"], *[r.get(k) for k in knob_names], r["status"],
                  _fmt(r["seconds"], ".1f"), _fmt(r["joules"], ".1f"),
                  _fmt(r["final_accuracy"], ".1%"), _fmt(r["joules_to_target"], ".1f"),
                  _fmt(r["seconds_to_target"], ".1f"), _fmt(r["co2e_g"], ".3f"),
                  _source_text(r)]
        body += "<tr>" + "".join(f"<td>{html_escape(v)}</td>" for v in values) + "</tr>"
    if not rows:
        body = f"<tr><td colspan='{len(head)}'>no runs yet</td></tr>"
    return f"<table class='greenlab-panel-table'><tr>{cells}</tr>{body}</table>"


def _plot(rows: list):
    fig = new_figure(8.0, 2.8, layout=None)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.18, top=0.95, wspace=0.3)
    ax_acc, ax_target = fig.subplots(1, 2)
    for r in rows:
        acc = r["final_accuracy"]
        if acc is not None:
            ax_acc.scatter(r["joules"], acc * 100, color="tab:green")
            ax_acc.annotate(str(r["run"]), (r["joules"], acc * 100), textcoords="offset points",
                            xytext=(4, 4), fontsize=8)
    ax_acc.set_xlabel("energy (J)")
    ax_acc.set_ylabel("accuracy (%)")
    ax_acc.grid(alpha=0.3)
    runs = [str(r["run"]) for r in rows]
    to_target = [r["joules_to_target"] if r["joules_to_target"] is not None else 0.0 for r in rows]
    ax_target.bar(runs, to_target, color="tab:blue")
    ax_target.set_xlabel("run (0 = target not reached)")
    ax_target.set_ylabel("energy to target (J)")
    ax_target.grid(alpha=0.3, axis="y")
    return fig
