"""Lessons 12 and 11 (adapting and serving a small language model; fitting it in memory): their exercise
checkers, exposed as ``gl.check.<name>`` (e.g. ``gl.check.zero_bytes_per_rank(fn)``)."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import Check, check_function, drawn_inputs, graded, number_or_none
from greenlab.techniques.lm.sharding import zero_bytes_per_rank as reference_zero_bytes


@graded(reference=("greenlab.techniques.lm.sharding:zero_bytes_per_rank",))
def zero_bytes_per_rank(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(n_params, world_size, stage) -> bytes`` one data-parallel rank holds
    for parameters, gradients and AdamW state in fp32 (4 + 4 + 8 bytes per parameter) under ZeRO
    ``stage`` 0-3 (``greenlab.techniques.lm.sharding.zero_bytes_per_rank``'s total)."""
    inputs = [(1000, 1, 0), (1000, 4, 0), (1000, 4, 1), (1000, 4, 2), (1000, 4, 3),
              (1_000_000, 8, 1), (1_000_000, 8, 2), (1_000_000, 8, 3), (4096, 2, 3)]
    inputs += drawn_inputs(seed, "zero_bytes_per_rank", _draw_sharding)
    cases = [(args, reference_zero_bytes(*args)["total"]) for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        n, world, stage = args
        if stage > 0 and math.isclose(value, 16 * n, rel_tol=1e-9):
            return "that is stage 0 (everything replicated); from stage 1 on some of it is split over the ranks."
        if math.isclose(value, 16 * n / world, rel_tol=1e-9) and stage < 3:
            return f"stage {stage} keeps some pieces whole on every rank: only stage 3 shards all three."
        if stage == 1 and math.isclose(value, 4 * n + 4 * n / world + 8 * n / world, rel_tol=1e-9):
            return "stage 1 shards only the optimizer state; gradients are sharded from stage 2."
        if stage >= 1 and math.isclose(value, 4 * n / world + 4 * n + 8 * n, rel_tol=1e-9):
            return "the first thing ZeRO shards is the optimizer state (stage 1), the parameters last (stage 3)."
        if math.isclose(value, expected / 2, rel_tol=1e-9):
            return "AdamW keeps two fp32 moments per parameter: 8 bytes of optimizer state, not 4."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=0.5, name="zero_bytes_per_rank", hint=hint)


@graded
def lora_trainable_params(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(in_features, out_features, rank) -> trainable parameters`` that LoRA
    adds beside one frozen linear layer: A (rank x in) and B (out x rank)."""
    inputs = [(64, 192, 4), (64, 64, 1), (256, 64, 8), (1024, 4096, 16)]
    inputs += drawn_inputs(seed, "lora_trainable_params",
                           lambda rng: (rng.randint(1, 4096), rng.randint(1, 4096), rng.choice([1, 2, 4, 8, 16, 32])))
    cases = [(args, args[2] * (args[0] + args[1])) for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        i, o, r = args
        if math.isclose(value, i * o, rel_tol=1e-9) or math.isclose(value, i * o + r * (i + o), rel_tol=1e-9):
            return "the frozen weight (in x out) gets no gradient: count only the two small matrices."
        if math.isclose(value, r * r, rel_tol=1e-9) or math.isclose(value, r * i, rel_tol=1e-9) \
                or math.isclose(value, r * o, rel_tol=1e-9):
            return "there are two matrices: A maps in_features to rank, B maps rank to out_features."
        return None

    return check_function(fn, cases, rtol=0, atol=0.5, name="lora_trainable_params", hint=hint)


def _draw_sharding(rng) -> tuple:
    # parameters that split evenly over the ranks, as in the visible cases: rounding a shard is no part of it
    world = rng.choice([1, 2, 4, 8, 16, 64])
    return (world * rng.randint(1, 10 ** 6), world, rng.randint(0, 3))
