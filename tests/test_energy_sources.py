"""Energy sources on fake hardware: NVML stand-in, fake powercap tree, fake CPU times."""

import pytest

from greenlab.energy import measure, trapezoid_joules

# windows here are deliberately tiny; the short-window warning is tested in test_energy_measure
pytestmark = pytest.mark.filterwarnings("ignore::greenlab.energy.ShortWindowWarning")
from greenlab.energy import rapl as rapl_mod
from greenlab.energy.estimate import CpuEstimateSource
from greenlab.energy.nvml import Nvml, VisibleGpu
from greenlab.energy.sources import NvmlCounterSource, NvmlPowerSource, discover

from fakes import FakeGpu, FakePynvml


def no_rapl(tmp_path):
    return tmp_path / "no-powercap"


# --- NVML energy counter ----------------------------------------------------------------

def test_counter_with_known_slope_gives_exact_joules():
    clock = {"t": 100.0}
    slope_w = 300.0
    gpu = FakeGpu("GPU-a", energy_mj=lambda: int(5_000 + slope_w * clock["t"] * 1000))
    lib = Nvml(FakePynvml([gpu]))
    source = NvmlCounterSource(lib, lib.handle(0), "gpu:0")
    window = measure("k", sources=[source], sync=False)
    with window:
        clock["t"] += 2.5  # 2.5 s at 300 W
    c = window.result.components["gpu:0"]
    assert c.joules == 750.0
    assert c.source == "nvml-counter" and not c.estimated


def test_discover_prefers_counter_and_maps_names(tmp_path):
    gpus = [FakeGpu("GPU-a", energy_mj=lambda: 1), FakeGpu("GPU-b", energy_mj=lambda: 2)]
    found = discover(FakePynvml(gpus), no_rapl(tmp_path), environ={})
    names = {s.component: s.name for s in found.sources}
    assert names == {"gpu:0": "nvml-counter", "gpu:1": "nvml-counter", "cpu": "estimate"}


# --- fallbacks: counter -> power sampling; nothing readable -> left out -----------------

def test_unsupported_counter_falls_back_to_power_sampling(tmp_path):
    gpu = FakeGpu("GPU-p", arch=4, energy_mj=None, power_mw=150_000)
    found = discover(FakePynvml([gpu]), no_rapl(tmp_path), environ={})
    source = next(s for s in found.sources if s.component == "gpu:0")
    assert source.name == "nvml-power"
    assert "not supported" in source.note
    assert source.update_period_s == 1.0  # no instant field -> 1 s averaged readings
    window = measure("fallback", sources=[source], sync=False)
    with window:
        import time
        time.sleep(0.3)
    c = window.result.components["gpu:0"]
    assert c.joules > 0
    assert c.joules == pytest.approx(150.0 * window.result.seconds, rel=0.1)


def test_gpu_with_nothing_readable_is_left_out_with_a_reason(tmp_path):
    gpu = FakeGpu("GPU-x", energy_mj=None, power_mw=None)
    found = discover(FakePynvml([gpu]), no_rapl(tmp_path), environ={})
    assert "gpu:0" not in {s.component for s in found.sources}
    assert any("gpu:0" in p and "not measured" in p for p in found.problems)


def test_instant_power_field_is_preferred():
    gpu = FakeGpu("GPU-i", energy_mj=None, power_mw=999_000, instant_mw=120_000)
    lib = Nvml(FakePynvml([gpu]))
    source = NvmlPowerSource(lib, lib.handle(0), "gpu:0")
    assert source.instant and source.update_period_s < 1.0
    assert source.watts() == 120.0


# --- trapezoid rule ---------------------------------------------------------------------

def test_trapezoid_over_known_trace():
    times = [0.0, 1.0, 2.0, 4.0]
    watts = [100.0, 200.0, 200.0, 0.0]
    assert trapezoid_joules(times, watts) == 550.0  # 150 + 200 + 200
    with pytest.raises(ValueError):
        trapezoid_joules([0.0, 1.0], [1.0])


def test_power_source_integrates_its_samples_by_trapezoid():
    times = iter([0.0, 1.0, 2.0, 4.0])
    watts = iter([100_000, 200_000, 200_000, 0])
    gpu = FakeGpu("GPU-t", power_mw=lambda: next(watts))
    lib = Nvml(FakePynvml([gpu]))
    source = NvmlPowerSource(lib, lib.handle(0), "gpu:0", clock=lambda: next(times))
    readings = [source.read_joules() for _ in range(4)]
    assert readings == [0.0, 150.0, 350.0, 550.0]


