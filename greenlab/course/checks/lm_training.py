"""Lessons 10 and 11 (training a small language model; fitting it in memory): checkers of the techniques the learner writes,
run on tiny tensors against the library's (or PyTorch's own) implementation.

    gl.check.causal_attention(fn)          # fn(q, k, v) -> output, against scaled_dot_product_attention
    gl.check.checkpoint_blocks(fn)         # fn(blocks, x, segment) -> output, with torch.utils.checkpoint
    gl.check.zero1_step(fn)                # fn(flat_params, rank_grads, optimizers), against plain AdamW
    gl.check.activation_bytes_per_layer(fn)  # Korthikanti et al. (2022)'s activation memory
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, check_function, drawn_inputs, graded, is_placeholder,
    number_or_none)
from greenlab.techniques.lm.gpt import Block, checkpoint_blocks as reference_checkpoint_blocks
from greenlab.techniques.lm.sharding import rank_optimizers
from greenlab.training.memory import saved_for_backward


@graded(reference=("greenlab.techniques.lm.gpt:causal_attention",))
def causal_attention(fn: Any) -> Check:
    """Check ``fn(q, k, v) -> output`` for (batch, heads, seq, head_dim) tensors against
    ``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)``."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape in ((1, 1, 4, 2), (2, 2, 5, 3), (1, 3, 8, 4)):
        q, k, v = (torch.randn(*shape, generator=g) for _ in range(3))
        cases.append(((q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True)))

    def hint(args, expected, got):
        q, k, v = args
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return "return one tensor of q's shape (batch, heads, seq, head_dim): the weights times v."
        if torch.isnan(got).any():
            return ("a row is all masked (NaN): each position attends to itself and the earlier ones; "
                    "mask only the later positions (above the diagonal).")
        d, t = q.shape[-1], q.shape[-2]
        later = torch.ones(t, t, dtype=torch.bool).triu(1)
        scores = q @ k.transpose(-2, -1)
        wrong = {
            "no mask": ((scores / math.sqrt(d)).softmax(-1) @ v,
                        "position i must not see positions after it: set the scores above the diagonal to -inf."),
            "no scale": (scores.masked_fill(later, float("-inf")).softmax(-1) @ v,
                         "divide the scores by sqrt(head_dim) before the softmax."),
            "scale 1/d": ((scores / d).masked_fill(later, float("-inf")).softmax(-1) @ v,
                          "the scale is 1/sqrt(head_dim), not 1/head_dim."),
            "softmax over queries": ((scores / math.sqrt(d)).masked_fill(later, float("-inf")).softmax(-2) @ v,
                                     "the softmax runs over the keys (the last dimension), so each query's "
                                     "weights sum to 1."),
        }
        for result, advice in wrong.values():
            if torch.allclose(got, torch.nan_to_num(result), atol=1e-5):
                return advice
        return None

    return check_function(fn, cases, rtol=1e-4, atol=1e-5, name="causal_attention", hint=hint)


class _Runner(nn.Module):
    """Blocks run by a function ``fn(blocks, x, segment)``: what a checker measures."""

    def __init__(self, blocks, fn, segment):
        super().__init__()
        self.blocks, self.fn, self.segment = blocks, fn, segment

    def forward(self, x):
        return self.fn(self.blocks, x, self.segment)


