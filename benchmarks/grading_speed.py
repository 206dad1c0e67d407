"""How long does nbgrader take to grade one submission of a lesson, in grading mode?

    python benchmarks/grading_speed.py [--lessons 03 06] [--repeats 1]

Exports the lessons as an nbgrader course in a temporary folder (``greenlab.course.nbgrader``,
whose config turns on grading mode, ``GREENLAB_GRADING=1``), generates the assignments, submits
the instructor's solutions as one student and times ``nbgrader autograde`` for it, per lesson
(the process's wall-clock, kernel start included). Prints the seconds per lesson and the machine's
load average beside them: other work on the machine stretches every figure. The target is about
10 s per lesson on 2 cores; this prints, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from greenlab.course import nbgrader as export  # noqa: E402  (after the path, so this checkout's greenlab)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", nargs="+", default=["03", "06"], metavar="NN")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
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
                start = time.perf_counter()
                done = subprocess.run(nbgrader + ["autograde", name, "--student", "timed", "--force"], cwd=course,
                                      env=env, capture_output=True, text=True)
                times.append(time.perf_counter() - start)
                if done.returncode != 0:
                    print(f"lesson {lesson}: autograde failed\n{done.stderr[-2000:]}")
                    return 1
            errors = len(re.findall(r"ERROR", done.stdout + done.stderr))
            load = os.getloadavg()[0]
            print(f"lesson {lesson}: {min(times):.1f} s per submission (best of {len(times)}), "
                  f"{errors} error line(s) in nbgrader's log; load average {load:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
