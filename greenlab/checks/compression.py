"""Lesson 07 (compression): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import Check, check_function, number_or_none


def tensor_sparsity(fn: Any) -> Check:
    """Check a learner's ``fn(tensor) -> fraction (0..1) of entries that are exactly zero``."""
    import torch

    cases = [
        (torch.tensor([0.0, 1.0, 0.0, 2.0]), 0.5),
        (torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0]]), 5 / 6),
        (torch.tensor([1.0, -1.0, 0.5]), 0.0),
        (torch.zeros(2, 2, 3), 1.0),
        (torch.tensor([[1e-8, 0.0], [-0.0, 4.0]]), 0.5),
    ]

    def hint(args, expected, got):
        (t,) = args
        value = number_or_none(got)
        if value is None:
            return None
        if math.isclose(value, 1.0 - expected, abs_tol=1e-9):
            return "that is the share of non-zero entries (density); sparsity is the share of zeros."
        if math.isclose(value, expected * t.numel(), abs_tol=1e-9) and t.numel() > 1:
            return "that is the count of zeros; divide by the number of entries (t.numel())."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="tensor_sparsity", hint=hint)


def break_even(fn: Any) -> Check:
    """Check a learner's ``fn(compression_joules, joules_before, joules_after) -> inferences``:
    the smallest whole number n with n x (before - after) >= compression_joules; ``math.inf``
    when the compressed model saves nothing per inference; 0 when compressing cost nothing."""
    cases = [
        ((100.0, 0.5, 0.25), 400),
        ((10.0, 0.3, 0.0), 34),
        ((1.0, 0.3, 0.1), 5),
        ((50.0, 0.2, 0.2), math.inf),
        ((50.0, 0.2, 0.4), math.inf),
        ((0.0, 0.2, 0.1), 0),
    ]

    def hint(args, expected, got):
        joules, before, after = args
        value = number_or_none(got)
        if value is None:
            return None
        saving = before - after
        if saving > 0 and math.isfinite(value):
            exact = joules / saving
            if math.isclose(value, exact, rel_tol=1e-9) and exact != expected:
                return "a count of inferences is a whole number: round up (math.ceil)."
            if math.isclose(value, math.floor(exact), rel_tol=1e-9):
                return "round up, not down: after floor(n) inferences the cost is not yet paid back."
        if before > 0 and math.isclose(value, joules / before, rel_tol=1e-9):
            return "divide by the saving per inference (before - after), not by the energy before."
        if saving <= 0 and joules > 0:
            return "when the compressed model saves nothing per inference it never pays back: return math.inf."
        return None

    # exact match (counts are whole numbers); rtol=0 also keeps a finite answer from matching math.inf
    return check_function(fn, cases, rtol=0.0, atol=0.0, name="break_even", hint=hint)