# --- RAPL ------------------------------------------------------------------------------

def make_domain(root, name, kind, energy_uj, max_uj=1_000_000):
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(kind + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d


def set_uj(domain, value):
    (domain / "energy_uj").write_text(f"{value}\n")


def test_rapl_wraparound(tmp_path):
    pkg = make_domain(tmp_path, "intel-rapl:0", "package-0", 990_000, max_uj=1_000_000)
    source = rapl_mod.RaplSource("cpu", [pkg])
    start = source.read_joules()
    set_uj(pkg, 10_000)  # wrapped: 10_000 to the top, then 10_000 more
    assert source.read_joules() - start == pytest.approx(0.02)
    set_uj(pkg, 510_000)
    assert source.read_joules() - start == pytest.approx(0.52)
    assert rapl_mod.unwrap_delta(5, 3, 10) == 8


def test_rapl_dram_separate_core_and_psys_never_added(tmp_path):
    pkg = make_domain(tmp_path, "intel-rapl:0", "package-0", 0, 10**12)
    core = make_domain(tmp_path, "intel-rapl:0:0", "core", 0, 10**12)
    uncore = make_domain(tmp_path, "intel-rapl:0:1", "uncore", 0, 10**12)
    dram = make_domain(tmp_path, "intel-rapl:0:2", "dram", 0, 10**12)
    psys = make_domain(tmp_path, "intel-rapl:1", "psys", 0, 10**12)
    (tmp_path / "intel-rapl").mkdir()  # the control-type directory is not a domain
    found = discover(FakePynvml([]), tmp_path, environ={})
    assert found.rapl_status == "readable"
    assert {s.component: s.name for s in found.sources} == {"cpu": "rapl", "dram": "rapl"}
    window = measure("rapl", sources=found.sources, sync=False)
    with window:
        set_uj(pkg, 5_000_000)
        set_uj(core, 3_000_000)
        set_uj(uncore, 1_000_000)
        set_uj(dram, 1_000_000)
        set_uj(psys, 50_000_000)
    r = window.result
    assert r.components["cpu"].joules == pytest.approx(5.0)
    assert r.components["dram"].joules == pytest.approx(1.0)
    assert r.joules == pytest.approx(6.0)
    assert not r.estimated


def test_rapl_permission_denied_gives_labelled_estimate(tmp_path, monkeypatch):
    make_domain(tmp_path, "intel-rapl:0", "package-0", 0)
    real_read = rapl_mod._read_int

    def root_only(path):  # what a non-root user sees on modern kernels
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(rapl_mod, "_read_int", root_only)
    found = discover(FakePynvml([]), tmp_path, environ={})
    assert found.rapl_status == "permission denied"
    (cpu,) = found.sources
    assert cpu.component == "cpu" and cpu.name == "estimate" and cpu.estimated
    assert cpu.note.startswith("RAPL present but not readable (permission denied)")
    assert cpu.rel_uncertainty >= 0.5
    window = measure("denied", sources=found.sources, sync=False)
    with window:
        sum(i * i for i in range(200_000))
    c = window.result.components["cpu"]
    assert c.joules > 0 and c.estimated and c.note == cpu.note


def test_rapl_absent(tmp_path):
    probe = rapl_mod.probe_rapl(tmp_path / "missing")
    assert probe.status == "absent"


# --- CPU estimate ----------------------------------------------------------------------

def test_estimate_model_exact_with_fake_cpu_times():
    state = {"t": 0.0, "user": 100.0, "system": 50.0, "idle": 1000.0, "iowait": 7.0}

    def cpu_times():
        return {k: v for k, v in state.items() if k != "t"}

    source = CpuEstimateSource(n_logical=4, n_physical=2, cpu_times=cpu_times,
                               clock=lambda: state["t"])
    assert source.max_watts == 24.0 and source.idle_watts == pytest.approx(4.8)
    state["t"] = 10.0
    state["user"] += 15.0
    state["system"] += 5.0  # 20 busy CPU-seconds over 4 logical CPUs
    state["idle"] += 20.0
    state["iowait"] += 3.0  # waiting is not busy
    # 4.8 W * 10 s + (24 - 4.8) W * 20 / 4 s
    assert source.read_joules() == pytest.approx(48.0 + 96.0)
    assert source.estimated and source.name == "estimate"
    assert "Lannelongue" in source.model and "P_idle" in source.model


def test_estimate_rejects_bad_parameters():
    with pytest.raises(ValueError):
        CpuEstimateSource(tdp_per_core_w=0)
    with pytest.raises(ValueError):
        CpuEstimateSource(idle_fraction=1.5)


def _matmuls(n):
    import torch

    a = torch.randn(256, 256)
    for _ in range(n):
        a = torch.mm(a, a).tanh_()
    return float(a.sum())


def test_heavier_work_measures_more_energy_on_this_machine():
    _matmuls(5)  # warm up
    light = measure("light")
    with light:
        _matmuls(60)
    heavy = measure("heavy")
    with heavy:
        _matmuls(240)
    assert light.result.joules > 0
    assert heavy.result.joules > light.result.joules


# --- CUDA_VISIBLE_DEVICES and no driver ------------------------------------------------

UUIDS = ["GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333", "GPU-dddd4444"]


@pytest.mark.parametrize("spec, expected", [
    (None, [(0, 0), (1, 1), (2, 2), (3, 3)]),
    ("2,0", [(0, 2), (1, 0)]),
    ("GPU-cccc", [(0, 2)]),
    ("GPU-dddd4444,1", [(0, 3), (1, 1)]),
    ("", []),
    ("-1", []),
    ("1,-1,0", [(0, 1)]),  # CUDA ignores everything after an invalid entry
    ("1,7", [(0, 1)]),
])
def test_cuda_visible_devices_mapping(spec, expected):
    lib = Nvml(FakePynvml([FakeGpu(u, energy_mj=lambda: 0) for u in UUIDS]))
    env = {} if spec is None else {"CUDA_VISIBLE_DEVICES": spec}
    assert lib.visible_gpus(env) == [VisibleGpu(c, n) for c, n in expected]


def test_components_follow_cuda_numbering(tmp_path):
    gpus = [FakeGpu(u, energy_mj=(lambda k=k: 1000 * k)) for k, u in enumerate(UUIDS)]
    found = discover(FakePynvml(gpus), no_rapl(tmp_path), environ={"CUDA_VISIBLE_DEVICES": "3,1"})
    readings = {s.component: s.read_joules() for s in found.sources if s.component != "cpu"}
    assert readings == {"gpu:0": 3.0, "gpu:1": 1.0}


def test_no_driver_means_no_gpus_and_no_noise(tmp_path, recwarn):
    lib = Nvml(FakePynvml([FakeGpu("GPU-a")], driver=False))
    assert not lib.available and "not available" in lib.reason
    assert lib.visible_gpus({}) == []
    found = discover(FakePynvml([], driver=False), no_rapl(tmp_path), environ={})
    assert [s.component for s in found.sources] == ["cpu"]
    assert found.problems == []
    assert len(recwarn) == 0


def test_this_machine_without_driver_has_no_gpu_components():
    found = discover()
    if found.nvml_reason == "":
        pytest.skip("NVML is available here")
    assert [s.component for s in found.sources if s.component.startswith("gpu:")] == []
    assert found.problems == []


def test_estimate_never_exceeds_p_max_in_any_interval():
    """Tick rounding can report more busy time than the CPUs had; every interval is capped."""
    state = {"t": 0.0, "user": 0.0, "idle": 0.0}
    source = CpuEstimateSource(n_logical=2, n_physical=2,
                               cpu_times=lambda: {"user": state["user"], "idle": state["idle"]},
                               clock=lambda: state["t"])
    # a quiet first second leaves headroom in the running total ...
    state["t"] = 1.0
    first = source.read_joules()
    assert first == pytest.approx(source.idle_watts * 1.0)
    # ... which must not be spent by a later short interval reporting too much busy time
    state["t"] = 1.01
    state["user"] = 0.05  # 50 ms of busy time reported in 10 ms on 2 CPUs: impossible, rounding
    window = source.read_joules() - first
    assert window <= source.max_watts * 0.01 + 1e-12


# --- which GPUs count: the ones the work uses -------------------------------------------

def fake_torch(monkeypatch, current=0, reserved=(), uuids=None, initialized=True, count=4):
    import sys
    import types

    props = lambda i: types.SimpleNamespace(uuid=uuids[i]) if uuids else types.SimpleNamespace()
    cuda = types.SimpleNamespace(
        is_initialized=lambda: initialized, device_count=lambda: count,
        current_device=lambda: current, memory_reserved=lambda i: 1 if i in reserved else 0,
        get_device_properties=props)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))


