"""The course's results table, made in one run: ``python -m greenlab.course results`` (``make results``).

Every lesson (its instructor copy, headless, each in a process of its own) runs in the mode a learner
gets by default on this machine (``--quick``: CI's quick mode, ``GREENLAB_QUICK=1``). A lesson's headline
cell calls ``gl.headline(...)`` (``greenlab.course.headline``), which appends its record to the file that
``GREENLAB_HEADLINE_FILE`` names; this module collects the records into one table: lesson, technique,
what it saves, the factor with its 95% interval, detectable or not, repeats, how the energy was obtained,
the CPU (native bf16 or not), the machine's load while the lesson ran (1-minute load average before and
after), each lesson's energy and time, with the run's totals, and each lesson's longest silent stretch (a
cell with no output): the same run is the course's check that no cell sits silent past
``headless.SILENCE_LIMIT_S`` seconds, and the markdown names every cell that did. A lesson without a record reads "no
headline recorded"; one that failed says so with its error line.

Written to ``--out`` (default ``results/course`` in the results folder): ``results.md``, ``results.csv``
and ``results.json``. ``--lesson-times`` also writes each passed lesson's seconds, load and code
fingerprint to ``greenlab/course/lesson_times.json`` (``greenlab.course.lesson_time``), which the build
puts into every lesson's time line; ``--lesson-times --from-json FILE`` does so from an earlier run.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from greenlab.base.paths import lessons_dir, output_folder, results_dir
from greenlab.course import lesson_time
from greenlab.course.headless import SILENCE_LIMIT_S
from greenlab.course.headline import HEADLINE_FILE_ENV, HEADLINE_LESSON_ENV, read_headlines
from greenlab.course.notebook_format import LessonError, _read_json
from greenlab.energy.estimate import cpu_model_name
from greenlab.energy.provenance import how_measured
from greenlab.energy.windows import measure
from greenlab.session import hardware
from greenlab.session.config import device

COLUMNS = ("lesson", "technique", "saves", "factor", "interval_95", "detectable", "repeats", "reached",
           "energy_source", "cpu_bf16", "load_before", "load_after", "lesson_joules", "lesson_seconds",
           "longest_silence_s", "status")
TIMEOUT_S = 1800.0  # one lesson, at most (seconds)
# every cell ran and its figures stand, but the process failed while shutting down (a library's
# native thread torn down at exit): said as it is, and counted as a pass of the lesson
PASSED_THEN_EXIT = "passed, then the process failed at exit"


@dataclass
class LessonOutcome:
    """One lesson's run: its headline records, status ("passed", PASSED_THEN_EXIT, "failed: ...", "timed out"), the
    wall-clock seconds and the energy of its process (J, with how it was obtained), the 1-minute
    load average before and after."""

    lesson: str
    path: str
    status: str
    seconds: float
    joules: float | None
    energy_how: str
    load_before: float | None
    load_after: float | None
    headlines: list = field(default_factory=list)
    longest_silence_s: float | None = None  # the longest a cell sat with no output (None: not timed)
    silent_cells: list = field(default_factory=list)  # [cell, seconds] silent past headless.SILENCE_LIMIT_S
    code_sha256: str = ""  # the lesson's code cells, so a running time can tell it is stale (lesson_time)


@dataclass
class CourseResults:
    """Every lesson's outcome, the machine, the mode, and the totals (J, s)."""

    lessons: list
    mode: str
    cpu: str
    cpu_bf16: bool | None
    cpu_capability: str
    total_joules: float | None
    total_seconds: float

    def rows(self) -> list[dict]:
        """One row per headline record (a lesson without one gets a row saying so), COLUMNS as keys."""
        out = []
        for lesson in self.lessons:
            common = {"lesson": lesson.lesson, "cpu_bf16": _yes_no(self.cpu_bf16),
                      "load_before": _fixed(lesson.load_before), "load_after": _fixed(lesson.load_after),
                      "lesson_joules": _fixed(lesson.joules, 1), "lesson_seconds": _fixed(lesson.seconds, 1),
                      "longest_silence_s": _fixed(lesson.longest_silence_s, 1), "status": lesson.status}
            if not lesson.headlines:
                out.append({**dict.fromkeys(COLUMNS, ""), **common,
                            "technique": "no headline recorded" if passed(lesson.status) else "-"})
                continue
            for h in lesson.headlines:
                out.append({**dict.fromkeys(COLUMNS, ""), **common, "technique": h.get("technique", ""),
                            "saves": h.get("saves", ""), "factor": _factor(h.get("factor")),
                            "interval_95": _interval(h.get("low"), h.get("high")),
                            "detectable": _yes_no(h.get("detectable")), "repeats": _plain(h.get("repeats")),
                            "reached": h.get("reached", ""), "energy_source": h.get("energy_source", ""),
                            "cpu_bf16": _yes_no(h.get("cpu_bf16", self.cpu_bf16))})
        return out

    def markdown(self) -> str:
        """The table in markdown, with the machine, the mode and the totals above it."""
        total = "unknown" if self.total_joules is None else f"{self.total_joules:,.0f} J"
        lines = [f"# Course results ({self.mode})", "",
                 f"CPU: {self.cpu} (bf16 {'native' if self.cpu_bf16 else 'not native'}; "
                 f"ATEN_CPU_CAPABILITY={self.cpu_capability or 'default'}). "
                 f"Total: {self.total_seconds:,.0f} s, {total} ({self._how()}). "
                 "Factors are baseline / technique per paired repeat (5x: a fifth of the energy); "
                 "load is the 1-minute load average before and after each lesson.", ""]
        header = list(COLUMNS)
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + " --- |" * len(header))
        for row in self.rows():
            lines.append("| " + " | ".join(str(row[c]).replace("|", "/") for c in header) + " |")
        silent = [(x.lesson, where, t) for x in self.lessons for where, t in x.silent_cells]
        timed = [x for x in self.lessons if x.longest_silence_s is not None]
        lines.append("")
        if silent:
            lines.append(f"Cells silent for more than {SILENCE_LIMIT_S:g} s (print progress there): "
                         + "; ".join(f"{where} ({t:.0f} s)" for _, where, t in silent) + ".")
        elif timed:
            lines.append(f"No cell of the {len(timed)} lesson(s) that ran to the end sat silent for more than "
                         f"{SILENCE_LIMIT_S:g} s.")
        return "\n".join(lines) + "\n"

    def write(self, out) -> dict:
        """Write results.md, results.csv and results.json under ``out``; {kind: path}."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"md": out / "results.md", "csv": out / "results.csv", "json": out / "results.json"}
        paths["md"].write_text(self.markdown(), encoding="utf-8")
        with open(paths["csv"], "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(COLUMNS))
            writer.writeheader()
            writer.writerows(self.rows())
        paths["json"].write_text(json.dumps({**{k: v for k, v in asdict(self).items() if k != "lessons"},
                                             "lessons": [asdict(x) for x in self.lessons]}, indent=1),
                                 encoding="utf-8")
        return paths

    def _how(self) -> str:
        hows = sorted({x.energy_how for x in self.lessons if x.energy_how})
        return "; ".join(hows) or "no energy figure"


def run_results(paths, quick: bool = False, echo: bool = True, timeout_s: float = TIMEOUT_S) -> CourseResults:
    """Run each notebook in ``paths`` headless, in a process of its own, and collect its headline
    records. ``quick``: CI's quick mode (GREENLAB_QUICK=1); otherwise the mode this machine gives a
    learner (the environment's GREENLAB_QUICK, if any, is left as it is)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no lessons to run")
    outcomes = []
    t0 = time.perf_counter()
    for path in paths:
        outcome = _run_one(path, quick, timeout_s)
        outcomes.append(outcome)
        if echo:
            energy = "" if outcome.joules is None else f", {outcome.joules:,.0f} J"
            print(f"greenlab.results {outcome.lesson}: {outcome.status}, {outcome.seconds:,.1f} s{energy}, "
                  f"{len(outcome.headlines)} headline(s), load {outcome.load_before} -> {outcome.load_after}",
                  flush=True)
    joules = [x.joules for x in outcomes]
    total = None if any(j is None for j in joules) else sum(joules)
    try:
        bf16 = bool(hardware.precision_support("bf16", "cpu").native)
    except Exception:  # noqa: BLE001 - the table says "unknown"
        bf16 = None
    mode = ("CI quick mode (GREENLAB_QUICK=1)" if quick else
            f"the default mode on {'a CPU, no GPU' if device() == 'cpu' else device()}")
    return CourseResults(outcomes, mode, _cpu_name(), bf16, os.environ.get("ATEN_CPU_CAPABILITY", ""),
                         total, time.perf_counter() - t0)


def default_lessons() -> list[Path]:
    """Every instructor copy, in order (the headless runner needs the worked solutions)."""
    return sorted(Path(lessons_dir(), "instructor").glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m greenlab.course results",
                                     description="run every lesson's headline headless and write one table")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


def add_arguments(parser) -> None:
    """The ``results`` subcommand's options (shared with ``python -m greenlab.course``)."""
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every lessons/instructor copy)")
    parser.add_argument("--quick", action="store_true", help="CI's quick mode (GREENLAB_QUICK=1)")
    parser.add_argument("--out", default=None, help="folder for results.md/.csv/.json (default: results/course)")
    parser.add_argument("--lesson-times", action="store_true",
                        help="also write each lesson's running time into greenlab/course/lesson_times.json, "
                             "which the build puts into the lessons' time lines")
    parser.add_argument("--from-json", default=None, metavar="RESULTS_JSON",
                        help="with --lesson-times: take the times from this results.json instead of running")


