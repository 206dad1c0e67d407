"""How long does nbgrader take to grade one submission of a lesson, in grading mode?

    python benchmarks/grading_speed.py [--lessons 02 05 | --all] [--repeats 1] [--slowest 3]

Exports the lessons as an nbgrader course in a temporary folder (``greenlab.course.nbgrader``,
whose config turns on grading mode, ``GREENLAB_GRADING=1``), generates the assignments, submits
the instructor's solutions as one student and times ``nbgrader autograde`` for it, per lesson, as
``python -m greenlab.course grade`` runs it (``greenlab.course.class_grading``; the process's
wall-clock, kernel start included). Prints per lesson the seconds, the points the solutions got
(of the most), the slowest cells (from the execution times nbclient records in the graded
notebook), whether the stakeholder statement's instant check passed against the run's facts, and
the machine's load average: other work on the machine stretches every figure. Ends with a table.
The target is about 10 s per lesson on 2 cores; this prints, it does not judge.
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
    args = parser.parse_args(argv)
    if args.all:
        args.lessons = [p.name[:2] for p in sorted((ROOT / "lessons" / "instructor").glob("[0-9][0-9]_*.ipynb"))]
    os.environ["PYTHONPATH"] = env_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": env_path,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    table = []
    exe = Path(sys.executable).with_name("nbgrader")
    nbgrader = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    with tempfile.TemporaryDirectory(prefix="greenlab-grading-") as tmp:
        course = Path(tmp)
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
            times = []
            for _ in range(args.repeats):
                (done,) = class_grading.grade_class(course, name, jobs=1, only=["timed"])
                times.append(done.seconds)
                if not done.ok:
                    print(f"lesson {lesson}: autograde failed\n{done.output[-2000:]}")
                    return 1
            errors = len(re.findall(r"ERROR", done.output))
            load = os.getloadavg()[0]
            score, most = _score(course, name)
            graded = next((course / "autograded" / "timed" / name).glob("*.ipynb"))
            timed_cells = _slowest(export.load(graded), None)
            cells, in_cells = timed_cells[:args.slowest], sum(seconds for _, seconds in timed_cells)
            statement = _statement_verdict(export.load(graded))
            print(f"lesson {lesson}: {min(times):.1f} s per submission (best of {len(times)}; {in_cells:.1f} s of it "
                  f"in the notebook's cells), "
                  f"{score:g} of {most:g} autograded points, {errors} error line(s) in nbgrader's log; "
                  f"load average {load:.1f} on {os.cpu_count()} CPUs; statement check: {statement}; slowest cells: "
                  + ", ".join(f"{cell} {seconds:.1f} s" for cell, seconds in cells))
            table.append((lesson, min(times), in_cells, score, most, load, statement))
    print("\n| lesson | s per submission | s in cells | autograded points | load average | statement check |\n"
          "| --- | --- | --- | --- | --- | --- |")
    for lesson, seconds, in_cells, score, most, load, statement in table:
        print(f"| {lesson} | {seconds:.1f} | {in_cells:.1f} | {score:g} / {most:g} | {load:.1f} | {statement} |")
    return 0


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


def _statement_verdict(nb: dict) -> str:
    """"passed" or "failed" when the graded notebook shows the stakeholder statement's check, else "-"."""
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
            match = re.search(r"stakeholder_statement (passed|failed|not attempted)", text)
            if match:
                return match.group(1) if match.group(1) != "failed" else "failed: " + " ".join(text.split())[:400]
    return "-"


if __name__ == "__main__":
    sys.exit(main())
