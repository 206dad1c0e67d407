"""The instructor's guide is generated from the lessons and the library: the committed
docs/instructor_guide.md must be exactly what ``python -m greenlab.course guide`` writes."""

from pathlib import Path

import greenlab as gl
from greenlab.course import guide
from greenlab.course.quiz import load

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_guide_is_the_generated_one():
    committed = (ROOT / guide.GUIDE).read_text(encoding="utf-8")
    assert committed == guide.guide(), "docs/instructor_guide.md is stale: run python -m greenlab.course guide"


def test_the_guide_holds_each_lessons_quiz_key_rubric_and_a_checkers_mistakes():
    text = guide.guide()
    for lesson in ("02", "15"):
        for q in load(lesson).questions:
            if q.kind != "numeric":
                assert next(o.text for o in q.options if o.correct) in text
    from greenlab.course.checks.statement import RUBRIC

    assert all(when in text for _, _, when in RUBRIC)
    assert "weight each client by its share of the samples" in " ".join(guide.usual_mistakes(gl.check.fedavg_aggregate))


def test_check_mode_fails_on_a_stale_guide(tmp_path, capsys):
    stale = tmp_path / "guide.md"
    stale.write_text("old\n", encoding="utf-8")
    assert guide.main(["--check", "--out", str(stale)]) == 1
    assert guide.main(["--out", str(stale)]) == 0 and guide.main(["--check", "--out", str(stale)]) == 0
