"""The GPU suite's rehearsal on a bare machine: ``benchmarks/gpu_suite.py --dry-run`` (every
experiment, tiny sizes, on the CPU) and one instructor lesson run headless through the suite,
with psutil, tqdm, pytest, torchvision, IPython, ipywidgets, bitsandbytes and torchao impossible
to import, as on a GPU machine that has only torch, numpy, nvidia-ml-py and matplotlib; and
every instructor lesson run headless the same way (lessons 04 and 12 saying what they could not
measure without torchvision, bitsandbytes and torchao)."""

import json
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from gpu_suite_pending import NOT_RECORDED_YET
from minimal_env import HIDDEN, ROOT, hidden_env

sys.path.insert(0, str(ROOT))

from benchmarks import gpu_suite as gs  # noqa: E402
from benchmarks.gpu.settings import PARTS, SUMMARY_TEXT  # noqa: E402
from greenlab.course import reference  # noqa: E402

LESSONS = sorted((ROOT / "lessons" / "instructor").glob("*.ipynb"))


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("minimal_env")
    out, work = tmp / "out", tmp / "work"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run",
                           "--work", str(work)],
                          cwd=ROOT, env=hidden_env(tmp / "site"), capture_output=True, text=True, timeout=900)
    bundle = json.loads((out / gs.BUNDLE).read_text(encoding="utf-8")) if (out / gs.BUNDLE).exists() else {}
    records = {r["experiment"]: r for r in bundle.get("records", [])}
    summary = {r["label"]: r for r in records.get(gs.SUMMARY, {}).get("results", [])}
    return SimpleNamespace(tmp=tmp, out=out, work=work, proc=proc, seconds=time.monotonic() - t0, bundle=bundle,
                           records=records, summary=summary)


