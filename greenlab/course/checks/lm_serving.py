"""Lesson 12 (adapting and serving a small language model): checkers of the techniques the learner
writes, run on tiny tensors against the library's (or PyTorch's own) implementation.

    gl.check.lora_linear(MyLoRALinear)     # a class (base, rank, alpha) -> module, against greenlab.techniques.lm.lora
    gl.check.kv_decode_step(fn)            # fn(model, token, cache) -> (logits, cache), against recomputing
    gl.check.int8_per_channel(fn)          # fn(weight) -> (int8 values, scales), against torch.fake_quantize_per_channel_affine
    gl.check.kv_cache_bytes(fn)            # fn(n_layers, n_kv_heads, head_dim, batch, context, bytes) -> bytes
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
from greenlab.techniques.lm.gpt import TinyGPT
from greenlab.techniques.lm.lora import LoRALinear
from greenlab.techniques.lm.serving import prefill


@graded(reference=("greenlab.techniques.lm.lora:LoRALinear",))
def lora_linear(cls: Any) -> Check:
    """Check a learner's LoRA layer class, called as ``cls(base, rank, alpha)`` on a frozen
    ``nn.Linear`` ``base``: parameters ``A`` (rank x in) and ``B`` (out x rank) with B zero at the
    start, ``forward(x) = base(x) + (alpha / rank) * x A^T B^T``, gradients only for A and B
    (the same as ``greenlab.techniques.lm.lora.LoRALinear``)."""
    label = "lora_linear"
    verdict = _not_a_function(cls, label)
    if verdict is not None:
        return verdict
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    rank, alpha = 2, 4.0
    x = torch.randn(3, 6)
    try:
        layer = cls(base, rank, alpha)
        out = layer(x)
    except Exception as exc:
        return Check(label, FAILED, f"building or calling the layer raised {type(exc).__name__}: {exc}")
    if is_placeholder(out):
        return Check(label, NOT_ATTEMPTED, "forward still returns a placeholder (None); fill it in.")
    if not isinstance(out, torch.Tensor) or out.shape != (3, 5):
        return Check(label, FAILED, f"forward returned {type(out).__name__}; expected a (3, 5) tensor.")
    problems = []
    trainable = [p for p in layer.parameters() if p.requires_grad]
    if base.weight.requires_grad or (base.bias is not None and base.bias.requires_grad):
        problems.append("the base layer still trains. Hint: freeze its weight and bias "
                        "(requires_grad_(False)); LoRA trains only A and B.")
    shapes = {tuple(p.shape): p for p in trainable}
    a, b = shapes.get((rank, 6)), shapes.get((5, rank))
    if a is None or b is None:
        problems.append(f"trainable shapes {sorted(shapes)}. Hint: A is (rank, in_features) = ({rank}, 6) and "
                        f"B is (out_features, rank) = (5, {rank}): rank x (in + out) = "
                        f"{rank * 11} trainable values.")
        return Check(label, FAILED, "the layer's parameters are not LoRA's A and B.", problems)
    if not torch.allclose(out, base(x), atol=1e-6):
        problems.append("at the start the output differs from the frozen layer's. Hint: B starts at zero "
                        "(A random), so the adapted model starts exactly where the pretrained one was.")
    with torch.no_grad():
        a.copy_(torch.randn(rank, 6))
        b.copy_(torch.randn(5, rank))
    reference = LoRALinear(base, rank, alpha)
    with torch.no_grad():
        reference.lora_a.copy_(a)
        reference.lora_b.copy_(b)
    want = reference(x)
    got = layer(x)
    if not torch.allclose(got, want, atol=1e-5):
        low_rank = F.linear(F.linear(x, a), b)
        if torch.allclose(got, base(x) + low_rank, atol=1e-5):
            problems.append("with A and B set, the low-rank path is not scaled. Hint: multiply B A x by "
                            "alpha / rank.")
        elif torch.allclose(got, base(x) + alpha * low_rank, atol=1e-5):
            problems.append("the scale is alpha / rank, not alpha.")
        else:
            problems.append("with A and B set, the output differs from base(x) + (alpha / rank) x A^T B^T.")
    else:
        weights = torch.linspace(-1, 1, 15).view(3, 5)
        (got * weights).sum().backward()
        (want * weights).sum().backward()
        if a.grad is None or b.grad is None or not (torch.allclose(a.grad, reference.lora_a.grad, atol=1e-5)
                                                    and torch.allclose(b.grad, reference.lora_b.grad, atol=1e-5)):
            problems.append("A's and B's gradients differ from LoRA's: keep A and B in the graph "
                            "(no detach, no torch.no_grad in forward).")
    if problems:
        return Check(label, FAILED, f"{len(problems)} problem(s).", problems)
    return Check(label, PASSED, f"starts as the frozen layer, trains only A and B ({rank * 11} values), "
                                "and matches LoRA's output and gradients with A and B set.")


def _decode(model, token, cache, offset=True, use_cache=True, causal=False):
    """A decoding step with one of three typical mistakes switched on (for the hints)."""
    start = cache[0][0].shape[2] if offset else 0
    x = model.tok(token) + model.pos(torch.arange(start, start + 1))
    for i, block in enumerate(model.blocks):
        b, t, d = x.shape
        h = block.n_heads
        q, k, v = block.qkv(block.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        if use_cache:
            k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + block.proj(att.transpose(1, 2).reshape(b, t, d))
        x = x + block.mlp(block.ln2(x))
    return model.head(model.ln(x))


@graded(reference=("greenlab.techniques.lm.serving:decode_step",))
def kv_decode_step(fn: Any) -> Check:
    """Check ``fn(model, token, cache) -> (logits, cache)``: one KV-cache decoding step of a
    ``greenlab.techniques.lm.gpt.TinyGPT`` (``greenlab.techniques.lm.serving.decode_step``). On a 2-layer model over 8
    positions, each step's logits must equal running the whole sequence again."""
    label = "kv_decode_step"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    torch.manual_seed(0)
    model = TinyGPT(d_model=16, n_layers=2, n_heads=2, max_seq_len=16).eval()
    seq = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, cache = prefill(model, seq[:, :1])
        for i in range(1, 8):
            call = f"{label}(model, token at position {i}, cache of {i} position(s))"
            good_cache = [(k.clone(), v.clone()) for k, v in cache]
            try:
                result = fn(model, seq[:, i:i + 1], cache)
            except Exception as exc:
                return Check(label, FAILED, f"{call} raised {type(exc).__name__}: {exc}")
            if is_placeholder(result):
                return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
            try:
                logits, cache = result
                got = logits[:, -1]
            except Exception:
                return Check(label, FAILED, f"{call} returned {type(result).__name__}; expected (logits, cache).")
            want = model(seq[:, :i + 1])[:, -1]
            if got.shape != want.shape:
                return Check(label, FAILED, f"{call}: logits of shape {tuple(logits.shape)}; expected (2, 1, 256).")
            if not torch.allclose(got, want, atol=1e-4):
                hint = "the logits differ from recomputing the whole sequence."
                for kwargs, advice in (
                        (dict(offset=False), "the new token's position embedding is at the cache's length "
                                             "(here {i}), not 0."),
                        (dict(use_cache=False), "attend to the cached keys and values too: concatenate them "
                                                "with the new position's along the sequence dimension."),
                        (dict(causal=True), "one new query attends to every earlier position: call "
                                            "scaled_dot_product_attention without is_causal (with one query "
                                            "and many keys it would mask all but the first).")):
                    if torch.allclose(got, _decode(model, seq[:, i:i + 1], good_cache, **kwargs)[:, -1], atol=1e-4):
                        hint = advice.format(i=i)
                        break
                else:
                    if i > 1:
                        hint = ("the first step was right, a later one not: return the cache with this "
                                "position's keys and values appended, for every layer.")
                return Check(label, FAILED, f"{call}: logits differ from full recomputation.", [f"Hint: {hint}"])
            try:
                lengths = {int(k.shape[2]) for k, v in cache} | {int(v.shape[2]) for k, v in cache}
            except Exception:
                lengths = set()
            if lengths != {i + 1} or len(cache) != 2:
                return Check(label, FAILED, f"{call}: the returned cache does not hold {i + 1} positions "
                                            "in each of the 2 layers.",
                             ["Hint: append this position's keys and values to each layer's cache and return it."])
    return Check(label, PASSED, "7 steps after a 1-token prompt give the logits of recomputing all 8 "
                                "positions, with a cache that grows by one position per step.")


