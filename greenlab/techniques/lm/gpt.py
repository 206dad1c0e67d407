"""TinyGPT, a decoder-only byte-level transformer (lessons 10 (10_language_model), 12 (12_adapting_and_serving)
and 11 (11_fitting_in_memory)): its blocks, its causal attention (``torch.nn.functional.scaled_dot_product_attention``),
optional activation checkpointing per block or per segment (``torch.utils.checkpoint``), and its loss in nats
per byte (cross-entropy with the natural log).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import validation
from greenlab.base.units import plain_number
from greenlab.techniques.lm.corpus import MAX_COUNT, VOCAB

MAX_PARAMS = 2**31  # parameters of a TinyGPT: 8 GiB in fp32


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled-dot-product attention of (batch, heads, seq, head_dim) tensors: PyTorch's
    ``scaled_dot_product_attention`` with ``is_causal=True`` (a fused kernel where one exists)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def checkpoint_blocks(blocks, x: torch.Tensor, segment: int = 1) -> torch.Tensor:
    """Run ``blocks`` in order on ``x``, keeping for the backward pass only the input of each run of
    ``segment`` consecutive blocks (``torch.utils.checkpoint``, non-reentrant) and recomputing the
    rest. ``segment=1``: every block's input (the per-block variant); ``segment`` near the square
    root of the depth: Chen et al. (2016)'s sqrt(n) segments."""
    blocks = list(blocks)
    segment = validation.integer("segment", segment, low=1, high=max(1, len(blocks)))
    for start in range(0, len(blocks), segment):
        group = blocks[start:start + segment]

        def run(h, group=group):
            for block in group:
                h = block(h)
            return h

        x = torch.utils.checkpoint.checkpoint(run, x, use_reentrant=False) if torch.is_grad_enabled() else run(x)
    return x


def use_attention(model: nn.Module, attention=None) -> nn.Module:
    """Make every block of ``model`` compute its attention with ``attention(q, k, v)`` (None: the
    library's :func:`causal_attention`), e.g. a learner's own implementation. Returns ``model``."""
    if attention is not None and not callable(attention):
        raise ValueError(f"attention must be a function (q, k, v) -> output or None, got {type(attention).__name__}")
    for block in getattr(model, "blocks", ()):
        block.attention = attention or causal_attention
    return model


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (``self.attention``, by default
    :func:`causal_attention`) and a 4x-wide GELU MLP."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.attention = causal_attention
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        """``x`` (batch, seq, d_model) through attention then the MLP, each pre-normed and added back."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        att = self.attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A decoder-only byte-level transformer: token and learned position embeddings, ``n_layers``
    blocks, a final LayerNorm and an output layer tied to the token embedding.

    ``checkpoint=True`` recomputes each block's activations in the backward pass instead of
    keeping them (``torch.utils.checkpoint``, non-reentrant): less memory, one more forward pass.
    ``run_blocks``: when set to a function ``(blocks, x) -> x`` (e.g. :func:`checkpoint_blocks`
    with another segment length, or a learner's own), the forward pass runs the blocks through it."""

    def __init__(self, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, max_seq_len: int = 256,
                 checkpoint: bool = False, vocab: int = VOCAB):
        super().__init__()
        vocab = validation.integer("vocab", vocab, low=1, high=2**20)
        d_model = validation.integer("d_model", d_model, low=1, high=65536)
        n_heads = validation.integer("n_heads", n_heads, low=1, high=d_model)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        validation.integer("n_layers", n_layers, low=1, high=1024)
        validation.integer("max_seq_len", max_seq_len, low=1, high=MAX_COUNT)
        params = 12 * n_layers * d_model**2 + (vocab + max_seq_len) * d_model
        if params > MAX_PARAMS:
            raise ValueError(f"d_model {d_model}, n_layers {n_layers}, max_seq_len {max_seq_len} and vocab "
                             f"{vocab} make about {plain_number(params)} parameters, more than {MAX_PARAMS:.3g} "
                             "(8 GiB in fp32): choose smaller sizes")
        self.checkpoint = validation.flag("checkpoint", checkpoint)
        self.max_seq_len = max_seq_len
        self.d_model, self.n_layers, self.n_heads = d_model, n_layers, n_heads
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.run_blocks = None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (batch, seq, vocab) for int64 byte ids (batch, seq)."""
        if idx.shape[-1] > self.max_seq_len:
            raise ValueError(f"sequence length {idx.shape[-1]} exceeds max_seq_len {self.max_seq_len}")
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[-1], device=idx.device))
        if self.run_blocks is not None:
            return self.head(self.ln(self.run_blocks(self.blocks, x)))
        for block in self.blocks:
            if self.checkpoint and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln(x))


def lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy, nats per byte."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


def _check_language_model(model) -> None:
    """TypeError naming ``model`` unless it is a module that reads byte ids (it has ``max_seq_len``)."""
    validation.module("model", model)
    if not isinstance(getattr(model, "max_seq_len", None), int):
        raise validation.ArgumentTypeError(
            f"model must be a greenlab.techniques.lm.gpt.TinyGPT or a language model like it "
            f"(byte ids in, logits out, with max_seq_len), got {type(model).__name__}")
