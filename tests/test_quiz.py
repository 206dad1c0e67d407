"""greenlab.quiz: validation, grading, text fallback and the ipywidgets view (no browser)."""

import pytest

from greenlab.quiz import Quiz, grade_question, make_question, quiz

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
