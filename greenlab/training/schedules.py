"""The optimizer and learning-rate schedule a ``TrainConfig`` names, with a callable schedule
checked at every step (a nonsense multiplier stops the run instead of training on)."""

from __future__ import annotations

import math
import numbers

import torch

from greenlab.training.callbacks import StopTraining
from greenlab.training.config import MAX_LR

def make_optimizer(cfg, model):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def make_scheduler(cfg, optimizer, total_steps):
    sched = cfg.lr_schedule
    lrs = torch.optim.lr_scheduler
    if sched is None or sched == "constant":
        return None
    if callable(sched):
        return lrs.LambdaLR(optimizer, _checked_schedule(sched))
    if sched == "step":
        return lrs.StepLR(optimizer, step_size=cfg.lr_step_size, gamma=cfg.lr_gamma)
    if sched == "cosine":
        return lrs.CosineAnnealingLR(optimizer, T_max=max(1, total_steps))
    warm = cfg.warmup_steps

    def warmup_linear(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))

    return lrs.LambdaLR(optimizer, warmup_linear)


class LrScheduleError(StopTraining, ValueError):
    """A callable ``lr_schedule`` returned something other than a finite multiplier >= 0.
    Before training it is raised (a ValueError); during training it stops the run (status
    "stopped", the reason in the message), so the work done so far is kept."""


def _checked_schedule(fn):
    """Wrap a callable ``lr_schedule`` so a negative, NaN or non-numeric multiplier stops the run
    instead of training at a nonsense learning rate. (A plain function, so LambdaLR's
    state_dict stores nothing for it and checkpoints stay loadable.)"""

    def checked(step):
        value = fn(step)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or not 0 <= value <= MAX_LR:
            raise LrScheduleError(f"lr_schedule({step}) returned {value!r}; it must return a finite "
                                  f"multiplier of lr in [0, {MAX_LR:g}]")
        return value

    return checked
