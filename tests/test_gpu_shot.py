"""CPU tests of benchmarks/gpu_shot.py: the device calls it prints and the fallback it computes
from the first call's records."""

import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import gpu_shot  # noqa: E402
from benchmarks.gpu.settings import EXPERIMENTS, OVERHEAD_SECONDS, PYTEST_SECONDS, SUMMARY  # noqa: E402


def _bundle(statuses: dict, lessons: dict = None, pytest_outcome="passed") -> dict:
    rows = [{"label": n, "status": s} for n, s in statuses.items()]
    rows += [{"label": f"lesson {n}", "status": s} for n, s in (lessons or {}).items()]
    rows.append({"label": "pytest -m gpu", "outcome": pytest_outcome})
    return {"bundle_version": 1, "records": [{"experiment": "carbon", "results": []},
                                             {"experiment": SUMMARY, "results": rows}]}


def _suite_args(call: dict) -> list:
    return shlex.split(call["command"].split("benchmarks/gpu_suite.py", 1)[1])


def test_the_first_call_nests_budget_inside_the_inner_timeout_inside_the_tools_limit():
    call = gpu_shot.first_call()
    assert set(call) == {"command", "carry", "timeout_s", "kind"}
    assert call["kind"] in ("nvidia-h100-x1", "nvidia-h200") and call["carry"] == [".cache/gpu-wheels"]
    words = shlex.split(call["command"])
    assert words[:5] == ["timeout", "-s", "TERM", "-k", str(gpu_shot.KILL_AFTER_S)]
    inner = int(words[5])
    args = _suite_args(call)
    budget = float(args[args.index("--budget-s") + 1])
    assert budget < inner and inner + gpu_shot.KILL_AFTER_S <= call["timeout_s"] <= gpu_shot.TOOL_LIMIT_S
    assert 570 <= inner <= 590 and args[args.index("--out") + 1] == "$OUT"
    assert len(call["command"]) <= 2000


def test_the_fallback_reruns_only_what_did_not_finish_with_no_lessons():
    statuses = {n: "ok" for n in EXPERIMENTS}
    statuses.update({"carbon": "failed: RuntimeError: x", "compression": "killed by the watchdog after 30 s",
                     "capstone": "partial: out of time", "operations": "skipped: out of time",
                     "language_model-compile": "running: 1 row(s) so far"})
    del statuses["fitting_in_memory"]  # the run was killed before it: missing from the records
    plan = gpu_shot.fallback_plan(_bundle(statuses, {"10_language_model": "killed by the watchdog after 60 s"}))
    assert plan["only"] == ["carbon", "compression", "language_model-compile", "operations", "fitting_in_memory"]
    assert plan["left_out"] == [] and plan["lessons"] == [] and plan["pytest"] is False
    assert any(w.startswith("fitting_in_memory: missing") for w in plan["why"])
    call = gpu_shot.fallback_call(plan)
    args = _suite_args(call)
    assert args[args.index("--only") + 1] == "carbon,compression,language_model-compile,operations,fitting_in_memory"
    assert args[args.index("--lessons") + 1] == "none" and "--skip-pytest" in args
    words = shlex.split(call["command"])
    inner, budget = int(words[5]), float(args[args.index("--budget-s") + 1])
    assert budget < inner <= 160 and inner + gpu_shot.KILL_AFTER_S <= call["timeout_s"] < 200


def test_the_fallback_fits_its_budget_in_plan_order_and_says_what_it_left_out():
    plan = gpu_shot.fallback_plan(None)  # nothing came back: everything is unfinished, pytest too
    assert plan["pytest"] is True and plan["left_out"]
    shares = sum(max(8.0, EXPERIMENTS[n][1]) for n in plan["only"])
    assert shares + OVERHEAD_SECONDS + PYTEST_SECONDS <= gpu_shot.FALLBACK["budget_s"]
    assert sorted(plan["only"] + plan["left_out"]) == sorted(EXPERIMENTS)
    assert [n for n in EXPERIMENTS if n in plan["only"]] == plan["only"]  # plan order kept
    room = gpu_shot.FALLBACK["budget_s"] - OVERHEAD_SECONDS - PYTEST_SECONDS - shares
    for name in plan["left_out"]:  # each left out because it did not fit
        assert max(8.0, EXPERIMENTS[name][1]) > room


def test_when_every_experiment_finished_the_fallback_reruns_the_lessons_that_did_not_pass():
    statuses = {n: "ok" for n in EXPERIMENTS}
    statuses["ddp_scaling"] = "not selected (--only)"
    lessons = {"02_gradient_accumulation": "passed", "14_sharing_a_cluster": "not run: out of time",
               "10_language_model": "killed by the watchdog after 54 s", "06_compression": "failed: cell 3"}
    plan = gpu_shot.fallback_plan(_bundle(statuses, lessons, pytest_outcome="killed by the watchdog"))
    assert plan["only"] == [] and plan["lessons"] == ["10", "14", "06"] and plan["pytest"] is True
    args = _suite_args(gpu_shot.fallback_call(plan))
    assert args[args.index("--only") + 1] == "none" and args[args.index("--lessons") + 1] == "10,14,06"
    assert "--skip-pytest" not in args
    done = gpu_shot.fallback_plan(_bundle({n: "ok" for n in EXPERIMENTS}, {"03_x": "passed"}))
    assert gpu_shot.fallback_call(done) is None


def test_the_fallback_is_printed_from_a_records_file(tmp_path, capsys):
    path = tmp_path / "gpu_suite_records.json"
    path.write_text(json.dumps(_bundle({**{n: "ok" for n in EXPERIMENTS}, "carbon": "failed: x"})), encoding="utf-8")
    assert gpu_shot.main(["--fallback-from", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not finished: carbon: failed: x" in out
    call = json.loads(out.strip().splitlines()[-1])
    assert "--only carbon --lessons none --skip-pytest" in call["command"]
    assert gpu_shot.main(["--fallback-from", str(tmp_path / "missing.json")]) == 0
    assert "no readable records" in capsys.readouterr().out
