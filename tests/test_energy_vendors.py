"""Energy on learners' own machines: Apple Silicon (zeus-apple-silicon), AMD GPUs (amdsmi), and
the help greenlab doctor prints where RAPL is root-only.

The fakes behave as the real libraries do: ``zeus_apple_silicon.AppleEnergyMonitor`` returns
``AppleEnergyMetrics`` whose fields are integer millijoules since the monitor was made, or None
where the chip does not report them, and raises ``RuntimeError`` where it cannot read the SoC;
``amdsmi`` returns dicts (the accumulator under ``power`` in older releases, ``energy_accumulator``
in newer ones, with ``counter_resolution`` in microjoules per tick), reports ``"N/A"`` for fields
a part lacks, and raises its ``AmdSmiLibraryException``.
"""

from __future__ import annotations

import math
import types

import pytest

from greenlab.energy import measure
from greenlab.energy import rapl as rapl_mod
from greenlab.energy.amd import AmdCounterSource, AmdPowerSource, amd_gpu_present, probe_amd
from greenlab.energy.apple import AppleSocSource, probe_apple
from greenlab.energy.sources import discover
from greenlab.session.hardware import doctor, format_report
from fakes import FakePynvml

pytestmark = pytest.mark.filterwarnings("ignore::greenlab.energy.ShortWindowWarning")


# --- Apple Silicon ------------------------------------------------------------------------------


class FakeAppleMetrics:
    def __init__(self, **fields):
        for name in ("cpu_total_mj", "efficiency_cores_mj", "performance_cores_mj",
                     "efficiency_core_manager_mj", "performance_core_manager_mj", "dram_mj",
                     "gpu_mj", "gpu_sram_mj", "ane_mj"):
            setattr(self, name, fields.get(name))


def fake_apple(reading, fail_init=False):
    """A ``zeus_apple_silicon`` stand-in whose monitor reports the cumulative millijoules in
    ``module.now`` (a dict of fields; the test moves it on, as time and work would)."""
    module = types.SimpleNamespace(now=dict(reading), AppleEnergyMetrics=FakeAppleMetrics)

    class AppleEnergyMonitor:
        def __init__(self):
            if fail_init:
                raise RuntimeError("IOReport: no energy model channels on this system")

        def get_cumulative_energy(self):
            return FakeAppleMetrics(**module.now)

    module.AppleEnergyMonitor = AppleEnergyMonitor
    return module


def test_apple_soc_counters_give_exact_joules_per_component():
    module = fake_apple({"cpu_total_mj": 1_000, "gpu_mj": 500, "gpu_sram_mj": 10, "dram_mj": 200, "ane_mj": 0})
    probe = probe_apple(module, system="Darwin", machine="arm64")
    assert probe.status == "readable"
    assert [s.component for s in probe.sources] == ["cpu", "gpu:0", "dram", "ane"]
    assert all(s.name == "apple-soc" and not s.estimated for s in probe.sources)
    window = measure("soc", sources=probe.sources, sync=False)
    with window:
        module.now = {"cpu_total_mj": 6_000, "gpu_mj": 2_500, "gpu_sram_mj": 30, "dram_mj": 700, "ane_mj": 40}
    r = window.result
    assert r.components["cpu"].joules == pytest.approx(5.0)
    assert r.components["gpu:0"].joules == pytest.approx(2.02)  # GPU and its SRAM
    assert r.components["dram"].joules == pytest.approx(0.5)
    assert r.components["ane"].joules == pytest.approx(0.04)
    assert not r.estimated and r.complete


def test_apple_fields_the_chip_lacks_are_left_out_and_a_counter_that_steps_back_is_a_fault():
    module = fake_apple({"cpu_total_mj": 3_000, "gpu_mj": 100})
    probe = probe_apple(module, system="Darwin", machine="arm64")
    assert [s.component for s in probe.sources] == ["cpu", "gpu:0"]  # no DRAM or ANE on this chip
    cpu = probe.sources[0]
    first = cpu.read_joules()
    module.now = {"cpu_total_mj": 2_000, "gpu_mj": 150}
    cpu.read_joules()  # went backwards: 3.0 J -> 2.0 J
    module.now = {"cpu_total_mj": 2_500, "gpu_mj": 200}
    assert cpu.read_joules() - first == pytest.approx(0.5)
    assert cpu.fault_count == 1 and "went backwards" in cpu.faults_since(0)[0]


