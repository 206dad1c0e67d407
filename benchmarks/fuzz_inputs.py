"""Fuzz greenlab's public entry points with bad inputs and count how each was answered.

    python benchmarks/fuzz_inputs.py                 # CI size: 6 inputs per entry point
    python benchmarks/fuzz_inputs.py --examples 40   # the large run
    python benchmarks/fuzz_inputs.py --only 'lessons 11, 13-15'   # the entry points added for lessons 11, 13-15
    python benchmarks/fuzz_inputs.py --only every    # NaN, inf, -1, a wrong type, "", 10**12 on each
                                                     # parameter of everything gl.* exports
    python benchmarks/fuzz_inputs.py --only check.   # every gl.check checker and helper
    python benchmarks/fuzz_inputs.py --only course   # the course tools, as their command lines
    python benchmarks/fuzz_inputs.py --only rapl     # (or nvml, apple, amd): the vendor energy sources

The checkers are given wrong answers (functions that raise, return NaN, None, wrong shapes,
objects that equal anything or break on use) and must fail the check with a message; passing
one is a silent acceptance, raising for it a crash. The vendor sources read fake counters that
give impossible readings, which must leave the window incomplete. The course tools run in a
scratch folder and must exit non-zero naming the option; exit 0 on a bad value is silent.

Every input is bad by construction: exactly one argument of an otherwise valid call is replaced
by a value outside its accepted range (wrong type, NaN/inf, negative, too large, an unknown name,
a whole object of the wrong kind: a model where a corpus goes, a tensor where a model goes, a
list of None as energy sources), drawn by hypothesis (derandomized, so a run is reproducible).
The row "extreme together" holds calls whose arguments are each in range but together are not
(tokens per batch, parameter counts, an empty validation split, overflowing break-evens,
lr x weight_decay >= 1). Each call is classified:

- ``clear``: a ValueError or TypeError whose message names the argument;
- ``unnamed``: a ValueError or TypeError that does not name it;
- ``wrong-type``: any other exception (KeyError, AttributeError, OverflowError, ...);
- ``silent``: no error at all, so a bad input produced a result (silently wrong);
- ``legitimate``: a standard bad value of the enumerated pass that is in fact a valid input for
  that argument, accepted on purpose (``LEGITIMATE`` says why for each).

Prints a table per entry point and the totals; exits 1 when any input was not ``clear``.
``tests/test_properties.py`` runs the CI size.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUTCOMES = ("clear", "legitimate", "unnamed", "wrong-type", "silent")


# --- bad values, by what the argument accepts -------------------------------------------------

_junk = st.one_of(st.text(max_size=4), st.lists(st.integers(), max_size=2), st.just(object()),
                  st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=5))
_non_finite = st.sampled_from([math.nan, math.inf, -math.inf])


def number(low=None, high=None, low_open=False, high_open=False, optional=False):
    """Values outside a real interval (and non-numbers)."""
    options = [_non_finite, _junk, st.booleans()]
    if not optional:
        options.append(st.none())
    if low is not None:
        below = st.floats(max_value=low, allow_nan=False, allow_infinity=False)
        options.append(below if low_open else below.filter(lambda v: v < low))
    if high is not None:
        above = st.floats(min_value=high, allow_nan=False, allow_infinity=False)
        options.append(above if high_open else above.filter(lambda v: v > high))
    return st.one_of(options)


def integer(low=None, high=None, optional=False):
    """Values outside an integer range (and non-integers: floats, strings, booleans)."""
    options = [st.floats(allow_nan=True, allow_infinity=True), _junk, st.booleans()]
    if not optional:
        options.append(st.none())
    if low is not None:
        options.append(st.integers(max_value=low - 1))
    if high is not None:
        options.append(st.integers(min_value=high + 1, max_value=high + 2**70))
    return st.one_of(options)


def flag():
    """Anything but True/False."""
    return st.one_of(st.integers(), st.text(max_size=3), st.none(), st.floats())


def name_not_in(valid):
    """Strings that are not an accepted name (and non-strings)."""
    return st.one_of(st.text(max_size=6).filter(lambda s: not valid(s)), st.integers(), st.none(),
                     st.lists(st.text(max_size=2), max_size=2))


def not_a(*kinds):
    """Objects of the wrong kind for an argument that takes a model, tensor, path or callable
    (``kinds``: the types it takes, left out of the draw: a string is no bad value for a name)."""
    out = st.one_of(st.integers(), st.floats(), st.text(max_size=4), st.none(), st.just(object()))
    return out.filter(lambda v: not isinstance(v, kinds)) if kinds else out


def wrong_object(*extra, optional=False, without=()):
    """Whole objects of the wrong kind that look plausible: a model where a corpus goes, a
    tensor where a model goes, an optimizer, a dict, a list of None, a class instead of an
    instance (``extra``: more such objects for this argument; ``without``: kinds that are right
    for it)."""
    import torch

    layer = torch.nn.Linear(2, 2)
    options = [torch.zeros(2, 2), layer, torch.optim.SGD(layer.parameters(), lr=0.1), {"a": 1},
               [None], [object()], torch.nn.Linear, "model", 3, object(), *extra]
    if not optional:
        options.append(None)
    return st.sampled_from([o for o in options if not (without and isinstance(o, without))])


# --- the entry points --------------------------------------------------------------------------

@dataclass
class EntryPoint:
    name: str
    call: object  # function(**kwargs)
    base: dict  # a valid call
    bad: dict  # argument -> strategy of bad values
    aliases: dict = field(default_factory=dict)  # argument -> extra words that count as naming it
    paths: tuple = ()  # path arguments: an OSError naming the path is the right answer for them


def _region_ok(text):
    from greenlab.impact import carbon

    try:
        carbon.intensity(text)
        return True
    except (ValueError, TypeError):
        return False


def entry_points(tmp: Path) -> list[EntryPoint]:
    """The entry points fuzzed, each with a valid base call (``tmp``: a scratch folder)."""
    import torch

    import greenlab as gl
    from fakes import SlopeSource
    from greenlab.techniques import batching, compress, profiling, search
    from greenlab.impact import carbon, report, scaling, scheduling
    from greenlab.training import data, models
    from greenlab import experiments
    from greenlab.course import leaderboard
    from greenlab.base import results, units

    def tiny_data():
        g = torch.Generator().manual_seed(0)
        x = torch.randn(24, 1, 4, 4, generator=g)
        y = torch.arange(24) % 3
        return data.Dataset("tiny", x, y, x[:8].clone(), y[:8].clone(), num_classes=3, source="generated")

    def mlp():
        return models.build("mlp", input_shape=(1, 4, 4), hidden=(8,), num_classes=3)

    ds = tiny_data()
    board = leaderboard.Leaderboard(tmp / "board.json")
    board.add("seed", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.1)
    ckpt_model = torch.nn.Linear(4, 3)
    ckpt = profiling.save_checkpoint(tmp / "ck.pt", ckpt_model, step=1)
    profile = scheduling.from_values([100.0 + i for i in range(24)])
    cfg = gl.TrainConfig

    def train_call(**kw):
        return gl.train(kw.pop("model"), kw.pop("data"), kw.pop("config"), device="cpu", log=False,
                        sources=[SlopeSource()], save=False, **kw)

    def tc(**kw):
        return cfg(**kw)

    def measure_idle(**kw):
        return gl.measure_idle(sources=[SlopeSource()], **kw)

    nonneg = dict(low=0)
    pos = dict(low=0, low_open=True)
    frac01 = dict(low=0, high=1)
    eps = []

    def add(name, call, base, bad, aliases=None, paths=()):
        eps.append(EntryPoint(name, call, base, bad, aliases or {}, paths))

    # training configuration: one entry point per group of fields (each a distinct check)
    add("TrainConfig(sizes)", tc, {},
        {k: integer(1, 2**40) for k in ("batch_size", "accum_steps", "eval_batch_size", "lr_step_size")})
    add("TrainConfig(epochs/steps)", tc, {},
        {"epochs": integer(1, 100_000), "max_steps": integer(1, 2**40, optional=True),
         "eval_every": integer(1, 2**40, optional=True), "patience": integer(1, 2**40, optional=True),
         "warmup_steps": integer(0, 2**40)})
    add("TrainConfig(optimiser)", tc, {},
        {"lr": number(0, 100, low_open=True), "momentum": number(0, 1, high_open=True),
         "weight_decay": number(**frac01), "lr_gamma": number(0, 1, low_open=True),
         "grad_clip": number(**pos, optional=True)})
    add("TrainConfig(flags)", tc, {},
        {k: flag() for k in ("stop_at_target", "eval_autocast", "channels_last", "compile", "pin_memory")})
    add("TrainConfig(names)", tc, {}, {"precision": name_not_in(lambda s: s in ("fp32", "bf16", "fp16")),
                                       "optimizer": name_not_in(lambda s: s in ("sgd", "adam", "adamw")),
                                       "loader": name_not_in(lambda s: s in ("device", "dataloader")),
                                       "region": name_not_in(_region_ok)})
    add("TrainConfig(target/seed)", tc, {}, {"target_accuracy": number(0, 1, low_open=True, optional=True),
                                             "seed": integer(0, 2**63 - 1), "num_workers": integer(0, 1024),
                                             "prefetch_factor": integer(1, 2**40, optional=True)})
    add("train", train_call, {"model": mlp(), "data": ds, "config": cfg(batch_size=8)},
        {"model": not_a(), "data": not_a(), "config": not_a().filter(lambda v: v is not None),  # None: defaults
         "callbacks": st.one_of(st.lists(st.one_of(st.integers(), st.text(max_size=2)), min_size=1, max_size=2),
                                st.integers()),
         "stop_event": st.one_of(st.integers(), st.text(max_size=2))})
    # carbon
    add("carbon.intensity", carbon.intensity, {"region": "WORLD"}, {"region": name_not_in(_region_ok)})
    add("carbon.co2e_g", carbon.co2e_g, {"joules": 1.0}, {"joules": number(**nonneg), "region": name_not_in(_region_ok),
                                                         "pue": number(1, optional=True)})
    add("carbon.compare_regions", carbon.compare_regions, {"joules": 1.0, "codes": ["FRA"]},
        {"joules": number(**nonneg),
         "codes": st.one_of(st.text(max_size=3), st.integers(), st.just([]),
                            st.lists(st.integers(), min_size=1, max_size=2)),
         "pue": number(1, optional=True)})
    add("carbon.equivalents", carbon.equivalents, {"g_co2e": 1.0}, {"g_co2e": number(**nonneg)})
    add("carbon.format_mass", carbon.format_mass, {"grams": 1.0}, {"grams": number(**nonneg)})
    # units
    for fname, arg in (("joules_to_kwh", "joules"), ("kwh_to_joules", "kwh"), ("joules_to_wh", "joules"),
                       ("wh_to_joules", "wh"), ("g_to_kg", "grams"), ("kg_to_g", "kilograms"),
                       ("format_energy", "joules")):
        add(f"units.{fname}", getattr(units, fname), {arg: 1.0}, {arg: number()})  # differences may be < 0
    # batching
    add("batching.linear_scaling_lr", batching.linear_scaling_lr, {"base_lr": 0.1, "base_batch": 32, "batch": 64},
        {"base_lr": number(**pos), "base_batch": integer(1), "batch": integer(1)})
    add("batching.find_max_batch", batching.find_max_batch,
        {"model": torch.nn.Linear(4, 3), "input_shape": (4,), "memory_budget_bytes": 10**6, "limit": 8},
        {"memory_budget_bytes": number(**pos), "start": integer(1), "limit": integer(1),
         "precision": name_not_in(lambda s: s in ("fp32", "bf16", "fp16")), "model": not_a(),
         "num_classes": integer(2, optional=True)})
    add("batching.constant", batching.constant, {"size": 8}, {"size": integer(1)})
    add("batching.stepwise", batching.stepwise, {"sizes": {0: 8}},
        {"sizes": st.one_of(st.just({}), st.just({1: 8}),
                            st.dictionaries(st.integers(max_value=-1), st.integers(), min_size=1, max_size=1),
                            st.just({0: 0}), st.integers(), st.text(max_size=2))})
    add("batching.ramp", batching.ramp, {"start": 8, "end": 64, "epochs": 4},
        {"start": integer(1), "end": integer(1), "epochs": integer(1), "multiple_of": integer(1)})
    add("batching.on_plateau", batching.on_plateau, {"start": 8},
        {"start": integer(1), "factor": number(1, 1e6, low_open=True), "patience": integer(1), "max_size": integer(8),
         "min_delta": number(0, 1e6)})
    add("batching.warmup", batching.warmup, {"warmup_steps": 10},
        {"warmup_steps": integer(0), "start_factor": number(**frac01)})
    add("batching.goyal_warmup", batching.goyal_warmup, {"base_batch": 32, "batch": 64, "warmup_steps": 10},
        {"base_batch": integer(1), "batch": integer(1), "warmup_steps": integer(0)})
    add("batching.StepDecay", batching.StepDecay, {"milestone_steps": [10], "factor": 2.0},
        {"milestone_steps": st.one_of(st.integers(), st.lists(st.integers(max_value=-1), min_size=1, max_size=2),
                                      st.lists(st.floats(), min_size=1, max_size=1)),
         "factor": number(0, 1e6, low_open=True)})
    add("batching.batch_growth_vs_lr_decay", batching.batch_growth_vs_lr_decay,
        {"base_config": cfg(epochs=4), "n_train": 100, "milestones": [2]},
        {"n_train": integer(1), "milestones": st.one_of(st.just([]), st.just([0]), st.just([9]), st.integers()),
         "factor": number(1, 1e6, low_open=True)})
    # results log and leaderboard
    add("results.append", results.append, {"record": {"a": 1}, "path": tmp / "runs.jsonl"},
        {"record": st.one_of(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
                             st.just({"x": object()})),
         "path": st.one_of(st.just(tmp), st.just(tmp / "ck.pt" / "x.jsonl"), st.integers())},
        paths=("path",))
    add("Leaderboard.add", board.add, {"name": "a", "joules": 1.0, "seconds": 1.0, "accuracy": 0.5, "co2e_g": 0.1},
        {"name": st.one_of(st.just(""), st.just("  "), st.integers(), st.none()), "joules": number(**nonneg),
         "seconds": number(**nonneg), "accuracy": number(**frac01),
         "target_accuracy": number(0, 1, low_open=True, optional=True),
         "co2e_g": number(**nonneg, optional=True), "region": name_not_in(_region_ok),
         "estimated": st.one_of(st.integers(), st.text(max_size=2)),
         "sources": st.one_of(st.integers(), st.text(max_size=2))})
    add("Leaderboard.ranked", board.ranked, {}, {"metric": name_not_in(lambda s: s in leaderboard.METRICS)})
    add("Leaderboard.table", board.table, {}, {"metric": name_not_in(lambda s: s in leaderboard.METRICS),
                                              "limit": integer(0, optional=True)})
    # checkpoints
    add("profiling.save_checkpoint", profiling.save_checkpoint, {"path": tmp / "s.pt", "model": torch.nn.Linear(2, 2)},
        {"path": st.one_of(st.integers(), st.none(), st.floats()), "model": not_a(), "step": integer(0),
         "optimizer": st.one_of(st.integers(), st.text(max_size=2)),
         "note": st.one_of(st.just(object()), st.just(lambda: 1), st.just({1.5: 2}))},
        aliases={"note": ["extra"]})
    add("profiling.load_checkpoint", profiling.load_checkpoint, {"path": ckpt},
        {"path": st.one_of(st.integers(), st.none(), st.just(tmp / "none.pt"), st.just(tmp / "board.json")),
         "model": st.one_of(st.integers(), st.just(torch.nn.Linear(3, 3))),
         "optimizer": st.one_of(st.integers(), st.just(torch.optim.SGD(torch.nn.Linear(3, 3).parameters(), lr=0.1)))},
        aliases={"path": ["checkpoint"]}, paths=("path",))
    add("profiling.CheckpointCallback", profiling.CheckpointCallback, {"path": tmp / "cb.pt"},
        {"every_steps": integer(1)})
    # energy
    add("energy.measure_idle", measure_idle, {"seconds": 0.01}, {"seconds": number(0, 86_400, low_open=True)})
    add("energy.PowerMonitor", gl.PowerMonitor, {"sources": [SlopeSource()]},
        {"hz": number(0, 1000, low_open=True), "window_s": number(0, low_open=True)})
    add("energy.trapezoid_joules", gl.energy.trapezoid_joules, {"times_s": [0.0, 1.0], "watts": [1.0, 1.0]},
        {"times_s": st.one_of(st.just([1.0, 0.0]), st.just([0.0, math.nan]), st.just([0.0]), st.integers()),
         "watts": st.one_of(st.just([1.0, math.nan]), st.just([1.0]), st.just([-1.0, 1.0]), st.integers())})
    # data and models
    add("data.generate", data.generate, {"n_train": 20, "n_test": 10},
        {"name": name_not_in(lambda s: s.strip().lower() in ("synthetic", "fashion-mnist", "cifar10", "fashionmnist",
                                                             "fmnist", "cifar-10", "fashion_mnist", "cifar_10")),
         "n_train": integer(1, 10**6), "n_test": integer(1, 10**6), "seed": integer(0),
         "difficulty": number(0, 100)},  # 0: no pixel noise
        aliases={"name": ["dataset"]})
    add("data.DeviceLoader", data.DeviceLoader, {"x": ds.train_x, "y": ds.train_y, "batch_size": 8},
        {"batch_size": integer(1), "x": not_a(), "y": st.just(ds.train_y[:3]), "shuffle": flag(), "seed": integer(0)})
    add("data.Augment", data.Augment, {}, {"flip": flag(), "crop_padding": integer(0, 64)})
    add("models.flops", models.flops, {"model": mlp(), "input_shape": (1, 4, 4)},
        {"model": not_a(), "input_shape": st.one_of(st.just((0, 4)), st.integers(), st.text(max_size=2)),
         "batch_size": integer(1)})
    add("models.count_params", models.count_params, {"model": mlp()}, {"model": not_a(), "trainable_only": flag()})
    # cost-benefit, scheduling, report, experiments
    add("scaling.gpu", scaling.gpu, {"name": scaling.gpus()[0].name}, {"name": name_not_in(lambda s: False)})
    add("scaling.cost_benefit", scaling.cost_benefit,
        {"gpu_or_name": scaling.gpus()[0].name, "n_devices": 2, "single_device_hours": 1.0, "scaling_efficiency": 0.9},
        {"n_devices": integer(1), "single_device_hours": number(**pos),
         "scaling_efficiency": number(0, 1, low_open=True),
         "region": name_not_in(_region_ok), "pue": number(1, optional=True),
         "price_per_device_hour": number(**nonneg, optional=True)})
    add("scaling.scaling_efficiency", scaling.scaling_efficiency,
        {"t1_seconds": 10.0, "tn_seconds": 6.0, "n_devices": 2},
        {"t1_seconds": number(**pos), "tn_seconds": number(**pos), "n_devices": integer(1)})
    add("scheduling.from_values", scheduling.from_values, {"values": [1.0] * 24},
        {"values": st.one_of(st.just([]), st.lists(st.sampled_from([math.nan, -1.0, math.inf]), min_size=1, max_size=3),
                             st.integers(), st.text(max_size=3))})
    add("scheduling.best_window", scheduling.best_window, {"profile": profile, "hours_needed": 3},
        {"hours_needed": integer(1, 24), "wrap": flag(), "now": integer(0, 23), "profile": not_a()})
    add("scheduling.window_means", scheduling.window_means, {"profile": profile, "hours_needed": 3},
        {"hours_needed": integer(1, 24), "wrap": flag()})
    add("scheduling.load_profile", scheduling.load_profile, {"name": scheduling.profiles()[0]},
        {"name": name_not_in(lambda s: s in scheduling.profiles())})
    add("report.datasheet_efficiency", report.datasheet_efficiency, {},
        {"precision": name_not_in(lambda s: s in ("fp32", "tf32", "bf16", "fp16", "int8"))})
    add("experiments.summarize", experiments.summarize, {"values": [1.0, 2.0]},
        {"values": st.one_of(st.integers(), st.text(max_size=2),
                             st.lists(st.sampled_from(["a", object(), True, 1j]), min_size=1, max_size=3))})
    # (None and non-finite values are documented as missing runs there, so they are not bad input)
    add("experiments.paired", experiments.paired,
        {"variant_values": [1.0, 2.0], "baseline_values": [2.0, 3.0], "metric": "joules"},
        {"variant_values": st.one_of(st.integers(), st.just([1.0]), st.just(["a", 1.0])),
         "baseline_values": st.one_of(st.integers(), st.just([object(), 1.0])),
         "metric": st.one_of(st.integers(), st.none())})
    add("experiments.equal_accuracy_saving", experiments.equal_accuracy_saving,
        {"candidate_joules": 1.0, "baseline_joules": 2.0, "candidate_accuracy": 0.9, "baseline_accuracy": 0.9},
        {"candidate_joules": number(**nonneg), "baseline_joules": number(**pos), "candidate_accuracy": number(**frac01),
         "baseline_accuracy": number(**frac01), "tolerance": number(**frac01)})
    add("experiments.t_quantile_975", experiments.t_quantile_975, {"df": 3}, {"df": integer(1)})
    # compression and search
    add("compress.prune_unstructured", compress.prune_unstructured, {"model": mlp(), "amount": 0.5},
        {"amount": number(0, 1, high_open=True), "model": not_a()})
    add("compress.prune_channels", compress.prune_channels,
        {"model": models.build("cnn", in_channels=1, num_classes=3), "amount": 0.5},
        {"amount": number(0, 1, high_open=True), "model": not_a()})
    add("compress.break_even_inferences", compress.break_even_inferences,
        {"compression_joules": 10.0, "joules_per_inference_before": 2.0, "joules_per_inference_after": 1.0},
        {"compression_joules": number(**nonneg), "joules_per_inference_before": number(**pos),
         "joules_per_inference_after": number(**nonneg)})
    add("compress.distillation_loss", compress.distillation_loss,
        {"student_logits": torch.zeros(2, 3), "teacher_logits": torch.zeros(2, 3),
         "targets": torch.zeros(2, dtype=torch.long)},
        {"temperature": number(0, 100, low_open=True), "alpha": number(**frac01)})
    add("search.break_even", search.break_even, {"search_joules": 10.0, "saved_joules_per_use": 1.0},
        {"search_joules": number(**nonneg), "saved_joules_per_use": number()})  # <= 0: never repaid (inf)
    add("search.spearman", search.spearman, {"a": [1.0, 2.0, 3.0], "b": [1.0, 3.0, 2.0]},
        {"a": st.one_of(st.integers(), st.just([1.0]), st.just([1.0, math.nan, 2.0])),
         "b": st.one_of(st.just([1.0, 2.0]), st.integers())})
    add("search.SearchSpace", search.SearchSpace, {},
        {"depth": st.one_of(st.just(()), st.just((0,)), st.integers()),
         "width": st.one_of(st.just(()), st.just((-1,)), st.text(max_size=2)),
         "num_classes": integer(2)})
    add("search.pareto_front", search.pareto_front, {"points": [{"accuracy": 0.5, "joules": 1.0}]},
        {"points": st.one_of(st.integers(), st.just([{"accuracy": 0.5}]), st.just([1, 2])),
         "objectives": st.one_of(st.just((("accuracy", "up"),)), st.integers(), st.just(()))})
    add("config.setup", gl.setup, {"verbose": False, "device": "cpu"},
        {"seed": integer(0, 2**32 - 1), "quick": st.one_of(st.integers(), st.text(max_size=2)),
         "device": name_not_in(lambda s: s in ("cpu", "cuda")
                               or s.startswith("cuda:")).filter(lambda v: v is not None)})
    add("config.budget", gl.budget, {"full": 10, "quick": 2},
        {"full": st.one_of(st.just(math.nan), st.just(-1)), "quick": st.one_of(st.just(math.nan), st.just(-1))})
    eps += language_model_entry_points(tmp)
    eps += other_new_entry_points(tmp)
    eps += lessons_12_to_15_entry_points(tmp)
    eps += checker_entry_points(tmp)
    eps += vendor_entry_points(tmp)
    eps += face_entry_points(tmp)
    eps += course_tool_entry_points(tmp)
    add("quiz.load", gl.quiz.__module__ and __import__("greenlab.course.quiz", fromlist=["load"]).load,
        {"lesson": "00"},
        {"lesson": name_not_in(lambda s: s in __import__("greenlab.course.quiz", fromlist=["lessons"]).lessons())})
    return eps



def language_model_entry_points(tmp: Path) -> list[EntryPoint]:
    """Entry points of gl.lm, gl.lm_serve, gl.lm_compile, gl.lora and gl.optimizers."""
    import torch

    from fakes import SlopeSource
    from greenlab.techniques import lm
    from greenlab.techniques.lm import compiling as lm_compile, serving as lm_serve, lora
    from greenlab.training import optimizers

    eps = []

    def add(name, call, base, bad, aliases=None, paths=()):
        eps.append(EntryPoint(name, call, base, bad, aliases or {}, paths))

    corpus = lm.load_corpus(max_bytes=4096)
    model = lm.TinyGPT(d_model=8, n_layers=1, n_heads=2, max_seq_len=16)
    cfg = lm.LMConfig(seq_len=8, batch_size=2, steps=1, eval_every=1, eval_batches=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = lm.batch(corpus.train, 8, 2)
    prompts = torch.zeros(1, 2, dtype=torch.long)
    src = [SlopeSource()]
    precision = name_not_in(lambda s: s in lm.PRECISIONS)

    add("lm.load_corpus", lm.load_corpus, {"max_bytes": 4096},
        {"name": name_not_in(lambda s: s in lm.CORPORA), "val_fraction": number(0, 0.5, low_open=True),
         "max_bytes": integer(1024, 2**31, optional=True)})
    add("lm.batch", lm.batch, {"data": corpus.train, "seq_len": 8, "batch_size": 2},
        {"data": wrong_object(), "seq_len": integer(1, corpus.train.numel() - 1), "batch_size": integer(1, 2**31),
         "generator": wrong_object(optional=True), "device": wrong_object(optional=True)})
    add("lm.TinyGPT", lm.TinyGPT, {"d_model": 8, "n_layers": 1, "n_heads": 2, "max_seq_len": 16},
        {"d_model": integer(1, 65536), "n_layers": integer(1, 1024), "n_heads": integer(1, 8),
         "max_seq_len": integer(1, 2**31), "checkpoint": flag(), "vocab": integer(1, 2**20)})
    add("lm.LMConfig", lm.LMConfig, {},
        {"seq_len": integer(1, 2**31), "batch_size": integer(1, 2**31), "steps": integer(1, 2**31),
         "lr": number(0, 10, low_open=True), "fused": flag(), "precision": precision,
         "optimizer_states": name_not_in(lambda s: s in ("fp32", "8bit")), "eval_every": integer(1, 2**31),
         "eval_batches": integer(1, 2**31), "target_loss": number(0, 20, low_open=True, optional=True),
         "seed": integer(0, 2**63 - 1), "label": st.one_of(st.integers(), st.none(), st.just(object()))})
    add("lm.evaluate", lm.evaluate, {"model": model, "corpus": corpus, "seq_len": 8, "batches": 1, "batch_size": 2},
        {"model": wrong_object(), "corpus": wrong_object(corpus.train), "seq_len": integer(1, 16),
         "batches": integer(1, 2**31), "batch_size": integer(1, 2**31), "seed": integer(0, 2**63 - 1),
         "precision": precision})
    add("lm.train_step", lm.train_step, {"model": model, "optimizer": opt, "x": x, "y": y},
        {"model": wrong_object(), "optimizer": wrong_object(), "x": wrong_object(x.float()),
         "y": wrong_object(y.float()), "precision": precision})
    add("lm.train_lm", lm.train_lm, {"model": model, "corpus": corpus, "config": cfg, "sources": src},
        {"model": wrong_object(), "corpus": wrong_object(corpus.train), "config": wrong_object(optional=True),
         "device": name_not_in(lambda s: s.strip().lower() == "cpu").filter(lambda v: v is not None),
         "sources": wrong_object([SlopeSource, None], "rapl", optional=True)})
    add("lm.compare_lm", lm.compare_lm, {"variants": {"a": cfg}, "model_fn": lambda c: model, "corpus": corpus},
        {"variants": wrong_object({}, {"a": {"steps": 1}}), "model_fn": wrong_object(torch.zeros(1)),
         "corpus": wrong_object(), "repeats": integer(1, 1000), "warmup": integer(0, 100),
         "device": name_not_in(lambda s: s.strip().lower() == "cpu").filter(lambda v: v is not None)})
    add("lm.joules_per_token", lm.joules_per_token, {"joules": 1.0, "tokens": 10},
        {"joules": number(0), "tokens": integer(1, 2**62)})
    add("lm.attention_flops", lm.attention_flops, {"seq_len": 8, "d_model": 8, "n_layers": 1},
        {"seq_len": integer(1, 2**31), "d_model": integer(1, 2**31), "n_layers": integer(1, 2**31),
         "batch_size": integer(1, 2**31), "backward": flag()})
    add("lm.train_step_flops", lm.train_step_flops, {"model": model, "seq_len": 8},
        {"model": wrong_object(), "seq_len": integer(1, 16), "batch_size": integer(1, 2**31)})
    add("lm.compile_break_even_steps", lm.compile_break_even_steps,
        {"compile_seconds": 10.0, "eager_step_seconds": 2.0, "compiled_step_seconds": 1.0},
        {"compile_seconds": number(0), "eager_step_seconds": number(0, low_open=True),
         "compiled_step_seconds": number(0, low_open=True)})
    add("lm_compile.measure_compile", lm_compile.measure_compile,
        {"model": model, "corpus": corpus, "config": cfg, "steps": 1, "repeats": 1, "sources": src},
        {"model": wrong_object(), "corpus": wrong_object(corpus.train), "config": wrong_object(optional=True),
         "steps": integer(1, 100_000), "repeats": integer(1, 1000),
         "device": name_not_in(lambda s: s.strip().lower() == "cpu").filter(lambda v: v is not None),
         "sources": wrong_object([None], optional=True),
         "compile_kwargs": st.one_of(st.integers(), st.text(max_size=2), st.just([("mode", "max")]))})
    add("lm_serve.generate", lm_serve.generate, {"model": model, "prompts": prompts, "new_tokens": 2},
        {"model": wrong_object(), "prompts": wrong_object(prompts.float(), prompts[0], prompts + 999, prompts[:0]),
         "new_tokens": integer(1, 14), "kv_cache": flag()})
    add("lm_serve.kv_cache_bytes", lm_serve.kv_cache_bytes, {"model": model, "batch_size": 1, "seq_len": 8},
        {"model": wrong_object(), "batch_size": integer(1, 2**40), "seq_len": integer(1, 2**40),
         "bytes_per_value": integer(1, 2**40)})
    add("lm_serve.measure_generation", lm_serve.measure_generation,
        {"model": model, "prompts": prompts, "new_tokens": 2, "sources": src},
        {"model": wrong_object(), "prompts": wrong_object(prompts.float()), "new_tokens": integer(1, 14),
         "kv_cache": flag(), "repeats": integer(1, 10_000), "sources": wrong_object([None], optional=True),
         "label": st.one_of(st.integers(), st.just(object()), st.just(["a"]))})
    add("lm_serve.compare_generation", lm_serve.compare_generation,
        {"setups": {"a": {"model": model, "prompts": prompts, "new_tokens": 2},
                    "b": {"model": model, "prompts": prompts, "new_tokens": 2}}, "repeats": 1, "sources": src},
        {"setups": wrong_object({}, {"a": {"model": model}}, {"a": 1, "b": 2}), "repeats": integer(1, 1000),
         "sources": wrong_object([None], optional=True)})
    add("lm_serve.quantize_weights_int8", lm_serve.quantize_weights_int8, {"model": model},
        {"model": wrong_object()})
    add("lm_serve.weight_bytes", lm_serve.weight_bytes, {"model": model}, {"model": not_a()})  # any module counts
    add("lm_serve.serving_break_even_tokens", lm_serve.serving_break_even_tokens,
        {"training_joules": 10.0, "joules_per_generated_token": 0.1},
        {"training_joules": number(0), "joules_per_generated_token": number(0, low_open=True)})
    add("lm_serve.generation_flops", lm_serve.generation_flops, {"model": model, "prompts": prompts, "new_tokens": 2},
        {"model": wrong_object(), "prompts": wrong_object(prompts.float()), "new_tokens": integer(1, 14),
         "kv_cache": flag()})
    add("lora.LoRALinear", lora.LoRALinear, {"base": torch.nn.Linear(4, 4)},
        {"base": wrong_object(torch.nn.Conv2d(1, 1, 1), without=(torch.nn.Linear,)), "rank": integer(1, 4),
         "alpha": number(0, low_open=True)})
    add("lora.add_lora", lambda **kw: lora.add_lora(**kw),
        {"model": lm.TinyGPT(d_model=8, n_layers=1, n_heads=2, max_seq_len=16)},
        {"model": wrong_object(torch.nn.Sequential()), "rank": integer(1, 2**31), "alpha": number(0, low_open=True)})
    add("lora.adam_state_bytes", lora.adam_state_bytes, {"trainable_params": 10},
        {"trainable_params": integer(0, 2**62), "state_bytes_per_value": number(0, 8, low_open=True)})
    add("optimizers.adamw", optimizers.adamw, {"params": list(model.parameters()), "lr": 1e-3},
        {"params": wrong_object([], model), "lr": number(0, 10, low_open=True),
         "states": name_not_in(lambda s: s in optimizers.STATES), "weight_decay": number(0, 1)})
    add("optimizers.state_bytes", optimizers.state_bytes, {"optimizer": opt},
        {"optimizer": wrong_object(without=(torch.optim.Optimizer,))})
    return eps


def other_new_entry_points(tmp: Path) -> list[EntryPoint]:
    """Entry points of gl.datacache, gl.magics, gl.hardware and the energy objects."""
    import torch

    from fakes import SlopeSource
    from greenlab.training import datacache
    from greenlab.session import hardware
    from greenlab.widgets import magics
    from greenlab.energy import IdlePower, measure

    eps = []

    def add(name, call, base, bad, aliases=None, paths=()):
        eps.append(EntryPoint(name, call, base, bad, aliases or {}, paths))

    def dataset_name(s):
        try:
            datacache.check_name(s)
            return True
        except (ValueError, TypeError):
            return False

    with measure("fuzz", sources=[SlopeSource()], sync=False) as window:
        pass
    result = window.result
    add("datacache.status", datacache.status, {"name": "fashion-mnist", "root": tmp / "cache"},
        {"name": name_not_in(dataset_name), "root": st.one_of(st.integers(), st.just(object()), st.just(["a"]))},
        aliases={"name": ["dataset"]})
    add("datacache.ensure", datacache.ensure, {"name": "fashion-mnist", "root": tmp / "cache", "network": False},
        {"name": name_not_in(dataset_name), "root": st.one_of(st.integers(), st.just(object())),
         "network": flag(), "timeout_s": number(0, 600, low_open=True), "progress": flag()},
        aliases={"name": ["dataset"]})
    add("datacache.fetch", datacache.fetch, {"name": "fashion-mnist", "root": tmp / "cache"},
        {"name": name_not_in(dataset_name), "timeout_s": number(0, 600, low_open=True), "progress": flag()},
        aliases={"name": ["dataset"]})
    add("datacache.folder", datacache.folder, {"name": "fashion-mnist", "root": tmp / "cache"},
        {"name": name_not_in(dataset_name), "root": st.one_of(st.integers(), st.just(object()))},
        aliases={"name": ["dataset"]})
    add("datacache.policy", datacache.policy, {}, {"download": st.one_of(st.integers(), st.text(max_size=2))})
    add("magics.readout", magics.readout, {"result": result},
        {"result": wrong_object(), "region": name_not_in(_region_ok), "pue": number(1, optional=True)})
    add("magics.one_line", magics.one_line, {"result": result},
        {"result": wrong_object(), "region": name_not_in(_region_ok), "pue": number(1, optional=True)})
    meter_lines = st.one_of(st.sampled_from(["", "maybe", "on --pue", "on --pue x", "on --region", "on --x 1",
                                             "on 'open", "on --region NOWHERE", "on --pue 0.5", "on off"]),
                            st.integers(), st.none())
    add("magics %energy_meter", lambda line: magics._parse(line, cell=False), {"line": "on"},
        {"line": meter_lines}, aliases={"line": ["usage"]})
    cell_lines = st.one_of(st.sampled_from(["--attribution both", "--label", "--pue x", "extra", "--region XX",
                                            "--pue -1", "'open"]), st.integers())
    add("magics %%energy", lambda line: magics._parse(line, cell=True), {"line": ""},
        {"line": cell_lines}, aliases={"line": ["usage"]})
    add("hardware.doctor", hardware.doctor, {"rapl_root": tmp / "none", "environ": {}},
        {"print_table": flag(), "environ": st.one_of(st.integers(), st.text(max_size=2), st.just([("a", "b")]))})
    add("hardware.precision_support", hardware.precision_support, {"precision": "bf16", "cpu_flags": set()},
        {"precision": name_not_in(lambda s: s in ("fp32", "bf16", "fp16")),
         "device": name_not_in(lambda s: s.strip().lower() in ("cpu", "mps") or s.lower().startswith("cuda")),
         "environ": st.one_of(st.integers(), st.text(max_size=2)),
         "cpu_flags": st.one_of(st.integers(), st.text(max_size=2), st.just([1, 2])),
         "cuda_capability": st.one_of(st.integers(), st.text(max_size=2), st.just((8,)), st.just(("a", "b")))})
    add("hardware.native_precisions", hardware.native_precisions, {"device": "cpu", "cpu_flags": set()},
        {"device": name_not_in(lambda s: s.strip().lower() in ("cpu", "mps") or s.lower().startswith("cuda"))})
    add("hardware.cuda_tensor_cores", hardware.cuda_tensor_cores, {"cuda_capability": (8, 0)},
        {"cuda_capability": st.one_of(st.integers(), st.text(max_size=2), st.just((8,)), st.just(("a", "b")),
                                      st.just(object()))})
    add("energy.measure", lambda **kw: measure("fuzz", sync=False, **kw), {"sources": [SlopeSource()]},
        {"sources": wrong_object([SlopeSource, 1], "rapl", SlopeSource(), optional=True),  # None: the default
         "idle": wrong_object({"cpu": 1.0}, optional=True),
         "gpus": st.one_of(st.text(max_size=3).filter(lambda s: s not in ("all", "used")), st.just([-1]),
                           st.just(1.5)),
         "attribution": name_not_in(lambda s: s in ("process", "machine"))})
    add("energy.IdlePower", IdlePower, {"watts_by_component": {"cpu": 5.0}, "seconds": 1.0},
        {"watts_by_component": st.one_of(wrong_object(without=(dict,)), st.just({"cpu": math.nan}),
                                         st.just({"cpu": -1.0}), st.just({"cpu": "5"}), st.just({"": 1.0}),
                                         st.just({1: 1.0})),
         "seconds": number(0)})
    add("energy.PowerMonitor(sources)", gl_power_monitor, {"sources": [SlopeSource()]},
        {"sources": wrong_object([SlopeSource], "rapl", SlopeSource(), optional=True)})  # None: this machine's
    return eps


def lessons_12_to_15_entry_points(tmp: Path) -> list[EntryPoint]:
    """Entry points of lessons 11, 13-15: pre-emption, the cluster simulator, tuning, hogwild,
    federated learning, storage layouts, monitoring, idle capacity, the network and edge figures,
    the sharding run, the class leaderboard's command and the Apple and AMD counter sources. Only
    arguments checked before any process starts are fuzzed (a bad one that slipped through would
    start real work, which the time limit reports as silent)."""
    import argparse
    import types

    import torch

    from greenlab.base import limits
    from greenlab.course import leaderboard
    from greenlab.energy import measure
    from greenlab.energy.amd import AmdCounterSource, AmdPowerSource
    from greenlab.energy.apple import AppleSocSource
    from greenlab.impact import idle, network
    from greenlab.techniques import (cluster, edge, federated, hogwild, monitoring, preemption, roofline,
                                     storage, tuning)
    from greenlab.techniques.lm import sharding_run
    from greenlab.training import data, models
    from greenlab.training.loop import TrainConfig

    eps = []

    def add(name, call, base, bad, aliases=None, paths=()):
        eps.append(EntryPoint(name, call, base, bad, aliases or {}, paths))

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(24, 1, 4, 4, generator=g), torch.arange(24) % 3
    ds = data.Dataset("tiny", x, y, x[:8].clone(), y[:8].clone(), num_classes=3, source="generated")
    mlp = {"name": "mlp", "input_shape": (1, 4, 4), "hidden": (8,), "num_classes": 3}
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    (tmp / "writes").mkdir(exist_ok=True)
    (tmp / "a_file.pt").write_bytes(b"keep")

    # pre-emption: the arithmetic and the checks made before a launcher starts
    add("preemption.young/daly_interval", preemption.daly_interval, {"checkpoint_s": 1.0, "mtbf_s": 100.0},
        {"checkpoint_s": number(0, low_open=True), "mtbf_s": number(0, low_open=True)})
    add("preemption.expected_wall_seconds", preemption.expected_wall_seconds,
        {"work_s": 100.0, "interval_s": 10.0, "checkpoint_s": 1.0, "restart_s": 1.0, "mtbf_s": 1000.0},
        {"work_s": number(0), "interval_s": number(0, low_open=True), "checkpoint_s": number(0),
         "restart_s": number(0), "mtbf_s": number(0, low_open=True)})
    add("preemption.lifetimes", preemption.lifetimes, {"mean_s": 2.0, "count": 3},
        {"mean_s": number(0, low_open=True), "count": integer(0, 10**6)})
    add("preemption.run_preemptible (checks)", preemption.run_preemptible,
        {"model": mlp, "data": ds, "config": TrainConfig(batch_size=8, max_steps=2), "checkpoint_every": 1,
         "kill_after_s": [], "folder": tmp / "runs"},
        {"model": wrong_object(without=(dict,)), "config": wrong_object(),
         "checkpoint_every": integer(1, optional=True), "kill_after_s": st.one_of(st.just([-1.0]),
                                                                                   st.just([math.nan]), st.just(3),
                                                                                   st.just(["x"]))})
    add("preemption.checkpoint_write_cost", preemption.checkpoint_write_cost,
        {"model": net, "optimizer": opt, "folder": tmp / "writes", "writes": 1, "min_seconds": 0.0},
        {"folder": st.sampled_from([tmp / "a_file.pt", tmp / "missing", "/dev/null", 3, None]),
         "writes": integer(1, 10**6), "min_seconds": number(0, limits.MEASURE_LIMIT_S)})
    # the cluster simulator
    job = dict(name="j", user="u", arrival_s=0.0, gpus=1, duration_s=10.0, estimate_s=20.0)
    add("cluster.Job", cluster.Job, job,
        {"arrival_s": number(), "gpus": integer(1), "duration_s": number(0, low_open=True),
         "estimate_s": number(0, low_open=True), "priority": integer(), "name": not_a(str), "user": not_a(str)})
    add("cluster.synthetic_trace", cluster.synthetic_trace, {"n_jobs": 5, "n_gpus": 4},
        {"n_jobs": integer(1, cluster.MAX_JOBS), "n_gpus": integer(1), "mean_interarrival_s": number(0, low_open=True),
         "duration_sigma": number(0), "max_overestimate": number(1), "high_priority_share": number(0, 1),
         "gpu_choices": st.sampled_from([(0, 1), (1.5, 2), (True, 2), (-1, 1)]),
         "gpu_weights": st.sampled_from([(math.nan, 1, 1, 1), (0, 0, 0, 0), (-1, 1, 1, 1), (math.inf, 1, 1, 1)])},
        aliases={"gpu_choices": ["gpu"], "gpu_weights": ["gpu_weights"]})
    trace = cluster.synthetic_trace(n_jobs=8, n_gpus=4)
    add("cluster.simulate", cluster.simulate, {"jobs": trace, "n_gpus": 4},
        {"n_gpus": integer(1), "idle_watts": number(0, optional=True), "gang": flag(),
         "jobs": st.sampled_from([[object()], 3, "jobs", [None], trace * (cluster.MAX_JOBS // len(trace) + 1)])})
    result = cluster.simulate(trace, 4)
    add("ClusterResult.wait_percentile_s", lambda q: result.wait_percentile_s(q), {"q": 95},
        {"q": number(0, 100)}, aliases={"q": ["percentile"]})
    # tuning
    add("tuning.promote", tuning.promote, {"scores": [0.1, 0.5, 0.9], "eta": 2},
        {"eta": integer(2), "scores": st.sampled_from([[math.inf, 0.5], ["0.5", 0.7], 3, [None, 0.2]])},
        aliases={"scores": ["score"]})
    add("tuning.shared_study (checks)", tuning.shared_study,
        {"journal_path": tmp / "study.journal", "data": ds, "workers": 1, "trials_per_worker": 1},
        {"workers": integer(1), "trials_per_worker": integer(1), "timeout_s": number(0, low_open=True)})
    # hogwild
    add("hogwild.run (checks)", hogwild.run, {"data": ds, "mode": "sync", "workers": 1, "max_updates": 1},
        {"mode": name_not_in(lambda s: s in hogwild.MODES), "workers": integer(1), "lr": number(0, low_open=True),
         "target_accuracy": number(0, 1, low_open=True), "timeout_s": number(0, low_open=True),
         "seed": integer(0)})
    # federated
    splits = federated.dirichlet_split(ds.train_y, 2, 1.0, seed=0, min_samples=2)
    add("federated.run_federated (splits)",
        lambda **kw: federated.run_federated(lambda: models.build(**mlp), ds, rounds=1, **kw), {"splits": splits},
        {"splits": st.sampled_from([[[0, -1]], [[0, 1.5]], [[0, 24]], [[0], []], [[[0, 1]]], [[True]], 3])},
        aliases={"splits": ["split"]})
    add("federated.fedavg", federated.fedavg,
        {"states": [net.state_dict(), net.state_dict()], "sample_counts": [1, 2]},
        {"sample_counts": st.sampled_from([[math.inf, 1], [-1, 2], [0, 0], [1], ["a", 1], [math.nan, 1]]),
         "states": wrong_object(without=(list,))})
    add("federated.dirichlet_split", federated.dirichlet_split, {"labels": ds.train_y, "n_clients": 2, "alpha": 1.0},
        {"n_clients": integer(1, 10_000), "alpha": number(0, low_open=True), "seed": integer(0),
         "min_samples": integer(0)})
    # storage layouts
    shards = storage.write_shards(x, y, tmp / "shards", samples_per_shard=12)
    damaged = tmp / "damaged.tar"
    damaged.write_bytes(shards[0].read_bytes()[:700])
    add("storage.read_shards", storage.read_shards, {"paths": shards, "sample_shape": (1, 4, 4)},
        {"paths": st.sampled_from([[damaged], [tmp / "missing.tar"], 3])}, aliases={"paths": ["shard", "path"]},
        paths=("paths",))
    add("storage.compare_reads", storage.compare_reads, {"x": x, "y": y, "folder": tmp / "layouts"},
        {"repeats": integer(1, 2**40), "passes": integer(1, 2**40), "samples_per_shard": integer(1),
         "min_window_s": number(0, limits.MEASURE_LIMIT_S),
         "x": wrong_object(), "y": wrong_object()}, aliases={"x": ["tensor"], "y": ["tensor"]})
    # measurement helpers: windows within the time one measurement may take
    add("roofline.seconds_per_call", roofline.seconds_per_call,
        {"fn": lambda: None, "device": "cpu", "min_seconds": 0.001, "rounds": 1},
        {"min_seconds": number(0, limits.MEASURE_LIMIT_S, low_open=True), "rounds": integer(1, 2**40)})
    add("roofline.measure", roofline.measure,
        {"device": "cpu", "matmul_n": 8, "copy_bytes": 1024, "min_seconds": 0.001, "rounds": 1, "reuse": False},
        {"min_seconds": number(0, limits.MEASURE_LIMIT_S, low_open=True), "rounds": integer(1, 2**40)})
    # monitoring, idle capacity, the network and the edge
    add("monitoring.alert_times", monitoring.alert_times,
        {"times_s": [0.0, 1.0, 2.0], "values": [5.0, 1.0, 1.0], "below": 2.0, "for_s": 1.0},
        {"below": number(), "for_s": number(0), "times_s": st.sampled_from([[0.0, math.nan, 2.0], [2.0, 1.0, 0.0],
                                                                            [0.0], "abc"]),
         "values": st.sampled_from([[5.0, math.nan, 1.0], [1.0], "abc"])})
    add("idle.idle_cost", idle.idle_cost, {"watts": 60.0},
        {"watts": number(0), "hours": number(0), "price_per_kwh": number(0, optional=True),
         "rent_per_hour": number(0, optional=True), "region": name_not_in(_region_ok)})
    add("idle.scale_to_zero", idle.scale_to_zero,
        {"busy_hours": 10.0, "idle_watts": 60.0, "starts": 5, "cold_start_s": 30.0, "start_watts": 100.0},
        {"busy_hours": number(0), "idle_watts": number(0), "starts": integer(0), "cold_start_s": number(0),
         "start_watts": number(0), "hours": number(0, low_open=True)})
    add("network.transfer_joules", network.transfer_joules, {"nbytes": 1000}, {"nbytes": number(0)})
    add("network.energy_per_byte", network.energy_per_byte, {}, {"key": name_not_in(lambda s: s in
                                                                                    {f.key for f in network.figures()})})
    add("edge.remote_cost", edge.remote_cost, {"input_bytes": 1000}, {"input_bytes": integer(0),
                                                                        "datacentre": wrong_object(optional=True),
                                                                        "network": wrong_object(optional=True)})
    # the sharding run's configuration (checked before torchrun starts)
    add("sharding_run.make_config", sharding_run.make_config, {},
        {"world_size": integer(2, 64), "d_model": integer(1), "n_layers": integer(1), "n_heads": integer(1),
         "seq_len": integer(1), "batch_size": integer(1), "steps": integer(1), "lr": number(0, low_open=True),
         "allreduce_repeats": integer(1)})
    # `greenlab leaderboard show`
    shown = tmp / "class"
    shown.mkdir(exist_ok=True)
    leaderboard.Leaderboard(shown).add("seed", joules=1.0, seconds=1.0, accuracy=0.5, co2e_g=0.1, author="a")

    def show(dir, metric="joules_to_target", limit=None):
        with contextlib.redirect_stdout(open(os.devnull, "w")), contextlib.redirect_stderr(open(os.devnull, "w")):
            code = leaderboard.show_main(argparse.Namespace(dir=dir, metric=metric, limit=limit))
        if code != 0:
            raise ValueError(f"greenlab leaderboard show exited {code} for dir {dir}")

    add("greenlab leaderboard show", show, {"dir": str(shown)},
        {"dir": st.sampled_from([str(tmp / "clas"), str(tmp / "missing" / "x"), str(tmp / "a_file.pt")]),
         "metric": name_not_in(lambda s: s in leaderboard.METRICS), "limit": integer(0, optional=True)},
        aliases={"dir": ["folder", "leaderboard"]})

    # Apple and AMD counter sources: a reading that is not energy must leave the window incomplete
    def read_window(source_fn, bad_first: bool = False):
        def call(reading):
            state = {"now": 1000.0}
            source = source_fn(state)
            with measure("fuzz", sources=[source], sync=False) as window:
                state["now"] = reading
            if window.result.complete and math.isfinite(window.result.joules):
                return window.result  # accepted: silent
            raise ValueError(f"reading {reading!r} left the window incomplete: {window.result.problems[:1]}")
        return call

    class Metrics:
        def __init__(self, state):
            self.cpu_total_mj = state["now"]

    apple = read_window(lambda state: AppleSocSource(types.SimpleNamespace(get_cumulative_energy=lambda: Metrics(state)),
                                                     "cpu", ("cpu_total_mj",)))
    readings = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -5.0, 1.2e24, 1e300, True, None, "5", 1j]),
                         st.floats(max_value=-1e-9), st.floats(min_value=1e15, allow_infinity=False))
    add("apple.AppleSocSource reading", lambda reading: apple(reading), {"reading": 2000.0}, {"reading": readings})
    smi = types.SimpleNamespace()
    amd = read_window(lambda state: AmdCounterSource(types.SimpleNamespace(amdsmi_get_energy_count=lambda h: {
        "energy_accumulator": state["now"], "counter_resolution": 15.3}), 0, "gpu:0"))
    add("amd.AmdCounterSource reading", lambda reading: amd(reading), {"reading": 2000.0}, {"reading": readings})

    def amd_power(reading):
        values = iter([100.0, reading, reading])
        source = AmdPowerSource(types.SimpleNamespace(amdsmi_get_power_info=lambda h: {
            "current_socket_power": next(values)}), 0, "gpu:0")
        with measure("fuzz", sources=[source], sync=False) as window:
            try:  # as the window's poller does: a failed poll is recorded by the source, not raised
                source.poll()
            except Exception:
                pass
        if window.result.complete and math.isfinite(window.result.joules):
            return window.result
        raise ValueError(f"reading {reading!r} left the window incomplete")

    add("amd.AmdPowerSource reading", amd_power, {"reading": 100.0},
        {"reading": st.one_of(st.sampled_from([math.nan, math.inf, -20.0, 1e9, True, None, "100", 1j]),
                              st.floats(max_value=-1e-9), st.floats(min_value=1e4, allow_infinity=False))})
    del smi
    return eps


def gl_power_monitor(**kw):
    """Build and start a PowerMonitor, and stop it again (a refused one never starts)."""
    from greenlab.energy import PowerMonitor

    return PowerMonitor(**kw).start().stop()


def face_entry_points(tmp: Path) -> list[EntryPoint]:
    """The gl.* functions the enumerated pass cannot call without a valid call to start from:
    compare, format_bytes, plain_number, headline, quiz (each also gives that pass its base)."""
    import torch

    import greenlab as gl
    from fakes import SlopeSource
    from greenlab import experiments
    from greenlab.training import data, models

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(24, 1, 4, 4, generator=g), torch.arange(24) % 3
    ds = data.Dataset("tiny", x, y, x[:8].clone(), y[:8].clone(), num_classes=3, source="generated")

    def mlp(config=None):
        return models.build("mlp", input_shape=(1, 4, 4), hidden=(8,), num_classes=3)

    verdict = experiments.paired([1.0, 2.0, 1.5], [2.0, 3.0, 2.6], metric="joules")
    texts = st.one_of(st.integers(), st.none(), st.just(object()), st.lists(st.text(max_size=2), max_size=2))
    eps = [
        EntryPoint("gl.compare", gl.compare,
                   {"variants": {"a": gl.TrainConfig(batch_size=8, max_steps=1, epochs=1)}, "model_fn": mlp,
                    "data": ds, "repeats": 1, "warmup": 0, "sources": [SlopeSource()], "save": False,
                    "show_progress": False, "device": "cpu"},
                   {"variants": wrong_object({}, {"a": {"lr": 1.0}}, {"": gl.TrainConfig()}, {1: gl.TrainConfig()}),
                    "model_fn": wrong_object(mlp(), torch.zeros(1)), "data": wrong_object(x),
                    "repeats": integer(1, 1000), "warmup": integer(0, 100), "log": flag(), "save": flag(),
                    "seed": integer(0, 2**63 - 1, optional=True), "show_progress": flag(),
                    "sources": wrong_object([SlopeSource, None], "rapl", optional=True),
                    "callbacks": st.one_of(st.integers(), st.lists(st.integers(), min_size=1, max_size=2))},
                   aliases={"variants": ["variant"], "model_fn": ["model"], "data": ["dataset"]}),
        EntryPoint("gl.format_bytes", gl.format_bytes, {"nbytes": 1000.0},
                   {"nbytes": number(0), "unit": name_not_in(lambda s: s in ("B", "KiB", "MiB", "GiB")).filter(
                       lambda v: v is not None), "figures": integer(1, 15)}),
        # NaN and inf read as Python writes them, on purpose: messages show an impossible reading with it
        EntryPoint("gl.plain_number", gl.plain_number, {"value": 1.5},
                   {"value": st.one_of(_junk, st.none(), st.booleans()), "figures": integer(1, 15)}),
        EntryPoint("gl.headline", gl.headline,
                   {"lesson": "09", "technique": "a", "saves": "energy", "factor": verdict},
                   {"lesson": st.one_of(st.integers(), st.just(object()), st.sampled_from(["", "9x", "99", "  "])),
                    "technique": texts, "saves": texts, "reached": texts, "note": texts,
                    "factor": wrong_object(optional=True),
                    "source": st.one_of(st.integers(), st.text(max_size=3), st.just(object()))}),
        EntryPoint("gl.quiz", gl.quiz, {"questions": "00", "display": "text"},
                   {"questions": st.one_of(name_not_in(lambda s: False), st.just([]), st.just([{"q": 1}]),
                                           st.just([None]), st.just(3.5)),
                    "title": st.one_of(st.integers(), st.just(object())), "display": name_not_in(
                        lambda s: s in ("auto", "widget", "text")),
                    "show_answers": flag(), "shuffle": flag().filter(lambda v: v is not None),
                    "seed": integer(0, optional=True)},
                   aliases={"questions": ["quiz", "lesson", "question"]}),
    ]
    return eps


# --- the course tools (python -m greenlab.course ..., the nbgrader export, the leaderboard) --------

def _cli_text(*extra):
    """Text values of a command-line option that are wrong for a number: words, NaN, inf, empty."""
    return st.one_of(st.sampled_from(["nan", "inf", "-inf", "", "abc", "1e400", "0x10", " ", *extra]),
                     st.text(max_size=5).filter(lambda t: not t.strip().lstrip("-").isdigit()))


def course_tool_entry_points(tmp: Path) -> list[EntryPoint]:
    """Every course tool as its command line: build, check, new, run, results, grade and guide
    (``python -m greenlab.course``), the nbgrader export and ``greenlab leaderboard show/verify``,
    each option or argument in turn replaced by a bad value (a folder that is a file, is missing
    or empty, a damaged notebook or JSON file, a number that is none or out of range). A call is
    clear when the command exits non-zero naming the option (or, for a path, the path); exit 0
    is a silent acceptance. Commands run in a scratch folder, so nothing lands in the repository."""
    import io
    import json

    from greenlab.base import limits
    from greenlab.cli.app import main as greenlab_main
    from greenlab.course import build, class_grading, guide, nbgrader

    scratch = tmp / "course_tools"
    scratch.mkdir(exist_ok=True)
    a_file = scratch / "a_file.txt"
    a_file.write_text("not a folder\n")
    empty = scratch / "empty"
    empty.mkdir(exist_ok=True)
    damaged = scratch / "damaged"
    (damaged / "instructor").mkdir(parents=True, exist_ok=True)
    (damaged / "instructor" / "00_broken.ipynb").write_text("{not json")
    bad_notebook = scratch / "bad.ipynb"
    bad_notebook.write_text("{not json")
    not_a_notebook = scratch / "cells.txt"
    not_a_notebook.write_text("print('hi')\n")
    tiny = scratch / "tiny.ipynb"
    tiny.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {},
                                           "outputs": [], "source": ["x = 1"]}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    bad_json = scratch / "results.json"
    bad_json.write_text("[1, 2")
    course = scratch / "course"
    (course / "submitted" / "alice" / "lesson00").mkdir(parents=True, exist_ok=True)
    board_dir = scratch / "board"
    board_dir.mkdir(exist_ok=True)
    (board_dir / "leaderboard.json").write_text("{damaged")
    paths = [str(p) for p in (a_file, empty, damaged, scratch / "missing", a_file / "under_a_file", bad_notebook,
                              not_a_notebook, bad_json)] + ["", "\x00"]
    # input paths: the fixed bad ones, and any name that is not there
    missing = st.text(max_size=8).map(lambda t: str(scratch / "missing") + "-" + t)
    folders = st.one_of(_pick(paths), missing)
    files = st.one_of(_pick(paths), missing)
    counter = {"n": 0}

    def fresh():
        counter["n"] += 1
        return str(scratch / f"out{counter['n']}")

    def command(main, words, positional=(), flags=()):
        """A course tool as a function of its options: ``--name=value`` for each keyword (positional
        ones in ``positional`` order); raises a ValueError with what it printed when it exits non-zero."""
        def call(**kwargs):
            argv = list(words)
            for name in positional:
                value = kwargs.get(name)
                if value is not None:
                    argv += value if isinstance(value, list) else [value]
            for name, value in kwargs.items():
                if name in positional:
                    continue
                if name in flags:
                    argv += [name] if value else []
                elif isinstance(value, list):
                    argv += [name, *value]
                else:
                    argv.append(f"{name}={value() if callable(value) else value}")
            out, err = io.StringIO(), io.StringIO()
            cwd = os.getcwd()
            os.chdir(scratch)
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    try:
                        code = main(argv)
                    except SystemExit as exc:
                        code = exc.code
            finally:
                os.chdir(cwd)
            if code not in (0, None):
                said = (err.getvalue() + out.getvalue()).lower()
                named = [k for k, v in kwargs.items() if isinstance(v, str) and v.strip() and v.lower() in said]
                raise ValueError(f"exit {code}: {said.strip()[-300:]}" + (f" [names {', '.join(named)}]" if named
                                                                          else ""))
            return code
        return call

    def course_main(argv):
        return build.main(argv)

    eps = []

    def add(name, call, base, bad, aliases=None):
        eps.append(EntryPoint(name, call, base, bad, aliases or {}))

    add("course build", command(course_main, ["build"]), {}, {"--lessons": folders},
        aliases={"--lessons": ["lessons", "folder"]})
    add("course check", command(course_main, ["check"]), {}, {"--lessons": folders},
        aliases={"--lessons": ["lessons", "folder"]})
    def new_in_fresh_folder(argv):
        folder = Path(fresh())
        folder.mkdir()
        return course_main(["--lessons", str(folder), *argv])

    add("course new", command(new_in_fresh_folder, ["new"],
                              positional=("number", "slug", "title")),
        {"number": "07", "slug": "a_lesson", "title": "A lesson"},
        {"number": st.one_of(_cli_text("007", "-1", "99x", "3.0"), st.integers(min_value=100).map(str)),
         "slug": st.one_of(st.sampled_from(["", "A Lesson", "a-lesson", "../up", "a/b", " ", "Über"]),
                           st.text(max_size=6).filter(lambda t: not t.replace("_", "").isalnum())),
         "title": st.sampled_from(["", " ", "\n"])})
    add("course run", command(course_main, ["run"], positional=("notebooks",)),
        {"notebooks": [str(tiny)]},
        {"notebooks": st.one_of(files.map(lambda p: [p]), st.just([str(tiny), str(a_file)])),
         "--max-silence-s": _cli_text("-1", "0", "-0.5", str(10 ** 12))},
        aliases={"--max-silence-s": ["max_silence_s", "max-silence", "silence"], "notebooks": ["notebook"]})
    add("course results", command(course_main, ["results"], positional=("notebooks",)),
        {"notebooks": [str(tiny)], "--out": fresh},
        {"notebooks": files.map(lambda p: [p]),
         "--out": st.sampled_from([str(a_file), str(a_file / "under"), "", "\x00"]),
         "--from-json": files},
        aliases={"--from-json": ["from_json", "json"], "notebooks": ["notebook"]})
    add("course grade", command(class_grading.main, [], positional=("course", "assignment")),
        {"course": str(course), "assignment": "lesson00"},
        {"course": folders, "assignment": st.sampled_from(["", "lesson99", "../x", " ", "lesson00/.."]),
         "--jobs": st.one_of(_cli_text("0", "-1", "1.5"), st.integers(max_value=0).map(str),
                             st.integers(min_value=limits.max_processes() + 1).map(str)),
         "--student": st.sampled_from([["nobody"], [""], ["../alice"], ["alice", "alice"]])},
        aliases={"course": ["course", "folder", "submitted"], "assignment": ["assignment", "submission"],
                 "--student": ["student"], "--jobs": ["jobs"]})
    add("course guide", command(guide.main, []), {"--out": fresh},
        {"--out": st.sampled_from([str(a_file / "under"), str(empty), "", "\x00", str(scratch / "missing") + "/"])},
        aliases={"--out": ["out", "guide"]})
    add("course nbgrader export", command(nbgrader.main, []), {"--out": fresh, "--only": ["00"]},
        {"--out": st.sampled_from([str(a_file), str(a_file / "under"), "", "\x00"]),
         "--only": st.sampled_from([["99"], ["000"], ["abc"], [""], ["00", ""], ["-1"], ["3.0"]]),  # "0": lesson 00
         "--lessons": folders,
         "--quiz-points": st.one_of(_cli_text("-1", "1.5"), st.integers(max_value=-1).map(str),
                                    st.integers(min_value=10 ** 6).map(str))},
        aliases={"--only": ["only", "lesson"], "--lessons": ["lessons", "folder"],
                 "--quiz-points": ["quiz_points", "quiz-points", "points"]})
    add("greenlab leaderboard verify", command(greenlab_main, ["leaderboard", "verify"]), {"--dir": str(board_dir)},
        {"--dir": st.one_of(folders, st.just(str(board_dir)))}, aliases={"--dir": ["dir", "folder", "leaderboard"]})
    return eps


# --- the exercise checkers (gl.check.*) --------------------------------------------------------

class _EqualsAnything:
    """A learner's answer that claims to equal whatever it is compared with."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return "<equals anything>"