def run_from_args(args) -> int:
    if getattr(args, "from_json", None) is not None:
        if not args.from_json.strip() or "\x00" in args.from_json or not Path(args.from_json).is_file():
            print(f"error: --from-json must be a results.json file, got {args.from_json!r}", file=sys.stderr)
            return 2
        if not args.lesson_times:
            print("error: --from-json goes with --lesson-times", file=sys.stderr)
            return 2
        print(f"written: {lesson_time.write_times(args.from_json)} (run python -m greenlab.course build)")
        return 0
    try:  # the options first: a bad one is said at once, not after every lesson has run
        out = output_folder("--out", args.out) if args.out is not None else Path(results_dir(), "course")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name in args.notebooks:
        if "\x00" in name or not Path(name).is_file():
            print(f"error: no notebook at {name!r}", file=sys.stderr)
            return 2
        try:
            _read_json(Path(name))  # the check a headless run makes, before any lesson starts
        except (LessonError, OSError, UnicodeDecodeError) as exc:
            print(f"error: notebook {name!r} cannot be run: {exc}", file=sys.stderr)
            return 2
    paths = [Path(p) for p in args.notebooks] or default_lessons()
    results = run_results(paths, quick=args.quick)
    written = results.write(out)
    print(results.markdown())
    print("written:", ", ".join(str(p) for p in written.values()))
    if getattr(args, "lesson_times", False):
        print(f"written: {lesson_time.write_times(written['json'])} (run python -m greenlab.course build)")
    return 0 if all(passed(x.status) for x in results.lessons) else 1