def test_apple_probe_says_why_when_it_cannot_measure():
    assert probe_apple(None, system="Linux", machine="x86_64").status == "absent"
    assert probe_apple(None, system="Darwin", machine="x86_64").status == "absent"  # an Intel Mac
    failing = probe_apple(fake_apple({}, fail_init=True), system="Darwin", machine="arm64")
    assert failing.status == "unusable" and "IOReport" in failing.reason
    empty = probe_apple(fake_apple({}), system="Darwin", machine="arm64")
    assert empty.status == "unusable" and not empty.sources


def test_a_field_that_stops_being_reported_raises_so_the_window_is_incomplete():
    module = fake_apple({"dram_mj": 5})
    source = AppleSocSource(module.AppleEnergyMonitor(), "dram", ("dram_mj",))
    source.read_joules()
    module.now = {}
    with pytest.raises(RuntimeError, match="no longer reports dram_mj"):
        source.read_joules()


def test_discover_on_apple_silicon_measures_the_soc_instead_of_estimating(tmp_path):
    module = fake_apple({"cpu_total_mj": 10, "gpu_mj": 5, "dram_mj": 1, "ane_mj": 0})
    found = discover(FakePynvml([]), tmp_path / "no-powercap", environ={}, apple_module=module,
                     amd_module=fake_amdsmi([]), system="Darwin", machine="arm64")
    assert found.apple_status == "readable"
    assert {s.component: s.name for s in found.sources} == {
        "cpu": "apple-soc", "gpu:0": "apple-soc", "dram": "apple-soc", "ane": "apple-soc"}
    # the library missing on a Mac: the estimate, saying how to measure instead
    found = discover(FakePynvml([]), tmp_path / "no-powercap", environ={},
                     apple_module=fake_apple({}, fail_init=True), amd_module=fake_amdsmi([]),
                     system="Darwin", machine="arm64")
    (cpu,) = found.sources
    assert cpu.name == "estimate" and "could not read the SoC" in cpu.note


# --- AMD GPUs -----------------------------------------------------------------------------------


class AmdSmiException(Exception):
    pass


class AmdSmiLibraryException(AmdSmiException):
    pass


def fake_amdsmi(gpus, key="energy_accumulator", fail_init=False):
    """An ``amdsmi`` stand-in; ``gpus`` is a list of dicts with ``ticks`` (a list read in turn),
    ``resolution`` (uJ per tick), ``power`` (W or "N/A") and ``energy_fails``."""
    state = {"reads": [0] * len(gpus)}

    def amdsmi_init(flags=None):
        if fail_init:
            raise AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_get_energy_count(handle):
        gpu = gpus[handle]
        if gpu.get("energy_fails"):
            raise AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")
        i = state["reads"][handle]
        state["reads"][handle] += 1
        ticks = gpu["ticks"][min(i, len(gpu["ticks"]) - 1)]
        return {key: ticks, "counter_resolution": gpu.get("resolution", 15.3), "timestamp": 1000 + i}

    def amdsmi_get_power_info(handle):
        power = gpus[handle].get("power", "N/A")
        return {"current_socket_power": power, "average_socket_power": "N/A", "gfx_voltage": "N/A"}

    return types.SimpleNamespace(
        amdsmi_init=amdsmi_init, amdsmi_shut_down=lambda: None,
        amdsmi_get_processor_handles=lambda: list(range(len(gpus))),
        amdsmi_get_energy_count=amdsmi_get_energy_count, amdsmi_get_power_info=amdsmi_get_power_info,
        amdsmi_get_gpu_device_uuid=lambda h: f"uuid-{h}",
        AmdSmiException=AmdSmiException, AmdSmiLibraryException=AmdSmiLibraryException)


