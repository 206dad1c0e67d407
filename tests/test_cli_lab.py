"""`greenlab lab`: opens the learner's own copy (never the shipped lessons), root-safe, extra options."""

import subprocess

from greenlab.cli import app as cli
from greenlab.session import config


def test_learner_copy_copies_missing_lessons_and_never_overwrites(tmp_path, monkeypatch):
    shipped = tmp_path / "lessons"
    shipped.mkdir()
    (shipped / "01_a.ipynb").write_text("shipped 01")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    mine = config.learner_copy()
    assert mine == tmp_path / "my-lessons" and (mine / "01_a.ipynb").read_text() == "shipped 01"
    (mine / "01_a.ipynb").write_text("my answers")
    (shipped / "02_b.ipynb").write_text("shipped 02")
    config.learner_copy()
    assert (mine / "01_a.ipynb").read_text() == "my answers"
    assert (mine / "02_b.ipynb").read_text() == "shipped 02"


def test_learner_copy_refuses_the_shipped_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(tmp_path))
    try:
        config.learner_copy(tmp_path)
    except ValueError as exc:
        assert "dest" in str(exc)
    else:
        raise AssertionError("copying the lessons onto themselves was accepted")


def test_lab_command_is_local_and_allows_root_only_for_root(tmp_path):
    as_user = cli.lab_command(tmp_path, ["--port=8890"], euid=1000)
    as_root = cli.lab_command(tmp_path, [], euid=0)
    assert "--ServerApp.ip=127.0.0.1" in as_user and as_user[-1] == "--port=8890"
    assert "--allow-root" not in as_user and "--allow-root" in as_root
    assert str(tmp_path) in as_user


def test_greenlab_lab_opens_my_lessons_and_passes_options(tmp_path, monkeypatch):
    shipped = tmp_path / "lessons"
    shipped.mkdir()
    (shipped / "01_a.ipynb").write_text("x")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    seen = {}
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(subprocess, "call", lambda cmd, env: seen.update(cmd=cmd, env=env) or 0)
    assert cli.main(["lab", "--", "--port=8890"]) == 0
    assert seen["cmd"][3] == str(tmp_path / "my-lessons") and seen["cmd"][-1] == "--port=8890"
    assert seen["env"]["OMP_WAIT_POLICY"] == "PASSIVE"  # the kernels wait as make lab's and make test's do
    assert seen["env"]["GREENLAB_LESSONS_DIR"] == str(shipped)


def test_lab_environment_keeps_a_wait_policy_already_chosen():
    assert cli.lab_environment({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"
    assert cli.lab_environment({})["OMP_WAIT_POLICY"] == "PASSIVE"
