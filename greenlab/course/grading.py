"""Grade-time checking for the nbgrader course: a checker the learner's cells cannot reach.

The export (``greenlab.course.nbgrader``) writes each graded test as an nbgrader *hidden test*
(``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``, removed from the released notebook)
that loads this file under a fresh, random module name and calls :func:`grade`. :func:`grade`
imports the checkers afresh from their files, with the ``greenlab`` modules the learner's kernel
holds set aside while it runs, so a solution cell that rebinds ``gl.check.accumulate_gradients``
(or the library's reference, or ``check_function``) changes nothing here; the library's own
implementation of the exercise is withheld from the learner's code while the checker runs, in the
fresh copy and in the copy the learner's kernel holds (``checks.core.withheld``), so a thin wrapper
around it gets no points; and it draws the cases of checkers that take a ``seed`` from a number
made at grade time, so an answer fitted to the visible cases fails the drawn ones. When autograding,
that number is :func:`submission_seed`: the grader (``nbgrader_preprocessor.SeededExecute``, in
nbgrader's own process) derives it from the course's grading secret and the submission and writes it
into the hidden test cells only, so the secret itself never reaches the learner's kernel and grading
the same submission again draws the same cases. This module imports nothing from ``greenlab`` at
import time: it is run on its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib
import secrets
import sys
from typing import Any, Iterator

PACKAGE = "greenlab"
# Older exports' configs put the secret in this environment variable, where the learner's kernel
# inherited it; the grader now removes it before any kernel starts, and nothing here reads it.
SECRET_VARIABLE = "GREENLAB_GRADING_SECRET"


def grade(name: str, /, *args: Any, **kwargs: Any) -> None:  # a checker may take name=...
    """Check ``args`` with a fresh copy of ``gl.check.<name>`` (drawing its cases from a seed
    made now, when it can draw them), print the verdict and raise ``AssertionError`` unless it
    passed: the body of a hidden test cell."""
    verdict = fresh_verdict(name, *args, **kwargs)
    print(verdict.text())
    if not verdict.passed:
        raise AssertionError(verdict.text())


def fresh_verdict(name: str, /, *args: Any, seed: int | None = None, **kwargs: Any):
    """The verdict of a freshly imported ``gl.check.<name>`` on ``args``; ``seed`` (default:
    :func:`grading_seed`) seeds the drawn cases of a checker that has them."""
    seed = grading_seed(name) if seed is None else seed
    with fresh_modules(PACKAGE) as held:
        checks = importlib.import_module(f"{PACKAGE}.course.checks")
        # the learner's code calls the kernel's copy of the library: withhold its references too
        importlib.import_module(f"{PACKAGE}.course.checks.core").HELD_COPIES.append(held)
        checker = getattr(checks, name)
        if getattr(checker, "draws_cases", False):
            kwargs["seed"] = seed
        return checker(*args, **kwargs)


def grading_seed(name: str) -> int:
    """The seed of checker ``name``'s drawn cases when the grader wrote none into the test (a
    notebook run outside an autograde): drawn now from the operating system, 48 random bits."""
    return secrets.randbits(48)


def submission_seed(secret: str, *, assignment: str, notebook: str, student: str, test: str,
                    answers: str) -> int:
    """The seed of one hidden test of one submission: an HMAC-SHA256 keyed by the course's grading
    secret over the assignment, notebook, student, the test's grade id and ``answers`` (a digest of
    the learner's solution cells, :func:`answers_digest`). The same submission graded again gets
    the same seed; another student, another test, or any change to the answers gets another, so
    the cases a failed test's feedback shows are of no use to a resubmission. 48 bits, as
    :func:`grading_seed`. The secret cannot be recovered from a seed."""
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError("the grading secret is empty: grading would draw cases anyone can compute")
    message = "\x1f".join([assignment, notebook, student, test, answers]).encode("utf-8")
    return int(hmac.new(secret.strip().encode("utf-8"), message, hashlib.sha256).hexdigest()[:12], 16)


def answers_digest(solutions: list[tuple[str, str]]) -> str:
    """A SHA-256 of a submission's answers: ``(grade id, source)`` of each solution cell, in order."""
    joined = "\x1e".join(f"{grade_id}\x1f{source}" for grade_id, source in solutions)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


