"""CPU tests of benchmarks/gpu_suite.py: no-GPU behaviour, read-only audit, measurement helpers,
and a full dry run whose files must match greenlab.course.reference's schema."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_shot  # noqa: E402
from benchmarks import gpu_suite as gs  # noqa: E402
from greenlab.course import reference  # noqa: E402

AUDITED = [ROOT / "benchmarks" / "gpu_suite.py", *sorted((ROOT / "benchmarks" / "gpu").rglob("*.py")),
           ROOT / "greenlab" / "course" / "recipes.py",
           ROOT / "tests" / "test_gpu.py"]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --- no GPU --------------------------------------------------------------------------------

def test_without_cuda_it_says_so_writes_nothing_and_exits_0(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    code = gs.main(["--out", str(out)])
    assert code == gs.EXIT_NO_GPU == 0
    assert "no GPU: nothing to check" in capsys.readouterr().out
    assert not out.exists()


def test_unknown_experiment_is_refused_with_the_allowed_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gs.main(["--out", str(tmp_path), "--only", "mixed_precision,warp_drive"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "warp_drive" in err and "mixed_precision" in err


@pytest.mark.parametrize("budget", ["10", "nan", "99999"])
def test_budget_outside_its_range_is_refused(tmp_path, capsys, budget):
    with pytest.raises(SystemExit):
        gs.main(["--out", str(tmp_path), "--budget-s", budget])
    assert "--budget-s must be between 60 and 3600" in capsys.readouterr().err


# --- read-only audit -----------------------------------------------------------------------

@pytest.mark.parametrize("path", AUDITED, ids=lambda p: p.name)
def test_sources_contain_no_set_calls(path):
    text = path.read_text(encoding="utf-8")
    assert "Set" not in text, f"{path.name} must not contain 'Set' (no nvmlDeviceSet* calls)"
    for name in re.findall(r"nvml[A-Z]\w*", text):
        assert re.fullmatch(r"nvml(Init|Shutdown|SystemGet\w+|DeviceGet\w+)", name), name


class _FakeNvmlModule:
    """A pynvml stand-in that records every call; set-style calls do not exist on it."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_COMPUTEMODE_DEFAULT = 0

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        values = {
            "nvmlInit": None, "nvmlDeviceGetCount": 1, "nvmlDeviceGetHandleByIndex": "h0",
            "nvmlDeviceGetName": b"Fake GPU 80GB", "nvmlSystemGetDriverVersion": "999.1",
            "nvmlSystemGetCudaDriverVersion_v2": 13000, "nvmlDeviceGetEnforcedPowerLimit": 700000,
            "nvmlDeviceGetPowerManagementDefaultLimit": 700000, "nvmlDeviceGetClockInfo": 1980,
            "nvmlDeviceGetMaxClockInfo": 1980, "nvmlDeviceGetPersistenceMode": 1,
            "nvmlDeviceGetComputeMode": 0, "nvmlDeviceGetMigMode": (0, 0),
            "nvmlDeviceGetPerformanceState": 0, "nvmlDeviceGetTemperature": 31,
            "nvmlDeviceGetTotalEnergyConsumption": 123456, "nvmlDeviceGetArchitecture": 9,
            "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=80 * 2**30),
        }
        if name not in values:
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            return values[name]
        return call


def test_gpu_state_is_read_with_queries_only_and_missing_ones_are_labelled():
    from greenlab.energy.nvml import Nvml

    fake = _FakeNvmlModule()
    lib = Nvml(fake)
    state = gs.read_gpu_state(lib, "h0")
    assert state["name"] == "Fake GPU 80GB"
    assert state["driver"] == "999.1"
    assert state["cuda_driver_version"] == "13.0"
    assert state["power_limit_w"] == 700.0
    assert state["sm_clock_mhz"] == 1980
    assert state["persistence_mode"] == "enabled"
    assert state["compute_mode"] == "default"
    assert state["performance_state"] == "P0"
    # the fake has no applications-clock query: reported, not raised
    assert state["applications_sm_clock_mhz"].startswith("unavailable")
    assert fake.calls and all(re.fullmatch(r"nvml(Init|SystemGet\w+|DeviceGet\w+)", c) for c in fake.calls)


# --- import hygiene ------------------------------------------------------------------------

BLOCKED = ["jupyterlab", "ipywidgets", "nbval", "matplotlib", "IPython", "ipykernel"]


def _import_with_blocked(body: str):
    code = ("import sys\n"
            f"for name in {BLOCKED!r}: sys.modules[name] = None\n" + body +
            f"bad = [m for m in sys.modules if m.split('.')[0] in {BLOCKED!r} and sys.modules[m] is not None]\n"
            "print('imported', bad)\n")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=120)


