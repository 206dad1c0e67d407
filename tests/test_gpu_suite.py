"""CPU tests of benchmarks/gpu_suite.py: no-GPU behaviour, read-only audit, measurement helpers,
and a full dry run whose files must match greenlab.reference's schema."""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_suite as gs  # noqa: E402
from greenlab import reference  # noqa: E402

AUDITED = [ROOT / "benchmarks" / "gpu_suite.py", ROOT / "greenlab" / "recipes.py",
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
        "import benchmarks.gpu_suite as gs, greenlab.recipes\n"
        "import greenlab, greenlab.train, greenlab.energy, greenlab.reference\n")
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


def test_percentile_judge_and_budget():
    assert gs.percentile([], 90) is None
    assert gs.percentile([10, 20, 30, 40, 50], 50) == 30
    assert gs.percentile([0, 100], 90) == pytest.approx(90)
    assert gs.judge(2.3, ">=", 2.0) == "pass"
    assert gs.judge(0.5, "<", 1.0) == "pass"
    assert gs.judge(1.5, "<", 1.0) == "fail"
    assert gs.judge(None, "<", 1.0) == "not measured"
    budget = gs.Budget(0.05, deadline=time.monotonic() + 100)
    with budget.watch() as stop:
        assert isinstance(stop, threading.Event)
        assert stop.wait(2.0)
    assert budget.expired() and budget.ran_out
    # the global deadline wins over a longer experiment cap
    assert gs.Budget(60, deadline=time.monotonic() + 1).seconds <= 1.0


def test_write_json_stores_non_finite_numbers_as_null(tmp_path):
    path = tmp_path / "x.json"
    gs.write_json(path, {"a": float("nan"), "b": [1.0, float("inf")], "c": "—"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": None, "b": [1.0, None], "c": "—"}


def test_recipes_return_model_fn_config_and_data_spec():
    from greenlab import recipes
    from greenlab.train import TrainConfig

    naive = recipes.naive_recipe()
    green = recipes.green_recipe(device="cpu")
    for model_fn, cfg, spec in (naive, green):
        assert callable(model_fn) and isinstance(cfg, TrainConfig)
        assert cfg.target_accuracy == recipes.CAPSTONE_TARGET_ACCURACY
        assert set(spec) == {"name", "n_train", "n_test"}
    assert naive[1].precision == "fp32" and naive[1].loader == "dataloader" and not naive[1].stop_at_target
    assert green[1].loader == "device" and green[1].stop_at_target
    assert green[1].precision == "fp32"  # on the CPU; bf16 only on a CUDA GPU that supports it
    assert recipes.green_recipe(device="cpu", n_train=500)[2]["n_train"] == 500
    with pytest.raises(ValueError, match="device"):
        recipes.green_recipe(device="tpu")


# --- the dry run ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_suite_dry")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    return SimpleNamespace(out=out, proc=proc, seconds=time.monotonic() - t0)


def test_dry_run_writes_at_most_8_valid_reference_files(dry_run):
    assert dry_run.proc.returncode == 0, dry_run.proc.stdout[-3000:] + dry_run.proc.stderr[-3000:]
    files = sorted(dry_run.out.iterdir())
    assert 1 <= len(files) <= 8
    names = {reference.load_file(p).experiment for p in files}  # validates name + schema
    assert names == set(gs.EXPERIMENTS) | {gs.SUMMARY}
    assert not [p for p in files if p.suffix != ".json"]


def test_every_dry_run_record_and_row_says_it_is_not_a_reference(dry_run):
    for path in dry_run.out.iterdir():
        run = reference.load_file(path)
        assert run.gpu == gs.DRY_RUN_GPU
        assert path.name.startswith(reference.gpu_slug(gs.DRY_RUN_GPU) + "_")
        assert gs.DRY_RUN_MARK in run.notes
        assert all(row["run"] == gs.DRY_RUN_MARK for row in run.results)


def test_dry_run_exercised_every_experiment_and_recorded_pytest(dry_run):
    summary = [reference.load_file(p) for p in dry_run.out.iterdir()
               if reference.load_file(p).experiment == gs.SUMMARY][0]
    rows = {r["label"]: r for r in summary.results}
    for name in gs.EXPERIMENTS:
        assert rows[name]["status"] in ("ok", "partial: time cap reached"), rows[name]
    assert rows["pytest -m gpu"]["exit_code"] == 0  # every GPU test is skipped on the CPU
    assert "skipped" in rows["pytest -m gpu"]["summary"]
    targets = [r for r in summary.results if r["label"].startswith("target: ")]
    assert len(targets) == len(gs.TARGETS)
    assert all(r["result"] in ("pass", "fail", "not measured") for r in targets)
    precision = [reference.load_file(p) for p in dry_run.out.iterdir()
                 if reference.load_file(p).experiment == "mixed_precision"][0]
    labels = [r["label"] for r in precision.results]
    assert labels == ["fp32 TF32 off", "fp32 TF32 on", "bf16", "fp16"]
    assert all(r["samples"] and r["joules"] is not None for r in precision.results)
    assert precision.energy_source == "estimate"


def test_dry_run_prints_the_summary_table_last(dry_run):
    out = dry_run.proc.stdout.rstrip().splitlines()
    start = max(i for i, line in enumerate(out) if line.startswith("gpu_suite summary"))
    assert out[-1].startswith("total ")
    tail = "\n".join(out[start:])
    for name in gs.EXPERIMENTS:
        assert name in tail
    assert "pytest -m gpu" in tail
    print(f"dry run took {dry_run.seconds:.1f} s")
