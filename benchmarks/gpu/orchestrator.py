"""The orchestrator: provenance, the time plan, one watched subprocess per experiment and lesson,
the GPU-only pytest run, the bundle of records and ``--unpack``."""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import math
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.gpu.probes import gpu_state
from benchmarks.gpu.records import _clean_row, _read_json, _units_for, write_json
from benchmarks.gpu.settings import (
    BUNDLE, BUNDLE_VERSION, CACHE, DEFAULT_BUDGET_S, DRY_RUN_GPU, DRY_RUN_MARK, DRY_SIZES, ENERGY_TARGETS,
    EXIT_NO_GPU, EXIT_OK, EXPERIMENTS, GPU_SIZES, LESSON_JOBS, LESSON_PRIORITY, LESSON_SHARES_S, LESSONS_SECONDS,
    LOG, MAX_MIN_WINDOW_S, MERGED_INTO, MIN_SHARE_S, MIN_WINDOW_PERIODS, MIN_WINDOW_S, OUT_COPY_EVERY_S,
    OUT_COPY_TMP, OUT_FILE_MAX_BYTES, OUT_FILES, OVERHEAD_SECONDS, PARTS, PYTEST_SECONDS, REPO_ROOT, SMI, SUMMARY,
    SUMMARY_TEXT, TARGETS, WATCHDOG_GRACE_S, WATCHDOG_KILL_GRACE_S)
from benchmarks.gpu.worker import worker_main
from greenlab.base.processes import PARENT_ENV, kill_groups

SUITE_SCRIPT = REPO_ROOT / "benchmarks" / "gpu_suite.py"  # the documented command; workers run it too
DEFAULT_WHEELS = REPO_ROOT / ".cache" / "gpu-wheels"  # benchmarks/gpu_wheels.py fills it; carried to the GPU machine


def main(argv=None) -> int:
    """Command-line entry point; returns the exit code."""
    args = _parse_args(argv)
    if args.unpack:
        return unpack(args.unpack, args.into, allow_dry_run=args.allow_dry_run)
    if args.worker:
        return worker_main(args)
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("no GPU: nothing to check (torch.cuda.is_available() is False). Nothing was written. "
              "Run with --dry-run to exercise every experiment on the CPU with tiny sizes.")
        return EXIT_NO_GPU
    Suite(args).run()
    return EXIT_OK