@graded(reference=("greenlab.techniques.lm.gpt:checkpoint_blocks",))
def checkpoint_blocks(fn: Any) -> Check:
    """Check ``fn(blocks, x, segment) -> output``: run ``blocks`` (an ``nn.ModuleList``) on ``x``,
    checkpointing runs of ``segment`` consecutive blocks with ``torch.utils.checkpoint``. Passes
    when output and gradients equal a plain forward pass and the bytes saved for the backward pass
    (``greenlab.training.memory.saved_for_backward``) equal the library's ``greenlab.techniques.lm.gpt.checkpoint_blocks``."""
    label = "checkpoint_blocks"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    torch.manual_seed(0)
    blocks = nn.ModuleList(Block(8, 2) for _ in range(4))
    x = torch.randn(2, 5, 8)  # like a batch: it needs no gradient itself

    def plain(bs, h, segment):
        for b in bs:
            h = b(h)
        return h

    def run(f, segment):
        blocks.zero_grad(set_to_none=True)
        out = f(blocks, x, segment)
        if is_placeholder(out) or not isinstance(out, torch.Tensor):
            return out, None
        if out.requires_grad:
            (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        grads = [None if p.grad is None else p.grad.clone() for p in blocks.parameters()]
        blocks.zero_grad(set_to_none=True)
        return out.detach(), grads

    failures = []
    want_out, want_grads = run(plain, 1)
    plain_bytes = saved_for_backward(_Runner(blocks, plain, 1), x).activation_bytes
    for segment in (1, 2, 4):
        call = f"{label}(4 blocks, x of shape (2, 5, 8), segment={segment})"
        try:
            out, grads = run(fn, segment)
        except Exception as exc:
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(out):
            return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
        if not isinstance(out, torch.Tensor) or out.shape != want_out.shape:
            failures.append(f"{call} returned {type(out).__name__}; expected a tensor of shape (2, 5, 8).")
            continue
        if not torch.allclose(out, want_out, atol=1e-5):
            failures.append(f"{call}: the output differs from running the blocks plainly. Hint: run every "
                            "block exactly once, in order, each segment on the previous segment's output.")
            continue
        if grads is None or any(g is None for g in grads):
            failures.append(f"{call}: some parameters got no gradient. Hint: use_reentrant=True with an input "
                            "that needs no gradient cuts the parameters off (pass use_reentrant=False), and "
                            "never run the blocks under torch.no_grad() or detach their output.")
            continue
        if not all(torch.allclose(g, w, atol=1e-5) for g, w in zip(grads, want_grads)):
            failures.append(f"{call}: gradients differ from a plain backward pass.")
            continue
        got_bytes = saved_for_backward(_Runner(blocks, fn, segment), x).activation_bytes
        ref_bytes = saved_for_backward(_Runner(blocks, reference_checkpoint_blocks, segment), x).activation_bytes
        if got_bytes >= plain_bytes:
            failures.append(f"{call}: {got_bytes:,} bytes saved for the backward pass, as many as without "
                            f"checkpointing ({plain_bytes:,}). Hint: pass each segment through "
                            "torch.utils.checkpoint.checkpoint so only its input is kept.")
        elif abs(got_bytes - ref_bytes) > 0.01 * ref_bytes:
            failures.append(f"{call}: {got_bytes:,} bytes saved, expected {ref_bytes:,}. Hint: a segment is "
                            f"{segment} consecutive block(s), so 4 blocks make {math.ceil(4 / segment)} "
                            "checkpointed segment(s), each keeping only its input.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of 3 segment lengths wrong.", failures)
    return Check(label, PASSED, "equal outputs and gradients, and only each segment's input kept "
                                "(the same saved bytes as the library's) for segments of 1, 2 and 4 blocks.")


@graded(reference=("greenlab.techniques.lm.sharding:zero1_step",))
def zero1_step(fn: Any) -> Check:
    """Check ``fn(flat_params, rank_grads, optimizers)``: one simulated ZeRO-1 step in place
    (``greenlab.techniques.lm.sharding.zero1_step``). Passes when three steps give the parameters of one plain
    ``torch.optim.AdamW`` over the whole vector stepped with the ranks' mean gradient."""
    label = "zero1_step"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    failures, placeholders, cases = [], 0, ((7, 2), (12, 3), (10, 2))
    for n, world in cases:
        g = torch.Generator().manual_seed(n)
        start = torch.randn(n, generator=g)
        steps = [[torch.randn(n, generator=g) for _ in range(world)] for _ in range(3)]
        ours = start.clone()
        optimizers = rank_optimizers(ours, world, lr=0.1)
        plain = start.clone().requires_grad_(True)
        plain_opt = torch.optim.AdamW([plain], lr=0.1)
        call = f"{label}({n} parameters over {world} ranks, 3 steps)"
        try:
            for grads in steps:
                returned = fn(ours, [t.clone() for t in grads], optimizers)
                if returned is NotImplemented:
                    placeholders += 1
                    break
                plain.grad = torch.stack(grads).mean(0)
                plain_opt.step()
        except Exception as exc:
            failures.append(f"{call} raised {type(exc).__name__}: {exc}" + (
                " Hint: the last rank's slice is zero-padded to equal size: pad the gradient too, and keep "
                "only the first n elements when you gather." if n % world else ""))
            continue
        if returned is NotImplemented:
            continue
        want = plain.detach()
        if torch.allclose(ours, want, atol=1e-6):
            continue
        failures.append(f"{call}: parameters differ from plain AdamW by up to "
                        f"{float((ours - want).abs().max()):.3g}. Hint: {_zero1_hint(start, ours, steps, world)}")
    if placeholders == len(cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns NotImplemented; fill it in.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(cases)} cases wrong.", failures)
    return Check(label, PASSED, "three steps give exactly plain AdamW's parameters, with 7, 10 and 12 "
                                "parameters over 2 and 3 ranks.")


def _zero1_hint(start, got, steps, world) -> str:
    """Which typical mistake reproduces ``got``: plain AdamW fed other gradients, or no update."""
    if torch.equal(got, start):
        return ("the full parameter vector did not change: copy the updated slices back into it "
                "(the all-gather), every rank holds all the parameters.")
    shard = math.ceil(start.numel() / world)

    def own_slices(gs):  # rank r's slice taken from rank r's own gradient
        return torch.cat([gs[r][r * shard:(r + 1) * shard] for r in range(world)])

    for grad_of, advice in (
            (lambda gs: gs[0], "average the gradients of all ranks (the all-reduce) before the update; "
                               "you used rank 0's alone."),
            (own_slices, "each rank updated its slice from its own gradient: average the gradients over "
                         "the ranks first (the all-reduce, or a reduce-scatter), so every slice sees "
                         "every rank's data.")):
        p = start.clone().requires_grad_(True)
        opt = torch.optim.AdamW([p], lr=0.1)
        for grads in steps:
            p.grad = grad_of(grads)
            opt.step()
        if torch.allclose(got, p.detach(), atol=1e-6):
            return advice
    return ("rank r updates elements r*shard to (r+1)*shard with its own optimizer and the same "
            "slice of the mean gradient; then all slices are gathered in rank order.")


@graded
def activation_bytes_per_layer(fn: Any, seed: int | None = None) -> Check:
    """Check ``fn(seq_len, batch_size, hidden, heads) -> bytes`` of activations one transformer
    layer stores for the backward pass, by Korthikanti et al. (2022, eq. 1): s b h (34 + 5 a s / h),
    16-bit activations with 1-byte dropout masks, no recomputation, no tensor parallelism."""
    inputs = [(64, 16, 64, 4), (2048, 1, 4096, 32), (128, 8, 256, 8), (1, 1, 8, 1)]
    inputs += drawn_inputs(seed, "activation_bytes_per_layer", _draw_layer)
    cases = [((s, b, h, a), s * b * h * (34 + 5 * a * s / h)) for s, b, h, a in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        s, b, h, a = args
        if math.isclose(value, 34 * s * b * h, rel_tol=1e-9):
            return "add the attention scores' part, 5 a s^2 b: it grows with the square of the sequence."
        if math.isclose(value, 2 * expected, rel_tol=1e-9):
            return "the formula counts 16-bit activations (2 bytes each, masks 1 byte): do not double it."
        if math.isclose(value, s * b * h * 34 + 5 * s * s * b, rel_tol=1e-9):
            return "the score matrices are per head: 5 a s^2 b, a the number of heads."
        if math.isclose(value, s * b * h * (34 + 5 * a * s / h) / b, rel_tol=1e-9):
            return "every sequence of the batch keeps its own activations: multiply by b."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=0.5, name="activation_bytes_per_layer", hint=hint)


def _draw_layer(rng) -> tuple:
    heads = rng.choice([1, 2, 4, 8, 16])
    return (rng.randint(1, 4096), rng.randint(1, 16), heads * rng.choice([8, 16, 32, 64]), heads)
