"""Nothing lost silently: every injected fault leaves the result incomplete, naming the
component and the reason (through the fake NVML, fake counters and the window machinery)."""

import time

import pytest

from greenlab.energy import IdlePower, measure, measure_idle
from greenlab.energy.nvml import Nvml
from greenlab.energy.sources import (EnergySource, NvmlCounterSource, NvmlPowerSource,
                                     default_sources, discover)

from fakes import FakeGpu, FakeNVMLError, FakePynvml, SlopeSource

pytestmark = pytest.mark.filterwarnings("ignore::greenlab.energy.ShortWindowWarning")


class Scripted(EnergySource):
    """A counter whose reads come from a list; an Exception in the list is raised."""

    name = "rapl"

    def __init__(self, readings, component="cpu", poll_error=None):
        super().__init__(component)
        self.readings = list(readings)
        self.poll_error = poll_error
        if poll_error is not None:
            self.poll_interval_s = 0.01

    def read_joules(self):
        value = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        if isinstance(value, BaseException):
            raise value
        return value

    def poll(self):
        if self.poll_error is not None:
            raise self.poll_error


def no_rapl(tmp_path):
    return tmp_path / "no-powercap"


def test_failed_end_read_is_incomplete_and_named():
    gpu = Scripted([100.0, RuntimeError("GPU is lost")], component="gpu:0")
    gpu.name = "nvml-counter"
    with measure("train", sources=[SlopeSource(10.0), gpu], sync=False) as m:
        time.sleep(0.02)
    r = m.result
    assert not r.complete
    assert list(r.components) == ["cpu"]  # the GPU figure is not in the total ...
    assert "incomplete" in r.summary()  # ... and the line says so, naming what and why
    assert "gpu:0: nvml-counter failed at window end (RuntimeError: GPU is lost)" in r.summary()
    assert r.to_dict()["complete"] is False and r.to_dict()["problems"] == r.problems


def test_failed_start_read_is_incomplete_and_named():
    gpu = Scripted([OSError("busy"), 5.0], component="gpu:0")
    with measure("w", sources=[SlopeSource(), gpu], sync=False) as m:
        pass
    assert not m.result.complete
    assert m.result.problems == ["gpu:0: rapl failed at window start (OSError: busy); "
                                 "its energy is missing"]


def test_complete_window_has_no_problems():
    with measure("ok", sources=[SlopeSource()], sync=False) as m:
        time.sleep(0.01)
    assert m.result.complete and m.result.problems == []
    assert "incomplete" not in m.result.summary()


def test_power_sampling_gap_is_not_bridged_and_is_reported():
    """270 W throughout; readings fail for ~0.2 s in the middle. The gap's energy must be
    missing (never interpolated across) and the window must say so."""
    state = {"broken": False}

    def power_mw():
        if state["broken"]:
            raise FakeNVMLError("Unknown Error")
        return 270_000

    lib = Nvml(FakePynvml([FakeGpu("GPU-g", power_mw=power_mw, instant_mw=None)]))
    source = NvmlPowerSource(lib, lib.handle(0), "gpu:0")
    with measure("gap", sources=[source], sync=False) as m:
        time.sleep(0.15)
        state["broken"] = True
        time.sleep(0.25)
        state["broken"] = False
        time.sleep(0.15)
    r = m.result
    assert not r.complete
    text = "; ".join(r.problems)
    assert "gpu:0: nvml-power polling failed" in text and "Unknown Error" in text
    assert "were not sampled and their energy is missing" in text
    # nothing integrated across the gap: well under 270 W x the whole window
    assert r.components["gpu:0"].joules <= 270.0 * (r.seconds - 0.2)
    assert r.components["gpu:0"].joules >= 270.0 * 0.2  # what was sampled is kept


def test_poller_thread_dying_is_reported():
    source = Scripted([1.0], poll_error=SystemExit("poller killed"))
    with measure("dies", sources=[source], sync=False) as m:
        time.sleep(0.05)
    assert not m.result.complete
    assert any("background poller stopped (SystemExit: poller killed)" in p
               for p in m.result.problems)


