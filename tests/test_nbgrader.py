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

import contextlib
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
from greenlab.course import checks
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


@pytest.fixture(scope="module", autouse=True)
def secrets_folder(tmp_path_factory):
    """The grading secrets of the courses these tests export go to a folder of the tests' own
    (outside every course), not the user's."""
    folder = tmp_path_factory.mktemp("grading-secrets")
    saved = os.environ.get(nbgrader_export.SECRETS_VARIABLE)
    os.environ[nbgrader_export.SECRETS_VARIABLE] = str(folder)
    yield folder
    if saved is None:
        del os.environ[nbgrader_export.SECRETS_VARIABLE]
    else:
        os.environ[nbgrader_export.SECRETS_VARIABLE] = saved


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
    assert any("_grading.grade('fedavg_aggregate', fedavg_aggregate, seed=_seed)" in t for t in tests)
    # each checker's test takes the seed the grader writes in while it runs; the notebook holds none
    assert all(nbgrader_export.SEED_LINE in t for t in tests if "_grading.grade(" in t)
    # the quiz's key is in no cell: its tests hold salted hashes, its display a fixed order
    from greenlab.course.quiz import load

    quiz_tests = "\n".join(t for t in tests if "grade_quiz" in t)
    for q in load("15").questions:
        for option in q.options:
            assert len(option.text) < 6 or option.text not in quiz_tests  # (a short one may sit in a digest)
    assert any('gl.quiz("15", seed=3)' in "".join(c["source"]) for c in nb["cells"])
    # the statement is marked by hand, by the rubric that follows it
    statement = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "15-stakeholder_statement")
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


def test_grading_mode_runs_only_the_cells_a_grade_needs_and_shows_the_learners_own_run(monkeypatch):
    import nbformat

    from greenlab.course.nbgrader_preprocessor import (
        NOT_RUN_HEADER, SHOWN_HEADER, SKIP_TAG, SKIPPED, ClearOutputKeepingRuns, SkipExperiments)

    def cell(source, outputs=(), tags=(), **nbgrader):
        made = nbformat.v4.new_code_cell(source, outputs=list(outputs))
        if nbgrader:
            made.metadata["nbgrader"] = nbgrader
        if tags:
            made.metadata["tags"] = list(tags)
        return made

    saved = [nbformat.v4.new_output("stream", name="stdout", text="Training used 4,080 J\n"),
             nbformat.v4.new_output("display_data", data={"text/html": "<script>steal()</script>",
                                                          "text/plain": "stakeholder_statement passed"})]
    cells = [cell("import greenlab as gl\nsettings = gl.setup()"),
             cell("data = load()\nrun = train(data)"),                           # only the statement cites it
             cell("sweep = [train(data) for _ in range(9)]"),                    # no grade needs it
             cell("def helper(t):\n    return t * 2"),                           # a test reads it: runs
             cell("def f(x):\n    y = x + 1\n    return helper(y)", solution=True, grade=False),
             cell("check = gl.check.f(f)\nplot(sweep)"),                         # the lesson's own use
             cell("gl.check.f(f)", tags=[SKIP_TAG], grade=True, solution=False, points=2),  # a learner's tag
             cell("def my_statement():\n    return f'{run.joules} J'", solution=True, grade=True, points=6),
             cell("print(my_statement())", outputs=saved),                       # shows the hand-graded answer
             cell("guess = None", solution=True, grade=True, points=2),          # a prediction, hand-graded
             cell("print(guess, sweep)")]                                        # shows it; not run in the learner's
    cells[8].metadata["greenlab"] = "a learner's own metadata, not a mapping"  # refused, not a crash
    cells[10].metadata["greenlab"] = {"submitted_outputs": "forged: never ran"}  # replaced by what it saved
    nb = nbformat.v4.new_notebook(cells=cells)
    monkeypatch.setenv("GREENLAB_GRADING", "1")
    for preprocessor in (ClearOutputKeepingRuns(), SkipExperiments()):
        nb, _ = preprocessor.preprocess(nb, {})
    assert [i for i, c in enumerate(nb.cells) if c.source == SKIPPED] == [1, 2, 5]
    unrun = [i for i, c in enumerate(nb.cells) if SKIP_TAG in c.metadata.get("tags", [])]
    assert unrun == [7, 8, 9, 10]  # the answers as written and their runs as saved; the learner's tag is gone
    assert nb.cells[7].source.startswith("def my_statement") and nb.cells[9].source == "guess = None"
    (shown,) = nb.cells[8].outputs
    assert shown.text == SHOWN_HEADER + "Training used 4,080 J\nstakeholder_statement passed\n"
    assert "script" not in json.dumps(nb.cells[8].outputs)  # text only reaches the marker's screen
    assert [o.text for o in nb.cells[10].outputs] == [NOT_RUN_HEADER]  # nothing saved: the marker is told
    assert not any("greenlab" in c.metadata for c in nb.cells)  # the set-aside outputs go
    assert all(not c.outputs for i, c in enumerate(nb.cells) if i not in (8, 10))
    monkeypatch.setenv("GREENLAB_GRADING", "0")
    nb = nbformat.v4.new_notebook(cells=[cell("a = 1"), cell("b = 2", tags=[SKIP_TAG], grade=True, solution=False)])
    SkipExperiments().preprocess(nb, {})
    assert all(c.source != SKIPPED for c in nb.cells) and nb.cells[1].metadata["tags"] == []


