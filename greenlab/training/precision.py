"""The training precisions greenlab knows and the torch dtype each computes in (under autocast):
``fp32`` (plain), ``bf16`` and ``fp16`` (16-bit autocast; fp16 also needs loss scaling)."""

from __future__ import annotations

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
PRECISIONS = tuple(DTYPES)


def dtype(precision: str) -> torch.dtype:
    """The torch dtype of ``precision`` ("fp32", "bf16" or "fp16"); ValueError otherwise."""
    if precision not in DTYPES:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return DTYPES[precision]


def autocasts(precision: str) -> bool:
    """True when ``precision`` runs under ``torch.autocast`` (every precision but fp32)."""
    return dtype(precision) is not torch.float32
