"""Lesson 03 checker: scaled_lr_with_warmup (linear scaling rule + Goyal et al. warm-up)."""

import pytest

import greenlab as gl

from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED


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


# --- noise_scale_from_norms: B_simple from two batch sizes' gradient norms ---

def _noise_right(small_sq_norm, big_sq_norm, small_batch, big_batch):
    # solve [[1, 1/b_s], [1, 1/b_b]] @ [g2, trace] = [small, big]
    det = 1 / big_batch - 1 / small_batch
    g2 = (small_sq_norm / big_batch - big_sq_norm / small_batch) / det
    trace = (big_sq_norm - small_sq_norm) / det
    return g2, trace, trace / g2


def _noise_inverted(s, b, bs, bb):
    g2, trace, _ = _noise_right(s, b, bs, bb)
    return g2, trace, g2 / trace


def _noise_big_as_true(s, b, bs, bb):
    _, trace, _ = _noise_right(s, b, bs, bb)
    return b, trace, trace / b


def _noise_raw_difference(s, b, bs, bb):
    g2, _, _ = _noise_right(s, b, bs, bb)
    return g2, s - b, (s - b) / g2


def _noise_swapped(s, b, bs, bb):
    g2 = (bb * s - bs * b) / (bb - bs)
    _, trace, _ = _noise_right(s, b, bs, bb)
    return g2, trace, trace / g2


def test_noise_scale_passes_a_correct_answer_and_matches_the_library():
    result = checks.noise_scale_from_norms(_noise_right)
    assert result.passed, result.text()
    assert gl.batching.simple_noise_scale(2.0, 1.1, 10, 100) == pytest.approx((1.0, 10.0, 10.0))


@pytest.mark.parametrize("wrong, hint", [
    (_noise_inverted, "upside down"),
    (_noise_big_as_true, "still holds noise"),
    (_noise_raw_difference, "divide by that"),
    (_noise_swapped, "norms are swapped"),
])
def test_noise_scale_names_each_mistake(wrong, hint):
    result = checks.noise_scale_from_norms(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


# --- batch_then_lr_schedule: grow the batch, then decay the rate (Smith et al., 2018) ---

def _schedule_right(epoch, base_batch, base_lr, milestones, factor, max_batch):
    reached = len([m for m in milestones if m <= epoch])
    grows = 0
    while grows < reached and round(base_batch * factor ** (grows + 1)) <= max_batch:
        grows += 1
    return round(base_batch * factor ** grows), base_lr / factor ** (reached - grows)


@pytest.mark.parametrize("wrong, hint", [
    (lambda e, b, lr, ms, f, mx: (b * f ** sum(m <= e for m in ms), lr), "exceeds max_batch"),
    (lambda e, b, lr, ms, f, mx: (_schedule_right(e, b, lr, ms, f, mx)[0], lr), "learning rate takes over"),
    (lambda e, b, lr, ms, f, mx: (_schedule_right(e, b, lr, ms, f, mx)[0],
                                  lr * _schedule_right(e, b, lr, ms, f, mx)[0] / b), "do not scale it up"),
    (lambda e, b, lr, ms, f, mx: _schedule_right(e, b, lr, [m + 1 for m in ms], f, mx), "counts from the epoch"),
])
def test_batch_schedule_names_each_mistake(wrong, hint):
    result = checks.batch_then_lr_schedule(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def test_batch_schedule_passes_a_correct_answer_and_trains_with_it():
    result = checks.batch_then_lr_schedule(_schedule_right)
    assert result.passed, result.text()
    cfg = gl.batching.schedule_config(
        gl.TrainConfig(batch_size=32, lr=0.1, epochs=4),
        lambda e: _schedule_right(e, 32, 0.1, [1, 2, 3], 2, 64), n_train=128)
    assert [cfg.batch_size_at(e) for e in range(4)] == [32, 64, 64, 64]
    # epoch 0: 4 steps at 32; epoch 1: 2 steps at 64; then the rate halves at each milestone
    assert [cfg.lr_schedule(s) for s in (0, 3, 4, 5, 6, 8)] == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25]
