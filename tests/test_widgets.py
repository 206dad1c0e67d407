"""Widgets driven from Python without a browser: meter, calculator, experiment panel.

The hardware is faked (energy sources with a known constant power); the logic is real.
"""

import csv
import json
import threading
import time

import pytest
import torch

import greenlab as gl
from greenlab.impact import carbon, scaling
from greenlab.energy import EnergySource
from greenlab.energy.monitor import PowerSample
from greenlab.widgets import CostBenefitCalculator, EnergyMeter, ExperimentPanel, MeterState


class ConstantPower(EnergySource):
    """A fake meter: a counter that grows at exactly ``watts`` joules per second."""

    def __init__(self, component, name, watts, estimated=False):
        super().__init__(component)
        self.name = name
        self.estimated = estimated
        self.watts = watts
        self.t0 = time.perf_counter()

    def read_joules(self):
        return self.watts * (time.perf_counter() - self.t0)


def fake_sources():
    return [ConstantPower("cpu", "estimate", 30.0, estimated=True),
            ConstantPower("gpu:0", "nvml-counter", 120.0)]


def monitor_threads():
    return [t for t in threading.enumerate() if t.name == "greenlab-power-monitor" and t.is_alive()]


# --- meter -----------------------------------------------------------------


def test_meter_state_figures_follow_the_samples():
    state = MeterState(region="FRA", samples=100, window_s=1.0,
                       sources={"cpu": "estimate", "gpu:0": "nvml-counter"}, estimated=True)
    for i in range(1, 21):  # 2 s at 10 Hz: 10 W cpu, 50 W gpu
        t = i / 10
        state.add(PowerSample(t, {"cpu": 10.0, "gpu:0": 50.0}, {"cpu": 10.0 * t, "gpu:0": 50.0 * t},
                              60.0, 60.0 * t))
    f = state.figures()
    assert f["joules"] == pytest.approx(120.0)
    assert f["wh"] == pytest.approx(120.0 / 3600)
    assert f["g_co2e"] == pytest.approx(carbon.co2e_g(120.0, "FRA"))
    assert f["joules_per_sample"] == pytest.approx(1.2)
    assert f["components"]["gpu:0"]["source"] == "nvml-counter"
    assert all(t >= 1.0 for t, _ in state.trace) and len(state.trace) == 11  # sliding window
    text = state.text()
    assert "cpu: 20.0 J, source estimate" in text and "measured: nvml-counter" in text
    assert "includes estimates" in text
    html = state.html()
    assert "120.0 J" in html and "g CO2e" in html and "FRA" in html
    state.add_samples(100)
    assert state.figures()["joules_per_sample"] == pytest.approx(0.6)
    assert "Incomplete" not in html and "incomplete" not in text


def test_meter_shows_a_finished_windows_problems():
    from types import SimpleNamespace

    state = MeterState(region="FRA")
    comp = SimpleNamespace(joules=5.0, watts=2.5)
    state.set_final(SimpleNamespace(seconds=2.0, components={"gpu:0": comp}, sources={"gpu:0": "nvml-counter"},
                                    estimated=False, problems=["gpu:0: the end read failed (NVML error)"]))
    assert state.figures()["problems"] == ["gpu:0: the end read failed (NVML error)"]
    assert "incomplete: gpu:0: the end read failed (NVML error)" in state.text(final=True)
    assert "greenlab-problems" in state.html(final=True) and "the end read failed" in state.html(final=True)


def test_meter_rejects_bad_input():
    with pytest.raises(ValueError, match="region"):
        EnergyMeter(region="ATLANTIS", display="text")
    with pytest.raises(ValueError, match="samples"):
        EnergyMeter(samples=-1, display="text")
    with pytest.raises(ValueError, match="plot_hz"):
        EnergyMeter(plot_hz=0, display="text")
    with pytest.raises(ValueError, match="display"):
        EnergyMeter(display="browser")
    with pytest.raises(ValueError, match="window_s"):
        EnergyMeter(window_s=0, display="text")
    with pytest.raises(ValueError, match="samples"):
        EnergyMeter(display="text").add_samples(2.5)


RUN_S = 1.5