def test_the_hidden_packages_really_cannot_be_imported(tmp_path):
    code = ("import importlib.util, sys\n"
            f"names = {list(HIDDEN)!r}\n"
            "print([n for n in names if importlib.util.find_spec(n) is not None])\n"
            "import greenlab, greenlab.training.loop, greenlab.energy, greenlab.course, greenlab.session.hardware, "
            "benchmarks.gpu_suite\n"
            "print(sorted(n for n in names if n in sys.modules))\n"
            # the parts that used psutil and tqdm work without them
            "import importlib, torch\n"
            "info = greenlab.session.hardware._cpu_info()\n"
            "print(info['logical_cores'] >= 1, info['physical_cores'] is None or info['physical_cores'] >= 1)\n"
            "t = importlib.import_module('greenlab.training.loop')\n"
            "print(type(t._progress(5, True, 'x')).__name__)\n"
            "pm = t._PeakMemory(torch.device('cpu')); block = b'x' * (64 * 2**20); pm.sample()\n"
            "print(pm.bytes() >= 32 * 2**20)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=hidden_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["[]", "[]", "True True", "NoBar", "True"]


def test_dry_run_completes_and_writes_the_bundle_and_the_log(dry_run):
    assert dry_run.proc.returncode == 0, dry_run.proc.stdout[-3000:] + dry_run.proc.stderr[-3000:]
    # --out holds the files a device tool brings back (no nvidia-smi here), the work folder the rest
    assert sorted(p.name for p in dry_run.out.iterdir()) == sorted([gs.BUNDLE, gs.LOG, SUMMARY_TEXT])
    # each experiment's rows are kept in the work folder (written as they finish)
    assert sorted(p.stem for p in (dry_run.work / PARTS).glob("*.json")) == sorted(gs.EXPERIMENTS)
    assert "gpu_suite summary" in (dry_run.out / gs.LOG).read_text(encoding="utf-8")
    print(f"dry run took {dry_run.seconds:.1f} s")


def test_every_experiment_ran_and_every_record_matches_the_reference_schema(dry_run):
    assert set(dry_run.records) == set(gs.experiment_names()) | {gs.SUMMARY}
    for name, record in dry_run.records.items():
        reference.from_dict(record, name)
        assert record["gpu"] == gs.DRY_RUN_GPU and gs.DRY_RUN_MARK in record["notes"]
        assert all(row["run"] == gs.DRY_RUN_MARK for row in record["results"])
    for name in gs.EXPERIMENTS:  # the experiments and the stages recorded inside them
        assert dry_run.summary[name]["status"] == "ok", dry_run.summary[name]
        assert not dry_run.summary[name].get("schema_problem")


def test_missing_packages_are_reported_and_pytest_is_not_run(dry_run):
    packages = dry_run.summary["python packages"]
    assert all(packages[name] == "missing" for name in HIDDEN)
    assert packages["torch"] != "missing"
    assert dry_run.summary["pytest -m gpu"]["outcome"] == "not run"
    assert "pytest is not installed" in dry_run.summary["pytest -m gpu"]["summary"]


def test_a_lesson_ran_headless_through_the_suite(dry_run):
    row = dry_run.summary["lesson 02_gradient_accumulation"]
    assert row["status"] == "passed", row
    assert "passed 02_gradient_accumulation" in (dry_run.out / gs.LOG).read_text(encoding="utf-8")


def test_serving_marks_int8_not_measured_without_torchao(dry_run):
    rows = {r["label"]: r for r in dry_run.records["language_model_serving"]["results"]}
    int8 = next(r for label, r in rows.items() if label.startswith("int8 weights"))
    assert int8["status"] == "not measured: torchao is not installed"
    assert "joules_per_generated_token" not in int8
    assert any(r.get("joules_per_generated_token") for r in rows.values())


_LESSON_RUNS: dict = {}
# Lessons run two at a time: on the 2 cores CI has, gl.setup() gives each lesson one thread, so a
# second lesson beside it uses the core the first leaves idle (as nbval's kernel, one at a time, does not)
LESSON_JOBS = 2


def _run_one_hidden(env: dict, notebook: str) -> subprocess.CompletedProcess:
    """One lesson's run; a lesson that runs past 900 s fails its own test (not every later one, which
    would each start the whole set again)."""
    cmd = [sys.executable, "-m", "greenlab.course", "run", f"lessons/instructor/{notebook}"]
    try:
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(cmd, -9, out, f"{notebook}: killed after {exc.timeout:g} s")


def _run_lesson_hidden(tmp_path, notebook: str) -> str:
    """Run every instructor lesson headless with the optional packages hidden (once per session,
    ``LESSON_JOBS`` at a time); ``notebook``'s printed output."""
    if not _LESSON_RUNS:
        from concurrent.futures import ThreadPoolExecutor

        # threads chosen as make test's nbval kernels choose them (gl.setup(), passive waiting)
        env = {**hidden_env(tmp_path), "GREENLAB_QUICK": "1"}
        env.pop("GREENLAB_DISPLAY", None)
        names = [p.name for p in LESSONS]
        with ThreadPoolExecutor(max_workers=LESSON_JOBS) as pool:
            _LESSON_RUNS.update(zip(names, pool.map(lambda name: _run_one_hidden(env, name), names)))
    proc = _LESSON_RUNS[notebook]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("notebook", [p.name for p in LESSONS])
def test_every_lesson_runs_headless_without_the_optional_packages(tmp_path, notebook):
    out = _run_lesson_hidden(tmp_path, notebook)
    assert f"passed {notebook[:-len('.ipynb')]}:" in out


def test_lesson_11_runs_without_bitsandbytes_and_torchao_and_says_what_it_did_not_measure(tmp_path):
    out = _run_lesson_hidden(tmp_path, "12_adapting_and_serving.ipynb")
    assert "bitsandbytes is not installed: 8-bit optimizer states not measured (missing)" in out
    for name in ("full", "lora"):  # no 8-bit figure is filled in
        assert re.search(name + r" +AdamW state: fp32 [0-9.]+ MB \(counted\), 8-bit not measured, "
                         r"bf16 [0-9.]+ MB \(arithmetic\)", out), out[-3000:]
    assert "torchao is not installed: int8 weights not measured (missing)" in out
    assert "int8: weights, validation loss and energy not measured (missing)" in out
    assert "not measured here (bitsandbytes is not installed)" in out
    assert "not measured here (torchao is not installed)" in out


def test_precision_rows_are_labelled_as_pytorch_defaults_and_fp16_notes_its_sync(dry_run):
    mp = dry_run.records["mixed_precision"]
    labels = [r["label"] for r in mp["results"]]
    assert labels == ["fp32 (PyTorch defaults)", "bf16 autocast", "fp16 autocast + GradScaler"]
    assert "PyTorch TF32 settings as found (not changed)" in mp["notes"]
    assert "allow_tf32" in mp["notes"]
    fp16 = mp["results"][2]
    assert "GradScaler" in fp16["includes"] and "sync" in fp16["includes"]
    for row in mp["results"]:
        assert row["status"] == "ok" and row["samples"] > 0 and row["steps"] >= 1
        assert row["window_seconds"] > 0 and isinstance(row["window_ok"], bool)
        assert row["test_accuracy_after"] is not None  # measured after the windows
    # each row says the arithmetic it used (on the CPU: IEEE fp32, or the autocast type)
    assert [r["math_mode"] for r in mp["results"]] == [
        "IEEE fp32 (CPU)", "bf16 autocast (fp32 weights and accumulation)",
        "fp16 autocast (fp32 weights and accumulation)"]
    assert "interleaved" in mp["notes"] and "gross device energy" in mp["notes"]


def test_compile_runs_in_its_own_share_and_its_row_joins_the_language_model_record(dry_run):
    assert "language_model-compile" not in dry_run.records
    rows = [r for r in dry_run.records["language_model"]["results"] if not r["label"].startswith("recipe ladder: ")]
    assert [r["label"] for r in rows] == ["fp32 (PyTorch defaults)", "bf16 autocast",
                                          "bf16 + activation checkpointing", "bf16 + torch.compile"]
    row = rows[-1]
    assert row["first_step_seconds"] > 0 and "first_step_joules_gpu_only" in row
    assert "first_step_joules_cpu" in row  # compilation is CPU work: its figure is named
    assert row["break_even_against"] == "bf16 autocast"  # the eager row measured before it
    assert "[language_model-compile] running" in (dry_run.out / gs.LOG).read_text(encoding="utf-8")


def test_energy_targets_are_not_judged_on_the_cpu_estimate(dry_run):
    target = dry_run.summary["target: " + gs.TARGETS[1][1]]
    assert target["result"].startswith("not measured")
    assert dry_run.records["mixed_precision"]["energy_source"] == "estimate"


def test_unpack_refuses_the_dry_run_and_writes_it_only_when_allowed(dry_run, tmp_path):
    bundle = dry_run.out / gs.BUNDLE
    assert gs.main(["--unpack", str(bundle), "--into", str(tmp_path / "refused")]) == 2
    assert not (tmp_path / "refused").exists()
    into = tmp_path / "runs"
    assert gs.main(["--unpack", str(bundle), "--into", str(into), "--allow-dry-run"]) == 0
    runs = reference.validate_folder(into)
    assert {r.experiment for r in runs} == set(dry_run.records)
    for names in reference.lesson_experiments(ROOT / "lessons").values():
        for name in names:  # what each lesson reads is there, unless the suite does not record it yet
            assert bool(reference.load(name, folder=into)) != (name in NOT_RECORDED_YET), name


def test_the_summary_table_is_printed_last(dry_run):
    out = dry_run.proc.stdout.rstrip().splitlines()
    start = max(i for i, line in enumerate(out) if line.startswith("gpu_suite summary"))
    assert out[-1].startswith("total ")
    tail = "\n".join(out[start:])
    for name in gs.experiment_names():
        assert name in tail
    assert "lesson 02_gradient_accumulation" in tail and "pytest -m gpu: not run" in tail


def test_lesson_05_runs_without_torchvision_and_says_so(tmp_path):
    out = _run_lesson_hidden(tmp_path, "04_architecture_search.ipynb")
    assert "not measured: torchvision is not installed" in out
    assert "mobilenet_v3_small has fewer" not in out  # nothing filled in


@pytest.mark.parametrize("experiment, prefix, final", [("capstone", "", "final_accuracy"),
                                                      ("language_model", "recipe ladder: ", "final_val_loss")])
def test_both_ladders_are_recorded_one_change_per_row(dry_run, experiment, prefix, final):
    from greenlab.course import recipes

    if experiment == "capstone":
        naive, green = recipes.naive_recipe(quick=True), recipes.green_recipe("cpu", quick=True)
    else:
        naive, green = recipes.naive_lm_recipe(quick=True), recipes.green_lm_recipe("cpu", quick=True)
    record = dry_run.records[experiment]
    rows = [r for r in record["results"] if r["label"].startswith(prefix) and "ladder_row" in r]
    assert [r["label"] for r in rows] == [prefix + n for n in recipes.one_change_at_a_time(naive, green)]
    assert rows[0]["recipe"] == "naive" and rows[-1]["recipe"] == "green"
    for row in rows:
        assert row["status"] in ("ok", "stopped"), row
        assert row["seconds"] > 0 and row["joules"] > 0 and row[final] is not None
        assert "joules_above_idle" in row and isinstance(row["reached_target"], bool)
    assert "joules_over_naive" in rows[-1] and "joules_to_target_over_naive" in rows[-1]
    assert "gross-minus-idle" in record["notes"]
    assert re.search(r"one repeat: no verdict|repeats: too few for an interval, no verdict|paired repeats",
                     record["notes"])
