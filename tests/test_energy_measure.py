"""Measurement windows: nesting, idle subtraction, short windows, decorator, threads, CUDA sync."""

import json
import sys
import threading
import time
import types

import pytest

from greenlab.energy import IdlePower, ShortWindowWarning, measure, measure_idle
from greenlab.energy.sources import EnergySource


class ManualCounter(EnergySource):
    """A counter the test sets by hand (joules)."""

    name = "rapl"

    def __init__(self, component="cpu", period_s=0.0):
        super().__init__(component)
        self.value = 0.0
        self.update_period_s = period_s

    def read_joules(self):
        return self.value


class ConstantPower(EnergySource):
    """Energy rising at a fixed wattage with the real clock; polled like a sampler."""

    name = "nvml-power"
    poll_interval_s = 0.01

    def __init__(self, watts, component="gpu:0"):
        super().__init__(component)
        self.watts, self.polls = watts, 0

    def read_joules(self):
        return self.watts * time.monotonic()

    def poll(self):
        self.polls += 1


def poller_threads():
    return [t for t in threading.enumerate() if t.name == "greenlab-window-poller"]


def test_nested_windows_attach_children():
    c = ManualCounter()
    with measure("outer", sources=[c], sync=False) as outer:
        c.value = 10.0
        with measure("inner-1", sources=[c], sync=False) as inner1:
            c.value = 15.0
        with measure("inner-2", sources=[c], sync=False):
            c.value = 18.0
        c.value = 20.0
    r = outer.result
    assert r.joules == 20.0
    assert [k.label for k in r.children] == ["inner-1", "inner-2"]
    assert [k.joules for k in r.children] == [5.0, 3.0]
    assert inner1.result.children == []
    assert r.to_dict()["children"][0]["label"] == "inner-1"


def test_window_after_nesting_is_not_a_child():
    c = ManualCounter()
    with measure("a", sources=[c], sync=False):
        pass
    with measure("b", sources=[c], sync=False) as b:
        pass
    assert b.result.children == []


def test_short_window_warns_and_records():
    c = ManualCounter(period_s=0.5)
    with pytest.warns(ShortWindowWarning, match="Repeat"):
        with measure("blink", sources=[c], sync=False) as m:
            c.value = 1.0
    assert any("shorter than" in w for w in m.result.warnings)


def test_long_enough_window_does_not_warn(recwarn):
    c = ManualCounter(period_s=0.01)
    with measure("ok", sources=[c], sync=False) as m:
        time.sleep(0.11)  # more than 10 update periods
    assert m.result.warnings == []
    assert not [w for w in recwarn if issubclass(w.category, ShortWindowWarning)]


def test_idle_subtraction_shows_both_figures():
    c = ManualCounter()
    idle = IdlePower({"cpu": 2.0, "gpu:0": 50.0}, seconds=1.0)
    with measure("work", idle=idle, sources=[c], sync=False) as m:
        c.value = 10.0
        time.sleep(0.05)
    r = m.result
    assert r.joules == 10.0
    assert r.idle_watts == 2.0  # only components in this window count
    assert r.joules_above_idle == pytest.approx(10.0 - 2.0 * r.seconds)
    assert "above idle" in r.summary()
    assert measure("plain", sources=[c]).start().stop().joules_above_idle is None


def test_measure_idle_reports_mean_watts():
    idle = measure_idle(0.1, sources=[ConstantPower(40.0)])
    assert idle.watts_by_component["gpu:0"] == pytest.approx(40.0, rel=0.05)
    assert idle.seconds >= 0.1 and idle.sources == {"gpu:0": "nvml-power"}
    with pytest.raises(ValueError):
        measure_idle(0)
    with pytest.raises(ValueError):
        measure("x", idle={"cpu": 1.0})


def test_decorator_keeps_every_call():
    c = ManualCounter()
    m = measure("step", sources=[c], sync=False)

    @m
    def step(x):
        c.value += x
        return x * 2

    assert [step(1.0), step(2.0), step(3.0)] == [2.0, 4.0, 6.0]
    assert [r.joules for r in m.results] == [1.0, 2.0, 3.0]
    assert m.result is m.results[-1]


def test_start_stop_and_misuse():
    c = ManualCounter()
    m = measure("manual", sources=[c], sync=False)
    m.start()
    with pytest.raises(RuntimeError):
        m.start()
    c.value = 4.0
    r = m.stop()
    assert r.joules == 4.0 and m.result is r
    with pytest.raises(RuntimeError):
        m.stop()


def test_result_fields_and_provenance():
    cpu = ManualCounter("cpu")
    gpu = ManualCounter("gpu:0")
    gpu.name, gpu.estimated, gpu.rel_uncertainty = "estimate", True, 0.5
    with measure("two", sources=[cpu, gpu], sync=False) as m:
        cpu.value, gpu.value = 3.0, 4.0
        time.sleep(0.01)
    r = m.result
    assert r.sources == {"cpu": "rapl", "gpu:0": "estimate"}
    assert r.estimated and r.joules == 7.0
    assert r.watts == pytest.approx(7.0 / r.seconds)
    json.dumps(r.to_dict())
    assert "estimate" in r.summary()


