"""Bad input is refused before work starts, naming the argument; faults keep finished work;
concurrent writers lose nothing; checkpoints are checked; `greenlab measure` handles signals."""

import argparse
import math
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fakes import SlopeSource
from greenlab.techniques import batching, profiling
from greenlab.impact import carbon
from greenlab.training import data, models
from greenlab.base import results
from greenlab.cli.measure import measure_main
from greenlab.course.leaderboard import Leaderboard
from greenlab.base.tables import DataTableError
from greenlab.training.loop import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))


def _tiny(n=24, classes=3):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 1, 4, 4, generator=g)
    y = torch.arange(n) % classes
    return data.Dataset("tiny", x, y, x[:8].clone(), y[:8].clone(), num_classes=classes, source="generated")


def _mlp(classes=3):
    torch.manual_seed(0)
    return models.build("mlp", input_shape=(1, 4, 4), hidden=(8,), num_classes=classes)


def _run(model, ds, cfg, **kw):
    opts = {"log": False, "sources": [SlopeSource()], "device": "cpu"}
    opts.update(kw)
    return train(model, ds, cfg, **opts)


# --- TrainConfig: refused up front, naming the argument ------------------------------------

@pytest.mark.parametrize("kw,name", [
    ({"lr": 1e39}, "lr"), ({"lr": math.nan}, "lr"), ({"lr": math.inf}, "lr"), ({"lr": "0.1"}, "lr"),
    ({"seed": 2**64}, "seed"), ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
    ({"stop_at_target": "no"}, "stop_at_target"), ({"compile": 1}, "compile"),
    ({"channels_last": None}, "channels_last"), ({"pin_memory": "yes"}, "pin_memory"),
    ({"eval_autocast": 0}, "eval_autocast"), ({"momentum": 1.0}, "momentum"),
    ({"weight_decay": -0.1}, "weight_decay"), ({"lr_gamma": 0}, "lr_gamma"),
    ({"target_accuracy": math.nan}, "target_accuracy"), ({"grad_clip": True}, "grad_clip"),
    ({"grad_clip": math.inf}, "grad_clip"), ({"num_workers": True}, "num_workers"),
    ({"epochs": 10**9}, "epochs"), ({"batch_size": 2.0}, "batch_size"),
    ({"prefetch_factor": 0}, "prefetch_factor"), ({"region": "Atlantis"}, "region"),
    ({"region": 3}, "region"), ({"label": 5}, "label"), ({"precision": ["fp32"]}, "precision"),
])
def test_config_refuses_and_names_the_argument(kw, name):
    with pytest.raises((ValueError, TypeError), match=name):
        TrainConfig(**kw)


def test_config_accepts_numpy_numbers_as_plain_python():
    cfg = TrainConfig(lr=np.float64(0.1), batch_size=np.int64(16), stop_at_target=np.bool_(True))
    assert type(cfg.lr) is float and type(cfg.batch_size) is int and cfg.stop_at_target is True


def test_two_letter_region_codes():
    assert TrainConfig(region="FR").region == "FR"
    assert carbon.intensity("FR").code == "FRA"
    assert carbon.intensity("uk").code == "GBR"
    assert carbon.intensity("EU").code == "EU"  # a table code wins over the two-letter table


# --- gl.train: refused before any work ----------------------------------------------------

def _unchanged(model, before):
    return all(torch.equal(a, b) for a, b in zip(model.parameters(), before))


@pytest.mark.parametrize("kw,match", [
    ({"callbacks": ["x"]}, r"callbacks\[0\]"),
    ({"callbacks": 5}, "callbacks"),
    ({"sources": []}, "sources"),
    ({"sources": ["rapl"]}, r"sources\[0\]"),
    ({"log": "yes"}, "log"),
])
def test_train_refuses_bad_arguments_before_training(kw, match):
    ds, model = _tiny(), _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises((ValueError, TypeError), match=match):
        _run(model, ds, TrainConfig(batch_size=8), **kw)
    assert _unchanged(model, before)
    assert results.load() == []