class Suite:
    """One call: provenance, the time plan, one watched subprocess per experiment and lesson."""

    def __init__(self, args):
        import torch

        self.t_start = time.monotonic()
        self.args = args
        self.torch = torch
        self.dry_run = bool(args.dry_run)
        self.sizes = DRY_SIZES if self.dry_run else GPU_SIZES
        self.out = Path(args.out)
        self.date = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
        self.command = "python benchmarks/gpu_suite.py " + shlex.join(args.raw)
        self.budget_s = float(args.budget_s)
        self.deadline = self.t_start + self.budget_s
        self.selected = [n for n in EXPERIMENTS if not args.only or n in args.only]
        self.lessons = select_lessons(args.lessons, self.dry_run)
        self.shares, self.lesson_s, self.pytest_s = plan_shares(
            self.selected, bool(self.lessons), not args.skip_pytest, self.budget_s, self.dry_run)
        self.records: dict = {}
        self.raw: dict = {}  # experiment or stage -> what its worker wrote
        self.results: dict = {}
        self.lesson_rows: list = []
        self.measured: dict = {}
        self.measured_sources: dict = {}
        self.pytest: dict | None = None
        # the run's own folder: --out gets copies of OUT_FILES only (see publish)
        self.own_work = not args.work
        self.work = Path(args.work) if args.work else None  # default: made in run(), removed at the end
        self.parts = self.cache = None
        self.children: set = set()  # running subprocesses (each leads its own process group)
        self.paths: list = []  # folders on every child's PYTHONPATH (the carried wheels, once installed)
        self.wheels = None  # what installing the carried wheels did (None: no folder of wheels)
        self._bundle_lock = threading.RLock()  # records, results and the bundle: main, lesson and copy threads
        self.running: list = []  # experiments of the worker running now (their rows are copied as they come)
        self.log = None
        self._say_lock = threading.Lock()
        self._publish_lock = threading.Lock()
        self._stop_copies = threading.Event()

    def run(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for name in OUT_FILES + (OUT_COPY_TMP,):  # an earlier run's files in --out are not this run's
            (self.out / name).unlink(missing_ok=True)
        if self.work is None:
            self.work = Path(tempfile.mkdtemp(prefix="gpu_suite_work-"))
        self.work.mkdir(parents=True, exist_ok=True)
        self.parts = self.work / PARTS  # each experiment's rows as they finish
        self.cache = self.work / CACHE  # shared datasets and the workers' temp files: removed at the end
        self.parts.mkdir(exist_ok=True)
        shutil.rmtree(self.cache, ignore_errors=True)  # what a run killed outright left in this folder
        self.cache.mkdir()
        self.log = open(self.work / LOG, "w", encoding="utf-8")
        copier = threading.Thread(target=self._copy_loop, name="gpu-suite-out", daemon=True)
        copier.start()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._run()
        except SystemExit as exc:  # a signal: children ended, what finished is written
            self.say(f"gpu_suite: stopped by a signal (exit code {exc.code}); the records so far are written")
            self._write_bundle_safely()
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            kill_groups(list(self.children), grace_s=2.0)
            self._stop_copies.set()
            copier.join(timeout=10)
            self.log.close()
            self.publish(BUNDLE, LOG, SUMMARY_TEXT)
            shutil.rmtree(self.cache, ignore_errors=True)
            if self.own_work:
                shutil.rmtree(self.work, ignore_errors=True)

    # --- the files in --out ---
    def publish(self, *names: str) -> None:
        """Copy ``names`` from the work folder into --out, each through one temporary name and an
        atomic rename (a reader, or a run killed mid-copy, sees the old or the new file whole); a
        file over ``OUT_FILE_MAX_BYTES`` is copied as its head and tail. Never raises."""
        with self._publish_lock:
            for name in names:
                try:
                    copy_capped(self.work / name, self.out / name, self.out / OUT_COPY_TMP)
                except OSError as exc:  # a full disk must not end the run: said in the log
                    self.say(f"WARNING {name} could not be copied to {self.out}: {exc}")

    def _copy_loop(self) -> None:
        """Every ``OUT_COPY_EVERY_S``: the rows a running worker has finished into the records,
        and the log, into --out (the records also go there whenever they are written)."""
        while not self._stop_copies.wait(OUT_COPY_EVERY_S):
            try:
                self.refresh_running()
            except Exception as exc:  # the copies must go on: said in the log
                self.say(f"WARNING the running experiments' rows could not be copied: {type(exc).__name__}: {exc}")
            self.publish(LOG)

    def refresh_running(self) -> None:
        """Record the rows the running worker's experiments have finished so far (status
        "running: N row(s) so far"), so a run killed outright still returns them."""
        with self._bundle_lock:
            fresh = False
            for name in list(self.running):
                data = _read_json(self.parts / f"{name}.json")
                if not data or not data.get("rows"):
                    continue
                self.results[name] = {"status": f"running: {len(data['rows'])} row(s) so far",
                                      "seconds": data.get("seconds") or 0.0}
                self.record(name, data)
                fresh = True
            if fresh:
                self.write_bundle()

    def snapshot_nvidia_smi(self) -> None:
        """``nvidia-smi -q`` (a query: it changes nothing) into --out, where nvidia-smi exists."""
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return
        try:
            proc = subprocess.run([exe, "-q"], capture_output=True, text=True, errors="replace", timeout=30)
            text = proc.stdout + (f"\n[exit code {proc.returncode}] {proc.stderr}" if proc.returncode else "")
        except (OSError, subprocess.SubprocessError) as exc:
            text = f"nvidia-smi -q failed: {type(exc).__name__}: {exc}\n"
        (self.work / SMI).write_text(text, encoding="utf-8")
        self.publish(SMI)

    def _on_signal(self, signum, _frame) -> None:
        """SIGTERM/SIGINT: end every running child's process group, then stop (exit 128 + signal)."""
        signal.signal(signum, signal.SIG_IGN)  # a second one while the children end is not fatal
        kill_groups(list(self.children), grace_s=2.0)
        raise SystemExit(128 + signum)

    def _write_bundle_safely(self) -> None:
        try:
            self.write_bundle()
        except Exception as exc:  # the summary must not hide why the run stopped
            self.say(f"WARNING the bundle could not be written: {type(exc).__name__}: {exc}")

    def _run(self) -> None:
        self.say(f"gpu_suite: working in {self.work}; {', '.join(OUT_FILES)} are copied to {self.out}")
        self.install_wheels()
        self.snapshot_nvidia_smi()
        self.gpu_state = gpu_state(self.dry_run)
        self.provenance = self._provenance()
        self.counter_period_ms = self.gpu_state.get("counter_update_period_ms")
        self.min_window_s, self.min_window_capped = shortest_window_s(
            self.sizes.min_window_s, None if self.dry_run else self.counter_period_ms)
        self.say(f"gpu_suite: {self.provenance['gpu']} | driver {self.provenance['driver']} | "
                 f"CUDA {self.provenance['cuda']} | cuDNN {self.provenance['cudnn']} | "
                 f"torch {self.provenance['torch']} | "
                 f"{'DRY RUN on the CPU' if self.dry_run else 'GPU run'} | budget {self.budget_s:.0f} s | "
                 f"shortest energy window {self.min_window_s:.2f} s"
                 + (f" (capped at {MAX_MIN_WINDOW_S:g} s: the counter's idle period was "
                    f"{self.counter_period_ms:.0f} ms)" if self.min_window_capped else ""))
        self.say("packages: " + ", ".join(f"{k} {v}" for k, v in preflight().items()))
        self.write_bundle()  # the provenance and the plan in --out before the first experiment
        reserve = self.lesson_s + self.pytest_s + OVERHEAD_SECONDS / 2
        if self.dry_run:  # one worker process for all: the rehearsal checks code paths, not timing
            scale = 4 * self.budget_s / DEFAULT_BUDGET_S
            self.run_experiments(self.selected, {n: self.shares[n] * scale for n in self.selected})
        for i, name in enumerate(self.selected if not self.dry_run else ()):
            rest = sum(self.shares[n] for n in self.selected[i + 1:])
            left = self.deadline - time.monotonic() - reserve - rest
            cap = min(self.shares[name] + max(0.0, left - self.shares[name]) * 0.5, left)
            self.run_experiments([name], {name: cap})
        if self.lessons:
            self.run_lessons()
        self.pytest = self.run_pytest()
        self.write_bundle()
        self.say(self.summary_table())

    # --- logging ---
    def say(self, text: str) -> None:
        with self._say_lock:  # lessons run in parallel threads
            print(text, flush=True)
            if self.log is not None:
                self.log.write(text + "\n")
                self.log.flush()

    def stream(self, cmd: list, env: dict, timeout_s: float, prefix: str) -> tuple:
        """Run ``cmd`` in its own process group, its output into the log; kill the group after
        ``timeout_s``. Returns (exit code or None when killed, seconds, last output lines)."""
        t0 = time.monotonic()
        env = {**env, PARENT_ENV: str(os.getpid())}  # the child dies with this process (see die_with_parent)
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True)
        self.children.add(proc)
        tail: list = []

        def pump():
            for line in proc.stdout:
                line = line.rstrip("\n")
                tail.append(line)
                del tail[:-40]
                self.say(prefix + line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_groups([proc], grace_s=WATCHDOG_KILL_GRACE_S)  # also what the leader left behind
            self.children.discard(proc)
        reader.join(timeout=5)
        return code, time.monotonic() - t0, tail

    # --- carried wheels ---
    def install_wheels(self) -> None:
        """Install the wheels of ``--wheels`` (on a GPU run, ``.cache/gpu-wheels`` when it holds
        any) into the cache in the work folder, put that folder on every child's path and this
        process's (after its own packages); a failure is recorded and the run goes on."""
        folder = self.args.wheels or (None if self.dry_run else str(DEFAULT_WHEELS))
        if not folder or not sorted(Path(folder).glob("*.whl")):
            if self.args.wheels:
                self.wheels = {"outcome": f"not installed: no wheels in {folder}"}
                self.say(f"carried wheels: {self.wheels['outcome']}")
            return
        self.wheels = install_wheels(Path(folder), self.cache / "site")
        self.say(f"carried wheels: {self.wheels['outcome']} ({self.wheels.get('packages', '')}) "
                 f"in {self.wheels['seconds']:.1f} s")
        if self.wheels["outcome"] == "installed":
            self.paths.append(self.cache / "site")
            sys.path.append(str(self.cache / "site"))
            importlib.invalidate_caches()

    # --- experiments ---
    def run_experiments(self, names: list, caps: dict) -> None:
        """Run ``names`` in one watched worker process (each with its time share in ``caps``);
        a worker past the sum of the shares plus a grace period is killed, keeping finished rows."""
        names = [n for n in names if caps[n] >= MIN_SHARE_S or self.dry_run]
        for name in [n for n in caps if n not in names]:
            self.results[name] = {"status": "skipped: out of time", "seconds": 0.0}
            self.record(name, {"rows": [{"label": name, "status": "skipped: out of time"}], "notes": []})
            self.say(f"[{name}] skipped: out of time")
        tries = 0
        for attempt in (1, 2):  # what a killed worker had not started gets one more worker, no more
            if not names:
                return
            if attempt == 2 and not self.dry_run and time.monotonic() + min(caps[n] for n in names) > self.deadline:
                break
            names = self._run_worker(names, caps, retry=attempt == 2)
            tries = attempt
        for name in names:
            status = (f"failed: not started; {tries} worker(s) ended before it began"
                      + ("" if tries == 2 else " and no time was left for another"))
            self.results[name] = {"status": status, "seconds": 0.0}
            self.record(name, {"rows": [{"label": name, "status": status}], "notes": []})
            self.say(f"[{name}] {status}")
        if names:
            self.write_bundle()

    def _run_worker(self, names: list, caps: dict, retry: bool = False) -> list:
        """One watched worker for ``names``; returns those it did not start (each experiment
        writes a "running" part file as it starts)."""
        cap_s = sum(caps[n] for n in names)
        grace = min(WATCHDOG_GRACE_S, max(2.0, 0.25 * cap_s))
        cmd = [sys.executable, str(SUITE_SCRIPT), "--worker", ",".join(names),
               "--part", str(self.parts), "--cap-s", ",".join(f"{caps[n]:.1f}" for n in names),
               "--min-window-s", f"{self.min_window_s:.3f}", "--cache", str(self.cache),
               "--out", str(self.work)] + (["--dry-run"] if self.dry_run else []) \
            + (["--idle-w", f"{self.measured['idle_watts']:.3f}"] if self.measured.get("idle_watts") else []) \
            + (["--hang", self.args.hang] if self.args.hang else []) \
            + (["--hang-start", self.args.hang_start] if self.args.hang_start else [])
        tag = names[0] if len(names) == 1 else "experiments"
        for name in names:  # a part file left by an earlier call to this folder is not this run's
            (self.parts / f"{name}.json").unlink(missing_ok=True)
        self.say(f"[{tag}] {'retry' if retry else 'start'} (share {cap_s:.0f} s, watchdog at {cap_s + grace:.0f} s)")
        self.running = list(names)
        try:
            code, seconds, tail = self.stream(cmd, _child_env(self.paths), cap_s + grace, f"  {tag}| ")
        finally:
            with self._bundle_lock:
                self.running = []
        with self._bundle_lock:
            return self._collect(names, code, seconds, tail)

    def _collect(self, names: list, code, seconds: float, tail: list) -> list:
        """Record what a worker for ``names`` left (exit ``code``, ``seconds``, its last lines);
        returns the experiments it did not start."""
        not_started = [n for n in names if not (self.parts / f"{n}.json").exists()] if code != 0 else []
        for name in [n for n in names if n not in not_started]:
            data = _read_json(self.parts / f"{name}.json") or {"rows": [], "notes": [], "measured": {}}
            status = data.get("status")
            if code is None and status in (None, "running"):
                status = (f"killed by the watchdog after {seconds:.0f} s"
                          + (f"; {len(data['rows'])} finished row(s) kept" if data.get("rows") else ""))
            elif code != 0 and status in (None, "running"):
                last = next((ln for ln in reversed(tail) if ln.strip()), "")
                status = f"failed: exit code {code}: {last[-200:]}"
            status = status or "failed: the worker wrote no result"
            if not data.get("rows"):
                data["rows"] = [{"label": name, "status": status}]
            took = seconds if (code is None and status.startswith("killed")) else data.get("seconds", seconds)
            self.results[name] = {"status": status, "seconds": took if took is not None else 0.0}
            for key, value in (data.get("measured") or {}).items():
                self.measured[key] = value
                self.measured_sources[key] = data.get("energy_source")
            self.record(name, data)
            self.say(f"[{name}] {status} in {self.results[name]['seconds']:.1f} s")
        self.write_bundle()
        return not_started

    def record(self, experiment: str, data: dict) -> dict:
        """The reference record of ``experiment`` from its worker's ``data``; a stage of
        ``MERGED_INTO`` adds its rows and notes to its experiment's record."""
        with self._bundle_lock:
            return self._merge(experiment, data)

    def _merge(self, experiment: str, data: dict) -> dict:
        self.raw[experiment] = data
        target = MERGED_INTO.get(experiment, experiment)
        data = dict(self.raw.get(target) or {"rows": [], "notes": []})
        for stage in (s for s, t in MERGED_INTO.items() if t == target and s in self.raw):
            data["rows"] = list(data.get("rows") or []) + [{**r, "stage": stage}  # --unpack replaces them by stage
                                                           for r in self.raw[stage].get("rows") or []]
            data["notes"] = list(data.get("notes") or []) + list(self.raw[stage].get("notes") or [])
            data.setdefault("energy_source", self.raw[stage].get("energy_source"))
        return self._record(target, data)

    def _record(self, experiment: str, data: dict) -> dict:
        from greenlab.course import reference

        rows = list(data.get("rows") or [])
        if self.dry_run:
            rows = [{**r, "run": DRY_RUN_MARK} for r in rows]
        notes = ([DRY_RUN_MARK + "."] if self.dry_run else []) + list(data.get("notes") or []) \
            + [self._state_note()]
        if data.get("torch_tf32"):
            notes.append("PyTorch TF32 settings as found (not changed): " + data["torch_tf32"] + ".")
        record = {
            "schema_version": reference.SCHEMA_VERSION, "experiment": experiment, "date": self.date,
            "gpu": self.provenance["gpu"], "driver": self.provenance["driver"],
            "cuda": self.provenance["cuda"], "torch": self.provenance["torch"], "command": self.command,
            "results": [_clean_row(r) for r in rows], "gpu_count": 1,
            "greenlab": self.provenance["greenlab"], "python": self.provenance["python"],
            "units": _units_for(rows), "notes": " ".join(n for n in notes if n),
        }
        source = data.get("energy_source")
        if source in reference.ENERGY_SOURCES:
            record["energy_source"] = source
        if not record["units"]:
            del record["units"]
        try:
            reference.from_dict(record, experiment)
        except reference.ReferenceRunError as exc:  # kept anyway: a measurement is never thrown away
            self.results.setdefault(experiment, {})["schema_problem"] = str(exc)
            self.say(f"WARNING {experiment} does not match the reference schema: {exc}")
        self.records[experiment] = record
        return record

    # --- lessons ---
    def run_lessons(self) -> None:
        """The selected lessons headless in quick mode, ``--lesson-jobs`` at a time (they are
        checked, not measured), each under a watchdog of its own share (``lesson_share_s``), with
        whatever time the experiments left: started in ``lesson_order``, the next one whose
        share fits in what is left (``pick_lesson``); none starts after the phase's end."""
        if not self.dry_run:
            budget_end = self.deadline - self.pytest_s - 2
        else:
            budget_end = time.monotonic() + self.sizes.lesson_cap_s * len(self.lessons)
        order = {path: i for i, path in enumerate(self.lessons)}
        pending = lesson_order(self.lessons)
        done: dict = {}
        pick_lock = threading.Lock()

        def slot():
            while True:
                with pick_lock:
                    path = pick_lesson(pending, budget_end - time.monotonic(), self.lesson_share)
                    if path is None:
                        return
                    pending.remove(path)
                row = self.run_lesson(path, budget_end)
                with self._bundle_lock:  # written after each lesson: a lost shot keeps the lessons done
                    done[path] = row
                    self.lesson_rows = [done[p] for p in sorted(done, key=order.get)]
                    self.write_bundle()

        threads = [threading.Thread(target=slot, name=f"gpu-suite-lessons-{i}", daemon=True)
                   for i in range(max(1, self.args.lesson_jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._bundle_lock:  # what never started: out of time
            for path in pending:
                self.say(f"[lesson {path.stem}] not run: out of time")
                done[path] = {"label": f"lesson {path.stem}", "status": "not run: out of time", "seconds": 0.0,
                              "share_s": self.lesson_share(path)}
            self.lesson_rows = [done[p] for p in sorted(done, key=order.get)]
            self.write_bundle()

    def lesson_share(self, path: Path) -> float:
        """A lesson's watchdog share: ``LESSON_SHARES_S`` (measured) or ``sizes.lesson_cap_s``."""
        return max(self.sizes.lesson_cap_s, LESSON_SHARES_S.get(Path(path).stem[:2], 0.0))

    def run_lesson(self, path: Path, budget_end: float) -> dict:
        share = self.lesson_share(path)
        cap = min(budget_end - time.monotonic(), share)
        row = {"label": f"lesson {path.stem}", "share_s": share}
        if cap < 10.0:
            self.say(f"[lesson {path.stem}] not run: out of time")
            return {**row, "status": "not run: out of time", "seconds": 0.0}
        env = _child_env(self.paths)
        env.update(GREENLAB_QUICK="1", MPLBACKEND="Agg")
        env.pop("GREENLAB_DEVICE", None)
        if not self.dry_run:  # the cores shared out between the lessons that run at once
            env.setdefault("GREENLAB_THREADS", str(max(1, (os.cpu_count() or 1) // self.args.lesson_jobs)))
        if self.dry_run:
            env["CUDA_VISIBLE_DEVICES"] = ""
        cmd = [sys.executable, "-m", "greenlab.course", "run", str(path)]
        self.say(f"[lesson {path.stem}] start (watchdog at {cap:.0f} s)")
        code, seconds, tail = self.stream(cmd, env, cap, f"  {path.stem}| ")
        if code == 0:
            status = "passed"
        elif code is None:
            status = f"killed by the watchdog after {seconds:.0f} s" + (
                f" (its share was {share:.0f} s; {cap:.0f} s were left)" if cap < share else "")
        else:
            failed = next((ln for ln in reversed(tail) if ln.startswith("FAILED ")), "")
            status = "failed: " + (failed[len("FAILED "):] or f"exit code {code}")[:300]
        self.say(f"[lesson {path.stem}] {status} in {seconds:.1f} s")
        return {**row, "status": status, "seconds": seconds, "device": "cpu" if self.dry_run else "cuda",
                "mode": "quick", "jobs": self.args.lesson_jobs}

    # --- pytest ---
    def run_pytest(self) -> dict:
        files = gpu_test_files()
        shown = "python -m pytest -m gpu " + " ".join(str(f.relative_to(REPO_ROOT)) for f in files)
        if self.args.skip_pytest:
            self.say("pytest -m gpu: not run (--skip-pytest)")
            return {"outcome": "not run", "summary": "--skip-pytest", "command": shown}
        if importlib.util.find_spec("pytest") is None:
            self.say("pytest -m gpu: not run (pytest is not installed)")
            return {"outcome": "not run", "summary": "pytest is not installed", "command": shown}
        if not files:
            return {"outcome": "not run", "summary": "no test file has gpu-marked tests", "command": shown}
        left = self.deadline - time.monotonic() - 2 if not self.dry_run else 120.0
        if left < 10:
            return {"outcome": "not run", "summary": "out of time", "command": shown}
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", *map(str, files), "-q", "-rs",
               "-p", "no:cacheprovider"]
        self.say("pytest: " + shown)
        code, seconds, tail = self.stream(cmd, _child_env(self.paths), left, "  pytest| ")
        summary = next((ln.strip("= ") for ln in reversed(tail)
                        if any(w in ln for w in ("passed", "failed", "skipped", "error", "no tests"))), "")
        outcome = {0: "passed", 1: "failed", 5: "no tests collected", None: "killed by the watchdog"}.get(code, "error")
        return {"outcome": outcome, "exit_code": code, "summary": summary[:300], "seconds": seconds,
                "command": shown}

    # --- summary and files ---
    def summary_rows(self) -> list:
        rows = []
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                rows.append({"label": name, "lesson": EXPERIMENTS[name][0], "status": r["status"],
                             "seconds": r.get("seconds"), "schema_problem": r.get("schema_problem")})
            elif name not in self.selected:
                rows.append({"label": name, "lesson": EXPERIMENTS[name][0], "status": "not selected (--only)"})
        rows.extend(self.lesson_rows)
        for key, text, op, threshold in TARGETS:
            value, verdict = self.target(key, op, threshold)
            rows.append({"label": "target: " + text, "measured": value, "threshold": f"{op} {threshold:g}",
                         "result": verdict})
        p = self.pytest or {"outcome": "not run yet"}
        rows.append({"label": "pytest -m gpu", **p})
        rows.append({"label": "carried wheels", **(self.wheels or {"outcome": "none carried"})})
        rows.append({"label": "gpu state", **{k: v for k, v in self.gpu_state.items()},
                     "cudnn": self.provenance["cudnn"], "cuda": self.provenance["cuda"]})
        rows.append({"label": "python packages", **preflight()})
        rows.append({"label": "total", "seconds": time.monotonic() - self.t_start,
                     "budget_seconds": self.budget_s, "shortest_window_s": self.min_window_s,
                     "shortest_window_capped": self.min_window_capped})
        return rows

    def target(self, key: str, op: str, threshold: float) -> tuple:
        value = self.measured.get(key)
        if key in ENERGY_TARGETS and value is not None \
                and not str(self.measured_sources.get(key) or "").startswith("nvml"):
            return value, "not measured (no GPU energy counter: not judged on an estimate)"
        return value, judge(value, op, threshold)

    def write_bundle(self) -> None:
        with self._bundle_lock:
            self._write_bundle()

    def _write_bundle(self) -> None:
        self.record(SUMMARY, {"rows": self.summary_rows(), "notes": [
            "Summary of one gpu_suite call: experiment status, the lessons run headless in quick "
            "mode, targets (measured, not assumed), the GPU-only pytest run."]})
        bundle = {"bundle": "greenlab gpu_suite records", "bundle_version": BUNDLE_VERSION,
                  "command": self.command,  # the summary last, as before it was written first
                  "records": [self.records[k] for k in self.records if k != SUMMARY] + [self.records[SUMMARY]]}
        with self._publish_lock:  # the copy into --out never reads a half-written file
            write_json(self.work / BUNDLE, bundle)
            (self.work / SUMMARY_TEXT).write_text(self.summary_table() + "\n", encoding="utf-8")
        self.publish(BUNDLE, SUMMARY_TEXT)

    def summary_table(self) -> str:
        """The short table printed last: experiments, lessons, targets, pytest."""
        lines = ["", "=" * 78, f"gpu_suite summary: {self.provenance['gpu']}, {self.date}"
                 + (f"  [{DRY_RUN_MARK}]" if self.dry_run else ""), "-" * 78]
        for name in EXPERIMENTS:
            if name in self.results:
                r = self.results[name]
                lines.append(f"{name:<26} {r['seconds']:6.1f} s  {r['status']}")
        for row in self.lesson_rows:
            lines.append(f"{row['label']:<26} {row.get('seconds', 0):6.1f} s  {row['status']}")
        lines.append("-" * 78)
        for key, text, op, threshold in TARGETS:
            value, verdict = self.target(key, op, threshold)
            shown = "not measured" if value is None else f"{value:.3g}"
            lines.append(f"{text:<58} {shown:>12} {op} {threshold:g}  {verdict}")
        lines.append("-" * 78)
        p = self.pytest or {}
        lines.append(f"pytest -m gpu: {p.get('outcome', 'not run')} ({p.get('summary', '')})")
        w = self.wheels or {"outcome": "none carried"}
        lines.append(f"carried wheels: {w['outcome']}" + (f" ({w['packages']})" if w.get("packages") else ""))
        lines.append(f"files: {BUNDLE} ({len(self.records)} records), {LOG} and {SUMMARY_TEXT} in {self.out}")
        lines.append(f"total {time.monotonic() - self.t_start:.0f} s")
        return "\n".join(lines)

    def _provenance(self) -> dict:
        import greenlab

        torch = self.torch
        if self.dry_run:
            gpu, driver = DRY_RUN_GPU, "none (dry-run, CPU)"
        else:
            gpu = self.gpu_state.get("name")
            if not isinstance(gpu, str) or gpu.startswith("unavailable"):
                gpu = torch.cuda.get_device_name(0)
            driver = self.gpu_state.get("driver") or "unknown (NVML not available)"
        return {"gpu": gpu, "driver": str(driver), "cuda": str(torch.version.cuda or "none (CPU build)"),
                "cudnn": cudnn_version(torch), "torch": torch.__version__, "greenlab": greenlab.__version__,
                "python": platform.python_version()}

    def _state_note(self) -> str:
        s = self.gpu_state
        keys = ("power_limit_w", "default_power_limit_w", "sm_clock_mhz", "max_sm_clock_mhz",
                "persistence_mode", "compute_mode", "mig_mode", "counter_update_period_ms")
        parts = [f"{k}={s[k]}" for k in keys if s.get(k) is not None]
        software = (f"Software: driver {self.provenance['driver']}, CUDA {self.provenance['cuda']}, "
                    f"cuDNN {self.provenance['cudnn']}, torch {self.provenance['torch']}.")
        return (("GPU state at start (read-only): " + ", ".join(parts) + ". ") if parts else "") + software


def install_wheels(folder: Path, target: Path, timeout_s: float = 120.0) -> dict:
    """``pip install --no-index --find-links folder --no-deps --target target`` of every wheel
    in ``folder`` (their dependencies are in the folder or on the machine): a summary row's dict
    (outcome "installed" or "failed: ...", the packages, seconds). Never raises."""
    t0 = time.monotonic()
    names = sorted({w.name.split("-")[0] for w in Path(folder).glob("*.whl")})
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(folder), "--no-deps",
           "--no-compile", "--no-cache-dir", "--disable-pip-version-check", "--quiet", "--target", str(target),
           *names]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        last = next((ln for ln in reversed((proc.stderr + proc.stdout).splitlines()) if ln.strip()), "")
        outcome = "installed" if proc.returncode == 0 else f"failed: exit code {proc.returncode}: {last[-300:]}"
    except (OSError, subprocess.SubprocessError) as exc:
        outcome = f"failed: {type(exc).__name__}: {exc}"[:300]
    return {"outcome": outcome, "packages": ", ".join(names), "folder": str(folder), "target": str(target),
            "seconds": time.monotonic() - t0}


def cudnn_version(torch) -> str:
    """cuDNN's version as torch reports it (e.g. "91002"), or why there is none."""
    try:
        version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception as exc:  # recorded, never fatal
        return f"unavailable ({type(exc).__name__})"
    return str(version) if version is not None else "none (not available to this torch)"


def plan_shares(selected, lessons: bool, pytest: bool, budget_s: float, dry_run: bool) -> tuple:
    """(experiment -> seconds, lesson phase reserve, pytest reserve) for ``budget_s``: the plan's
    shares (``EXPERIMENTS``), scaled down when they do not fit, and never below ``MIN_SHARE_S``."""
    plan = {n: float(EXPERIMENTS[n][1]) for n in selected}
    lesson_s = LESSONS_SECONDS if lessons else 0
    pytest_s = PYTEST_SECONDS if pytest else 0
    total = sum(plan.values()) + lesson_s + pytest_s + OVERHEAD_SECONDS
    scale = min(1.0, budget_s / total) if not dry_run else 1.0
    return {n: max(MIN_SHARE_S, s * scale) for n, s in plan.items()}, lesson_s * scale, pytest_s * scale


def copy_capped(src: Path, dst: Path, tmp: Path, max_bytes: int = OUT_FILE_MAX_BYTES) -> bool:
    """Copy ``src`` to ``dst`` through ``tmp`` and an atomic rename; a file over ``max_bytes``
    keeps its first tenth and its last part, with a line saying how much was left out between.
    False when ``src`` does not exist."""
    try:
        size = src.stat().st_size
    except FileNotFoundError:
        return False
    with open(src, "rb") as f, open(tmp, "wb") as g:
        if size <= max_bytes:
            shutil.copyfileobj(f, g)
        else:
            head = max_bytes // 10
            tail = max_bytes - head - 200
            g.write(f.read(head))
            g.write(f"\n[... {size - head - tail} bytes left out of this copy ...]\n".encode())
            f.seek(size - tail)
            g.write(f.read(tail))
    os.replace(tmp, dst)
    return True


def lesson_order(lessons) -> list:
    """Lessons in start order: those of ``LESSON_PRIORITY`` in its order, then the rest as given."""
    rank = {n: i for i, n in enumerate(LESSON_PRIORITY)}
    return sorted(lessons, key=lambda p: (rank.get(Path(p).stem[:2], len(rank)),))


def pick_lesson(pending: list, seconds_left: float, share_of, min_s: float = 10.0):
    """The next lesson to start: the first of ``pending`` whose share fits in ``seconds_left``;
    when none fits, the first one (it runs with what is left); None under ``min_s`` left."""
    if not pending or seconds_left < min_s:
        return None
    return next((p for p in pending if share_of(p) <= seconds_left), pending[0])


def shortest_window_s(floor_s: float, counter_period_ms) -> tuple:
    """(shortest energy window in seconds, whether it was capped): ``MIN_WINDOW_PERIODS`` update
    periods of the counter, at least ``floor_s``, at most ``MAX_MIN_WINDOW_S`` (an idle poll can
    read a slow period that loaded windows do not have; the cap is then flagged)."""
    periods_s = MIN_WINDOW_PERIODS * (counter_period_ms or 0) / 1000.0
    want = max(floor_s, periods_s)
    return (min(want, MAX_MIN_WINDOW_S), want > MAX_MIN_WINDOW_S)


def select_lessons(spec: str, dry_run: bool) -> list:
    """Lessons for ``--lessons``: "all", "none", instructor lesson numbers "00,03" or notebook
    paths; the dry run's default is lesson 02 alone (a short one), the GPU run's every lesson."""
    from greenlab.course.notebook_format import instructor_notebooks

    found = instructor_notebooks(REPO_ROOT / "lessons")
    if spec in (None, ""):
        spec = "02" if dry_run else "all"
    if spec == "none":
        return []
    if spec == "all":
        return found
    chosen, missing = [], []
    for want in (w.strip() for w in spec.split(",") if w.strip()):
        if want.endswith(".ipynb"):  # a notebook path
            (chosen if Path(want).is_file() else missing).append(Path(want).resolve())
            continue
        match = [p for p in found if p.stem[:2] == want or p.stem == want]
        chosen.extend(match) if match else missing.append(want)
    if missing:
        raise SystemExit(f"--lessons: no lesson {[str(m) for m in missing]}; have {[p.stem for p in found]}")
    return chosen


def gpu_test_files() -> list:
    """Test files that hold ``gpu``-marked tests (pytest then runs only those)."""
    import re

    mark = re.compile(r"^\s*(@|pytestmark\s*=\s*\[?\s*)?pytest\.mark\.gpu\b", re.MULTILINE)
    return sorted(p for p in (REPO_ROOT / "tests").glob("test_*.py")
                  if mark.search(p.read_text(encoding="utf-8", errors="replace")))


def unpack(bundle_paths, into, allow_dry_run: bool = False) -> int:
    """Write each record of one or more bundles as ``<gpu-slug>_<date>_<experiment>.json`` in
    ``into``, after checking it against the reference schema (``merge_bundles``: a later bundle's
    records over an earlier one's). Dry-run records are refused unless allowed."""
    from greenlab.course import reference

    paths = [bundle_paths] if isinstance(bundle_paths, (str, Path)) else list(bundle_paths)
    bundles = []
    for bundle_path in paths:
        bundle = _read_json(Path(bundle_path))
        if not bundle or bundle.get("bundle_version") != BUNDLE_VERSION or not isinstance(bundle.get("records"), list):
            print(f"error: {bundle_path} is not a gpu_suite bundle (version {BUNDLE_VERSION})", file=sys.stderr)
            return 2
        bundles.append(bundle)
    bundle_path = ", ".join(str(p) for p in paths)
    folder = Path(into)
    records = merge_bundles(bundles)
    dry = [r.get("experiment") for r in records if r.get("gpu") == DRY_RUN_GPU]
    if dry and not allow_dry_run:
        print(f"error: {bundle_path} holds dry-run records ({DRY_RUN_MARK}); they are not references. "
              "Nothing was written (--allow-dry-run writes them anyway, e.g. for a test).", file=sys.stderr)
        return 2
    problems = []
    for record in records:
        try:
            reference.from_dict(record, f"{bundle_path}: {record.get('experiment')}")
        except reference.ReferenceRunError as exc:
            problems.append(str(exc))
    if problems:
        print("error: records that do not match the reference schema; nothing was written:\n"
              + "\n".join(problems), file=sys.stderr)
        return 2
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        path = folder / f"{reference.gpu_slug(record['gpu'])}_{record['date']}_{record['experiment']}.json"
        write_json(path, record)
        reference.load_file(path)
        print(f"wrote {path}")
    return 0


def merge_bundles(bundles: list) -> list:
    """The records of ``bundles`` (a first call's, then a fallback's), a later record replacing an
    earlier one of the same experiment, except: where the later run ran only stages of an
    experiment (``MERGED_INTO``; its summary says the experiment itself was "not selected"), the
    earlier record keeps its other rows and the stages' rows are replaced; the summary keeps
    every row, a later one replacing the earlier of the same label (rows "not selected" never do)."""
    merged: dict = {}
    for bundle in bundles:
        summary = next((r for r in bundle["records"] if r.get("experiment") == SUMMARY), None)
        status = {str(r.get("label")): str(r.get("status", "")) for r in (summary or {}).get("results") or []}
        for record in bundle["records"]:
            name = record.get("experiment")
            old = merged.get(name)
            if old is None:
                merged[name] = record
            elif name == SUMMARY:
                rows = {str(r.get("label")): r for r in old.get("results") or []}
                for row in record.get("results") or []:
                    if not str(row.get("status", "")).startswith("not selected"):
                        rows[str(row.get("label"))] = row
                merged[name] = {**record, "results": list(rows.values())}
            elif status.get(name, "").startswith("not selected"):
                rerun = {s for s, t in MERGED_INTO.items() if t == name and s in status
                         and not status[s].startswith("not selected")}
                kept = [r for r in old.get("results") or []
                        if r.get("stage") not in rerun and r.get("label") not in rerun]
                merged[name] = {**old, "results": kept + list(record.get("results") or []),
                                "units": {**(old.get("units") or {}), **(record.get("units") or {})},
                                "notes": (old.get("notes") or "") + f" Rows of {', '.join(sorted(rerun))} from a "
                                f"later run ({record.get('date')}, {record.get('command')})."}
                if not merged[name]["units"]:
                    del merged[name]["units"]
            else:
                merged[name] = record
    return list(merged.values())


def preflight() -> dict:
    """Versions of the packages the suite can use (or "missing"), without importing them."""
    from importlib import metadata

    out = {}
    for name, module in (("torch", "torch"), ("numpy", "numpy"), ("nvidia-ml-py", "pynvml"),
                         ("matplotlib", "matplotlib"), ("psutil", "psutil"), ("tqdm", "tqdm"),
                         ("pytest", "pytest"), ("torchvision", "torchvision"), ("IPython", "IPython"),
                         ("ipywidgets", "ipywidgets"), ("bitsandbytes", "bitsandbytes"), ("torchao", "torchao")):
        if importlib.util.find_spec(module) is None:
            out[name] = "missing"
            continue
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "present"
    return out


def judge(value, op: str, threshold: float) -> str:
    """"pass"/"fail" for a measured value against a target; "not measured" for None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "not measured"
    ok = {">=": value >= threshold, "<": value < threshold, "<=": value <= threshold}[op]
    return "pass" if ok else "fail"


def _parse_args(argv):
    p = argparse.ArgumentParser(prog="gpu_suite.py",
                                description="Every GPU check, reference recording and lesson run, in one call.")
    p.add_argument("--out", help=f"folder for {', '.join(OUT_FILES)} and nothing else (created)")
    p.add_argument("--work", default="", help="the run's own folder (parts, cache, the files before they are "
                   "copied to --out); default: a fresh one in the system's temp dir, removed at the end")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"total wall-time budget in seconds (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--only", default="", help=f"comma-separated experiments, or none: {', '.join(EXPERIMENTS)}")
    p.add_argument("--skip-pytest", action="store_true", help="do not run the gpu-marked tests")
    p.add_argument("--lessons", default="", help="instructor lessons to run headless: all, none or "
                   "numbers such as 00,03 (default: all; the dry run: 02)")
    p.add_argument("--lesson-jobs", type=int, default=None,
                   help=f"lessons run at the same time (default {LESSON_JOBS} on the GPU, 1 in the dry run)")
    p.add_argument("--dry-run", action="store_true",
                   help="run everything on the CPU with tiny sizes (not a reference)")
    p.add_argument("--unpack", nargs="+", metavar="RECORDS", help="gpu_suite_records.json files to write "
                   "out as reference-run files (a fallback's after its first call's: its records replace theirs)")
    p.add_argument("--into", default=str(REPO_ROOT / "data" / "reference_runs"),
                   help="folder for --unpack (default data/reference_runs)")
    p.add_argument("--allow-dry-run", action="store_true", help="let --unpack write dry-run records")
    p.add_argument("--wheels", default="", help="a folder of wheels to install before the experiments "
                   "(default on a GPU run: .cache/gpu-wheels when it holds any; see benchmarks/gpu_wheels.py)")
    p.add_argument("--hang", default="", help="rehearse the watchdog: this experiment hangs after one row")
    p.add_argument("--hang-start", default="", help="rehearse the watchdog: this experiment hangs before its first row")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--cap-s", default="60", help=argparse.SUPPRESS)
    p.add_argument("--min-window-s", type=float, default=MIN_WINDOW_S, help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    p.add_argument("--idle-w", type=float, default=None, help=argparse.SUPPRESS)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    args.raw = raw
    if args.unpack:
        return args
    if args.worker:
        args.worker = args.worker.split(",")
        args.cap_s = [float(c) for c in str(args.cap_s).split(",")]
        if [w for w in args.worker if w not in EXPERIMENTS] or len(args.cap_s) != len(args.worker):
            p.error(f"--worker takes known experiments with one --cap-s each, got {args.worker} {args.cap_s}")
    if not args.out:
        p.error("--out is required (a folder for the records and the log)")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    # "none": no experiment (lessons and pytest only)
    unknown = [] if only == ["none"] else [s for s in only if s not in EXPERIMENTS]
    if unknown:
        p.error(f"unknown experiment(s) {unknown}; allowed: {', '.join(EXPERIMENTS)}")
    args.only = set(only)
    if args.lesson_jobs is None:
        args.lesson_jobs = 1 if args.dry_run else LESSON_JOBS
    if not 1 <= args.lesson_jobs <= 8:
        p.error(f"--lesson-jobs must be 1 to 8, got {args.lesson_jobs}")
    if not (math.isfinite(args.budget_s) and 60 <= args.budget_s <= 3600):
        p.error(f"--budget-s must be between 60 and 3600 seconds, got {args.budget_s}")
    return args


def _child_env(paths=()) -> dict:
    """The environment of a worker, lesson or pytest run: this one, the repository (and ``paths``,
    such as the carried wheels' target folder) on PYTHONPATH, no dataset downloads."""
    env = dict(os.environ)
    # datasets come from the cache or the announced generated stand-in: no download attempt (and
    # its network timeouts) inside a timed share, unless the caller asked for one
    env.setdefault("GREENLAB_DOWNLOAD", "0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
                                        + [str(p) for p in paths])
    env["PYTHONUNBUFFERED"] = "1"
    return env