def counting_gpus(names=None):
    names = names or ["A100"] * 4
    return [FakeGpu(u, energy_mj=(lambda k=k: 1000 * (k + 1)), name=n)
            for k, (u, n) in enumerate(zip(UUIDS, names))]


def gpu_readings(found):
    return {s.component: s.read_joules() for s in found.sources if s.component != "cpu"}


def test_used_gpus_are_the_current_device_and_those_holding_memory(monkeypatch, tmp_path):
    fake_torch(monkeypatch, current=1, reserved=(1, 3))
    found = discover(FakePynvml(counting_gpus()), no_rapl(tmp_path), environ={})
    assert gpu_readings(found) == {"gpu:1": 2.0, "gpu:3": 4.0}
    assert found.problems == [] and found.gpu_selection.startswith("the GPUs this process uses")
    found = discover(FakePynvml(counting_gpus()), no_rapl(tmp_path), environ={}, gpus="all")
    assert set(gpu_readings(found)) == {"gpu:0", "gpu:1", "gpu:2", "gpu:3"}


def test_used_gpus_map_to_nvml_by_uuid_whatever_the_order(monkeypatch, tmp_path):
    # fastest-first: CUDA's device 0 is the H100, third on the PCI bus
    names = ["T4", "T4", "H100", "T4"]
    fake_torch(monkeypatch, current=0, uuids=[UUIDS[2].lower()[4:], UUIDS[0], UUIDS[1], UUIDS[3]])
    found = discover(FakePynvml(counting_gpus(names)), no_rapl(tmp_path), environ={})
    assert gpu_readings(found) == {"gpu:0": 3.0}  # NVML's device 2
    assert found.problems == []


