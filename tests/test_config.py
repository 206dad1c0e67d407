"""Tests for greenlab.config: setup, quick mode, device choice, budget, paths."""

import random

import numpy as np
import pytest
import torch

from greenlab import config


@pytest.fixture(autouse=True)
def clean(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "_current", None)
    for name in ("GREENLAB_QUICK", "CI", "GREENLAB_RESULTS_DIR", "GREENLAB_DATA_DIR", "GREENLAB_LESSONS_DIR", "GREENLAB_CACHE_DIR",
                 "GREENLAB_DOWNLOAD"):
        monkeypatch.delenv(name, raising=False)


def test_setup_seeds_everything_and_prints_one_line(capsys):
    config.setup(seed=3)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    s = config.setup(seed=3)
    second = (random.random(), np.random.rand(), torch.rand(1).item())
    assert first == second
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2  # one line per call
    assert "device cpu" in out[-1] and "quick mode off" in out[-1] and "seed 3" in out[-1]
    assert s.seed == 3 and s.quick is False


def test_setup_picks_cpu_without_gpu_and_rejects_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert config.setup(verbose=False).device == "cpu"
    assert config.device() == "cpu"
    with pytest.raises(ValueError, match="no CUDA GPU"):
        config.setup(device="cuda", verbose=False)
    with pytest.raises(ValueError, match="'cuda', 'cuda:N' or 'cpu'"):
        config.setup(device="tpu", verbose=False)


def test_setup_lists_energy_sources():
    s = config.setup(verbose=False)
    assert s.sources, "this machine offers at least the CPU estimate"
    assert all(isinstance(v, str) for v in s.sources.values())


@pytest.mark.parametrize("env,expected", [({"GREENLAB_QUICK": "1"}, True), ({"GREENLAB_QUICK": "true"}, True),
                                          ({"GREENLAB_QUICK": "0"}, False), ({"CI": "true"}, True),
                                          ({"CI": "1", "GREENLAB_QUICK": "0"}, False), ({}, False)])
def test_quick_mode_from_environment(monkeypatch, env, expected):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert config.is_quick() is expected
    assert config.setup(verbose=False).quick is expected


def test_explicit_quick_wins_and_bad_value_is_refused(monkeypatch):
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert config.setup(quick=False, verbose=False).quick is False
    assert config.is_quick() is False
    monkeypatch.setattr(config, "_current", None)
    monkeypatch.setenv("GREENLAB_QUICK", "maybe")
    with pytest.raises(ValueError, match="GREENLAB_QUICK"):
        config.is_quick()


def test_budget_picks_by_mode_and_validates(monkeypatch):
    assert config.budget(full=60000, quick=2000) == 60000
    monkeypatch.setenv("GREENLAB_QUICK", "1")
    assert config.budget(full=60000, quick=2000) == 2000
    with pytest.raises(ValueError, match="both"):
        config.budget(full=10)
    with pytest.raises(ValueError, match="positive"):
        config.budget(full=10, quick=0)
    with pytest.raises(ValueError, match="positive"):
        config.budget(full=-1, quick=1)


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


def test_download_off_unless_asked(monkeypatch):
    assert config.download_allowed() is False
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "1")
    assert config.download_allowed() is True


def test_bad_seed_is_refused():
    with pytest.raises(ValueError, match="seed"):
        config.setup(seed=-1, verbose=False)