def test_live_widget_meter_updates_while_work_runs():
    """The meter updates while the work runs and leaves no thread; its cost (a share of wall
    time, which depends on the machine and its load) is measured in benchmarks/meter_overhead.py."""
    m = EnergyMeter(region="WORLD", samples=None, display="widget", show=False, hz=5,
                    sources=fake_sources())
    seen = []
    a = torch.randn(256, 256)
    with m:
        end = time.perf_counter() + RUN_S
        while time.perf_counter() < end or m.text_updates < 2:  # at least two samples, however slow
            for _ in range(5):
                a = torch.tanh(a @ a)
            m.add_samples(10)
            seen.append(m.view.text.value)
            time.sleep(0.01)
    assert not monitor_threads()
    assert not m.errors
    assert len(set(seen)) >= 2, "the figures never changed while the work ran"
    assert m.text_updates >= 2
    assert m.plot_redraws >= 1 and m.view.image.value[:4] == b"\x89PNG"
    # final figures come from the measurement window: 150 W for the window's length
    assert m.result.joules == pytest.approx(150.0 * m.result.seconds, rel=0.02)
    assert m.figures()["joules"] == pytest.approx(m.result.joules)
    assert m.figures()["joules_per_sample"] == pytest.approx(m.result.joules / m.state.samples)
    assert "final" in m.view.text.value and "measured: nvml-counter" in m.view.text.value
    assert m.view.status.value == "finished"
    # the meter counts its own cost: finite shares of the wall time, one-off costs apart
    assert 0 <= m.setup_seconds <= m.busy_seconds and m.wall_seconds > 0
    assert 0 <= m.steady_overhead_fraction <= m.overhead_fraction


def test_text_mode_prints_a_summary_at_the_end(capsys):
    with gl.widgets.meter(region="DEU", samples=500, display="text", sources=fake_sources()) as m:
        time.sleep(0.3)
    out = capsys.readouterr().out
    assert m.view is None and m.widget is None
    # one of the two components is an estimate: the label says so
    assert "energy (final, measured window with estimates)" in out and "g CO2e" in out and "DEU" in out
    assert "mJ per sample (500 samples)" in out
    assert "cpu:" in out and "source estimate" in out


def test_meter_stops_cleanly_when_the_work_fails(capsys):
    with pytest.raises(RuntimeError, match="boom"):
        with EnergyMeter(display="text", sources=fake_sources()):
            raise RuntimeError("boom")
    assert not monitor_threads()


def test_metered_wraps_a_function(capsys):
    value, m = gl.widgets.metered(sum, [1, 2, 3], display="text")
    assert value == 6 and m.result is not None and m.result.seconds >= 0


# --- calculator ------------------------------------------------------------


def test_calculator_is_a_view_over_scaling():
    calc = CostBenefitCalculator(display="widget", n_devices=4, single_device_hours=20.0,
                                 scaling_efficiency=0.8, region="FRA", pue=1.2,
                                 price_per_device_hour=2.5)
    expected = scaling.cost_benefit(calc.gpu.value, 4, 20.0, 0.8, region="FRA", pue=1.2,
                                    price_per_device_hour=2.5)
    assert calc.result() == expected
    assert calc.plot.value[:4] == b"\x89PNG"
    calc.n_devices.value = 16
    calc.gpu.value = calc.gpu.options[-1]
    got = calc.result()
    assert got == scaling.cost_benefit(calc.gpu.options[-1], 16, 20.0, 0.8, region="FRA", pue=1.2,
                                       price_per_device_hour=2.5)
    assert f"x 16 at efficiency" in calc.summary.value
    assert [r.n_devices for r in calc.sweep()] == [1, 2, 4, 8, 16, 32]
    calc.own_price.value = False
    assert calc.scenario().price_per_device_hour is None
    calc.own_watts.value = True
    calc.watts.value = 250.0
    assert calc.result().power_source == "measured" and calc.result().watts_per_device == 250.0
    assert "(measured)" in calc.summary.value  # the summary followed the checkbox
    calc.own_watts.value = False
    assert "estimate" in calc.result().power_source and "estimate" in calc.summary.value


