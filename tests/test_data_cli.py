"""Tests for `greenlab data fetch | status | path`: staging datasets before a class, from a
local mirror, into a chosen folder, and failing fast and clearly without a network."""

import subprocess
import sys

import pytest

import fake_mirror
from greenlab.cli import app as cli
from greenlab.session import config
from greenlab.training import datacache


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("GREENLAB_DOWNLOAD", "GREENLAB_QUICK", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GREENLAB_QUICK", "1")  # an explicit fetch downloads even in quick mode
    monkeypatch.setattr(config, "_current", None)


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    resources, _ = fake_mirror.fashion_mnist_archives(tmp_path / "mirror")
    with fake_mirror.serve(tmp_path / "mirror") as (url, hits):
        fake_mirror.point_fashion_mnist_at(monkeypatch, url, resources)
        yield hits


def test_path_prints_the_cache_or_a_chosen_folder(tmp_path, capsys):
    assert cli.main(["data", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cache")
    assert cli.main(["data", "path", "fashion-mnist", "--dir", str(tmp_path / "shared")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "shared" / "FashionMNIST" / "raw")


def test_fetch_into_a_shared_folder_then_status_says_verified(mirror, tmp_path, capsys):
    shared = tmp_path / "shared"
    assert cli.main(["data", "status", "--dir", str(shared)]) == 0
    before = capsys.readouterr().out
    assert f"dataset cache: {shared}" in before and "missing" in before and "verified" not in before

    assert cli.main(["data", "fetch", "fashion-mnist", "--dir", str(shared)]) == 0
    out = capsys.readouterr().out
    assert "fashion-mnist: verified in" in out and str(shared) in out
    assert len(mirror) == 4

    assert cli.main(["data", "fetch", "fashion-mnist", "--dir", str(shared)]) == 0  # nothing to do
    assert len(mirror) == 4
    capsys.readouterr()
    assert cli.main(["data", "status", "--dir", str(shared)]) == 0
    lines = capsys.readouterr().out.splitlines()
    fmnist = next(line for line in lines if "fashion-mnist" in line)
    assert "verified" in fmnist and str(shared / "FashionMNIST" / "raw") in fmnist
    assert "missing" in next(line for line in lines if "cifar10" in line)
    assert not (tmp_path / "cache").exists()  # --dir wrote nothing into the default cache


def test_status_reports_a_corrupt_file(mirror, capsys):
    assert datacache.fetch("fashion-mnist", progress=False).state == "verified"
    archive = datacache.folder("fashion-mnist") / "t10k-images-idx3-ubyte.gz"
    archive.write_bytes(archive.read_bytes()[:-1])
    assert cli.main(["data", "status"]) == 0
    assert "corrupt" in capsys.readouterr().out


def test_fetch_offline_fails_fast_with_a_clear_message(monkeypatch, capsys):
    monkeypatch.setattr(fake_mirror.torchvision.datasets.FashionMNIST, "mirrors",
                        [fake_mirror.closed_port_url()])
    attempts = []  # fast means one attempt on the refused host, no retry loop
    get = datacache._get
    monkeypatch.setattr(datacache, "_get", lambda url, *a, **k: attempts.append(url) or get(url, *a, **k))
    assert cli.main(["data", "fetch", "fashion-mnist", "--timeout", "5"]) == 1
    assert len(attempts) == 1
    err = capsys.readouterr().err
    assert "fashion-mnist: download failed after" in err and "could not be downloaded" in err


def test_fetch_refuses_bad_requests(monkeypatch, capsys):
    assert cli.main(["data", "fetch"]) == 2
    assert "give dataset names or --all" in capsys.readouterr().err
    assert cli.main(["data", "fetch", "imagenet"]) == 2
    assert "fashion-mnist, cifar10" in capsys.readouterr().err
    assert cli.main(["data", "fetch", "cifar10", "--timeout", "0"]) == 2
    assert "timeout_s must be" in capsys.readouterr().err
    monkeypatch.setenv("GREENLAB_DOWNLOAD", "0")
    assert cli.main(["data", "fetch", "--all"]) == 2
    assert "GREENLAB_DOWNLOAD=0 forbids downloads" in capsys.readouterr().err


def test_the_installed_command_knows_the_data_subcommand(tmp_path):
    done = subprocess.run([sys.executable, "-m", "greenlab.cli", "data", "path", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == str(tmp_path)


def test_progress_falls_back_to_plain_lines_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # as on a machine without tqdm
    bar = datacache._Progress("train-images-idx3-ubyte.gz", total=10_000_000)
    for _ in range(10):
        bar.update(1_000_000)
    bar.close()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 10 and lines[-1].endswith("train-images-idx3-ubyte.gz: 10.0 of 10.0 MB")