def test_suite_imports_without_notebook_or_plotting_packages():
    proc = _import_with_blocked(
        "import benchmarks.gpu_suite as gs, greenlab.course.recipes\n"
        "import greenlab, greenlab.training.loop, greenlab.energy, greenlab.course.reference\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "imported []" in proc.stdout


def test_greenlab_itself_imports_without_notebook_packages():
    proc = _import_with_blocked("import greenlab\n")
    assert proc.returncode == 0, proc.stderr[-2000:]


# --- measurement helpers, on fake counters and clocks ----------------------------------------

class _FakeClock:
    def __init__(self, step_s):
        self.t = 0.0
        self.step_s = step_s

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


def test_counter_vs_power_agrees_on_a_consistent_trace_and_sees_a_5_percent_offset():
    clock = _FakeClock(0.0)
    watts = lambda: 300.0 + 50.0 * ((clock.t * 10) % 1)  # noqa: E731 - a sawtooth, not constant
    true_joules = lambda t: 300.0 * t + 25.0 * t  # noqa: E731 - mean of the sawtooth is 325 W
    r = gs.counter_vs_power(lambda: true_joules(clock.t), watts, 10.0, 0.001, clock=clock, sleep=clock.sleep)
    assert r["seconds"] >= 10.0
    assert abs(r["difference_pct"]) < 0.5
    assert r["mean_watts"] == pytest.approx(325, rel=0.01)
    clock.t = 0.0
    r = gs.counter_vs_power(lambda: 1.05 * true_joules(clock.t), watts, 10.0, 0.001, clock=clock,
                            sleep=clock.sleep)
    assert r["difference_pct"] == pytest.approx(5.0, abs=0.5)
    with pytest.raises(ValueError):
        gs.counter_vs_power(lambda: 0.0, lambda: 1.0, 0.0)


def test_counter_update_period_finds_the_step_of_a_stepped_counter():
    clock = _FakeClock(0.0)

    def read():  # a counter that moves every 50 ms; each read advances the clock 1 ms
        clock.t += 0.001
        return int(clock.t / 0.05) * 7.0

    r = gs.counter_update_period(read, 2.0, clock=clock)
    assert r["interval_ms_median"] == pytest.approx(50.0, abs=1.01)
    assert r["interval_ms_p90"] == pytest.approx(50.0, abs=1.01)
    assert r["changes"] >= 38
    assert r["read_microseconds"] == pytest.approx(1000.0, rel=0.05)


def test_paired_overhead_alternates_order_and_takes_the_median():
    order = []
    times_without = iter([1.0, 1.0, 1.0, 1.0, 1.0])
    times_with = iter([1.01, 1.02, 1.5, 1.0, 1.01])

    def without():
        order.append("without")
        return next(times_without)

    def with_():
        order.append("with")
        return next(times_with)

    r = gs.paired_overhead(without, with_, 5)
    assert order[:4] == ["without", "with", "with", "without"]
    assert r["overhead_pct_median"] == pytest.approx(1.0)
    assert r["overhead_pct_max"] == pytest.approx(50.0)
    with pytest.raises(ValueError):
        gs.paired_overhead(without, with_, 0)


def test_percentile_and_judge():
    assert gs.percentile([], 90) is None
    assert gs.percentile([10, 20, 30, 40, 50], 50) == 30
    assert gs.percentile([0, 100], 90) == pytest.approx(90)
    assert gs.judge(2.3, ">=", 2.0) == "pass"
    assert gs.judge(0.5, "<", 1.0) == "pass"
    assert gs.judge(1.5, "<", 1.0) == "fail"
    assert gs.judge(None, "<", 1.0) == "not measured"


def test_write_json_stores_non_finite_numbers_as_null(tmp_path):
    path = tmp_path / "x.json"
    gs.write_json(path, {"a": float("nan"), "b": [1.0, float("inf")], "c": "—"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": None, "b": [1.0, None], "c": "—"}


def test_recipes_return_model_fn_config_and_data_spec():
    from greenlab.course import recipes
    from greenlab.training.loop import TrainConfig

    naive = recipes.naive_recipe()
    green = recipes.green_recipe(device="cpu")
    for model_fn, cfg, spec in (naive, green):
        assert callable(model_fn) and isinstance(cfg, TrainConfig)
        assert cfg.target_accuracy == recipes.CAPSTONE_TARGET_ACCURACY
        assert set(spec) == {"name", "n_train", "n_test"}
    assert naive[1].precision == "fp32" and naive[1].loader == "dataloader" and not naive[1].stop_at_target
    assert green[1].loader == "device" and green[1].stop_at_target
    from greenlab.session import hardware

    native = hardware.precision_support("bf16", "cpu").native  # bf16 only where the device runs it natively
    assert green[1].precision == ("bf16" if native else "fp32")
    assert recipes.green_recipe(device="cpu", n_train=500)[2]["n_train"] == 500
    with pytest.raises(ValueError, match="device"):
        recipes.green_recipe(device="tpu")


# --- time plan, calibration, lessons, pytest target ------------------------------------------

def test_default_plan_fits_the_device_budget_with_room_for_lessons_and_pytest():
    total = sum(s for _, s in gs.EXPERIMENTS.values()) + gs.LESSONS_SECONDS + gs.PYTEST_SECONDS \
        + gs.OVERHEAD_SECONDS
    assert total <= gs.DEFAULT_BUDGET_S <= 540
    from benchmarks.gpu.settings import MERGED_INTO

    # a stage with its own share (torch.compile) is recorded inside its experiment
    assert gs.experiment_names() == tuple(n for n in gs.EXPERIMENTS if n not in MERGED_INTO)
    assert set(MERGED_INTO.values()) <= set(gs.experiment_names())
    # both recipe ladders have a share: lesson 10's as a stage of language_model
    assert MERGED_INTO["language_model-recipes"] == "language_model" and gs.EXPERIMENTS["capstone"][1] >= 45
    from benchmarks.gpu.settings import LESSON_JOBS

    assert LESSON_JOBS <= 16 // 3  # at least 3 of the GPU machine's 16 cores per lesson


def test_every_share_is_at_least_the_floor_below_which_an_experiment_is_skipped():
    """A share under MIN_SHARE_S is never run ("skipped: out of time"): the plan gives every
    experiment at least that, and so does a plan scaled down to a short budget."""
    from benchmarks.gpu.orchestrator import plan_shares
    from benchmarks.gpu.settings import MIN_SHARE_S

    assert MIN_SHARE_S == 8.0
    for name, (_lesson, share) in gs.EXPERIMENTS.items():
        assert share >= MIN_SHARE_S, (name, share)
    for budget in (540.0, 300.0, 60.0):
        shares, lesson_s, pytest_s = plan_shares(list(gs.EXPERIMENTS), True, True, budget, dry_run=False)
        assert min(shares.values()) >= MIN_SHARE_S, (budget, shares)
    shares, lesson_s, pytest_s = plan_shares(list(gs.EXPERIMENTS), True, True, gs.DEFAULT_BUDGET_S, False)
    assert shares == {n: float(s) for n, (_l, s) in gs.EXPERIMENTS.items()}  # the full plan fits unscaled
    assert plan_shares(["carbon"], False, False, 120.0, False)[1:] == (0.0, 0.0)


def test_lessons_start_in_priority_order_and_a_long_one_gives_way_when_it_does_not_fit():
    from benchmarks.gpu.orchestrator import lesson_order, pick_lesson
    from benchmarks.gpu.settings import LESSON_PRIORITY, LESSON_SHARES_S

    # the measured long lessons have shares of their own, above the 60 s default
    assert LESSON_SHARES_S["10"] >= 234 and all(LESSON_SHARES_S[n] >= 130 for n in ("09", "12", "14"))
    lessons = [Path(f"lessons/instructor/{n:02d}_x.ipynb") for n in range(16)]
    order = [p.stem[:2] for p in lesson_order(lessons)]
    assert order[:len(LESSON_PRIORITY)] == list(LESSON_PRIORITY)
    assert order[len(LESSON_PRIORITY):] == sorted(set(order) - set(LESSON_PRIORITY))
    share = lambda p: LESSON_SHARES_S.get(p.stem[:2], 60.0)  # noqa: E731
    pending = [Path("10_x.ipynb"), Path("00_x.ipynb")]
    assert pick_lesson(pending, 300.0, share) == pending[0]  # fits: priority order
    assert pick_lesson(pending, 100.0, share) == pending[1]  # 10 does not fit: the short one goes first
    assert pick_lesson([Path("10_x.ipynb")], 100.0, share) == Path("10_x.ipynb")  # none fits: what is left
    assert pick_lesson(pending, 9.0, share) is None and pick_lesson([], 500.0, share) is None


def _ctx(tmp_path, min_window_s=0.25):
    args = SimpleNamespace(dry_run=True, min_window_s=min_window_s, part=str(tmp_path), cache=None)
    return gs.Context(args, "carbon", 60.0)


def test_calibration_warms_up_then_syncs_around_every_timing_and_sizes_the_window(tmp_path):
    ctx = _ctx(tmp_path)
    events = []
    ctx.sync = lambda: events.append("sync")

    def run(n):  # 10 ms per step, never faster
        events.append(("run", n))
        time.sleep(0.01 * n)

    steps, per_step = ctx.calibrate(run)
    assert per_step >= 0.0099  # a sleep is never shorter; a busy machine may make it longer
    # enough steps for the shortest window with its margin, from the measured step time
    assert steps * per_step >= ctx.min_window_s and steps == math.ceil(0.25 * 1.2 / per_step)
    runs = [i for i, e in enumerate(events) if e != "sync"]
    assert all(events[i - 1] == "sync" and events[i + 1] == "sync" for i in runs)
    timed = [e[1] for e in events if e != "sync"]
    assert timed[-1] > 1 and timed[-2:] == sorted(timed[-2:])  # doubling until calib_s is reached
    start = time.perf_counter()
    w = ctx.window("w", lambda: run(steps))
    assert w["window_ok"] and w["seconds"] >= ctx.min_window_s
    assert time.perf_counter() - start >= ctx.min_window_s


@pytest.mark.filterwarnings("ignore::UserWarning")  # the short-window warning itself is expected
def test_a_short_window_is_flagged_not_hidden(tmp_path):
    ctx = _ctx(tmp_path, min_window_s=5.0)
    w = ctx.window("short", lambda: time.sleep(0.05))
    assert w["window_ok"] is False and w["seconds"] < 5.0


def test_rows_are_saved_as_they_finish_so_a_killed_worker_keeps_them(tmp_path):
    ctx = _ctx(tmp_path)
    ctx.row({"label": "first", "joules": 1.5})
    saved = json.loads((tmp_path / "carbon.json").read_text(encoding="utf-8"))
    assert saved["status"] == "running" and saved["rows"] == [{"label": "first", "joules": 1.5}]
    assert "allow_tf32" in saved["torch_tf32"]  # TF32 settings recorded as found


def test_select_lessons_and_the_gpu_test_files():
    every = gs.select_lessons("all", dry_run=False)
    numbers = [p.stem[:2] for p in every]
    assert numbers[:12] == [f"{i:02d}" for i in range(12)] and numbers == sorted(set(numbers)), numbers
    assert gs.select_lessons("", dry_run=False) == every
    assert [p.stem for p in gs.select_lessons("", dry_run=True)] == ["02_gradient_accumulation"]
    assert [p.stem[:2] for p in gs.select_lessons("05,00", dry_run=False)] == ["05", "00"]  # as asked
    assert gs.select_lessons("none", dry_run=False) == []
    with pytest.raises(SystemExit, match="no lesson"):
        gs.select_lessons("42", dry_run=False)
    files = gs.gpu_test_files()
    assert ROOT / "tests" / "test_gpu.py" in files
    assert ROOT / "tests" / "test_gpu_suite.py" not in files  # names the mark in text only


# --- unpacking records into data/reference_runs ---------------------------------------------

def _bundle(tmp_path, gpu="NVIDIA H200", **change):
    record = {"schema_version": 1, "experiment": "carbon", "date": "2026-05-01", "gpu": gpu,
              "driver": "d", "cuda": "c", "torch": "t", "command": "python benchmarks/gpu_suite.py",
              "results": [{"label": "x", "joules": None}], **change}
    path = tmp_path / gs.BUNDLE
    gs.write_json(path, {"bundle_version": gs.BUNDLE_VERSION, "records": [record]})
    return path


def test_unpack_writes_one_reference_file_per_record(tmp_path, capsys):
    into = tmp_path / "runs"
    assert gs.main(["--unpack", str(_bundle(tmp_path)), "--into", str(into)]) == 0
    run = reference.load_file(into / "nvidia-h200_2026-05-01_carbon.json")
    assert run.experiment == "carbon" and run.gpu == "NVIDIA H200"


def test_unpack_refuses_dry_run_records_and_bad_schema_and_writes_nothing(tmp_path, capsys):
    into = tmp_path / "runs"
    assert gs.main(["--unpack", str(_bundle(tmp_path, gpu=gs.DRY_RUN_GPU)), "--into", str(into)]) == 2
    assert "dry-run" in capsys.readouterr().err and not into.exists()
    assert gs.main(["--unpack", str(_bundle(tmp_path, gpu=gs.DRY_RUN_GPU)), "--into", str(into),
                    "--allow-dry-run"]) == 0
    assert gs.main(["--unpack", str(_bundle(tmp_path, experiment="Bad Name")), "--into",
                    str(tmp_path / "other")]) == 2
    assert "reference schema" in capsys.readouterr().err and not (tmp_path / "other").exists()


# --- the watchdog ---------------------------------------------------------------------------

def _notebook(path, source):
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": source,
                                           "outputs": [], "execution_count": None}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return str(path)


def test_a_hung_experiment_is_killed_keeping_its_rows_the_others_and_the_summary(tmp_path):
    """Also: lessons run in parallel, a failing one named with its cell, a passing one passed."""
    from minimal_env import hidden_env

    out = tmp_path / "out"
    good = _notebook(tmp_path / "01_good.ipynb", "import greenlab as gl\nprint(gl.setup().device)")
    bad = _notebook(tmp_path / "02_bad.ipynb", "x = 1\nraise RuntimeError('broken lesson')")
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                           "--only", "carbon,compression", "--hang", "carbon", "--lessons", f"{good},{bad}",
                           "--lesson-jobs", "2", "--budget-s", "120"], cwd=ROOT, env=hidden_env(tmp_path / "site"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    bundle = json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))
    records = {r["experiment"]: r for r in bundle["records"]}
    assert set(records) == {"carbon", "compression", gs.SUMMARY}
    assert [r["label"] for r in records["carbon"]["results"]] == ["before the hang"]
    summary = {r["label"]: r for r in records[gs.SUMMARY]["results"]}
    assert summary["carbon"]["status"].startswith("killed by the watchdog after")
    assert "1 finished row(s) kept" in summary["carbon"]["status"]
    # the next experiment ran in a fresh worker after the kill (its share may run short on a busy CPU)
    assert summary["compression"]["status"] in ("ok", "partial: out of time"), summary["compression"]
    assert records["compression"]["results"][0]["label"] == "dense"
    assert summary["pytest -m gpu"]["outcome"] == "not run"
    assert summary["lesson 01_good"]["status"] == "passed"
    assert summary["lesson 02_bad"]["status"] == \
        "failed: 02_bad.ipynb cell 0 (code cell 1) failed: RuntimeError: broken lesson"
    assert (out / gs.LOG).read_text(encoding="utf-8").count("killed by the watchdog") >= 1


