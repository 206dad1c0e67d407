"""`greenlab lab`: opens the learner's own copy (never the shipped lessons), root-safe, extra options."""

import os
import signal
import subprocess
import sys

import pytest

from greenlab.base import processes
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


def test_learner_copy_keeps_a_lesson_the_learner_holds_under_its_old_number(tmp_path, monkeypatch):
    shipped, mine = tmp_path / "lessons", tmp_path / "my-lessons"
    shipped.mkdir(), mine.mkdir()
    (shipped / "01_mixed_precision.ipynb").write_text("shipped 01")
    (shipped / "08_scaling_out.ipynb").write_text("shipped 08")
    (mine / "02_mixed_precision.ipynb").write_text("my answers, numbered before the renumbering")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    config.learner_copy()
    assert sorted(p.name for p in mine.iterdir()) == ["02_mixed_precision.ipynb", "08_scaling_out.ipynb"]
    assert (mine / "02_mixed_precision.ipynb").read_text() == "my answers, numbered before the renumbering"


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
    monkeypatch.setattr(processes, "run_in_foreground", lambda cmd, env: seen.update(cmd=cmd, env=env) or 0)
    assert cli.main(["lab", "--", "--port=8890"]) == 0
    assert seen["cmd"][3] == str(tmp_path / "my-lessons") and seen["cmd"][-1] == "--port=8890"
    assert seen["env"]["OMP_WAIT_POLICY"] == "PASSIVE"  # the kernels wait as make lab's and make test's do
    assert seen["env"]["GREENLAB_LESSONS_DIR"] == str(shipped)


def test_lab_environment_keeps_a_wait_policy_already_chosen():
    assert cli.lab_environment({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"
    assert cli.lab_environment({})["OMP_WAIT_POLICY"] == "PASSIVE"


def test_a_copied_lesson_carries_the_local_kernels_metadata_and_the_shipped_one_does_not(tmp_path, monkeypatch):
    """JupyterLab marks a notebook modified when the starting kernel rewrites its metadata; a copy
    that already carries it opens unmodified. The shipped lesson keeps its normalised metadata."""
    import json

    from greenlab.base import paths

    stamp = paths.kernel_metadata()
    assert stamp is not None  # Jupyter is installed with the course
    assert stamp["kernelspec"]["name"] == "python3" and stamp["language_info"]["name"] == "python"
    assert stamp["language_info"]["version"].count(".") == 2
    shipped = tmp_path / "lessons"
    shipped.mkdir()
    lesson = {"cells": [], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}, "language_info": {"name": "python"}},
              "nbformat": 4, "nbformat_minor": 5}
    (shipped / "01_a.ipynb").write_text(json.dumps(lesson))
    (shipped / "02_b.ipynb").write_text("not a notebook")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    copied = []
    mine = paths.learner_copy(tmp_path / "mine", report=copied.append)
    assert [p.name for p in copied] == ["01_a.ipynb", "02_b.ipynb"]
    nb = json.loads((mine / "01_a.ipynb").read_text())
    assert nb["metadata"] == stamp and nb["cells"] == []
    assert (mine / "02_b.ipynb").read_text() == "not a notebook"
    assert json.loads((shipped / "01_a.ipynb").read_text()) == lesson