class _BreaksOnUse:
    """A learner's answer that raises on every use: comparison, conversion, truth, length, repr."""

    def _raise(self, *args, **kwargs):
        raise RuntimeError("this answer breaks when used")

    __eq__ = __ne__ = __lt__ = __gt__ = __float__ = __int__ = __index__ = __bool__ = __len__ = _raise
    __iter__ = __getitem__ = __repr__ = __str__ = __format__ = __getattr__ = _raise
    __hash__ = object.__hash__


class _BadMessage(Exception):
    """An exception raised by a learner's code whose message cannot be shown."""

    def __str__(self):
        raise RuntimeError("this exception has no printable message")


def _pick(values):
    """One of ``values``, drawn by index (hypothesis would print each value, and some of these
    break when printed)."""
    values = list(values)

    def nth(i):
        return values[i]

    return st.integers(0, len(values) - 1).map(nth)


def _garbage_values():
    """Values a learner's code may return instead of the answer: wrong types, NaN, None, wrong
    shapes, complex and meta tensors, objects that claim to equal anything or break on use."""
    import numpy as np
    import torch

    return [math.nan, math.inf, -math.inf, -1, 0, 1, 10 ** 400, 1e308, -1e-308, True, False, 1j, "3", "", b"1",
            object(), [], [math.nan], [None], (), {}, {"a": 1}, {1, 2}, range(3), torch.tensor(math.nan),
            torch.zeros(0), torch.full((3, 3), math.nan), torch.full((7,), math.inf),
            torch.zeros(2, 2, dtype=torch.complex64),
            torch.empty(2, device="meta"), torch.zeros(1, 1, 1, 1), torch.ones(5, dtype=torch.bool),
            torch.tensor([2 ** 62]), np.array([math.nan]), np.zeros((2, 3)), np.array(["a"]), _EqualsAnything(),
            _BreaksOnUse(), torch.nn.Linear(2, 2), torch.optim.SGD, ValueError("an error returned"), NotImplemented,
            Ellipsis, None, (x for x in range(2)), lambda *a: 0]


