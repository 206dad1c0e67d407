"""What a language-model step costs, counted and by arithmetic (lesson 10 (10_language_model)): the FLOPs of a
training step (``torch.utils.flop_counter``), the attention matmuls' FLOPs by formula, and the steps after which
compiling pays for itself.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from greenlab.base import validation
from greenlab.techniques.lm.corpus import MAX_COUNT
from greenlab.techniques.lm.gpt import _check_language_model, lm_loss
from greenlab.training.flop_counting import flop_counter


def train_step_flops(model: nn.Module, seq_len: int, batch_size: int = 1) -> dict:
    """FLOPs of one training step (forward + backward) counted by ``torch.utils.flop_counter``
    on ``batch_size`` windows of ``seq_len`` bytes: {"total", "attention", "other"}, where
    attention is the scaled-dot-product attention (the L-squared part)."""
    _check_language_model(model)
    seq_len = validation.integer("seq_len", seq_len, low=1, high=getattr(model, "max_seq_len", MAX_COUNT))
    batch_size = validation.integer("batch_size", batch_size, low=1, high=MAX_COUNT)
    dev = next(model.parameters()).device
    x = torch.zeros(batch_size, seq_len, dtype=torch.long, device=dev)
    counter = flop_counter()
    with counter:
        lm_loss(model, x, x).backward()
    model.zero_grad(set_to_none=True)
    by_op = counter.get_flop_counts()["Global"]
    attention = sum(n for op, n in by_op.items() if "scaled_dot_product" in str(op))
    total = int(sum(by_op.values()))
    return {"total": total, "attention": int(attention), "other": total - int(attention)}


def attention_flops(seq_len: int, d_model: int, n_layers: int, batch_size: int = 1, backward: bool = True) -> int:
    """FLOPs of the attention matmuls by arithmetic, for ``batch_size`` sequences of ``seq_len``:
    forward, Q K^T and weights x V, 2 matmuls of 2 x L x L x d FLOPs per layer; the backward pass
    of a fused (flash-style) kernel recomputes Q K^T and does 4 more (gradients of the weights, V,
    Q and K): 5 matmuls, so forward + backward = 3.5 x forward. Causal masking is not subtracted
    (the counted kernels are charged the whole square)."""
    for name, value in (("seq_len", seq_len), ("d_model", d_model), ("n_layers", n_layers),
                        ("batch_size", batch_size)):
        validation.integer(name, value, low=1, high=MAX_COUNT)
    validation.flag("backward", backward)
    matmul = 2 * seq_len * seq_len * d_model * n_layers * batch_size
    return matmul * (7 if backward else 2)


def compile_break_even_steps(compile_seconds: float, eager_step_seconds: float,
                             compiled_step_seconds: float) -> float:
    """Steps after which compiling has paid for itself: compile time / time saved per step
    (``inf`` when the compiled step is not faster)."""
    compile_seconds = validation.number("compile_seconds", compile_seconds, low=0)
    eager = validation.number("eager_step_seconds", eager_step_seconds, low=0, low_open=True)
    compiled = validation.number("compiled_step_seconds", compiled_step_seconds, low=0, low_open=True)
    saved = eager - compiled
    if saved > 0 and not math.isfinite(compile_seconds / saved):
        raise ValueError(f"compile_seconds {compile_seconds:g} over a step_seconds saving of {saved:g} s "
                         "overflows: the figures are not on one scale")
    return compile_seconds / saved if saved > 0 else math.inf
