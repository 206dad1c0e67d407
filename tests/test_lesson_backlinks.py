"""Every module of ``greenlab.techniques`` names, in its docstring, the lesson(s) it serves: "lesson 06", or
"lessons 10 (10_language_model) and 12 (12_adapting_and_serving)". Each number must be a lesson in lessons/,
and a file stem given beside it must be that lesson's, so a reader of the code finds the lesson, and a
renumbered or renamed lesson shows up here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TECHNIQUES = ROOT / "greenlab" / "techniques"
LESSONS = {p.stem[:2]: p.stem for p in (ROOT / "lessons" / "instructor").glob("[0-9][0-9]_*.ipynb")}
ONE = r"\d{2}\b(?:\s*\([a-z0-9_]+\))?"
MENTION = re.compile(rf"\b[Ll]essons?\s+({ONE}(?:\s*(?:,|and)\s*{ONE})*)")
NUMBER = re.compile(r"\b(\d{2})\b(?:\s*\(([a-z0-9_]+)\))?")


def cited(doc: str) -> list:
    """(number, stem or None) for every lesson the text names."""
    return [m for span in MENTION.findall(doc or "") for m in NUMBER.findall(span)]


def problems(doc: str, lessons: dict = LESSONS) -> list:
    """Why ``doc`` does not lead to its lessons (empty when it does)."""
    found = cited(doc)
    if not found:
        return ["names no lesson (write e.g. 'lesson 03 (03_batch_sizing)')"]
    out = []
    for number, stem in found:
        if number not in lessons:
            out.append(f"names lesson {number}, which lessons/ does not have")
        elif stem and stem != lessons[number]:
            out.append(f"names lesson {number} as {stem}, but it is {lessons[number]}")
    return out


MODULES = sorted(TECHNIQUES.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(TECHNIQUES)) for p in MODULES])
def test_every_techniques_module_names_the_lessons_it_serves(path):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc, f"{path.relative_to(ROOT)} has no docstring"
    found = problems(doc)
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(found)


def test_the_check_refuses_a_missing_an_unknown_and_a_misnamed_lesson():
    lessons = {"03": "03_batch_sizing", "10": "10_language_model"}
    assert problems("Batch sizes (lesson 03).", lessons) == []
    assert problems("Lessons 03 (03_batch_sizing) and 10 (10_language_model): both.", lessons) == []
    assert problems("Batch sizes, for the course.", lessons)[0].startswith("names no lesson")
    assert problems("Lessons 03 and 99.", lessons) == ["names lesson 99, which lessons/ does not have"]
    assert problems("Lesson 10 (10_tiny_gpt).", lessons) == [
        "names lesson 10 as 10_tiny_gpt, but it is 10_language_model"]
    assert len(LESSONS) >= 16 and MODULES  # the real folders were found