def test_a_hang_before_the_first_row_is_killed_once_and_never_relaunched(tmp_path):
    """A worker that never gets past its start-up (slow CUDA or NVML) is not started again with
    the same experiment: its "running" record says it started; what it had not started gets one
    more worker."""
    from minimal_env import hidden_env

    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                           "--only", "carbon,compression", "--hang-start", "carbon", "--lessons", "none",
                           "--budget-s", "150"], cwd=ROOT, env=hidden_env(tmp_path / "site"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (out / gs.LOG).read_text(encoding="utf-8")
    assert log.count("[carbon] running") == 1, log[-3000:]
    records = {r["experiment"]: r for r in json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))["records"]}
    summary = {r["label"]: r for r in records[gs.SUMMARY]["results"]}
    assert summary["carbon"]["status"].startswith("killed by the watchdog after")
    assert summary["compression"]["status"] in ("ok", "partial: out of time"), summary["compression"]
    assert "[compression] retry" in log  # not started by the killed worker, it ran in one more


def _descendants(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _kill_all(proc, tree):
    """A test's clean-up: the suite and every process it had started, whatever state they are in."""
    if proc.poll() is None:
        proc.kill()
    for p in tree:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 - gone already, or never ours to end
            pass


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_stopped_suite_leaves_no_worker_behind(tmp_path, sig):
    """SIGTERM: the suite ends its workers' process groups and writes what it has; SIGKILL (no
    handler runs): the workers die with it (parent-death signal)."""
    import signal

    import psutil
    from minimal_env import hidden_env

    out, work = tmp_path / "out", tmp_path / "work"
    proc = subprocess.Popen([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                             "--work", str(work),
                             "--only", "carbon", "--hang", "carbon", "--lessons", "none", "--budget-s", "600"],
                            cwd=ROOT, env=hidden_env(tmp_path / "site"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    tree, caches = [], []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # the worker has written its one row and hangs
            part = work / "gpu_suite_parts" / "carbon.json"
            if part.exists() and "before the hang" in part.read_text(encoding="utf-8"):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the worker never reached its hang")
        tree = _descendants(proc.pid)
        assert tree, "no worker process found"
        caches[:] = [c[c.index("--cache") + 1] for c in (p.cmdline() for p in tree) if "--cache" in c]
        assert caches and all(Path(c).parent == work for c in caches), caches  # under --work, never /tmp
        proc.send_signal(getattr(signal, sig))
        code = proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                                   for p in tree if psutil.pid_exists(p.pid)):
            time.sleep(0.2)
        left = [p.pid for p in tree if psutil.pid_exists(p.pid) and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], left
        if sig == "SIGKILL":  # no handler ran: what the run had stays under --work
            assert all(Path(c).is_dir() for c in caches)
        if sig == "SIGTERM":
            assert code == 128 + signal.SIGTERM
            records = {r["experiment"] for r in json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))["records"]}
            assert gs.SUMMARY in records
    finally:
        _kill_all(proc, tree)
        for folder in caches:  # a suite killed outright cannot remove its cache
            shutil.rmtree(folder, ignore_errors=True)