def _bad_answer_functions():
    """Learner functions that are wrong in every way a checker must survive: they raise (an
    exception of any kind, one whose message breaks), return garbage (``_garbage_values``), take
    the wrong arguments, echo an input back, or damage their inputs in place."""
    import torch

    def returning(value):
        def answer(*args, **kwargs):
            return value
        try:
            shown = repr(value)
        except Exception:
            shown = f"<{type(value).__name__}>"
        answer.__name__ = answer.__qualname__ = f"returns {shown[:40]}"
        answer.placeholder = value is None or value is NotImplemented or value is Ellipsis
        return answer

    def raising(kind):
        def answer(*args, **kwargs):
            raise kind("the learner's code failed")
        answer.__name__ = answer.__qualname__ = f"raises {kind.__name__}"
        return answer

    def echo(position):
        def answer(*args, **kwargs):
            return args[position] if len(args) > abs(position) - (position < 0) else math.nan
        answer.__name__ = answer.__qualname__ = f"returns argument {position}"
        return answer

    def damaging(*args, **kwargs):
        for arg in args:
            if isinstance(arg, torch.Tensor) and arg.is_floating_point():
                arg.data.fill_(math.nan)
            elif isinstance(arg, torch.nn.Module):
                for p in arg.parameters():
                    p.data.fill_(math.nan)
                    p.grad = torch.full_like(p, math.nan)
            elif isinstance(arg, list) and arg:
                arg.clear()
        return args[0] if args else math.nan

    def bad_message(*args, **kwargs):
        raise _BadMessage()

    def recursing(*args, **kwargs):
        return recursing(*args, **kwargs)

    def no_arguments():
        return 1.0

    class NotAModule:  # a class where a module class goes
        def __init__(self, *args, **kwargs):
            pass

    class RaisesInInit(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            raise RuntimeError("the learner's class failed")

    class ForwardGarbage(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        def forward(self, *args, **kwargs):
            return math.nan

    return ([returning(v) for v in _garbage_values()]
            + [raising(k) for k in (ValueError, TypeError, ZeroDivisionError, IndexError, KeyError, RuntimeError,
                                    AttributeError, OverflowError, MemoryError, NotImplementedError,
                                    AssertionError, StopIteration, RecursionError, torch.cuda.OutOfMemoryError)]
            + [echo(0), echo(-1), damaging, bad_message, recursing, no_arguments, NotAModule, RaisesInInit,
               ForwardGarbage, len, abs, torch.zeros_like, torch.nn.Identity])


def bad_answers():
    """A learner's answer where a checker takes a function or class: garbage values themselves
    (not callable), and callables that fail (``_bad_answer_functions``)."""
    return _pick([v for v in _garbage_values() if not callable(v) or isinstance(v, torch_module())]
                           + _bad_answer_functions())


def torch_module():
    import torch

    return torch.nn.Module


class _FakeComponent:
    def __init__(self, source="rapl", joules=1.0, estimated=False):
        self.source, self.joules, self.estimated = source, joules, estimated


def bad_measurements():
    """Objects where a checker takes a measurement window's result: garbage, and look-alikes with
    NaN, negative or missing figures, no components, broken warnings."""
    import types

    def fake(**kw):
        fields = dict(joules=5.0, seconds=2.0, components={"cpu": _FakeComponent()}, warnings=[], problems=[])
        fields.update(kw)
        return types.SimpleNamespace(**fields)

    looks_alike = [fake(joules=v) for v in (math.nan, math.inf, -1.0, 0.0, "5", None, 1j, _BreaksOnUse())]
    looks_alike += [fake(seconds=v) for v in (math.nan, math.inf, -math.inf, -1.0, "2", None, 1j, _BreaksOnUse())]
    looks_alike += [fake(components=v) for v in ({}, {"cpu": _FakeComponent(source="")}, [1, 2], 3, None,
                                                   {"cpu": None}, _BreaksOnUse())]
    looks_alike += [fake(warnings=v) for v in (3, None, ["window shorter than 10 update periods"], _BreaksOnUse())]
    looks_alike += [fake(problems=v) for v in (["a source failed"], 3, _BreaksOnUse())]
    return _pick([v for v in _garbage_values() if v is not None] + looks_alike)


class _FakeRun:
    """A look-alike of gl.train's RunResult for the capstone checker."""

    def __init__(self, **kw):
        self.joules, self.joules_to_target, self.seconds_to_target = 5.0, 4.0, 2.0
        self.best_accuracy, self.final_accuracy, self.status, self.estimated = 0.9, 0.9, "reached target", False
        self.__dict__.update(kw)


def _placeholder_answer(value) -> bool:
    """True for an answer not written yet: None, an empty text, a list whose first answer is None,
    a function that returns None."""
    from greenlab.course.checks import core

    try:
        if core.is_placeholder(value) or getattr(value, "placeholder", False) is True:
            return True
        if isinstance(value, str):
            return not value.strip()
        if isinstance(value, (list, tuple)):
            return not value or core.is_placeholder(value[0])
        if isinstance(value, torch_module()):  # a model with no gradients yet: loss.backward() not called
            return all(p.grad is None for p in value.parameters())
    except Exception:
        return False
    return False


def checker_entry_points(tmp: Path) -> list[EntryPoint]:
    """Every gl.check.* checker, its answer replaced by a bad one (a function that raises or
    returns garbage, a value of the wrong type, NaN, None, a wrong shape) and its other arguments
    by bad values. A checker must fail the check with a message (or, for an argument the
    instructor sets, such as ``seed``, raise an error naming it); passing it is silent, raising
    for the learner's answer is wrong-type (a crash), and "not attempted" is right only for a
    placeholder (None)."""
    import types

    import greenlab as gl
    from greenlab.course import leaderboard
    from greenlab.course.checks import core

    eps = []
    seed = integer(0, optional=True)
    config = gl.TrainConfig(target_accuracy=0.8, stop_at_target=True)
    board = leaderboard.Leaderboard(tmp / "capstone_board.json")
    board.add("mine", joules=5.0, seconds=2.0, accuracy=0.9, co2e_g=0.1)
    runs = _pick([_FakeRun(joules_to_target=v) for v in (math.nan, math.inf, -1.0, "4", _BreaksOnUse())]
                           + [_FakeRun(joules=v) for v in (math.nan, -5.0, math.inf)]
                           + [_FakeRun(best_accuracy=v, joules_to_target=None) for v in (math.nan, "0.9", 1j)]
                           + [_FakeRun(seconds_to_target=v) for v in (math.nan, -2.0, "2")]
                           + [_FakeRun(estimated=_BreaksOnUse())]
                           + [v for v in _garbage_values() if v is not None])

    def checking(checker, answers, base):
        """``checker`` as an entry point (``base``: its valid call): a failed check raises, naming the
        argument the call changed."""
        def call(**kwargs):
            changed = [k for k in kwargs if k not in base or kwargs[k] is not base[k]] or list(kwargs)
            try:
                verdict = checker(**kwargs)
            except (ValueError, TypeError) as exc:
                if any(a in answers for a in changed):
                    raise RuntimeError(f"the checker crashed on a bad answer: {type(exc).__name__}: {exc}") from exc
                raise
            if not isinstance(verdict, core.Check):
                raise RuntimeError(f"the checker returned {type(verdict).__name__}, not a Check")
            if verdict.status == core.FAILED and verdict.message.strip():
                raise ValueError(f"{', '.join(changed)}: {verdict.message} {' '.join(verdict.details)}")
            if verdict.status == core.NOT_ATTEMPTED:
                if any(a in answers and _placeholder_answer(kwargs[a]) for a in changed):
                    raise ValueError(f"{', '.join(changed)}: not attempted: {verdict.message}")
                raise TypeError(f"'not attempted' for an answer that is no placeholder: {verdict.message}")
            return verdict  # passed: a bad answer accepted
        return call

    def wrong(*args, **kwargs):  # a learner's answer that is wrong, so every case is drawn and run
        return math.nan

    for name in gl.check.__all__:
        checker = getattr(gl.check, name)
        if not callable(checker) or isinstance(checker, type) or name in CHECK_HELPERS:
            continue
        params = _parameters(checker)
        first = params[0].name
        base, bad = {}, {}
        if first in ("fn", "cls", "make_scaler"):
            bad[first] = bad_answers()
            base[first] = wrong
        for p in params[1:]:
            if p.name == "seed":
                bad["seed"] = seed
            elif p.name == "dequantize_fn":
                bad["dequantize_fn"] = bad_answers()
        answers = {first, "dequantize_fn"}
        if name == "energy_window":
            base = {"measurement": types.SimpleNamespace(joules=5.0, seconds=2.0, components={"cpu": _FakeComponent()},
                                                         warnings=[], problems=[])}
            bad = {"measurement": bad_measurements(), "min_seconds": number(0)}
        elif name == "capstone_submission":
            base = {"config": config, "result": _FakeRun(), "board": board, "target_accuracy": 0.8}
            bad = {"config": _pick([v for v in _garbage_values() if v is not None]), "result": runs,
                   "board": _pick([v for v in _garbage_values() if v is not None]),
                   "target_accuracy": number(0, 1, low_open=True, optional=True)}
            answers = {"config", "result", "board"}
        elif name == "quiz_answer":
            base = {"lesson": "00", "answers": ["not an option"], "question": 1}
            # no whole number or single letter: either may name the right option
            wrong = [v for v in _garbage_values() if not (isinstance(v, (int, float)) and not isinstance(v, complex)
                                                          and (type(v) in (int, bool) or math.isfinite(v)))]
            bad = {"answers": st.one_of(_pick(wrong), st.lists(_pick(wrong), min_size=1, max_size=3),
                                        st.lists(st.text(max_size=5).filter(
                                            lambda t: len(t.strip()) > 1 and not t.strip().isdigit()),
                                            min_size=1, max_size=3)),
                   "question": integer(1, 1), "lesson": name_not_in(lambda s: False),
                   "order_seed": seed}
            answers = {"answers"}
        elif name == "stakeholder_statement":
            base = {"text": ("The meter measured 3.6 kJ (±8 %) at 71 % test accuracy; no detectable difference "
                             "from the baseline. We recommend the pruned model as long as its accuracy holds."),
                    "facts": {"joules": 3612.0, "accuracy": 0.712, "uncertainty": 0.08,
                              "verdict": "no detectable difference"}}
            bad = {"text": st.one_of(_pick([v for v in _garbage_values() if not isinstance(v, str)]),
                                     st.text(max_size=40)),
                   "facts": _pick([3, "x", [1], {"joules": math.nan}, {"joules": "a"},
                                             {"accuracy": -1.0}, {"joules": _BreaksOnUse()}])}
            answers = {"text", "facts"}
        eps.append(EntryPoint(f"check.{name}", checking(checker, answers, base), base, bad))
    # the helpers every checker is built from
    import torch

    close = {"name": "x", "got": 1.0, "expected": 1.0}
    eps.append(EntryPoint("check.check_close", checking(core.check_close, {"got"}, close), close,
                          {"got": _pick([v for v in _garbage_values() if not core.is_placeholder(v)
                                         and not (type(v) is int and v == 1)]),  # 1: the expected value
                           "rtol": number(0), "atol": number(0)}))
    function = {"fn": wrong, "cases": [((1.0,), 2.0), ((2.0,), 3.0)]}
    eps.append(EntryPoint("check.check_function", checking(core.check_function, {"fn"}, function), function,
                          {"fn": bad_answers(), "rtol": number(0), "atol": number(0),
                           "cases": _pick([[], 3, [1], [(1, 2, 3)], None, "ab"])},
                          aliases={"cases": ["case"]}))
    reference = torch.nn.Linear(2, 1)
    reference(torch.ones(1, 2)).sum().backward()
    gradients = {"model_a": reference, "model_b": _nan_gradient_models()[0]}
    eps.append(EntryPoint("check.check_gradients_match", checking(core.check_gradients_match, {"model_b"}, gradients),
                          gradients,
                          {"model_b": _pick([v for v in _garbage_values() if not core.is_placeholder(v)]
                                                      + _nan_gradient_models()),
                           "rtol": number(0), "atol": number(0)}))
    return eps


def _nan_gradient_models() -> list:
    """Models shaped like the reference (Linear(2, 1)) whose gradients are impossible."""
    import torch

    out = []
    for fill in (math.nan, math.inf, -math.inf):
        model = torch.nn.Linear(2, 1)
        for p in model.parameters():
            p.grad = torch.full_like(p, fill)
        out.append(model)
    model = torch.nn.Linear(2, 1)
    model.weight.grad = torch.zeros(1, 2)
    out.append(model)  # one gradient missing
    model = torch.nn.Linear(3, 1)  # the wrong shapes
    model(torch.ones(1, 3)).sum().backward()
    out.append(model)
    return out


# shared helpers gl.check exports beside the checkers: fuzzed as library functions, not as checkers
CHECK_HELPERS = ("is_placeholder", "check_close", "check_function", "check_gradients_match", "number_or_none")
CHECK_NOT_CALLED = {"is_placeholder": "takes any value and says whether it is a placeholder: nothing to refuse",
                    "number_or_none": "takes any value and gives its number or None: nothing to refuse"}


# --- the vendor energy sources, read through fake counters ---------------------------------------

def _window_of(make_source, step):
    """Measure one window with the source ``make_source()``; ``step()`` runs inside it (the
    counter's next reading changes there). A window that reports a complete, finite energy is an
    accepted reading: returned (silent); else a ValueError names the reading."""
    from greenlab.energy import measure

    def call(reading):
        source = make_source(reading)
        with measure("fuzz", sources=[source], sync=False) as window:
            step(source, reading)
        result = window.result
        if result.complete and math.isfinite(result.joules) and result.joules >= 0:
            return result
        raise ValueError(f"reading {reading!r} left the window incomplete: {result.problems[:1]}")
    return call


def vendor_entry_points(tmp: Path) -> list[EntryPoint]:
    """RAPL (a powercap folder written here) and NVML (tests/fakes.py's pynvml) read through
    counters that give impossible readings: not numbers, NaN, negative, beyond the counter's range,
    a rise no device could draw in the time, a step backwards. Apple's and AMD's counters are in
    :func:`lessons_12_to_15_entry_points`. A bad reading must leave the window incomplete."""
    from fakes import FakeGpu, FakePynvml
    from greenlab.energy import rapl, sources

    eps = []
    max_range = 262_143_328_850
    numbers = [math.nan, math.inf, -math.inf, -5.0, -1, 1.2e24, 1e300, 10 ** 30]
    rapl_text = st.one_of(
        _pick(["", "abc", "nan", "inf", "-5", "1e30", "0x10", " ", "5.5", str(max_range + 1),
                         str(10 ** 30), "\x00", "1000\n2000", "-0"]),
        st.integers(max_value=999),  # below the first reading with no time to wrap: a jump of ~262 kJ
        st.integers(min_value=max_range + 1, max_value=2 ** 80),  # beyond the counter's range
        st.integers(min_value=10 ** 10, max_value=max_range),  # a rise of >= 10 kJ within a second
        st.text(max_size=6).filter(lambda s: not s.strip().isdigit()))
    counter = {"n": 0}

    def fake_powercap(max_text):
        """A fresh fake powercap folder of one package domain, probed as greenlab probes one."""
        counter["n"] += 1
        domain = tmp / f"powercap{counter['n']}" / "intel-rapl:0"
        domain.mkdir(parents=True)
        (domain / "name").write_text("package-0\n")
        (domain / "max_energy_range_uj").write_text(f"{max_text}\n")
        (domain / "energy_uj").write_text("1000\n")
        return rapl.probe_rapl(domain.parent)

    def rapl_source(reading):
        found = fake_powercap(max_range)
        if found.status != "readable":
            raise RuntimeError(f"the fake powercap folder is not readable: {found.reason}")
        return found.sources()[0]

    def rapl_step(source, reading):
        (source.domains[0] / "energy_uj").write_text(f"{reading}\n")

    eps.append(EntryPoint("rapl.RaplSource reading", _window_of(rapl_source, rapl_step), {"reading": 2000},
                          {"reading": rapl_text}))

    def rapl_range(max_text):
        """A domain whose max_energy_range_uj is ``max_text``: refused when the source is made, or
        a reading that wraps past it is an incomplete window."""
        found = fake_powercap(max_text)
        if found.status != "readable":
            raise ValueError(f"max_energy_range_uj {max_text!r}: {found.status}: {found.reason}")
        source = found.sources()[0]
        from greenlab.energy import measure

        with measure("fuzz", sources=[source], sync=False) as window:
            (domain / "energy_uj").write_text("500\n")  # a wrap past the range
        if window.result.complete and math.isfinite(window.result.joules) and window.result.joules >= 0:
            return window.result
        raise ValueError(f"max_energy_range_uj {max_text!r} left the window incomplete")

    eps.append(EntryPoint("rapl.RaplSource max_energy_range_uj", rapl_range, {"max_text": max_range},
                          {"max_text": st.one_of(_pick(["", "abc", "nan", "-1", "0", "1", "999", "1e3"]),
                                                 st.integers(max_value=999), st.text(max_size=4))},
                          aliases={"max_text": ["max_energy_range_uj"]}))

    state = {}

    def nvml_gpu(**kw):
        state["now"] = kw.pop("good")
        gpu = FakeGpu("GPU-fuzz", **{k: (lambda: state["now"]) if v == "state" else v for k, v in kw.items()})
        return sources.discover(nvml_module=FakePynvml([gpu]), rapl_root=tmp / "none", environ={}, gpus="all")

    def nvml_counter(reading):
        found = nvml_gpu(good=1_000_000, energy_mj="state")
        nv = [s for s in found.sources if s.name == "nvml-counter"]
        if not nv:
            raise RuntimeError("no fake NVML counter source was found")
        return nv[0]

    def set_reading(source, reading):
        state["now"] = reading
        if hasattr(source, "instant"):
            try:  # as the window's poller does: a failed poll is recorded by the source, not raised
                source.poll()
            except Exception:
                pass

    nvml_readings = st.one_of(_pick(numbers + ["5", None, b"1", 1j, True, object()]),
                              st.integers(max_value=999_999),  # backwards from the first reading
                              st.integers(min_value=10 ** 10, max_value=2 ** 64))  # a rise of >= 10 MJ
    eps.append(EntryPoint("nvml.NvmlCounterSource reading", _window_of(nvml_counter, set_reading),
                          {"reading": 1_000_100}, {"reading": nvml_readings}))

    def nvml_power(reading):
        found = nvml_gpu(good=100_000, energy_mj=None, power_mw="state")
        nv = [s for s in found.sources if s.name == "nvml-power"]
        if not nv:
            raise RuntimeError("no fake NVML power source was found")
        return nv[0]

    power_readings = st.one_of(_pick(numbers + ["5", None, 1j, True, object()]),
                               st.integers(min_value=10 ** 8, max_value=2 ** 64))  # >= 100 kW
    eps.append(EntryPoint("nvml.NvmlPowerSource reading", _window_of(nvml_power, set_reading),
                          {"reading": 100_000}, {"reading": power_readings}))

    def nvml_instant(reading):
        found = nvml_gpu(good=100_000, energy_mj=None, power_mw=100_000, instant_mw="state")
        nv = [s for s in found.sources if s.name == "nvml-power"]
        if not nv:
            raise RuntimeError("no fake NVML power source was found")
        return nv[0]

    eps.append(EntryPoint("nvml.NvmlPowerSource instant reading", _window_of(nvml_instant, set_reading),
                          {"reading": 100_000}, {"reading": power_readings}))
    return eps


# --- inputs valid one by one, extreme together ------------------------------------------------

@dataclass
class Combo:
    """A call whose arguments are each in range but together are not: a clear refusal names
    one of ``names``."""

    name: str
    call: object
    kwargs: dict
    names: tuple


def combos(tmp: Path) -> list[Combo]:
    """The extreme-together calls: memory or work that would not fit, splits left empty,
    figures that overflow, settings that make training diverge by construction."""
    import torch

    from fakes import SlopeSource
    from greenlab.techniques import lm
    from greenlab.techniques.lm import serving as lm_serve
    from greenlab.training import optimizers
    from greenlab.energy import PowerMonitor

    corpus = lm.load_corpus(max_bytes=4096)
    model = lm.TinyGPT(d_model=8, n_layers=1, n_heads=2, max_seq_len=16)
    params = list(torch.nn.Linear(2, 2).parameters())
    big = lm.MAX_COUNT
    out = [
        Combo("lm.batch: seq_len x batch_size too large", lm.batch,
              {"data": corpus.train, "seq_len": corpus.train.numel() - 1, "batch_size": big},
              ("seq_len", "batch_size")),
        Combo("lm.evaluate: batch_size x seq_len too large", lm.evaluate,
              {"model": model, "corpus": corpus, "seq_len": 16, "batch_size": big}, ("seq_len", "batch_size")),
        Combo("lm.evaluate: seq_len beyond the model's max_seq_len", lm.evaluate,
              {"model": model, "corpus": corpus, "seq_len": 64, "batch_size": 2}, ("seq_len",)),
        Combo("lm.LMConfig: tokens per step too large", lm.LMConfig,
              {"seq_len": big, "batch_size": big}, ("seq_len", "batch_size")),
        Combo("lm.TinyGPT: d_model x n_layers too many parameters", lm.TinyGPT,
              {"d_model": 65536, "n_layers": 1024, "n_heads": 1}, ("d_model", "n_layers")),
        Combo("lm.TinyGPT: max_seq_len x d_model too many parameters", lm.TinyGPT,
              {"d_model": 4096, "max_seq_len": big, "n_heads": 1}, ("d_model", "max_seq_len")),
        Combo("lm.load_corpus: max_bytes x val_fraction leaves no validation split", lm.load_corpus,
              {"max_bytes": 1024, "val_fraction": 1e-6}, ("val_fraction", "max_bytes")),
        Combo("lm.train_lm: seq_len beyond the model's max_seq_len", lm.train_lm,
              {"model": model, "corpus": corpus, "config": lm.LMConfig(seq_len=64, steps=1),
               "sources": [SlopeSource()]},
              ("seq_len",)),
        Combo("lm_serve.generate: prompt + new_tokens beyond max_seq_len", lm_serve.generate,
              {"model": model, "prompts": torch.zeros(1, 10, dtype=torch.long), "new_tokens": 10}, ("new_tokens",)),
        Combo("lm.compile_break_even_steps: overflows", lm.compile_break_even_steps,
              {"compile_seconds": 1e308, "eager_step_seconds": 2e-300, "compiled_step_seconds": 1e-300},
              ("compile_seconds", "step_seconds")),
        Combo("lm_serve.serving_break_even_tokens: overflows", lm_serve.serving_break_even_tokens,
              {"training_joules": 1e308, "joules_per_generated_token": 1e-308},
              ("training_joules", "joules_per_generated_token")),
        Combo("optimizers.adamw: lr x weight_decay >= 1 flips the weights' sign", optimizers.adamw,
              {"params": params, "lr": 10.0, "weight_decay": 0.5}, ("lr", "weight_decay")),
        Combo("PowerMonitor: hz x window_s too many samples", PowerMonitor,
              {"hz": 1000, "window_s": 1001, "sources": [SlopeSource()]}, ("hz", "window_s")),
    ]
    return out


def fuzz_combos(tmp: Path, examples: int = 6) -> list:
    """[(combo name, outcome, detail)] for every :func:`combos` call, then ``examples`` drawn
    pairs (seq_len, batch_size), each within its own range, whose product is too many tokens."""
    from greenlab.techniques import lm

    rows = []
    for combo in combos(tmp):
        ep = EntryPoint(combo.name, combo.call, {}, {}, {"_": list(combo.names)})
        rows.append((combo.name, *classify_call(ep, combo.kwargs, list(combo.names))))
    sizes = st.tuples(st.integers(1, lm.MAX_COUNT), st.integers(1, lm.MAX_COUNT)).filter(
        lambda p: p[0] * p[1] > lm.MAX_TOKENS_PER_BATCH)
    ep = EntryPoint("lm.LMConfig(seq_len x batch_size)", lm.LMConfig, {}, {})

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=("generate",))
    @given(sizes)
    def run(pair):
        kwargs = {"seq_len": pair[0], "batch_size": pair[1]}
        rows.append((f"{ep.name} {pair}", *classify_call(ep, kwargs, ["seq_len", "batch_size"])))

    run()
    return rows


# --- running -----------------------------------------------------------------------------------

def classify(ep: EntryPoint, arg: str, value) -> tuple[str, str]:
    """(outcome, detail) of calling ``ep`` with ``arg`` replaced by ``value``."""
    kwargs = dict(ep.base)
    kwargs[arg] = value
    return classify_call(ep, kwargs, [arg] + list(ep.aliases.get(arg, [])),
                         path=str(value) if arg in ep.paths else None)


def classify_call(ep: EntryPoint, kwargs: dict, names: list, path: str | None = None) -> tuple[str, str]:
    """(outcome, detail) of ``ep.call(**kwargs)``: clear when the error names one of ``names``
    (or, for a path argument, an OSError names ``path``)."""
    with warnings.catch_warnings(), _time_limit(CALL_LIMIT_S):
        warnings.simplefilter("ignore")
        try:
            ep.call(**kwargs)
        except (ValueError, TypeError) as exc:
            text = str(exc).lower()
            if any(n.lower() in text for n in names):
                return "clear", ""
            return "unnamed", f"{type(exc).__name__}: {exc}"
        except OSError as exc:  # right for a path that cannot be used, when it names the path
            if path is not None and path in str(exc):
                return "clear", ""
            return "wrong-type", f"{type(exc).__name__}: {exc}"
        except _TookTooLong:
            return "silent", f"accepted: still working after {CALL_LIMIT_S} s"
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            return "wrong-type", f"{type(exc).__name__}: {exc}"
    return "silent", "no error"


CALL_LIMIT_S = 30  # a bad input that starts real work instead of being refused shows up here


class _TookTooLong(BaseException):
    pass


@contextlib.contextmanager
def _time_limit(seconds):
    """Interrupt the call after ``seconds`` (POSIX main thread; elsewhere no limit)."""
    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(signum, frame):
        raise _TookTooLong()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- every public entry point, enumerated ---------------------------------------------------------

EVERY = "every"  # --only this: the standard bad values on each parameter of everything gl.* exports
STANDARD_BAD = (("NaN", math.nan), ("inf", math.inf), ("negative", -1), ("wrong type", object()),
                ("empty", ""), ("huge", 10 ** 12))
# gl.* callables the enumerated pass does not call, and why (each is in the hand-made list above
# or has nothing to refuse)
NOT_CALLED = {
    "train": "starts training: fuzzed by hand above (train, TrainConfig(...))",
    "setup": "changes the session's settings: fuzzed by hand above (config.setup)",
    "load_ipython_extension": "needs an IPython shell: fuzzed by hand above (magics)",
    "unload_ipython_extension": "needs an IPython shell",
    "last_interrupted": "no parameters",
    "is_quick": "no parameters",
    "default_sources": "no parameters to refuse",
    **{name: ("a record the library returns (a window, a run, a comparison, the settings), built from inputs "
              "checked where they enter; no lesson or learner builds one")
       for name in ("Comparison", "ComponentEnergy", "Measurement", "RunResult", "Settings")},
}
AUTO_CALL_LIMIT_S = 10
_DIR_NAMES = "a folder name ('nan', 'inf', '-1', 'not-a-value', '1000000000000'): "
_LEGIT_DIR = {"greenlab data fetch": _DIR_NAMES + "fetch creates it (here refused for its missing dataset names)",
              "greenlab data status": _DIR_NAMES + "status says it is not there yet (tests/test_data_cli.py)",
              "greenlab data path": _DIR_NAMES + "path prints where a dataset will go (tests/test_data_cli.py)"}
_NOT_FINITE = ("written as Python writes it ('nan', 'inf'), on purpose: messages show an impossible reading with "
               "it, and a summary never fails on one")
_BUDGET = ("budget returns one of the values it is given, of any kind (a list, a name, a size in any "
           "unit); the code that uses the value checks it")
_MAGNITUDE = ("arithmetic on the caller's figure: 10**12 J is 278 MWh, the energy of one large training "
              "run (GPT-3's: 1,287 MWh, Patterson et al. 2021)")
# standard bad values that are valid for that argument: {(entry point, argument, label): why}
LEGITIMATE = {
    ("gl.TrainConfig", "seed", "huge"): "a valid seed (torch.manual_seed takes up to 2**63 - 1)",
    ("gl.TrainConfig", "grad_clip", "huge"): "a clip norm no gradient reaches: clipping never acts, as asked",
    ("gl.TrainConfig", "eval_every_samples", "huge"): ("an interval longer than the run: evaluations at epoch "
                                                       "ends only, which always happen"),
    ("gl.TrainConfig", "label", "empty"): "the default label (the run is then named 'train')",
    **{("gl.budget", arg, label): _BUDGET for arg in ("full", "quick", "gpu", "cpu", "grading")
       for label in ("wrong type", "huge")},
    ("gl.co2e_g", "joules", "huge"): _MAGNITUDE,
    ("gl.compare_regions", "joules", "huge"): _MAGNITUDE,
    ("gl.co2e_g", "pue", "huge"): "PUE has no physical maximum: arithmetic on the caller's figure",
    ("gl.compare_regions", "pue", "huge"): "PUE has no physical maximum: arithmetic on the caller's figure",
    ("gl.equivalents", "g_co2e", "huge"): "1,000 t CO2e, the footprint of a real fleet: arithmetic on the caller's figure",
    ("gl.format_mass", "grams", "huge"): "formatting a real magnitude (1,000 t)",
    ("gl.format_energy", "joules", "huge"): "formatting a real magnitude (278 MWh)",
    ("gl.format_energy", "joules", "negative"): ("a difference of energies: lesson 07 prints the energy one "
                                                 "choice saved, which may be negative"),
    **{(cmd, "--dir", label): why for cmd, why in _LEGIT_DIR.items()
       for label in ("NaN", "inf", "negative", "wrong type", "huge")},
    ("greenlab leaderboard show", "--limit", "huge"): "more rows than the board holds: all of them, as asked",
    ("gl.compare", "seed", "huge"): "a valid seed (torch.manual_seed takes up to 2**63 - 1)",
    ("gl.quiz", "seed", "huge"): "a valid seed (the option order is drawn by Python's random, which takes any int)",
    ("gl.quiz", "title", "empty"): "a quiz shown without a title, as asked",
    ("gl.format_bytes", "nbytes", "huge"): "formatting a real size (931 GiB)",
    **{("gl.plain_number", "value", label): why for label, why in (
        ("NaN", _NOT_FINITE), ("inf", _NOT_FINITE), ("negative", "a difference, written out"),
        ("huge", "writing a real magnitude out (1,000,000,000,000)"))},
    **{("gl.headline", arg, "empty"): "the default: no note on how many runs reached a target, or on the factor"
       for arg in ("reached", "note")},
}


def legitimate(entry: str, arg: str, label: str, outcome: str) -> str:
    """``outcome``, or "legitimate" when ``LEGITIMATE`` accepts that value of ``arg`` on purpose."""
    return "legitimate" if outcome != "clear" and (entry, arg, label) in LEGITIMATE else outcome


def public_callables() -> dict:
    """Everything ``greenlab/__init__.py`` exports that can be called, exceptions aside: {name: object}."""
    import types

    import greenlab as gl

    out = {}
    for name in getattr(gl, "__all__", None) or [n for n in dir(gl) if not n.startswith("_")]:
        obj = getattr(gl, name, None)
        if obj is None or isinstance(obj, types.ModuleType) or not callable(obj):
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        out[name] = obj
    return out


def _parameters(obj) -> list:
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]


