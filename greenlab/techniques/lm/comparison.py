"""Language-model runs against each other (lessons 10 (10_language_model) and 12 (12_adapting_and_serving)):
paired repeats (``compare_lm``, a ``greenlab.experiments.Comparison`` with verdicts and intervals), one tuning
budget for the learning rate (``tune_lr``), and the verdicts in words.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

from greenlab.base import validation
from greenlab.energy.measure import ShortWindowWarning
from greenlab.energy.windows import measure
from greenlab.experiments import Comparison
from greenlab.session.config import seed_everything
from greenlab.techniques.lm.corpus import Corpus
from greenlab.techniques.lm.training import LMConfig, train_lm


def compare_lm(variants: dict, model_fn, corpus: Corpus, repeats: int = 3, warmup: int = 0, device=None):
    """Train every variant ``repeats`` times, paired (repeat r gives every variant seed
    ``config.seed + r``: the same initial weights and batches), in an order rotated each repeat.
    ``variants``: {name: LMConfig}, the first is the baseline; ``model_fn(config)`` returns a fresh
    model for a config. Returns a ``greenlab.experiments.Comparison``."""
    if not isinstance(variants, dict) or not variants:
        raise validation.ArgumentTypeError("variants must be a non-empty dict {name: LMConfig}")
    validation.factory("model_fn (a function config -> model)", model_fn, classes=False)
    validation.instance("corpus", corpus, Corpus,
                        "a greenlab.techniques.lm.corpus.Corpus (greenlab.techniques.lm.corpus.load_corpus())")
    if device is not None:
        validation.device("device", device)
    for name, cfg in variants.items():
        if not isinstance(cfg, LMConfig):
            raise validation.ArgumentTypeError(
                f"variants[{name!r}] must be a greenlab.techniques.lm.training.LMConfig, got {type(cfg).__name__}")
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    warmup = validation.integer("warmup", warmup, low=0, high=100)
    names = list(variants)

    def one(name, r):
        cfg = dataclasses.replace(variants[name], seed=variants[name].seed + r, label=variants[name].label or name)
        seed_everything(cfg.seed)
        return train_lm(model_fn(cfg), corpus, cfg, device=device)

    for _ in range(warmup):
        for name in names:
            one(name, 0)
    repeat_runs, order = [], []
    for r in range(repeats):
        shift = r % len(names)
        repeat_runs.append({})
        for name in names[shift:] + names[:shift]:
            repeat_runs[r][name] = one(name, r)
            order.append(name)
    return Comparison(names, repeat_runs, order)


def plain_verdict(p) -> str:
    """A paired verdict (``greenlab.experiments.Paired``) in words a stakeholder reads, no interval
    figures: "about 23% lower", "no detectable difference", or "too few repeats to tell"."""
    return p.plain()


def explain_bf16(p, native: bool) -> str:
    """Which explanation fits a measured bf16-against-fp32 energy verdict ``p`` (a ``Paired`` of
    bf16 / fp32 joules), on hardware whose bf16 is ``native`` or emulated."""
    if not native:
        return ("bf16 is emulated on this CPU (no AVX-512 BF16 or AMX): each bf16 operation is done in "
                "software, so the measured cost is the emulation's and says nothing about bf16 units.")
    if p.low is None:
        return "too few repeats for an interval: the run cannot say which way bf16 went here."
    if not p.detectable:
        return ("no detectable difference: at this model's size the time bf16 units save in the matrix "
                "multiplications is about what autocast spends casting weights and activations, memory-bound "
                "work they do not speed up.")
    if p.estimate < 1:
        return ("bf16 used less energy: the native bf16 units did the matrix multiplications faster than "
                "fp32 by more than autocast's casts cost, as predicted for hardware with bf16 units.")
    return ("bf16 used more energy although this CPU has bf16 units: the matrices here are small (64 wide "
            "in quick mode), so each matmul is short and the casts autocast adds around it (weights and "
            "activations to bf16 and back, every step) are memory-bound work the bf16 units do not speed up; "
            "on the roofline this model sits on the memory side, where halving the arithmetic's cost buys "
            "little. Larger matrices move it towards the compute side, where bf16 pays.")


def tune_lr(model_fn, corpus: Corpus, config: LMConfig, rates, device=None) -> tuple:
    """The same small tuning budget for any recipe: one run of ``config`` (its steps and seed) per
    learning rate in ``rates``, scored by the final validation loss (a diverging rate scores inf).
    A config that stops at its target keeps that stop in its trials, as the recipe runs, and the
    rate that reached the target in the fewest steps wins (then the lower loss); rates that missed
    it rank after those that reached it. ``model_fn(config)`` returns a fresh model. Returns (best
    rate, {rate: LMRun or None}, joules spent on tuning: the bill of the search itself, read in one
    window around all its trials (their set-up and a diverged trial's steps included), so every
    recipe's search is measured the same way and none rests on trial windows too short to read).
    The trials skip ``config.score_batches`` (a yardstick for comparing finished runs, which no
    ranking here uses)."""
    rates = [validation.number("rate", r, low=0, high=10, low_open=True) for r in rates]
    if not rates:
        raise ValueError("rates must hold at least one learning rate")
    runs = {}
    # one window around the whole search: what every trial cost, its set-up and a diverged trial's steps
    # included, the same way for any recipe; the trials' own (possibly short) windows are not summed
    with measure(f"{config.label or 'tune_lr'} search") as window:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ShortWindowWarning)
            for rate in rates:
                cfg = dataclasses.replace(config, lr=rate, score_batches=None)  # the search ranks by val_loss
                seed_everything(cfg.seed)
                try:
                    runs[rate] = train_lm(model_fn(cfg), corpus, cfg, device=device)
                except FloatingPointError:  # a diverged trial scores inf
                    runs[rate] = None
    spent = window.result.joules
    def score(rate):
        run = runs[rate]
        if run is None:
            return (math.inf, math.inf)
        reached = config.stop_at_target and run.steps_to_target is not None
        return (run.steps_to_target if reached else math.inf, run.val_loss)

    best = min(rates, key=score)  # min keeps the first of equals
    return best, runs, spent
