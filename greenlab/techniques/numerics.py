"""Number formats in training (lesson 01): where float16 loses small gradients, and
``torch.amp.GradScaler`` behind the three names of the lesson's own loss scaler.

- ``fp16_flush_fractions(grads, scale)``: of the non-zero values of ``grads x scale``, the fraction
  that float16 flushes to zero and the fraction it keeps only as a subnormal.
- ``autocast_dtypes(device, dtype)``: the dtype autocast gives a few ops on this torch and device.
- ``TorchLossScaler``: ``scale``, ``scale_loss(loss)`` and ``step(optimizer)`` (unscale, skip on
  inf/NaN, update the scale) done by ``GradScaler``, so a lesson can measure either scaler.
"""

from __future__ import annotations

import torch

FP16_SMALLEST_NORMAL = torch.finfo(torch.float16).tiny  # 2**-14, about 6.1e-5
FP16_SMALLEST_SUBNORMAL = 2.0 ** -24  # about 6.0e-8; half of it and below round to zero


def fp16_flush_fractions(grads, scale: float = 1.0) -> tuple:
    """(flushed, subnormal): fractions, among the non-zero values of ``grads`` times ``scale``,
    that become 0 when cast to float16 and that become float16 subnormals (non-zero, below
    2**-14). Both 0.0 when no value is non-zero."""
    if not isinstance(grads, torch.Tensor):
        raise TypeError(f"grads must be a torch.Tensor, got {type(grads).__name__}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"scale must be a number > 0, got {scale!r}")
    scaled = grads.detach().float() * scale
    nonzero = scaled != 0
    n = int(nonzero.sum())
    if n == 0:
        return 0.0, 0.0
    half = scaled.half()
    flushed = int(((half == 0) & nonzero).sum())
    subnormal = int(((half != 0) & (half.abs() < FP16_SMALLEST_NORMAL)).sum())
    return flushed / n, subnormal / n


class TorchLossScaler:
    """``torch.amp.GradScaler`` for ``device`` ("cpu" or "cuda") with the interface of the lesson's
    loss scaler: ``scale`` (float), ``scale_loss(loss)``, ``step(optimizer)`` -> True when the
    optimizer stepped (False when the step was skipped for inf/NaN gradients)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, device: str = "cpu"):
        if not 0 < backoff_factor < 1:
            raise ValueError(f"backoff_factor must be in (0, 1), got {backoff_factor!r}")
        self._inner = torch.amp.GradScaler(device, init_scale=init_scale, growth_factor=growth_factor,
                                           backoff_factor=backoff_factor, growth_interval=growth_interval)

    @property
    def scale(self) -> float:
        return float(self._inner.get_scale())

    def scale_loss(self, loss):
        return self._inner.scale(loss)

    def step(self, optimizer) -> bool:
        before = self.scale
        self._inner.step(optimizer)
        self._inner.update()
        return self.scale >= before  # the scale backs off (factor < 1) exactly when a step was skipped


# one op of each kind the lesson names, run under autocast: the matmul on fp32 inputs, the others
# on 16-bit inputs, as they arrive from the matmul before them in a network
_AUTOCAST_PROBES = {
    "linear (matmul)": lambda x, w, y: torch.nn.functional.linear(x.float(), w),
    "softmax": lambda x, w, y: torch.softmax(x, dim=1),
    "log_softmax": lambda x, w, y: torch.log_softmax(x, dim=1),
    "exp": lambda x, w, y: torch.exp(x),
    "sum (reduction)": lambda x, w, y: x.sum(dim=1),
    "layer_norm": lambda x, w, y: torch.nn.functional.layer_norm(x, x.shape[1:]),
    "mse_loss": lambda x, w, y: torch.nn.functional.mse_loss(x, torch.zeros_like(x)),
    "cross_entropy (loss)": lambda x, w, y: torch.nn.functional.cross_entropy(x, y),
}


def autocast_dtypes(device: str = "cpu", dtype=torch.bfloat16) -> dict:
    """{op: dtype name of its output} for a few ops run under ``torch.autocast(device, dtype)``,
    as this torch does it: which ops autocast lowers to 16 bits and which it runs in fp32 differ
    between CPU and CUDA (PyTorch's autocast op lists), so the lesson asks torch instead of quoting
    one list. The matmul gets fp32 inputs ("bfloat16" out: autocast lowered it); every other op
    gets a 16-bit input, as from the layer before it ("float32" out: autocast runs it in fp32;
    16 bits out: it is on neither list and follows its input)."""
    device = str(device).split(":")[0]
    x = torch.randn(4, 8, device=device).to(dtype)
    w = torch.randn(8, 8, device=device)
    y = torch.zeros(4, dtype=torch.long, device=device)
    out = {}
    with torch.autocast(device, dtype=dtype):
        for name, op in _AUTOCAST_PROBES.items():
            out[name] = str(op(x, w, y).dtype).replace("torch.", "")
    return out
