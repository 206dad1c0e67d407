"""Grade a class: nbgrader's autograde for every student of an assignment, in parallel processes.

    python -m greenlab.course grade COURSE_DIR lesson03 [--jobs N] [--student NAME ...]

``COURSE_DIR`` is an nbgrader course written by ``python -m greenlab.course.nbgrader`` (its config
turns grading mode on: the lessons run at their smallest size and write to no class leaderboard).
The students' ``submitted/<student>/<assignment>`` are shared out among ``N`` processes, each one
``nbgrader autograde <assignment>`` for its share (``--CourseDirectory.student_id_exclude`` names
everyone else), so each process pays nbgrader's own start once for several students; every
submission still gets a kernel of its own. A student counts as graded when nbgrader wrote the
autograded notebook and logged no error about it. nbgrader's gradebook is one SQLite file, so the
students of a process that found it locked and were not graded are graded again, alone, at the end.
Prints one line per student (how many its process graded and their average seconds, and the error's
last line when it failed) and returns 0 when every student was graded.
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
from greenlab.course.grading import SECRET_VARIABLE


@dataclass
class Graded:
    """One student's autograde: the exit code of the process that graded it, its seconds (the
    process's, shared equally among the ``batch`` students it graded) and the tail of its output."""

    student: str
    returncode: int
    seconds: float
    output: str
    batch: int = 1

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def students(course: str | os.PathLike, assignment: str) -> list[str]:
    """The students with a submission of ``assignment`` in ``course``, sorted."""
    root = Path(course) / "submitted"
    return sorted(p.parent.name for p in root.glob(f"*/{assignment}") if p.is_dir())


def grade_class(course: str | os.PathLike, assignment: str, jobs: int = 2,
                only: list[str] | None = None, timeout_s: float = 1800) -> list[Graded]:
    """Autograde every student of ``assignment`` (or ``only`` those), shared out among ``jobs``
    processes; one result per student, in the order of :func:`students` (or ``only``).
    ``timeout_s``: the most one student may take (a process gets that times its students)."""
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
    shares = [names[i::jobs] for i in range(min(jobs, len(names)))]
    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        graded = {r.student: r for share in pool.map(lambda s: _autograde(course, assignment, s, timeout_s), shares)
                  for r in share}
    retried = [s for s in names if not graded[s].ok and "locked" in graded[s].output]
    if retried:  # the gradebook was busy: once more, alone
        graded.update({r.student: r for r in _autograde(course, assignment, retried, timeout_s)})
    return [graded[s] for s in names]


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
        print(f"{r.student}: {r.seconds:.1f} s (the average of {r.batch} graded by its process){tail}")
    failed = [r.student for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} students graded with {args.jobs} process(es)"
          + (f"; not graded: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _autograde(course, assignment: str, share: list[str], timeout_s: float) -> list[Graded]:
    """One ``nbgrader autograde`` process for the students in ``share``; a result for each."""
    exe = Path(sys.executable).with_name("nbgrader")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    env = {**os.environ, "GREENLAB_GRADING": os.environ.get("GREENLAB_GRADING", "1"),
           # nbgrader runs its helpers (alembic) by name: the environment's bin folder first
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    # a secret in nbgrader's starting environment could be read by the learner's kernel, its child
    # (/proc/<parent>/environ): the grader reads the course's secret from its file instead
    env.pop(SECRET_VARIABLE, None)
    if len(share) == 1:
        which = ["--student", share[0]]
    else:
        others = [s for s in students(course, assignment) if s not in share]
        which = ["--CourseDirectory.student_id=*", f"--CourseDirectory.student_id_exclude={','.join(others)}"]
    start, started = time.perf_counter(), time.time()
    try:
        done = subprocess.run(cmd + ["autograde", assignment, *which, "--force"], cwd=course, env=env,
                              capture_output=True, text=True, timeout=timeout_s * len(share))
        code, output = done.returncode, done.stdout[-4000:] + done.stderr[-4000:]
        full = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        code, output, full = 124, f"timed out after {timeout_s * len(share):.0f} s", ""
    seconds = (time.perf_counter() - start) / len(share)
    errors = [line for line in full.splitlines() if "[AutogradeApp | ERROR]" in line or "database is locked" in line]
    results = []
    for student in share:
        # graded: nbgrader wrote its autograded notebook now (it removes a failed student's) and logged
        # no error naming it; a process for one student also exited 0 and logged no error at all (nbgrader
        # logs a kernel's or the gradebook's failure and may still exit 0)
        fresh = any(p.stat().st_mtime >= started - 1
                    for p in (Path(course) / "autograded" / student / assignment).glob("*.ipynb"))
        named = [line for line in errors if f"{os.sep}{student}{os.sep}" in line or f"'{student}'" in line]
        ok = fresh and not named and (len(share) > 1 or (code == 0 and not errors))
        results.append(Graded(student, 0 if ok else (code or 1), seconds, output, len(share)))
    return results


if __name__ == "__main__":
    sys.exit(main())
