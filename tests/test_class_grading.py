"""``python -m greenlab.course grade``: every student of an assignment autograded by nbgrader in
parallel processes (the real run is in tests/test_nbgrader.py; these check the command's edges)."""

import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.course import class_grading

ROOT = Path(__file__).resolve().parents[1]


def test_students_are_the_submitted_folders_of_the_assignment(tmp_path):
    for who in ("bo", "al"):
        (tmp_path / "submitted" / who / "lesson02").mkdir(parents=True)
    (tmp_path / "submitted" / "cy" / "lesson05").mkdir(parents=True)
    assert class_grading.students(tmp_path, "lesson02") == ["al", "bo"]


def test_bad_jobs_and_an_empty_class_are_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="jobs"):
        class_grading.grade_class(tmp_path, "lesson02", jobs=0)
    with pytest.raises(ValueError, match="no submissions of lesson02"):
        class_grading.grade_class(tmp_path, "lesson02")
    assert class_grading.main([str(tmp_path), "lesson02"]) == 2
    assert "no submissions" in capsys.readouterr().err


def test_the_command_is_reachable_beside_build_check_and_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "greenlab.course", "grade", str(tmp_path), "lesson02"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no submissions" in done.stderr
