"""greenlab.quiz: validation, grading, text fallback and the ipywidgets view (no browser)."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from greenlab.course.quiz import (
    Quiz,
    grade_question,
    lessons,
    load,
    make_question,
    session_seed,
    shuffled,
)
from greenlab.widgets.quiz_display import quiz

SINGLE = {
    "kind": "single",
    "prompt": "Which reading is a cumulative energy counter?",
    "options": [
        {"text": "NVML total energy", "correct": True, "feedback": "Yes, it counts millijoules."},
        {"text": "NVML power usage", "feedback": "No, that is a power reading in milliwatts."},
        {"text": "GPU utilisation", "feedback": "No, utilisation is a share of time."},
    ],
}
MULTIPLE = {
    "kind": "multiple",
    "prompt": "Which are energy sources greenlab can read?",
    "options": [
        {"text": "rapl", "correct": True, "feedback": "RAPL: CPU package counters."},
        {"text": "nvml-counter", "correct": True, "feedback": "NVML's energy counter."},
        {"text": "thermometer", "feedback": "Temperature is not energy."},
    ],
}
NUMERIC = {
    "kind": "numeric",
    "prompt": "How many joules are 2 Wh?",
    "answer": 7200,
    "tolerance": 1,
    "unit": "J",
    "feedback": {"correct": "Right.", "too_low": "Too low.", "too_high": "Too high."},
}


def make_quiz():
    return Quiz([SINGLE, MULTIPLE, NUMERIC], title="Check")


def test_grade_all_correct_and_all_wrong():
    q = make_quiz()
    good = q.grade([0, [0, 1], 7200.5])
    assert (good.score, good.total, good.fraction) == (3, 3, 1.0)
    assert good.results[0].feedback == ["Yes, it counts millijoules."]
    bad = q.grade([1, [0, 2], 7000])
    assert bad.score == 0
    assert bad.results[0].feedback == ["No, that is a power reading in milliwatts."]
    assert "thermometer" not in " ".join(bad.results[1].feedback)
    assert "Temperature is not energy." in bad.results[1].feedback
    assert any("missing" in f for f in bad.results[1].feedback)
    assert bad.results[2].feedback == ["Too low."]
    assert q.grade({2: 8000}).results[2].feedback == ["Too high."]


def test_answers_by_text_dict_and_missing():
    q = make_quiz()
    r = q.grade({0: "NVML total energy", 1: {"rapl", "nvml-counter"}})
    assert r.score == 2
    assert not r.results[2].answered and r.results[2].feedback == ["Not answered."]
    assert "Score: 2/3" in r.summary()
    assert q.grade([None, [], None]).score == 0


def test_numeric_tolerance_edges_and_incorrect_key():
    q = make_question({**NUMERIC, "tolerance": 0, "feedback": {"correct": "ok", "incorrect": "no"}})
    assert grade_question(q, 7200).correct
    assert not grade_question(q, 7200.001).correct
    assert grade_question(q, "7200").correct
    assert grade_question(q, 1).feedback == ["no"]


@pytest.mark.parametrize("bad, message", [
    ({**SINGLE, "kind": "essay"}, "kind"),
    ({**SINGLE, "prompt": ""}, "prompt"),
    ({**SINGLE, "options": [SINGLE["options"][0]]}, "at least two"),
    ({**SINGLE, "options": [{**o, "feedback": ""} for o in SINGLE["options"]]}, "feedback"),
    ({**SINGLE, "options": [{**o, "correct": True} for o in SINGLE["options"]]}, "exactly one"),
    ({**SINGLE, "options": [{**o, "correct": False} for o in SINGLE["options"]]}, "exactly one"),
    ({**MULTIPLE, "options": [{**o, "correct": False} for o in MULTIPLE["options"]]}, "at least one"),
    ({**NUMERIC, "tolerance": -0.1}, "tolerance"),
    ({k: v for k, v in NUMERIC.items() if k != "tolerance"}, "tolerance"),
    ({**NUMERIC, "answer": float("nan")}, "answer"),
    ({**NUMERIC, "feedback": {"correct": "ok"}}, "incorrect"),
    ({**NUMERIC, "feedback": {"correct": "ok", "incorrect": "no", "close": "x"}}, "unknown"),
])
def test_invalid_questions_raise_value_error(bad, message):
    with pytest.raises(ValueError, match=message):
        Quiz([bad])


def test_bad_answers_raise_value_error():
    q = make_quiz()
    with pytest.raises(ValueError, match="out of range"):
        q.grade([5])
    with pytest.raises(ValueError, match="not one of the options"):
        q.grade(["GPU temperature"])
    with pytest.raises(ValueError, match="list of options"):
        q.grade({1: 0})
    with pytest.raises(ValueError, match="number"):
        q.grade({2: "lots"})
    with pytest.raises(ValueError, match="answers"):
        q.grade([0, [0], 1, 2])
    with pytest.raises(ValueError, match="indices"):
        q.grade({7: 1})
    with pytest.raises(ValueError):
        Quiz([])
    with pytest.raises(ValueError):
        Quiz("not a list")


def test_text_fallback_prints_questions_and_answers_only_when_asked(capsys):
    returned = quiz([SINGLE, NUMERIC], title="Energy check", display="text")
    out = capsys.readouterr().out
    assert "Energy check" in out and "Q1. Which reading" in out and "Q2. How many joules" in out
    assert "[correct]" not in out and "feedback" not in out
    assert isinstance(returned, Quiz)
    quiz([SINGLE, NUMERIC], display="text", show_answers=True)
    out = capsys.readouterr().out
    assert "a) NVML total energy [correct]" in out
    assert "feedback: No, that is a power reading" in out
    assert "answer: 7200 J (+/- 1)" in out


def test_auto_display_is_text_outside_a_kernel(capsys, monkeypatch):
    monkeypatch.delenv("GREENLAB_DISPLAY", raising=False)
    quiz([SINGLE])
    assert "Q1." in capsys.readouterr().out
    with pytest.raises(ValueError, match="display"):
        quiz([SINGLE], display="browser")


def test_quiz_widget_driven_from_python():
    from greenlab.widgets.quiz_widget import QuizWidget

    view = QuizWidget(make_quiz())
    view.inputs[0].value = "NVML power usage"
    view.check_buttons[0].click()
    assert "milliwatts" in view.feedback[0].value and "Not quite" in view.feedback[0].value
    view.inputs[0].value = "NVML total energy"
    view.inputs[1].children[0].value = True
    view.inputs[1].children[1].value = True
    view.inputs[2].value = "7200"
    view.check_all_button.click()
    assert "Score: 3/3" in view.score.value
    assert all("Correct." in f.value for f in view.feedback)
    view.inputs[2].value = "many"
    view.check_buttons[2].click()
    assert "number" in view.feedback[2].value


def test_widget_mode_displays_the_quiz_view(capsys):
    returned = quiz([SINGLE, MULTIPLE], title="Shown", display="widget")
    assert isinstance(returned, Quiz) and returned.title == "Shown"
    assert "(choose one)" not in capsys.readouterr().out  # no text fallback in widget mode


# --- lesson quizzes: data in the package, shuffled options, no answer key in learner notebooks ---

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
ANSWER_KEY = re.compile(r"""["'](correct|feedback)["']\s*:|correct\s*=\s*True|\[correct\]""")


def answer_key_leaks(nb: dict, feedback_texts: set[str]) -> list[str]:
    """Code cells (source or stored output) of a notebook that show an answer key or feedback."""
    leaks = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        shown = source + "".join("".join(o.get("text", "")) + json.dumps(o.get("data", {}))
                                 for o in cell.get("outputs", []))
        if ANSWER_KEY.search(shown) or any(text in shown for text in feedback_texts):
            leaks.append(f"cell {i}: {source[:60]!r}")
    return leaks


def _feedback_texts() -> set[str]:
    texts = set()
    for name in lessons():
        for q in load(name).questions:
            texts.update(o.feedback for o in q.options)
            texts.update(q.feedback.values())
    return texts


def test_lesson_quiz_loads_by_number_or_name_and_rejects_others():
    assert load("01").lesson == load("01_mixed_precision").lesson == "01_mixed_precision"
    assert load("01").title.startswith("Lesson 01")
    for bad in ("2", "99", "mixed", ""):
        with pytest.raises(ValueError, match="lesson must be one of 00"):
            load(bad)


def test_shuffle_is_stable_for_a_seed_and_differs_between_seeds():
    base = load("00")
    orders = {seed: [[o.text for o in q.options] for q in shuffled(base, seed=seed).questions]
              for seed in range(6)}
    assert orders[3] == [[o.text for o in q.options] for q in shuffled(base, seed=3).questions]
    assert len({json.dumps(o) for o in orders.values()}) > 1
    for seed in range(6):  # the same options, each with its own feedback, only reordered
        for before, after in zip(base.questions, shuffled(base, seed=seed).questions):
            assert sorted(before.options, key=lambda o: o.text) == sorted(after.options, key=lambda o: o.text)
            assert after.answer == before.answer


def test_shuffled_quiz_grades_by_the_order_shown():
    q = shuffled(Quiz([SINGLE, MULTIPLE, NUMERIC]), seed=11)
    right = [q.questions[0].correct_indices[0], list(q.questions[1].correct_indices), 7200]
    assert q.grade(right).score == 3
    assert q.grade(["NVML total energy", ["rapl", "nvml-counter"], 7200]).score == 3
    wrong = next(j for j in range(3) if j not in q.questions[0].correct_indices)
    assert not q.grade([wrong]).results[0].correct


@pytest.mark.parametrize("name", lessons())
def test_correct_positions_are_spread_evenly_in_every_lesson(name):
    base = load(name)
    singles = [i for i, q in enumerate(base.questions) if q.kind == "single"]
    shared = min(len(base.questions[i].options) for i in singles)
    seen = {i: set() for i in singles}
    for seed in range(40):
        q = shuffled(base, seed=seed)
        counts = Counter(q.questions[i].correct_indices[0] for i in singles)
        spread = [counts.get(j, 0) for j in range(shared)]
        assert max(spread) - min(spread) <= 1, f"seed {seed}: correct positions {dict(counts)}"
        for i in singles:
            seen[i].add(q.questions[i].correct_indices[0])
    assert all(len(s) > 1 for s in seen.values()), "every question's answer moves between sessions"


@pytest.mark.parametrize("name", lessons())
def test_no_answer_position_is_favoured_across_sessions(name):
    base = load(name)
    seen = {i: Counter() for i, q in enumerate(base.questions) if q.kind == "single"}
    for seed in range(200):
        q = shuffled(base, seed=seed)
        for i in seen:
            seen[i][q.questions[i].correct_indices[0]] += 1
    for i, counts in seen.items():
        share = max(counts.values()) / 200
        assert share <= 1 / len(base.questions[i].options) + 0.15, f"question {i + 1}: {dict(counts)}"


@pytest.mark.parametrize("name", lessons())
def test_single_choice_questions_of_a_lesson_have_equally_many_options(name):
    # with mixed lengths the extra positions ("d" among three-option questions) cannot be balanced
    counts = {len(q.options) for q in load(name).questions if q.kind == "single"}
    assert len(counts) == 1, f"{name}: single-choice questions with {sorted(counts)} options"


def test_unshuffled_data_would_fail_the_spread_check():
    base = load("00")  # as written, every correct option comes first
    singles = [q for q in base.questions if q.kind == "single"]
    assert Counter(q.correct_indices[0] for q in singles)[0] == len(singles)


def test_session_seed_is_fixed_per_process_and_settable(monkeypatch):
    monkeypatch.delenv("GREENLAB_QUIZ_SEED", raising=False)
    assert session_seed() == session_seed()
    monkeypatch.setenv("GREENLAB_QUIZ_SEED", "42")
    assert session_seed() == 42
    monkeypatch.setenv("GREENLAB_QUIZ_SEED", "many")
    with pytest.raises(ValueError, match="GREENLAB_QUIZ_SEED"):
        session_seed()


def test_lesson_quiz_shuffles_by_default_and_a_list_does_not(capsys, monkeypatch):
    monkeypatch.setenv("GREENLAB_QUIZ_SEED", "7")
    shown = quiz("00", display="text")
    out = capsys.readouterr().out
    assert shown.title == "Lesson 00: measuring energy" and ".grade(" in out and "[correct]" not in out
    assert [q.options for q in shown.questions] == [q.options for q in shuffled(load("00"), seed=7).questions]
    assert [q.options for q in shown.questions] != [q.options for q in load("00").questions]
    assert quiz([SINGLE], display="text").questions[0].correct_indices == (0,)
    with pytest.raises(ValueError, match="lesson must be"):
        quiz("42", display="text")


def test_answer_key_scanner_finds_a_key_in_a_code_cell():
    nb = {"cells": [{"cell_type": "markdown", "source": ['"correct": True in prose is fine']},
                    {"cell_type": "code", "source": ["q = [{'text': 'x', 'correct': True}]"], "outputs": []},
                    {"cell_type": "code", "source": ["gl.quiz('00')"],
                     "outputs": [{"output_type": "stream", "text": ["a) x [correct]"]}]},
                    {"cell_type": "code", "source": ["print('Yes, it counts millijoules.')"], "outputs": []}]}
    assert len(answer_key_leaks(nb, {"Yes, it counts millijoules."})) == 3


@pytest.mark.parametrize("path", sorted(LESSONS.glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_no_learner_notebook_shows_an_answer_key(path):
    leaks = answer_key_leaks(json.loads(path.read_text(encoding="utf-8")), _feedback_texts())
    assert not leaks, f"{path.name} shows quiz answers in code cells: {leaks}"


def _gflop_question():
    return Quiz([{"kind": "numeric", "prompt": "FLOPs of the step?", "answer": 2.0, "tolerance": 0.1,
                  "unit": "GFLOP", "feedback": {"correct": "yes", "incorrect": "no"}}])


@pytest.mark.parametrize("typed", ["2", " 2 ", "2 GFLOP", "2GFLOP", "2.0 GFLOP", "2e0 GFLOP", "2 Gflop"])
def test_a_typed_number_may_carry_the_questions_own_unit(typed):
    assert _gflop_question().grade([typed]).score == 1


@pytest.mark.parametrize("typed, hint", [("2 MFLOP", "the unit is GFLOP, not MFLOP"),
                                         ("2 gflop", "the unit is GFLOP, not gflop"),  # g is not G
                                         ("2 J", "the unit is GFLOP, not J"), ("two", "got 'two'")])
def test_another_unit_is_refused_not_guessed(typed, hint):
    with pytest.raises(ValueError, match="needs a number in GFLOP") as info:
        _gflop_question().grade([typed])
    assert hint in str(info.value)


def test_a_unitless_question_refuses_a_unit():
    q = Quiz([{"kind": "numeric", "prompt": "How many?", "answer": 3, "tolerance": 0,
               "feedback": {"correct": "yes", "incorrect": "no"}}])
    assert q.grade(["3"]).score == 1
    with pytest.raises(ValueError, match="no unit here"):
        q.grade(["3 GFLOP"])