def test_the_shortest_window_is_50_counter_periods_capped_and_flagged():
    from benchmarks.gpu.orchestrator import shortest_window_s

    assert shortest_window_s(3.0, None) == (3.0, False)
    assert shortest_window_s(3.0, 20.0) == (3.0, False)     # 50 x 20 ms = 1 s: the floor holds
    assert shortest_window_s(3.0, 100.0) == (5.0, False)    # 50 x 100 ms
    assert shortest_window_s(3.0, 1000.0) == (6.0, True)    # an idle poll's slow period: capped


def test_mig_without_a_mig_device_and_other_processes_are_flagged():
    from benchmarks.gpu import probes

    assert probes.mig_problem("disabled", None) == {}
    assert probes.mig_problem("enabled", "MIG-1234-abcd") == {}
    assert "names no MIG instance" in probes.mig_problem("enabled", "0")["mig_problem"]
    lib = SimpleNamespace(module=SimpleNamespace(nvmlDeviceGetComputeRunningProcesses=lambda h: [
        SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**20), SimpleNamespace(pid=99999999, usedGpuMemory=2**30)]))
    assert probes.other_gpu_processes(lib, "h") == [{"pid": 99999999, "used_mib": 1024.0}]


def test_counter_vs_power_skips_missed_power_reads_and_says_when_the_counter_gives_none():
    clock = _FakeClock(0.0)
    reads = iter([300.0, None, 300.0, None] + [300.0] * 10000)
    r = gs.counter_vs_power(lambda: 300.0 * clock.t, lambda: next(reads), 1.0, 0.01, clock=clock,
                            sleep=clock.sleep)
    assert r["power_reads_missed"] == 2 and abs(r["difference_pct"]) < 2
    r = gs.counter_vs_power(lambda: None, lambda: 300.0, 1.0, 0.01, clock=clock, sleep=clock.sleep)
    assert r["difference_pct"] is None and r["status"].startswith("not measured")


def test_configurations_are_measured_interleaved(tmp_path):
    from benchmarks.gpu.context import Config, interleaved_rows

    ctx = _ctx(tmp_path)
    order = []

    def loop(name):
        return SimpleNamespace(run=lambda n: (order.append(name), time.sleep(0.002 * n)), samples_per_step=1)

    configs = [Config(name, loop(name), {}) for name in "ABC"]
    ctx.calibrate = lambda run: (1, 0.001)  # no warm-up in this test: only the window order
    ctx.window = lambda label, work: (work(), {"seconds": 0.3, "joules": 1.0, "window_ok": True,
                                              "memory_increase_mib": 0.0})[1]
    rows = interleaved_rows(ctx, configs, repeats=2)
    assert order == list("A" + "ABCABC")  # the experiment's first window warmed (once), then interleaved
    assert [r["repeats"] for r in rows] == [2, 2, 2] and all(r["status"] == "ok" for r in rows)


@pytest.mark.parametrize("module, runner, labels", [
    ("lesson07_data_pipeline", "exp_data_pipeline",
     ["device loader", "DataLoader workers=0", "DataLoader workers=0 pinned", "DataLoader workers=1 pinned"]),
    ("lesson12_language_model_serving", "exp_language_model_serving",
     ["KV cache, batch 1", "no KV cache, batch 1", "KV cache, batch 4"]),
    ("lesson06_compression", "exp_compression", ["dense", "unstructured 50%", "channels 50%"]),
    ("lesson04_architecture_search", "exp_architecture_search",
     ["cnn depth=2, width=4", "cnn depth=2, width=8, separable=True"]),
])
def test_loaders_and_serving_configurations_are_measured_interleaved(tmp_path, monkeypatch, module, runner, labels):
    """Every configuration is calibrated first, then the windows go A B C A B C (not A A B B)."""
    import importlib

    from benchmarks.gpu import context

    mod = importlib.import_module(f"benchmarks.gpu.experiments.{module}")
    for owner in (mod, context):  # inference rows take their repeats in the context module
        monkeypatch.setattr(owner, "_repeats", lambda ctx, configs, seconds: 2, raising=False)
    ctx = _ctx(tmp_path)
    windows = []
    ctx.calibrate = lambda run: (run(1), (1, 0.001))[1]
    ctx.window = lambda label, work: (windows.append(label), work(), {
        "seconds": 0.3, "joules": 1.0, "joules_above_idle": None, "window_ok": True, "memory_increase_mib": 0.0})[2]
    getattr(mod, runner)(ctx)
    measured = [r["label"] for r in ctx.rows if "repeats" in r]  # int8 joins where torchao is installed
    assert measured[:len(labels)] == labels and len(measured) <= len(labels) + 1
    assert windows == measured + measured
    assert all(r["repeats"] == 2 for r in ctx.rows if "repeats" in r)
    assert any("interleaved" in n and "A B C" in n for n in ctx.notes)


