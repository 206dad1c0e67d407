"""Small helpers the compression modules share."""

from __future__ import annotations

import torch
import torch.nn as nn


def _parent_of(model: nn.Module, dotted: str):
    *path, attr = dotted.split(".")
    parent = model
    for part in path:
        parent = getattr(parent, part)
    return parent, attr


def _measure(label: str):
    """A greenlab.energy measurement window (imported late: energy is a sibling module)."""
    from greenlab.energy import measure

    return measure(label)


def _sync(x: torch.Tensor) -> None:
    if x.is_cuda:
        torch.cuda.synchronize(x.device)


def _model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
