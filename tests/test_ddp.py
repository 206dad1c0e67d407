"""Tests for greenlab.ddp: config checks, a real 2-process gloo run, failure and timeout paths."""

import time
from pathlib import Path

import psutil
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from greenlab.energy import ComponentEnergy, Measurement
from greenlab.techniques import ddp
from greenlab.techniques.ddp import launch
from greenlab.training import models
from greenlab.impact import scaling
from greenlab.training import data as gl_data
from launches import live_processes_naming, record_launches

TINY_DATA = {"name": "synthetic", "n_train": 256, "n_test": 64}
TINY_MODEL = {"name": "mlp", "hidden": [16]}


# --- config validation (no processes) ----------------------------------------------------------


def test_config_fixed_per_worker_batch_grows_global_batch():
    cfg = ddp.make_config(2, per_worker_batch=16, accum_steps=3, device="cpu")
    assert cfg["per_worker_batch"] == 16
    assert cfg["global_batch"] == 16 * 2 * 3
    assert cfg["backend"] == "gloo"


def test_config_fixed_global_batch_is_split():
    cfg = ddp.make_config(4, global_batch=128, device="cpu")
    assert cfg["per_worker_batch"] == 32
    assert cfg["global_batch"] == 128


@pytest.mark.parametrize("kwargs, words", [
    ({}, "exactly one"),
    ({"per_worker_batch": 8, "global_batch": 16}, "exactly one"),
    ({"global_batch": 10}, "divide"),
    ({"per_worker_batch": 0}, "per_worker_batch"),
    ({"per_worker_batch": 8, "device": "tpu"}, "device"),
    ({"per_worker_batch": 8, "device": "cpu", "backend": "nccl"}, "gloo"),
    ({"per_worker_batch": 8, "backend": "mpi"}, "backend"),
    ({"per_worker_batch": 8, "data": 3}, "data"),
    ({"per_worker_batch": 8, "model": {"width": 3}}, "model"),
    ({"per_worker_batch": 8, "lr": -1.0}, "lr"),
    ({"per_worker_batch": 8, "max_steps": 0}, "max_steps"),
])
def test_config_bad_input_says_what_is_allowed(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ddp.make_config(4, **kwargs)


def test_unknown_dataset_fails_before_launching():
    with pytest.raises(ValueError, match="fashion-mnist"):
        ddp.run_ddp(2, data="imagenet", per_worker_batch=8, measure_energy=False)


def test_cuda_needs_one_gpu_per_worker():
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match="one GPU per worker"):
        ddp.make_config(have + 1, per_worker_batch=8, device="cuda")


def test_launch_command_uses_torchrun_standalone():
    cmd = ddp.launch_command("/tmp/run/x.json", 2)
    # torchrun runs under the supervisor that ties it to this process and removes the run's folder
    assert cmd[1].endswith("greenlab/base/processes.py") and cmd[2:5] == ["--remove", "/tmp/run", "--"]
    assert cmd[5] == "torch.distributed.run"
    assert "--standalone" in cmd and "--nproc_per_node=2" in cmd
    assert cmd[-4:] == ["-m", "greenlab.techniques.ddp.worker", "--config", "/tmp/run/x.json"]
    assert "--log-dir=/tmp/run/torchelastic" in cmd  # torchrun logs inside the run folder, removed with it


# --- a real 2-process run --------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_workers():
    ds = gl_data.load("synthetic", n_train=256, n_test=64, verbose=False)  # a Dataset object is reused as is
    return ddp.run_ddp(2, data=ds, model=TINY_MODEL, per_worker_batch=8, accum_steps=2,
                       epochs=1, lr=0.05, momentum=0.9, timeout_s=120, label="two")


def test_two_worker_result_fields(two_workers):
    r = two_workers
    assert r.nprocs == 2 and r.backend == "gloo" and r.device == "cpu"
    assert r.threads_per_worker == 1
    assert r.global_batch == 8 * 2 * 2
    assert r.steps == 256 // 32
    assert r.per_rank_steps == [r.steps, r.steps]
    assert r.per_rank_samples == [128, 128]
    assert r.samples == 256
    assert 0 < r.train_seconds <= r.wall_seconds
    assert r.samples_per_second == pytest.approx(256 / r.train_seconds)
    assert 0.0 <= r.final_accuracy <= 1.0
    assert len(r.loss_history) == r.steps
    assert r.dataset["source"] == "generated" and r.dataset["n_train"] == 256
    assert r.device_hours == pytest.approx(2 * r.train_seconds / 3600)
    d = r.to_dict()
    assert d["energy"]["sources"] and d["per_rank_steps"] == [r.steps, r.steps]