# --- the grading secret and the seeds it makes ----------------------------------------------------
#
# A one-exercise course (co2e_grams, whose checker draws cases at grade time), autograded by the real
# nbgrader. A learner's solution cell that runs before the hidden test reads everything it can reach:
# the kernel's environment, its parent process's environment, every file under the course (the
# notebook on disk among them); it must find neither the course's grading secret nor the seed its
# test draws with. An answer fitted to the visible cases fails; grading again draws the same cases.

PROBE_EXERCISE = ("def co2e_grams(kwh, g_per_kwh, pue):\n    # BEGIN SOLUTION\n    return kwh * g_per_kwh * pue\n"
                  "    # LEARNER:\n    # return None\n    # END SOLUTION\n\n\ncheck = gl.check.co2e_grams(co2e_grams)\n")
SPY = '''
import json as _json, os as _os, pathlib as _pathlib
_here = _pathlib.Path.cwd()
_root = next(p for p in [_here, *_here.parents] if (p / "nbgrader_config.py").exists())
_found = [_json.dumps(dict(_os.environ))]
try:
    _found.append(_pathlib.Path(f"/proc/{_os.getppid()}/environ").read_bytes().decode(errors="replace"))
except OSError:
    pass
for _path in _root.rglob("*"):
    try:
        _found.append(_path.read_bytes().decode(errors="replace") if _path.is_file() else "")
    except OSError:
        pass
_pathlib.Path(DUMP).write_text("\\n".join(_found))
_seen = _pathlib.Path(SEEN)
_right = co2e_grams


def co2e_grams(kwh, g_per_kwh, pue):  # the right answer, recording every case it is asked
    with _seen.open("a") as _log:
        _log.write(repr((kwh, g_per_kwh, pue)) + "\\n")
    return _right(kwh, g_per_kwh, pue)
'''
# a run whose figures differ at grade time, as a real lesson's do (grading mode: the smallest size, new
# measurements), and a statement about it, graded by hand
PROBE_RUN = ("import os\nrun_joules, run_accuracy = ((3100.0, 0.62) if os.environ.get('GREENLAB_GRADING') == '1' "
             "else (4080.0, 0.71))\n")
PROBE_STATEMENT = ("def my_statement():\n    # BEGIN SOLUTION\n"
                   "    return f'Training used {run_joules:,.0f} J, measured by the energy counter, ±5 %, at "
                   "{run_accuracy:.0%} test accuracy. We recommend it as long as accuracy holds.'\n"
                   "    # LEARNER:\n    # return None\n    # END SOLUTION\n\n\n"
                   "statement_check = gl.check.stakeholder_statement(my_statement(), facts=dict(joules=[run_joules], "
                   "accuracy=[run_accuracy]))\nstatement_check\n")
# the learner's statement, its figures copied from the run they saw (4,080 J, 71 %)
HONEST_STATEMENT = ("return ('Training used 4,080 J, measured by the energy counter, ±5 %, at 71% test accuracy. '\n"
                    "            'We recommend it as long as accuracy holds.')")
FITTED = ("return {(1.0, 100.0, 1.0): 100.0, (0.5, 400.0, 1.5): 300.0, (2.0, 50.0, 1.1): 110.0,\n"
          "            (0.0, 471.84, 1.58): 0.0}[(kwh, g_per_kwh, pue)]")


def _probe_lessons(folder: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Probe"),
                                         nbformat.v4.new_code_cell("import greenlab as gl"),
                                         nbformat.v4.new_code_cell(PROBE_EXERCISE),
                                         nbformat.v4.new_code_cell(PROBE_RUN),
                                         nbformat.v4.new_code_cell(PROBE_STATEMENT)])
    (folder / "instructor").mkdir(parents=True)
    nbformat.write(nb, str(folder / "instructor" / "42_probe.ipynb"))
    return folder


def _probe_submission(release: dict, body: str, appended: str = "") -> dict:
    """The released probe with ``body`` for co2e_grams (and ``appended`` after it) and an honest
    statement."""
    nb = json.loads(json.dumps(release))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            text = "".join(cell["source"])
            if "def co2e_grams(" in text:
                cell["source"] = text.replace("return None", body) + appended
            else:
                cell["source"] = text.replace("return None", HONEST_STATEMENT)
    return nb