def every_entry_points(tmp: Path) -> tuple[list, dict]:
    """(entry points, {gl name: why not fuzzed}): for each ``gl.*`` callable, one entry point whose
    valid call is the hand-made one for the same object (else its defaults, when every parameter has
    one), fuzzed with ``STANDARD_BAD`` on each parameter in turn."""
    hand = {}
    for ep in entry_points(tmp):
        hand.setdefault(id(ep.call), ep)
    eps, skipped = [], {}
    for name, obj in public_callables().items():
        if name in NOT_CALLED:
            skipped[name] = NOT_CALLED[name]
            continue
        params = _parameters(obj)
        if not params:
            skipped[name] = "no parameters"
            continue
        known = hand.get(id(obj))
        if known is not None:
            base = dict(known.base)
        elif all(p.default is not p.empty for p in params):
            base = {}
        else:
            skipped[name] = "no valid call known (a required parameter): " + ", ".join(
                p.name for p in params if p.default is p.empty)
            continue
        eps.append(EntryPoint(f"gl.{name}", obj, base, {p.name: None for p in params},
                              aliases=known.aliases if known is not None else {},
                              paths=known.paths if known is not None else ()))
    return eps, skipped


def fuzz_every(tmp: Path, sample: int | None = None) -> tuple[dict, dict]:
    """``STANDARD_BAD`` on each parameter of each ``gl.*`` callable (``sample``: only that many of the
    (entry point, parameter, value) calls, spread evenly); returns (record, skipped)."""
    global CALL_LIMIT_S
    eps, skipped = every_entry_points(tmp)
    calls = [(ep, arg, label, value) for ep in eps for arg in ep.bad for label, value in STANDARD_BAD]
    if sample is not None and sample < len(calls):
        step = len(calls) / sample
        calls = [calls[int(i * step)] for i in range(sample)]
    record: dict = {}
    saved, CALL_LIMIT_S = CALL_LIMIT_S, AUTO_CALL_LIMIT_S
    try:
        with _offline():
            for ep, arg, label, value in calls:
                outcome, detail = classify(ep, arg, value)
                outcome = legitimate(ep.name, arg, label, outcome)
                if outcome == "legitimate":
                    detail = LEGITIMATE[(ep.name, arg, label)]
                record.setdefault(ep.name, []).append((arg, label, outcome, detail))
    finally:
        CALL_LIMIT_S = saved
    return record, skipped