def _idle_ctx(tmp_path, idle_w=5.0):
    args = SimpleNamespace(dry_run=True, min_window_s=0.25, part=str(tmp_path), cache=None)
    ctx = gs.Context(args, "carbon", 60.0, idle_w=idle_w)
    assert ctx.energy_ok  # the dry run's CPU source stands in for the device's
    return ctx


def test_energy_above_idle_is_gross_minus_idle_power_times_seconds_and_none_without_idle(tmp_path):
    ctx = _idle_ctx(tmp_path, idle_w=5.0)
    assert ctx.above_idle(100.0, 2.0) == pytest.approx(90.0)
    assert ctx.above_idle(None, 2.0) is None and ctx.above_idle(100.0, None) is None
    assert _idle_ctx(tmp_path, idle_w=None).above_idle(100.0, 2.0) is None


def _fake_run(ctx, joules=120.0, seconds=4.0, to_target=(2.0, 70.0)):
    """A stand-in for gl.train's RunResult: what the suite's rows read."""
    energy = SimpleNamespace(components={ctx.component: SimpleNamespace(joules=joules)})
    return SimpleNamespace(status="completed", steps=10, samples=320, seconds=seconds, train_seconds=seconds * 0.9,
                           samples_per_second=80.0, joules=joules, final_accuracy=0.8, val_accuracy=0.8,
                           seconds_to_target=to_target[0], joules_to_target=to_target[1], history=[{}, {}],
                           energy=energy, steps_to_target=5, config={})


def test_gl_train_rows_record_energy_above_idle(tmp_path, monkeypatch):
    from benchmarks.gpu.experiments.lesson03_batch_sweep import exp_batch_sweep
    from greenlab.training import loop

    ctx = _idle_ctx(tmp_path, idle_w=5.0)
    ctx.calibrate = lambda run: (2, 0.01)
    monkeypatch.setattr(loop, "train", lambda *a, **k: _fake_run(ctx))
    exp_batch_sweep(ctx)
    assert ctx.rows and all(r["joules"] == 120.0 for r in ctx.rows)
    for row in ctx.rows:
        assert row["joules_above_idle"] == pytest.approx(120.0 - 5.0 * 4.0)
        assert row["joules_to_target_above_idle"] == pytest.approx(70.0 - 5.0 * 2.0)
        assert row["idle_watts"] == 5.0
    assert "gross-minus-idle" in " ".join(ctx.notes)


def _ddp_row(tmp_path, monkeypatch, train_energy_short=False):
    from benchmarks.gpu.experiments.lesson08_ddp_scaling import exp_ddp_scaling
    from greenlab.techniques import ddp

    ctx = _idle_ctx(tmp_path, idle_w=5.0)
    ctx.calibrate = lambda run: (2, 0.01)
    result = SimpleNamespace(backend="gloo", device="cpu", global_batch=32, steps=8, samples=256,
                             train_seconds=3.0, samples_per_second=85.0, wall_seconds=9.0, train_joules=99.0,
                             train_energy={"components": {"gpu": {"joules": 60.0}}}, final_accuracy=0.5,
                             energy_complete=True, train_energy_short=train_energy_short)
    monkeypatch.setattr(ddp, "run_ddp", lambda *a, **k: result)
    exp_ddp_scaling(ctx)
    return ctx, ctx.rows[0]


def test_ddp_rows_record_energy_above_idle_for_one_worker(tmp_path, monkeypatch):
    ctx, row = _ddp_row(tmp_path, monkeypatch)
    assert row["train_joules_gpu"] == 60.0 and row["train_joules_gpu_above_idle"] == pytest.approx(60.0 - 15.0)
    assert "gross-minus-idle" in " ".join(ctx.notes)
    assert row["window_ok"] and not row["train_energy_short"]


def test_a_ddp_row_with_a_short_worker_window_is_not_window_ok(tmp_path, monkeypatch):
    # rank 0's training time (3 s) fills the window, but a worker's own energy window was short:
    # a sum of windows is short when any part is
    _, row = _ddp_row(tmp_path, monkeypatch, train_energy_short=True)
    assert row["train_seconds"] >= 3.0 and row["train_energy_short"] and row["window_ok"] is False


def test_capstone_rows_record_energy_above_idle(tmp_path, monkeypatch):
    from benchmarks.gpu.experiments.lesson09_capstone import exp_capstone
    from greenlab.training import loop

    ctx = _idle_ctx(tmp_path, idle_w=5.0)
    monkeypatch.setattr(loop, "train", lambda *a, **k: _fake_run(ctx))
    exp_capstone(ctx)
    from greenlab.course import recipes

    ladder = recipes.one_change_at_a_time(recipes.naive_recipe(quick=True), recipes.green_recipe("cpu", quick=True))
    assert [r["label"] for r in ctx.rows] == list(ladder)  # one row per change, naive first, green last
    assert ctx.rows[-1]["recipe"] == "green" and ctx.rows[-1]["joules_over_naive"] == pytest.approx(1.0)
    rows = [r for r in ctx.rows if r.get("joules") is not None]
    assert len(rows) == len(ladder)
    for row in rows:
        assert row["joules_above_idle"] == pytest.approx(120.0 - 5.0 * 4.0)
        assert row["joules_to_target_above_idle"] == pytest.approx(70.0 - 5.0 * 2.0)
    assert "gross-minus-idle" in " ".join(ctx.notes)


