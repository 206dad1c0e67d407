"""How long does nbgrader take to grade one submission of a lesson, in grading mode?

    python benchmarks/grading_speed.py [--lessons 02 05 | --all] [--repeats 1] [--slowest 3]

Exports the lessons as an nbgrader course in a temporary folder (``greenlab.course.nbgrader``,
whose config turns on grading mode, ``GREENLAB_GRADING=1``), generates the assignments, submits
the instructor's solutions as one student and times ``nbgrader autograde`` for it, per lesson, as
``python -m greenlab.course grade`` runs it (``greenlab.course.class_grading``; the process's
wall-clock, kernel start included). Prints per lesson the seconds, the points the solutions got
(of the most), the CPU seconds nbgrader and its kernel used (robust to other work on the
machine, unlike wall-clock), the code cells grading mode ran and those of them that ended in an error (the
instructor's solutions should leave none), the cells it showed as the submission saved them instead
of running them (under a hand-graded answer: the learner's own run), the slowest cells (from the
execution times nbclient records in the graded notebook), and the machine's load average: other work on the machine stretches every figure. Ends with a table.
With ``--class-size N``, the same submission is also graded as a class of N students,
``--jobs`` processes at a time, and the class's wall-clock per submission is printed beside the
one-alone figure: the throughput an instructor grading a class sees. The target is about 10 s per
lesson on 2 cores; this prints, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from greenlab.course import class_grading  # noqa: E402  (after the path, so this checkout's greenlab)
from greenlab.course import nbgrader as export  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", nargs="+", default=["02", "05"], metavar="NN")
    parser.add_argument("--all", action="store_true", help="every lesson")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--slowest", type=int, default=3, metavar="N", help="cells to name per lesson")
    parser.add_argument("--class-size", type=int, default=0, metavar="N",
                        help="also grade a class of N copies of the submission, --jobs processes at a time, "
                             "and print the class's wall-clock per submission (throughput)")
    parser.add_argument("--jobs", type=int, default=2, help="autograde processes at a time for --class-size")
    args = parser.parse_args(argv)
    if args.all:
        args.lessons = [p.name[:2] for p in sorted((ROOT / "lessons" / "instructor").glob("[0-9][0-9]_*.ipynb"))]
    os.environ["PYTHONPATH"] = env_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": env_path,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    table = []
    exe = Path(sys.executable).with_name("nbgrader")
    nbgrader = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    with tempfile.TemporaryDirectory(prefix="greenlab-grading-") as tmp, \
            tempfile.TemporaryDirectory(prefix="greenlab-grading-secrets-") as secrets:
        course = Path(tmp)
        # this throw-away course's grading secret goes with it, not among the user's own
        os.environ[export.SECRETS_VARIABLE] = env[export.SECRETS_VARIABLE] = secrets
        export.export(course, only=args.lessons, quiz_points=1)
        subprocess.run(nbgrader + ["generate_assignment", "lesson*", "--force"], cwd=course, env=env, check=True,
                       capture_output=True)
        for lesson in args.lessons:
            name = export.assignment_name(lesson)
            (source,) = (course / "source" / name).glob("*.ipynb")
            (release,) = (course / "release" / name).glob("*.ipynb")
            answers = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
                       for c in export.load(source)["cells"] if c["metadata"].get("nbgrader", {}).get("solution")}
            nb = export.load(release)
            for cell in nb["cells"]:
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                if grade_id in answers:
                    cell["source"] = answers[grade_id]
            target = course / "submitted" / "timed" / name / release.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(nb), encoding="utf-8")
            times, cpu = [], []
            for _ in range(args.repeats):
                before = _children_cpu_seconds()
                (done,) = class_grading.grade_class(course, name, jobs=1, only=["timed"])
                times.append(done.seconds)
                cpu.append(_children_cpu_seconds() - before)
                if not done.ok:
                    print(f"lesson {lesson}: autograde failed\n{done.output[-2000:]}")
                    return 1
            per_student = None
            if args.class_size:
                per_student = _class_throughput(course, name, target, args.class_size, args.jobs)
            errors = len(re.findall(r"ERROR", done.output))
            load = os.getloadavg()[0]
            score, most = _score(course, name)
            graded = next((course / "autograded" / "timed" / name).glob("*.ipynb"))
            timed_cells = _slowest(export.load(graded), None)
            cells, in_cells = timed_cells[:args.slowest], sum(seconds for _, seconds in timed_cells)
            ran, code_cells, failed, shown = _cells_run(export.load(graded))
            print(f"lesson {lesson}: {min(times):.1f} s per submission (best of {len(times)}; {in_cells:.1f} s of it "
                  f"in the notebook's cells; {min(cpu):.1f} CPU s, nbgrader and its kernel together), "
                  + (f"{per_student[0]:.1f} s ({per_student[1]:.1f} CPU s) per submission in a class of "
                     f"{args.class_size} graded by {args.jobs} processes at a time (wall-clock / submissions); "
                     if per_student else "")
                  + f"{score:g} of {most:g} autograded points, {errors} error line(s) in nbgrader's log; "
                  f"{ran} of {code_cells} code cells run, "
                  f"{len(failed)} ended in an error{' (' + ', '.join(failed) + ')' if failed else ''}; "
                  f"{shown} shown as submitted, not run; load average {load:.1f} on {os.cpu_count()} CPUs; slowest cells: "
                  + ", ".join(f"{cell} {seconds:.1f} s" for cell, seconds in cells))
            table.append((lesson, min(times), min(cpu), in_cells, per_student, score, most, f"{ran} / {code_cells}",
                          len(failed), shown, load))
    throughput = f"s per submission, class of {args.class_size}, {args.jobs} at a time | " if args.class_size else ""
    print(f"\n| lesson | s per submission (one alone) | CPU s | s in cells | {throughput}autograded points "
          "| code cells run | cells in error | shown as submitted | load average |\n|" + " --- |" * (9 + bool(args.class_size)))
    for lesson, seconds, cpu_s, in_cells, per_student, score, most, ran, failed, shown, load in table:
        print(f"| {lesson} | {seconds:.1f} | {cpu_s:.1f} | {in_cells:.1f} | "
              + (f"{per_student[0]:.1f} ({per_student[1]:.1f} CPU s) | " if args.class_size else "")
              + f"{score:g} / {most:g} | {ran} | {failed} | {shown} | {load:.1f} |")
    return 0


def _class_throughput(course: Path, assignment: str, submission: Path, size: int, jobs: int) -> tuple[float, float]:
    """(seconds, CPU seconds) per submission when ``size`` copies of ``submission`` are graded as a
    class by ``python -m greenlab.course grade``'s ``grade_class``, ``jobs`` processes at a time: the
    class's wall-clock (and its processes' CPU time) over ``size``."""
    import shutil
    import time

    names = [f"class{i:02d}" for i in range(1, size + 1)]
    for student in names:
        target = course / "submitted" / student / assignment / submission.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(submission, target)
    start, cpu = time.perf_counter(), _children_cpu_seconds()
    done = class_grading.grade_class(course, assignment, jobs=jobs, only=names)
    seconds, cpu = time.perf_counter() - start, _children_cpu_seconds() - cpu
    failed = [d.student for d in done if not d.ok]
    if failed:
        raise SystemExit(f"{assignment}: the class's autograde failed for {', '.join(failed)}\n{done[0].output[-2000:]}")
    return seconds / size, cpu / size


def _children_cpu_seconds() -> float:
    """User and system CPU seconds of this process's finished children and theirs (nbgrader and
    the kernels it started and waited for): unlike wall-clock, hardly stretched by other work on
    the machine, and on an idle machine a single-threaded grade's wall-clock is about its CPU time."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _score(course: Path, assignment: str) -> tuple[float, float]:
    """The autograded points the timed submission got, of the most (the hand-graded statement,
    not yet marked, left out): from nbgrader's gradebook."""
    from nbgrader.api import Gradebook  # lazy: nbgrader is needed only by this benchmark

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        submission = book.find_submission(assignment, "timed")
        auto = [grade for notebook in submission.notebooks for grade in notebook.grades
                if grade.auto_score is not None]
        return sum(g.auto_score for g in auto), sum(g.max_score for g in auto)