def test_calculator_controls_are_bounded_and_measured_efficiency_is_used():
    calc = CostBenefitCalculator(display="text")
    calc.n_devices.value = 10**6
    assert calc.n_devices.value == 1024
    calc.efficiency.value = 3.0
    assert calc.efficiency.value == 1.0
    calc.t1_seconds.value, calc.tn_seconds.value, calc.n_measured.value = 100.0, 30.0, 4
    calc.measured_button.click()
    assert calc.efficiency.value == pytest.approx(100 / (4 * 30), abs=1e-4)
    assert "measured run" in calc.message.value
    calc.tn_seconds.value = 10.0  # superlinear: the model cannot use it
    calc.measured_button.click()
    assert "outside" in calc.message.value
    assert calc.efficiency.value == pytest.approx(100 / 120, abs=1e-4)


def test_calculator_rejects_bad_arguments():
    with pytest.raises(ValueError, match="GPU"):
        CostBenefitCalculator(gpu="Abacus 9000", display="text")
    with pytest.raises(ValueError, match="n_devices"):
        CostBenefitCalculator(n_devices=0, display="text")
    with pytest.raises(ValueError, match="scaling_efficiency"):
        CostBenefitCalculator(scaling_efficiency=1.5, display="text")
    with pytest.raises(ValueError, match="region"):
        CostBenefitCalculator(region="ATLANTIS", display="text")
    with pytest.raises(ValueError, match="counts"):
        CostBenefitCalculator(counts=[], display="text")


# --- experiment panel --------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_data():
    return gl.data.load("synthetic", n_train=256, n_test=64, verbose=False)


def tiny_model(ds):
    return lambda: gl.models.build("cnn", in_channels=ds.input_shape[0], depth=1, width=4)


def make_panel(ds, **kw):
    kw.setdefault("base_config", gl.TrainConfig(batch_size=32, max_steps=3, eval_every=3))
    return ExperimentPanel(ds, kw.pop("model_fn", tiny_model(ds)),
                           knobs=kw.pop("knobs", ["precision", "batch_size", "accum_steps"]),
                           train_kwargs={"save": False, "sources": fake_sources()},
                           meter_sources=fake_sources(), display="widget", **kw)


def test_panel_runs_records_and_exports(tiny_data, tmp_path):
    panel = make_panel(tiny_data)
    panel.controls["batch_size"].value = 64
    panel.controls["accum_steps"].value = 2
    panel.run_button.click()
    row = panel.wait(timeout=120)
    assert not panel.errors, panel.errors
    assert row["status"] == "completed" and row["batch_size"] == 64 and row["accum_steps"] == 2
    assert row["steps"] == 2 and row["joules"] > 0  # 256 samples / (64 x 2)
    assert row["energy_sources"] == "cpu: estimate, gpu:0: nvml-counter"  # each figure's source, as measured
    assert panel.run_results[0].config["batch_size"] == 64
    assert "completed" in panel.status.value and "<td>64</td>" in panel.table.value
    assert panel.plot.value[:4] == b"\x89PNG"
    assert panel.meter is not None and panel.meter.result is not None
    assert not panel.run_button.disabled and panel.stop_button.disabled
    panel.export_csv(tmp_path / "runs.csv")
    panel.export_json(tmp_path / "runs.json")
    rows = list(csv.DictReader(open(tmp_path / "runs.csv")))
    assert rows[0]["batch_size"] == "64" and rows[0]["status"] == "completed"
    data = json.load(open(tmp_path / "runs.json"))
    assert data["runs"][0]["accum_steps"] == 2 and data["base_config"]["max_steps"] == 3
    panel.export_path.value = str(tmp_path / "button.csv")
    panel.export_button.click()
    assert (tmp_path / "button.csv").exists() and (tmp_path / "button.json").exists()


def test_panel_stop_ends_the_run_and_keeps_the_partial_result(tiny_data):
    panel = make_panel(tiny_data, base_config=gl.TrainConfig(batch_size=16, epochs=1000))
    panel.run_button.click()
    deadline = time.time() + 60
    while "step" not in panel.progress.value and time.time() < deadline:
        time.sleep(0.05)
    assert "step" in panel.progress.value, "no progress shown within 60 s"
    assert panel.running and panel.run_button.disabled and not panel.stop_button.disabled
    panel.run_button.click()  # a second Run while running is refused, not queued
    assert "already" in panel.status.value
    panel.stop_button.click()
    row = panel.wait(timeout=60)
    assert row["status"] == "stopped" and row["steps"] >= 1
    assert "stopped" in panel.status.value and len(panel.results) == 1


