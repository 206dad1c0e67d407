"""Batch-size and learning-rate schedules (lessons 02 (02_gradient_accumulation) and 03 (03_batch_sizing)).

- Batch-size schedules for ``TrainConfig.batch_schedule``: ``constant``, ``stepwise``, ``ramp``,
  ``on_plateau``; learning-rate helpers ``linear_scaling_lr``, ``warmup``, ``goyal_warmup``
  (Goyal et al., 2017) as step -> multiplier callables for ``TrainConfig.lr_schedule``.
- ``batch_growth_vs_lr_decay``: the two configurations of Smith et al. (2018) for ``gl.compare``;
  ``grow_batch_then_decay`` and ``schedule_config``: their hybrid, per epoch.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from greenlab.base import validation
from greenlab.techniques.batching.inputs import _check_epoch, _check_positive_int


class Constant:
    """Batch size ``size`` at every epoch."""

    def __init__(self, size: int):
        self.size = _check_positive_int("size", size)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        return self.size

    def __repr__(self) -> str:
        return f"constant({self.size})"


class Stepwise:
    """Batch size from a table {first epoch: size}; each size holds until the next key."""

    def __init__(self, sizes: dict):
        if not isinstance(sizes, dict) or not sizes:
            raise ValueError("sizes must be a non-empty dict {epoch: batch size}, e.g. {0: 32, 5: 128}")
        for e, s in sizes.items():
            _check_epoch(e, "sizes: epoch")
            _check_positive_int("sizes: batch size", s)
        if 0 not in sizes:
            raise ValueError(f"sizes needs a batch size for epoch 0, got keys {sorted(sizes)}")
        self.sizes = dict(sorted(sizes.items()))

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        size = self.sizes[0]
        for first, s in self.sizes.items():
            if epoch >= first:
                size = s
        return size

    def __repr__(self) -> str:
        return f"stepwise({self.sizes})"


class Ramp:
    """Batch size growing linearly from ``start`` (epoch 0) to ``end`` (epoch ``epochs`` and after),
    rounded to a multiple of ``multiple_of``."""

    def __init__(self, start: int, end: int, epochs: int, multiple_of: int = 1):
        self.start = _check_positive_int("start", start)
        self.end = _check_positive_int("end", end)
        self.epochs = _check_positive_int("epochs", epochs)
        self.multiple_of = _check_positive_int("multiple_of", multiple_of)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        frac = min(epoch, self.epochs) / self.epochs
        size = self.start + (self.end - self.start) * frac
        size = int(round(size / self.multiple_of)) * self.multiple_of
        return max(self.multiple_of, size)

    def __repr__(self) -> str:
        return f"ramp({self.start}, {self.end}, {self.epochs})"


class OnPlateau:
    """Batch size that grows by ``factor`` (up to ``max_size``) when the loss stops improving.

    It needs the loss, so with ``gl.train`` pass the same object twice:
    ``TrainConfig(batch_schedule=p)`` and ``callbacks=[p]``. Its ``on_eval(state)`` reads the
    mean training loss (``state.mean_loss``, or ``state["loss"]``) at every evaluation (each epoch end, and
    every ``eval_every`` steps if set); ``observe(loss)`` does the same by hand. After ``patience``
    observations without an improvement larger than ``min_delta`` (relative), the size grows by
    ``factor`` and the counter restarts. ``__call__(epoch)`` returns the current size.
    """

    def __init__(self, start: int, factor: float = 2, patience: int = 1, max_size: int = 4096,
                 min_delta: float = 0.0):
        self.size = _check_positive_int("start", start)
        self.factor = validation.number("factor", factor, low=1, low_open=True, high=1e6)
        self.patience = _check_positive_int("patience", patience)
        self.max_size = _check_positive_int("max_size", max_size)
        if max_size < start:
            raise ValueError(f"max_size ({max_size}) must be >= start ({start})")
        self.min_delta = validation.number("min_delta", min_delta, low=0, high=1e6)
        self.best_loss = math.inf
        self.bad_epochs = 0
        self.history = []  # (loss, size after observing it)

    def observe(self, loss: float) -> int:
        """Record one epoch's loss; returns the batch size for the next epoch."""
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            loss = loss.item()
        loss = validation.number("loss", loss)
        if loss < self.best_loss - self.min_delta * abs(self.best_loss if math.isfinite(self.best_loss) else 0):
            self.best_loss = loss
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                self.size = min(self.max_size, int(round(self.size * self.factor)))
                self.bad_epochs = 0
        self.history.append((loss, self.size))
        return self.size

    def on_eval(self, state) -> None:
        """Training-callback hook: observe the mean training loss since the last evaluation
        (``state.mean_loss``; a dict's ``"loss"``). The last step's loss alone is too noisy:
        at an epoch end it is often a small leftover batch."""
        if isinstance(state, dict):
            loss = state.get("loss")
        else:
            loss = getattr(state, "mean_loss", None)
            if loss is None:
                loss = getattr(state, "loss", None)
        if loss is not None:
            self.observe(loss)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        return self.size

    def __repr__(self) -> str:
        return f"on_plateau(size={self.size}, factor={self.factor}, patience={self.patience})"


