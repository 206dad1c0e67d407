"""PowerMonitor: validation, bounded buffer, subscribers, clean stops."""

import math
import threading
import time

import pytest

from greenlab.energy import PowerMonitor
from greenlab.energy import monitor as monitor_mod
from greenlab.energy.sources import EnergySource


class SteadySource(EnergySource):
    name = "rapl"

    def __init__(self, watts, component="cpu", fail_after=None):
        super().__init__(component)
        self.watts, self.reads, self.fail_after = watts, 0, fail_after

    def read_joules(self):
        self.reads += 1
        if self.fail_after is not None and self.reads > self.fail_after:
            raise OSError("sensor vanished")
        return self.watts * time.perf_counter()


def monitor_threads():
    return [t for t in threading.enumerate() if t.name == "greenlab-power-monitor"]


@pytest.mark.parametrize("hz", [0, -1, 1001, 1e9, math.nan, math.inf, True, "10", None])
def test_bad_hz_raises(hz):
    with pytest.raises(ValueError, match="hz"):
        PowerMonitor(hz=hz, sources=[SteadySource(1.0)])


@pytest.mark.parametrize("window_s", [0, -5, math.nan, math.inf, "60"])
def test_bad_window_raises(window_s):
    with pytest.raises(ValueError, match="window_s"):
        PowerMonitor(hz=10, window_s=window_s, sources=[SteadySource(1.0)])


def test_too_many_samples_raises():
    with pytest.raises(ValueError, match="samples"):
        PowerMonitor(hz=1000, window_s=10_000, sources=[SteadySource(1.0)])


def test_samples_track_power_and_buffer_is_bounded():
    sources = [SteadySource(50.0), SteadySource(5.0, "dram")]
    mon = PowerMonitor(hz=100, window_s=0.05, sources=sources)
    seen = []
    mon.subscribe(seen.append)
    with mon:
        deadline = time.monotonic() + 30  # more samples than the buffer keeps, however slow
        while len(seen) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
    samples = mon.samples()
    assert len(seen) >= 8
    assert len(samples) == 5  # 100 Hz x 0.05 s
    last = samples[-1]
    assert last.watts["cpu"] == pytest.approx(50.0, rel=0.01)
    assert last.total_watts == pytest.approx(55.0, rel=0.01)
    assert last.total_joules == pytest.approx(55.0 * last.t_s, rel=0.05)
    assert [s.t_s for s in samples] == sorted(s.t_s for s in samples)
    assert mon.sources == {"cpu": "rapl", "dram": "rapl"} and not mon.estimated


def test_start_stop_idempotent():
    mon = PowerMonitor(hz=50, sources=[SteadySource(1.0)])
    mon.start()
    mon.start()
    assert len(monitor_threads()) == 1 and mon.running
    mon.stop()
    mon.stop()
    assert monitor_threads() == [] and not mon.running


def test_subscribe_and_unsubscribe():
    got = []
    mon = PowerMonitor(hz=100, sources=[SteadySource(2.0)])
    mon.subscribe(got.append)
    with mon:
        deadline = time.monotonic() + 30  # the first sample, however slow the machine
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        mon.unsubscribe(got.append)
        n = len(got)
        time.sleep(0.1)
    assert n > 0 and len(got) <= n + 1
    assert got[0].watts["cpu"] == pytest.approx(2.0, rel=0.05)
    with pytest.raises(ValueError):
        mon.subscribe("not callable")


def test_source_exception_stops_thread_and_is_recorded():
    mon = PowerMonitor(hz=200, sources=[SteadySource(1.0, fail_after=3)])
    mon.start()
    deadline = time.time() + 30  # the thread's end, however slow the machine
    while mon.running and time.time() < deadline:
        time.sleep(0.01)
    assert not mon.running and monitor_threads() == []
    assert isinstance(mon.error, OSError)
    assert not mon.complete
    assert mon.problems == ["cpu: rapl failed (OSError: sensor vanished); monitoring stopped"]
    mon.stop()


def test_monitor_carries_discovery_problems_and_source_faults(tmp_path):
    from greenlab.energy.nvml import Nvml
    from greenlab.energy.sources import NvmlCounterSource, default_sources

    from fakes import FakeGpu, FakePynvml

    bad = default_sources(FakePynvml([FakeGpu("GPU-x", energy_mj=None, power_mw=None)]),
                          tmp_path / "none", environ={}, gpus="all")
    mon = PowerMonitor(hz=50, sources=bad)
    assert not mon.complete and mon.problems[0].startswith("gpu:0: visible but unreadable")
    readings = iter([9_000_000] + [10_000] * 1000)  # mJ: the counter resets after one read
    lib = Nvml(FakePynvml([FakeGpu("GPU-r", energy_mj=lambda: next(readings))]))
    with PowerMonitor(hz=100, sources=[NvmlCounterSource(lib, lib.handle(0), "gpu:0")]) as mon:
        time.sleep(0.1)
    assert any("energy counter went backwards" in p for p in mon.problems)


def test_keyboard_interrupt_in_with_block_leaves_no_thread():
    with pytest.raises(KeyboardInterrupt):
        with PowerMonitor(hz=50, sources=[SteadySource(1.0)]):
            time.sleep(0.05)
            raise KeyboardInterrupt
    assert monitor_threads() == []


def test_exception_in_with_block_leaves_no_thread():
    with pytest.raises(ZeroDivisionError):
        with PowerMonitor(hz=50, sources=[SteadySource(1.0)]):
            1 / 0
    assert monitor_threads() == []


def test_atexit_handler_stops_running_monitors():
    mon = PowerMonitor(hz=50, sources=[SteadySource(1.0)]).start()
    monitor_mod._stop_all()
    assert not mon.running and monitor_threads() == []


def test_default_sources_on_this_machine():
    with PowerMonitor(hz=20) as mon:
        sum(i * i for i in range(500_000))
        time.sleep(0.15)
    assert "cpu" in mon.sources
    assert mon.samples() and mon.samples()[-1].total_joules > 0
