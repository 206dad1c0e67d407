"""Low-rank adaptation (LoRA, Hu et al., 2021): fine-tune a few small matrices instead of every weight (lesson 12
(12_adapting_and_serving)).

    gl.lora.add_lora(model, rank=4)      # freezes the model, adds trainable A, B beside each linear layer
    gl.count_params(model)               # trainable parameters only

A frozen ``nn.Linear`` W gets a parallel path B A x scaled by alpha / rank, with A (rank x in)
random and B (out x rank) zero, so the adapted model starts exactly where the original was. Only
A and B get gradients and optimizer state.

The library for this on Hugging Face models is peft. With this course's PyTorch it adapts the
lesson's model too (the same 8,192 trainable parameters at rank 4), but it brings transformers,
accelerate and huggingface_hub (about 230 MB) and takes seconds to import on a small CPU, for a
mechanism this module shows whole in a few lines, and that lesson 12's exercise asks learners to count.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import validation


class LoRALinear(nn.Module):
    """``base(x) + (alpha / rank) * x A^T B^T`` with ``base`` frozen."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        validation.instance("base", base, nn.Linear, "a torch.nn.Linear")
        rank = validation.integer("rank", rank, low=1, high=min(base.in_features, base.out_features))
        self.alpha = validation.number("alpha", alpha, low=0, low_open=True)
        self.base, self.rank = base, rank
        for p in base.parameters():
            p.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * (self.alpha / self.rank)


def add_lora(model: nn.Module, rank: int = 4, alpha: float = 8.0, layer=None) -> nn.Module:
    """Freeze every parameter of ``model`` and wrap each ``nn.Linear`` inside its transformer blocks
    (``model.blocks``) in a :class:`LoRALinear` (in place; ``layer``: another class called as
    ``layer(base, rank, alpha)``, e.g. a learner's own). Returns ``model``."""
    validation.module("model", model)
    blocks = getattr(model, "blocks", None)
    if blocks is None or not isinstance(blocks, nn.Module):
        raise validation.ArgumentTypeError(
            "model must have transformer blocks (.blocks), e.g. a greenlab.techniques.lm.gpt.TinyGPT")
    rank = validation.integer("rank", rank, low=1, high=2**31)
    alpha = validation.number("alpha", alpha, low=0, low_open=True)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in blocks:
        for parent in [block] + list(block.modules()):
            for name, child in list(parent.named_children()):
                if type(child) is nn.Linear:
                    setattr(parent, name, (layer or LoRALinear)(child, rank, alpha))
    return model


def adam_state_bytes(trainable_params: int, state_bytes_per_value: float = 4.0) -> float:
    """Bytes of Adam/AdamW state (two moments per trainable parameter) at ``state_bytes_per_value``
    bytes per value: 4 in fp32, 2 in bf16, 1 for 8-bit states (Dettmers et al., 2022, who also keep
    a small per-block scale, not counted here)."""
    n = validation.integer("trainable_params", trainable_params, low=0, high=2**62)
    per = validation.number("state_bytes_per_value", state_bytes_per_value, low=0, low_open=True, high=8)
    return 2 * n * per