@pytest.mark.parametrize("key", ["energy_accumulator", "power"])
def test_amd_accumulator_times_resolution_gives_joules_in_either_release(key):
    smi = fake_amdsmi([{"ticks": [1_000_000, 1_000_000] + [3_000_000] * 10, "resolution": 15.3}], key=key)
    probe = probe_amd(smi)
    (gpu,) = probe.sources
    assert probe.status == "readable" and isinstance(gpu, AmdCounterSource) and gpu.device_id == "uuid-0"
    window = measure("amd", sources=probe.sources, sync=False)
    with window:
        pass
    assert window.result.components["gpu:0"].joules == pytest.approx(2_000_000 * 15.3 / 1e6)
    assert window.result.complete


def test_amd_falls_back_to_sampled_power_and_reports_an_unreadable_gpu():
    smi = fake_amdsmi([{"energy_fails": True, "power": 120}, {"energy_fails": True, "power": "N/A"}])
    probe = probe_amd(smi)
    assert [type(s) for s in probe.sources] == [AmdPowerSource]
    assert "energy accumulator unreadable" in probe.sources[0].note
    (problem,) = probe.problems
    assert problem.startswith("gpu:1: AMD GPU visible but unreadable")


def test_amd_power_integration_never_bridges_a_failed_sample():
    clock = iter([0.0, 1.0, 3.0, 4.0]).__next__
    watts = iter([100.0, 100.0, AmdSmiLibraryException("AMDSMI_STATUS_BUSY"), 50.0, 50.0])

    class Smi:
        def amdsmi_get_power_info(self, handle):
            value = next(watts)
            if isinstance(value, Exception):
                raise value
            return {"current_socket_power": value}

    source = AmdPowerSource(Smi(), 0, "gpu:0", clock=clock)
    source.read_joules()
    assert source.read_joules() == pytest.approx(100.0)  # 0-1 s at 100 W
    with pytest.raises(AmdSmiLibraryException):
        source.read_joules()
    source.read_joules()  # 3 s: after the gap, a fresh start
    assert source.read_joules() == pytest.approx(150.0)  # 3-4 s at 50 W; the gap counts nothing
    assert source.fault_count == 1 and "not sampled" in source.faults_since(0)[0]


def test_amd_probe_states_each_way_it_cannot_measure(tmp_path):
    assert probe_amd(fake_amdsmi([], fail_init=True)).status == "unusable"
    assert probe_amd(fake_amdsmi([])).status == "absent"
    card = tmp_path / "card0" / "device"
    card.mkdir(parents=True)
    (card / "vendor").write_text("0x10de\n")  # an NVIDIA card: no AMD GPU to look for
    assert not amd_gpu_present(tmp_path) and probe_amd(None, drm_root=tmp_path).status == "absent"
    (card / "vendor").write_text("0x1002\n")
    assert amd_gpu_present(tmp_path)
    probe = probe_amd(None, drm_root=tmp_path)  # amdsmi is not installed here
    assert probe.status == "missing" and "AMD GPU is present" in probe.reason


def test_discover_uses_amd_gpus_when_there_is_no_nvidia_gpu(tmp_path):
    smi = fake_amdsmi([{"ticks": [5, 10]}])
    found = discover(FakePynvml([]), tmp_path / "no-powercap", environ={}, amd_module=smi,
                     system="Linux", machine="x86_64")
    assert {s.component: s.name for s in found.sources} == {"gpu:0": "amd-counter", "cpu": "estimate"}
    assert found.amd_status == "readable"


# --- RAPL that is root-only ------------------------------------------------------------------