def test_a_failing_run_shows_the_error_and_leaves_the_panel_usable(tiny_data):
    calls = []

    def flaky_model():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("model could not be built")
        return tiny_model(tiny_data)()

    panel = make_panel(tiny_data, model_fn=flaky_model)
    panel.run_button.click()
    assert panel.wait(timeout=60) is None
    assert "model could not be built" in panel.status.value and panel.errors
    assert not panel.run_button.disabled
    panel.run_button.click()
    assert panel.wait(timeout=120)["status"] == "completed"


def test_panel_knobs_are_validated_and_bounded(tiny_data):
    from traitlets import TraitError

    with pytest.raises(ValueError, match="not a TrainConfig field"):
        make_panel(tiny_data, knobs=["warp_speed"])
    with pytest.raises(ValueError, match="no default control"):
        make_panel(tiny_data, knobs=["momentum"])
    with pytest.raises(ValueError, match="outside"):
        make_panel(tiny_data, knobs={"accum_steps": (2, 4)})
    with pytest.raises(ValueError, match="model_fn"):
        ExperimentPanel(tiny_data, None)
    with pytest.raises(ValueError, match="region"):
        make_panel(tiny_data, region="ATLANTIS")
    panel = make_panel(tiny_data, knobs={"momentum": [0.0, 0.9], "accum_steps": (1, 8),
                                         "precision": None})
    with pytest.raises(TraitError):
        panel.controls["precision"].value = "fp8"
    panel.controls["accum_steps"].value = 99
    assert panel.controls["accum_steps"].value == 8
    assert panel.config().accum_steps == 8 and panel.config().momentum == 0.9


def test_a_meter_measures_one_window(capsys):
    m = EnergyMeter(display="text", sources=fake_sources())
    with m:
        pass
    with pytest.raises(RuntimeError, match="one window"):
        m.start()
    with pytest.raises(RuntimeError, match="not started"):
        EnergyMeter(display="text").stop()


def test_meter_label_says_estimate_when_its_source_is_one(capsys):
    estimate_only = [ConstantPower("cpu", "estimate", 30.0, estimated=True)]
    with EnergyMeter(display="text", sources=estimate_only):
        time.sleep(0.05)
    out = capsys.readouterr().out
    assert "energy (final, estimate)" in out and "measured window" not in out
    measured = [ConstantPower("gpu:0", "nvml-counter", 120.0)]
    with EnergyMeter(display="text", sources=measured):
        time.sleep(0.05)
    assert "energy (final, measured window):" in capsys.readouterr().out
    state = MeterState(sources={"cpu": "estimate"}, estimated=True)
    state.add(PowerSample(0.5, {"cpu": 10.0}, {"cpu": 5.0}, 10.0, 5.0))
    assert "Energy (live estimate)" in state.html() and "energy (live estimate)" in state.text()
    assert "Energy (final, estimate)" in state.html(final=True)
# --- text fallbacks where ipywidgets/IPython are missing ------------------------------------

def _run_hidden(tmp_path, code: str):
    import subprocess
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from minimal_env import ROOT, hidden_env

    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=hidden_env(tmp_path / "site"),
                          capture_output=True, text=True, timeout=300)