CLI_NOT_CALLED = {"lab": "starts JupyterLab in the foreground: its arguments are fuzzed by tests/test_cli_lab.py"}
CLI_PATHS = ("--dir",)  # path options (see EntryPoint.paths)
CLI_BAD = (("NaN", "nan"), ("inf", "inf"), ("negative", "-1"), ("wrong type", "not-a-value"), ("empty", ""),
           ("huge", str(10 ** 12)))


def _cli_help(words: list) -> str:
    import io

    from greenlab.cli.app import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli_main([*words, "--help"])
        except SystemExit:
            pass
    return out.getvalue()


def cli_commands() -> list:
    """Every ``greenlab`` subcommand (nested ones too), from ``greenlab --help``: [[word, ...]]."""
    import re

    found, todo = [], [[]]
    while todo:
        words = todo.pop(0)
        text = _cli_help(words)
        usage = text.split("\n\n")[0]
        subs = re.search(r"\{([\w,-]+)\}\s*\.\.\.", usage)
        if subs:
            todo.extend([*words, s] for s in subs.group(1).split(","))
        elif words:
            found.append(words)
    return found


def cli_options(words: list) -> list:
    """The options of ``greenlab WORDS`` that take a value (``--name VALUE``)."""
    import re

    return sorted(set(re.findall(r"^\s+(--[\w-]+) [A-Z_]+", _cli_help(words), flags=re.M)))