def constant(size: int) -> Constant:
    """Schedule: the same batch size every epoch."""
    return Constant(size)


def stepwise(sizes: dict) -> Stepwise:
    """Schedule: {first epoch: batch size}, e.g. ``stepwise({0: 32, 3: 128})``."""
    return Stepwise(sizes)


def ramp(start: int, end: int, epochs: int, multiple_of: int = 1) -> Ramp:
    """Schedule: linear growth from ``start`` to ``end`` over ``epochs`` epochs."""
    return Ramp(start, end, epochs, multiple_of)


def on_plateau(start: int, factor: float = 2, patience: int = 1, max_size: int = 4096,
               min_delta: float = 0.0) -> OnPlateau:
    """Schedule: grow the batch by ``factor`` when the loss plateaus (see ``OnPlateau``)."""
    return OnPlateau(start, factor, patience, max_size, min_delta)


def linear_scaling_lr(base_lr: float, base_batch: int, batch: int) -> float:
    """Linear scaling rule (Goyal et al., 2017): lr = base_lr x batch / base_batch."""
    base_lr = validation.number("base_lr", base_lr, low=0, low_open=True)
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("batch", batch)
    lr = base_lr * batch / base_batch
    if not math.isfinite(lr):
        raise ValueError(f"base_lr x batch / base_batch overflows: base_lr={base_lr!r}, batch={batch}")
    return lr


class Warmup:
    """Learning-rate multiplier for ``TrainConfig.lr_schedule`` (a callable step -> multiplier of
    ``lr``): rises linearly from ``start_factor`` at step 0 to 1 at step ``warmup_steps``, then
    stays at 1."""

    def __init__(self, warmup_steps: int, start_factor: float = 0.0):
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
        if isinstance(start_factor, bool) or not isinstance(start_factor, (int, float)) \
                or not 0 <= start_factor <= 1:
            raise ValueError(f"start_factor must be a number in [0, 1], got {start_factor!r}")
        self.warmup_steps, self.start_factor = warmup_steps, float(start_factor)

    def __call__(self, step: int) -> float:
        _check_epoch(step, "step")
        if self.warmup_steps == 0 or step >= self.warmup_steps:
            return 1.0
        return self.start_factor + (1.0 - self.start_factor) * step / self.warmup_steps

    def __repr__(self) -> str:
        return f"warmup({self.warmup_steps}, start_factor={self.start_factor})"


def warmup(warmup_steps: int, start_factor: float = 0.0) -> Warmup:
    """Linear warm-up of the learning rate: step -> multiplier (for ``TrainConfig.lr_schedule``)."""
    return Warmup(warmup_steps, start_factor)


def goyal_warmup(base_batch: int, batch: int, warmup_steps: int) -> Warmup:
    """Gradual warm-up of Goyal et al. (2017) for a large batch: use it with
    ``lr=linear_scaling_lr(base_lr, base_batch, batch)``; the rate starts at ``base_lr`` (the
    multiplier ``base_batch / batch``) and rises linearly to the scaled rate over ``warmup_steps``."""
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("batch", batch)
    if batch < base_batch:
        raise ValueError(f"batch ({batch}) must be >= base_batch ({base_batch}) for a warm-up")
    return Warmup(warmup_steps, start_factor=base_batch / batch)


class StepDecay:
    """Learning-rate multiplier (step -> multiplier): divided by ``factor`` at each milestone step."""

    def __init__(self, milestone_steps, factor: float):
        if isinstance(milestone_steps, (str, bytes)) or not hasattr(milestone_steps, "__iter__"):
            raise validation.ArgumentTypeError(f"milestone_steps must be a list of steps, got {milestone_steps!r}")
        self.milestone_steps = sorted(validation.integer("milestone_steps entries", m, low=0)
                                      for m in milestone_steps)
        self.factor = validation.number("factor", factor, low=0, low_open=True, high=1e6)

    def __call__(self, step: int) -> float:
        passed = sum(1 for m in self.milestone_steps if step >= m)
        return 1.0 / self.factor ** passed

    def __repr__(self) -> str:
        return f"StepDecay({self.milestone_steps}, factor={self.factor})"


