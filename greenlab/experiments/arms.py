"""Measuring several arms in sequence, fairly: the one place where every arm is warmed up.

The first thing measured in a fresh process pays one-off costs (imports, kernel selection,
allocator growth, a notebook kernel's first-call work); measured first and alone, it looks
costlier than it is (lesson 05 once read a 25 k-parameter MLP at 160 % of the energy of one 23
times larger). Every helper that measures two or more arms one after another goes through here:

    results = measure_arms({"small": run_small, "large": run_large}, repeats=3)

``warm_up`` runs each arm (at least once, results discarded) before any arm is measured;
``measure_arms`` then measures them in rounds whose order rotates, so no arm is always first.
``train_each`` trains several models in turn this way (a short warm-up run of each first), and
``warmup_config`` is the short training run that warms an arm up (``WARMUP_STEPS`` steps).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

from greenlab.base import progress, validation
from greenlab.energy.measure import ShortWindowWarning
from greenlab.training.config import TrainConfig
from greenlab.training.loop import train

WARMUP_STEPS = 3  # optimizer steps of a warm-up training run: every code path once, little energy


def warm_up(arms: dict, rounds: int = 1) -> None:
    """Call every arm (``{name: callable()}``) ``rounds`` times (at least 1), in order, and
    discard what they return (a ``ShortWindowWarning`` from these discarded windows is not
    shown)."""
    _check_arms(arms)
    rounds = validation.integer("rounds", rounds, low=1)
    with warnings.catch_warnings():  # a discarded window's shortness is nobody's figure: no warning box
        warnings.simplefilter("ignore", ShortWindowWarning)
        for _ in range(rounds):
            for fn in arms.values():
                fn()


def rotated(names, round_index: int) -> list:
    """``names`` rotated by ``round_index``: round r starts with arm r (mod the number of arms)."""
    names = list(names)
    if not names:
        return names
    shift = round_index % len(names)
    return names[shift:] + names[:shift]


def measure_arms(arms: dict, repeats: int = 1, warmup: int = 1, show_progress: bool = True) -> dict:
    """Warm every arm up (``warmup`` rounds, at least 1), then call each ``repeats`` times in
    rounds of rotating order. ``arms``: {name: callable(repeat_index) -> result}. Returns
    {name: [result per repeat]} in the order of ``arms``. ``show_progress``: a line per call
    (which arm and repeat, then its seconds), ticking while a long one runs."""
    _check_arms(arms)
    repeats = validation.integer("repeats", repeats, low=1)
    rounds = validation.integer("warmup", warmup, low=1)
    lines = progress.Steps("greenlab.measure_arms", (rounds + repeats) * len(arms), unit="run", show=show_progress)
    out = {n: [] for n in arms}
    with contextlib.closing(lines):
        warm_up({n: (lambda n=n, fn=fn: stepped(lines, f"warm-up {n} (discarded)", lambda: fn(0)))
                 for n, fn in arms.items()}, rounds=rounds)
        for r in range(repeats):
            for name in rotated(arms, r):
                out[name].append(stepped(lines, f"{name} repeat {r + 1}/{repeats}", lambda: arms[name](r)))
    return out


def stepped(lines, what: str, fn):
    """``fn()`` as one item of ``lines`` (a ``greenlab.base.progress.Steps``): its line opened with
    ``what``, ticking while it runs, closed with its seconds. Returns what ``fn`` returns."""
    lines.start(what)
    with lines.ticking():
        result = fn()
    lines.done()
    return result


def warmup_config(cfg):
    """The short, discarded run that warms up the arm trained with ``cfg`` (a TrainConfig): the
    same model, precision, batch size and loader for ``WARMUP_STEPS`` steps, no target, no
    early stopping."""
    short = {"max_steps": WARMUP_STEPS, "epochs": 1, "target_accuracy": None, "patience": None,
             "label": f"{getattr(cfg, 'label', '') or 'run'} (warm-up, discarded)"}
    if not dataclasses.is_dataclass(cfg):
        return cfg
    names = {f.name for f in dataclasses.fields(cfg)}
    return dataclasses.replace(cfg, **{k: v for k, v in short.items() if k in names})


def train_each(models: dict, data, config, train_fn=None, **train_kwargs) -> dict:
    """Train several models one after another on the same ``data`` and ``config`` (a
    TrainConfig, or a dict of its fields, or {label: TrainConfig} with one per model), each warmed
    up first by a short run (``warmup_config``), so the first is not charged with the process's
    one-off costs.
    ``models``: {label: model_fn} (a callable returning a fresh model). Returns {label: RunResult}.
    ``train_fn``: the training function (default ``greenlab.training.train``)."""

    train_fn = train if train_fn is None else train_fn
    if not isinstance(models, dict) or not models:
        raise validation.ArgumentTypeError("models must be a non-empty dict {label: model_fn}")
    for label, fn in models.items():
        if not callable(fn):
            raise validation.ArgumentTypeError(f"models[{label!r}] must be a callable that returns a fresh "
                                               f"model, got {type(fn).__name__}")
    if isinstance(config, dict) and set(config) == set(models) and all(
            isinstance(c, TrainConfig) for c in config.values()):
        configs = {label: c if c.label else dataclasses.replace(c, label=label) for label, c in config.items()}
    else:
        base = TrainConfig(**config) if isinstance(config, dict) else config
        configs = {label: dataclasses.replace(base, label=label) for label in models}
    kwargs = dict(train_kwargs, log=train_kwargs.get("log", False))
    warm_up({label: (lambda label=label: train_fn(models[label](), data, warmup_config(configs[label]),
                                                   **dict(kwargs, save=False, log=False)))
             for label in models})
    return {label: train_fn(models[label](), data, configs[label], **train_kwargs) for label in models}


def _check_arms(arms) -> None:
    if not isinstance(arms, dict) or not arms:
        raise validation.ArgumentTypeError("arms must be a non-empty dict {name: callable}")
    for name, fn in arms.items():
        if not callable(fn):
            raise validation.ArgumentTypeError(f"arms[{name!r}] must be callable, got {type(fn).__name__}")