def test_energy_is_measured_with_provenance(two_workers):
    r = two_workers
    assert r.joules is not None and r.joules > 0
    assert r.energy.sources  # e.g. {"cpu": "estimate"}
    assert r.train_joules is not None and 0 < r.train_joules <= r.joules
    assert r.joules_per_device_hour == pytest.approx(r.train_joules / r.device_hours)
    assert r.estimated == (r.energy.estimated or r.train_energy["estimated"])


def test_training_energy_is_reduced_over_both_workers(two_workers):
    """Every worker measured its own process; the reduction keeps each worker's figures and
    counts what the node shares once."""
    r = two_workers
    e = r.train_energy
    assert e["world_size"] == 2 and e["complete"] is True and r.energy_complete
    assert [x["rank"] for x in e["ranks"]] == [0, 1] and len({x["pid"] for x in e["ranks"]}) == 2
    assert all(j > 0 for j in r.joules_by_rank)
    assert sum(r.joules_by_node.values()) == pytest.approx(r.train_joules)
    assert sum(d["joules"] for d in e["devices"]) == pytest.approx(r.train_joules)
    if r.train_energy_short:  # a tiny run: a worker's window was shorter than its meter reads reliably
        assert "not measurable at this size" in r.summary() and e["short_ranks"]
    else:
        assert "over 2 worker(s) on 1 node(s)" in r.summary() and not e["short_ranks"]
    row = ddp.scaling_report([r]).rows[0]
    assert row["nodes"] == 1 and row["complete"] is True and row["train_joules"] == r.train_joules


def test_ddp_with_no_sync_accumulation_equals_one_large_batch(two_workers):
    """2 workers x 2 accumulated micro-batches of 8 must learn exactly what one process learns
    from the same 32-sample batches: DDP averages the gradients, no_sync defers the all-reduce."""
    torch.manual_seed(0)
    ds = gl_data.load("synthetic", n_train=256, n_test=64, verbose=False)
    net = models.build("mlp", hidden=[16], input_shape=ds.input_shape, num_classes=10)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    order = list(DistributedSampler(range(256), num_replicas=1, rank=0, shuffle=True, seed=0,
                                    drop_last=True))
    losses = []
    for start in range(0, 256, 32):
        idx = torch.tensor(order[start:start + 32])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(ds.train_x[idx]), ds.train_y[idx])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert two_workers.loss_history == pytest.approx(losses, rel=1e-4, abs=1e-5)
    with torch.no_grad():
        acc = (net(ds.test_x).argmax(1) == ds.test_y).float().mean().item()
    assert two_workers.final_accuracy == pytest.approx(acc, abs=1 / 64 + 1e-9)


# --- failures --------------------------------------------------------------------------------


def test_bad_worker_config_raises_with_worker_error_and_stderr_tail():
    with pytest.raises(ddp.DDPError) as info:
        ddp.run_ddp(1, data=TINY_DATA, model={"name": "mlp", "bogus": 1}, per_worker_batch=8,
                    timeout_s=120, measure_energy=False)
    text = str(info.value)
    assert "failed (exit code" in text
    assert "rank 0: ValueError: unknown option(s) ['bogus']" in text
    assert "stderr" in text and "  | " in text


def test_timeout_kills_the_launch_and_leaves_no_workers(monkeypatch):
    configs = record_launches(monkeypatch, launch)
    # 100,000 epochs is hours of work: however long this process is stalled past the deadline (a
    # busy machine can stop it for seconds), the workers cannot finish before they are killed
    with pytest.raises(ddp.DDPError, match="timeout of 0.5 s"):
        ddp.run_ddp(2, data=TINY_DATA, model=TINY_MODEL, per_worker_batch=8, epochs=100_000,
                    timeout_s=0.5, measure_energy=False)
    time.sleep(0.2)
    assert len(configs) == 1
    assert live_processes_naming(configs[0]) == []


