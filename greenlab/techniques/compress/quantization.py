"""Quantisation (lesson 06): int8 models, and the arithmetic one tensor at a time.

- ``quantize_dynamic`` / ``quantize_static``: int8 through ``torch.ao.quantization`` (eager dynamic
  quantisation of ``nn.Linear``; FX graph mode static quantisation with calibration). Quantised
  models run on the CPU. PyTorch marks ``torch.ao.quantization`` as deprecated in favour of the
  separate ``torchao`` package; it still works in the PyTorch versions greenlab supports, and its
  deprecation warnings are silenced inside these two functions only.
- ``linear_quantize``, ``dequantize``, ``fake_quantize`` and ``fake_quantized``: affine
  quantisation of one tensor and a model that computes with fake-quantised weights, the
  reference answers of the lesson's exercises.
"""

from __future__ import annotations

import copy
import io
import warnings

import torch
import torch.nn as nn

from greenlab.base import validation
from greenlab.techniques.compress.pruning import PRUNABLE


def quantize_dynamic(model: nn.Module, dtype=torch.qint8) -> nn.Module:
    """A copy of ``model`` (on the CPU, eval mode) with every ``nn.Linear`` replaced by an int8
    dynamically quantised one: weights stored as int8, activations quantised on the fly.
    Convolutions stay float (dynamic quantisation covers Linear/RNN layers only)."""
    from torch.ao import quantization as tq

    if not any(isinstance(m, nn.Linear) for m in model.modules()):
        raise ValueError("quantize_dynamic needs at least one nn.Linear layer; for conv nets use "
                         "quantize_static(model, calibration_batches)")
    work = copy.deepcopy(model).cpu().eval()
    with _quiet_quantization():
        return tq.quantize_dynamic(work, {nn.Linear}, dtype=dtype)


def quantize_static(model: nn.Module, calibration_batches, backend: str | None = None,
                    max_batches: int = 10) -> nn.Module:
    """A copy of ``model`` (CPU, eval) with weights and activations in int8, by FX graph mode
    post-training quantisation: trace, insert observers, run up to ``max_batches`` calibration
    batches (tensors or (x, y) pairs) to record activation ranges, convert.

    ``backend``: a quantised engine from ``torch.backends.quantized.supported_engines`` ("x86",
    "fbgemm", "qnnpack", "onednn"); None uses the current engine. Models that torch.fx cannot
    trace (data-dependent control flow) raise ValueError.
    """
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    backend = backend or torch.backends.quantized.engine
    if backend not in engines:
        raise ValueError(f"backend must be one of {engines}, got {backend!r}")
    if not isinstance(max_batches, int) or max_batches < 1:
        raise ValueError(f"max_batches must be a positive integer, got {max_batches!r}")
    batches = []
    for batch in calibration_batches:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        if not isinstance(x, torch.Tensor):
            raise ValueError("calibration_batches must yield tensors or (x, y) pairs")
        batches.append(x.detach().cpu().float())
        if len(batches) >= max_batches:
            break
    if not batches:
        raise ValueError("calibration_batches is empty; give at least one batch of inputs")
    work = copy.deepcopy(model).cpu().eval()
    with _quiet_quantization():
        try:
            prepared = prepare_fx(work, get_default_qconfig_mapping(backend), (batches[0],))
        except Exception as exc:  # torch.fx raises several error types when tracing fails
            raise ValueError(f"quantize_static could not trace {type(model).__name__} with torch.fx "
                             f"({type(exc).__name__}: {exc}); use quantize_dynamic instead") from exc
        with torch.no_grad():
            for x in batches:
                prepared(x)
        return convert_fx(prepared)