def batch_growth_vs_lr_decay(base_config, n_train: int, milestones, factor: float = 5) -> dict:
    """The two configurations of Smith et al. (2018), "Don't decay the learning rate, increase
    the batch size", ready for ``gl.compare``:

    - "lr-decay": constant batch, learning rate divided by ``factor`` at each milestone epoch
      (``lr_schedule`` = ``StepDecay`` on the optimiser steps where those epochs begin);
    - "batch-growth": constant learning rate, batch multiplied by ``factor`` at each milestone.

    Both run ``base_config.epochs`` epochs over ``n_train`` samples, so they see the same data;
    batch growth takes fewer optimiser steps.
    """
    _check_positive_int("n_train", n_train)
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise validation.ArgumentTypeError(f"milestones must be a list of epochs, got {milestones!r}")
    milestones = sorted(validation.integer("milestones entries", m) for m in milestones)
    if not milestones or milestones[0] < 1:
        raise ValueError(f"milestones must be epochs >= 1, got {milestones}")
    if milestones[-1] >= base_config.epochs:
        raise ValueError(f"milestones must be below epochs ({base_config.epochs}), got {milestones}")
    validation.number("factor", factor, low=1, low_open=True, high=1e6)
    per_step = base_config.batch_size * getattr(base_config, "accum_steps", 1)
    steps_per_epoch = math.ceil(n_train / per_step)
    decay = dataclasses.replace(base_config, batch_schedule=None,
                                lr_schedule=StepDecay([m * steps_per_epoch for m in milestones], factor),
                                label="lr-decay")
    sizes = {0: base_config.batch_size}
    for i, m in enumerate(milestones, start=1):
        sizes[m] = int(round(base_config.batch_size * factor ** i))
    growth = dataclasses.replace(base_config, batch_schedule=Stepwise(sizes), lr_schedule="constant",
                                 label="batch-growth")
    return {"lr-decay": decay, "batch-growth": growth}


def grow_batch_then_decay(epoch: int, base_batch: int, base_lr: float, milestones, factor: float,
                          max_batch: int) -> tuple:
    """(batch size, learning rate) for ``epoch`` under Smith et al.'s (2018) hybrid schedule:
    at every milestone epoch reached, the batch grows ``factor`` times while the grown batch
    stays within ``max_batch`` (the memory limit); once it would not, the learning rate is
    divided by ``factor`` instead. The batch is rounded to a whole number of samples."""
    _check_epoch(epoch)
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("max_batch", max_batch)
    if max_batch < base_batch:
        raise ValueError(f"max_batch ({max_batch}) must be at least base_batch ({base_batch})")
    validation.number("base_lr", base_lr, low=0, low_open=True)
    validation.number("factor", factor, low=1, low_open=True, high=1e6)
    batch, lr = base_batch, float(base_lr)
    for m in sorted(_check_epoch(m, "milestones entries") for m in milestones):
        if m > epoch:
            break
        grown = int(round(batch * factor))
        if grown <= max_batch:
            batch = grown
        else:
            lr /= factor
    return batch, lr


def schedule_config(base_config, schedule, n_train: int):
    """``base_config`` with the batch size and learning rate of ``schedule(epoch) -> (batch, lr)``:
    ``batch_schedule`` per epoch, ``lr`` = the rate of epoch 0 and ``lr_schedule`` the multiplier
    per optimiser step (an epoch of ``n_train`` samples at batch b takes ceil(n_train / b) steps,
    as ``gl.train`` counts them). For ``gl.train`` or ``gl.compare``."""
    _check_positive_int("n_train", n_train)
    if not callable(schedule):
        raise validation.ArgumentTypeError(f"schedule must be a callable epoch -> (batch, lr), got {schedule!r}")
    plan = [schedule(e) for e in range(base_config.epochs)]
    for e, (b, lr) in enumerate(plan):
        _check_positive_int(f"schedule({e}) batch", b)
        validation.number(f"schedule({e}) lr", lr, low=0, low_open=True)
    accum = getattr(base_config, "accum_steps", 1)
    first_steps, step = [], 0
    for b, _ in plan:
        first_steps.append(step)
        step += math.ceil(n_train / (b * accum))
    lr0 = float(plan[0][1])
    multipliers = [lr / lr0 for _, lr in plan]
    sizes = {e: b for e, (b, _) in enumerate(plan)}
    return dataclasses.replace(base_config, lr=lr0, batch_schedule=Stepwise(sizes),
                               lr_schedule=_EpochMultiplier(first_steps, multipliers))


class _EpochMultiplier:
    """Step -> learning-rate multiplier that is constant within each epoch."""

    def __init__(self, first_steps, multipliers):
        self.first_steps, self.multipliers = list(first_steps), list(multipliers)

    def __call__(self, step: int) -> float:
        import bisect

        return self.multipliers[max(0, bisect.bisect_right(self.first_steps, step) - 1)]

    def __repr__(self) -> str:
        return f"per-epoch lr multipliers {[round(m, 4) for m in self.multipliers]}"