def test_a_timeout_that_finds_the_workers_training_kills_them_too(monkeypatch):
    """The deadline passes while both workers train (as when this process was stalled): torchrun
    starts its workers in sessions of their own, so killing its group alone would leave them."""
    configs = record_launches(monkeypatch, launch)
    real = launch.subprocess.Popen.communicate

    def stalled_until_training(self, input=None, timeout=None):
        if timeout is not None:  # the launch's deadline: hold it until torchrun and 2 workers run
            end = time.monotonic() + 120
            while len(live_processes_naming(configs[0])) < 3 and time.monotonic() < end:
                time.sleep(0.1)
            assert len(live_processes_naming(configs[0])) == 3, "the workers never started"
        return real(self, input, timeout)

    monkeypatch.setattr(launch.subprocess.Popen, "communicate", stalled_until_training)
    with pytest.raises(ddp.DDPError, match="timeout of 0.5 s"):
        ddp.run_ddp(2, data=TINY_DATA, model=TINY_MODEL, per_worker_batch=8, epochs=100_000,
                    timeout_s=0.5, measure_energy=False)
    time.sleep(0.2)
    assert live_processes_naming(configs[0]) == []


def _shutdown_crash(monkeypatch, lose_marker=None):
    """Run the real launch, then report what torchrun says when a worker aborts at shutdown
    (gloo teardown: "terminate called without an active exception", exit code 1)."""
    real = launch.run_launch
    labels = []

    def run(command, env, timeout_s, label):
        labels.append(label)
        returncode, stderr = real(command, env, timeout_s, label)
        # the real launch may itself have met that abort; what matters here is what the markers say
        assert returncode == 0 or "terminate called without an active exception" in stderr, stderr
        if lose_marker is not None:  # as if that worker had died before its last collective
            folder = Path(next(a for a in command if a.endswith("config.json"))).parent
            (folder / f"finished-{lose_marker}").unlink()
        return 1, "terminate called without an active exception\n" + stderr

    monkeypatch.setattr(launch, "run_launch", run)
    return labels


def test_a_worker_crashing_at_shutdown_after_finishing_keeps_the_result_with_a_note(monkeypatch):
    labels = _shutdown_crash(monkeypatch)
    result = ddp.run_ddp(2, data=TINY_DATA, model=TINY_MODEL, per_worker_batch=8, max_steps=2,
                         timeout_s=120, measure_energy=False)
    assert labels == ["greenlab: torchrun launch (2 workers, 1 run)"]  # its progress line says what it runs
    assert result.steps == 2
    assert any("failed while shutting down" in n and "terminate called" in n for n in result.notes)


def test_a_worker_that_did_not_finish_still_fails_the_run(monkeypatch):
    _shutdown_crash(monkeypatch, lose_marker=1)
    with pytest.raises(ddp.DDPError, match="failed \\(exit code 1\\)"):
        ddp.run_ddp(2, data=TINY_DATA, model=TINY_MODEL, per_worker_batch=8, max_steps=2,
                    timeout_s=120, measure_energy=False)


def test_failure_message_keeps_only_the_tail():
    stderr = "\n".join(f"line {i}" for i in range(100))
    text = launch._failure_message(2, 1, 60, ["rank 1: RuntimeError: boom"], stderr)
    assert "rank 1: RuntimeError: boom" in text
    assert "line 99" in text and "line 60" in text and "line 59" not in text


# --- several runs in one launch ---------------------------------------------------------------


def test_a_series_runs_every_configuration_in_one_launch_each_from_its_own_seed():
    ds = gl_data.load("synthetic", n_train=256, n_test=64, verbose=False)
    runs = [{"label": "a", "per_worker_batch": 8}, {"label": "a again", "per_worker_batch": 8},
            {"label": "half data", "per_worker_batch": 8, "n_train": 128},
            {"label": "fixed global", "global_batch": 16, "seed": 1},
            {"label": "alone", "workers": 1, "per_worker_batch": 16, "seed": 1}]
    results = ddp.run_ddp_series(2, runs, data=ds, model=TINY_MODEL, max_steps=None, lr=0.05,
                                 timeout_s=120, measure_energy=False)
    a, again, half, fixed, alone = results
    assert [r.label for r in results] == ["a", "a again", "half data", "fixed global", "alone"]
    assert all(r.launch_runs == 5 and r.wall_seconds == a.wall_seconds for r in results)
    # a fresh model from the same seed: the same updates as the first run, not a continuation
    assert again.loss_history == a.loss_history and again.final_accuracy == a.final_accuracy
    assert a.samples == 256 and half.samples == 128 and half.dataset["n_train"] == 128
    assert half.steps == a.steps // 2
    assert fixed.per_worker_batch == 8 and fixed.global_batch == 16 and fixed.loss_history != a.loss_history
    assert all(0.0 <= r.val_accuracy <= 1.0 and r.dataset["n_val"] == ds.n_val for r in results)
    assert any("one of 5 runs in one torchrun launch" in n for n in a.notes)
    # one worker of the two, on a group of its own: the same updates as two workers sharing its batch
    assert alone.nprocs == 1 and alone.per_rank_steps == [alone.steps] and alone.steps == fixed.steps
    assert max(abs(x - y) for x, y in zip(alone.loss_history, fixed.loss_history)) < 1e-4
    assert any("first 1 of the launch's 2 worker processes" in n for n in alone.notes)