def test_every_widget_works_as_text_without_ipywidgets_and_ipython(tmp_path):
    code = """
import greenlab as gl
calc = gl.widgets.CostBenefitCalculator(gpu="NVIDIA A100 SXM 80GB", n_devices=8, single_device_hours=40.0,
                                        display="widget")  # asked for widgets: falls back to text
assert calc.mode == "text", calc.mode
calc.use_measured(60.0, 35.0, 2)
calc.n_devices.value = 4  # an observed change recomputes the summary
assert "x 4 at efficiency" in calc.summary.value, calc.summary.value
calc._ipython_display_()
gl.widgets.ScaleOutChecklist(display="widget")._ipython_display_()
ds = gl.data.load("synthetic", n_train=64, n_test=32, verbose=False)
panel = gl.widgets.ExperimentPanel(ds, lambda: gl.models.build("mlp", input_shape=ds.input_shape),
                                   knobs=["precision", "batch_size"], base_config=gl.TrainConfig(max_steps=2),
                                   train_kwargs={"save": False})
panel.controls["batch_size"].value = 16
panel.run_button.click()
row = panel.wait(120)
assert row["status"] == "completed" and row["batch_size"] == 16, row
panel._ipython_display_()
"""
    proc = _run_hidden(tmp_path, code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "NVIDIA A100 SXM 80GB x 4 at efficiency" in out  # the calculator as text
    assert "Recommendation:" in out  # the checklist as text
    assert "run 1 (precision='fp32', batch_size=16): completed" in out  # the panel as text


def test_the_panel_shows_no_image_before_its_first_run_and_says_estimate_once(tiny_data):
    panel = make_panel(tiny_data)
    assert panel.plot.layout.display == "none"  # an empty image would show as a broken one
    panel.run_button.click()
    row = panel.wait(timeout=120)
    assert row["estimated"] and panel.plot.layout.display != "none"
    cell = panel.table.value.split("<td>")[-1]
    assert cell.count("estimate") == 1, cell


def test_text_stand_ins_are_bounded_observed_and_clickable():
    from greenlab.widgets.common import TEXT_KIT

    box = TEXT_KIT.BoundedIntText(value=5, min=1, max=10)
    seen = []
    box.observe(lambda change: seen.append(change["new"]), names="value")
    box.value = 99
    assert box.value == 10 and seen == [10]
    box.value = 10  # unchanged: no callback
    assert seen == [10]
    button = TEXT_KIT.Button(description="Run")
    button.on_click(lambda b: seen.append(b.description))
    button.click()
    assert seen == [10, "Run"]
    assert TEXT_KIT.HTML("ready").value == "ready" and TEXT_KIT.VBox([box]).children == [box]


# the widget classes ipywidgets 7.7.1 has (Colab preinstalls 7.7.1; pyproject admits >=7.7): read from
# `dir(ipywidgets)` of a 7.7.1 install. The widget tests pass under 7.7.1 as under 8.
IPYWIDGETS_7_7 = {
    "Accordion", "AppLayout", "Audio", "BoundedFloatText", "BoundedIntText", "Box", "Button", "ButtonStyle",
    "Checkbox", "Color", "ColorPicker", "Combobox", "Controller", "CoreWidget", "DOMWidget", "DatePicker",
    "Dropdown", "FileUpload", "FloatLogSlider", "FloatProgress", "FloatRangeSlider", "FloatSlider", "FloatText",
    "GridBox", "GridspecLayout", "HBox", "HTML", "HTMLMath", "Image", "IntProgress", "IntRangeSlider",
    "IntSlider", "IntText", "Label", "Layout", "Output", "Password", "Play", "RadioButtons", "Select",
    "SelectMultiple", "SelectionRangeSlider", "SelectionSlider", "SliderStyle", "Style", "Tab", "Text",
    "Textarea", "ToggleButton", "ToggleButtons", "ToggleButtonsStyle", "TwoByTwoLayout", "VBox", "Valid",
    "ValueWidget", "Video", "Widget"}


def _ipywidgets_names_used() -> set:
    """Every ``w.Name`` / ``ipywidgets.Name`` the library uses, where ``w`` is ipywidgets."""
    import ast
    from pathlib import Path

    used = set()
    for path in (Path(gl.__file__).parent).rglob("*.py"):
        tree = ast.parse(path.read_text())
        aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                   for a in n.names if a.name == "ipywidgets"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr[:1].isupper():
                used.add(node.attr)
            if isinstance(node, ast.ImportFrom) and node.module == "ipywidgets":
                used |= {a.name for a in node.names}
    return used


def test_the_widgets_use_only_what_ipywidgets_7_7_has():
    """Colab preinstalls ipywidgets 7.7.1: a widget class added in 8 (Stack, TagsInput, ...) would
    fail there, so the library uses none."""
    used = _ipywidgets_names_used()
    assert {"HTML", "Button", "VBox", "RadioButtons"} <= used  # the scan finds the library's widgets
    assert used <= IPYWIDGETS_7_7, f"not in ipywidgets 7.7: {sorted(used - IPYWIDGETS_7_7)}"
