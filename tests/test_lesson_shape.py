"""Every lesson follows the course's shape (DESIGN.md), so learners always know where they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
INSTRUCTOR = sorted((LESSONS / "instructor").glob("[0-9][0-9]_*.ipynb"))
HEADINGS = ["## Why it matters", "## Baseline", "## One change at a time", "## What it means on a real GPU",
            "## Exercise", "## Explain it to a non-technical stakeholder", "## Knowledge check",
            "## Summary", "## References"]


def _cells(path: Path):
    nb = json.loads(path.read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def test_lessons_are_numbered_from_00_without_gaps_each_with_a_learner_copy():
    numbers = [p.name[:2] for p in INSTRUCTOR]
    assert len(INSTRUCTOR) >= 16, "lessons 00 to 15 at least"
    assert numbers == [f"{i:02d}" for i in range(len(INSTRUCTOR))]
    for path in INSTRUCTOR:
        assert (LESSONS / path.name).is_file(), f"no learner copy of {path.name}"


@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_lesson_shape(path):
    cells = _cells(path)
    markdown = [src for kind, src in cells if kind == "markdown"]
    code = [src for kind, src in cells if kind == "code"]
    assert markdown[0].startswith(f"# {path.name[:2]} "), "the first cell is the lesson's title"
    assert "**Goals" in markdown[0] and "Time" in markdown[0], "goals and time come first"
    assert code[0].splitlines()[0] == "import greenlab as gl" and "gl.setup(" in code[0]

    lines = [line.strip() for src in markdown for line in src.splitlines()]
    found = [next((i for i, line in enumerate(lines) if line.startswith(h)), None) for h in HEADINGS]
    missing = [h for h, i in zip(HEADINGS, found) if i is None]
    assert not missing, f"missing sections: {missing}"
    assert found == sorted(found), "sections are out of order"

    everything = "\n".join(code)
    assert "import *" not in everything
    assert "gl.reference.show(" in everything, "the GPU section reads recorded reference runs"
    assert "gl.quiz(" in everything and "gl.check." in everything
    assert re.search(r"plt\.|\.plot\(|plot_", everything), "at least one plot of the learner's measurements"
    assert "gl.budget(" in everything, "sizes are chosen through gl.budget"


@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_knowledge_check_has_four_to_eight_questions_each_option_with_feedback(path):
    from greenlab.course.quiz import Quiz, load

    src = next(src for kind, src in _cells(path) if kind == "code" and "gl.quiz(" in src)
    call = re.search(r"gl\.quiz\(\s*[\"'](\w+)[\"']", src)
    assert call and call.group(1) == path.name[:2], \
        f"the knowledge check reads the lesson's own quiz data: gl.quiz(\"{path.name[:2]}\")"
    quiz = load(call.group(1))
    assert quiz.lesson == path.stem, "the quiz data file is named like the lesson"
    assert 4 <= len(quiz) <= 8
    Quiz(quiz.questions)  # validated again: every option has feedback, one right answer for single choice, ...


def test_every_quiz_data_file_belongs_to_a_lesson():
    from greenlab.course.quiz import lessons

    assert lessons() == [p.stem for p in INSTRUCTOR]


@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_checked_outputs_write_plain_numbers(path):
    # a figure with a unit is read by people: '1e+03 h' is a number they must decode (the limits of
    # number formats, as in lesson 01, are what exponents are for)
    for copy in (path, LESSONS / path.name):
        for cell in json.loads(copy.read_text())["cells"]:
            if cell["cell_type"] != "code" or "NBVAL_CHECK_OUTPUT" not in "".join(cell["source"]):
                continue
            text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
            assert re.search(r"\de[+-]\d+ *(?:[kM]?J|s|h|min|k?Wh|W|m?g|money)\b", text) is None, (copy.name, text)


@pytest.mark.parametrize("path", INSTRUCTOR, ids=lambda p: p.stem)
def test_lessons_say_how_energy_was_measured_through_the_library(path):
    # a phrase written in a cell ('estimated from a CPU power model' if run.estimated else 'measured')
    # is wrong where part of a figure was measured (a GPU's counter beside the CPU's estimate):
    # gl.report.how_measured reads the result's own sources
    for kind, src in _cells(path):
        if kind != "code":
            continue
        for line in src.splitlines():
            if line.lstrip().startswith("#"):
                continue
            assert not re.search(r"power model|energy counter|measured by the hardware", line), (path.name, line)
