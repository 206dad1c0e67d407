"""Tests for the lesson-08 checker gl.check.most_uncertain."""

import torch

from greenlab import checks


def least_confident(probs, k):
    return probs.max(dim=1).values.argsort()[:k]


def highest_entropy(probs, k):
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(dim=1)
    return [int(i) for i in entropy.argsort(descending=True)[:k]]


def test_right_answers_pass_in_any_form():
    assert checks.most_uncertain(least_confident).passed
    assert checks.most_uncertain(highest_entropy).passed  # the cases agree for both measures
    assert checks.most_uncertain(lambda p, k: tuple(reversed(least_confident(p, k).tolist()))).passed


def test_most_confident_fails_with_hint():
    result = checks.most_uncertain(lambda p, k: p.max(dim=1).values.argsort(descending=True)[:k])
    assert result.status == checks.FAILED
    assert any("most sure" in d for d in result.details)


def test_wrong_count_fails():
    result = checks.most_uncertain(lambda p, k: least_confident(p, k + 1))
    assert result.status == checks.FAILED


def test_placeholders_are_not_attempted():
    assert checks.most_uncertain(None).status == checks.NOT_ATTEMPTED
    assert checks.most_uncertain(lambda p, k: None).status == checks.NOT_ATTEMPTED


def test_learner_exception_is_reported_not_raised():
    def broken(p, k):
        raise RuntimeError("oops")

    result = checks.most_uncertain(broken)
    assert result.status == checks.FAILED
    assert any("oops" in d for d in result.details)