@contextlib.contextmanager
def fresh_modules(package: str) -> Iterator[dict]:
    """Inside the block, ``package`` and its submodules import afresh from their files; after it,
    the modules the process held before are back, untouched, and the fresh ones are dropped. The
    block gets the modules set aside (name -> module)."""
    def ours(key: str) -> bool:
        return key == package or key.startswith(package + ".")

    saved = {key: sys.modules.pop(key) for key in [k for k in sys.modules if ours(k)]}
    importlib.invalidate_caches()
    try:
        yield dict(saved)
    finally:
        for key in [k for k in sys.modules if ours(k)]:
            del sys.modules[key]
        sys.modules.update(saved)


def grade_quiz(lesson: str, answers: Any, question: int, **key: Any) -> None:
    """:func:`quiz_verdict`, printed; ``AssertionError`` unless right."""
    right, text = quiz_verdict(lesson, answers, question, **key)
    print(text)
    if not right:
        raise AssertionError(text)


def quiz_verdict(lesson: str, answers: Any, question: int, *, seed: int, salt: str, digest: str | None = None,
                 answer: float | None = None, tolerance: float | None = None) -> tuple[bool, str]:
    """(right, text) for knowledge-check ``question`` (1-based) of ``answers`` as the learner saw
    the quiz (shuffled with ``seed``): a choice question by comparing :func:`option_digest` of the
    chosen options' texts with ``digest`` (so the key is in no test cell), a numeric one by
    ``answer`` ± ``tolerance``; the text is the chosen options' feedback. Never raises for an answer."""
    try:
        return _quiz_verdict(lesson, answers, question, seed, salt, digest, answer, tolerance)
    except (AssertionError, ValueError, TypeError) as exc:  # an answer that names no option, or no number
        return False, str(exc)


def _quiz_verdict(lesson, answers, question, seed, salt, digest, answer, tolerance) -> tuple[bool, str]:
    quiz = _standalone_quiz()  # the quiz module needs no package: its file alone, quicker than the package
    shown = quiz.shuffled(quiz.load(lesson), seed=seed)
    q = shown.questions[question - 1]
    given = answers[question - 1] if isinstance(answers, (list, tuple)) and question <= len(answers) else None
    if given is None:
        raise AssertionError(f"quiz {lesson} question {question}: not answered.")
    if q.kind == "numeric":
        if isinstance(given, str):
            given = quiz._number_in_unit(q, given, question - 1)
        if not isinstance(given, (int, float)) or isinstance(given, bool):
            raise AssertionError(f"quiz {lesson} question {question}: give a number, got {given!r}.")
        right = abs(float(given) - answer) <= tolerance
        feedback = [q.feedback["correct"] if right else
                    q.feedback.get("too_low" if float(given) < answer else "too_high",
                                   q.feedback.get("incorrect", ""))]
    else:
        chosen = [given] if q.kind == "single" or isinstance(given, (str, int)) else list(given)
        try:
            indices = sorted({quiz.option_index(q, a) for a in chosen})
        except ValueError as exc:
            raise AssertionError(f"quiz {lesson} question {question}: {exc}") from None
        if q.kind == "single" and len(indices) != 1:
            raise AssertionError(f"quiz {lesson} question {question}: choose one option.")
        right = option_digest(salt, [q.options[j].text for j in indices]) == digest
        feedback = [q.options[j].feedback for j in indices]
    return right, f"quiz {lesson} question {question}: {'right' if right else 'not right yet'}.\n" + "\n".join(feedback)


def _standalone_quiz():
    """``greenlab/course/quiz.py`` loaded from its file under a fresh name, reading the quiz data
    beside this file (it imports only the standard library)."""
    import importlib.util
    from pathlib import Path

    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(f"_quiz_{secrets.token_hex(8)}", here / "quiz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    module._quiz_dir = lambda: here.parent / "quizzes"
    return module


def option_digest(salt: str, texts: list[str]) -> str:
    """A salted SHA-256 of a set of option texts: what a graded quiz keeps instead of its key."""
    joined = "\x1f".join(sorted(texts))
    return hashlib.sha256(f"{salt}\x1e{joined}".encode("utf-8")).hexdigest()
