"""Tests for greenlab.config: setup, quick mode, device choice, budget, paths."""

import random

import numpy as np
import pytest
import torch

from greenlab.session import config


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "_current", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for name in ("GREENLAB_QUICK", "CI", "GREENLAB_THREADS", "GREENLAB_RESULTS_DIR", "GREENLAB_DATA_DIR",
                 "GREENLAB_LESSONS_DIR", "GREENLAB_CACHE_DIR", "GREENLAB_DOWNLOAD"):
        monkeypatch.delenv(name, raising=False)


def test_setup_seeds_everything_and_prints_one_line(capsys):
    config.setup(seed=3)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    s = config.setup(seed=3)
    second = (random.random(), np.random.rand(), torch.rand(1).item())
    assert first == second
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2  # one line per call
    assert "device cpu" in out[-1] and "quick mode on (no GPU" in out[-1] and "seed 3" in out[-1]
    assert s.seed == 3 and s.quick is True


def test_setup_picks_cpu_without_gpu_and_rejects_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert config.setup(verbose=False).device == "cpu"
    assert config.device() == "cpu"
    with pytest.raises(ValueError, match="no CUDA GPU"):
        config.setup(device="cuda", verbose=False)
    with pytest.raises(ValueError, match="'cuda', 'cuda:N', 'mps' or 'cpu'"):
        config.setup(device="tpu", verbose=False)
    with pytest.raises(ValueError, match="no Apple GPU"):
        config.setup(device="mps", verbose=False)


def test_device_order_is_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert config.device() == "mps"
    s = config.setup(verbose=False)
    assert s.device == "mps" and s.device_name == "Apple GPU"
    assert s.quick is True and "Apple GPU (MPS)" in s.quick_reason
    assert config.setup(device="mps", verbose=False).device == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (8, 0))
    s = config.setup(verbose=False)
    assert (s.device, s.quick, s.device_name) == ("cuda", False, "Fake GPU")
    assert s.native_precisions == {"bf16": True, "fp16": True}
    assert config.setup(device="cpu", verbose=False).device == "cpu"


def test_synchronize_waits_on_a_gpu_and_does_nothing_on_a_cpu(monkeypatch):
    from greenlab.session.devices import synchronize

    waited = []
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda dev: waited.append(dev))
    synchronize("cpu")
    synchronize(torch.zeros(1).device)
    assert waited == [], "a CPU has nothing queued to wait for"
    synchronize("cuda:1")
    synchronize(torch.device("mps"))
    assert waited == [torch.device("cuda:1"), torch.device("mps")], "the device asked for, not the current one"
    with pytest.raises(RuntimeError):
        synchronize("no such device")


def test_mps_missing_from_the_build_means_cpu(monkeypatch):
    def broken():
        raise AttributeError("no mps backend in this build")

    monkeypatch.setattr(torch.backends.mps, "is_available", broken)
    assert config.device() == "cpu"


def test_setup_lists_energy_sources():
    s = config.setup(verbose=False)
    assert s.sources, "this machine offers at least the CPU estimate"
    assert all(isinstance(v, str) for v in s.sources.values())


@pytest.mark.parametrize("env,expected", [({"GREENLAB_QUICK": "1"}, True), ({"GREENLAB_QUICK": "true"}, True),
                                          ({"GREENLAB_QUICK": "0"}, False), ({"CI": "true"}, True),
                                          ({"CI": "1", "GREENLAB_QUICK": "0"}, False), ({}, True)])
def test_quick_mode_from_environment_without_gpu(monkeypatch, env, expected):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert config.is_quick() is expected
    assert config.setup(verbose=False).quick is expected


@pytest.mark.parametrize("env,device,expected", [
    ({}, "cuda", False), ({}, "cuda:1", False), ({}, "cpu", True), ({}, "mps", True),
    ({"CI": "true"}, "cuda", True), ({"GREENLAB_QUICK": "1"}, "cuda", True),
    ({"GREENLAB_QUICK": "0"}, "cpu", False), ({"GREENLAB_QUICK": "0", "CI": "1"}, "cpu", False),
    ({"CI": "0"}, "cuda", False), ({"GREENLAB_QUICK": ""}, "cuda", False)])