def _ran(nb: dict, folder: Path) -> dict:
    """``nb`` as a learner submits it after running every cell: its outputs saved (not grading mode)."""
    import nbclient
    import nbformat

    node = nbformat.reads(json.dumps(nb), as_version=4)
    env = {k: v for k, v in _env().items() if k != "GREENLAB_GRADING"}
    client = nbclient.NotebookClient(node, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    with _environment(env):
        client.execute()
    return json.loads(nbformat.writes(node))


@contextlib.contextmanager
def _environment(env: dict):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def probe(tmp_path_factory, secrets_folder):
    root = tmp_path_factory.mktemp("probe")
    course, logs = root / "course", root / "logs"
    logs.mkdir()
    nbgrader_export.export(course, folder=_probe_lessons(root / "lessons"))
    _nbgrader(["generate_assignment", "lesson42", "--force"], course)
    release = nbgrader_export.load(course / "release" / "lesson42" / "42_probe.ipynb")
    right = "return kwh * g_per_kwh * pue"
    students = {"fitted": _probe_submission(release, FITTED), "honest": _ran(_probe_submission(release, right), root),
                "skipper": _probe_submission(release, "return 0.0")}
    for cell in students["skipper"]["cells"]:  # a wrong answer, and its test tagged for nbclient to leave unrun
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and "co2e_grams" in "".join(cell["source"]):
            cell["metadata"]["tags"] = ["skip-execution"]
    for who in ("spy", "twin"):  # the same answers, two students
        spy = SPY.replace("DUMP", repr(str(logs / f"{who}-dump.txt"))).replace("SEEN", repr(str(logs / f"{who}-seen.txt")))
        students[who] = _probe_submission(release, right, spy)
    for student, nb in students.items():
        target = course / "submitted" / student / "lesson42" / "42_probe.ipynb"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(nb), encoding="utf-8")
    graded = {}
    for run in (1, 2):  # the class graded twice: a regrade
        done = subprocess.run([sys.executable, "-m", "greenlab.course", "grade", str(course), "lesson42", "--jobs", "2"],
                              env=_env(), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        graded[run] = {who: (logs / f"{who}-seen.txt").read_text() for who in ("spy", "twin")}
        for who in ("spy", "twin"):
            (logs / f"{who}-seen.txt").unlink()
    return course, logs, graded


def test_the_secret_lies_outside_the_course_and_an_older_exports_is_moved_out(tmp_path, secrets_folder):
    nbgrader_export.export(tmp_path / "c", only=["03"])
    secret = nbgrader_export.course_secret(tmp_path / "c")
    assert nbgrader_export.secret_path(tmp_path / "c").parent == secrets_folder
    assert oct(nbgrader_export.secret_path(tmp_path / "c").stat().st_mode & 0o777) == "0o600"
    under = [p.read_bytes() for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert under and not any(secret.encode() in b for b in under)
    nbgrader_export.export(tmp_path / "c", only=["03"])  # exported again: the same secret, the same cases
    assert nbgrader_export.course_secret(tmp_path / "c") == secret
    # a course exported before kept it in .grading/secret: the grader moves it out, unchanged
    old = tmp_path / "old"
    (old / ".grading").mkdir(parents=True)
    (old / ".grading" / "secret").write_text("an older secret\n")
    assert nbgrader_export.course_secret(old) == "an older secret"
    assert not (old / ".grading" / "secret").exists() and nbgrader_export.secret_path(old).is_file()
    with pytest.raises(FileNotFoundError, match="no grading secret"):
        nbgrader_export.course_secret(tmp_path / "never exported")


def test_a_learner_cell_that_reads_everything_it_can_finds_neither_secret_nor_seed(probe):
    course, logs, _ = probe
    secret = nbgrader_export.course_secret(course)
    graded = nbgrader_export.load(course / "autograded" / "spy" / "lesson42" / "42_probe.ipynb")
    (seed,) = nbgrader_export.hidden_test_seeds(graded, secret, assignment="lesson42", notebook="42_probe",
                                                 student="spy").values()
    dump = (logs / "spy-dump.txt").read_text()
    assert "c.CourseDirectory.course_id" in dump and "course_key" not in dump  # it read the course's files ...
    assert nbgrader_export.course_key(course) in dump  # ... the secret's public key among them
    assert nbgrader_export.SEED_LINE.strip() in dump  # and the notebook on disk, which holds no seed
    assert secret not in dump and str(seed) not in dump
    # the test drew its cases from that seed, and the autograded notebook keeps no seed either
    drawn = []
    checks.co2e_grams(lambda *a: drawn.append(a), seed=seed)
    assert all(f"{a!r}\n" in probe[2][1]["spy"] for a in drawn[4:])
    text = json.dumps(graded)
    assert str(seed) not in text and nbgrader_export.SEED_LINE.strip() in "".join(
        "".join(c["source"]) for c in graded["cells"])
    score, max_score, _ = _score(course, "42", "spy")
    assert score == max_score > 0


def test_grading_again_draws_the_same_cases_for_the_same_submission_and_others_for_another(probe):
    _, _, graded = probe
    assert graded[1]["spy"] == graded[2]["spy"] and graded[1]["twin"] == graded[2]["twin"]
    assert graded[1]["spy"] != graded[1]["twin"]  # the same answers from another student: other cases
    seen = graded[1]["spy"].splitlines()
    assert len(set(seen)) > 4  # the visible cases and the drawn ones


def test_an_answer_fitted_to_the_visible_cases_passes_its_own_check_and_fails_the_grade(probe):
    course = probe[0]
    fitted, _, per_cell = _score(course, "42", "fitted")
    assert per_cell == {"42-co2e_grams-test": 0}, per_cell
    honest, max_score, _ = _score(course, "42", "honest")
    assert honest == max_score == nbgrader_export.EXERCISE_POINTS
    namespace: dict = {}
    exec("def co2e_grams(kwh, g_per_kwh, pue):\n    " + FITTED, namespace)
    assert gl.check.co2e_grams(namespace["co2e_grams"]).passed  # what the learner saw


def test_a_statement_is_shown_as_the_learners_run_saved_it_and_its_experiment_is_not_run_again(probe):
    from greenlab.course.nbgrader_preprocessor import NOT_RUN_HEADER, SHOWN_HEADER, SKIPPED

    course = probe[0]

    def shown(student: str) -> tuple[str, dict]:
        graded = nbgrader_export.load(course / "autograded" / student / "lesson42" / "42_probe.ipynb")
        cell = next(c for c in graded["cells"] if "statement_check =" in "".join(c["source"]))
        return "".join("".join(o.get("text", "")) for o in cell["outputs"]), graded

    text, graded = shown("honest")  # ran the notebook before submitting: 4,080 J, 71 %
    assert text.startswith(SHOWN_HEADER) and "stakeholder_statement passed" in text, text
    assert "the statement as written: Training used 4,080 J" in text
    code = ["".join(c["source"]) for c in graded["cells"] if c["cell_type"] == "code"]
    assert SKIPPED in code and not any("run_joules, run_accuracy =" in c for c in code)  # the run: left out
    assert "3,100" not in json.dumps(graded)  # nothing was measured again at grade time
    assert _left_to_hand(course, "42", "honest") == ["42-stakeholder_statement"]  # marked by hand, not scored
    assert shown("fitted")[0] == NOT_RUN_HEADER  # submitted without running it: the marker is told
    # the same statement in the learner's own run, against a run it does not describe, fails there
    verdict = gl.check.stakeholder_statement("Training used 4,080 J, measured by the energy counter, ±5 %, "
                                             "at 71% test accuracy. We recommend it as long as accuracy holds.",
                                             facts=dict(joules=[3100.0], accuracy=[0.62]))
    assert os.environ.get("GREENLAB_GRADING") != "1" and verdict.status == "failed"


def test_a_test_a_learner_tagged_to_be_left_unrun_runs_and_fails_a_wrong_answer(probe):
    # nbclient leaves a cell tagged skip-execution unrun, and nbgrader scores a test cell without an error
    # as passed: the grader takes a learner's tag off before the kernel starts
    assert _score(probe[0], "42", "skipper")[2] == {"42-co2e_grams-test": 0}


def test_the_grader_takes_an_older_configs_secret_out_of_the_environment_and_will_not_grade_without_one(
        tmp_path, monkeypatch):
    import nbformat

    from greenlab.course.grading import SECRET_VARIABLE
    from greenlab.course.nbgrader_preprocessor import SeededExecute

    test = nbformat.v4.new_code_cell(nbgrader_export.SEED_LINE + "_grading.grade('co2e_grams', co2e_grams, seed=_seed)")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "42-co2e_grams-test", "solution": False, "points": 2}
    nb = nbformat.v4.new_notebook(cells=[test])
    monkeypatch.setenv(SECRET_VARIABLE, "an older config put the secret here")
    with pytest.raises(FileNotFoundError, match="no grading secret"):  # rather than cases no regrade repeats
        SeededExecute(course_root=str(tmp_path)).preprocess(nb, {"nbgrader": {"student": "ada"}})
    assert SECRET_VARIABLE not in os.environ and nb.cells[0].source.startswith(nbgrader_export.SEED_LINE)
