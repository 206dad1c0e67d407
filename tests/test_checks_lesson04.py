"""Lesson 04 checker: scaled_lr_with_warmup (linear scaling rule + Goyal et al. warm-up)."""

import pytest

from greenlab import checks
from greenlab.checks import FAILED, NOT_ATTEMPTED


def right(step, base_lr, base_batch, batch, warmup_steps):
    target = base_lr * batch / base_batch
    if step >= warmup_steps:
        return target
    return base_lr + (target - base_lr) * step / warmup_steps


def test_a_correct_answer_passes():
    result = checks.scaled_lr_with_warmup(right)
    assert result.passed, result.text()
    assert result.message == "all 7 test inputs give the expected result."


def test_expected_values_are_the_rule_written_out():
    # the checker computes its expectations with the library; pin them to hand-worked numbers
    assert right(50, 0.1, 256, 1024, 100) == pytest.approx(0.25)
    assert right(25, 0.01, 100, 300, 100) == pytest.approx(0.015)
    assert checks.scaled_lr_with_warmup(lambda *a: right(*a) * 1.001).status == FAILED


def test_placeholder_is_not_attempted():
    assert checks.scaled_lr_with_warmup(None).status == NOT_ATTEMPTED
    assert checks.scaled_lr_with_warmup(lambda *a: None).status == NOT_ATTEMPTED


def test_no_warmup_is_a_failure_with_a_hint():
    result = checks.scaled_lr_with_warmup(lambda s, lr, bb, b, w: lr * b / bb)
    assert result.status == FAILED
    assert any("start at base_lr" in d for d in result.details)


def test_warmup_from_zero_gets_its_own_hint():
    def from_zero(step, base_lr, base_batch, batch, warmup_steps):
        target = base_lr * batch / base_batch
        return target if step >= warmup_steps else target * step / warmup_steps

    result = checks.scaled_lr_with_warmup(from_zero)
    assert result.status == FAILED
    assert any("not from zero" in d for d in result.details)


def test_inverted_ratio_and_missing_scaling_get_hints():
    inverted = checks.scaled_lr_with_warmup(lambda s, lr, bb, b, w: lr * bb / b)
    assert any("upside down" in d for d in inverted.details)
    unscaled = checks.scaled_lr_with_warmup(lambda s, lr, bb, b, w: lr)
    assert any("linear scaling rule" in d for d in unscaled.details)


def test_division_by_zero_warmup_is_reported_not_raised():
    def no_guard(step, base_lr, base_batch, batch, warmup_steps):
        target = base_lr * batch / base_batch
        return base_lr + (target - base_lr) * min(step / warmup_steps, 1.0)

    result = checks.scaled_lr_with_warmup(no_guard)
    assert result.status == FAILED
    assert any("ZeroDivisionError" in d for d in result.details)
