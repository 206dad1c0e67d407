#!/usr/bin/env python
"""The GPU shot: the exact device-tool calls that run ``benchmarks/gpu_suite.py`` on a lent GPU
machine, a first call and its prepared fallback.

    python benchmarks/gpu_shot.py                                  # the first call
    python benchmarks/gpu_shot.py --fallback-from FIRST/gpu_suite_records.json   # the fallback call
    python benchmarks/gpu_shot.py --rehearse [--lessons none] [--only NAME,...]  # both, as CPU dry runs

A device tool runs one command of at most ``TOOL_LIMIT_S`` seconds in the repository root, with
``carry`` (the wheels of ``benchmarks/gpu_wheels.py``) beside the working tree, and brings back a
few small files from ``$OUT``; a session has about 15 minutes of device time, the machine's start
included, and the machine stays warm only a short while after a call. So:

- the first call: the whole suite, ``--budget-s`` ``FIRST["budget_s"]`` inside an inner
  ``timeout`` of ``FIRST["timeout_s"]`` s (SIGTERM: the suite ends its workers and writes its
  records; SIGKILL ``KILL_AFTER_S`` s later), under the tool's own limit of ``FIRST["tool_s"]`` s;
- the fallback, ready before the first call returns: about 150 s that rerun only what the first
  did not finish. ``--fallback-from`` reads the first call's records and prints the call with
  ``--only`` the experiments that failed, were killed, skipped or never started (those that
  fit, in plan order), ``--lessons none``; when every experiment finished it reruns the lessons
  that did not pass instead (``--only none``); pytest only when the first run's did not finish.
  Make that call while the machine is still warm, after copying the first call's files aside
  (a later call replaces them).

Back on a development machine, ``gpu_suite.py --unpack FIRST/gpu_suite_records.json
SECOND/gpu_suite_records.json`` writes the reference runs, the fallback's records over the
first's (an experiment whose stages alone were rerun keeps its other rows).

``--rehearse`` runs both commands as CPU dry runs (``--dry-run`` added, ``$OUT`` a temporary
folder), checks each ``$OUT`` against the tool's limits on what comes back, and prints the
fallback it computed from the first's records.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.gpu.settings import (  # noqa: E402  (constants only: no torch, so this runs in a second)
    BUNDLE, EXPERIMENTS, LESSON_JOBS, LESSON_PRIORITY, MIN_SHARE_S, OUT_FILES, OVERHEAD_SECONDS, PYTEST_SECONDS,
    SUMMARY)

KIND = "nvidia-h100-x1"  # one H100 (about 78 GiB): the suite's sizes fit; an H200 serves as well
CARRY = [".cache/gpu-wheels"]
TOOL_LIMIT_S = 600  # the device tool's limit on one command
KILL_AFTER_S = 10  # the inner timeout's SIGKILL, this long after its SIGTERM
FIRST = {"budget_s": 540, "timeout_s": 580, "tool_s": 600}
FALLBACK = {"budget_s": 120, "timeout_s": 150, "tool_s": 170}
# what comes back from $OUT: at most 8 files, 16 MiB each, 64 MiB in all, 2 folders down, plain names
OUT_LIMITS = {"files": 8, "file_bytes": 16 * 2**20, "total_bytes": 64 * 2**20, "depth": 2}
DONE = ("ok", "partial")  # an experiment whose status starts so is not rerun (a partial one kept its rows)


def suite_args(budget_s: float, only=None, lessons=None, skip_pytest: bool = False) -> list:
    """The suite's arguments for one call ($OUT is the device tool's output folder)."""
    args = ["--out", "$OUT", "--budget-s", f"{budget_s:g}"]
    if only is not None:
        args += ["--only", ",".join(only) if only else "none"]
    if lessons is not None:
        args += ["--lessons", ",".join(lessons) if lessons else "none"]
    if skip_pytest:
        args.append("--skip-pytest")
    return args


def device_call(args: list, plan: dict) -> dict:
    """The device tool's call: the command (an inner timeout below the tool's limit), carry,
    timeout_s and kind."""
    suite = " ".join('"$OUT"' if a == "$OUT" else shlex.quote(a) for a in args)
    command = (f"timeout -s TERM -k {KILL_AFTER_S} {plan['timeout_s']} env PYTHONUNBUFFERED=1 "
               f"python3 benchmarks/gpu_suite.py {suite}")
    return {"command": command, "carry": list(CARRY), "timeout_s": plan["tool_s"], "kind": KIND}


def first_call() -> dict:
    return device_call(suite_args(FIRST["budget_s"]), FIRST)


def fallback_plan(bundle, budget_s: float = FALLBACK["budget_s"]) -> dict:
    """What the fallback reruns, from the first call's bundle (a parsed gpu_suite_records.json,
    or None when none came back): ``only`` (experiments in plan order that did not finish, as
    many as fit ``budget_s`` at their planned shares), ``left_out`` (those that did not fit),
    ``lessons`` (when no experiment needs a rerun: those that did not pass, at most
    ``LESSON_JOBS``), ``pytest`` (whether to rerun it) and ``why`` (one line per choice)."""
    summary = None
    if isinstance(bundle, dict):
        summary = next((r for r in bundle.get("records") or [] if r.get("experiment") == SUMMARY), None)
    rows = {str(r.get("label")): r for r in (summary or {}).get("results") or []}
    why = [] if summary else ["no summary record came back: every experiment counts as not finished"]
    redo = []
    for name in EXPERIMENTS:
        status = str(rows[name].get("status", "")) if name in rows else "missing from the records"
        if status.startswith("not selected"):
            continue
        if not status.startswith(DONE):
            redo.append(name)
            why.append(f"{name}: {status}")
    pytest_row = rows.get("pytest -m gpu") or {}
    outcome = str(pytest_row.get("outcome", "missing"))
    pytest = outcome in ("missing", "not run yet", "killed by the watchdog") or \
        (outcome == "not run" and pytest_row.get("summary") == "out of time")
    left = budget_s - OVERHEAD_SECONDS - (PYTEST_SECONDS if pytest else 0)
    only, left_out = [], []
    for name in redo:
        share = max(MIN_SHARE_S, EXPERIMENTS[name][1])
        if share <= left:
            only.append(name)
            left -= share
        else:
            left_out.append(name)
    lessons = []
    if not redo:  # the lessons that did not pass, in the suite's start order, as many as run at once
        rank = {n: i for i, n in enumerate(LESSON_PRIORITY)}
        unfinished = [(label, r) for label, r in rows.items()
                      if label.startswith("lesson ") and r.get("status") != "passed"]
        unfinished.sort(key=lambda item: rank.get(item[0].split()[1][:2], len(rank)))
        lessons = [label.split()[1][:2] for label, _r in unfinished][:LESSON_JOBS]
        why += [f"{label}: {r.get('status')}" for label, r in unfinished]
    if pytest:
        why.append(f"pytest -m gpu: {outcome}")
    return {"only": only, "left_out": left_out, "lessons": lessons, "pytest": pytest, "why": why}


def fallback_call(plan: dict) -> dict | None:
    """The fallback's device call for ``fallback_plan``'s answer; None when nothing is left to rerun."""
    if not (plan["only"] or plan["lessons"] or plan["pytest"]):
        return None
    args = suite_args(FALLBACK["budget_s"], only=plan["only"], lessons=plan["lessons"], skip_pytest=not plan["pytest"])
    return device_call(args, FALLBACK)


def show(title: str, call: dict) -> None:
    print(f"{title}: the device tool's run with")
    print(json.dumps(call, ensure_ascii=False))


def out_problems(out: Path) -> list:
    """Every way ``out`` breaks the device tool's limits on what comes back (empty: none)."""
    problems, files = [], []
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if not re.fullmatch(r"[A-Za-z0-9._-]+", path.name):
            problems.append(f"name {rel}")
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            problems.append(f"not a plain file {rel}")
        elif path.is_file():
            files.append(path)
            if len(rel.parts) - 1 > OUT_LIMITS["depth"]:
                problems.append(f"too deep {rel}")
            if path.stat().st_size > OUT_LIMITS["file_bytes"]:
                problems.append(f"over 16 MiB {rel}")
    if len(files) > OUT_LIMITS["files"]:
        problems.append(f"{len(files)} files")
    if sum(f.stat().st_size for f in files) > OUT_LIMITS["total_bytes"]:
        problems.append("over 64 MiB in all")
    return problems


