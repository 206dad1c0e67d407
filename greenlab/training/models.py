"""Model families the lessons train, and how much arithmetic they cost.

``build("cnn" | "resnet" | "mlp", **kw)`` returns a fresh ``torch.nn.Module``.
``flops(model, input_shape)`` counts floating-point operations with the course's counter
(``greenlab.training.flop_counting``: PyTorch's ``FlopCounterMode``, with grouped convolutions'
backward passes counted per group; matrix multiplies and convolutions; cheap element-wise ops such
as ReLU or normalisation are not counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import limits, validation
from greenlab.training.flop_counting import flop_counter

NORMS = ("batch", "group", "none")

_ALLOWED = {
    "cnn": {"num_classes": 10, "in_channels": 1, "depth": 2, "width": 16, "kernel_size": 3,
            "separable": False, "norm": "batch"},
    "resnet": {"num_classes": 10, "in_channels": 3, "depth": 8, "width": 16, "norm": "batch"},
    "mlp": {"num_classes": 10, "input_shape": (1, 28, 28), "hidden": (256, 128), "dropout": 0.0},
}
MODELS = tuple(_ALLOWED)


def build(name: str, **kw) -> nn.Module:
    """A fresh model by family name. Options and defaults:

    - "cnn": num_classes=10, in_channels=1, depth=2 (conv blocks, each halves H and W),
      width=16 (channels of the first block, doubling per block), kernel_size=3 (odd),
      separable=False (depthwise + pointwise convolutions), norm="batch"|"group"|"none".
    - "resnet": a CIFAR-style ResNet (3 stages), num_classes=10, in_channels=3,
      depth=8 (6n+2: 8, 14, 20, ...), width=16 (first stage channels), norm.
    - "mlp": num_classes=10, input_shape=(1, 28, 28), hidden=(256, 128), dropout=0.0.
    """
    if not isinstance(name, str) or name.lower() not in _ALLOWED:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}")
    name = name.lower()
    unknown = sorted(set(kw) - set(_ALLOWED[name]))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for model {name!r}; allowed: "
                         f"{', '.join(_ALLOWED[name])}")
    opts = {**_ALLOWED[name], **kw}
    _check_int("num_classes", opts["num_classes"], minimum=2)
    if name == "cnn":
        return SmallCNN(**opts)
    if name == "resnet":
        return ResNet(**opts)
    return MLP(**opts)


build_model = build  # the name used in some lesson text


@dataclass(frozen=True)
class FlopCount:
    """FLOPs for one batch of ``batch_size``: a forward pass and a full training step
    (forward + backward), both counted by ``greenlab.training.flop_counting.flop_counter``."""

    forward: int
    train_step: int
    batch_size: int
    input_shape: tuple

    @property
    def forward_per_sample(self) -> float:
        return self.forward / self.batch_size

    @property
    def train_step_per_sample(self) -> float:
        return self.train_step / self.batch_size

    def to_dict(self) -> dict:
        return {"forward": self.forward, "train_step": self.train_step, "batch_size": self.batch_size,
                "input_shape": list(self.input_shape),
                "counter": "torch.utils.flop_counter.FlopCounterMode, grouped convolution backward per group"}


def flops(model: nn.Module, input_shape, batch_size: int = 1, device=None) -> FlopCount:
    """Count FLOPs of ``model`` on zeros of shape (batch_size, *input_shape).

    The count runs on the model itself and then puts back what it touched (gradients,
    normalisation statistics, train/eval mode), so weights and statistics are unchanged; this
    also works for models carrying pruning masks, which cannot be deep-copied. The training
    step runs forward and backward of a cross-entropy loss (when the output is 2-D) or of the
    output's sum. Batch size 1 is counted at batch 2 and halved (FLOPs grow linearly with the
    batch), because batch normalisation cannot train on one value per channel.
    """
    validation.module("model", model)
    batch_size = validation.integer("batch_size", batch_size, low=1)
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise validation.ArgumentTypeError(
            f"input_shape must be a tuple of sizes such as (1, 28, 28), got {input_shape!r}")
    input_shape = tuple(validation.integer("input_shape entries", s, low=1, high=2**31) for s in input_shape)
    shape = tuple(int(s) for s in input_shape)
    # the count runs on float32 zeros of (batch, *shape): they must fit in memory
    limits.held("batch_size", batch_size, what="samples in one batch",
                    bytes_each=4 * math.prod(shape))
    counted = max(batch_size, 2)
    if device is not None:
        device = validation.device("device", device)
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else "cpu"
    x = torch.zeros((counted, *shape), device=device)
    was_training = model.training
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    grads = [(p, None if p.grad is None else p.grad.detach().clone()) for p in model.parameters()]
    try:
        model.eval()
        with torch.no_grad(), flop_counter() as fwd:
            model(x)
        model.train()
        with flop_counter() as step:
            out = model(x)
            if out.dim() == 2:
                target = torch.zeros(out.shape[0], dtype=torch.long, device=out.device)
                loss = F.cross_entropy(out, target)
            else:
                loss = out.sum()
            loss.backward()
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)
        for param, saved in grads:
            param.grad = saved
        model.train(was_training)
    scale = batch_size / counted
    return FlopCount(forward=round(fwd.get_total_flops() * scale),
                     train_step=round(step.get_total_flops() * scale),
                     batch_size=batch_size, input_shape=shape)


def count_params(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameters (only those with ``requires_grad`` by default)."""
    validation.module("model", model)
    validation.flag("trainable_only", trainable_only)
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """``model``'s outputs for the inputs ``x``: in evaluation mode and without gradients, on the
    device the model's parameters are on (``gl.train`` moves a model to the GPU; ``x`` may stay
    on the CPU), ``batch_size`` rows at a time; returned on ``x``'s device. The model's
    training/evaluation mode is restored afterwards."""
    validation.module("model", model)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of inputs, got {type(x).__name__}")
    _check_int("batch_size", batch_size, minimum=1)
    first = next(iter(model.parameters()), None)
    if first is None:
        first = next(iter(model.buffers()), None)
    device = first.device if first is not None else x.device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            parts = [model(x[i:i + batch_size].to(device)).to(x.device) for i in range(0, x.shape[0], batch_size)]
    finally:
        model.train(was_training)
    if not parts:
        raise ValueError("x must hold at least one input row")
    return torch.cat(parts)


