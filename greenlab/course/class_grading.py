"""Grade a class: nbgrader's autograde for every student of an assignment, in parallel processes.

    python -m greenlab.course grade COURSE_DIR lesson02 [--jobs N] [--student NAME ...]

``COURSE_DIR`` is an nbgrader course written by ``python -m greenlab.course.nbgrader`` (its config
turns grading mode on: the lessons run at their smallest size and write to no class leaderboard).
Each student's ``submitted/<student>/<assignment>`` is autograded by its own
``nbgrader autograde <assignment> --student <student>`` process, ``N`` at a time; nbgrader's
gradebook is one SQLite file, so a student whose process found it locked is graded again, alone,
at the end. Prints one line per student (seconds, and the error's last line when it failed) and
returns 0 when every student was graded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from greenlab.base import limits


@dataclass
class Graded:
    """One student's autograde: its exit code, its seconds and the tail of its output."""

    student: str
    returncode: int
    seconds: float
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def students(course: str | os.PathLike, assignment: str) -> list[str]:
    """The students with a submission of ``assignment`` in ``course``, sorted."""
    root = Path(course) / "submitted"
    return sorted(p.parent.name for p in root.glob(f"*/{assignment}") if p.is_dir())


def grade_class(course: str | os.PathLike, assignment: str, jobs: int = 2,
                only: list[str] | None = None, timeout_s: float = 1800) -> list[Graded]:
    """Autograde every student of ``assignment`` (or ``only`` those), ``jobs`` processes at a time;
    one result per student, in the order of :func:`students`."""
    limits.processes("jobs", jobs)  # each job is an autograde process
    if not isinstance(course, (str, os.PathLike)) or not os.fspath(course).strip() or "\x00" in os.fspath(course) \
            or not Path(course).is_dir():
        raise ValueError(f"course must be an nbgrader course folder, got {course!r}")
    if not isinstance(assignment, str) or not assignment.strip() or assignment in (".", "..") \
            or any(c in assignment for c in "/\\\x00*?["):
        raise ValueError(f"assignment must be an assignment's folder name such as lesson03, got {assignment!r}")
    submitted = students(course, assignment)
    names = submitted if only is None else list(only)
    missing = [n for n in names if n not in submitted]
    if missing:
        raise ValueError(f"student(s) with no submission of {assignment} under {Path(course) / 'submitted'}: "
                         f"{', '.join(map(repr, missing))}")
    if not names:
        raise ValueError(f"no submissions of {assignment} under {Path(course) / 'submitted'}")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda s: _autograde(course, assignment, s, timeout_s), names))
    retried = [r.student for r in results if not r.ok and "locked" in r.output]
    for student in retried:  # the gradebook was busy: once more, alone
        results[names.index(student)] = _autograde(course, assignment, student, timeout_s)
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m greenlab.course grade COURSE_DIR ASSIGNMENT [--jobs N] [--student NAME ...]``."""
    parser = argparse.ArgumentParser(prog="python -m greenlab.course grade",
                                     description="Autograde every student of an assignment in parallel processes.")
    parser.add_argument("course", help="the nbgrader course folder (written by python -m greenlab.course.nbgrader)")
    parser.add_argument("assignment", help="the assignment, e.g. lesson02")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="autograde processes at a time (default: half the CPUs)")
    parser.add_argument("--student", nargs="+", default=None, help="only these students")
    args = parser.parse_args(argv)
    try:
        results = grade_class(args.course, args.assignment, jobs=args.jobs, only=args.student)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in results:
        tail = "" if r.ok else f"  failed: {(r.output.strip().splitlines() or [''])[-1]}"
        print(f"{r.student}: {r.seconds:.1f} s{tail}")
    failed = [r.student for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} students graded with {args.jobs} process(es)"
          + (f"; not graded: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _autograde(course, assignment: str, student: str, timeout_s: float) -> Graded:
    exe = Path(sys.executable).with_name("nbgrader")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    env = {**os.environ, "GREENLAB_GRADING": os.environ.get("GREENLAB_GRADING", "1"),
           # nbgrader runs its helpers (alembic) by name: the environment's bin folder first
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd + ["autograde", assignment, "--student", student, "--force"], cwd=course,
                              env=env, capture_output=True, text=True, timeout=timeout_s)
        code, output = done.returncode, done.stdout[-4000:] + done.stderr[-4000:]
    except subprocess.TimeoutExpired:
        code, output = 124, f"timed out after {timeout_s:.0f} s"
    # nbgrader logs a kernel's or the gradebook's failure and may still exit 0
    if code == 0 and ("[AutogradeApp | ERROR]" in output or "database is locked" in output):
        code = 1
    return Graded(student, code, time.perf_counter() - start, output)


if __name__ == "__main__":
    sys.exit(main())
