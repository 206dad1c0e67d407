"""Top-1 accuracy of a classifier: the share of samples whose highest logit is the label."""

from __future__ import annotations

import torch


def accuracy(model, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000, device=None,
             autocast_dtype: torch.dtype | None = None, channels_last: bool = False) -> float:
    """Share (0..1) of the rows of ``x`` that ``model`` labels as ``y``, batch by batch in eval mode
    without gradients (``model``'s train/eval mode is restored). ``device``: where each batch is
    sent (default: where it is); ``autocast_dtype``: evaluate under ``torch.autocast`` in that
    dtype; ``channels_last``: feed 4-D batches in channels-last memory format. 0 samples give 0.0."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    n = int(y.shape[0])
    was_training = model.training
    model.eval()
    correct = None
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                xb, yb = x[start:start + batch_size], y[start:start + batch_size]
                if device is not None:
                    xb, yb = xb.to(device), yb.to(device)
                if channels_last and xb.dim() == 4:
                    xb = xb.contiguous(memory_format=torch.channels_last)
                with torch.autocast(xb.device.type, dtype=autocast_dtype or torch.float32,
                                    enabled=autocast_dtype is not None):
                    hits = (model(xb).argmax(1) == yb).sum()
                correct = hits if correct is None else correct + hits  # one sync, at the end
    finally:
        model.train(was_training)
    return int(correct) / n if n else 0.0