def _slowest(nb: dict, count: int | None) -> list[tuple[str, float]]:
    """The ``count`` (None: all) slowest cells of an executed notebook (id, seconds), from
    nbclient's timing."""
    found = []
    for cell in nb["cells"]:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if start and end:
            seconds = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                       - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
            found.append((cell.get("id", "?"), seconds))
    return sorted(found, key=lambda item: -item[1])[:count]


def _cells_run(nb: dict) -> tuple[int, int, list[str], int]:
    """(code cells run, code cells, ids of the cells that ended in an error, cells shown as the
    submission saved them) of a graded notebook. Grading mode replaces a cell it leaves out with its
    comment (``nbgrader_preprocessor.SKIPPED``) and tags the cells it shows or keeps unrun."""
    from greenlab.course.nbgrader_preprocessor import NOT_RUN_HEADER, SHOWN_HEADER, SKIP_TAG, SKIPPED  # lazy: nbgrader

    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    ran = [c for c in code if "".join(c["source"]) != SKIPPED and SKIP_TAG not in c.get("metadata", {}).get("tags", [])]
    failed = [c.get("id", "?") for c in ran if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    shown = [c for c in code if any("".join(o.get("text", "")).startswith((SHOWN_HEADER, NOT_RUN_HEADER))
                                    for o in c.get("outputs", []))]
    return len(ran), len(code), failed, len(shown)


if __name__ == "__main__":
    sys.exit(main())
