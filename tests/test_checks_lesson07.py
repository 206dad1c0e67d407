"""Lesson 07 checkers: right answers pass, typical mistakes fail with a hint, stubs are not attempted."""

import math

from greenlab import checks


def right_sparsity(t):
    return float((t == 0).sum()) / t.numel()


def right_break_even(joules, before, after):
    if joules == 0:
        return 0
    saving = before - after
    if saving <= 0:
        return math.inf
    return math.ceil(joules / saving - 1e-9)


def test_tensor_sparsity_passes_right_answer():
    assert checks.tensor_sparsity(right_sparsity).passed


def test_tensor_sparsity_density_gets_hint():
    result = checks.tensor_sparsity(lambda t: float((t != 0).sum()) / t.numel())
    assert result.status == checks.FAILED
    assert any("density" in d for d in result.details)


def test_tensor_sparsity_count_gets_hint():
    result = checks.tensor_sparsity(lambda t: float((t == 0).sum()))
    assert result.status == checks.FAILED
    assert any("numel" in d for d in result.details)


def test_tensor_sparsity_near_zero_is_not_zero():
    # counting |w| < 1e-6 as zero is wrong: pruning sets exact zeros
    result = checks.tensor_sparsity(lambda t: float((t.abs() < 1e-6).sum()) / t.numel())
    assert result.status == checks.FAILED


def test_tensor_sparsity_stub_not_attempted():
    assert checks.tensor_sparsity(lambda t: None).status == checks.NOT_ATTEMPTED
    assert checks.tensor_sparsity(None).status == checks.NOT_ATTEMPTED


def test_break_even_passes_right_answer():
    result = checks.break_even(right_break_even)
    assert result.passed, result.text()


def test_break_even_agrees_with_library():
    from greenlab.compress import break_even_inferences

    assert checks.break_even(break_even_inferences).passed


def test_break_even_no_rounding_gets_hint():
    def unrounded(joules, before, after):
        saving = before - after
        return joules / saving if saving > 0 else math.inf

    result = checks.break_even(unrounded)
    assert result.status == checks.FAILED
    assert any("round up" in d for d in result.details)


def test_break_even_floor_gets_hint():
    def floored(joules, before, after):
        saving = before - after
        return math.floor(joules / saving) if saving > 0 else math.inf

    result = checks.break_even(floored)
    assert result.status == checks.FAILED
    assert any("not down" in d for d in result.details)


def test_break_even_no_saving_gets_hint():
    def never_inf(joules, before, after):
        return math.ceil(joules / (before - after)) if before != after else 0

    result = checks.break_even(never_inf)
    assert result.status == checks.FAILED
    assert any("math.inf" in d for d in result.details)


def test_break_even_stub_not_attempted_and_errors_reported():
    assert checks.break_even(lambda a, b, c: None).status == checks.NOT_ATTEMPTED

    def crashes(joules, before, after):
        return joules / (before - after)  # ZeroDivisionError when before == after

    result = checks.break_even(crashes)
    assert result.status == checks.FAILED
    assert any("ZeroDivisionError" in d for d in result.details)