def fuzz_cli() -> tuple[dict, dict]:
    """``CLI_BAD`` on each value-taking option of each ``greenlab`` subcommand in turn; a call is
    clear when it exits non-zero (argparse's 2 included) with a message that names the option,
    silent when it exits 0. Returns (record, {command: why not fuzzed})."""
    import io

    from greenlab.cli.app import main as cli_main

    record, skipped = {}, {}
    for words in cli_commands():
        name = "greenlab " + " ".join(words)
        if words[0] in CLI_NOT_CALLED:
            skipped[name] = CLI_NOT_CALLED[words[0]]
            continue
        options = cli_options(words)
        if not options:
            skipped[name] = "no option takes a value"
            continue
        for option in options:
            for label, value in CLI_BAD:
                err = io.StringIO()
                outcome, detail = "silent", "exit 0"
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                        warnings.catch_warnings(), _time_limit(AUTO_CALL_LIMIT_S):
                    warnings.simplefilter("ignore")
                    try:
                        code = cli_main([*words, f"{option}={value}"])
                    except SystemExit as exc:
                        code = exc.code
                    except _TookTooLong:
                        code, detail = 0, f"accepted: still working after {AUTO_CALL_LIMIT_S} s"
                    except (ValueError, TypeError) as exc:
                        code, detail = 1, f"{type(exc).__name__}: {exc}"
                        err.write(str(exc))
                    except KeyboardInterrupt:
                        raise
                    except BaseException as exc:
                        code, outcome, detail = None, "wrong-type", f"{type(exc).__name__}: {exc}"
                if outcome != "wrong-type" and code not in (0, None):
                    said = err.getvalue().lower()
                    named = option.lower() in said or option[2:].replace("-", "_") in said
                    if option in CLI_PATHS and value:  # a folder that cannot be used: its path named is right
                        named = named or value.lower() in said
                    outcome = "clear" if named else "unnamed"
                    detail = "" if outcome == "clear" else said.strip().splitlines()[-1:] and said.strip().splitlines()[-1]
                outcome = legitimate(name, option, label, outcome)
                if outcome == "legitimate":
                    detail = LEGITIMATE[(name, option, label)]
                record.setdefault(name, []).append((option, label, outcome, str(detail)))
    return record, skipped


