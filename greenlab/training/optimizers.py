"""AdamW with fp32 or 8-bit states, and the bytes an optimizer's state really takes.

    opt = gl.optimizers.adamw(model.parameters(), lr=3e-3, states="8bit")   # bitsandbytes
    ...training steps...
    gl.optimizers.state_bytes(opt)          # counted from opt.state's tensors, each storage once

fp32 states are PyTorch's ``torch.optim.AdamW``. 8-bit states are bitsandbytes' ``AdamW8bit``
(Dettmers et al., 2022: block-wise quantization with an fp32 scale per block, 256 values per block
by bitsandbytes' default where the paper used 2,048, and a dynamic 8-bit code); by bitsandbytes' default a tensor of fewer than ``MIN_8BIT_SIZE``
values keeps 32-bit states. bitsandbytes is optional at run time: ``greenlab.base.optional.missing`` says why it
cannot be used here, and :func:`adamw` raises ``LibraryMissing`` instead of a bare ImportError.
"""

from __future__ import annotations

import torch

from greenlab.base import validation
from greenlab.base.optional import LibraryMissing, install_hint, missing, quiet_import

STATES = ("fp32", "8bit")
MIN_8BIT_SIZE = 4096  # bitsandbytes' default: smaller tensors keep 32-bit states


def adamw(params, lr: float, states: str = "fp32", weight_decay: float = 0.01, **fp32_options):
    """AdamW over ``params`` at learning rate ``lr``: ``states="fp32"`` is ``torch.optim.AdamW``
    (``fp32_options`` such as ``fused`` or ``foreach`` go to it), ``"8bit"`` is bitsandbytes'
    ``AdamW8bit`` with its default ``min_8bit_size`` (raises :class:`LibraryMissing` without it)."""
    validation.choice("states", states, STATES)
    params = validation.parameters("params", params)
    lr = validation.number("lr", lr, low=0, low_open=True, high=10)
    weight_decay = validation.number("weight_decay", weight_decay, low=0, high=1)
    if lr * weight_decay >= 1:  # decoupled decay multiplies each weight by 1 - lr x weight_decay
        raise ValueError(f"lr x weight_decay = {lr:g} x {weight_decay:g} must be below 1: each step "
                         "multiplies the weights by 1 - lr x weight_decay, which would zero or flip them")
    if states == "fp32":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **fp32_options)
    if fp32_options:
        raise ValueError(f"{sorted(fp32_options)} apply to fp32 states only, not to states='8bit'")
    why = missing("bitsandbytes")
    if why:
        raise LibraryMissing(f"8-bit optimizer states need bitsandbytes: {why} ({install_hint('bitsandbytes')})")
    bnb = quiet_import("bitsandbytes")
    return bnb.optim.AdamW8bit(params, lr=lr, weight_decay=weight_decay, min_8bit_size=MIN_8BIT_SIZE)


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``optimizer.state``, each storage counted once (bitsandbytes
    shares one quantization map between all tensors, so it counts once). Python numbers in the
    state (a step count) are not counted. 0 before the first step: state is made lazily."""
    validation.instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    seen, total = set(), 0
    for per_param in optimizer.state.values():
        for value in per_param.values():
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                if storage.data_ptr() not in seen:
                    seen.add(storage.data_ptr())
                    total += storage.nbytes()
    return total