@pytest.mark.parametrize("runs, words", [
    ([], "non-empty list"),
    ([{"per_worker_batch": 8, "batch": 3}], r"runs\[0\] has unknown keys \['batch'\]"),
    ([{"per_worker_batch": 8}, {"global_batch": 7}], r"runs\[1\]: global_batch 7 must divide"),
    ([{"per_worker_batch": 8, "n_train": 0}], "n_train must be an integer"),
    ([{"per_worker_batch": 8, "n_train": 10**6}], "more than the dataset"),
    (["big"], "must be a dict"),
    ([{"per_worker_batch": 8, "workers": 3}], "workers must be an integer from 1 to nprocs=2"),
    ([{"per_worker_batch": 8, "workers": 0}], "workers must be"),
])
def test_a_series_with_bad_runs_fails_before_launching(runs, words):
    with pytest.raises(ValueError, match=words):
        ddp.run_ddp_series(2, runs, data=TINY_DATA, model=TINY_MODEL, measure_energy=False)


def test_joules_by_kind_adds_every_node_per_component_kind():
    r = _fake(2, 6.0, 300.0)
    r.train_energy["nodes"] = {"a": {"joules": 200.0, "joules_by_kind": {"cpu": 50.0, "gpu": 150.0}},
                               "b": {"joules": 100.0, "joules_by_kind": {"cpu": 40.0, "gpu": 60.0}}}
    assert r.joules_by_kind == {"cpu": 90.0, "gpu": 210.0}
    assert sum(r.joules_by_kind.values()) == pytest.approx(r.train_joules)
    assert _fake(1, 1.0, 1.0).joules_by_kind is None  # no node breakdown: unknown, not zero


def test_power_profile_of_a_trace():
    from greenlab.energy import PowerSample

    trace = [PowerSample(t_s=0.1 * i, watts={"cpu": w}, joules={}, total_watts=w, total_joules=0.0)
             for i, w in enumerate([10.0, 30.0, 10.0, 30.0])]
    p = ddp.power_profile(trace)
    assert p["mean_watts"] == pytest.approx(20.0) and p["std_watts"] == pytest.approx(10.0)
    assert p["cv"] == pytest.approx(0.5) and p["min_watts"] == 10.0 and p["max_watts"] == 30.0
    assert p["seconds"] == pytest.approx(0.3) and p["n"] == 4
    steady = [PowerSample(t_s=float(i), watts={}, joules={}, total_watts=5.0, total_joules=0.0) for i in range(3)]
    assert ddp.power_profile(steady)["cv"] == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        ddp.power_profile(trace[:1])


# --- reports (fake runs, real arithmetic) ------------------------------------------------------


def _fake(nprocs, seconds, joules, accuracy=0.9, global_batch=64):
    return ddp.DDPResult(
        nprocs=nprocs, backend="gloo", device="cpu", threads_per_worker=1, per_worker_batch=64,
        global_batch=global_batch, accum_steps=1, epochs=1, lr=0.02, steps=10,
        per_rank_steps=[10] * nprocs, per_rank_samples=[640] * nprocs, samples=640 * nprocs,
        train_seconds=seconds, samples_per_second=640 * nprocs / seconds, final_accuracy=accuracy,
        final_loss=0.5, loss_history=[0.5], dataset={}, model={}, wall_seconds=seconds + 5.0,
        train_energy=_training_window(joules))


def _training_window(joules):
    """The training window's figures as the workers' reduction writes them: a CPU estimate."""
    cpu = ComponentEnergy(component="cpu", source="estimate", joules=joules, seconds=1.0, watts=joules,
                          estimated=True, rel_uncertainty=1.0)
    return Measurement(label="train", seconds=1.0, components={"cpu": cpu}).to_dict()


