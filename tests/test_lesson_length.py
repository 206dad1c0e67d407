"""Each lesson fits one sitting: its learner copy's main-line prose (``greenlab.course.reading``:
method notes, code, link targets and alt text apart) is at most ``MAX_WORDS`` words."""

from pathlib import Path

import pytest

from greenlab.course.reading import notebook_reading, reading

MAX_WORDS = 1800
LESSONS = sorted((Path(__file__).resolve().parent.parent / "lessons").glob("[0-9][0-9]_*.ipynb"))


def test_every_lesson_is_counted():
    assert len(LESSONS) >= 16


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_main_line_prose_fits_one_sitting(path):
    words = reading(path).words
    assert words <= MAX_WORDS, f"{path.name}: {words} words of main-line prose (at most {MAX_WORDS})"


def test_the_limit_can_fail():
    cell = {"cell_type": "markdown", "metadata": {}, "source": " ".join(["word"] * (MAX_WORDS + 1)) + "."}
    assert notebook_reading({"cells": [cell]}, "x").words > MAX_WORDS