def test_a_dry_run_leaves_nothing_in_the_system_temp_dir(tmp_path):
    """The datasets the workers share and their temporary files (DDP's dataset copy, checkpoint
    writes) live in the run's work folder (by default a fresh one in the system's temp dir) and go
    at the end: the system's temp dir (here a private one, so other programs' files do not count)
    is left empty, and --out holds the records, the log and the summary only."""
    from minimal_env import hidden_env

    systmp = tmp_path / "systmp"
    systmp.mkdir()
    out = tmp_path / "out"
    env = {**hidden_env(tmp_path / "site"), "TMPDIR": str(systmp)}
    _wheel(tmp_path / "wheels")  # carried wheels too: installed into the cache in the work folder
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                           "--only", "ddp_scaling,operations", "--lessons", "none", "--budget-s", "120",
                           "--wheels", str(tmp_path / "wheels")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = {r["label"]: r
               for r in json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))["records"][-1]["results"]}
    assert summary["ddp_scaling"]["status"] == "ok" and summary["operations"]["status"] == "ok", summary
    wheels = summary["carried wheels"]
    assert wheels["outcome"] == "installed" and wheels["target"].startswith(str(systmp)), wheels
    assert "carried wheels: installed (gl_probe_pkg)" in proc.stdout
    assert list(systmp.iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == sorted([gs.BUNDLE, gs.LOG, "gpu_suite_summary.txt"])


def _ladder(names=("naive", "+ a", "+ b")):
    from greenlab.course import recipes
    from greenlab.training.loop import TrainConfig

    return {n: recipes.Recipe(None, TrainConfig(seed=0, label=n), {}) for n in names}


def _ladder_ctx(tmp_path, cap_s=60.0, repeats=3, floor_s=0.2):
    import dataclasses

    ctx = _idle_ctx(tmp_path, idle_w=2.0)
    ctx.cap_s = cap_s
    ctx.sizes = dataclasses.replace(ctx.sizes, ladder_repeats=repeats, ladder_floor_s=floor_s)
    return ctx


def test_a_ladder_runs_paired_rotated_repeats_with_the_naive_row_last_at_first(tmp_path):
    from benchmarks.gpu.ladders import repeats_note, run_ladder

    ctx = _ladder_ctx(tmp_path)
    calls = []
    joules = {"naive": 100.0, "+ a": 50.0, "+ b": 25.0}

    def train_one(recipe, seed, stop):
        calls.append((recipe.config.label, seed))
        return _fake_run(ctx, joules=joules[recipe.config.label], seconds=1.0,
                         to_target=(0.5, joules[recipe.config.label] / 2))

    rows = run_ladder(ctx, _ladder(), train_one, final="final_accuracy")
    assert calls == [("+ a", 0), ("+ b", 0), ("naive", 0), ("+ b", 1), ("naive", 1), ("+ a", 1),
                     ("naive", 2), ("+ a", 2), ("+ b", 2)]
    assert [r["label"] for r in rows] == ["naive", "+ a", "+ b"]
    assert [r["recipe"] for r in rows] == ["naive", "ladder", "green"]
    green = rows[-1]
    assert green["repeats"] == 3 and green["status"] == "ok" and green["reached_target"] is True
    assert green["joules"] == 25.0 and green["joules_above_idle"] == pytest.approx(25.0 - 2.0 * 1.0)
    assert (green["joules_over_naive"] == pytest.approx(0.25)
            and green["joules_to_target_over_naive"] == pytest.approx(0.25))
    assert green["final_accuracy"] == 0.8
    assert "no verdict" not in green["verdict_joules_vs_naive"]  # a paired interval: three repeats
    assert green["verdict_joules_vs_previous_row"] != green["verdict_joules_vs_naive"]
    assert "3 paired repeats" in repeats_note(rows)


def test_a_ladder_run_cut_by_its_share_says_stopped_and_leaves_the_ratios(tmp_path):
    from benchmarks.gpu.ladders import repeats_note, run_ladder

    ctx = _ladder_ctx(tmp_path, cap_s=4.0)

    def train_one(recipe, seed, stop):
        if recipe.config.label == "naive":  # the long row: runs until its share is over
            assert stop.wait(30), "the run's time share never ended it"
            return SimpleNamespace(**{**vars(_fake_run(ctx, seconds=2.0, to_target=(None, None))), "status": "stopped"})
        return _fake_run(ctx, joules=10.0, seconds=0.1)

    # the share ends the long row (train_one's wait fails if it never does); no second repeat starts
    rows = run_ladder(ctx, _ladder(), train_one, final="final_accuracy")
    naive, green = rows[0], rows[-1]
    assert naive["status"] == "stopped" and naive["repeats"] == 1
    assert green["status"] == "ok" and green["repeats"] == 1
    assert green["joules_over_naive"] is None  # a stopped run's joules are a lower bound only
    assert green["verdict_joules_vs_naive"] == "0 paired repeat(s): no verdict"
    assert repeats_note(rows) == "one repeat: no verdict."


def _wheel(folder, name="gl_probe_pkg", version="0.1"):
    """A minimal pure-Python wheel holding ``name`` (VALUE = 42)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "VALUE = 42\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in files) + f"{info}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
    return path


def test_carried_wheels_are_installed_onto_the_childrens_path_and_a_broken_one_is_recorded(tmp_path):
    from benchmarks.gpu.orchestrator import _child_env, install_wheels

    _wheel(tmp_path / "wheels")
    done = install_wheels(tmp_path / "wheels", tmp_path / "site")
    assert done["outcome"] == "installed" and done["packages"] == "gl_probe_pkg", done
    env = _child_env([tmp_path / "site"])
    proc = subprocess.run([sys.executable, "-c", "import gl_probe_pkg; print(gl_probe_pkg.VALUE)"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "42", proc.stderr[-2000:]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken-0.1-py3-none-any.whl").write_bytes(b"not a zip file")
    failed = install_wheels(tmp_path / "bad", tmp_path / "site2")
    assert failed["outcome"].startswith("failed: ") and failed["packages"] == "broken"


def test_the_wheel_folder_drops_the_optional_wheels_that_do_not_fit_the_carry_limit(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_wheels

    for name, mib in (("bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64", 41), ("torchao-0.17.0-cp310-abi3-x", 3),
                      ("simpy-4.1.2-py3-none-any", 1)):
        with open(tmp_path / f"{name}.whl", "wb") as f:
            f.truncate(mib * 2**20)
    assert gpu_wheels.wheels_mib(tmp_path) == pytest.approx(45)
    assert gpu_wheels.drop_what_does_not_fit(tmp_path, tree=5.0, limit=64) == []  # 50 MiB fit
    assert gpu_wheels.drop_what_does_not_fit(tmp_path, tree=5.0, limit=20) == [
        "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"]  # the largest goes first, torchao stays
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["simpy", "torchao"]
    assert gpu_wheels.drop_what_does_not_fit(tmp_path, tree=5.0, limit=6) == ["torchao-0.17.0-cp310-abi3-x.whl"]
    assert gpu_wheels._name(Path("typing_extensions-4.16.0-py3-none-any.whl")) in gpu_wheels.ON_THE_MACHINE
    assert gpu_wheels.tree_mib() < gpu_wheels.CARRY_LIMIT_MIB


def test_the_rehearsal_names_every_failed_experiment_and_lesson_and_nothing_else(tmp_path):
    from benchmarks import gpu_rehearsal

    rows = [{"label": "carbon", "status": "ok"}, {"label": "ddp_scaling", "status": "not selected (--only)"},
            {"label": "capstone", "status": "killed by the watchdog after 184 s"},
            {"label": "lesson 01_gradient_accumulation", "status": "passed"},
            {"label": "lesson 13_adapting_and_serving",
             "status": "failed: cell 22 (code cell 14) failed: AssertionError"},
            {"label": "total", "seconds": 149.0}]  # a row without a status is no experiment
    bundle = tmp_path / gs.BUNDLE
    bundle.write_text(json.dumps({"records": [{"experiment": gs.SUMMARY, "results": rows}]}), encoding="utf-8")
    assert gpu_rehearsal.failures(bundle) == [
        "capstone: killed by the watchdog after 184 s",
        "lesson 13_adapting_and_serving: failed: cell 22 (code cell 14) failed: AssertionError"]
    assert gpu_rehearsal.failures(tmp_path / "missing.json")[0].startswith("no bundle at")
    bundle.write_text(json.dumps({"records": []}), encoding="utf-8")
    assert gpu_rehearsal.failures(bundle) == ["the bundle has no summary record"]


# --- what --out holds: the device tool's limits ------------------------------------------------

def test_the_out_folder_check_sees_every_limit(tmp_path):
    (tmp_path / "a b").write_text("x")
    deep = tmp_path / "1" / "2" / "3"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    for i in range(8):
        (tmp_path / f"f{i}").write_text("x")
    with open(tmp_path / "big", "wb") as f:
        f.truncate(17 * 2**20)
    problems = gpu_shot.out_problems(tmp_path)
    assert {p.split()[0] for p in problems} == {"name", "too", "over", "11"}, problems


def _fake_nvidia_smi(folder: Path) -> str:
    """A PATH folder whose nvidia-smi prints a few lines for -q (and fails otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text('#!/bin/sh\n[ "$1" = "-q" ] || exit 9\necho "==============NVSMI LOG=============="\n'
                   'echo "Driver Version : 999.1"\n', encoding="utf-8")
    exe.chmod(0o755)
    return str(folder)


def test_a_dry_run_leaves_four_files_in_out_within_the_device_limits(tmp_path):
    """--out gets the records, the log, the summary and the nvidia-smi -q snapshot (a query),
    nothing else; the work folder is removed at the end."""
    from minimal_env import hidden_env

    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    (out / gs.BUNDLE).write_text("an earlier run's", encoding="utf-8")  # replaced, not kept
    env = hidden_env(tmp_path / "site")
    env["PATH"] = _fake_nvidia_smi(tmp_path / "bin") + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                           "--work", str(work), "--only", "carbon,fitting_in_memory", "--lessons", "none",
                           "--budget-s", "120"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from benchmarks.gpu.settings import OUT_FILES, SMI, SUMMARY_TEXT

    assert sorted(p.name for p in out.iterdir()) == sorted(OUT_FILES)
    assert gpu_shot.out_problems(out) == []
    assert "Driver Version : 999.1" in (out / SMI).read_text(encoding="utf-8")
    records = {r["experiment"]: r for r in json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))["records"]}
    assert set(records) == {"carbon", "fitting_in_memory", gs.SUMMARY}
    assert "cuDNN" in records["carbon"]["notes"]
    assert "gpu_suite summary" in (out / SUMMARY_TEXT).read_text(encoding="utf-8")
    assert (out / gs.LOG).read_text(encoding="utf-8") == (work / gs.LOG).read_text(encoding="utf-8")


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_dry_run_killed_midway_leaves_parseable_records_within_the_device_limits(tmp_path, sig):
    """The process group killed while an experiment runs (SIGKILL: no handler runs): --out holds
    at most the four files (and the one temporary name of a copy cut short), within every limit,
    and its records parse and hold the rows the running experiment had finished (copied every
    OUT_COPY_EVERY_S)."""
    import signal

    from minimal_env import hidden_env

    from benchmarks.gpu.settings import OUT_COPY_EVERY_S, OUT_COPY_TMP, OUT_FILES

    out, work = tmp_path / "out", tmp_path / "work"
    env = hidden_env(tmp_path / "site")
    env["PATH"] = _fake_nvidia_smi(tmp_path / "bin") + os.pathsep + env.get("PATH", "")
    proc = subprocess.Popen([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                             "--work", str(work), "--only", "carbon", "--hang", "carbon", "--lessons", "none",
                             "--budget-s", "600"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    tree = []
    try:
        deadline = time.monotonic() + 240 + OUT_COPY_EVERY_S
        rows = []
        while time.monotonic() < deadline and "before the hang" not in rows:
            time.sleep(0.5)
            try:
                bundle = json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            rows = [r["label"] for rec in bundle["records"] if rec["experiment"] == "carbon" for r in rec["results"]]
        assert "before the hang" in rows, "the running experiment's row never reached --out"
        tree = _descendants(proc.pid)
        os.killpg(proc.pid, getattr(signal, sig))
        proc.wait(timeout=60)
        assert set(p.name for p in out.iterdir()) <= set(OUT_FILES) | {OUT_COPY_TMP}
        assert len([p for p in out.iterdir() if p.name in OUT_FILES]) <= 4
        assert gpu_shot.out_problems(out) == []
        bundle = json.loads((out / gs.BUNDLE).read_text(encoding="utf-8"))  # parses
        records = {r["experiment"]: r for r in bundle["records"]}
        assert [r["label"] for r in records["carbon"]["results"]] == ["before the hang"]
        summary = {r["label"]: r for r in records[gs.SUMMARY]["results"]}
        assert summary["carbon"]["status"].startswith(("running: 1 row(s) so far", "killed", "failed"))
    finally:
        _kill_all(proc, tree)


def test_a_log_over_the_file_limit_is_copied_as_its_head_and_tail(tmp_path):
    from benchmarks.gpu.orchestrator import copy_capped

    src = tmp_path / "log"
    src.write_bytes(b"HEAD" + b"x" * 5000 + b"TAIL")
    assert copy_capped(src, tmp_path / "out", tmp_path / "tmp", max_bytes=1000)
    copied = (tmp_path / "out").read_bytes()
    assert copied.startswith(b"HEAD") and copied.endswith(b"TAIL") and len(copied) <= 1000
    assert b"bytes left out of this copy" in copied and not (tmp_path / "tmp").exists()
    assert not copy_capped(tmp_path / "missing", tmp_path / "out2", tmp_path / "tmp")


# --- counter against power: windows on ticks ---------------------------------------------------

def test_counter_vs_power_windows_align_on_ticks_and_report_their_spread():
    """A counter that updates every 50 ms reads a 1 s window up to 5 % off unless both edges wait
    for its ticks: aligned, ten windows agree within 1 % of a constant 300 W; the spread, each
    window's difference and temperature are reported."""
    from benchmarks.gpu.probes import counter_vs_power, counter_vs_power_windows

    clock = _FakeClock(0.0)
    clock.t = 0.031  # off a tick
    ticked = lambda: 300.0 * 0.05 * math.floor(clock.t / 0.05 + 1e-9)  # noqa: E731
    unaligned = counter_vs_power(ticked, lambda: 300.0, 1.02, 0.005, clock=clock, sleep=clock.sleep)
    assert abs(unaligned["difference_pct"]) > 1.0  # the quantisation the alignment removes
    temps = iter(range(40, 60))
    r = counter_vs_power_windows(ticked, lambda: 300.0, 1.0, 10, 0.005, read_temperature=lambda: next(temps),
                                 clock=clock, sleep=clock.sleep)
    assert r["windows"] == r["windows_measured"] == 10 and r["edges_on_ticks"] is True
    assert abs(r["difference_pct"]) < 1.0 and r["difference_spread_pct"] < 1.0
    assert len(r["difference_pct_each"].split(",")) == 10
    assert r["window_end_temperature_c"] == ",".join(str(t) for t in range(40, 50))
    stuck = counter_vs_power_windows(lambda: 5.0, lambda: 300.0, 0.2, 2, 0.01, clock=clock, sleep=clock.sleep)
    assert stuck["edges_on_ticks"] is False  # a counter that never ticks is said so
    with pytest.raises(ValueError):
        counter_vs_power_windows(ticked, lambda: 300.0, 1.0, 0)


def test_the_first_window_of_an_experiment_is_warmed_once_and_windows_record_temperatures(tmp_path):
    ctx = _ctx(tmp_path)
    calls = []
    ctx.warm_first(lambda n: calls.append(n), per_step=0.001)
    ctx.warm_first(lambda n: calls.append(n), per_step=0.001)
    assert len(calls) == 1 and calls[0] >= 1 and ctx.warmed_s is not None
    assert any("untimed work" in n for n in ctx.notes)
    from benchmarks.gpu.context import _window_states

    row = {}
    _window_states(row, [{"start_temperature_c": 40, "end_temperature_c": 45},
                         {"start_temperature_c": 44, "end_temperature_c": 47}])
    assert row == {"window_end_temperature_c": "45,47", "window_start_temperature_c": "40,44"}


def test_unpacking_a_fallback_after_its_first_call_replaces_records_and_only_the_rerun_stages(tmp_path):
    """The fallback reran carbon and language_model's compile stage: carbon's record is the
    fallback's; language_model keeps its own rows and the recipes' stage, the compile rows are the
    fallback's; the summary keeps every row, the rerun ones replaced."""
    from benchmarks.gpu.orchestrator import merge_bundles

    def rec(name, rows, date="2026-05-01"):
        return {"schema_version": 1, "experiment": name, "date": date, "gpu": "NVIDIA H200", "driver": "d",
                "cuda": "c", "torch": "t", "command": "python benchmarks/gpu_suite.py", "results": rows}

    def summary(rows):
        return rec(gs.SUMMARY, [{"label": k, "status": v} for k, v in rows.items()])

    first = {"bundle_version": gs.BUNDLE_VERSION, "records": [
        rec("carbon", [{"label": "carbon", "status": "failed: x"}]),
        rec("language_model", [{"label": "bf16"}, {"label": "language_model-compile", "status": "failed: y",
                                                   "stage": "language_model-compile"},
                               {"label": "naive", "stage": "language_model-recipes"}]),
        summary({"carbon": "failed: x", "language_model": "ok", "language_model-compile": "failed: y",
                 "language_model-recipes": "ok"})]}
    second = {"bundle_version": gs.BUNDLE_VERSION, "records": [
        rec("carbon", [{"label": "training window"}], date="2026-05-02"),
        rec("language_model", [{"label": "bf16 + torch.compile", "stage": "language_model-compile"}]),
        summary({"carbon": "ok", "language_model": "not selected (--only)", "language_model-compile": "ok",
                 "language_model-recipes": "not selected (--only)"})]}
    merged = {r["experiment"]: r for r in merge_bundles([first, second])}
    assert [r["label"] for r in merged["carbon"]["results"]] == ["training window"]
    assert [r["label"] for r in merged["language_model"]["results"]] == ["bf16", "naive", "bf16 + torch.compile"]
    assert "language_model-compile from a later run" in merged["language_model"]["notes"]
    status = {r["label"]: r["status"] for r in merged[gs.SUMMARY]["results"]}
    assert status == {"carbon": "ok", "language_model": "ok", "language_model-compile": "ok",
                      "language_model-recipes": "ok"}
    paths = []
    for i, bundle in enumerate((first, second)):
        paths.append(tmp_path / f"b{i}.json")
        gs.write_json(paths[-1], bundle)
    into = tmp_path / "runs"
    assert gs.main(["--unpack", *map(str, paths), "--into", str(into)]) == 0
    run = reference.load_file(into / "nvidia-h200_2026-05-02_carbon.json")
    assert run.results[0]["label"] == "training window"


def test_the_rehearsal_takes_the_first_python_312_that_runs_passing_over_a_failing_shim(tmp_path, monkeypatch):
    """A pyenv shim for an unselected version exits 127: it is passed over for the pyenv
    version's own interpreter; --python says so in its help."""
    from benchmarks import gpu_rehearsal

    def script(path, body):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
        path.chmod(0o755)
        return str(path)

    shim = script(tmp_path / "shims" / "python3.12", 'echo "pyenv: python3.12: command not found" >&2; exit 127')
    other = script(tmp_path / "bin" / "python3", 'echo "Python 3.11.7"')
    real = script(tmp_path / "home" / ".pyenv" / "versions" / "3.12.1" / "bin" / "python3.12", 'echo "Python 3.12.1"')
    script(tmp_path / "home" / ".pyenv" / "versions" / "3.12.0" / "bin" / "python3.12", 'echo "Python 3.12.0"')
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "shims"), str(tmp_path / "bin"), "/usr/bin", "/bin"]))
    candidates = gpu_rehearsal.python_candidates()
    assert candidates[:3] == [shim, other, real]  # PATH first, then pyenv's newest 3.12
    assert not gpu_rehearsal.runs_as_box_python(shim) and not gpu_rehearsal.runs_as_box_python(other)
    assert gpu_rehearsal.find_python() == real
    assert gpu_rehearsal.find_python([shim, other]) is None
    with pytest.raises(SystemExit):  # a --python that does not run is refused before anything is built
        gpu_rehearsal.main(["--python", shim, "--venv", str(tmp_path / "venv")])
    assert not (tmp_path / "venv").exists()
    proc = subprocess.run([sys.executable, "benchmarks/gpu_rehearsal.py", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "--version" in proc.stdout and "pyenv" in proc.stdout