def test_scaling_report_speedup_efficiency_and_k():
    one, two = _fake(1, 10.0, 200.0), _fake(2, 6.0, 240.0, global_batch=128)
    rows = ddp.scaling_report([one, two]).rows
    assert rows[0]["speedup"] == pytest.approx(1.0) and rows[0]["efficiency"] == pytest.approx(1.0)
    assert rows[1]["speedup"] == pytest.approx(10 / 6)
    assert rows[1]["efficiency"] == pytest.approx(scaling.scaling_efficiency(10.0, 6.0, 2))
    assert rows[1]["joules_per_device_hour"] == pytest.approx(240.0 / (2 * 6.0 / 3600))
    assert "1.67x" in ddp.scaling_report([one, two]).text()
    with pytest.raises(ValueError, match="DDPResult"):
        ddp.scaling_report([])


def test_scaling_report_marks_incomplete_energy():
    one = _fake(1, 10.0, 200.0)
    two = _fake(2, 6.0, 240.0)
    two.train_energy.update(problems=["rank 1 on n0 failed to measure (denied)"],
                            nodes={"n0": {"ranks": [0, 1], "joules": 240.0}})
    report = ddp.scaling_report([one, two])
    assert report.rows[1]["complete"] is False and report.rows[1]["nodes"] == 1
    assert report.rows[0]["complete"] is True and report.rows[0]["nodes"] is None
    text = report.text()
    assert "240 (incomplete)" in text and "rank 1 on n0 failed to measure (denied)" in text
    assert "incomplete" in ddp.stakeholder_summary(one, two)
    assert "<table>" in report._repr_html_() and "incomplete energy" not in report._repr_html_()


def test_stakeholder_summary_uses_the_numbers():
    text = ddp.stakeholder_summary(_fake(1, 10.0, 200.0), _fake(2, 6.0, 240.0, accuracy=0.8))
    assert "1.67x" in text and "83%" in text and "80.0%" in text
    assert "(1.20x; an estimate (CPU power model))" in text


# --- `greenlab run --workers` --------------------------------------------------------------


@pytest.fixture
def cli_isolated(monkeypatch, tmp_path):
    from greenlab.session import config

    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "_current", None)


CLI_TINY = ["run", "--dataset", "synthetic", "--model", "mlp", "--n-train", "128", "--n-test", "32",
            "--batch-size", "16", "--max-steps", "2"]


