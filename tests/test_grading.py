"""Grade-time checking (greenlab.course.grading): a fresh copy of the checkers that a learner's
cell cannot have rebound, cases drawn at grade time, and the knowledge check graded as shown
against a salted hash of its key."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import greenlab as gl
from greenlab.course import grading
from greenlab.course.checks import Check
from greenlab.course.quiz import load, normal_text, option_index, shuffled


def _fresh_grading():
    """greenlab.course.grading loaded from its file under a fresh name, as a hidden test loads it."""
    path = Path(gl.__file__).parent / "course" / "grading.py"
    spec = importlib.util.spec_from_file_location("_grading_test_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def co2e_right(kwh, g_per_kwh, pue):
    return kwh * g_per_kwh * pue


def co2e_fitted(kwh, g_per_kwh, pue):  # the visible cases only
    return {(1.0, 100.0, 1.0): 100.0, (0.5, 400.0, 1.5): 300.0, (2.0, 50.0, 1.1): 110.0,
            (0.0, 471.84, 1.58): 0.0}[(kwh, g_per_kwh, pue)]


def test_a_rebound_checker_or_helper_does_not_reach_the_grade(monkeypatch):
    import greenlab.course.checks.carbon as carbon

    fake = lambda *a, **k: Check("co2e_grams", "passed", "ok")  # noqa: E731
    monkeypatch.setattr(gl.check, "co2e_grams", fake)
    monkeypatch.setattr(carbon, "check_function", fake)
    assert gl.check.co2e_grams(None).passed  # the learner's kernel is fooled ...
    with pytest.raises(AssertionError, match="not attempted|placeholder"):
        _fresh_grading().grade("co2e_grams", lambda *a: None)  # ... the grade is not
    assert sys.modules["greenlab.course.checks.carbon"] is carbon  # and the kernel's modules are back


def test_an_answer_fitted_to_the_visible_cases_fails_the_drawn_ones():
    assert gl.check.co2e_grams(co2e_fitted).passed
    verdict = grading.fresh_verdict("co2e_grams", co2e_fitted, seed=7)
    assert verdict.status == "failed" and "KeyError" in " ".join(verdict.details)
    assert grading.fresh_verdict("co2e_grams", co2e_right, seed=7).passed
    assert len(grading.fresh_verdict("co2e_grams", co2e_right, seed=7).message) > 0


@pytest.mark.parametrize("name", ["accumulate_gradients", "fedavg_aggregate", "best_start_hour", "co2e_grams"])
def test_checkers_that_draw_cases_draw_different_ones_per_seed(name):
    checker = getattr(gl.check, name)
    assert checker.draws_cases
    seen = []

    def spy(*args):
        seen.append(repr(args)[:2000])
        return None

    checker(spy, seed=1)
    first = list(seen)
    seen.clear()
    checker(spy, seed=2)
    assert first != seen and len(first) > 4


def test_the_library_is_refused_at_grade_time_too():
    with pytest.raises(AssertionError, match="refused"):
        grading.grade("fedavg_aggregate", gl.federated.fedavg)


# --- the knowledge check --------------------------------------------------------------------------

def test_text_answers_are_compared_loosely():
    assert normal_text("  128. ") == normal_text("128") == "128"
    assert normal_text("Use  BF16!") == "use bf16"
    question = load("03").questions[0]
    right = next(o.text for o in question.options if o.correct)
    assert question.options[option_index(question, right.upper() + " .")].correct


def test_the_quiz_is_graded_in_the_order_it_was_shown():
    quiz = load("03")
    shown = shuffled(quiz, seed=11)
    answers = [q.correct_indices[0] if q.kind == "single" else list(q.correct_indices) for q in shown.questions]
    letters = ["abcdefgh"[a] if isinstance(a, int) else ["abcdefgh"[i] for i in a] for a in answers]
    assert all(gl.check.quiz_answer("03", answers, n, order_seed=11).passed for n in range(1, len(answers) + 1))
    assert all(gl.check.quiz_answer("03", letters, n, order_seed=11).passed for n in range(1, len(answers) + 1))
    moved = [n for n, (a, q) in enumerate(zip(answers, quiz.questions), 1)
             if isinstance(a, int) and not q.options[a].correct]
    assert moved, "the shuffle moved no correct option: pick another seed"
    assert not gl.check.quiz_answer("03", answers, moved[0]).passed  # unshuffled grading got this wrong


def test_grade_quiz_checks_a_salted_hash_of_the_shown_choice():
    shown = shuffled(load("03"), seed=5)
    q = shown.questions[0]
    right = [o.text for o in q.options if o.correct]
    digest = grading.option_digest("salt", right)
    assert grading.option_digest("other", right) != digest
    letter = "abcdefgh"[q.correct_indices[0]]
    grading.grade_quiz("03", [letter], 1, seed=5, salt="salt", digest=digest)
    wrong = "abcdefgh"[next(j for j in range(len(q.options)) if j not in q.correct_indices)]
    assert not grading.quiz_verdict("03", [wrong], 1, seed=5, salt="salt", digest=digest)[0]
    with pytest.raises(AssertionError, match="not right"):
        grading.grade_quiz("03", [wrong], 1, seed=5, salt="salt", digest=digest)
    with pytest.raises(AssertionError, match="not answered"):
        grading.grade_quiz("03", [None], 1, seed=5, salt="salt", digest=digest)


def test_an_answer_that_names_no_option_is_wrong_not_an_error():
    right, text = grading.quiz_verdict("03", ["no such option"], 1, seed=5, salt="s", digest="d")
    assert not right and "not one of the options" in text
    numeric = next(i for i, q in enumerate(load("00").questions, 1) if q.kind == "numeric")
    answers = [None] * numeric
    answers[-1] = "two"
    assert grading.quiz_verdict("00", answers, numeric, seed=5, salt="s", answer=2.0, tolerance=0.01)[0] is False