def test_quick_decision_by_environment_and_device(env, device, expected):
    quick, reason = config.quick_decision(env, device)
    assert quick is expected and reason


def test_setup_announces_quick_mode_without_gpu_and_full_mode_when_forced(monkeypatch, capsys):
    config.setup()
    line = capsys.readouterr().out
    assert "quick mode on (no GPU: full sizes are meant for a CUDA GPU; GREENLAB_QUICK=0 forces them)" in line
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    config.setup()
    assert "quick mode off" in capsys.readouterr().out


def test_explicit_quick_wins_and_bad_value_is_refused(monkeypatch):
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert config.setup(quick=False, verbose=False).quick is False
    assert config.is_quick() is False
    monkeypatch.setattr(config, "_current", None)
    monkeypatch.setenv("GREENLAB_QUICK", "maybe")
    with pytest.raises(ValueError, match="GREENLAB_QUICK"):
        config.is_quick()


def test_budget_picks_by_mode_and_validates(monkeypatch):
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    assert config.budget(full=60000, quick=2000) == 60000
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert config.budget(full=60000, quick=2000) == 2000
    assert config.budget(full=60000, quick=2000, grading=200) == 2000  # quick, not grading
    monkeypatch.setenv("GREENLAB_GRADING", "1")
    assert config.budget(full=60000, quick=2000, grading=200) == 200
    assert config.budget(full=60000, quick=2000) == 2000  # no grading size: the quick one
    monkeypatch.delenv("GREENLAB_GRADING")
    with pytest.raises(ValueError, match="grading"):
        config.budget(full=10, quick=5, grading=0)
    with pytest.raises(ValueError, match="go together"):
        config.budget(full=10, quick=5, emulated=2)
    with pytest.raises(ValueError, match="emulated"):
        config.budget(full=10, quick=5, emulated=0, precision="bf16")
    with pytest.raises(ValueError, match="precision"):
        config.budget(full=10, quick=5, emulated=2, precision="int3")
    with pytest.raises(ValueError, match="both"):
        config.budget(full=10)
    with pytest.raises(ValueError, match="positive"):
        config.budget(full=10, quick=0)
    with pytest.raises(ValueError, match="positive"):
        config.budget(full=-1, quick=1)


def test_budget_gives_a_learners_cpu_its_own_size_but_not_asked_for_quick_mode(monkeypatch):
    monkeypatch.setattr(config, "_current", None)  # restored after the test
    monkeypatch.delenv("GREENLAB_QUICK", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(config, "_choose_device", lambda requested: "cpu")
    config.setup(verbose=False)  # quick because there is no CUDA GPU
    assert config.is_quick() and not config.quick_asked()
    assert config.budget(full=60000, quick=2000, cpu=8000) == 8000
    assert config.budget(full=60000, quick=2000) == 2000  # no cpu size: the quick one
    for asked in ({"GREENLAB_QUICK": "1"}, {"CI": "true"}):
        with monkeypatch.context() as m:
            for key, value in asked.items():
                m.setenv(key, value)
            config.setup(verbose=False)
            assert config.quick_asked() and config.budget(full=60000, quick=2000, cpu=8000) == 2000
    config.setup(quick=True, verbose=False)
    assert config.budget(full=60000, quick=2000, cpu=8000) == 2000
    monkeypatch.setenv("GREENLAB_QUICK", "0")
    config.setup(verbose=False)
    assert config.budget(full=60000, quick=2000, cpu=8000) == 60000 and not config.quick_asked()
    with pytest.raises(ValueError, match="positive"):
        config.budget(full=10, quick=5, cpu=0)


def test_paths_default_to_checkout_and_follow_environment(monkeypatch, tmp_path):
    root = config.repo_root()
    assert config.results_dir() == root / "results"
    assert config.data_dir() == root / "data"
    assert config.cache_dir() == root / "data" / "cache"
    assert config.lessons_dir() == root / "lessons"
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "r"))
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(tmp_path / "l"))
    assert config.results_dir() == tmp_path / "r"
    assert config.cache_dir() == tmp_path / "d" / "cache"
    assert config.lessons_dir() == tmp_path / "l"
    assert not (tmp_path / "r").exists()  # paths are not created as a side effect