def model_size_bytes(model: nn.Module) -> int:
    """Size in bytes of the model's serialised ``state_dict`` (``torch.save`` to memory)."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


def quantization_range(bits: int) -> tuple:
    """(qmin, qmax) of signed ``bits``-bit integers: (-2^(bits-1), 2^(bits-1) - 1)."""
    bits = validation.integer("bits", bits, low=2, high=8)
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def linear_quantize(weight: torch.Tensor, bits: int = 8, per_channel: bool = False):
    """Asymmetric (affine) linear quantisation to signed ``bits``-bit integers:
    ``(q, scale, zero_point)`` with ``weight ~ scale * (q - zero_point)``. The range
    [min(w, 0), max(w, 0)] maps onto [qmin, qmax]; ``scale = range / (qmax - qmin)``,
    ``zero_point = qmin - round(min / scale)``, ``q = clamp(round(w / scale) + zero_point)``.
    ``per_channel``: one scale and zero point per row (dim 0, an output channel), else one
    for the tensor. ``q`` is int32; scale float32 and zero_point int32 (shape () or (rows,)).
    Parameters from torch's min/max observers, integers from ``torch.quantize_per_tensor`` /
    ``quantize_per_channel`` at 8 bits and ``torch.fake_quantize_per_*_affine`` below."""
    from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.numel() == 0:
        raise ValueError("weight must be a non-empty floating-point torch.Tensor")
    qmin, qmax = quantization_range(bits)
    validation.flag("per_channel", per_channel)
    w = weight.detach().float().cpu()
    if per_channel and w.dim() < 1:
        raise ValueError("per_channel quantisation needs a tensor with at least one dimension")
    with _quiet_quantization():
        if per_channel:
            observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, quant_min=qmin, quant_max=qmax,
                                                qscheme=torch.per_channel_affine)
        else:
            observer = MinMaxObserver(dtype=torch.qint8, quant_min=qmin, quant_max=qmax,
                                      qscheme=torch.per_tensor_affine)
        observer(w)
        scale, zero_point = observer.calculate_qparams()
        scale, zero_point = scale.float(), zero_point.int()
        if per_channel:
            if bits == 8:
                q = torch.quantize_per_channel(w, scale.double(), zero_point.long(), 0, torch.qint8).int_repr()
            else:
                fq = torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, qmin, qmax)
                shape = (-1,) + (1,) * (w.dim() - 1)
                q = torch.round(fq / scale.view(shape)) + zero_point.view(shape)
        else:
            scale, zero_point = scale.reshape(()), zero_point.reshape(())
            if bits == 8:
                q = torch.quantize_per_tensor(w, float(scale), int(zero_point), torch.qint8).int_repr()
            else:
                fq = torch.fake_quantize_per_tensor_affine(w, float(scale), int(zero_point), qmin, qmax)
                q = torch.round(fq / scale) + zero_point
    return q.to(torch.int32), scale, zero_point


def dequantize(q: torch.Tensor, scale, zero_point) -> torch.Tensor:
    """Float values ``scale * (q - zero_point)`` of integers from ``linear_quantize``; a scale
    and zero point of shape (rows,) apply per row (dim 0)."""
    scale = torch.as_tensor(scale, dtype=torch.float32)
    zero_point = torch.as_tensor(zero_point, dtype=torch.float32)
    if scale.dim() == 1 and q.dim() >= 1:
        shape = (-1,) + (1,) * (q.dim() - 1)
        scale, zero_point = scale.view(shape), zero_point.view(shape)
    return scale * (q.float() - zero_point)


def fake_quantize(weight: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Per-tensor fake quantisation for quantisation-aware training: the forward value is
    ``dequantize(*linear_quantize(weight, bits))`` (rounded onto the integer grid and back); the
    gradient passes straight through (the straight-through estimator of Bengio et al., 2013, as
    used by Jacob et al., 2018). Through ``torch.fake_quantize_per_tensor_affine``."""
    _q, scale, zero_point = linear_quantize(weight, bits)
    qmin, qmax = quantization_range(bits)
    return torch.fake_quantize_per_tensor_affine(weight, float(scale), int(zero_point), qmin, qmax)


class _FakeQuantized(nn.Module):
    """A parametrisation: the weight as ``fake_quant(weight, bits)`` sees it."""

    def __init__(self, fake_quant, bits: int):
        super().__init__()
        self.fake_quant, self.bits = fake_quant, bits

    def forward(self, weight):
        return self.fake_quant(weight, self.bits)


def fake_quantized(model: nn.Module, bits: int = 8, fake_quant=None) -> nn.Module:
    """A copy of ``model`` whose conv/linear weights pass through ``fake_quant(weight, bits)``
    (default ``fake_quantize``) on every forward pass, through
    ``torch.nn.utils.parametrize``: evaluated as is, it is post-training weight quantisation;
    trained with ``greenlab.training.loop``, it is quantisation-aware training (the gradient reaches the
    float weights through the straight-through estimator)."""
    from torch.nn.utils import parametrize

    validation.module("model", model)
    qmin, qmax = quantization_range(bits)
    fake_quant = fake_quantize if fake_quant is None else fake_quant
    if not callable(fake_quant):
        raise ValueError(f"fake_quant must be a function (weight, bits) -> tensor, got {fake_quant!r}")
    work = copy.deepcopy(model)
    for m in work.modules():
        if isinstance(m, PRUNABLE):
            parametrize.register_parametrization(m, "weight", _FakeQuantized(fake_quant, bits))
    return work


class _quiet_quantization(warnings.catch_warnings):
    """Silence torch.ao.quantization's deprecation and observer warnings inside a block."""

    def __enter__(self):
        result = super().__enter__()
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*torch.ao.quantization.*")
        warnings.filterwarnings("ignore", category=UserWarning, message=".*reduce_range will be deprecated.*")
        warnings.filterwarnings("ignore", category=UserWarning, message=".*quantize_per_tensor.*")
        return result
