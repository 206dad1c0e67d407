"""Lesson 02 (gradient accumulation): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import copy
from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, _short, check_gradients_match, drawn, graded,
    is_placeholder, wrong_inputs)
from greenlab.techniques.accumulation import groupnorm_instead_of_batchnorm

# Gradient accumulation: accumulate_gradients(model, x, y, micro_batch_size).

_ACCUM_CASES = ((12, 4), (10, 4), (10, 3), (9, 2), (7, 7))  # (samples, micro-batch size)


@graded(reference=("greenlab.techniques.accumulation:accumulate_gradients",))
def accumulate_gradients(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(model, x, y, micro_batch_size)``: forward and backward over ``x``
    in micro-batches of ``micro_batch_size`` samples (the last one may be smaller), leaving in
    every parameter's ``.grad`` the gradient of the mean cross-entropy over all of ``x``, as one
    big batch would. No optimizer step. Tried on a tiny model without BatchNorm, with sample
    counts that do and do not divide by the micro-batch size; fp32 tolerance. With ``seed``
    (grade time), on three more sizes and models drawn from it."""
    import torch

    label = "accumulate_gradients"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict

    failures: list[str] = []
    placeholders = 0
    sizes = [(n, micro, 100 + i) for i, (n, micro) in enumerate(_ACCUM_CASES)]
    rng = drawn(seed, "accumulate_gradients")
    for _ in range(3 if rng else 0):
        n = rng.randint(5, 23)
        micro = rng.choice([m for m in range(2, n) if n % m] or [n])  # a short last micro-batch when n allows
        sizes.append((n, micro, rng.randint(1000, 10 ** 9)))
    for n, micro, case_seed in sizes:
        model, x, y = _accum_case(n, case_seed)
        reference = copy.deepcopy(model)
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        mine = copy.deepcopy(model)
        call = f"{label}(model, x[{n} samples], y, micro_batch_size={micro})"
        try:
            out = fn(mine, x.clone(), y.clone(), micro)
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(out):
            placeholders += 1
            failures.append(f"{call} returned {_short(out)}; return the model")
            continue
        learner = out if isinstance(out, torch.nn.Module) else mine
        result = check_gradients_match(reference, learner, atol=1e-6, rtol=1e-5)
        if result.passed:
            continue
        line = f"{call}: {result.message}"
        advice = _accum_hint(model, x, y, micro, learner) if result.attempted else None
        failures.append(f"{line} Hint: {advice}" if advice else line)

    if placeholders == len(sizes):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        return Check(label, FAILED, wrong_inputs(len(failures), len(sizes)), failures)
    return Check(label, PASSED, f"accumulated gradients equal the big batch's on all {len(sizes)} "
                                "test inputs, including a short last micro-batch.")


def _accum_case(n: int, seed: int):
    """A tiny model (Linear-Tanh-Linear, no BatchNorm) and n samples of 6 features, 3 classes."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 100)
        model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    return model, x, y


def _accum_hint(model, x, y, micro: int, learner) -> str | None:
    """Name the usual mistake when the learner's gradients equal one of its known results."""
    import torch
    import torch.nn.functional as F

    chunks = list(zip(x.split(micro), y.split(micro)))
    k = len(chunks)
    mistakes = {
        "per-batch mean / number of micro-batches": (
            lambda m: [(F.cross_entropy(m(xb), yb) / k).backward() for xb, yb in chunks],
            "the last micro-batch is smaller, so 1/(number of micro-batches) weights its samples "
            "too much; sum the per-sample losses and divide by the total number of samples."),
        "sum of per-batch means": (
            lambda m: [F.cross_entropy(m(xb), yb).backward() for xb, yb in chunks],
            "the gradients add up over micro-batches, so each loss must be scaled down "
            "(by its share of the samples) before backward()."),
        "last micro-batch only": (
            lambda m: [(m.zero_grad(), F.cross_entropy(m(xb), yb).backward()) for xb, yb in chunks],
            "only the last micro-batch's gradient is left: do not zero the gradients between "
            "micro-batches (backward() adds to .grad, which is the point)."),
    }
    got = _flat_grads(learner)
    if got is None:
        return None
    for run, advice in mistakes.values():
        m = copy.deepcopy(model)
        run(m)
        expected = _flat_grads(m)
        if expected is not None and expected.shape == got.shape and torch.allclose(got, expected, rtol=1e-5, atol=1e-6):
            return advice
    return None


