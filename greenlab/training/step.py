"""One classifier training step, written once: the loss under autocast, the backward pass through
a ``GradScaler``, and the optimizer step (with optional gradient clipping), after the PyTorch AMP
recipe's single ``enabled`` switch: ``GradScaler(enabled=False)`` passes everything through, so
fp32, bf16 and fp16 take the same path. ``gl.train`` and the data-parallel worker use it."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def make_scaler(device_type: str, precision: str) -> torch.amp.GradScaler:
    """A loss scaler that scales only for ``precision == "fp16"`` (on CUDA and on the CPU)."""
    return torch.amp.GradScaler(device_type, enabled=precision == "fp16")


def classifier_loss(net, x: torch.Tensor, y: torch.Tensor, divisor: float, dtype: torch.dtype,
                    autocast: bool) -> torch.Tensor:
    """Summed cross-entropy of ``net(x)`` against ``y`` divided by ``divisor`` (the samples of the
    whole optimizer step, so accumulated micro-batches add up to the step's mean), the forward
    pass under ``torch.autocast(dtype)`` when ``autocast``; the loss itself is taken in fp32."""
    with torch.autocast(x.device.type, dtype=dtype, enabled=autocast):
        out = net(x)
    return F.cross_entropy(out.float(), y, reduction="sum") / divisor


def backward(loss: torch.Tensor, scaler: torch.amp.GradScaler) -> None:
    """Gradients of ``loss``, scaled when the scaler is enabled."""
    scaler.scale(loss).backward()


def optimizer_step(optimizer, scaler: torch.amp.GradScaler, parameters=None,
                   grad_clip: float | None = None) -> None:
    """Apply the accumulated gradients and clear them: unscale (so clipping sees true gradients),
    clip to ``grad_clip`` (L2 norm over ``parameters``) when given, step, update the scale."""
    if grad_clip:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