def test_bad_seed_is_refused():
    with pytest.raises(ValueError, match="seed"):
        config.setup(seed=-1, verbose=False)


def _fake_native(monkeypatch, device, native):
    from greenlab.session import hardware

    def support(precision, dev="cpu", **kw):
        assert dev == device
        return hardware.PrecisionSupport(precision, dev, native or precision == "fp32", "fake")

    monkeypatch.setattr(hardware, "precision_support", support)


@pytest.mark.parametrize("quick", ["0", "1"])
def test_budget_uses_the_emulated_size_whenever_the_precision_is_emulated(monkeypatch, quick):
    monkeypatch.setenv("GREENLAB_QUICK", quick)
    _fake_native(monkeypatch, "cpu", native=False)
    assert config.budget(full=2048, quick=1024, emulated=256, precision="bf16") == 256
    assert config.budget(full=2048, quick=1024, emulated=256, precision="fp32") == (2048 if quick == "0" else 1024)
    _fake_native(monkeypatch, "cpu", native=True)
    assert config.budget(full=2048, quick=1024, emulated=256, precision="bf16") == (2048 if quick == "0" else 1024)


def test_budget_gpu_size_on_a_gpu_in_full_mode(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (9, 0))
    config.setup(verbose=False)
    assert config.budget(full=2048, quick=1024, gpu=8192) == 8192
    assert config.budget(full=2048, quick=1024) == 2048
    assert config.budget(full=2048, quick=1024, gpu=8192, emulated=64, precision="bf16") == 8192
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: (7, 5))  # Turing: no bf16 units
    assert config.budget(full=2048, quick=1024, gpu=8192, emulated=64, precision="bf16") == 64
    config.setup(quick=True, verbose=False)
    assert config.budget(full=2048, quick=1024, gpu=8192) == 1024
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config.setup(quick=False, verbose=False)
    assert config.budget(full=2048, quick=1024, gpu=8192) == 2048


def test_threads_from_argument_or_environment_and_shown(monkeypatch, capsys):
    before = torch.get_num_threads()
    try:
        s = config.setup(threads=1)
        assert torch.get_num_threads() == 1 and s.threads == 1
        assert "CPU threads 1" in capsys.readouterr().out
        monkeypatch.setenv("GREENLAB_THREADS", "2")
        assert config.setup(verbose=False).threads == 2 == torch.get_num_threads()
        for bad in ("0", "two", "-1"):
            monkeypatch.setenv("GREENLAB_THREADS", bad)
            with pytest.raises(ValueError, match="GREENLAB_THREADS must be a whole number"):
                config.setup(verbose=False)
        monkeypatch.delenv("GREENLAB_THREADS")
        with pytest.raises(ValueError, match="threads must be"):
            config.setup(threads=0, verbose=False)
        assert config.setup(verbose=False).threads == torch.get_num_threads()  # None: left as it is
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("env,expected", [
    ({"GREENLAB_GRADING": "1"}, True), ({"GREENLAB_GRADING": "1", "GREENLAB_QUICK": "0"}, True),
    ({"GREENLAB_GRADING": "0", "GREENLAB_QUICK": "0"}, False), ({"GREENLAB_GRADING": ""}, False)])
def test_grading_mode_is_always_quick_even_on_a_gpu(env, expected):
    quick, reason = config.quick_decision(env, "cuda")
    assert quick is expected
    if expected:
        assert "GREENLAB_GRADING" in reason


def test_grading_mode_refuses_a_value_it_cannot_read():
    from greenlab.session.devices import grading_mode

    with pytest.raises(ValueError, match="GREENLAB_GRADING"):
        grading_mode({"GREENLAB_GRADING": "maybe"})