def _flat_grads(model):
    import torch

    grads = [p.grad.detach().reshape(-1).double().cpu() for p in model.parameters() if p.grad is not None]
    if len(grads) != len(list(model.parameters())):
        return None
    return torch.cat(grads)


@graded(reference=("greenlab.techniques.accumulation:groupnorm_instead_of_batchnorm",))
def batchnorm_fix(fn: Any) -> Check:
    """Check a learner's ``fn(model, num_groups) -> model``: every BatchNorm (nested ones too)
    replaced by a GroupNorm over the same channels, so that gradients accumulated over
    micro-batches equal the big batch's. Tried on a small CNN with a BatchNorm at the top level
    and one inside a block; the gradients are compared with ``check_gradients_match`` (big batch
    of 8 against micro-batches of 3, 3 and 2) and the layers with the library's
    ``greenlab.techniques.accumulation.groupnorm_instead_of_batchnorm``."""
    import torch

    label = "batchnorm_fix"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    model = _bn_model()
    try:
        out = fn(model, 2)
    except Exception as exc:  # the learner's code failed: report it, never raise
        return Check(label, FAILED, f"your function raised {type(exc).__name__}: {exc}")
    if is_placeholder(out):
        return Check(label, NOT_ATTEMPTED, "the function still returns None; fill it in.")
    mine = out if isinstance(out, torch.nn.Module) else model
    left = [n for n, m in mine.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if left:
        return Check(label, FAILED, f"BatchNorm is still in the model at {', '.join(left)}.",
                     ["replace the nested ones too: walk named_children() recursively (or named_modules()) "
                      "and setattr the parent's attribute."])
    ref = groupnorm_instead_of_batchnorm(_bn_model(), 2)
    want = {n: m for n, m in ref.named_modules() if isinstance(m, torch.nn.GroupNorm)}
    got = dict(mine.named_modules())
    for name, gn in want.items():
        m = got.get(name)
        if isinstance(m, (torch.nn.Identity, torch.nn.Dropout)) or m is None:
            return Check(label, FAILED, f"{name} no longer normalises anything ({type(m).__name__}).",
                         ["removing the normalisation makes the gradients agree but changes the model; "
                          "put a torch.nn.GroupNorm(num_groups, channels) in its place."])
        if not isinstance(m, torch.nn.GroupNorm):
            return Check(label, FAILED, f"{name} is a {type(m).__name__}, expected a GroupNorm.",
                         ["LayerNorm or InstanceNorm take other arguments; "
                          "use torch.nn.GroupNorm(num_groups, channels)."])
        if (m.num_channels, m.num_groups) != (gn.num_channels, gn.num_groups):
            return Check(label, FAILED, f"{name} is GroupNorm({m.num_groups}, {m.num_channels}), "
                         f"expected GroupNorm({gn.num_groups}, {gn.num_channels}).",
                         ["the channel count is the BatchNorm's num_features; the groups are num_groups."])
    g = torch.Generator().manual_seed(9)
    x = torch.randn(8, 3, 8, 8, generator=g)
    y = torch.randint(0, 3, (8,), generator=g)
    whole, pieces = copy.deepcopy(mine), copy.deepcopy(mine)
    torch.nn.functional.cross_entropy(whole(x), y).backward()
    for xb, yb in zip(x.split(3), y.split(3)):
        (torch.nn.functional.cross_entropy(pieces(xb), yb, reduction="sum") / len(x)).backward()
    grads = check_gradients_match(whole, pieces, atol=1e-5, rtol=1e-4)
    if not grads.passed:
        return Check(label, FAILED, f"accumulated gradients still differ from the big batch's: {grads.message}",
                     grads.details)
    return Check(label, PASSED, f"no BatchNorm left, {len(want)} GroupNorm layers in place, and micro-batches "
                 "of 3, 3 and 2 give the big batch's gradients.")


def _bn_model():
    """A small CNN with a BatchNorm at the top level and one nested in a block."""
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(12)
        block = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), block,
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))
