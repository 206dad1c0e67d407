"""Knowledge distillation and transfer learning (lesson 06).

- ``distill``: knowledge distillation (Hinton, Vinyals and Dean, 2015, "Distilling the Knowledge
  in a Neural Network", arXiv:1503.02531), measured with ``greenlab.energy.measure``.
- ``fine_tune``: a pretrained model with a new head, its features frozen or not.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import validation
from greenlab.energy import measure
from greenlab.training.accuracy import accuracy
from greenlab.training.data import DeviceLoader


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      targets: torch.Tensor, temperature: float = 4.0, alpha: float = 0.5) -> torch.Tensor:
    """Hinton et al. (2015) loss: ``alpha * T^2 * KL(softmax(t/T) || softmax(s/T))
    + (1 - alpha) * cross_entropy(s, targets)``. The T^2 keeps the soft term's gradients on the
    same scale as the hard term's when T changes."""
    temperature = validation.number("temperature", temperature, low=0, high=1e3, low_open=True)
    alpha = validation.number("alpha", alpha, low=0, high=1)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.log_softmax(teacher_logits / temperature, dim=1),
                    reduction="batchmean", log_target=True)
    hard = F.cross_entropy(student_logits, targets)
    return alpha * temperature ** 2 * soft + (1.0 - alpha) * hard


@dataclass
class DistillResult:
    """A distillation run: the trained student, time (s), energy (J) and per-step history."""

    student: nn.Module
    steps: int
    samples: int
    seconds: float
    joules: float
    accuracy: float | None
    teacher_accuracy: float | None
    energy: object  # greenlab.energy Measurement (with sources and whether it is an estimate)
    history: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"steps": self.steps, "samples": self.samples, "seconds": self.seconds,
                "joules": self.joules, "accuracy": self.accuracy,
                "teacher_accuracy": self.teacher_accuracy, "energy": self.energy.to_dict(),
                "history": list(self.history), "config": dict(self.config)}


def distill(teacher: nn.Module, student: nn.Module, data, config=None, temperature: float = 4.0,
            alpha: float = 0.5, device=None, loss_fn=None) -> DistillResult:
    """Train a copy of ``student`` to match ``teacher``'s softened outputs and the labels.

    ``data``: a greenlab ``Dataset`` (``train_x``/``train_y``, tested on ``test_x``/``test_y``).
    ``config``: a ``TrainConfig`` (uses ``batch_size``, ``lr``, ``epochs``, ``max_steps``, ``seed``)
    or None for defaults. The teacher runs in eval mode without gradients; the whole loop,
    teacher forward passes included, is one ``greenlab.energy.measure`` window.
    ``loss_fn(student_logits, teacher_logits, targets, temperature, alpha)``: the loss to train
    with (default ``distillation_loss``), e.g. a learner's own.
    """
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    loss_of = distillation_loss if loss_fn is None else loss_fn
    if not callable(loss_of):
        raise ValueError(f"loss_fn must be a function, got {loss_fn!r}")
    opts = _loop_options(config)
    dev = torch.device(device) if device is not None else _model_device(teacher)
    teacher_was_training = teacher.training
    teacher = teacher.to(dev).eval()
    student = copy.deepcopy(student).to(dev).train()
    torch.manual_seed(opts["seed"])
    optimizer = torch.optim.SGD(student.parameters(), lr=opts["lr"], momentum=0.9)
    loader = DeviceLoader(data.train_x, data.train_y, opts["batch_size"], shuffle=True,
                          device=dev, seed=opts["seed"])
    history, step, samples = [], 0, 0

    window = measure("distill")
    with window:
        for _epoch in range(opts["epochs"]):
            for xb, yb in loader:
                with torch.no_grad():
                    teacher_logits = teacher(xb)
                loss = loss_of(student(xb), teacher_logits, yb, float(temperature), float(alpha))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                step += 1
                samples += xb.shape[0]
                history.append({"step": step, "samples": samples, "loss": float(loss.detach())})
                if opts["max_steps"] is not None and step >= opts["max_steps"]:
                    break
            if opts["max_steps"] is not None and step >= opts["max_steps"]:
                break
    result = window.result
    student.eval()
    teacher_accuracy = _accuracy(teacher, data, dev)
    teacher.train(teacher_was_training)
    return DistillResult(student=student, steps=step, samples=samples, seconds=result.seconds,
                         joules=result.joules, accuracy=_accuracy(student, data, dev),
                         teacher_accuracy=teacher_accuracy, energy=result, history=history,
                         config={**opts, "temperature": float(temperature), "alpha": float(alpha)})


def fine_tune(model: nn.Module, new_num_classes: int, freeze_features: bool = True) -> nn.Module:
    """A copy of ``model`` with a fresh classification head for ``new_num_classes`` classes
    (the last ``nn.Linear`` is replaced). ``freeze_features=True`` sets ``requires_grad=False``
    on every other parameter, so only the head trains (normalisation statistics still update
    in train mode; call ``.eval()`` on the features to freeze those too)."""
    if isinstance(new_num_classes, bool) or not isinstance(new_num_classes, int) or new_num_classes < 2:
        raise ValueError(f"new_num_classes must be an integer >= 2, got {new_num_classes!r}")
    adapted = copy.deepcopy(model)
    last = None
    for name, module in adapted.named_modules():
        if isinstance(module, nn.Linear):
            last = name
    if last is None:
        raise ValueError(f"{type(model).__name__} has no nn.Linear head to replace")
    parent, attr = _parent_of(adapted, last)
    old = getattr(parent, attr)
    head = nn.Linear(old.in_features, new_num_classes, bias=old.bias is not None)
    head.to(device=old.weight.device, dtype=old.weight.dtype)
    setattr(parent, attr, head)
    if freeze_features:
        for p in adapted.parameters():
            p.requires_grad = False
        for p in head.parameters():
            p.requires_grad = True
    return adapted


def _loop_options(config) -> dict:
    defaults = {"batch_size": 128, "lr": 0.05, "epochs": 1, "max_steps": None, "seed": 0}
    if config is None:
        return defaults
    opts = {k: getattr(config, k, v) for k, v in defaults.items()}
    if opts["lr"] is None:
        opts["lr"] = defaults["lr"]
    return opts


def _accuracy(model: nn.Module, data, device, batch_size: int = 512) -> float | None:
    x, y = getattr(data, "test_x", None), getattr(data, "test_y", None)
    if x is None or y is None or len(y) == 0:
        return None

    return accuracy(model, x, y, batch_size=batch_size, device=device)


def _parent_of(model: nn.Module, dotted: str):
    *path, attr = dotted.split(".")
    parent = model
    for part in path:
        parent = getattr(parent, part)
    return parent, attr


def _model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
