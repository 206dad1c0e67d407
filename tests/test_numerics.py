"""greenlab.numerics: fp16 flush fractions and GradScaler behind the lesson scaler's names."""

import pytest
import torch

from greenlab.course import checks
from greenlab.techniques.numerics import TorchLossScaler, fp16_flush_fractions


def test_flush_fractions_count_zeros_and_subnormals_among_non_zero_values():
    grads = torch.tensor([0.0, 1.0, 1e-5, 1e-9])  # 1e-5 is subnormal in fp16, 1e-9 flushes
    assert fp16_flush_fractions(grads) == pytest.approx((1 / 3, 1 / 3))
    assert fp16_flush_fractions(grads, 2.0 ** 16) == (0.0, 0.0)  # both land among the normals
    assert fp16_flush_fractions(torch.zeros(4)) == (0.0, 0.0)
    assert checks.fp16_flush_fractions.__wrapped__(fp16_flush_fractions).passed  # the reference passes its own check
    with pytest.raises(ValueError):
        fp16_flush_fractions(grads, 0)
    with pytest.raises(TypeError):
        fp16_flush_fractions([1.0])


def test_torch_loss_scaler_passes_the_lesson_checker_and_reports_skips():
    assert checks.loss_scaler.__wrapped__(TorchLossScaler).passed  # the reference passes its own check
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = TorchLossScaler(init_scale=8.0, growth_interval=1)
    scaler.scale_loss(model(torch.tensor([[float("inf"), 0.0]])).sum()).backward()
    assert scaler.step(opt) is False and scaler.scale == 4.0
    opt.zero_grad()
    scaler.scale_loss(model(torch.ones(1, 2)).sum()).backward()
    assert scaler.step(opt) is True and scaler.scale == 8.0
    with pytest.raises(ValueError, match="backoff_factor"):
        TorchLossScaler(backoff_factor=1.0)


def test_autocast_dtypes_reports_what_this_torch_runs_in_fp32_on_the_cpu():
    from greenlab.techniques.numerics import autocast_dtypes

    seen = autocast_dtypes("cpu", torch.bfloat16)
    assert seen["linear (matmul)"] == "bfloat16"  # lowered by autocast
    assert seen["cross_entropy (loss)"] == "float32"  # on the CPU list of ops autocast runs in fp32
    assert set(seen.values()) <= {"bfloat16", "float32"}