def test_mixed_gpus_without_uuids_or_pci_order_are_flagged(monkeypatch, tmp_path):
    fake_torch(monkeypatch, current=0)  # torch gives no UUIDs
    names = ["T4", "T4", "H100", "T4"]
    found = discover(FakePynvml(counting_gpus(names)), no_rapl(tmp_path), environ={})
    (problem,) = found.problems
    assert problem.startswith("gpu:0: CUDA_DEVICE_ORDER is not PCI_BUS_ID") and "H100" in problem
    found = discover(FakePynvml(counting_gpus(names)), no_rapl(tmp_path),
                     environ={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2"})
    assert found.problems == [] and gpu_readings(found) == {"gpu:0": 3.0}


def test_before_torch_uses_cuda_every_visible_gpu_counts(monkeypatch, tmp_path):
    fake_torch(monkeypatch, initialized=False)
    found = discover(FakePynvml(counting_gpus()), no_rapl(tmp_path),
                     environ={"CUDA_VISIBLE_DEVICES": "3,0"})
    assert gpu_readings(found) == {"gpu:0": 4.0, "gpu:1": 1.0}
    assert "torch has not initialised CUDA" in found.gpu_selection


def test_explicit_gpu_lists(tmp_path):
    lib = FakePynvml(counting_gpus())
    assert gpu_readings(discover(lib, no_rapl(tmp_path), environ={}, gpus=[])) == {}
    assert gpu_readings(discover(lib, no_rapl(tmp_path), environ={}, gpus=[2])) == {"gpu:2": 3.0}
    found = discover(lib, no_rapl(tmp_path), environ={"CUDA_VISIBLE_DEVICES": "1"}, gpus=[0, 5])
    assert gpu_readings(found) == {"gpu:0": 2.0}
    assert found.problems == ["gpu:5: used by this work but not readable through NVML (NVML does "
                              "not list it); its energy is not measured"]
    for bad in ("some", [0, -1], [True], 3):
        with pytest.raises(ValueError, match="gpus"):
            discover(lib, no_rapl(tmp_path), environ={}, gpus=bad)


def test_gpu_used_but_nvml_missing_is_a_problem(monkeypatch, tmp_path):
    fake_torch(monkeypatch, current=0)
    found = discover(FakePynvml([], driver=False), no_rapl(tmp_path), environ={})
    (problem,) = found.problems
    assert problem.startswith("gpu:0: used by this work but not readable through NVML (NVML not "
                              "available")