@graded(reference=("greenlab.techniques.lm.serving:quantize_int8_per_channel",))
def int8_per_channel(fn: Any) -> Check:
    """Check ``fn(weight) -> (q, scale)``: symmetric int8 with one scale per output channel (row)
    of a (out, in) weight, scale = max |w| / 127.5 (PyTorch's per-channel symmetric observer and
    torchao; max |w| / 127 accepted), q = round(w / scale) clamped to [-128, 127], as
    ``torch.quantize_per_channel`` computes with that scale."""
    label = "int8_per_channel"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(4, 6, generator=g) * torch.tensor([[0.1], [1.0], [3.0], [0.02]])
    hand = torch.tensor([[1.0, -0.5, 0.25, 0.0], [-2.0, 1.0, 0.3, 0.9], [0.0, 0.0, 0.0, 0.0]])
    failures, attempted = [], False
    for w in (rows, hand, rows.T.contiguous()):
        call = f"{label}(weight of shape {tuple(w.shape)})"
        try:
            result = fn(w.clone())
        except Exception as exc:
            attempted = True
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(result):
            continue
        attempted = True
        problem = _int8_problem(w, result)
        if problem:
            failures.append(f"{call}: {problem}")
    if not attempted:
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of 3 weights wrong.", failures)
    return Check(label, PASSED, "int8 values equal torch.fake_quantize_per_channel_affine's "
                                "(a tie may round either way) with one scale per row, "
                                "each within scale / 2 of the weight.")


