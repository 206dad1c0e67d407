"""Lesson 04 (dynamic batch sizing): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import Check, check_function, number_or_none


def scaled_lr_with_warmup(fn: Any) -> Check:
    """Check a learner's ``fn(step, base_lr, base_batch, batch, warmup_steps) -> learning rate``:
    the linear scaling rule (lr = base_lr x batch / base_batch) reached by Goyal et al.'s (2017)
    gradual warm-up, which rises linearly from ``base_lr`` at step 0 to the scaled rate at step
    ``warmup_steps`` and stays there (no warm-up when ``warmup_steps`` is 0)."""
    from greenlab.batching import goyal_warmup, linear_scaling_lr

    inputs = [
        (0, 0.1, 256, 1024, 100),
        (50, 0.1, 256, 1024, 100),
        (100, 0.1, 256, 1024, 100),
        (5000, 0.1, 256, 1024, 100),
        (25, 0.01, 100, 300, 100),
        (10, 0.05, 32, 32, 20),
        (3, 0.2, 64, 512, 0),
    ]
    cases = [(args, linear_scaling_lr(args[1], args[2], args[3]) * goyal_warmup(args[2], args[3], args[4])(args[0]))
             for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        step, base_lr, base_batch, batch, warmup_steps = args
        target = base_lr * batch / base_batch
        if math.isclose(value, base_lr * base_batch / batch, rel_tol=1e-9):
            return "the ratio is upside down: a batch k times larger gets a k times larger rate."
        if step < warmup_steps and math.isclose(value, target, rel_tol=1e-9):
            return "before warmup_steps the rate is still rising: start at base_lr, not at the scaled rate."
        if step < warmup_steps and math.isclose(value, target * step / warmup_steps, rel_tol=1e-9):
            return "Goyal et al.'s warm-up starts from base_lr (the small-batch rate), not from zero."
        if math.isclose(value, base_lr, rel_tol=1e-9) and batch != base_batch:
            return "after the warm-up the rate is base_lr x batch / base_batch (the linear scaling rule)."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="scaled_lr_with_warmup", hint=hint)