class SmallCNN(nn.Module):
    """Conv blocks (conv -> norm -> ReLU -> 2x2 max-pool), global average pool, linear head."""

    def __init__(self, num_classes=10, in_channels=1, depth=2, width=16, kernel_size=3,
                 separable=False, norm="batch"):
        super().__init__()
        _check_int("in_channels", in_channels, minimum=1)
        _check_int("depth", depth, minimum=1, maximum=6)
        _check_int("width", width, minimum=1)
        _check_int("kernel_size", kernel_size, minimum=1)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (1, 3, 5, ...), got {kernel_size}")
        if not isinstance(separable, bool):
            raise ValueError(f"separable must be True or False, got {separable!r}")
        _check_norm(norm)
        blocks = []
        channels = in_channels
        for i in range(depth):
            out = width * 2 ** i
            blocks.append(_conv_block(channels, out, kernel_size, separable, norm))
            blocks.append(nn.MaxPool2d(2, ceil_mode=True))
            channels = out
        self.features = nn.Sequential(*blocks)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class ResNet(nn.Module):
    """A small CIFAR-style ResNet: stem, three stages of basic blocks (width, 2x, 4x channels;
    stride 2 into stages 2 and 3), global average pool, linear head. depth = 6n + 2."""

    def __init__(self, num_classes=10, in_channels=3, depth=8, width=16, norm="batch"):
        super().__init__()
        _check_int("in_channels", in_channels, minimum=1)
        _check_int("width", width, minimum=1)
        _check_int("depth", depth, minimum=8)
        if (depth - 2) % 6 != 0:
            raise ValueError(f"resnet depth must be 6n+2 (8, 14, 20, 26, ...), got {depth}")
        _check_norm(norm)
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, padding=1, bias=norm == "none"),
                                  _norm(norm, width), nn.ReLU(inplace=True))
        layers = []
        channels = width
        for stage in range(3):
            out = width * 2 ** stage
            for b in range(n):
                stride = 2 if (stage > 0 and b == 0) else 1
                layers.append(_BasicBlock(channels, out, stride, norm))
                channels = out
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class MLP(nn.Module):
    """Flatten, then Linear -> ReLU (-> Dropout) per hidden layer, then a linear head."""

    def __init__(self, num_classes=10, input_shape=(1, 28, 28), hidden=(256, 128), dropout=0.0):
        super().__init__()
        try:
            in_features = 1
            for s in input_shape:
                in_features *= int(s)
            hidden = [int(h) for h in hidden]
        except (TypeError, ValueError):
            raise ValueError("input_shape and hidden must be sequences of positive integers") from None
        if in_features < 1 or any(h < 1 for h in hidden):
            raise ValueError("input_shape and hidden must hold positive integers")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        layers = [nn.Flatten()]
        size = in_features
        for h in hidden:
            layers += [nn.Linear(size, h), nn.ReLU(inplace=True)]
            if dropout > 0:
                layers.append(nn.Dropout(float(dropout)))
            size = h
        layers.append(nn.Linear(size, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


# --- helpers ---------------------------------------------------------------------------

class _BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, norm):
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=bias)
        self.n1 = _norm(norm, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=bias)
        self.n2 = _norm(norm, cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=bias), _norm(norm, cout))

    def forward(self, x):
        out = F.relu(self.n1(self.conv1(x)), inplace=True)
        out = self.n2(self.conv2(out))
        return F.relu(out + self.shortcut(x), inplace=True)


def _conv_block(cin, cout, k, separable, norm):
    bias = norm == "none"
    if separable:
        convs = [nn.Conv2d(cin, cin, k, padding=k // 2, groups=cin, bias=bias),
                 nn.Conv2d(cin, cout, 1, bias=bias)]
    else:
        convs = [nn.Conv2d(cin, cout, k, padding=k // 2, bias=bias)]
    return nn.Sequential(*convs, _norm(norm, cout), nn.ReLU(inplace=True))


def _norm(norm, channels):
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    if norm == "group":
        groups = next(g for g in (8, 4, 2, 1) if channels % g == 0)
        return nn.GroupNorm(groups, channels)
    return nn.Identity()


def _check_norm(norm):
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {norm!r}")


def _check_int(label, value, minimum=None, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{label} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{label} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{label} must be <= {maximum}, got {value}")