LESSONS_12_15 = "lessons 11, 13-15"  # --only this: just the entry points added for lessons 11 and 13 to 15


def fuzz(examples: int, tmp: Path, only: str | None = None, progress=None, exclude=()) -> dict:
    """Run ``examples`` bad inputs per entry point, then every extreme-together call (as the
    entry point "extreme together"); returns {entry point: [(arg, value, outcome, detail)]}."""
    record: dict = {}
    group = {ep.name for ep in lessons_12_to_15_entry_points(tmp)} if only == LESSONS_12_15 else None
    with _offline():
        for ep in entry_points(tmp):
            if group is not None:
                if ep.name not in group:
                    continue
            elif only and only not in ep.name:
                continue
            if any(word in ep.name for word in exclude):
                continue
            rows = record.setdefault(ep.name, [])
            arg_value = _one_bad_argument(ep)

            _run_one(ep, rows, arg_value, examples)
            if progress is not None:
                progress(ep.name, rows)
        if group is None and (not only or only in "extreme together"):
            record["extreme together"] = [("several", name, outcome, detail)
                                          for name, outcome, detail in fuzz_combos(tmp, examples)]
    return record


@contextlib.contextmanager
def _offline():
    """Dataset downloads go to a port nothing listens on, so a bad input that slips through
    fails at once instead of downloading."""
    import socket

    import torchvision

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    saved = {cls: (cls.mirrors, getattr(cls, "url", None))
             for cls in (torchvision.datasets.FashionMNIST, torchvision.datasets.CIFAR10) if hasattr(cls, "mirrors")}
    cifar_url = torchvision.datasets.CIFAR10.url
    try:
        torchvision.datasets.FashionMNIST.mirrors = [url]
        torchvision.datasets.CIFAR10.url = url + "cifar-10-python.tar.gz"
        yield
    finally:
        for cls, (mirrors, _) in saved.items():
            cls.mirrors = mirrors
        torchvision.datasets.CIFAR10.url = cifar_url


