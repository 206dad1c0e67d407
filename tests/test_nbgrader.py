"""The course as an nbgrader course, graded by the real nbgrader.

Every lesson is exported and generated as an assignment; two lessons are autograded for planted
submissions. Honest work gets the right grade: the instructor's solutions (full marks), the
released notebook untouched (no marks for the exercises, and grading does not crash), one planted
wrong exercise (only its points lost, its feedback showing the checker's hint), right answers in a
style of their own (the quiz answered by the letters shown), and one solution cell with a syntax
error (only that exercise's points lost). Shortcuts get no points for the shortcut: delegating to
the library, rebinding ``gl.check`` in a solution cell, and an answer fitted to the visible cases.
"""

from __future__ import annotations

import getpass
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

pytestmark = pytest.mark.timeout(1500)  # the class is graded in the module fixture

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is in the test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parents[1]
# Lesson -> (exercise function, a typical wrong body for it)
PLANTED = {
    "02": ("accumulate_gradients",
           "for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):\n"
           "        F.cross_entropy(model(xb), yb).backward()\n"
           "    return model"),
    "05": ("co2e_grams", "return kwh * g_per_kwh"),
}
GRADED = sorted(PLANTED)


COLLECTED = getpass.getuser()  # nbgrader's exchange names a submission by its login


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            # nbgrader runs its own helpers (alembic) by name: the environment's bin folder comes first,
            # as in an activated environment
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def _nbgrader(args: list[str], course: Path, strict: bool = True) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("nbgrader")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "nbgrader"]
    done = subprocess.run(cmd + args, cwd=course, env=_env(), capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # the course's config is complete and loads (a missing course id or an unknown option warned on every
    # command); creating the exchange folder on the first release is the one warning nbgrader gives
    log = "\n".join(line for line in (done.stdout + done.stderr).splitlines()
                     if "Creating exchange directory" not in line)
    assert not strict or ("WARNING" not in log and "Exception while loading config" not in log), log[-3000:]
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


# Lesson -> student -> {exercise function: the body of its solution cell's solution block}
_OWN_STYLE = {
    "02": {"accumulate_gradients": "n = x.shape[0]\n"
                                   "    for start in range(0, n, micro_batch_size):\n"
                                   "        xb, yb = x[start:start + micro_batch_size], y[start:start + micro_batch_size]\n"
                                   "        (F.cross_entropy(model(xb), yb) * (len(xb) / n)).backward()\n"
                                   "    return model"},
    "05": {"co2e_grams": "return pue * (g_per_kwh * kwh)"},
}
# Lesson -> student -> [(exercise function, its solution block's new body (None: the released stub),
# code appended to its solution cell)]; each listed exercise must lose its points, and only those.
SHORTCUTS = {
    "02": {
        "shortcuts": [("accumulate_gradients", "return None",  # rebinding the checker in the solution cell
                       "\ngl.check.accumulate_gradients = lambda *a, **k: gl.check.Check('x', 'passed', 'ok')\n"),
                      ("use_groupnorm", None,  # delegating to the library
                       "\nuse_groupnorm = gl.accumulation.groupnorm_instead_of_batchnorm\n")],
        "syntax": [("accumulate_gradients", "return model)", "")],
        "wrapper": [("use_groupnorm",  # a thin wrapper around the library's own implementation
                     "return gl.accumulation.groupnorm_instead_of_batchnorm(model, num_groups)", "")],
    },
    "05": {
        "shortcuts": [("co2e_grams", "return None",  # rebinding the checker module's own helper
                       "\nimport greenlab.course.checks.carbon as _carbon\n"
                       "_carbon.check_function = lambda fn, cases, **k: gl.check.Check('co2e_grams', 'passed', 'ok')\n"),
                      ("best_start_hour",  # fitted to the visible cases
                       "return {(300, 2): 3, (5, 1): 1, (10, 2): 3, (7, 3): 0, (90, 3): 0}[(values[0], hours_needed)]",
                       "")],
    },
}
# the test cell each exercise function is graded by
TEST_OF = {"use_groupnorm": "batchnorm_fix"}
QUIZ_SEED = 20261205


def _shortcut(release: dict, source: dict, lesson: str, student: str) -> dict:
    """The instructor's solutions, with the exercises of ``student``'s shortcuts answered by them."""
    nb = _submission(release, source)
    for name, body, appended in SHORTCUTS[lesson][student]:
        for cell in nb["cells"]:
            text = "".join(cell["source"])
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and re.search(rf"def {name}\(", text):
                replacement = body if body is not None else "return None"
                text = re.sub(r"# BEGIN SOLUTION.*?# END SOLUTION", lambda _: replacement, text, flags=re.DOTALL)
                cell["source"] = text + appended
    return nb


def _own_style(release: dict, source: dict, lesson: str) -> dict:
    """Right answers written otherwise than the instructor's, the quiz answered by option text
    (upper case, a trailing full stop) in the order the course showed it."""
    from greenlab.course.quiz import load, shuffled

    nb = _submission(release, source)
    shown = shuffled(load(lesson), seed=QUIZ_SEED)
    texts = [q.answer if q.kind == "numeric" else [o.text.upper() + "." for o in q.options if o.correct]
             for q in shown.questions]
    texts = [t[0] if isinstance(t, list) and q.kind == "single" else t for t, q in zip(texts, shown.questions)]
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").endswith("quiz-answers"):
            cell["source"] = f"quiz_answers = {texts!r}\n"
    for name, body in _OWN_STYLE[lesson].items():
        for cell in nb["cells"]:
            text = "".join(cell["source"])
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and re.search(rf"def {name}\(", text):
                cell["source"] = re.sub(r"# BEGIN SOLUTION.*?# END SOLUTION", lambda _: body, text, flags=re.DOTALL)
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader-course")
    written = nbgrader_export.export(course, quiz_points=nbgrader_export.QUESTION_POINTS, seed=QUIZ_SEED)
    assert len(written) == len(list((ROOT / "lessons" / "instructor").glob("*.ipynb")))
    _nbgrader(["generate_assignment", "lesson*", "--force"], course)
    for lesson in GRADED:
        (source,) = (course / "source" / f"lesson{lesson}").glob("*.ipynb")
        (release,) = (course / "release" / f"lesson{lesson}").glob("*.ipynb")
        src, rel = nbgrader_export.load(source), nbgrader_export.load(release)
        students = {"solutions": _submission(rel, src), "stubs": rel,
                    "planted": _submission(rel, src, PLANTED[lesson]), "own-style": _own_style(rel, src, lesson)}
        students.update({who: _shortcut(rel, src, lesson, who) for who in SHORTCUTS[lesson]})
        for student, nb in students.items():
            target = course / "submitted" / student / f"lesson{lesson}" / release.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(nb), encoding="utf-8")
        # one learner goes the whole way: release, fetch, submit, collect (the export's own exchange folder)
        _nbgrader(["release_assignment", f"lesson{lesson}", "--force"], course)
        learner = course.parent / f"learner-{lesson}"
        learner.mkdir(exist_ok=True)
        where = [f"--Exchange.root={course / 'exchange'}", f"--course={nbgrader_export.COURSE_ID}"]
        _nbgrader(["fetch_assignment", f"lesson{lesson}", *where], learner, strict=False)  # a learner has no config
        (learner / f"lesson{lesson}" / release.name).write_text(json.dumps(students["solutions"]), encoding="utf-8")
        _nbgrader(["submit", f"lesson{lesson}", *where], learner, strict=False)
        _nbgrader(["collect", f"lesson{lesson}", "--update"], course)
        assert (course / "submitted" / COLLECTED / f"lesson{lesson}" / release.name).exists()
        # the class, graded in parallel processes by the course's own command
        done = subprocess.run([sys.executable, "-m", "greenlab.course", "grade", str(course), f"lesson{lesson}",
                               "--jobs", "2"], env=_env(), capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _nbgrader(["generate_feedback", f"lesson{lesson}", "--force"], course)
    return course


def _score(course: Path, lesson: str, student: str) -> tuple[float, float, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission(f"lesson{lesson}", student)
        (notebook,) = submission.notebooks
        # the autograded part: a cell left to the instructor's hand (the statement) is not scored yet
        auto = [g for g in notebook.grades if not g.needs_manual_grade]
        per_cell = {g.name: g.score for g in auto}
        return sum(g.score or 0 for g in auto), sum(g.max_score for g in auto), per_cell


def _left_to_hand(course: Path, lesson: str, student: str) -> list[str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        (notebook,) = gb.find_submission(f"lesson{lesson}", student).notebooks
        return sorted(g.name for g in notebook.grades if g.needs_manual_grade)


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
            if not grade_id.endswith("quiz-answers"):  # the learner cell, cut before its checker
                assert any(code.startswith(text) for code in learner_code), \
                    f"{source.name} {grade_id}: released cell differs from the learner copy"
        for cell in released["cells"]:  # graded tests are hidden from the learner
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                assert "_grading" not in "".join(cell["source"]) and "HIDDEN" not in "".join(cell["source"])
        graded = nbgrader_export.points(released)
        assert graded, f"{source.name} has no graded cell"
        assert any(k.endswith("quiz-q1") for k in graded), f"{source.name}: knowledge check not graded"


@pytest.mark.parametrize("lesson", GRADED)
@pytest.mark.parametrize("student", ["solutions", COLLECTED])
def test_instructor_solutions_score_full_marks(course, lesson, student):
    score, max_score, per_cell = _score(course, lesson, student)
    assert max_score > 0
    assert score == max_score, {k: v for k, v in per_cell.items() if v is not None and v < 1}
    # the stakeholder statement is the instructor's to mark, by its rubric
    assert _left_to_hand(course, lesson, student) == ([f"{lesson}-stakeholder_statement"] if lesson == "05" else [])


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

    # the feedback shows the checker's own words about this mistake, and not the hidden test's code
    (feedback,) = (course / "feedback" / "planted" / f"lesson{lesson}").glob("*.html")
    (submitted,) = (course / "submitted" / "planted" / f"lesson{lesson}").glob("*.ipynb")
    cell = next(c for c in _solution_cells(nbgrader_export.load(submitted)).values()
                if f"def {name}(" in "".join(c["source"]))
    definition = "".join(cell["source"])  # the solution cell holds the definition only
    namespace: dict = {}
    exec("import torch\nimport torch.nn.functional as F\n" + definition, namespace)
    verdict = getattr(gl.check, name)(namespace[name])
    assert verdict.status == "failed"
    hint = next(d for d in verdict.details if "Hint:" in d).split("Hint:", 1)[1].strip()
    assert html.escape(hint[:40], quote=False) in feedback.read_text(encoding="utf-8")
    # the quiz's salted key shows in no feedback, not even in a failing question's traceback
    (empty,) = (course / "feedback" / "stubs" / f"lesson{lesson}").glob("*.html")
    assert "digest" not in empty.read_text(encoding="utf-8") and "salt" not in empty.read_text(encoding="utf-8")


@pytest.mark.parametrize("lesson", GRADED)
def test_right_answers_in_a_style_of_their_own_score_full_marks(course, lesson):
    score, max_score, per_cell = _score(course, lesson, "own-style")
    assert score == max_score, {k: v for k, v in per_cell.items() if v is not None and v < 1}


@pytest.mark.parametrize("lesson,student", [(lesson, who) for lesson in GRADED for who in SHORTCUTS[lesson]])
def test_a_shortcut_or_a_broken_cell_loses_exactly_that_exercises_points(course, lesson, student):
    names = [TEST_OF.get(name, name) for name, _, _ in SHORTCUTS[lesson][student]]
    score, max_score, per_cell = _score(course, lesson, student)
    lost = {k: v for k, v in per_cell.items() if v is not None and v == 0}
    assert sorted(lost) == sorted(f"{lesson}-{name}-test" for name in names), lost
    assert score == max_score - len(names) * nbgrader_export.EXERCISE_POINTS


def test_quiz_answer_check_grades_by_option_text_whatever_the_display_order():
    from greenlab.course.quiz import load

    questions = load("02").questions
    right = [nbgrader_export._correct_answer(q) for q in questions]
    assert gl.check.quiz_answer("02", right, 1).passed
    wrong = list(right)
    first = questions[0]
    wrong[0] = next(o.text for o in first.options if not o.correct)
    verdict = gl.check.quiz_answer("02", wrong, 1)
    assert verdict.status == "failed"
    assert next(o.feedback for o in first.options if o.text == wrong[0]) in verdict.details
    assert gl.check.quiz_answer("02", [None] * len(questions), 1).status == "not attempted"
    with pytest.raises(ValueError, match="question must be"):
        gl.check.quiz_answer("02", right, 0)


def test_export_refuses_an_unknown_lesson_from_python_and_the_shell(tmp_path, capsys):
    with pytest.raises(ValueError, match="no lesson numbered 42"):
        nbgrader_export.export(tmp_path, only=["42"])
    assert nbgrader_export.main(["--out", str(tmp_path), "--only", "42"]) == 2
    assert "no lesson numbered 42" in capsys.readouterr().err
    assert nbgrader_export.main(["--out", str(tmp_path / "c"), "--only", "02"]) == 0
    assert (tmp_path / "c" / "source" / "lesson02").is_dir() and (tmp_path / "c" / "nbgrader_config.py").is_file()


def test_checker_calls_are_found_in_order():
    src = "def f(x):\n    return x\n\nr = gl.check.alpha(f)\nprint(gl.check.beta(f, 2))\nother.check.gamma(f)\n"
    assert nbgrader_export.checker_calls(src) == [("alpha", "gl.check.alpha(f)"), ("beta", "gl.check.beta(f, 2)")]


def test_an_exercise_cell_is_cut_before_its_checker_and_its_names_get_a_default():
    text = ("def f(x):\n    # BEGIN SOLUTION\n    return x\n    # LEARNER:\n    # return None\n    # END SOLUTION\n\n\n"
            "check = gl.check.tensor_sparsity(f)\nimpl = check.pick(f, abs, 'f')\n")
    answer, follow = nbgrader_export.split_exercise(text)
    assert answer.startswith("def f(x):") and "gl.check" not in answer
    assert follow.splitlines()[1] == "globals().setdefault('f', None)" and "check.pick" in follow
    namespace = {"gl": gl}
    exec(follow, namespace)  # the solution cell did not run: the checker says "not attempted", the library goes on
    assert namespace["check"].status == "not attempted" and namespace["impl"] is abs


def test_graded_tests_are_hidden_tests_that_load_a_fresh_checker(tmp_path):
    (path,) = nbgrader_export.export(tmp_path, only=["15"], quiz_points=1, seed=3)
    nb = nbgrader_export.load(path)
    tests = ["".join(c["source"]) for c in nb["cells"]
             if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution")]
    assert tests and all(nbgrader_export.HIDDEN_BEGIN in t and nbgrader_export.HIDDEN_END in t for t in tests)
    assert all("spec_from_file_location" in t and "grading.py" in t for t in tests)
    assert any("_grading.grade('fedavg_aggregate', fedavg_aggregate)" in t for t in tests)
    # the quiz's key is in no cell: its tests hold salted hashes, its display a fixed order
    from greenlab.course.quiz import load

    quiz_tests = "\n".join(t for t in tests if "grade_quiz" in t)
    for q in load("15").questions:
        for option in q.options:
            assert len(option.text) < 6 or option.text not in quiz_tests  # (a short one may sit in a digest)
    assert any('gl.quiz("15", seed=3)' in "".join(c["source"]) for c in nb["cells"])
    # the statement is marked by hand, by the rubric that follows it
    statement = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "14-stakeholder_statement")
    assert statement["metadata"]["nbgrader"]["grade"] and statement["metadata"]["nbgrader"]["solution"]
    assert not any("grade('stakeholder_statement'" in t for t in tests)


def test_the_quiz_is_left_ungraded_by_default(tmp_path):
    (path,) = nbgrader_export.export(tmp_path, only=["15"])
    graded = nbgrader_export.points(nbgrader_export.load(path))
    assert graded and not any("quiz" in k for k in graded)
    with pytest.raises(ValueError, match="quiz_points"):
        nbgrader_export.export(tmp_path, only=["15"], quiz_points=-1)


def test_the_config_names_the_course_and_no_absolute_path(tmp_path):
    nbgrader_export.export(tmp_path / "a", only=["02"])
    config = (tmp_path / "a" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "course_id = 'greenlab'" in config and str(tmp_path) not in config
    assert "GREENLAB_GRADING" in config and "GREENLAB_LEADERBOARD_DIR" in config


def test_grading_mode_runs_only_the_cells_a_grade_needs(monkeypatch):
    import nbformat

    from greenlab.course.nbgrader_preprocessor import SKIPPED, SkipExperiments

    def cell(source, **nbgrader):
        made = nbformat.v4.new_code_cell(source)
        if nbgrader:
            made.metadata["nbgrader"] = nbgrader
        return made

    cells = [cell("import greenlab as gl\nsettings = gl.setup()"),
             cell("data = load()\nrun = train(data)"),                           # the statement cites it
             cell("sweep = [train(data) for _ in range(9)]"),                    # no grade needs it
             cell("def helper(t):\n    return t * 2"),                           # definitions always run
             cell("def f(x):\n    y = x + 1\n    return helper(y)", solution=True, grade=False),
             cell("check = gl.check.f(f)\nplot(sweep)"),                         # the lesson's own use
             cell("gl.check.f(f)", grade=True, solution=False, points=2),
             cell("def my_statement():\n    return f'{run.joules} J'", solution=True, grade=True, points=6),
             cell("print(my_statement())")]                                      # shows the hand-graded answer
    nb = nbformat.v4.new_notebook(cells=cells)
    monkeypatch.setenv("GREENLAB_GRADING", "1")
    SkipExperiments().preprocess(nb, {})
    skipped = [i for i, c in enumerate(nb.cells) if c.source == SKIPPED]
    assert skipped == [2, 5]
    monkeypatch.setenv("GREENLAB_GRADING", "0")
    nb = nbformat.v4.new_notebook(cells=[cell("a = 1"), cell("b = 2")])
    SkipExperiments().preprocess(nb, {})
    assert all(c.source != SKIPPED for c in nb.cells)
