"""What the batching tools share about their inputs (lesson 03 (03_batch_sizing)): counts and epochs checked
one way, a dataset's training tensors, the device of a model, and a CPU copy of its state, so that probing and
measuring can leave the model as they found it.
"""

from __future__ import annotations

import torch


def _snapshot(obj):
    """A deep copy with every tensor copied to the CPU (for state dicts)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return type(obj)((k, _snapshot(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_snapshot(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_snapshot(v) for v in obj)
    return obj


def _model_device(model) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _xy(data):
    if hasattr(data, "train_x") and hasattr(data, "train_y"):
        return data.train_x, data.train_y
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return data[0], data[1]
    raise ValueError("data must be a greenlab Dataset or a pair of tensors (x, y)")


def _check_positive_int(label, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{label} must be a positive integer, got {value!r}")
    return value


def _check_epoch(epoch, label="epoch"):
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"{label} must be an integer >= 0, got {epoch!r}")
    return epoch