def _int8_problem(w: torch.Tensor, result) -> str | None:
    try:
        q, scale = result
    except Exception:
        return "expected a pair (int8 values, scales)."
    if not isinstance(q, torch.Tensor) or q.dtype != torch.int8 or q.shape != w.shape:
        return (f"the values must be a torch.int8 tensor of the weight's shape {tuple(w.shape)}. Hint: "
                "store them with .to(torch.int8) after rounding and clamping.")
    scale = torch.as_tensor(scale, dtype=torch.float32).reshape(-1) if isinstance(scale, (int, float, torch.Tensor)) \
        else None
    if scale is None or scale.numel() != w.shape[0]:
        if scale is not None and scale.numel() == 1:
            return "one scale for the whole tensor. Hint: one scale per output channel, a row of the weight."
        if scale is not None and scale.numel() == w.shape[1]:
            return "one scale per column. Hint: a Linear's output channels are the rows (dim 0) of its weight."
        return f"expected {w.shape[0]} scales, one per row."
    if not torch.isfinite(scale).all() or (scale <= 0).any():
        return ("a scale is zero or not finite (an all-zero row?). Hint: keep every scale above zero, "
                "e.g. at least torch.finfo(torch.float32).eps, as PyTorch's observers do.")
    amax = w.abs().amax(dim=1)
    nonzero = amax > 0
    low, high = amax / 127.5, amax / 127
    if not ((scale[nonzero] >= low[nonzero] * (1 - 1e-5)) & (scale[nonzero] <= high[nonzero] * (1 + 1e-5))).all():
        return "a scale is not the row's max |w| / 127.5 (PyTorch's symmetric int8; max |w| / 127 also accepted)."
    fake = torch.fake_quantize_per_channel_affine(w, scale, torch.zeros(w.shape[0], dtype=torch.int32), 0,
                                                  -128, 127)
    want = (fake / scale[:, None]).round().to(torch.int8)
    error = (q.float() * scale[:, None] - w).abs()
    # torch multiplies by 1 / scale where a learner divides: the two may round a tie differently
    if (q.int() - want.int()).abs().max() <= 1 and (error <= scale[:, None] / 2 * (1 + 1e-4) + 1e-12).all():
        return None
    ratio = w / scale[:, None]
    if torch.equal(q, ratio.trunc().to(torch.int8)):
        return "values truncated toward zero. Hint: round to the nearest integer (torch.round) before casting."
    if torch.equal(q, ratio.round().to(torch.int16).to(torch.int8)) or (q.to(torch.int32) * w.sign() < 0).any():
        return "a value wrapped around. Hint: clamp to [-128, 127] before casting to torch.int8."
    return "the values differ from round(w / scale), clamped to [-128, 127]."


@graded(reference=("greenlab.techniques.lm.serving:kv_cache_bytes",))
def kv_cache_bytes(fn: Any, seed: int | None = None) -> Check:
    """Check ``fn(n_layers, n_kv_heads, head_dim, batch_size, context, bytes_per_value) -> bytes``
    of a full KV cache: keys and values (2) for every layer, key/value head, position and sequence."""
    inputs = [(2, 4, 16, 1, 96, 4), (2, 4, 16, 8, 96, 4), (32, 8, 128, 4, 8192, 2), (80, 8, 128, 1, 4096, 1)]
    inputs += drawn_inputs(seed, "kv_cache_bytes", lambda rng: (
        rng.randint(1, 48), rng.choice([1, 2, 4, 8]), rng.choice([32, 64, 128]), rng.randint(1, 16),
        rng.randint(16, 8192), rng.choice([1, 2, 4])))
    cases = [(args, 2 * math.prod(args)) for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        layers = args[0]
        if math.isclose(value, expected / 2, rel_tol=1e-9):
            return "the cache keeps keys and values: two tensors per layer, so a factor 2."
        if math.isclose(value, expected / layers, rel_tol=1e-9) and layers > 1:
            return "every layer keeps its own keys and values: multiply by n_layers."
        if math.isclose(value, expected * 8, rel_tol=1e-9):
            return "bytes, not bits: bytes_per_value is already in bytes."
        if math.isclose(value, expected / args[3], rel_tol=1e-9) and args[3] > 1:
            return "every sequence of the batch has its own cache: multiply by batch_size."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=0.5, name="kv_cache_bytes", hint=hint)
