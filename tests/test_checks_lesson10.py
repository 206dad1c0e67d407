"""Lesson 10 and 11 checkers (attention, checkpointing; ZeRO-1, activation memory): a correct implementation that is not the library's passes, typical mistakes
fail each with its own hint, and a stub is "not attempted"."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from greenlab.course import checks


def _hints(result):
    assert result.status == checks.FAILED, result.text()
    return " ".join(result.details)


# --- causal attention ---------------------------------------------------------------------------


def own_attention(q, k, v):
    t = q.shape[-2]
    weights = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5
    weights = weights + torch.full((t, t), float("-inf")).triu(1)
    return torch.einsum("bhij,bhjd->bhid", weights.softmax(dim=-1), v)


def _attention(q, k, v, scale, mask=True, dim=-1, diagonal=1):
    s = (q @ k.transpose(-2, -1)) * scale(q.shape[-1])
    if mask:
        s = s.masked_fill(torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool).triu(diagonal), float("-inf"))
    return s.softmax(dim) @ v


def test_causal_attention_own_implementation_passes():
    assert checks.causal_attention(own_attention).passed


@pytest.mark.parametrize("wrong, words", [
    (lambda q, k, v: _attention(q, k, v, lambda d: d ** -0.5, mask=False), "above the diagonal to -inf"),
    (lambda q, k, v: _attention(q, k, v, lambda d: 1.0), "divide the scores by sqrt(head_dim)"),
    (lambda q, k, v: _attention(q, k, v, lambda d: 1 / d), "not 1/head_dim"),
    (lambda q, k, v: _attention(q, k, v, lambda d: d ** -0.5, dim=-2), "over the keys"),
    (lambda q, k, v: _attention(q, k, v, lambda d: d ** -0.5, diagonal=0), "attends to itself"),
])
def test_causal_attention_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.causal_attention(wrong))


def test_causal_attention_stub_not_attempted():
    assert checks.causal_attention(lambda q, k, v: None).status == checks.NOT_ATTEMPTED


# --- checkpointing ------------------------------------------------------------------------------


def own_checkpoint(blocks, x, segment):
    blocks = list(blocks)
    i = 0
    while i < len(blocks):
        part = torch.nn.Sequential(*blocks[i:i + segment])
        x = checkpoint(part, x, use_reentrant=False)
        i += segment
    return x


def no_checkpoint(blocks, x, segment):
    for b in blocks:
        x = b(x)
    return x


def reentrant(blocks, x, segment):
    blocks = list(blocks)
    for i in range(0, len(blocks), segment):
        x = checkpoint(torch.nn.Sequential(*blocks[i:i + segment]), x, use_reentrant=True)
    return x


def every_block_alone(blocks, x, segment):
    for b in blocks:
        x = checkpoint(b, x, use_reentrant=False)
    return x


def skips_last(blocks, x, segment):
    for b in list(blocks)[:-1]:
        x = checkpoint(b, x, use_reentrant=False)
    return x


def test_checkpoint_blocks_own_implementation_passes():
    result = checks.checkpoint_blocks(own_checkpoint)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, words", [
    (no_checkpoint, "as many as without checkpointing"),
    (reentrant, "use_reentrant=False"),
    (every_block_alone, "consecutive block(s)"),
    (skips_last, "every block exactly once"),
])
def test_checkpoint_blocks_mistakes_get_their_hint(wrong, words):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reentrant checkpointing warns that no input needs a gradient
        assert words in _hints(checks.checkpoint_blocks(wrong))


def test_checkpoint_blocks_stub_not_attempted():
    assert checks.checkpoint_blocks(lambda blocks, x, segment: None).status == checks.NOT_ATTEMPTED
    assert checks.checkpoint_blocks(None).status == checks.NOT_ATTEMPTED


# --- ZeRO-1 -------------------------------------------------------------------------------------


def own_zero1(flat, rank_grads, optimizers):
    n, world = flat.numel(), len(optimizers)
    mean = sum(rank_grads) / world
    shard = optimizers[0].param_groups[0]["params"][0].numel()
    for r, opt in enumerate(optimizers):
        piece = opt.param_groups[0]["params"][0]
        lo, hi = r * shard, min(n, (r + 1) * shard)
        piece.grad = torch.zeros_like(piece)
        piece.grad[:hi - lo] = mean[lo:hi]
        opt.step()
        flat.data[lo:hi] = piece.detach()[:hi - lo]


def _zero1(grad_of, gather=True):
    def step(flat, rank_grads, optimizers):
        world = len(optimizers)
        shard = optimizers[0].param_groups[0]["params"][0].numel()
        g = F.pad(grad_of(rank_grads), (0, shard * world - flat.numel()))
        for r, opt in enumerate(optimizers):
            p = opt.param_groups[0]["params"][0]
            p.grad = g[r * shard:(r + 1) * shard].clone()
            opt.step()
        if gather:
            flat.data.copy_(torch.cat([o.param_groups[0]["params"][0].detach() for o in optimizers])[:flat.numel()])
    return step


def own_slices_only(flat, rank_grads, optimizers):
    world = len(optimizers)
    shard = optimizers[0].param_groups[0]["params"][0].numel()
    for r, opt in enumerate(optimizers):  # no all-reduce: each rank's own gradient for its slice
        p = opt.param_groups[0]["params"][0]
        p.grad = F.pad(rank_grads[r], (0, shard * world - flat.numel()))[r * shard:(r + 1) * shard].clone()
        opt.step()
    flat.data.copy_(torch.cat([o.param_groups[0]["params"][0].detach() for o in optimizers])[:flat.numel()])


def test_zero1_step_summed_gradient_passes_because_adam_is_scale_invariant():
    # Adam divides by the root of the second moment: a gradient twice as large gives the same update
    # (up to eps), so summing instead of averaging is not a mistake the parameters show
    assert checks.zero1_step(_zero1(lambda gs: torch.stack(gs).sum(0))).passed


def wrong_slices(flat, rank_grads, optimizers):
    world = len(optimizers)
    shard = optimizers[0].param_groups[0]["params"][0].numel()
    g = F.pad(torch.stack(rank_grads).mean(0), (0, shard * world - flat.numel()))
    for opt in optimizers:  # every rank takes the first slice of the gradient
        p = opt.param_groups[0]["params"][0]
        p.grad = g[:shard].clone()
        opt.step()
    flat.data.copy_(torch.cat([o.param_groups[0]["params"][0].detach() for o in optimizers])[:flat.numel()])


def test_zero1_step_own_implementation_passes():
    result = checks.zero1_step(own_zero1)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, words", [
    (_zero1(lambda gs: gs[0]), "you used rank 0's alone"),
    (own_slices_only, "from its own gradient"),
    (_zero1(lambda gs: torch.stack(gs).mean(0), gather=False), "the all-gather"),
    (wrong_slices, "rank r updates elements r*shard"),
])
def test_zero1_step_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.zero1_step(wrong))


def test_zero1_step_unpadded_gradient_gets_padding_hint():
    def unpadded(flat, rank_grads, optimizers):
        g = torch.stack(rank_grads).mean(0)
        shard = optimizers[0].param_groups[0]["params"][0].numel()
        for r, opt in enumerate(optimizers):
            opt.param_groups[0]["params"][0].grad = g[r * shard:(r + 1) * shard].clone()
            opt.step()
    assert "zero-padded" in _hints(checks.zero1_step(unpadded))


def test_zero1_step_stub_not_attempted():
    assert checks.zero1_step(lambda *a: NotImplemented).status == checks.NOT_ATTEMPTED


def test_library_zero1_trains_the_lesson_model_like_plain_adamw():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import sharding as zero1

    torch.manual_seed(0)
    a = lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=8)
    b = lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=8)
    b.load_state_dict(a.state_dict())
    data = torch.randint(0, 256, (500,), dtype=torch.uint8)
    g = torch.Generator().manual_seed(0)
    batches = [[lm.batch(data, 8, 2, g) for _ in range(2)] for _ in range(3)]
    out = zero1.train_zero1(a, batches, lm.lm_loss, lr=1e-2)
    zero1.train_plain(b, batches, lm.lm_loss, lr=1e-2)
    n = sum(p.numel() for p in a.parameters())
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)
    assert out["state_bytes_per_rank"] == [8 * math.ceil(n / 2) + 4] * 2


# --- activation memory --------------------------------------------------------------------------


def own_activations(s, b, h, a):
    attention = 11 * s * b * h + 5 * a * s * s * b
    return attention + 19 * s * b * h + 4 * s * b * h


@pytest.mark.parametrize("wrong, words", [
    (lambda s, b, h, a: 34 * s * b * h, "5 a s^2 b"),
    (lambda s, b, h, a: 2 * own_activations(s, b, h, a), "do not double it"),
    (lambda s, b, h, a: 34 * s * b * h + 5 * s * s * b, "per head"),
    (lambda s, b, h, a: own_activations(s, 1, h, a), "multiply by b"),
])
def test_activation_bytes_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.activation_bytes_per_layer(wrong))


def test_activation_bytes_own_implementation_passes():
    assert checks.activation_bytes_per_layer(own_activations).passed
    assert checks.activation_bytes_per_layer(lambda *a: None).status == checks.NOT_ATTEMPTED
