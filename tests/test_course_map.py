"""The README's course map is made from the lessons, so it cannot drift from them."""

from pathlib import Path

import pytest

from greenlab.course import course_map

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_carries_the_current_course_map():
    text = README.read_text(encoding="utf-8")
    fresh = course_map.course_map()
    assert course_map.replace_between_marks(text, fresh) == text, (
        "the README's course map is out of date: python -m greenlab.course.course_map --write")
    assert fresh.count("\n| ") >= 16  # a row per lesson


def test_replacing_needs_the_marks():
    with pytest.raises(ValueError, match="course-map"):
        course_map.replace_between_marks("no marks here", "| table |")
    marked = f"a\n{course_map.BEGIN_MARK}\nold\n{course_map.END_MARK}\nb"
    assert course_map.replace_between_marks(marked, "new") == f"a\n{course_map.BEGIN_MARK}\nnew\n{course_map.END_MARK}\nb"