def test_nvml_counter_reset_is_reported():
    readings = iter([5_000_000, 5_100_000, 2_000, 52_000])  # mJ; reset after the 2nd read
    gpu = FakeGpu("GPU-r", energy_mj=lambda: next(readings))
    lib = Nvml(FakePynvml([gpu]))
    source = NvmlCounterSource(lib, lib.handle(0), "gpu:0")
    with measure("reset", sources=[source], sync=False) as m:
        source.read_joules()  # 5 100 J
        source.read_joules()  # 2 J: went backwards
    r = m.result
    assert not r.complete
    assert r.components["gpu:0"].joules == pytest.approx(100.0 + 50.0)  # before + after reset
    assert any("gpu:0: nvml-counter: energy counter went backwards" in p for p in r.problems)


def test_any_counter_going_backwards_is_left_out_and_reported():
    with measure("back", sources=[Scripted([10.0, 4.0])], sync=False) as m:
        pass
    assert m.result.components == {}
    assert m.result.problems == ["cpu: rapl went backwards (-6 J; counter reset?); its energy "
                                 "is missing from this total"]


def test_negative_above_idle_is_flagged():
    idle = IdlePower({"cpu": 1000.0}, seconds=1.0)
    with measure("quiet", idle=idle, sources=[SlopeSource(10.0)], sync=False) as m:
        time.sleep(0.02)
    r = m.result
    assert r.joules_above_idle < 0 and not r.complete
    assert any(p.startswith("above idle: negative") for p in r.problems)


def test_problems_of_the_idle_window_travel_into_results():
    idle = measure_idle(0.02, sources=[Scripted([1.0, RuntimeError("gone")])])
    assert idle.problems and "failed at window end" in idle.problems[0]
    with measure("w", idle=idle, sources=[SlopeSource()], sync=False) as m:
        pass
    assert any(p.startswith("idle: cpu: rapl failed") for p in m.result.problems)


def test_no_sources_is_not_a_silent_zero():
    with measure("nothing", sources=[], sync=False) as m:
        pass
    assert m.result.joules == 0 and not m.result.complete
    assert "nothing was measured" in m.result.summary()


def test_visible_but_unreadable_gpu_travels_into_windows(tmp_path):
    gpus = [FakeGpu("GPU-ok", energy_mj=lambda: 1_000), FakeGpu("GPU-bad", energy_mj=None,
                                                                power_mw=None)]
    sources = default_sources(FakePynvml(gpus), no_rapl(tmp_path), environ={}, gpus="all")
    assert [s.component for s in sources] == ["gpu:0", "cpu"]
    assert len(sources.problems) == 1 and sources.problems[0].startswith(
        "gpu:1: visible but unreadable")
    with measure("w", sources=sources, sync=False) as m:
        pass
    assert not m.result.complete
    assert "gpu:1: visible but unreadable" in m.result.summary()


def test_mig_instance_has_an_explicit_policy(tmp_path):
    gpus = [FakeGpu("GPU-aaaa", energy_mj=lambda: 1_000)]
    found = discover(FakePynvml(gpus), no_rapl(tmp_path), gpus="all",
                     environ={"CUDA_VISIBLE_DEVICES": "MIG-0f1e2d3c-aaaa-bbbb"})
    assert [s.component for s in found.sources] == ["cpu"]
    (problem,) = found.problems
    assert problem.startswith("gpu:0: MIG-0f1e2d3c-aaaa-bbbb is a MIG instance")
    assert "only for the whole physical GPU" in problem and "not measured" in problem
    with measure("mig", sources=found.sources, sync=False) as m:
        pass
    assert not m.result.complete and "MIG instance" in m.result.summary()