# --- helpers ---------------------------------------------------------------------------

# the child runs one lesson and writes its cells' silences (every cell's longest, so the table can show
# the lesson's longest even under the limit) to the JSON file named by its third argument
_CHILD = ("import json, sys\n"
          "from greenlab.course.headless import run_notebook\n"
          "run = run_notebook(sys.argv[1], quick=True if sys.argv[2] == 'quick' else None, max_silence_s=0.0)\n"
          "open(sys.argv[3], 'w', encoding='utf-8').write(json.dumps(run.silences))\n")


def _run_one(path: Path, quick: bool, timeout_s: float) -> LessonOutcome:
    lesson = path.stem
    try:
        fingerprint = lesson_time.code_fingerprint(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        fingerprint = ""
    with tempfile.TemporaryDirectory(prefix="greenlab-results-") as tmp:
        record_file, silence_file = Path(tmp, "headlines.jsonl"), Path(tmp, "silences.json")
        env = {**os.environ, HEADLINE_FILE_ENV: str(record_file), HEADLINE_LESSON_ENV: lesson[:2],
               "PYTHONPATH": os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)}
        load_before = _load()
        t0 = time.perf_counter()
        window = measure(f"lesson {lesson}")
        window.start()
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), "quick" if quick else "default",
                                   str(silence_file)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
            status = "passed" if proc.returncode == 0 else f"failed: {_last_line(proc.stderr or proc.stdout)}"
            if proc.returncode != 0 and silence_file.exists():  # every cell ran: the process died as it exited
                status = (f"{PASSED_THEN_EXIT} (exit code {proc.returncode}: "
                          f"{_last_line(proc.stderr or proc.stdout)})")
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout_s:.0f} s"
        energy = window.stop()
        seconds = time.perf_counter() - t0
        records = read_headlines(record_file)
        silences = _read_silences(silence_file)
    joules = getattr(energy, "joules", None)
    try:
        how = how_measured(energy, short=True)
    except Exception:  # noqa: BLE001 - a table without a provenance phrase still says it has none
        how = ""
    longest = max((t for _, t in silences), default=None) if silences is not None else None
    return LessonOutcome(lesson, str(path), status, seconds, None if joules is None else float(joules), how,
                         load_before, _load(), records, longest,
                         [[where, round(t, 1)] for where, t in (silences or []) if t > SILENCE_LIMIT_S], fingerprint)


def passed(status: str) -> bool:
    """True when every cell of the lesson ran (its process may still have failed at exit)."""
    return status == "passed" or status.startswith(PASSED_THEN_EXIT)


def _read_silences(path: Path):
    """The child's [(cell, longest silence s)] for every code cell, or None when it wrote none (it failed)."""
    try:
        return [(str(where), float(t)) for where, t in json.loads(path.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        return None


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _load():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _cpu_name() -> str:
    try:
        return cpu_model_name() or platform.processor() or "unknown CPU"
    except Exception:  # noqa: BLE001
        return platform.processor() or "unknown CPU"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _factor(value) -> str:
    return "-" if value is None else f"{value:.3g}x"


def _interval(low, high) -> str:
    return "-" if low is None or high is None else f"{low:.3g}-{high:.3g}x"


def _yes_no(value) -> str:
    return {True: "yes", False: "no"}.get(value, "-")


def _plain(value) -> str:
    return "-" if value is None else str(value)


def _fixed(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    raise SystemExit(main())
