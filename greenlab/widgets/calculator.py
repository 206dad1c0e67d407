"""Cost-benefit calculator: a view over :mod:`greenlab.impact.scaling` (all arithmetic lives there)."""

from __future__ import annotations

from greenlab.impact import carbon, scaling
from greenlab.widgets.common import figure_png, html_escape, new_figure, resolve_display, widget_kit

MAX_DEVICES = 1024


class CostBenefitCalculator:
    """Time, money, energy and CO2e of a job on n GPUs, with plots against the GPU count.

    Controls are bounded so out-of-range input cannot be typed. The scaling efficiency is
    typed, or computed from a measured run with :meth:`use_measured` (or the widget's
    "use measured run" button). Driveable from Python: set ``gpu.value``,
    ``n_devices.value``, ... then read :meth:`result` or ``summary.value``. Without a notebook
    front end (or without ipywidgets) the controls are plain-Python stand-ins and displaying the
    calculator prints :meth:`text`.
    """

    def __init__(self, gpu: str | None = None, n_devices: int = 8, single_device_hours: float = 10.0,
                 scaling_efficiency: float = 0.9, region: str = "WORLD", pue: float | None = None,
                 price_per_device_hour: float | None = None, watts_per_device: float | None = None,
                 counts=(1, 2, 4, 8, 16, 32), display: str = "auto"):
        self.mode = resolve_display(display)
        w = widget_kit(self.mode)  # text stand-ins where ipywidgets is missing: same attributes
        specs = scaling.gpus()
        names = [s.name for s in specs]
        gpu_name = scaling.gpu(gpu).name if gpu is not None else names[0]
        self.counts = _check_counts(counts)
        codes = [(f"{r.code} - {r.name}", r.code) for r in carbon.regions()]
        style = {"description_width": "170px"}
        layout = w.Layout(width="420px")
        self.gpu = w.Dropdown(options=names, value=gpu_name, description="GPU", style=style,
                              layout=layout)
        self.n_devices = w.BoundedIntText(value=_in_range(n_devices, 1, MAX_DEVICES, "n_devices"),
                                          min=1, max=MAX_DEVICES, description="GPU count",
                                          style=style, layout=layout)
        self.single_device_hours = w.BoundedFloatText(
            value=_in_range(single_device_hours, 0.001, 1e6, "single_device_hours"),
            min=0.001, max=1e6, description="hours on one GPU", style=style, layout=layout)
        self.efficiency = w.BoundedFloatText(
            value=_in_range(scaling_efficiency, 0.01, 1.0, "scaling_efficiency"), min=0.01, max=1.0,
            step=0.01, description="scaling efficiency", style=style, layout=layout)
        self.region = w.Dropdown(options=codes, value=carbon.intensity(region).code,
                                 description="region", style=style, layout=layout)
        pue_value = carbon.DEFAULT_PUE if pue is None else _in_range(pue, 1.0, 3.0, "pue")
        self.pue = w.BoundedFloatText(value=pue_value, min=1.0, max=3.0, step=0.01,
                                      description="PUE", style=style, layout=layout)
        self.own_price = w.Checkbox(value=price_per_device_hour is not None,
                                    description="own price (else catalogue)", indent=False)
        self.price = w.BoundedFloatText(
            value=0.0 if price_per_device_hour is None
            else _in_range(price_per_device_hour, 0.0, 1000.0, "price_per_device_hour"),
            min=0.0, max=1000.0, step=0.1, description="USD per GPU-hour", style=style, layout=layout)
        self.own_watts = w.Checkbox(value=watts_per_device is not None,
                                    description="measured W per GPU (else TDP estimate)", indent=False)
        self.watts = w.BoundedFloatText(
            value=300.0 if watts_per_device is None
            else _in_range(watts_per_device, 1.0, 5000.0, "watts_per_device"),
            min=1.0, max=5000.0, step=1.0, description="W per GPU", style=style, layout=layout)
        # measured run -> efficiency
        self.t1_seconds = w.BoundedFloatText(value=60.0, min=1e-3, max=1e7,
                                             description="1-GPU run (s)", style=style, layout=layout)
        self.tn_seconds = w.BoundedFloatText(value=35.0, min=1e-3, max=1e7,
                                             description="n-GPU run (s)", style=style, layout=layout)
        self.n_measured = w.BoundedIntText(value=2, min=2, max=MAX_DEVICES,
                                           description="GPUs in that run", style=style, layout=layout)
        self.measured_button = w.Button(description="use measured run")
        self.measured_button.on_click(lambda _b: self._use_measured_from_widgets())
        self.message = w.HTML("")
        self.summary = w.HTML("")
        self.summary.add_class("greenlab-calculator-summary")
        self.plot = w.Image(format="png", layout=w.Layout(width="640px"))
        controls = [self.gpu, self.n_devices, self.single_device_hours, self.efficiency,
                    self.region, self.pue, w.HBox([self.own_price, self.price]),
                    w.HBox([self.own_watts, self.watts])]
        measured = w.VBox([w.HTML("<b>Efficiency from a measured run</b>"), self.t1_seconds,
                           self.tn_seconds, self.n_measured, self.measured_button])
        self.widget = w.VBox([w.HBox([w.VBox(controls), measured]), self.message, self.summary,
                              self.plot])
        self.widget.add_class("greenlab-calculator")
        inputs = [self.gpu, self.n_devices, self.single_device_hours, self.efficiency, self.region,
                  self.pue, self.own_price, self.price, self.own_watts, self.watts]
        for control in inputs:
            control.observe(lambda _change: self.update(), names="value")
        self.update()

    # --- logic (no widgets needed to call) ---
    def scenario(self) -> scaling.ScalingScenario:
        """The inputs currently set, as a :class:`greenlab.impact.scaling.ScalingScenario`."""
        return scaling.ScalingScenario(
            gpu=self.gpu.value, n_devices=int(self.n_devices.value),
            single_device_hours=float(self.single_device_hours.value),
            scaling_efficiency=float(self.efficiency.value), region=self.region.value,
            pue=float(self.pue.value),
            price_per_device_hour=float(self.price.value) if self.own_price.value else None,
            watts_per_device=float(self.watts.value) if self.own_watts.value else None)

    def result(self) -> scaling.ScalingResult:
        """Time, money, energy and CO2e for the current inputs (``greenlab.impact.scaling.cost_benefit``)."""
        return self.scenario().result()

    def sweep(self) -> list:
        """Results for each GPU count in ``counts`` at the current efficiency (n = 1 at 1.0)."""
        s = self.scenario()
        return scaling.sweep(s.gpu, counts=self.counts, single_device_hours=s.single_device_hours,
                             scaling_efficiency=s.scaling_efficiency, region=s.region, pue=s.pue,
                             price_per_device_hour=s.price_per_device_hour,
                             watts_per_device=s.watts_per_device)

    def use_measured(self, t1_seconds: float, tn_seconds: float, n_devices: int) -> float:
        """Set the efficiency from a measured run (``scaling.scaling_efficiency``); returns it.

        An efficiency above 1 (superlinear) or below 0.01 cannot be used by the model:
        ValueError.
        """
        eff = scaling.scaling_efficiency(t1_seconds, tn_seconds, n_devices)
        if not 0.01 <= eff <= 1.0:
            raise ValueError(f"measured efficiency {eff:.3f} is outside 0.01..1; the model needs "
                             "0 < efficiency <= 1 (check the two run times)")
        self.efficiency.value = round(eff, 4)
        self.message.value = (f"efficiency {eff:.3f} from a measured run: {t1_seconds:g} s on 1 GPU, "
                              f"{tn_seconds:g} s on {n_devices}")
        return eff

    def text(self) -> str:
        """The current result as plain text."""
        r = self.result()
        cost = "unknown (no price)" if r.cost_usd is None else f"{r.cost_usd:,.2f} USD"
        lines = [
            f"{r.gpu} x {r.n_devices} at efficiency {r.scaling_efficiency:.2f} (speedup {r.speedup:.2f}x)",
            f"  time: {r.wall_hours:,.2f} h wall, {r.device_hours:,.2f} GPU-hours",
            f"  money: {cost}",
            f"  energy: {r.energy_kwh:,.2f} kWh ({r.power_source}); "
            f"{r.wasted_energy_kwh:,.2f} kWh above perfect scaling",
            f"  CO2e: {carbon.format_mass(r.co2e_g)} ({r.region}, PUE {r.pue:g})",
        ]
        lines += [f"  note: {n}" for n in r.notes]
        return "\n".join(lines)

    def update(self) -> None:
        """Recompute the summary and the plots from the current inputs."""
        try:
            self.price.disabled = not self.own_price.value
            self.watts.disabled = not self.own_watts.value
            result, results = self.result(), self.sweep()
        except ValueError as err:
            self.summary.value = f"<span style='color:#b42318'>{html_escape(err)}</span>"
            return
        self.summary.value = "<pre>" + html_escape(self.text()) + "</pre>"
        if self.mode == "widget":
            self.plot.value = figure_png(_plot(results, result.n_devices), dpi=72)

    def _use_measured_from_widgets(self) -> None:
        try:
            self.use_measured(self.t1_seconds.value, self.tn_seconds.value, self.n_measured.value)
        except ValueError as err:
            self.message.value = f"<span style='color:#b42318'>{html_escape(err)}</span>"

    def _ipython_display_(self):
        if self.mode == "widget":
            from IPython.display import display

            display(self.widget)
        else:
            print(self.text())