def test_train_refuses_empty_and_mislabelled_splits():
    empty = _tiny()
    empty.test_x, empty.test_y = empty.test_x[:0], empty.test_y[:0]
    with pytest.raises(ValueError, match="test_x is empty"):
        _run(_mlp(), empty, TrainConfig(batch_size=8))
    bad = _tiny()
    bad.test_y = bad.test_y + 5  # labels 5..7 with 3 classes would score 0.0 silently
    with pytest.raises(ValueError, match=r"test_y labels must be in \[0, 2\]"):
        _run(_mlp(), bad, TrainConfig(batch_size=8))


def test_lr_schedule_returning_negative_is_refused_up_front():
    with pytest.raises(ValueError, match="lr_schedule"):
        _run(_mlp(), _tiny(), TrainConfig(batch_size=8, lr_schedule=lambda step: -1), save=False)


def test_lr_schedule_going_negative_mid_run_stops_the_run_and_keeps_it():
    res = _run(_mlp(), _tiny(), TrainConfig(batch_size=4, epochs=2, lr_schedule=lambda s: 1.0 if s < 3 else -1.0))
    assert res.status == "stopped" and res.status != "completed"
    assert res.message.startswith("stopped at step 3: lr_schedule(3) returned -1.0")
    assert res.steps == 3
    assert results.load()[-1]["status"] == "stopped"


# --- no finished work lost -----------------------------------------------------------------

class _DiesAfter(SlopeSource):
    """A meter that fails after ``reads`` readings (an unplugged sensor, a dead driver)."""

    def __init__(self, reads):
        super().__init__()
        self.left = reads

    def read_joules(self):
        self.left -= 1
        if self.left < 0:
            raise OSError("sensor went away")
        return super().read_joules()


def test_failing_meter_mid_run_keeps_the_run():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = _run(_mlp(), _tiny(), TrainConfig(batch_size=4, epochs=2, eval_every=2),
                   sources=[_DiesAfter(4)])
    assert res.steps == 12 and res.final_accuracy is not None  # trained to the end
    assert "sensor went away" in res.message
    assert res.complete is False and any("sensor went away" in p for p in res.problems)
    joules = [row["joules"] for row in res.history]
    assert any(math.isnan(j) for j in joules)  # missing, not a smaller number
    assert results.load()[-1]["steps"] == 12