def rehearse(call: dict, out: Path, extra: list) -> int:
    """Run ``call``'s suite command as a CPU dry run with ``$OUT`` = ``out`` (plus ``extra``
    arguments, which override the call's); returns its exit code."""
    args = shlex.split(call["command"].split("benchmarks/gpu_suite.py", 1)[1].replace('"$OUT"', str(out)))
    for flag in {a for a in extra if a.startswith("--")}:  # an override replaces the call's value
        if flag in args:
            i = args.index(flag)
            del args[i:i + (1 if flag == "--skip-pytest" else 2)]
    cmd = [sys.executable, str(REPO_ROOT / "benchmarks" / "gpu_suite.py"), *args, *extra, "--dry-run"]
    print("$", shlex.join(cmd), flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env).returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_shot.py", description=__doc__.splitlines()[0])
    p.add_argument("--fallback-from", metavar="RECORDS",
                   help=f"the first call's {BUNDLE}: print the fallback call that reruns what it did not finish")
    p.add_argument("--rehearse", action="store_true", help="run the first call and its fallback as CPU dry runs")
    p.add_argument("--lessons", default=None, help="with --rehearse: the first run's --lessons (e.g. none or 03)")
    p.add_argument("--only", default=None, help="with --rehearse: the first run's --only")
    args = p.parse_args(argv)
    wheels = REPO_ROOT / CARRY[0]
    if args.fallback_from:
        path = Path(args.fallback_from)
        try:
            bundle = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"{path}: no readable records ({type(exc).__name__}); the fallback reruns what fits")
            bundle = None
        return _print_fallback(fallback_plan(bundle))
    if not args.rehearse:
        if not any(wheels.glob("*.whl")):
            print(f"note: {CARRY[0]} holds no wheels: run benchmarks/gpu_wheels.py first (lessons 12 and 14 "
                  "then run without bitsandbytes, torchao, simpy and Optuna)")
        show("first call", first_call())
        print(f"Then, while the machine is still warm: copy the files it returns aside, and run\n"
              f"  python benchmarks/gpu_shot.py --fallback-from <its files>/{BUNDLE}\n"
              f"for the fallback call (about {FALLBACK['timeout_s']} s).")
        return 0
    with tempfile.TemporaryDirectory(prefix="gpu_shot_rehearsal-") as tmp:
        first_out, second_out = Path(tmp) / "out1", Path(tmp) / "out2"
        extra = (["--lessons", args.lessons] if args.lessons else []) + (["--only", args.only] if args.only else [])
        code = rehearse(first_call(), first_out, extra)
        problems = out_problems(first_out)
        print(f"first call (dry run): exit {code}; $OUT holds {sorted(q.name for q in first_out.iterdir())}; "
              f"limits: {'; '.join(problems) or 'all kept'}")
        records = first_out / BUNDLE
        plan = fallback_plan(json.loads(records.read_text(encoding="utf-8")) if records.exists() else None)
        _print_fallback(plan)
        call = fallback_call(plan)
        if call is None:  # the rehearsal still runs the fallback's form, with the shortest experiment
            plan = {**plan, "only": ["fitting_in_memory"]}
            call = fallback_call(plan)
            print("(nothing to rerun: the fallback is rehearsed with --only fitting_in_memory)")
        code2 = rehearse(call, second_out, [])
        problems2 = out_problems(second_out)
        print(f"fallback (dry run): exit {code2}; $OUT holds {sorted(q.name for q in second_out.iterdir())}; "
              f"limits: {'; '.join(problems2) or 'all kept'}")
        bad = code or code2 or problems or problems2 or not set(OUT_FILES) >= {q.name for q in first_out.iterdir()}
        return 1 if bad else 0


def _print_fallback(plan: dict) -> int:
    for line in plan["why"]:
        print(f"  not finished: {line}")
    if plan["left_out"]:
        print(f"  left out (no room in {FALLBACK['budget_s']} s): {', '.join(plan['left_out'])}")
    call = fallback_call(plan)
    if call is None:
        print("fallback: nothing to rerun")
        return 0
    show("fallback call", call)
    return 0


if __name__ == "__main__":
    sys.exit(main())