def test_doctor_prints_how_to_make_rapl_readable_and_what_changes(tmp_path, monkeypatch):
    domain = tmp_path / "intel-rapl:0"
    domain.mkdir()
    (domain / "name").write_text("package-0\n")
    (domain / "energy_uj").write_text("0\n")
    (domain / "max_energy_range_uj").write_text("262143328850\n")
    real_read = rapl_mod._read_int

    def root_only(path):
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(rapl_mod, "_read_int", root_only)
    report = doctor(nvml_module=FakePynvml([]), rapl_root=tmp_path, environ={})
    text = format_report(report)
    assert "sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj" in text
    assert "udev" in text and "instead of the CPU estimate" in text
    # nothing to grant where RAPL is simply absent
    assert "chmod" not in format_report(doctor(nvml_module=FakePynvml([]), rapl_root=tmp_path / "none", environ={}))


def test_setup_line_on_an_apple_gpu_says_what_is_and_is_not_measured():
    from greenlab.session.config import Settings

    measured = Settings("mps", True, 0, {"cpu": "apple-soc", "gpu:0": "apple-soc", "dram": "apple-soc"})
    assert "gpu:0=apple-soc" in measured.line() and "not measured" not in measured.line()
    bare = Settings("mps", True, 0, {"cpu": "estimate"})
    assert "cpu=estimate" in bare.line() and "Apple GPU energy: not measured" in bare.line()
    assert "Apple GPU" not in Settings("cpu", True, 0, {"cpu": "estimate"}).line()


# --- impossible readings are never trusted ------------------------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5.0, 1.2e24])  # 1.2e24 mJ: a jump to 1.2e21 J
def test_an_impossible_apple_reading_makes_the_window_incomplete_naming_the_component(bad):
    module = fake_apple({"cpu_total_mj": 1_000, "gpu_mj": 500})
    probe = probe_apple(module, system="Darwin", machine="arm64")
    window = measure("soc", sources=probe.sources, sync=False)
    with window:
        module.now = {"cpu_total_mj": 2_000, "gpu_mj": bad}
    r = window.result
    assert not r.complete and r.components["cpu"].joules == pytest.approx(1.0)
    assert math.isfinite(r.joules) and 0 <= r.components["gpu:0"].joules < 1.0
    assert any(p.startswith("gpu:0: apple-soc") for p in r.problems), r.problems


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1_000_000, 7.8e25])  # 7.8e25 ticks x 15.3 uJ = 1.2e21 J
def test_an_impossible_amd_accumulator_reading_makes_the_window_incomplete(bad):
    smi = fake_amdsmi([{"ticks": [1_000_000, 1_000_000, bad], "resolution": 15.3}])  # probe, start, end
    probe = probe_amd(smi)
    window = measure("amd", sources=probe.sources, sync=False)
    with window:
        pass
    r = window.result
    assert not r.complete and math.isfinite(r.joules) and r.joules < 1.0
    assert any(p.startswith("gpu:0: amd-counter") for p in r.problems), r.problems


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -20.0, 1e9])
def test_an_impossible_amd_power_sample_is_a_gap_not_energy(bad):
    clock = iter([0.0, 1.0, 2.0, 3.0, 4.0]).__next__
    watts = iter([100.0, 100.0, bad, 50.0, 50.0])

    class Smi:
        def amdsmi_get_power_info(self, handle):
            return {"current_socket_power": next(watts)}

    source = AmdPowerSource(Smi(), 0, "gpu:0", clock=clock)
    source.read_joules()
    assert source.read_joules() == pytest.approx(100.0)
    with pytest.raises(ValueError, match="impossible power reading"):
        source.read_joules()
    source.read_joules()
    assert source.read_joules() == pytest.approx(150.0)  # nothing counted for the bad sample
    assert source.fault_count == 1


def test_a_counter_source_after_a_bad_reading_starts_afresh():
    module = fake_apple({"dram_mj": 1_000})
    source = AppleSocSource(module.AppleEnergyMonitor(), "dram", ("dram_mj",))
    first = source.read_joules()
    module.now = {"dram_mj": float("nan")}
    assert source.read_joules() == first
    module.now = {"dram_mj": 5_000}
    assert source.read_joules() == first  # the rise across the bad reading is not known
    module.now = {"dram_mj": 5_500}
    assert source.read_joules() - first == pytest.approx(0.5)
    assert source.fault_count == 1 and "impossible reading" in source.faults_since(0)[0]
