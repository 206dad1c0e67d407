"""Lesson 03 checker: accumulate_gradients (gradient accumulation equals one big batch)."""

import torch
import torch.nn.functional as F

from greenlab import checks
from greenlab.checks import FAILED, NOT_ATTEMPTED, PASSED


def right(model, x, y, micro_batch_size):
    n = len(x)
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = F.cross_entropy(model(xb), yb, reduction="sum") / n
        loss.backward()
    return model


def mean_over_k(model, x, y, micro_batch_size):
    chunks = list(zip(x.split(micro_batch_size), y.split(micro_batch_size)))
    for xb, yb in chunks:
        (F.cross_entropy(model(xb), yb) / len(chunks)).backward()
    return model


def test_a_correct_loop_passes():
    result = checks.accumulate_gradients(right)
    assert result.status == PASSED, result.text()


def test_returning_something_other_than_the_model_still_checks_the_model():
    result = checks.accumulate_gradients(lambda m, x, y, b: (right(m, x, y, b), True)[1])
    assert result.status == PASSED, result.text()


def test_placeholders_are_not_attempted():
    assert checks.accumulate_gradients(None).status == NOT_ATTEMPTED
    assert checks.accumulate_gradients(lambda m, x, y, b: None).status == NOT_ATTEMPTED


def test_no_backward_at_all_fails_without_raising():
    result = checks.accumulate_gradients(lambda m, x, y, b: m)
    assert result.status == FAILED
    assert all("no gradients" in d for d in result.details)


def test_dividing_by_micro_batch_count_fails_only_on_a_short_last_batch():
    result = checks.accumulate_gradients(mean_over_k)
    assert result.status == FAILED
    # (12, 4), (9, 2)? 9 = 2+2+2+2+1 is short; (10, 4), (10, 3) short; (12, 4) and (7, 7) are even
    assert result.message == "3 of 5 test inputs give a wrong result."
    assert all("smaller" in d for d in result.details)


def test_unscaled_losses_and_zeroed_gradients_get_their_hints():
    def unscaled(model, x, y, b):
        for xb, yb in zip(x.split(b), y.split(b)):
            F.cross_entropy(model(xb), yb).backward()
        return model

    def zeroing(model, x, y, b):
        for xb, yb in zip(x.split(b), y.split(b)):
            model.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
        return model

    assert any("scaled down" in d for d in checks.accumulate_gradients(unscaled).details)
    assert any("do not zero" in d for d in checks.accumulate_gradients(zeroing).details)


def test_an_exception_in_the_learner_code_is_reported():
    def broken(model, x, y, b):
        raise RuntimeError("shapes do not match")

    result = checks.accumulate_gradients(broken)
    assert result.status == FAILED
    assert "RuntimeError: shapes do not match" in result.details[0]


def test_checker_leaves_the_global_random_state_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    checks.accumulate_gradients(right)
    assert torch.equal(torch.rand(3), expected)
