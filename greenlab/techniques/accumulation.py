"""Gradient accumulation (lesson 02): the gradient of a big batch from micro-batches, and the
BatchNorm fix that keeps the two equal.

- ``accumulate_gradients(model, x, y, micro_batch_size)``: leaves in ``.grad`` the gradient of the
  mean cross-entropy over all of ``x``, from micro-batches (the last may be shorter).
- ``groupnorm_instead_of_batchnorm(model, num_groups)``: every BatchNorm replaced by a GroupNorm,
  which normalises each sample on its own, so micro-batches no longer change the gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def accumulate_gradients(model, x, y, micro_batch_size: int):
    """Forward and backward over ``x`` in micro-batches of ``micro_batch_size`` samples, each loss
    the sum of its per-sample cross-entropies divided by ``len(x)``, so the gradients add up to the
    big batch's mean-loss gradient however the last micro-batch is cut. No optimizer step; the
    gradients are added to whatever ``.grad`` holds. Returns the model."""
    if isinstance(micro_batch_size, bool) or not isinstance(micro_batch_size, int) or micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be an integer >= 1, got {micro_batch_size!r}")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y need the same, non-zero number of samples (got {len(x)} and {len(y)})")
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        (F.cross_entropy(model(xb), yb, reduction="sum") / len(x)).backward()
    return model


def groupnorm_instead_of_batchnorm(model, num_groups: int = 1):
    """Replace every BatchNorm1d/2d/3d in ``model`` (nested ones too), in place, by a GroupNorm of
    the same channels in ``num_groups`` groups (``num_groups`` is lowered to the largest divisor of
    the channel count at or below it). GroupNorm normalises each sample on its own, so a step's
    gradient no longer depends on how the batch is split into micro-batches. Returns the model."""
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"num_groups must be an integer >= 1, got {num_groups!r}")
    for name, child in list(model.named_children()):
        if isinstance(child, torch.nn.modules.batchnorm._BatchNorm):
            channels = child.num_features
            groups = max(g for g in range(1, min(num_groups, channels) + 1) if channels % g == 0)
            setattr(model, name, torch.nn.GroupNorm(groups, channels, eps=child.eps, affine=child.affine))
        else:
            groupnorm_instead_of_batchnorm(child, num_groups)
    return model
