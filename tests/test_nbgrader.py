"""The course as an nbgrader course, graded by the real nbgrader.

Every lesson is exported and generated as an assignment; two lessons are autograded for three
submissions: the instructor's solutions (full marks), the released notebook untouched (no marks for
the exercises, and grading does not crash) and the solutions with one planted wrong exercise (only
that exercise's points lost, its feedback showing the checker's hint).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import greenlab as gl
from greenlab.course import nbgrader as nbgrader_export

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
# Lesson -> (exercise function, a typical wrong body for it)
PLANTED = {
    "03": ("accumulate_gradients",
           "for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):\n"
           "        F.cross_entropy(model(xb), yb).backward()\n"
           "    return model"),
    "06": ("co2e_grams", "return kwh * g_per_kwh"),
}
GRADED = sorted(PLANTED)


def _nbgrader(args: list[str], course: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           # nbgrader runs its own helpers (alembic) by name: the environment's bin folder comes first,
           # as in an activated environment
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    exe = Path(sys.executable).with_name("nbgrader")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    done = subprocess.run(cmd + args, cwd=course, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _solution_cells(nb: dict) -> dict[str, dict]:
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def _submission(release: dict, source: dict, planted: tuple[str, str] | None = None) -> dict:
    """The released notebook with every solution cell answered as the instructor did (or, with
    ``planted``, one exercise answered wrongly)."""
    answers = _solution_cells(source)
    nb = json.loads(json.dumps(release))
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution"):
            continue
        text = "".join(answers[meta["grade_id"]]["source"])
        if planted and re.search(rf"def {planted[0]}\(", text):
            text = re.sub(r"# BEGIN SOLUTION.*?# END SOLUTION", lambda _: planted[1], text, flags=re.DOTALL)
        cell["source"] = text
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader-course")
    written = nbgrader_export.export(course)
    assert len(written) == len(list((ROOT / "lessons" / "instructor").glob("*.ipynb")))
    _nbgrader(["generate_assignment", "lesson*", "--force"], course)
    for lesson in GRADED:
        (source,) = (course / "source" / f"lesson{lesson}").glob("*.ipynb")
        (release,) = (course / "release" / f"lesson{lesson}").glob("*.ipynb")
        src, rel = nbgrader_export.load(source), nbgrader_export.load(release)
        for student, planted in (("solutions", None), ("stubs", None), ("planted", PLANTED[lesson])):
            target = course / "submitted" / student / f"lesson{lesson}" / release.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nb = rel if student == "stubs" else _submission(rel, src, planted)
            target.write_text(json.dumps(nb), encoding="utf-8")
        _nbgrader(["autograde", f"lesson{lesson}", "--force"], course)
        _nbgrader(["generate_feedback", f"lesson{lesson}", "--force"], course)
    return course


def _score(course: Path, lesson: str, student: str) -> tuple[float, float, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission(f"lesson{lesson}", student)
        (notebook,) = submission.notebooks
        per_cell = {g.name: g.score for g in notebook.grades}
        return submission.score, submission.max_score, per_cell


def test_every_lesson_becomes_an_assignment_whose_release_runs_like_the_learner_copy(course):
    for source in sorted((course / "source").glob("lesson*/*.ipynb")):
        release = course / "release" / source.parent.name / source.name
        assert release.exists(), f"nbgrader did not release {source.name}"
        released = nbgrader_export.load(release)
        learner = json.loads((ROOT / "lessons" / source.name).read_text(encoding="utf-8"))
        learner_code = {"".join(c["source"]) for c in learner["cells"] if c["cell_type"] == "code"}
        for grade_id, cell in _solution_cells(released).items():
            text = "".join(cell["source"])
            assert "BEGIN SOLUTION" not in text and "greenlab" not in cell["metadata"]
            if not grade_id.endswith("quiz-answers"):
                assert text in learner_code, f"{source.name} {grade_id}: released cell differs from the learner copy"
        graded = nbgrader_export.points(released)
        assert graded, f"{source.name} has no graded cell"
        assert any(k.endswith("quiz-q1") for k in graded), f"{source.name}: knowledge check not graded"


@pytest.mark.parametrize("lesson", GRADED)
def test_instructor_solutions_score_full_marks(course, lesson):
    score, max_score, per_cell = _score(course, lesson, "solutions")
    assert max_score > 0
    assert score == max_score, {k: v for k, v in per_cell.items() if v is not None and v < 1}


@pytest.mark.parametrize("lesson", GRADED)
def test_released_stubs_score_nothing_for_exercises_and_still_grade(course, lesson):
    score, max_score, per_cell = _score(course, lesson, "stubs")
    exercise_tests = {k: v for k, v in per_cell.items() if k.endswith("-test")}
    assert exercise_tests and all(v == 0 for v in exercise_tests.values()), exercise_tests
    assert score == 0 and max_score > 0


@pytest.mark.parametrize("lesson", GRADED)
def test_one_planted_wrong_exercise_loses_exactly_its_points_with_the_hint(course, lesson):
    name, wrong_body = PLANTED[lesson]
    score, max_score, per_cell = _score(course, lesson, "planted")
    lost = {k: v for k, v in per_cell.items() if v is not None and v == 0}
    assert list(lost) == [f"{lesson}-{name}-test"], lost
    assert score == max_score - nbgrader_export.EXERCISE_POINTS

    # the feedback shows the checker's own words about this mistake
    (feedback,) = (course / "feedback" / "planted" / f"lesson{lesson}").glob("*.html")
    (submitted,) = (course / "submitted" / "planted" / f"lesson{lesson}").glob("*.ipynb")
    cell = next(c for c in _solution_cells(nbgrader_export.load(submitted)).values()
                if f"def {name}(" in "".join(c["source"]))
    text = "".join(cell["source"])
    namespace: dict = {}
    definition = text[:text.rindex("\n", 0, text.index("gl.check"))]  # the cell up to its checker call
    exec("import torch\nimport torch.nn.functional as F\n" + definition, namespace)
    verdict = getattr(gl.check, name)(namespace[name])
    assert verdict.status == "failed"
    hint = next(d for d in verdict.details if "Hint:" in d).split("Hint:", 1)[1].strip()
    assert html.escape(hint[:40], quote=False) in feedback.read_text(encoding="utf-8")


def test_quiz_answer_check_grades_by_option_text_whatever_the_display_order():
    from greenlab.course.quiz import load

    questions = load("03").questions
    right = [nbgrader_export._correct_answer(q) for q in questions]
    assert gl.check.quiz_answer("03", right, 1).passed
    wrong = list(right)
    first = questions[0]
    wrong[0] = next(o.text for o in first.options if not o.correct)
    verdict = gl.check.quiz_answer("03", wrong, 1)
    assert verdict.status == "failed"
    assert next(o.feedback for o in first.options if o.text == wrong[0]) in verdict.details
    assert gl.check.quiz_answer("03", [None] * len(questions), 1).status == "not attempted"
    with pytest.raises(ValueError, match="question must be"):
        gl.check.quiz_answer("03", right, 0)


def test_export_refuses_an_unknown_lesson_from_python_and_the_shell(tmp_path, capsys):
    with pytest.raises(ValueError, match="no lesson numbered 42"):
        nbgrader_export.export(tmp_path, only=["42"])
    assert nbgrader_export.main(["--out", str(tmp_path), "--only", "42"]) == 2
    assert "no lesson numbered 42" in capsys.readouterr().err
    assert nbgrader_export.main(["--out", str(tmp_path / "c"), "--only", "03"]) == 0
    assert (tmp_path / "c" / "source" / "lesson03").is_dir() and (tmp_path / "c" / "nbgrader_config.py").is_file()


def test_checker_calls_are_found_in_order():
    src = "def f(x):\n    return x\n\nr = gl.check.alpha(f)\nprint(gl.check.beta(f, 2))\nother.check.gamma(f)\n"
    assert nbgrader_export.checker_calls(src) == [("alpha", "gl.check.alpha(f)"), ("beta", "gl.check.beta(f, 2)")]