def test_unwritable_results_log_keeps_the_run_and_names_the_path(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.warns(RuntimeWarning, match="a-folder"):
        res = _run(_mlp(), _tiny(), TrainConfig(batch_size=8), results_path=folder)
    assert res.steps == 3 and res.status == "completed"
    assert str(folder) in res.message
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(results.ResultsLogError, match="cannot write the results log"):
        results.append({"a": 1}, path=blocked / "runs.jsonl")


# --- safe concurrent writes ----------------------------------------------------------------

def _add_many(path, n, tag):
    board = Leaderboard(path)
    for i in range(n):
        board.add(f"{tag}{i}", joules=1.0 + i, seconds=1.0, accuracy=0.5, co2e_g=0.1)


def _in_two_processes(target, path, n):
    """Run ``target(path, n, tag)`` in two processes at once (tags "a" and "b"); both must succeed."""
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    procs = [ctx.Process(target=target, args=(path, n, tag)) for tag in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0


def test_two_processes_adding_100_each_lose_nothing(tmp_path):
    path = tmp_path / "board.json"
    _in_two_processes(_add_many, path, 100)
    entries = Leaderboard(path).entries()
    assert len(entries) == 200
    assert sorted(e["id"] for e in entries) == list(range(1, 201))
    # no temporary file is left; the lock file stays by design (see greenlab.base.filelock)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json", "board.json.bak", "board.json.lock"]


def _append_many(path, n, tag):
    for i in range(n):
        results.append({"tag": tag, "i": i, "pad": "x" * 5000}, path=path)  # lines larger than a pipe buffer


def test_two_processes_appending_to_the_results_log_lose_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    _in_two_processes(_append_many, path, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn line would warn
        records = results.load(path)
    assert sorted((r["tag"], r["i"]) for r in records) == sorted((t, i) for t in "ab" for i in range(50))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.jsonl", "runs.jsonl.lock"]


def test_stale_temporary_files_are_cleaned(tmp_path):
    path = tmp_path / "board.json"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".board.json.{dead.pid}-abc.tmp"  # a writer killed mid-write
    stale.write_bytes(b"partial")
    old = tmp_path / ".board.json.zzz.tmp"
    old.write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    Leaderboard(path).add("a", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.1)
    assert not stale.exists() and not old.exists()


# --- checkpoints ---------------------------------------------------------------------------

def _trained(shape=(4, 3)):
    torch.manual_seed(0)
    model = torch.nn.Linear(*shape)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, shape[0])).sum().backward()
    opt.step()
    return model, opt


def test_checkpoint_extras_are_validated_on_save(tmp_path):
    model, opt = _trained()
    path = profiling.save_checkpoint(tmp_path / "ck.pt", model, opt, step=1, lr=np.float64(0.1),
                                     sizes=(np.int64(2), 3))
    extra = profiling.load_checkpoint(path)["extra"]
    assert extra == {"lr": 0.1, "sizes": (2, 3)} and type(extra["lr"]) is float
    good = path.read_bytes()
    with pytest.raises(ValueError, match=r"extra\['bad'\]\[0\]"):
        profiling.save_checkpoint(path, model, opt, step=2, bad=[object()])
    assert path.read_bytes() == good  # the good checkpoint was not overwritten


def test_checkpoint_checksum_catches_damage(tmp_path):
    model, opt = _trained()
    path = profiling.save_checkpoint(tmp_path / "ck.pt", model, opt, step=1)
    raw = path.read_bytes()
    reference = profiling.load_checkpoint(path)
    refused = 0
    for i in range(0, len(raw), 7):
        damaged = bytearray(raw)
        damaged[i] ^= 0x5A
        path.write_bytes(bytes(damaged))
        try:
            payload = profiling.load_checkpoint(path)
        except ValueError:
            refused += 1
            continue
        # a flip the loader does not see (zip padding) must leave the content exactly intact
        assert payload["step"] == reference["step"]
        for key, value in reference["model"].items():
            assert torch.equal(payload["model"][key], value)
    assert refused > len(raw) // 14
    blob = bytearray(raw)
    blob[raw.index(b"PK", 100) - 40] ^= 0x01  # inside the stored payload bytes
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError):
        profiling.load_checkpoint(path)


def test_checkpoint_from_another_model_or_optimizer_is_refused(tmp_path):
    model, opt = _trained((4, 3))
    path = profiling.save_checkpoint(tmp_path / "ck.pt", model, opt, step=1)
    other, other_opt = _trained((3, 4))  # same number of tensors, other shapes
    with pytest.raises(ValueError, match="different model"):
        profiling.load_checkpoint(path, model=other)
    with pytest.raises(ValueError, match="other shapes"):
        profiling.load_checkpoint(path, optimizer=other_opt)
    adam = torch.optim.Adam(torch.nn.Linear(4, 3).parameters())
    with pytest.raises(ValueError, match="SGD state, not Adam"):
        profiling.load_checkpoint(path, optimizer=adam)


# --- damaged data tables -------------------------------------------------------------------

