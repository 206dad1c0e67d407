"""The course's conceptual figures: each drawn, described for a reader who cannot see it, and placed once."""

import base64
import copy

import pytest

from greenlab.course import figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _lesson(*sources):
    return {"cells": [{"cell_type": "markdown", "metadata": {}, "source": s, "id": f"c{i}"}
                      for i, s in enumerate(sources)]}


def test_at_least_ten_figures_each_with_alt_text_and_a_caption():
    names = [fig.name for fig in figures.FIGURES]
    assert len(names) >= 10
    assert len(set(names)) == len(names)
    for fig in figures.FIGURES:
        assert len(fig.alt.split()) >= 15, f"{fig.name}: alt text should describe the drawing"
        assert fig.caption and fig.lesson.isdigit() and len(fig.lesson) == 2


@pytest.mark.parametrize("fig", figures.FIGURES, ids=lambda f: f.name)
def test_every_figure_draws_a_png(fig):
    png = figures.figure_png(fig)
    assert png.startswith(PNG_MAGIC)
    assert len(png) > 5_000  # a drawing, not an empty canvas


def test_a_figure_goes_after_its_anchor_and_drawing_again_replaces_it():
    fig = figures.FIGURES[0]
    nb = _lesson("# Title", "Some words about the Roofline model.", "More text.")
    index = figures.place(nb, fig)
    assert index == 2
    cell = nb["cells"][2]
    assert f"attachment:{fig.name}.png" in cell["source"]
    assert fig.alt in cell["source"]
    assert base64.b64decode(cell["attachments"][f"{fig.name}.png"]["image/png"]).startswith(PNG_MAGIC)
    assert not figures.missing(nb, fig)
    again = copy.deepcopy(nb)
    assert figures.place(again, fig) == 2
    assert len(again["cells"]) == len(nb["cells"])


def test_a_lesson_without_the_anchor_or_the_figure_is_reported():
    fig = figures.FIGURES[0]
    nb = _lesson("# Title", "Nothing relevant here.")
    assert figures.missing(nb, fig)
    with pytest.raises(LookupError, match=fig.name):
        figures.place(nb, fig)


@pytest.mark.parametrize("fig", figures.FIGURES, ids=lambda f: f.name)
def test_every_figure_sits_in_both_copies_of_its_lesson(fig):
    import json
    from pathlib import Path

    lessons = Path(__file__).resolve().parent.parent / "lessons"
    instructor = figures.lesson_path(lessons, fig.lesson)
    for path in (instructor, lessons / instructor.name):
        nb = json.loads(path.read_text(encoding="utf-8"))
        assert not figures.missing(nb, fig), f"{path.name} lacks figure {fig.name!r}: python -m greenlab.course.figures"
