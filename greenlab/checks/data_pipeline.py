"""Lesson 08 (the data pipeline): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

from greenlab.checks.core import (
    NOT_ATTEMPTED,
    Check,
    _sorted_indices,
    check_function,
    is_placeholder,
)


def most_uncertain(fn: Any) -> Check:
    """Check a learner's ``fn(probs, k) -> indices`` of the ``k`` samples the model is least sure
    of: the lowest top-class probability. ``probs`` is a float tensor (N, classes) whose rows sum
    to 1; any order of the returned indices is accepted (list, tuple or tensor of ints)."""
    import torch

    cases = [
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 1), [1]),
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 2), [1, 2]),
        ((torch.tensor([[0.4, 0.3, 0.3], [0.8, 0.1, 0.1], [0.34, 0.33, 0.33], [0.5, 0.45, 0.05]]), 2), [0, 2]),
        ((torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.2, 0.6], [0.05, 0.9, 0.05]]), 3), [0, 1, 2]),
        ((torch.tensor([[0.7, 0.3], [0.55, 0.45]]), 0), []),
    ]

    def as_sorted_indices(probs, k):
        return _sorted_indices(fn(probs, k))

    def hint(args, expected, got):
        probs, k = args
        most_sure = sorted(probs.max(dim=1).values.argsort(descending=True)[:k].tolist())
        if k and got == most_sure and got != expected:
            return "those are the samples the model is most sure of; pick the lowest top-class probability."
        if isinstance(got, list) and len(got) != k:
            return f"return exactly k = {k} indices."
        return None

    as_sorted_indices.__name__ = "most_uncertain"
    if is_placeholder(fn):
        return Check("most_uncertain", NOT_ATTEMPTED, "the function is not defined yet.")
    return check_function(as_sorted_indices, cases, name="most_uncertain", hint=hint)