def _one_bad_argument(ep: EntryPoint):
    """A strategy for (argument name, bad value) of ``ep``. A closure, not a lambda with ``ep`` as a
    default: hypothesis labels a flatmap by the repr of its function's defaults, and an entry point's
    repr holds answers built to raise on repr."""
    def draw(name):
        return st.tuples(st.just(name), ep.bad[name])

    return st.sampled_from(sorted(ep.bad)).flatmap(draw)


def _run_one(ep, rows, arg_value, examples):
    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=("generate",))
    @given(arg_value)
    def run(pair):
        arg, value = pair
        outcome, detail = classify(ep, arg, value)
        rows.append((arg, _short(value), outcome, detail))

    run()


def _short(value) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def summary(record: dict, limit: int = 60) -> tuple[dict, str]:
    totals = {o: 0 for o in OUTCOMES}
    lines = [f"{'entry point':<38} {'inputs':>6} " + " ".join(f"{o:>10}" for o in OUTCOMES)]
    for name, rows in record.items():
        counts = {o: sum(1 for r in rows if r[2] == o) for o in OUTCOMES}
        for o in OUTCOMES:
            totals[o] += counts[o]
        lines.append(f"{name:<38} {len(rows):>6} " + " ".join(f"{counts[o]:>10}" for o in OUTCOMES))
    n = sum(totals.values())
    lines.append(f"{'TOTAL (' + str(len(record)) + ' entry points)':<38} {n:>6} "
                 + " ".join(f"{totals[o]:>10}" for o in OUTCOMES))
    # the worst first: silent acceptances, then crashes, then refusals that do not name the argument
    bad = [(name, r) for kind in ("silent", "wrong-type", "unnamed", "legitimate")
           for name, rows in record.items() for r in rows if r[2] == kind]
    for name, (arg, value, outcome, detail) in bad[:limit]:
        lines.append(f"  {outcome:<10} {name}({arg}={value}): {detail[:160]}")
    return totals, "\n".join(lines)


def _progress(name: str, rows: list) -> None:
    counts = {o: sum(1 for r in rows if r[2] == o) for o in OUTCOMES}
    print(f"{time.strftime('%H:%M:%S')} {name:<38} {len(rows):>6} " + " ".join(f"{counts[o]:>10}" for o in OUTCOMES),
          file=sys.stderr, flush=True)
    for arg, value, outcome, detail in rows:
        if outcome not in ("clear", "legitimate"):
            print(f"    {outcome:<10} {name}({arg}={value}): {detail[:200]}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=6, help="bad inputs per entry point (default 6)")
    parser.add_argument("--exclude", default="", help="comma-separated: leave out entry points whose name "
                                                         "contains any of these")
    parser.add_argument("--progress", action="store_true",
                        help="print each entry point's counts (and its bad inputs) to stderr as soon as it is done")
    parser.add_argument("--only", default=None, help="fuzz only entry points whose name contains this "
                                                     f"('{LESSONS_12_15}': those added for lessons 11 and 13 to 15; '{EVERY}': "
                                                     "the standard bad values on every parameter of every gl.* callable "
                                                     "and every option of every greenlab subcommand)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))  # the fake energy source
    os.environ.setdefault("GREENLAB_RESULTS_DIR", tempfile.mkdtemp(prefix="greenlab-fuzz-results-"))
    with tempfile.TemporaryDirectory(prefix="greenlab-fuzz-") as tmp:
        if args.only == EVERY:
            record, skipped = fuzz_every(Path(tmp))
            cli_record, cli_skipped = fuzz_cli()
            record.update(cli_record)
            skipped.update(cli_skipped)
        else:
            record, skipped = fuzz(args.examples, Path(tmp), args.only, _progress if args.progress else None,
                                   [w for w in args.exclude.split(",") if w]), {}
    totals, text = summary(record, limit=400 if args.only else 60)
    print(text)
    for name, why in skipped.items():
        print(f"  not fuzzed {name if name.startswith('greenlab ') else 'gl.' + name}: {why}")
    return 0 if totals["clear"] + totals["legitimate"] == sum(totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
