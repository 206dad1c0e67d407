"""The scale-out checklist widget is a view over scaling.recommend, driven here from Python."""

import pytest

from greenlab.impact import scaling
from greenlab.widgets import ScaleOutChecklist

KEYS = [q.key for q in scaling.SCALE_OUT_QUESTIONS]


def test_changing_an_answer_updates_the_recommendation():
    box = ScaleOutChecklist(display="widget")
    before = box.recommendation()
    assert before.text.split("because")[0] in box.text()
    box.dropdowns["fits_on_one_device"].value = "no"
    after = box.recommendation()
    assert after.decision == "scale out"
    assert "scale out" in box.result.value
    assert after == scaling.recommend(box.answers())


def test_text_mode_prints_questions_and_recommendation(capsys):
    answers = {"fits_on_one_device": "yes"}
    box = ScaleOutChecklist(answers, display="text")
    assert box.dropdowns == {}
    box._ipython_display_()
    out = capsys.readouterr().out
    for q in scaling.SCALE_OUT_QUESTIONS:
        assert q.text in out
    assert "Recommendation:" in out


def test_bad_presets_are_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match="unknown question key"):
        ScaleOutChecklist({"colour": "green"}, display="text")
    with pytest.raises(ValueError, match="must be one of"):
        ScaleOutChecklist({KEYS[0]: "perhaps"}, display="text")