def _plot(results, n_current: int):
    fig = new_figure(8.0, 4.2, layout=None)  # fixed margins: redraws on every input change
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.12, top=0.97, wspace=0.3, hspace=0.12)
    axes = fig.subplots(2, 2, sharex=True)
    counts = [r.n_devices for r in results]
    series = [
        ("wall time (h)", [r.wall_hours for r in results]),
        ("cost (USD)", [r.cost_usd if r.cost_usd is not None else float("nan") for r in results]),
        ("energy (kWh)", [r.energy_kwh for r in results]),
        ("CO2e (kg)", [r.co2e_g / 1000.0 for r in results]),
    ]
    for ax, (label, values) in zip(axes.flat, series):
        if all(v != v for v in values):  # all NaN: no price known
            ax.text(0.5, 0.5, "no price known:\ntick 'own price'", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
        else:
            ax.plot(counts, values, marker="o")
            ax.set_ylim(0, max(values) * 1.15 or 1.0)
        ax.axvline(n_current, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.minorticks_off()
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("GPU count")
    return fig


def _in_range(value, low: float, high: float, name: str):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}")
    return value


def _check_counts(counts) -> tuple:
    counts = tuple(counts)
    if not counts or any(isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_DEVICES
                         for n in counts):
        raise ValueError(f"counts must be a non-empty list of ints in 1..{MAX_DEVICES}, got {counts!r}")
    return tuple(sorted(set(counts)))
