"""A/B comparisons: paired repeats, spread, confidence intervals and verdicts.

    cmp = gl.compare({"fp32": cfg_a, "bf16": cfg_b}, model_fn=make_model, data=ds, repeats=3)
    print(cmp)                            # a plain table
    cmp.verdict("bf16", "fp32", "joules")  # "bf16 is 23% lower in energy than fp32 (95% CI 15–31%)"
    print(cmp.stakeholder_summary())

Runs are *paired*: repeat r gives every variant the same seed (so the same initial weights,
sample order and augmentations), and the verdicts compare each variant with the baseline within
a repeat (a t-interval on the log of the per-repeat ratios), so noise shared by a repeat cancels.
Schedule evaluations in samples (``TrainConfig(eval_every_samples=...)``) when variants differ in
batch size, so that every variant is checked after the same amount of data.

``equal_accuracy_saving`` states a saving only beside the accuracy it was bought at; "as good as"
is said only by ``equivalence`` (two one-sided tests within a stated margin, ``Equivalence.words()``);
energy to a target exists only for the repeats that reached it (``to_target``, ``target_ratio``);
a baseline at chance compares no accuracy (``accuracy_verdict``). An energy
verdict built on windows too short for their meters says "not measurable at this size"
(``window_short``), and every helper that measures arms in sequence warms each up first
(``arms``: ``warm_up``, ``measure_arms``, ``train_each``); ``sizing`` says how much work fills a
readable window (``min_window_seconds``, ``repeats_to_fill``, ``epochs_to_fill``).

The ``greenlab run`` command that drives it is ``greenlab.cli.run``.

The package (layer ``experiments``: it imports ``training`` and the layers below): ``stats``
(summaries and t-intervals), ``verdicts`` (``Paired``, ``paired``, ``Saving``, ``Equivalence``,
``ToTarget``, ``AboveChance``), ``arms`` (every arm warmed up, in one place), ``sizing`` (work
that fills a readable window), ``runner`` (``compare``), ``comparison`` (``Comparison``) and
``presentation`` (how its figures are written).
"""

from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL, Stat, summarize, t_quantile_975
from greenlab.experiments.verdicts import (
    CHANCE_MARGIN,
    EQUIVALENCE_LEVEL,
    AboveChance,
    AccuracyVerdict,
    Equivalence,
    TargetNotReached,
    ToTarget,
    above_chance,
    accuracy_verdict,
    equivalence,
    target_ratio,
    to_target,
    ENERGY_METRICS,
    METRIC_WORDS,
    METRICS,
    NOT_MEASURABLE,
    Paired,
    Saving,
    equal_accuracy_saving,
    paired,
    short_flags,
    window_short,
)
from greenlab.experiments.sizing import FILL_MARGIN, epochs_to_fill, min_window_seconds, repeats_to_fill
from greenlab.experiments.arms import WARMUP_STEPS, measure_arms, rotated, train_each, warm_up, warmup_config
from greenlab.experiments.presentation import CLIPPED_NOTE
from greenlab.experiments.comparison import Comparison
from greenlab.experiments.runner import PARTIAL_STATUSES, compare

__all__ = ["CHANCE_MARGIN", "CLIPPED_NOTE", "ENERGY_METRICS", "EQUIVALENCE_LEVEL", "FILL_MARGIN", "METRICS",
           "METRIC_WORDS", "MIN_REPEATS_FOR_INTERVAL", "NOT_MEASURABLE", "PARTIAL_STATUSES", "WARMUP_STEPS",
           "AboveChance", "AccuracyVerdict", "Comparison", "Equivalence", "Paired", "Saving", "Stat",
           "TargetNotReached", "ToTarget", "above_chance", "accuracy_verdict", "compare", "epochs_to_fill",
           "equal_accuracy_saving", "equivalence", "measure_arms", "min_window_seconds", "paired",
           "repeats_to_fill", "rotated", "short_flags", "summarize", "t_quantile_975", "target_ratio",
           "to_target", "train_each", "warm_up", "warmup_config", "window_short"]