@pytest.mark.parametrize("damage,match", [
    (lambda b: b.replace(b"g_co2e_per_kwh,", b"", 1), "missing column"),
    (lambda b: b[: len(b) // 2], "truncated"),
    (lambda b: b + "XXX,Caf\xe9,1,2024,s\n".encode("latin-1"), "not UTF-8"),
    (lambda b: b + b"XXX,X,lots,2024,s\n", "g_co2e_per_kwh must be a finite number"),
    (lambda b: b"", "empty"),
])
def test_damaged_carbon_table_names_the_file(tmp_path, monkeypatch, damage, match):
    shutil.copytree(ROOT / "greenlab" / "cited_tables", tmp_path / "data")
    table = tmp_path / "data" / "carbon_intensity.csv"
    table.write_bytes(damage(table.read_bytes()))
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(DataTableError, match=match) as info:
        carbon.intensity("FRA")
    assert "carbon_intensity.csv" in str(info.value)


@pytest.mark.parametrize("damage,match", [
    (lambda b: b.replace(b",tdp_w", b"", 1), "missing column"),
    (lambda b: b.replace(b",70,", b",seventy,", 1), "tdp_w must be a finite number"),
    (lambda b: b + b"\xff\xfe\n", "not UTF-8"),
])
def test_damaged_gpu_table_names_the_file(tmp_path, monkeypatch, damage, match):
    from greenlab.impact import scaling

    (tmp_path / "data").mkdir()
    table = tmp_path / "data" / "gpus.csv"
    table.write_bytes(damage((ROOT / "greenlab" / "cited_tables" / "gpus.csv").read_bytes()))
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(DataTableError, match=match) as info:
        scaling.gpus()
    assert "gpus.csv" in str(info.value)


def test_compare_regions_checks_its_arguments():
    with pytest.raises(TypeError, match="codes must be a list"):
        carbon.compare_regions(1, "FRA")
    with pytest.raises(ValueError, match="codes must name at least one"):
        carbon.compare_regions(1, [])
    with pytest.raises(ValueError, match="pue"):
        carbon.compare_regions(1, None, pue=math.nan)
    assert [r.region.code for r in carbon.compare_regions(1, ["FR", "POL"])] == ["FRA", "POL"]


# --- batching ------------------------------------------------------------------------------

def test_batching_helpers_refuse_nan():
    with pytest.raises(ValueError, match="base_lr"):
        batching.linear_scaling_lr(math.nan, 32, 64)
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        batching.find_max_batch(torch.nn.Linear(4, 2), (4,), memory_budget_bytes=math.nan)
    with pytest.raises(ValueError, match="factor"):
        batching.on_plateau(8, factor=math.nan)


# --- the command line ----------------------------------------------------------------------

def test_run_refuses_n_train_zero(capsys):
    from greenlab.cli import app as cli

    assert cli.main(["run", "--n-train", "0", "--no-save", "--quick"]) == 2
    assert "error: --n-train must be a positive integer" in capsys.readouterr().err


def _args(cmd):
    return argparse.Namespace(cmd=["--", *cmd], json=False, region="WORLD", pue=None)


def test_measure_child_killed_by_sigterm_exits_143(capsys):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert measure_main(_args([sys.executable, "-c", code])) == 143
    assert "exit code  143" in capsys.readouterr().err


def _signal_self_when_ready(ready: Path, signum):
    def go():
        deadline = time.time() + 60
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signum)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("signum,child,expected", [
    (signal.SIGTERM, "", 143),  # passed on: the command ends as it would under SIGTERM
    (signal.SIGINT, "signal.signal(signal.SIGINT, lambda *a: sys.exit(5))", 5),  # its handler runs
])
def test_measure_passes_signals_on_and_reports(tmp_path, capsys, signum, child, expected):
    ready = tmp_path / "ready"
    code = (f"import signal, sys, time\n{child}\nopen({str(ready)!r}, 'w').close()\n"
            "time.sleep(60)\nsys.exit(9)")
    previous = signal.signal(signum, lambda *a: None)  # should measure_main not take it over
    try:
        thread = _signal_self_when_ready(ready, signum)
        # the exit code says the signal ended it: the sleep would have ended with exit code 9
        assert measure_main(_args([sys.executable, "-c", code])) == expected
        thread.join()
    finally:
        signal.signal(signum, previous)
    report = capsys.readouterr().err
    assert f"exit code  {expected}" in report
    assert f"received {signal.Signals(signum).name}" in report


def test_measure_not_a_program_exits_126(tmp_path, capsys):
    script = tmp_path / "no-shebang"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    assert measure_main(_args([str(script)])) == 126
    assert "not a program" in capsys.readouterr().err


def test_sigterm_to_greenlab_measure_process_reaches_the_command(tmp_path):
    ready = tmp_path / "ready"
    code = f"import time; open({str(ready)!r}, 'w').close(); time.sleep(60)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "greenlab.cli", "measure", "--", sys.executable, "-c", code],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not ready.exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143, err
    assert "exit code  143" in err and "total" in err  # the report of what ran


# --- a killed caller leaves no process and no file ---------------------------------------------------

_PREEMPTIBLE_CALLER = """
import sys
from greenlab.techniques import preemption
from greenlab.training import data
from greenlab.training.loop import TrainConfig
ds = data.load("synthetic", n_train=200, n_test=40, verbose=False)
cfg = TrainConfig(batch_size=20, lr=0.05, max_steps=10 ** 7, epochs=10 ** 5)
preemption.run_preemptible({"name": "mlp", "hidden": (8,)}, ds, cfg, 5, [3600.0], sys.argv[0] + ".runs")
"""


def _kill_at(proc, moment, seed):
    """SIGKILL ``proc`` once ``moment()`` holds (or it has ended), then a seeded random moment later."""
    import random

    from launches import wait_for

    wait_for(lambda: moment() or proc.poll() is not None, deadline_s=180)
    time.sleep(random.Random(seed).uniform(0.0, 0.5))
    alive = proc.poll() is None
    proc.kill()
    out = proc.communicate()[0]
    assert alive, f"the caller ended before it was killed:\n{out[-2000:]}"


def _nothing_left(tag, folders):
    from launches import live_processes_tagged, wait_for

    def files():  # torch's own compile cache in TMPDIR is not the job's
        return [p for f in folders if f.exists() for p in f.iterdir() if not p.name.startswith("torchinductor")]

    def clean():
        return not live_processes_tagged(tag) and not files()

    assert wait_for(clean, deadline_s=120), (
        f"left behind: {[p.cmdline() for p in live_processes_tagged(tag)]}, {files()}")


@pytest.mark.parametrize("stage", ["starting", "launcher ready", "life training"])
def test_a_killed_preemptible_caller_leaves_no_process_and_no_file(tmp_path, stage):
    from launches import live_processes_tagged, start_tagged

    proc, tag, tmpdir = start_tagged(_PREEMPTIBLE_CALLER, tmp_path)
    runs = Path(str(tmp_path / f"caller-{tag[:8]}.py") + ".runs")
    moment = {"starting": lambda: True,
              "launcher ready": lambda: len(live_processes_tagged(tag)) >= 3,  # caller, watcher, server
              "life training": lambda: any(runs.glob("preemptible-*/progress.bin"))}[stage]
    _kill_at(proc, moment, seed=hash(stage) % 1000)
    _nothing_left(tag, [runs, tmpdir])


_STUDY_CALLER = """
import sys
from greenlab.techniques import tuning
from greenlab.training import data
ds = data.load("synthetic", n_train=200, n_test=40, verbose=False)
tuning.shared_study(sys.argv[0] + ".journal", ds, workers=2, trials_per_worker=50, max_steps=10 ** 6,
                    min_steps=10 ** 5, eta=2, timeout_s=3600)
"""


@pytest.mark.parametrize("stage", ["starting", "workers training"])
def test_a_killed_shared_study_caller_leaves_no_worker_and_no_file(tmp_path, stage):
    from launches import live_processes_tagged, start_tagged

    proc, tag, tmpdir = start_tagged(_STUDY_CALLER, tmp_path)
    journal = Path(str(tmp_path / f"caller-{tag[:8]}.py") + ".journal")

    def training():  # both workers have a trial under way
        return journal.exists() and journal.read_text(errors="replace").count('"pid"') >= 2

    _kill_at(proc, {"starting": lambda: True, "workers training": training}[stage], seed=len(stage))
    _nothing_left(tag, [tmpdir])
