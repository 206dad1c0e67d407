"""greenlab.optimizers: AdamW with fp32 or 8-bit (bitsandbytes) states, and state bytes counted
from the optimizer's own tensors. Tiny models: seconds."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from greenlab.techniques import lm
from greenlab.training import optimizers
from greenlab.base import optional


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))


def _steps(model, opt, n=3):
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    for _ in range(n):
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_fp32_adamw_state_is_two_fp32_moments_and_a_step_counter_per_tensor():
    model = _model()
    opt = optimizers.adamw(model.parameters(), 1e-3)
    assert isinstance(opt, torch.optim.AdamW) and optimizers.state_bytes(opt) == 0  # made lazily
    _steps(model, opt)
    params = list(model.parameters())
    assert optimizers.state_bytes(opt) == 8 * sum(p.numel() for p in params) + 4 * len(params)


def test_frozen_parameters_get_no_state():
    model = _model()
    model[0].requires_grad_(False)
    opt = optimizers.adamw(model.parameters(), 1e-3)
    _steps(model, opt)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert optimizers.state_bytes(opt) == 8 * sum(p.numel() for p in trainable) + 4 * len(trainable)


def test_8bit_states_are_one_byte_per_value_in_blocks_of_256_and_small_tensors_stay_32bit():
    pytest.importorskip("bitsandbytes")  # a dependency: installed wherever the course is
    model = _model()  # weights of 8,192 and 1,024 values; biases of 128 and 8
    opt = optimizers.adamw(model.parameters(), 1e-3, states="8bit")
    _steps(model, opt)
    big = [p.numel() for p in model.parameters() if p.numel() >= optimizers.MIN_8BIT_SIZE]
    small = [p.numel() for p in model.parameters() if p.numel() < optimizers.MIN_8BIT_SIZE]
    assert big == [8192] and sorted(small) == [8, 128, 1024]
    shared_maps = 2 * 256 * 4  # the two 8-bit codes, fp32, shared by every tensor: counted once
    expected = sum(2 * n + 2 * 4 * math.ceil(n / 256) for n in big) + 8 * sum(small) + shared_maps
    assert optimizers.state_bytes(opt) == expected
    state = opt.state[model[0].weight]
    assert state["state1"].dtype == torch.uint8 and state["state2"].dtype == torch.uint8


def test_8bit_adamw_follows_fp32_adamw_closely():
    pytest.importorskip("bitsandbytes")
    a, b = _model(), _model()
    _steps(a, optimizers.adamw(a.parameters(), 1e-2), n=5)
    _steps(b, optimizers.adamw(b.parameters(), 1e-2, states="8bit"), n=5)
    start = _model()
    moved = (a[0].weight - start[0].weight).abs().mean()
    assert moved > 1e-3
    assert (a[0].weight - b[0].weight).abs().mean() < 0.1 * moved


def test_8bit_states_in_a_language_model_run_are_counted_in_the_result():
    pytest.importorskip("bitsandbytes")
    from fakes import SlopeSource

    corpus = lm.load_corpus(max_bytes=20_000)
    torch.manual_seed(0)
    model = lm.TinyGPT(d_model=64, n_layers=1, n_heads=2, max_seq_len=16)
    cfg = lm.LMConfig(seq_len=16, batch_size=2, steps=2, eval_every=2, optimizer_states="8bit")
    run = lm.train_lm(model, corpus, cfg, device="cpu", sources=[SlopeSource(watts=100.0)])
    fp32 = 8 * sum(p.numel() for p in model.parameters())
    assert 0 < run.optimizer_state_bytes < 0.5 * fp32
    with pytest.raises(ValueError, match="fused"):
        lm.LMConfig(fused=True, optimizer_states="8bit")


def test_bad_arguments_and_a_missing_library_are_named(monkeypatch):
    model = _model()
    with pytest.raises(ValueError, match="states"):
        optimizers.adamw(model.parameters(), 1e-3, states="4bit")
    with pytest.raises(ValueError, match="lr"):
        optimizers.adamw(model.parameters(), 0)
    with pytest.raises(ValueError, match="optimizer"):
        optimizers.state_bytes(model)
    with pytest.raises(ValueError, match="fp32 states only"):
        optimizers.adamw(model.parameters(), 1e-3, states="8bit", fused=True)
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    assert optional.missing("bitsandbytes") == "bitsandbytes is not installed"
    with pytest.raises(optional.LibraryMissing, match="need bitsandbytes: bitsandbytes is not installed"):
        optimizers.adamw(model.parameters(), 1e-3, states="8bit")