def test_sampling_threads_stopped_after_window_and_after_error():
    source = ConstantPower(10.0)
    with measure("poll", sources=[source], sync=False):
        time.sleep(0.05)
        assert len(poller_threads()) == 1
    assert poller_threads() == []
    assert source.polls > 0
    with pytest.raises(KeyError):
        with measure("boom", sources=[ConstantPower(10.0)], sync=False) as m:
            raise KeyError("inside the window")
    assert poller_threads() == []
    assert m.result is not None and m.result.joules > 0


def test_default_window_on_this_machine_measures_cpu():
    with measure("default") as m:
        start = time.process_time()
        while time.process_time() - start < 0.15:  # longer than 10 CPU-time ticks
            pass
    assert "cpu" in m.result.components and m.result.complete
    assert m.result.components["cpu"].joules > 0
    assert not m.result.warnings


def fake_torch_cuda(monkeypatch, count=2, current=0, reserved=(), initialized=True):
    """A torch stand-in whose CUDA records synchronize() calls; ``reserved``: devices holding
    allocator memory."""
    calls = []
    cuda = types.SimpleNamespace(
        is_initialized=lambda: initialized, device_count=lambda: count,
        current_device=lambda: current,
        memory_reserved=lambda i: 1 << 20 if i in reserved else 0,
        synchronize=lambda i: calls.append(i))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return calls


def test_cuda_synchronised_at_both_edges_on_used_devices_only(monkeypatch):
    calls = fake_torch_cuda(monkeypatch, count=4, current=1, reserved=(1, 3))
    with measure("sync", sources=[ManualCounter()]):
        assert calls == [1, 3]  # devices 0 and 2 are not this process's: never touched
    assert calls == [1, 3, 1, 3]
    calls.clear()
    with measure("nosync", sources=[ManualCounter()], sync=False):
        pass
    assert calls == []


def test_no_sync_before_torch_initialises_cuda(monkeypatch):
    calls = fake_torch_cuda(monkeypatch, initialized=False)
    with measure("cpu only", sources=[ManualCounter()]):
        pass
    assert calls == []


def test_a_30_ms_window_on_the_default_cpu_source_warns():
    from greenlab.energy.estimate import CpuEstimateSource

    cpu = CpuEstimateSource()  # CPU time advances in 10 ms ticks: 10 periods = 100 ms
    with pytest.warns(ShortWindowWarning, match="shorter than 10 update periods"):
        with measure("30 ms", sources=[cpu], sync=False) as m:
            time.sleep(0.03)
    assert m.result.warnings


@pytest.mark.parametrize("seconds, warns", [(0.15, True), (0.5, True), (1.05, False)])
def test_windows_under_10_periods_of_a_100_ms_counter_warn(seconds, warns, recwarn):
    c = ManualCounter("gpu:0", period_s=0.1)
    with measure("w", sources=[c], sync=False) as m:
        time.sleep(seconds)
    assert bool(m.result.warnings) == warns
    assert bool([w for w in recwarn if issubclass(w.category, ShortWindowWarning)]) == warns


# --- one carrier: every result reads estimated / complete / problems / sources from its Measurement ---

def _carrier(problems=(), estimated=True):
    from greenlab.energy import ComponentEnergy, Measurement

    comp = ComponentEnergy("cpu", "estimate", 10.0, 2.0, 5.0, estimated, 0.5)
    return Measurement("w", 2.0, {"cpu": comp}, problems=list(problems))


def test_results_read_their_flags_through_the_measurement():
    from greenlab.techniques.compress import InferenceCost
    from greenlab.techniques.lm.serving import GenerationRun

    lost = _carrier(["cpu: a read failed"])
    cost = InferenceCost(0.1, 1.0, 0.1, 8, 3, energy=lost)
    gen = GenerationRun("g", 10, 1.0, 10.0, energy=_carrier(estimated=False))
    assert cost.problems == ["cpu: a read failed"] and not cost.complete and cost.estimated
    assert cost.sources == {"cpu": "estimate"}
    assert cost.to_dict()["problems"] == ["cpu: a read failed"] and cost.to_dict()["complete"] is False
    assert gen.complete and not gen.estimated and gen.problems == []


def test_with_problems_adds_each_text_once_and_leaves_the_original():
    m = _carrier(["cpu: x"])
    more = m.with_problems(["cpu: x", "meter: y"])
    assert more.problems == ["cpu: x", "meter: y"] and m.problems == ["cpu: x"]
    assert m.with_problems([]) is m


def test_a_train_run_keeps_the_keys_of_its_record():
    from greenlab.training import data, models
    from greenlab.training.loop import TrainConfig, train

    ds = data.generate(n_train=32, n_test=16)
    run = train(models.build("mlp", input_shape=ds.input_shape, num_classes=ds.num_classes), ds,
                TrainConfig(epochs=1, batch_size=16), log=False, save=False)
    record = run.to_dict()
    for key in ("estimated", "complete", "problems", "sources", "energy"):
        assert key in record
    assert record["problems"] == run.energy.problems and record["sources"] == run.energy.sources
    assert run.complete == run.energy.complete and run.estimated == run.energy.estimated