def test_copy_only_copies_and_does_not_start_jupyterlab(tmp_path, monkeypatch, capsys):
    shipped = tmp_path / "lessons"
    shipped.mkdir()
    (shipped / "01_a.ipynb").write_text("x")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    monkeypatch.setattr(processes, "run_in_foreground",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    assert cli.main(["lab", "--dir", str(tmp_path / "mine"), "--copy-only"]) == 0
    out = capsys.readouterr().out
    assert "copied 01_a.ipynb" in out and (tmp_path / "mine" / "01_a.ipynb").exists()


def test_greenlab_lab_with_no_lessons_fails_loudly(tmp_path, monkeypatch, capsys):
    """A wheel without its lessons, or a wrong GREENLAB_LESSONS_DIR: an error, never 'your lessons are in'."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    assert cli.main(["lab", "--dir", str(tmp_path / "mine"), "--copy-only"]) == 1
    captured = capsys.readouterr()
    assert "your lessons are in" not in captured.out
    assert f"no lessons (*.ipynb) in {tmp_path / 'empty'}" in captured.err and "GREENLAB_LESSONS_DIR" in captured.err
    assert not (tmp_path / "mine").exists()


def test_outside_a_checkout_the_shipped_lessons_are_copied_to_the_working_folder(tmp_path, monkeypatch):
    from greenlab.base import paths

    monkeypatch.delenv("GREENLAB_LESSONS_DIR", raising=False)
    monkeypatch.delenv("GREENLAB_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "in_checkout", lambda: False)
    package = tmp_path / "site-packages" / "greenlab"
    (package / "lessons").mkdir(parents=True)
    (package / "lessons" / "00_a.ipynb").write_text("shipped")
    (package / "data" / "reference_runs").mkdir(parents=True)
    monkeypatch.setattr(paths, "package_folder", lambda: package)
    assert paths.lessons_dir() == package / "lessons"
    assert paths.data_dir() == package / "data"  # the recorded runs shipped with the package
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    mine = paths.learner_copy()
    assert mine == work / "my-lessons" and (mine / "00_a.ipynb").read_text() == "shipped"


def test_results_go_beside_the_notebook_on_colab(tmp_path, monkeypatch):
    import sys

    from greenlab.base import paths
    from greenlab.course.leaderboard import Leaderboard

    monkeypatch.delenv("GREENLAB_RESULTS_DIR", raising=False)
    monkeypatch.delenv("GREENLAB_LEADERBOARD_DIR", raising=False)
    monkeypatch.setattr(paths, "in_checkout", lambda: False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert paths.results_dir() == tmp_path / "home" / ".greenlab" / "results"
    monkeypatch.setitem(sys.modules, "google.colab", object())
    assert paths.results_dir() == tmp_path / "greenlab_results"  # visible in Colab's file pane
    assert Leaderboard().path.parent == tmp_path / "greenlab_results"


def test_greenlab_lab_without_jupyterlab_names_the_extra(tmp_path, monkeypatch, capsys):
    from greenlab.base import optional

    shipped = tmp_path / "lessons"
    shipped.mkdir()
    (shipped / "01_a.ipynb").write_text("x")
    monkeypatch.setenv("GREENLAB_LESSONS_DIR", str(shipped))
    monkeypatch.setattr(optional, "missing", lambda name: f"{name} is not installed" if name == "jupyterlab" else None)
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    assert cli.main(["lab"]) == 1
    assert "jupyterlab is not installed; pip install 'greenlab-course[lab]'" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_greenlab_lab_takes_jupyterlab_and_its_token_with_it(tmp_path, sig):
    """SIGTERM (or SIGKILL) to `greenlab lab` ends JupyterLab, whose token file goes with it."""
    from launches import live_processes_tagged, start_tagged, wait_for

    shipped, runtime = tmp_path / "lessons", tmp_path / "runtime"
    shipped.mkdir()
    runtime.mkdir()
    (shipped / "01_a.ipynb").write_text("x")  # a lesson to copy: with none, greenlab lab stops before JupyterLab
    script = ("import sys\nfrom greenlab.cli import app\n"
              f"sys.exit(app.main(['lab', '--dir', {str(tmp_path / 'mine')!r}, '--', '--no-browser', "
              "'--port=18931', '--port-retries=50', '--ServerApp.open_browser=False']))\n")
    proc, tag, _ = start_tagged(script, tmp_path, GREENLAB_LESSONS_DIR=str(shipped), JUPYTER_RUNTIME_DIR=str(runtime),
                                JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"))
    started = wait_for(lambda: list(runtime.glob("jpserver-*.json")) or proc.poll() is not None, deadline_s=180)
    assert proc.poll() is None and started, proc.communicate()[0][-3000:]
    os.kill(proc.pid, sig)
    proc.communicate(timeout=120)
    assert wait_for(lambda: not live_processes_tagged(tag) and not list(runtime.glob("jpserver-*")), deadline_s=120), (
        [p.cmdline() for p in live_processes_tagged(tag)], list(runtime.iterdir()))
