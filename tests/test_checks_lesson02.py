"""Lesson 02 checker: accumulate_gradients (gradient accumulation equals one big batch)."""

import pytest
import torch
import torch.nn.functional as F

from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED, PASSED


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


# --- batchnorm_fix: GroupNorm in place of BatchNorm, checked by gradient equality ---

def _swap_right(model, num_groups):
    """Swaps through named_modules() and the parent's attribute (not the library's recursion)."""
    targets = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for name, bn in targets:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, torch.nn.GroupNorm(num_groups, bn.num_features))
    return model


def _swap_top_level_only(model, num_groups):
    for name, child in list(model.named_children()):
        if isinstance(child, torch.nn.BatchNorm2d):
            setattr(model, name, torch.nn.GroupNorm(num_groups, child.num_features))
    return model


def _swap_to_identity(model, num_groups):
    for name, bn in [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, torch.nn.Identity())
    return model


def _swap_wrong_groups(model, num_groups):
    for name, bn in [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, torch.nn.GroupNorm(1, bn.num_features))
    return model


def test_batchnorm_fix_passes_a_correct_swap_and_the_librarys():
    assert checks.batchnorm_fix(_swap_right).passed, checks.batchnorm_fix(_swap_right).text()
    import greenlab as gl
    from greenlab.techniques import accumulation
    assert checks.batchnorm_fix.__wrapped__(accumulation.groupnorm_instead_of_batchnorm).passed
    assert checks.accumulate_gradients.__wrapped__(accumulation.accumulate_gradients).passed


@pytest.mark.parametrize("wrong, hint", [
    (_swap_top_level_only, "replace the nested ones too"),
    (_swap_to_identity, "no longer normalises"),
    (_swap_wrong_groups, "expected GroupNorm(2, 4)"),
])
def test_batchnorm_fix_names_each_mistake(wrong, hint):
    result = checks.batchnorm_fix(wrong)
    assert result.status == FAILED
    assert hint in result.text(), result.text()


def test_batchnorm_fix_placeholder_and_why_batchnorm_needs_it():
    assert checks.batchnorm_fix(lambda m, g: None).status == NOT_ATTEMPTED
    # with BatchNorm left in, micro-batches do not give the big batch's gradient: the check can fail
    from greenlab.course.checks.accumulation import _bn_model

    result = checks.batchnorm_fix(lambda m, g: m)
    assert result.status == FAILED and "still in the model" in result.message
    whole, pieces = _bn_model(), _bn_model()
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
    torch.nn.functional.cross_entropy(whole(x), y).backward()
    for xb, yb in zip(x.split(3), y.split(3)):
        (torch.nn.functional.cross_entropy(pieces(xb), yb, reduction="sum") / 8).backward()
    assert not checks.check_gradients_match(whole, pieces).passed
