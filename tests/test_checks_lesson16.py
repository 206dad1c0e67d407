"""Tests for the lesson-16 checkers: the lifecycle bill by phase, and where two lives cost the same."""

import math

import greenlab as gl
from greenlab.course import checks


def details(result):
    return " ".join(result.details)


# --- the lifecycle bill ------------------------------------------------------------------------

def bill_by_list(training, per_token, tokens, write_j, writes, idle_w, idle_s):
    """A right answer in another style: the phases built from a list of pairs."""
    pairs = [("idle", idle_s * idle_w), ("serving", per_token * tokens), ("training", training + 0.0),
             ("checkpoints", sum([write_j] * writes))]
    return dict(pairs)


def test_bill_accepts_a_right_answer_written_differently():
    result = checks.lifecycle_bill(bill_by_list)
    assert result.passed, result.text()
    assert checks.lifecycle_bill(bill_by_list, seed=5).passed


def test_bill_with_idle_in_watt_hours_fails_with_its_hint():
    def wrong(t, s, n, c, w, iw, i):
        return {**bill_by_list(t, s, n, c, w, iw, i), "idle": iw * i / 3600}

    result = checks.lifecycle_bill(wrong)
    assert result.status == checks.FAILED and "watt-hours" in details(result)


def test_bill_with_one_checkpoint_write_fails_with_its_hint():
    def wrong(t, s, n, c, w, iw, i):
        return {**bill_by_list(t, s, n, c, w, iw, i), "checkpoints": c}

    result = checks.lifecycle_bill(wrong)
    assert result.status == checks.FAILED and "every checkpoint write" in details(result)


def test_bill_with_the_total_as_training_fails_with_its_hint():
    def wrong(t, s, n, c, w, iw, i):
        bill = bill_by_list(t, s, n, c, w, iw, i)
        return {**bill, "training": sum(bill.values())}

    result = checks.lifecycle_bill(wrong)
    assert result.status == checks.FAILED and "its own joules" in details(result)


def test_bill_with_a_misnamed_phase_names_the_keys():
    def wrong(t, s, n, c, w, iw, i):
        bill = bill_by_list(t, s, n, c, w, iw, i)
        bill["train"] = bill.pop("training")
        return bill

    result = checks.lifecycle_bill(wrong)
    assert result.status == checks.FAILED and "missing 'training'" in details(result)


def test_bill_placeholder_is_not_attempted_and_the_library_is_refused():
    assert checks.lifecycle_bill(None).status == checks.NOT_ATTEMPTED
    assert checks.lifecycle_bill(lambda *a: None).status == checks.NOT_ATTEMPTED
    verdict = checks.lifecycle_bill(gl.lifecycle.lifecycle_bill)
    assert verdict.status == checks.FAILED and "refused" in verdict.message
    wrapped = checks.lifecycle_bill(lambda *a: gl.lifecycle.lifecycle_bill(*a))
    assert wrapped.status == checks.FAILED and "refused" in wrapped.message


# --- where two lives cost the same -------------------------------------------------------------

def crossing_by_costs(fa, sa, fb, sb):
    """A right answer in another style: compare the two lives' costs at the candidate N."""
    if math.isclose(sa, sb):
        return None
    n = (fa - fb) / (sb - sa)
    return n if n > 0 else None


def test_crossover_accepts_a_right_answer_written_differently():
    result = checks.crossover_tokens(crossing_by_costs)
    assert result.passed, result.text()
    assert checks.crossover_tokens(crossing_by_costs, seed=5).passed


def test_crossover_inverted_fails_with_its_hint():
    result = checks.crossover_tokens(lambda fa, sa, fb, sb: None if fa == fb else (sa - sb) / (fb - fa))
    assert result.status == checks.FAILED and "not the other way round" in details(result)


def test_crossover_keeping_a_negative_n_fails_with_its_hint():
    result = checks.crossover_tokens(lambda fa, sa, fb, sb: None if sa == sb else (fb - fa) / (sa - sb))
    assert result.status == checks.FAILED and "a negative N is no crossing" in details(result)


def test_crossover_counting_one_fixed_cost_fails_with_its_hint():
    result = checks.crossover_tokens(lambda fa, sa, fb, sb: fb / sa if sa > sb else None)
    assert result.status == checks.FAILED and "both lives pay their fixed cost" in details(result)


def test_crossover_placeholder_is_not_attempted():
    assert checks.crossover_tokens(None).status == checks.NOT_ATTEMPTED
    assert checks.crossover_tokens(lambda *a: None).status == checks.NOT_ATTEMPTED
