"""``gl.quiz``: show a knowledge check, with ipywidgets in a notebook front end and as text
elsewhere, and return its ``Quiz`` (grading is plain Python in ``greenlab.course.quiz``)."""

from __future__ import annotations

from greenlab.base import validation
from greenlab.course.quiz import ANSWER_HINT, Quiz, load, shuffled
from greenlab.widgets.common import resolve_display


def quiz(questions, title: str | None = None, display: str = "auto",
         show_answers: bool = False, shuffle: bool | None = None, seed: int | None = None) -> Quiz:
    """Show a knowledge check and return its :class:`Quiz`.

    ``questions`` is a lesson's number or name (``"01"``, ``"01_mixed_precision"``),
    read from the package's quiz data, or a list of question dicts, or a :class:`Quiz`.
    ``shuffle`` (default: True for a lesson, False otherwise) orders each question's
    options by :func:`shuffled` with ``seed`` (default :func:`session_seed`); answers
    by index then refer to the order shown.
    ``display="auto"`` renders ipywidgets when a notebook front end is attached
    and prints the questions as text otherwise; ``"widget"`` or ``"text"`` force one.
    ``show_answers=True`` (text mode) prints the answers and feedback, for instructors.
    Assign the result (``check = gl.quiz(...)``) to keep the cell output to the quiz itself.
    """
    validation.flag("show_answers", show_answers)  # a truthy text would print the answers to learners
    if shuffle is not None:
        validation.flag("shuffle", shuffle)
    validation.integer("seed", seed, low=0, allow_none=True)
    if title is not None:
        validation.text("title", title)
    lesson = isinstance(questions, str)
    if lesson:
        q = load(questions)
    else:
        q = questions if isinstance(questions, Quiz) else Quiz(questions, title=title)
    if title is not None:
        q.title = title
    if shuffle if shuffle is not None else lesson:
        q = shuffled(q, seed=seed)
    if resolve_display(display) == "widget":
        from IPython.display import display as ipy_display

        from greenlab.widgets.quiz_widget import QuizWidget  # lazy: ipywidgets loads only for a quiz widget

        ipy_display(QuizWidget(q).widget)
    else:
        print(q.text(show_answers=show_answers))
        if not show_answers:
            print("\n" + ANSWER_HINT)
    return q
