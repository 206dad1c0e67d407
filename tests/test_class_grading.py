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


def test_the_class_is_shared_out_among_the_processes_and_a_locked_share_is_graded_again_alone(tmp_path,
                                                                                              monkeypatch):
    for who in ("al", "bo", "cy", "di", "ed"):
        (tmp_path / "submitted" / who / "lesson03").mkdir(parents=True)
    shares, calls = [], []

    def autograde(course, assignment, share, timeout_s):
        shares.append(list(share))
        calls.append(share)
        locked = len(calls) == 1  # the first process found the gradebook locked for its last student
        return [class_grading.Graded(s, 1 if locked and s == share[-1] else 0, 1.0,
                                     "database is locked" if locked else "", len(share)) for s in share]

    monkeypatch.setattr(class_grading, "_autograde", autograde)
    done = class_grading.grade_class(tmp_path, "lesson03", jobs=2)
    assert [d.student for d in done] == ["al", "bo", "cy", "di", "ed"] and all(d.ok for d in done)
    assert sorted(map(tuple, shares[:2])) == [("al", "cy", "ed"), ("bo", "di")]
    assert len(shares) == 3 and len(shares[2]) == 1  # the locked student, alone
    shares.clear()
    class_grading.grade_class(tmp_path, "lesson03", jobs=9, only=["bo", "al"])
    assert sorted(map(tuple, shares)) == [("al",), ("bo",)]  # no more processes than students