def test_windows_without_given_sources_carry_discovery_problems(monkeypatch, tmp_path):
    import importlib

    measure_mod = importlib.import_module("greenlab.energy.measure")

    gpus = [FakeGpu("GPU-bad", energy_mj=None, power_mw=None)]
    real = measure_mod.discover
    monkeypatch.setattr(measure_mod, "discover", lambda **kw: real(
        FakePynvml(gpus), no_rapl(tmp_path), environ={}, **kw))
    with measure("default", sync=False) as m:
        pass
    assert not m.result.complete
    assert m.result.problems[0].startswith("gpu:0: visible but unreadable")


@pytest.fixture(scope="module")
def incomplete_runs(tmp_path_factory):
    """Two variants trained (compare, 1 repeat) with a GPU that is visible but unreadable."""
    from greenlab.training import data, models
    from greenlab.experiments import compare
    from greenlab.training.loop import TrainConfig

    tmp = tmp_path_factory.mktemp("incomplete")
    gpus = [FakeGpu("GPU-bad", energy_mj=None, power_mw=None)]
    sources = default_sources(FakePynvml(gpus), no_rapl(tmp), environ={}, gpus="all")
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    variants = {"a": TrainConfig(epochs=1, batch_size=32), "b": TrainConfig(epochs=1, batch_size=16)}
    cmp = compare(variants, lambda: models.build("mlp", input_shape=ds.input_shape, hidden=(8,)),
                  ds, repeats=1, warmup=0, device="cpu", sources=sources, save=False)
    return cmp


def test_train_result_carries_discovery_problems(incomplete_runs):
    result = incomplete_runs.runs["a"][0]
    assert not result.complete
    assert result.problems[0].startswith("gpu:0: visible but unreadable")
    assert "energy incomplete: gpu:0: visible but unreadable" in result.summary()
    assert result.to_dict()["complete"] is False


def test_comparison_carries_the_flag(incomplete_runs):
    cmp = incomplete_runs
    assert cmp.problems and cmp.problems[0].startswith("a repeat 1: gpu:0: visible but unreadable")
    assert "energy INCOMPLETE" in str(cmp)
    assert all(row["complete"] is False for row in cmp.table())


def test_carbon_statement_and_metrics_carry_the_flag(incomplete_runs):
    from greenlab.impact import report

    result = incomplete_runs.runs["a"][0]
    statement = report.carbon_statement(result, region="FR")
    assert "**Incomplete:**" in statement.markdown and "gpu:0: visible but unreadable" in statement.markdown
    assert statement.values["complete"] is False
    from_log = report.carbon_statement(result.to_dict(), region="FR")  # a results-log dict too
    assert from_log.values["complete"] is False
    table = report.efficiency_metrics([result])
    assert table.rows[0].energy_problems
    assert any("energy INCOMPLETE" in n for n in table.notes)


def test_leaderboard_carries_the_flag(incomplete_runs, tmp_path):
    from greenlab.course.leaderboard import Leaderboard

    board = Leaderboard(tmp_path / "board.json")
    entry = board.add_result("alice", incomplete_runs.runs["a"][0])
    assert entry["complete"] is False and entry["problems"][0].startswith("gpu:0")
    assert "INCOMPLETE" in board.table()


def test_ctrl_c_during_a_windows_first_read_leaves_it_usable():
    """A KeyboardInterrupt in the start read propagates as itself; the window is not left half
    started (it used to answer 'already running', then an AttributeError on stop())."""
    from greenlab.energy.source import CounterSource

    class InterruptedOnce(CounterSource):
        name = "interrupted-once"

        def __init__(self):
            super().__init__("cpu")
            self.reads = 0

        def raw_joules(self):
            self.reads += 1
            if self.reads == 1:
                raise KeyboardInterrupt
            return float(self.reads)

    window = measure("w", sources=[InterruptedOnce()], sync=False)
    with pytest.raises(KeyboardInterrupt):
        with window:
            pass
    assert not window.running
    with pytest.raises(RuntimeError, match="was not started"):
        window.stop()
    with window:
        pass
    assert window.result.complete and window.result.joules == pytest.approx(1.0)
