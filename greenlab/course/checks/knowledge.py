"""The knowledge check as a graded answer (every lesson): one question of a lesson's quiz.

In an nbgrader course (``python -m greenlab.course.nbgrader``) each question becomes an autograded
cell, ``gl.check.quiz_answer("02", quiz_answers, 2).assert_passed()``; the feedback a learner sees
for a wrong answer is the option's own feedback from the quiz data.
"""

from __future__ import annotations

from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, CheckerArgumentError, check_seed, graded)
from greenlab.course.quiz import grade_question, load, shuffled


@graded(code=False)
def quiz_answer(lesson: str, answers: Any, question: int, order_seed: int | None = None) -> Check:
    """Check answer ``question`` (1-based) of ``answers`` against lesson ``lesson``'s quiz.

    ``answers`` is a list in question order: an option's text (any order of display), a list of
    texts for a "choose all" question, or a number for a numeric one; ``None`` is not answered.
    With ``order_seed`` (the seed ``gl.quiz(lesson, seed=...)`` showed the quiz with), an index or letter
    names the option in the order shown; without it, in the quiz file's order."""
    order_seed = check_seed(order_seed, "order_seed")
    try:
        quiz = load(lesson)
    except (ValueError, TypeError, OSError) as exc:  # the grader's lesson, not the learner's answer
        raise CheckerArgumentError(f"lesson {lesson!r}: {exc}") from exc
    questions = (quiz if order_seed is None else shuffled(quiz, seed=order_seed)).questions
    if isinstance(question, bool) or not isinstance(question, int) or not 1 <= question <= len(questions):
        raise CheckerArgumentError(f"question must be a number 1..{len(questions)}, got {question!r}")
    label = f"quiz {lesson} question {question}"
    if not isinstance(answers, (list, tuple)):
        return Check(label, FAILED, f"quiz_answers must be a list with one entry per question, "
                                    f"got {type(answers).__name__}.")
    answer = answers[question - 1] if question <= len(answers) else None
    if answer is None:
        return Check(label, NOT_ATTEMPTED, "no answer yet.")
    try:
        result = grade_question(questions[question - 1], answer, index=question - 1)
    except (ValueError, TypeError, IndexError) as exc:
        return Check(label, FAILED, f"this answer cannot be graded: {exc}")
    status = PASSED if result.correct else FAILED
    message = "right." if result.correct else "not right yet."
    return Check(label, status, message, list(result.feedback))
