"""What autograd keeps in memory for the backward pass, measured rather than computed.

``saved_for_backward(model, x, dtype)`` runs one forward pass (optionally under
``torch.autocast``) with ``torch.autograd.graph.saved_tensors_hooks`` and adds up the
bytes of every tensor autograd saves for the backward pass. Each storage is counted
once (a tensor saved by two operations costs memory once), and the model's own
parameters are reported apart, because keeping a reference to a weight costs no
extra memory, while a 16-bit copy of it made by autocast does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

AUTOCAST_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class SavedForBackward:
    """Bytes autograd saved during one forward pass.

    ``activation_bytes``: inputs, layer outputs and casts made during the pass (memory the
    backward pass adds); ``parameter_bytes``: the model's own parameters, saved by reference
    (no extra memory); ``bytes_by_dtype``: ``activation_bytes`` split by dtype name.
    """

    activation_bytes: int
    parameter_bytes: int
    tensors: int
    bytes_by_dtype: dict

    @property
    def total_bytes(self) -> int:
        """All saved storages, parameters included."""
        return self.activation_bytes + self.parameter_bytes


def saved_for_backward(model: nn.Module, x: torch.Tensor, dtype: torch.dtype | None = None) -> SavedForBackward:
    """Measure what autograd saves for the backward pass of ``model(x)``.

    ``dtype``: ``None`` or ``torch.float32`` runs plainly; ``torch.bfloat16`` or
    ``torch.float16`` runs under ``torch.autocast`` on ``x``'s device type. The model's
    parameters must require gradients (otherwise little is saved, and that is what is
    reported). The forward pass's graph is freed before returning; nothing is trained.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor batch; got {type(x).__name__}")
    if dtype is not None and dtype not in AUTOCAST_DTYPES:
        raise ValueError(f"dtype must be None or one of {', '.join(str(d) for d in AUTOCAST_DTYPES)}; got {dtype!r}")
    parameter_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple[int, str, bool]] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in seen:
            seen[key] = (storage.nbytes(), str(t.dtype).removeprefix("torch."), key in parameter_storages)
        return t

    autocast = dtype not in (None, torch.float32)
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast(x.device.type, dtype=dtype or torch.bfloat16, enabled=autocast):
        out = model(x)
    del out  # frees the graph and what it saved
    by_dtype: dict[str, int] = {}
    for nbytes, name, is_param in seen.values():
        if not is_param:
            by_dtype[name] = by_dtype.get(name, 0) + nbytes
    parameter_bytes = sum(n for n, _, is_param in seen.values() if is_param)
    return SavedForBackward(activation_bytes=sum(by_dtype.values()), parameter_bytes=parameter_bytes,
                            tensors=len(seen), bytes_by_dtype=by_dtype)
