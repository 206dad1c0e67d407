"""The lessons/ folder is in sync, and `python -m greenlab.course build|check` works end to end.

The first test checks the real lessons; the rest build a fixture instructor notebook in a
temporary folder and check the command line, the out-of-sync failure and that the learner
copy runs top to bottom under nbval.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.course import build, notebook_format as fmt

REPO = Path(__file__).resolve().parent.parent


def test_real_lessons_are_in_sync():
    problems = build.check(REPO / "lessons")
    assert problems == [], "\n".join(problems) + "\nRun: python -m greenlab.course build"


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _run(*args, capsys):
    """Run the command line in-process (the real `python -m` entry is tested once below)."""
    code = build.main(list(args))
    out, err = capsys.readouterr()
    return _Result(code, out, err)


def _run_module(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "greenlab.course", *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )


FIXTURE_CELLS = [
    {"cell_type": "markdown", "metadata": {}, "id": "a1",
     "source": ["# 01 · Demo\n", "\n", "<!-- BEGIN INSTRUCTOR -->\n", "Say the answer is 50.\n",
                "<!-- END INSTRUCTOR -->"]},
    {"cell_type": "code", "metadata": {}, "id": "b2", "execution_count": 3,
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["took 0.0123 s\n"]}],
     "source": ["import greenlab as gl\n", "print('took 0.0123 s')"]},
    {"cell_type": "code", "metadata": {}, "id": "c3", "execution_count": 4, "outputs": [],
     "source": ["def joules_per_gflop(joules, flops):\n",
                "    # BEGIN SOLUTION\n",
                "    return joules / (flops / 1e9)\n",
                "    # LEARNER:\n",
                "    # return None  # replace with your formula\n",
                "    # END SOLUTION"]},
    {"cell_type": "code", "metadata": {}, "id": "d4", "execution_count": 5, "outputs": [],
     "source": ["result = gl.check.joules_per_gflop(joules_per_gflop)\n", "print(result.status)"]},
    {"cell_type": "code", "metadata": {"tags": ["instructor-only"]}, "id": "e5", "execution_count": 6, "outputs": [],
     "source": ["assert result.passed"]},
    {"cell_type": "code", "metadata": {}, "id": "f6", "execution_count": 7,
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["7\n"]}],
     "source": ["# NBVAL_CHECK_OUTPUT\n", "print(3 + 4)"]},
]


@pytest.fixture
def lessons(tmp_path):
    root = tmp_path / "lessons"
    (root / "instructor").mkdir(parents=True)
    nb = {"cells": FIXTURE_CELLS, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 4}
    (root / "instructor" / "01_demo.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root


def test_check_fails_before_build_then_passes_after(lessons, capsys):
    before = _run("--lessons", str(lessons), "check", capsys=capsys)
    assert before.returncode == 1
    assert "lessons/01_demo.ipynb: missing" in before.stdout
    assert "lessons/instructor/01_demo.ipynb: out of sync" in before.stdout  # not normalised yet
    assert "python -m greenlab.course build" in before.stdout

    built = _run("--lessons", str(lessons), "build", capsys=capsys)
    assert built.returncode == 0, built.stderr
    assert "wrote lessons/01_demo.ipynb" in built.stdout

    after = _run_module("--lessons", str(lessons), "check")  # the real entry point
    assert after.returncode == 0, after.stdout + after.stderr
    assert "1 lesson(s) in sync" in after.stdout


def test_build_output_content_and_byte_for_byte_reproducibility(lessons):
    build.build(lessons)
    learner_path, instructor_path = lessons / "01_demo.ipynb", lessons / "instructor" / "01_demo.ipynb"
    first = (learner_path.read_bytes(), instructor_path.read_bytes())
    assert build.build(lessons) == []  # nothing left to change
    learner_path.unlink()
    build.build(lessons)
    assert (learner_path.read_bytes(), instructor_path.read_bytes()) == first

    learner = json.loads(first[0])
    instructor = json.loads(first[1])
    text = "\n".join("".join(c["source"]) for c in learner["cells"])
    assert "Say the answer" not in text and "BEGIN SOLUTION" not in text and "assert result.passed" not in text
    assert "return None  # replace with your formula" in text
    assert "Say the answer" in "".join(instructor["cells"][0]["source"])  # instructor keeps everything
    for nb in (learner, instructor):
        outputs = {c["id"]: c["outputs"] for c in nb["cells"] if c["cell_type"] == "code"}
        assert outputs["01_demo-001"] == []  # timing output stripped
        assert outputs["01_demo-005"][0]["text"] == ["7\n"]  # checked output kept
        counts = {c["id"]: c["execution_count"] for c in nb["cells"] if c["cell_type"] == "code"}
        assert counts.pop("01_demo-005") == 5  # checked cell: its position among code cells
        assert set(counts.values()) == {None}


def test_editing_the_instructor_copy_makes_check_fail_with_a_cell_diff(lessons, capsys):
    build.build(lessons)
    path = lessons / "instructor" / "01_demo.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][5]["source"] = ["# NBVAL_CHECK_OUTPUT\n", "print(3 + 5)"]
    path.write_text(fmt.dumps(nb))
    result = _run("--lessons", str(lessons), "check", capsys=capsys)
    assert result.returncode == 1
    assert "lessons/01_demo.ipynb: out of sync" in result.stdout
    # the learner copy's cell 6: after the launch badges and the install cell (greenlab.course.hosted)
    assert "cell 6 (01_demo-005): source differ(s)" in result.stdout
    assert "-print(3 + 4)" in result.stdout and "+print(3 + 5)" in result.stdout


def test_hand_edited_learner_copy_and_orphans_are_reported(lessons):
    build.build(lessons)
    learner = lessons / "01_demo.ipynb"
    assert '"print(result.status)"' in learner.read_text() and '"7\\n"' in learner.read_text()
    learner.write_text(learner.read_text().replace("replace with your formula", "edited by hand"))
    shutil.copy(learner, lessons / "02_orphan.ipynb")
    problems = build.check(lessons)
    assert any(p.startswith("lessons/01_demo.ipynb: out of sync") for p in problems)
    assert any("02_orphan.ipynb: learner notebook without an instructor copy" in p for p in problems)


def test_broken_markers_give_exit_code_and_message(lessons, capsys):
    path = lessons / "instructor" / "01_demo.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][2]["source"] = ["x = 1\n", "# END SOLUTION"]
    path.write_text(json.dumps(nb))
    assert _run("--lessons", str(lessons), "build", capsys=capsys).returncode == 2
    result = _run("--lessons", str(lessons), "check", capsys=capsys)
    assert result.returncode == 1
    assert "01_demo.ipynb cell 2, line 2: '# END SOLUTION' without" in result.stdout


def test_checked_cell_without_stored_output_is_reported(lessons):
    path = lessons / "instructor" / "01_demo.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][5]["outputs"] = []
    path.write_text(json.dumps(nb))
    build.build(lessons)
    problems = build.check(lessons)
    assert len(problems) == 1
    assert "cell 5 (01_demo-005) is marked # NBVAL_CHECK_OUTPUT but has no stored output" in problems[0]


def test_badly_named_lesson_is_reported(lessons):
    shutil.copy(lessons / "instructor" / "01_demo.ipynb", lessons / "instructor" / "Demo Lesson.ipynb")
    assert any("NN_slug.ipynb" in p for p in build.check(lessons))


def test_learner_copy_runs_under_nbval_and_checked_outputs_are_compared(lessons):
    build.build(lessons)
    learner = lessons / "01_demo.ipynb"
    assert '"print(result.status)"' in learner.read_text() and '"7\\n"' in learner.read_text()
    learner.write_text(learner.read_text().replace('"print(result.status)"',
                                                   '"print(result.status)\\nassert not result.attempted"'))
    # a copy whose stored checked output is wrong must fail: proof that nbval compares it
    (lessons / "wrong").mkdir()
    (lessons / "wrong" / "01_demo.ipynb").write_text(learner.read_text().replace('"7\\n"', '"8\\n"'))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
         "-q", "-o", "addopts=", "01_demo.ipynb", "wrong/01_demo.ipynb"],
        capture_output=True, text=True, cwd=lessons, env=env, timeout=120,
    )
    out = result.stdout
    # each copy's code cells, its install cell first (greenlab.course.hosted): it runs and does nothing
    assert "1 failed, 9 passed" in out, out[-3000:] + result.stderr[-2000:]
    assert "FAILED wrong/01_demo.ipynb::Cell 4" in out