def test_run_with_workers_reports_the_reduced_energy_per_node_and_worker(cli_isolated, capsys):
    from greenlab.base import results
    from greenlab.cli.app import main

    assert main(CLI_TINY + ["--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 worker(s): 2 worker(s) [gloo/cpu]" in out
    # two steps may leave a worker's window shorter than its meter reads: then no figure, and it says so
    figure, refused = "over 2 worker(s) on 1 node(s)" in out, "training energy not measurable at this size" in out
    assert figure != refused
    assert "node " in out and "worker(s) 0, 1;" in out
    assert "worker 0 on " in out and "worker 1 on " in out
    assert results.load() == []


@pytest.mark.parametrize("extra, words", [
    (["--workers", "0"], "worker counts >= 1"),
    (["--workers", "2,2"], "twice"),
    (["--workers", "2", "--precision", "bf16"], "--precision"),
    (["--workers", "2", "--target", "0.5"], "--target"),
])
def test_run_with_bad_workers_exits_2(cli_isolated, capsys, extra, words):
    from greenlab.cli.app import main

    assert main(CLI_TINY + extra) == 2
    assert words in capsys.readouterr().err


def test_parse_worker_counts():
    assert ddp.parse_worker_counts("1, 2,4") == [1, 2, 4]
    with pytest.raises(ValueError, match="e.g. 1,2"):
        ddp.parse_worker_counts("two")


# --- no process or temporary data left behind ---------------------------------------------------

def _tree_after_start(proc, want: int, timeout_s: float = 180.0) -> list:
    """The descendants of ``proc`` once ``want`` of them run a greenlab.techniques.ddp worker's config."""
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            tree = parent.children(recursive=True)
            ddp_procs = [p for p in tree if "--config" in " ".join(p.cmdline())]
        except psutil.Error:
            tree, ddp_procs = [], []
        if len(ddp_procs) >= want:
            return tree
        assert proc.poll() is None, "the launch ended before its workers started"
        time.sleep(0.2)
    raise AssertionError(f"fewer than {want} launch processes after {timeout_s:g} s")


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_kill_9_of_a_launching_process_leaves_no_torchrun_no_worker_and_no_dataset_copy(tmp_path):
    import subprocess
    import sys

    code = ("from greenlab import ddp\n"
            f"ddp.run_ddp(2, data={TINY_DATA!r}, model={TINY_MODEL!r}, per_worker_batch=8, epochs=10**6, "
            "timeout_s=3600, measure_energy=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree = []
    try:
        tree[:] = _tree_after_start(proc, want=3)  # torchrun (under its supervisor) and two workers
        config = next(a for p in tree for a in p.cmdline() if a.endswith("config.json"))
        folder = Path(config).parent
        time.sleep(2.0)  # the workers are past their start-up and training
        assert folder.is_dir() and (folder / "data.pt").exists()
        proc.kill()  # kill -9: no handler of the launcher runs
        proc.wait()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (any(_alive(p) for p in tree) or folder.exists()):
            time.sleep(0.2)
        left = [(p.pid, " ".join(p.cmdline())[:120]) for p in tree if _alive(p)]
        assert left == [], left
        assert not folder.exists(), f"{folder} (the dataset copy) was left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in tree:  # what this test started, should the test have failed
            if _alive(p):
                p.kill()


def test_a_worker_failure_in_greenlab_run_workers_is_one_line_with_exit_code_1(cli_isolated, capsys):
    from greenlab.cli.app import main

    # a model option the workers refuse: the launch starts, its worker fails
    real = launch.run_ddp

    def failing(n, **kw):
        return real(n, **{**kw, "model": {"name": "mlp", "bogus": 1}})

    launch.run_ddp, saved = failing, launch.run_ddp
    try:
        code = main(CLI_TINY + ["--workers", "1"])
    finally:
        launch.run_ddp = saved
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("greenlab run: error: the 1-worker torchrun launch failed (exit code")
    assert "rank 0: ValueError: unknown option(s) ['bogus']" in err


def test_ctrl_c_in_greenlab_run_workers_is_one_line_with_exit_code_130(cli_isolated, capsys, monkeypatch):
    from greenlab.cli.app import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "run_launch", interrupted)
    code = main(CLI_TINY + ["--workers", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 130
    assert err.count("\n") == 0 and "Traceback" not in err and "interrupted" in err, err


def test_kill_groups_kills_members_that_outlive_their_leader():
    import subprocess
    import sys

    from greenlab.base.processes import kill_group

    # the leader exits at SIGTERM at once; its child ignores SIGTERM and would live on
    code = ("import signal, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(600)'],"
            " stdout=sys.stdout)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n")
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child_pid = int(leader.stdout.readline())
    assert leader.stdout.readline().strip() == "1"  # the child has set its handler
    child = psutil.Process(child_pid)
    kill_group(leader, grace_s=0.5)
    time.sleep(0.3)
    assert not _alive(child)


def test_die_with_parent_ignores_a_parent_pid_inherited_from_further_up(monkeypatch):
    import os
    import subprocess
    import sys

    from greenlab.base import processes

    # the variable names this (living) test process, but the child's parent is a shell in between
    env = {**os.environ, processes.PARENT_ENV: str(os.getpid())}
    code = "from greenlab.base.processes import die_with_parent; die_with_parent(); print('alive')"
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c \"{code}\"; true"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "alive", out.stderr[-2000:]
    # a variable naming a process that is gone: the parent died before the call, so it ends
    gone = subprocess.Popen(["true"])
    gone.wait()
    env[processes.PARENT_ENV] = str(gone.pid)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == -15 and "alive" not in out.stdout


def test_ctrl_c_during_a_launch_is_one_line_in_a_notebook(monkeypatch, tmp_path):
    """gl.ddp.run_ddp interrupted (Kernel > Interrupt) raises gl.Interrupted, which a notebook set
    up by gl.setup() shows as its one line, as it does for gl.train."""
    from greenlab.base.interrupts import Interrupted

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "run_launch", interrupted)
    with pytest.raises(Interrupted) as caught:
        ddp.run_ddp(2, data=TINY_DATA, model=TINY_MODEL, per_worker_batch=8, measure_energy=False)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("greenlab.ddp: interrupted a 2-worker torchrun launch (the run) after ")
    assert "workers are stopped and nothing was recorded" in line and caught.value.result is None
