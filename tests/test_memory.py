"""greenlab.memory: the bytes autograd saves for the backward pass, from saved_tensors_hooks."""

import pytest
import torch
import torch.nn as nn

from greenlab.training.memory import saved_for_backward


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4))


def test_fp32_counts_the_input_the_shared_relu_output_once_and_the_weight_by_reference():
    saved = saved_for_backward(_mlp(), torch.randn(8, 20))
    # Linear 1 keeps its input (8x20); ReLU's output is also the input Linear 2 keeps (one storage,
    # 8x16); Linear 2 keeps its weight (16x4) to pass gradients back: a parameter, no new memory.
    assert saved.activation_bytes == (8 * 20 + 8 * 16) * 4
    assert saved.parameter_bytes == 4 * 16 * 4
    assert saved.bytes_by_dtype == {"float32": (8 * 20 + 8 * 16) * 4}
    assert saved.total_bytes == saved.activation_bytes + saved.parameter_bytes


def test_bf16_autocast_saves_16_bit_casts_including_a_weight_copy():
    saved = saved_for_backward(_mlp(), torch.randn(8, 20), torch.bfloat16)
    # the same three tensors, each a bf16 cast made during the pass, so none is a parameter
    assert saved.bytes_by_dtype == {"bfloat16": (8 * 20 + 8 * 16 + 4 * 16) * 2}
    assert saved.parameter_bytes == 0
    fp32 = saved_for_backward(_mlp(), torch.randn(8, 20))
    assert saved.activation_bytes > fp32.activation_bytes / 2  # the weight copy is extra memory


def test_frozen_model_saves_nothing_and_bad_input_is_named():
    model = _mlp().requires_grad_(False)
    assert saved_for_backward(model, torch.randn(8, 20)).total_bytes == 0
    with pytest.raises(ValueError, match="dtype"):
        saved_for_backward(_mlp(), torch.randn(8, 20), torch.int8)
    with pytest.raises(ValueError, match="model"):
        saved_for_backward("mlp", torch.randn(8, 20))
    with pytest.raises(ValueError, match="x must"):
        saved_for_backward(_mlp(), [1.0, 2.0])


def test_for_wide_layers_and_a_small_batch_autocast_saves_more_than_fp32():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64))
    x = torch.randn(2, 20)
    fp32 = saved_for_backward(model, x)
    bf16 = saved_for_backward(model, x, torch.bfloat16)
    assert fp32.activation_bytes == (2 * 20 + 2 * 64) * 4  # the 64x64 weight is kept by reference
    assert bf16.activation_bytes == (2 * 20 + 2 * 64 + 64 * 64) * 2  # its bf16 copy is new memory
    assert bf16.activation_bytes > fp32.activation_bytes
