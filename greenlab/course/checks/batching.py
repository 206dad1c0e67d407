"""Lesson 03 (dynamic batch sizing): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import Check, check_function, drawn_inputs, graded, number_or_none
from greenlab.techniques.batching.noise_scale import simple_noise_scale
from greenlab.techniques.batching.schedules import goyal_warmup, grow_batch_then_decay, linear_scaling_lr


@graded(reference=(
    "greenlab.techniques.batching.schedules:linear_scaling_lr",
    "greenlab.techniques.batching.schedules:goyal_warmup",
))
def scaled_lr_with_warmup(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(step, base_lr, base_batch, batch, warmup_steps) -> learning rate``:
    the linear scaling rule (lr = base_lr x batch / base_batch) reached by Goyal et al.'s (2017)
    gradual warm-up, which rises linearly from ``base_lr`` at step 0 to the scaled rate at step
    ``warmup_steps`` and stays there (no warm-up when ``warmup_steps`` is 0)."""
    inputs = [
        (0, 0.1, 256, 1024, 100),
        (50, 0.1, 256, 1024, 100),
        (100, 0.1, 256, 1024, 100),
        (5000, 0.1, 256, 1024, 100),
        (25, 0.01, 100, 300, 100),
        (10, 0.05, 32, 32, 20),
        (3, 0.2, 64, 512, 0),
    ] + drawn_inputs(seed, "scaled_lr_with_warmup", _draw_warmup)
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


@graded(reference=("greenlab.techniques.batching.noise_scale:simple_noise_scale",))
def noise_scale_from_norms(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(small_sq_norm, big_sq_norm, small_batch, big_batch) ->
    (g2, trace_cov, b_simple)``: the true gradient's squared norm |G|^2, the trace of the
    per-sample gradient covariance and B_simple = trace / |G|^2 (McCandlish et al., 2018),
    solved from E|G_B|^2 = |G|^2 + trace/B at the two batch sizes. Expected values come from
    ``greenlab.techniques.batching.noise_scale.simple_noise_scale``."""
    inputs = [(2.0, 1.1, 10, 100), (5.0, 0.6, 8, 128), (0.09, 0.05, 16, 512), (1.5, 1.4, 32, 64)]
    inputs += drawn_inputs(seed, "noise_scale_from_norms", _draw_norms)
    cases = [(args, simple_noise_scale(*args)) for args in inputs]

    def hint(args, expected, got):
        try:
            g2, cov, b = (float(v) for v in got)
        except (TypeError, ValueError):
            return "return three numbers: (g2, trace_cov, b_simple)."
        small, big, bs, bb = args
        e_g2, e_cov, e_b = expected
        if math.isclose(b, e_g2 / e_cov, rel_tol=1e-6):
            return "B_simple is upside down: it is trace_cov / g2 (noise over signal), a number of samples."
        if math.isclose(g2, big, rel_tol=1e-9):
            return ("the big batch's squared norm still holds noise (trace/B_big); remove it: "
                    "g2 = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small).")
        if math.isclose(cov, small - big, rel_tol=1e-9):
            return ("the difference of the squared norms is trace x (1/B_small - 1/B_big): divide by that, "
                    "not use it as the trace.")
        if math.isclose(g2, (bb * small - bs * big) / (bb - bs), rel_tol=1e-9):
            return "the norms are swapped: the big batch's squared norm is weighted by the big batch size."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="noise_scale_from_norms", hint=hint)


@graded(reference=("greenlab.techniques.batching.schedules:grow_batch_then_decay",))
def batch_then_lr_schedule(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(epoch, base_batch, base_lr, milestones, factor, max_batch) ->
    (batch, lr)``: Smith et al.'s (2018) schedule that grows the batch ``factor`` times at each
    milestone while it fits in ``max_batch`` and decays the learning rate by ``factor`` once it
    would not. Expected values come from ``greenlab.techniques.batching.schedules.grow_batch_then_decay``."""
    inputs = [(0, 32, 0.1, [2, 4, 6], 4, 512), (2, 32, 0.1, [2, 4, 6], 4, 512),
              (4, 32, 0.1, [2, 4, 6], 4, 512), (5, 32, 0.1, [2, 4, 6], 4, 512),
              (7, 32, 0.1, [2, 4, 6], 4, 512), (3, 64, 0.05, [1, 2, 3], 2, 128),
              (9, 16, 0.2, [3, 6], 5, 16), (1, 16, 0.2, [3, 6], 5, 1000)]
    inputs += drawn_inputs(seed, "batch_then_lr_schedule", _draw_batch_schedule)
    cases = [(args, grow_batch_then_decay(*args)) for args in inputs]

    def hint(args, expected, got):
        try:
            batch, lr = float(got[0]), float(got[1])
        except (TypeError, ValueError, IndexError, KeyError):
            return "return two numbers: (batch, lr)."
        epoch, base_batch, base_lr, milestones, factor, max_batch = args
        passed = sum(1 for m in milestones if m <= epoch)
        if batch > max_batch:
            return f"the batch {batch:g} exceeds max_batch ({max_batch}): stop growing where memory ends."
        if math.isclose(batch, expected[0]) and math.isclose(lr, base_lr) and expected[1] < base_lr:
            return ("once the batch cannot grow any more, the learning rate takes over: divide it by "
                    "factor at each further milestone.")
        if math.isclose(lr, base_lr * batch / base_batch, rel_tol=1e-9) and batch != base_batch:
            return ("Smith et al. keep the learning rate while the batch grows (growing the batch lowers the "
                    "update noise as a rate decay would); do not scale it up with the batch.")
        if passed and math.isclose(batch, base_batch * factor ** (passed - 1)):
            return "a milestone counts from the epoch it names: at epoch m >= milestone the batch has grown."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="batch_then_lr_schedule", hint=hint)


# --- inputs drawn at grade time -----------------------------------------------------------------

def _draw_warmup(rng) -> tuple:
    warmup = rng.choice([0, rng.randint(1, 200)])
    base_batch = rng.choice([16, 32, 64, 128, 256])
    return (rng.randint(0, 2 * warmup + 10), round(rng.uniform(0.001, 0.5), 4), base_batch,
            base_batch * rng.choice([1, 2, 3, 4, 8, 16]), warmup)


def _draw_norms(rng) -> tuple:
    small = rng.choice([4, 8, 16, 32])
    big = small * rng.choice([2, 4, 8, 16])
    g2, trace = round(rng.uniform(0.05, 3.0), 3), round(rng.uniform(0.5, 50.0), 2)
    return (g2 + trace / small, g2 + trace / big, small, big)


def _draw_batch_schedule(rng) -> tuple:
    milestones = sorted(rng.sample(range(1, 11), rng.randint(1, 3)))
    factor, base = rng.randint(2, 5), rng.choice([8, 16, 32, 64])
    return (rng.randint(0, 12), base, round(rng.uniform(0.01, 0.5), 3), milestones, factor,
            base * factor ** rng.randint(0, 3))
