"""Lesson 12 checkers: a correct implementation that is not the library's passes, typical mistakes
fail each with its own hint, and a stub is "not attempted"."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.course import checks


def _hints(result):
    assert result.status == checks.FAILED, result.text()
    return " ".join([result.message] + result.details)


# --- LoRA ---------------------------------------------------------------------------------------


def make_lora(b_init="zeros", freeze=True, scale=lambda alpha, rank: alpha / rank, a_shape=None):
    class OwnLoRA(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()
            self.base = base
            if freeze:
                base.requires_grad_(False)
            self.a = nn.Parameter(torch.randn(*(a_shape or (rank, base.in_features))) * 0.1)
            self.b = nn.Parameter(torch.zeros(base.out_features, rank) if b_init == "zeros"
                                  else torch.randn(base.out_features, rank))
            self.s = scale(alpha, rank)

        def forward(self, x):
            down = x @ self.a if a_shape else x @ self.a.T  # a_shape: A stored as (in, rank)
            return self.base(x) + self.s * down @ self.b.T
    return OwnLoRA


def test_lora_linear_own_implementation_passes():
    result = checks.lora_linear(make_lora())
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, words", [
    (make_lora(b_init="random"), "B starts at zero"),
    (make_lora(freeze=False), "freeze its weight and bias"),
    (make_lora(scale=lambda alpha, rank: 1.0), "multiply B A x by alpha / rank"),
    (make_lora(scale=lambda alpha, rank: alpha), "not alpha"),
    (make_lora(a_shape=(6, 2)), "A is (rank, in_features)"),
])
def test_lora_linear_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.lora_linear(wrong))


def test_lora_linear_stub_not_attempted():
    class Stub(nn.Module):
        def __init__(self, base, rank, alpha):
            super().__init__()

        def forward(self, x):
            return None
    assert checks.lora_linear(Stub).status == checks.NOT_ATTEMPTED
    assert checks.lora_linear(None).status == checks.NOT_ATTEMPTED


def test_add_lora_uses_the_given_layer_class():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import lora

    model = lora.add_lora(lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=8), rank=2, layer=make_lora())
    assert sum(type(m).__name__ == "OwnLoRA" for m in model.modules()) == 4


# --- KV-cache decoding --------------------------------------------------------------------------


def make_decode(offset=True, use_cache=True, causal=False, append=True):
    def step(model, token, cache):
        start = cache[0][0].shape[2] if offset else 0
        x = model.tok(token) + model.pos.weight[start:start + 1]
        new = []
        for (k_old, v_old), block in zip(cache, model.blocks):
            b, t, d = x.shape
            h = block.n_heads
            q, k, v = block.qkv(block.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            if use_cache:
                k, v = torch.cat([k_old, k], 2), torch.cat([v_old, v], 2)
            new.append((k, v) if append else (k_old, v_old))
            att = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            x = x + block.proj(att.transpose(1, 2).reshape(b, t, d))
            x = x + block.mlp(block.ln2(x))
        return model.head(model.ln(x)), new
    return step


def test_kv_decode_step_own_implementation_passes():
    result = checks.kv_decode_step(make_decode())
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, words", [
    (make_decode(offset=False), "position embedding is at the cache's length"),
    (make_decode(use_cache=False), "attend to the cached keys and values too"),
    (make_decode(causal=True), "without is_causal"),
    (make_decode(append=False), "append this position's keys and values"),
])
def test_kv_decode_step_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.kv_decode_step(wrong))


def test_kv_decode_step_stub_not_attempted():
    assert checks.kv_decode_step(lambda model, token, cache: None).status == checks.NOT_ATTEMPTED


def test_generate_with_a_learner_step_gives_the_same_tokens():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import serving as lm_serve

    torch.manual_seed(0)
    model = lm.TinyGPT(d_model=16, n_layers=2, n_heads=2, max_seq_len=32)
    prompts = torch.randint(0, 256, (2, 4))
    ours = lm_serve.generate(model, prompts, 8, kv_cache=True, step=make_decode())
    assert torch.equal(ours, lm_serve.generate(model, prompts, 8, kv_cache=False))


# --- int8 per output channel --------------------------------------------------------------------


def own_int8(w):
    scale = torch.clamp(w.abs().max(dim=1).values / 127, min=1e-8)
    return torch.clamp(torch.round(w / scale.unsqueeze(1)), -128, 127).to(torch.int8), scale


def _int8(scale_of, rounding=torch.round, clamp=True):
    def quantize(w):
        scale = torch.clamp(scale_of(w), min=torch.finfo(torch.float32).eps)
        values = rounding(w / (scale[:, None] if scale.dim() == 1 and scale.numel() == w.shape[0] else scale))
        return (values.clamp(-128, 127) if clamp else values).to(torch.int8), scale
    return quantize


def test_int8_per_channel_own_implementation_passes():
    result = checks.int8_per_channel(own_int8)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, words", [
    (_int8(lambda w: w.abs().max() / 127.5), "one scale for the whole tensor"),
    (_int8(lambda w: w.abs().amax(dim=0) / 127.5), "output channels are the rows"),
    (_int8(lambda w: w.abs().amax(dim=1) / 127.5, rounding=torch.trunc), "round to the nearest"),
    (_int8(lambda w: w.abs().amax(dim=1) / 127.5, clamp=False), "clamp to [-128, 127]"),
    (_int8(lambda w: w.abs().amax(dim=1) / 255), "max |w| / 127.5"),
    (lambda w: (torch.zeros_like(w, dtype=torch.int8), w.abs().amax(dim=1) / 127.5), "above zero"),
])
def test_int8_per_channel_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.int8_per_channel(wrong))


def test_int8_per_channel_stub_not_attempted():
    assert checks.int8_per_channel(lambda w: None).status == checks.NOT_ATTEMPTED


def test_int8_linear_matches_the_dequantized_weight_and_bytes():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import serving as lm_serve

    torch.manual_seed(0)
    model = lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=8)
    x = torch.randint(0, 256, (2, 8))
    before = lm_serve.weight_bytes(model)
    with torch.no_grad():
        full = model(x)
    lm_serve.quantize_linears_int8(model, quantize=own_int8)
    linears = [m for m in model.blocks.modules() if isinstance(m, lm_serve.Int8Linear)]
    assert len(linears) == 4
    weights = sum(m.q.numel() for m in linears)
    rows = sum(m.q.shape[0] for m in linears)
    assert before - lm_serve.weight_bytes(model) == 3 * weights - 4 * rows
    with torch.no_grad():
        assert (model(x) - full).abs().max() < 0.05


# --- KV-cache bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("wrong, words", [
    (lambda L, kv, hd, b, ctx, by: L * kv * hd * b * ctx * by, "a factor 2"),
    (lambda L, kv, hd, b, ctx, by: 2 * kv * hd * b * ctx * by, "multiply by n_layers"),
    (lambda L, kv, hd, b, ctx, by: 16 * L * kv * hd * b * ctx * by, "bytes, not bits"),
    (lambda L, kv, hd, b, ctx, by: 2 * L * kv * hd * ctx * by, "multiply by batch_size"),
])
def test_kv_cache_bytes_mistakes_get_their_hint(wrong, words):
    assert words in _hints(checks.kv_cache_bytes(wrong))


def test_kv_cache_bytes_right_and_stub():
    def own(n_layers, n_kv_heads, head_dim, batch_size, context, bytes_per_value):
        per_position = n_kv_heads * head_dim * bytes_per_value * 2
        return n_layers * batch_size * context * per_position
    assert checks.kv_cache_bytes(own).passed
    assert checks.kv_cache_bytes(lambda *a: None).status == checks.NOT_ATTEMPTED


def test_kv_cache_bytes_formula_matches_a_real_cache():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import serving as lm_serve

    model = lm.TinyGPT(d_model=16, n_layers=2, n_heads=2, max_seq_len=32)
    _, cache = lm_serve.prefill(model, torch.randint(0, 256, (3, 10)))
    assert lm_serve.cache_bytes(cache) == 2 * 2 * 2 * 8 * 3 * 10 * 4 == lm_serve.kv_cache_bytes(model, 3, 10)
