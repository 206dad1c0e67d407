"""Fuzz greenlab's public entry points with bad inputs and count how each was answered.

    python benchmarks/fuzz_inputs.py                 # CI size: 6 inputs per entry point
    python benchmarks/fuzz_inputs.py --examples 40   # the large run

Every input is bad by construction: exactly one argument of an otherwise valid call is replaced
by a value outside its accepted range (wrong type, NaN/inf, negative, too large, an unknown name),
drawn by hypothesis (derandomized, so a run is reproducible). Each call is classified:

- ``clear``: a ValueError or TypeError whose message names the argument;
- ``unnamed``: a ValueError or TypeError that does not name it;
- ``wrong-type``: any other exception (KeyError, AttributeError, OverflowError, ...);
- ``silent``: no error at all, so a bad input produced a result (silently wrong).

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
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUTCOMES = ("clear", "unnamed", "wrong-type", "silent")


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


def not_a(*_kinds):
    """Objects of the wrong kind for an argument that takes a model, tensor, path or callable."""
    return st.one_of(st.integers(), st.floats(), st.text(max_size=4), st.none(), st.just(object()))


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
    from greenlab import carbon

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
    from greenlab import (batching, carbon, compress, data, experiments, leaderboard, models,
                          profiling, report, results, scaling, scheduling, search, units)

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
    add("TrainConfig(sizes)", tc, {}, {k: integer(1, 2**40) for k in ("batch_size", "accum_steps", "eval_batch_size", "lr_step_size")})
    add("TrainConfig(epochs/steps)", tc, {}, {"epochs": integer(1, 100_000), "max_steps": integer(1, 2**40, optional=True),
                                             "eval_every": integer(1, 2**40, optional=True), "patience": integer(1, 2**40, optional=True),
                                             "warmup_steps": integer(0, 2**40)})
    add("TrainConfig(optimiser)", tc, {}, {"lr": number(0, 100, low_open=True), "momentum": number(0, 1, high_open=True),
                                           "weight_decay": number(**frac01), "lr_gamma": number(0, 1, low_open=True),
                                           "grad_clip": number(**pos, optional=True)})
    add("TrainConfig(flags)", tc, {}, {k: flag() for k in ("stop_at_target", "eval_autocast", "channels_last", "compile", "pin_memory")})
    add("TrainConfig(names)", tc, {}, {"precision": name_not_in(lambda s: s in ("fp32", "bf16", "fp16")),
                                       "optimizer": name_not_in(lambda s: s in ("sgd", "adam", "adamw")),
                                       "loader": name_not_in(lambda s: s in ("device", "dataloader")),
                                       "region": name_not_in(_region_ok)})
    add("TrainConfig(target/seed)", tc, {}, {"target_accuracy": number(0, 1, low_open=True, optional=True),
                                             "seed": integer(0, 2**63 - 1), "num_workers": integer(0, 1024),
                                             "prefetch_factor": integer(1, 2**40, optional=True)})
    add("train", train_call, {"model": mlp(), "data": ds, "config": cfg(batch_size=8)},
        {"model": not_a(), "data": not_a(), "config": not_a().filter(lambda v: v is not None),  # None: defaults
         "callbacks": st.one_of(st.lists(st.one_of(st.integers(), st.text(max_size=2)), min_size=1, max_size=2), st.integers()),
         "stop_event": st.one_of(st.integers(), st.text(max_size=2))})
    # carbon
    add("carbon.intensity", carbon.intensity, {"region": "WORLD"}, {"region": name_not_in(_region_ok)})
    add("carbon.co2e_g", carbon.co2e_g, {"joules": 1.0}, {"joules": number(**nonneg), "region": name_not_in(_region_ok),
                                                         "pue": number(1, optional=True)})
    add("carbon.compare_regions", carbon.compare_regions, {"joules": 1.0, "codes": ["FRA"]},
        {"joules": number(**nonneg), "codes": st.one_of(st.text(max_size=3), st.integers(), st.just([]), st.lists(st.integers(), min_size=1, max_size=2)),
         "pue": number(1, optional=True)})
    add("carbon.equivalents", carbon.equivalents, {"g_co2e": 1.0}, {"g_co2e": number(**nonneg)})
    add("carbon.format_mass", carbon.format_mass, {"grams": 1.0}, {"grams": number(**nonneg)})
    # units
    for fname, arg in (("joules_to_kwh", "joules"), ("kwh_to_joules", "kwh"), ("joules_to_wh", "joules"),
                       ("wh_to_joules", "wh"), ("g_to_kg", "grams"), ("kg_to_g", "kilograms"), ("format_energy", "joules")):
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
        {"sizes": st.one_of(st.just({}), st.just({1: 8}), st.dictionaries(st.integers(max_value=-1), st.integers(), min_size=1, max_size=1),
                            st.just({0: 0}), st.integers(), st.text(max_size=2))})
    add("batching.ramp", batching.ramp, {"start": 8, "end": 64, "epochs": 4},
        {"start": integer(1), "end": integer(1), "epochs": integer(1), "multiple_of": integer(1)})
    add("batching.on_plateau", batching.on_plateau, {"start": 8},
        {"start": integer(1), "factor": number(1, 1e6, low_open=True), "patience": integer(1), "max_size": integer(8),
         "min_delta": number(0, 1e6)})
    add("batching.warmup", batching.warmup, {"warmup_steps": 10}, {"warmup_steps": integer(0), "start_factor": number(**frac01)})
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
         "seconds": number(**nonneg), "accuracy": number(**frac01), "target_accuracy": number(0, 1, low_open=True, optional=True),
         "co2e_g": number(**nonneg, optional=True), "region": name_not_in(_region_ok),
         "estimated": st.one_of(st.integers(), st.text(max_size=2)), "sources": st.one_of(st.integers(), st.text(max_size=2))})
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
    add("profiling.CheckpointCallback", profiling.CheckpointCallback, {"path": tmp / "cb.pt"}, {"every_steps": integer(1)})
    # energy
    add("energy.measure_idle", measure_idle, {"seconds": 0.01}, {"seconds": number(0, 86_400, low_open=True)})
    add("energy.PowerMonitor", gl.PowerMonitor, {"sources": [SlopeSource()]},
        {"hz": number(0, 1000, low_open=True), "window_s": number(0, low_open=True)})
    add("energy.trapezoid_joules", gl.energy.trapezoid_joules, {"times_s": [0.0, 1.0], "watts": [1.0, 1.0]},
        {"times_s": st.one_of(st.just([1.0, 0.0]), st.just([0.0, math.nan]), st.just([0.0]), st.integers()),
         "watts": st.one_of(st.just([1.0, math.nan]), st.just([1.0]), st.just([-1.0, 1.0]), st.integers())})
    # data and models
    add("data.generate", data.generate, {"n_train": 20, "n_test": 10},
        {"name": name_not_in(lambda s: s.strip().lower() in ("synthetic", "fashion-mnist", "cifar10", "fashionmnist", "fmnist", "cifar-10", "fashion_mnist", "cifar_10")),
         "n_train": integer(1, 10**6), "n_test": integer(1, 10**6), "seed": integer(0), "difficulty": number(0, 100)},  # 0: no pixel noise
        aliases={"name": ["dataset"]})
    add("data.DeviceLoader", data.DeviceLoader, {"x": ds.train_x, "y": ds.train_y, "batch_size": 8},
        {"batch_size": integer(1), "x": not_a(), "y": st.just(ds.train_y[:3]), "shuffle": flag(), "seed": integer(0)})
    add("data.Augment", data.Augment, {}, {"flip": flag(), "crop_padding": integer(0, 64)})
    add("models.flops", models.flops, {"model": mlp(), "input_shape": (1, 4, 4)},
        {"model": not_a(), "input_shape": st.one_of(st.just((0, 4)), st.integers(), st.text(max_size=2)), "batch_size": integer(1)})
    add("models.count_params", models.count_params, {"model": mlp()}, {"model": not_a(), "trainable_only": flag()})
    # cost-benefit, scheduling, report, experiments
    add("scaling.gpu", scaling.gpu, {"name": scaling.gpus()[0].name}, {"name": name_not_in(lambda s: False)})
    add("scaling.cost_benefit", scaling.cost_benefit,
        {"gpu_or_name": scaling.gpus()[0].name, "n_devices": 2, "single_device_hours": 1.0, "scaling_efficiency": 0.9},
        {"n_devices": integer(1), "single_device_hours": number(**pos), "scaling_efficiency": number(0, 1, low_open=True),
         "region": name_not_in(_region_ok), "pue": number(1, optional=True), "price_per_device_hour": number(**nonneg, optional=True)})
    add("scaling.scaling_efficiency", scaling.scaling_efficiency, {"t1_seconds": 10.0, "tn_seconds": 6.0, "n_devices": 2},
        {"t1_seconds": number(**pos), "tn_seconds": number(**pos), "n_devices": integer(1)})
    add("scheduling.from_values", scheduling.from_values, {"values": [1.0] * 24},
        {"values": st.one_of(st.just([]), st.lists(st.sampled_from([math.nan, -1.0, math.inf]), min_size=1, max_size=3), st.integers(), st.text(max_size=3))})
    add("scheduling.best_window", scheduling.best_window, {"profile": profile, "hours_needed": 3},
        {"hours_needed": integer(1, 24), "wrap": flag(), "now": integer(0, 23), "profile": not_a()})
    add("scheduling.window_means", scheduling.window_means, {"profile": profile, "hours_needed": 3},
        {"hours_needed": integer(1, 24), "wrap": flag()})
    add("scheduling.load_profile", scheduling.load_profile, {"name": scheduling.profiles()[0]},
        {"name": name_not_in(lambda s: s in scheduling.profiles())})
    add("report.datasheet_efficiency", report.datasheet_efficiency, {},
        {"precision": name_not_in(lambda s: s in ("fp32", "tf32", "bf16", "fp16", "int8"))})
    add("experiments.summarize", experiments.summarize, {"values": [1.0, 2.0]},
        {"values": st.one_of(st.integers(), st.text(max_size=2), st.lists(st.sampled_from(["a", object(), True, 1j]), min_size=1, max_size=3))})
    # (None and non-finite values are documented as missing runs there, so they are not bad input)
    add("experiments.paired", experiments.paired, {"variant_values": [1.0, 2.0], "baseline_values": [2.0, 3.0], "metric": "joules"},
        {"variant_values": st.one_of(st.integers(), st.just([1.0]), st.just(["a", 1.0])),
         "baseline_values": st.one_of(st.integers(), st.just([object(), 1.0])), "metric": st.one_of(st.integers(), st.none())})
    add("experiments.equal_accuracy_saving", experiments.equal_accuracy_saving,
        {"candidate_joules": 1.0, "baseline_joules": 2.0, "candidate_accuracy": 0.9, "baseline_accuracy": 0.9},
        {"candidate_joules": number(**nonneg), "baseline_joules": number(**pos), "candidate_accuracy": number(**frac01),
         "baseline_accuracy": number(**frac01), "tolerance": number(**frac01)})
    add("experiments.t_quantile_975", experiments.t_quantile_975, {"df": 3}, {"df": integer(1)})
    # compression and search
    add("compress.prune_unstructured", compress.prune_unstructured, {"model": mlp(), "amount": 0.5},
        {"amount": number(0, 1, high_open=True), "model": not_a()})
    add("compress.prune_channels", compress.prune_channels, {"model": models.build("cnn", in_channels=1, num_classes=3), "amount": 0.5},
        {"amount": number(0, 1, high_open=True), "model": not_a()})
    add("compress.break_even_inferences", compress.break_even_inferences,
        {"compression_joules": 10.0, "joules_per_inference_before": 2.0, "joules_per_inference_after": 1.0},
        {"compression_joules": number(**nonneg), "joules_per_inference_before": number(**pos), "joules_per_inference_after": number(**nonneg)})
    add("compress.distillation_loss", compress.distillation_loss,
        {"student_logits": torch.zeros(2, 3), "teacher_logits": torch.zeros(2, 3), "targets": torch.zeros(2, dtype=torch.long)},
        {"temperature": number(0, 100, low_open=True), "alpha": number(**frac01)})
    add("search.break_even", search.break_even, {"search_joules": 10.0, "saved_joules_per_use": 1.0},
        {"search_joules": number(**nonneg), "saved_joules_per_use": number()})  # <= 0: never repaid (inf)
    add("search.spearman", search.spearman, {"a": [1.0, 2.0, 3.0], "b": [1.0, 3.0, 2.0]},
        {"a": st.one_of(st.integers(), st.just([1.0]), st.just([1.0, math.nan, 2.0])), "b": st.one_of(st.just([1.0, 2.0]), st.integers())})
    add("search.SearchSpace", search.SearchSpace, {}, {"depth": st.one_of(st.just(()), st.just((0,)), st.integers()),
                                                     "width": st.one_of(st.just(()), st.just((-1,)), st.text(max_size=2)),
                                                     "num_classes": integer(2)})
    add("search.pareto_front", search.pareto_front, {"points": [{"accuracy": 0.5, "joules": 1.0}]},
        {"points": st.one_of(st.integers(), st.just([{"accuracy": 0.5}]), st.just([1, 2])),
         "objectives": st.one_of(st.just((("accuracy", "up"),)), st.integers(), st.just(()))})
    add("config.setup", gl.setup, {"verbose": False, "device": "cpu"},
        {"seed": integer(0, 2**32 - 1), "quick": st.one_of(st.integers(), st.text(max_size=2)),
         "device": name_not_in(lambda s: s in ("cpu", "cuda") or s.startswith("cuda:")).filter(lambda v: v is not None)})
    add("config.budget", gl.budget, {"full": 10, "quick": 2}, {"full": st.one_of(st.just(math.nan), st.just(-1)), "quick": st.one_of(st.just(math.nan), st.just(-1))})
    add("quiz.load", gl.quiz.__module__ and __import__("greenlab.quiz", fromlist=["load"]).load, {"lesson": "00"},
        {"lesson": name_not_in(lambda s: s in __import__("greenlab.quiz", fromlist=["lessons"]).lessons())})
    return eps


# --- running -----------------------------------------------------------------------------------

def classify(ep: EntryPoint, arg: str, value) -> tuple[str, str]:
    """(outcome, detail) of calling ``ep`` with ``arg`` replaced by ``value``."""
    kwargs = dict(ep.base)
    kwargs[arg] = value
    with warnings.catch_warnings(), _time_limit(CALL_LIMIT_S):
        warnings.simplefilter("ignore")
        try:
            ep.call(**kwargs)
        except (ValueError, TypeError) as exc:
            text = str(exc).lower()
            names = [arg] + list(ep.aliases.get(arg, []))
            if any(n.lower() in text for n in names):
                return "clear", ""
            return "unnamed", f"{type(exc).__name__}: {exc}"
        except OSError as exc:  # right for a path that cannot be used, when it names the path
            if arg in ep.paths and str(value) in str(exc):
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


def fuzz(examples: int, tmp: Path, only: str | None = None) -> dict:
    """Run ``examples`` bad inputs per entry point; returns {entry point: [(arg, value, outcome, detail)]}."""
    record: dict = {}
    for ep in entry_points(tmp):
        if only and only not in ep.name:
            continue
        rows = record.setdefault(ep.name, [])
        arg_value = st.sampled_from(sorted(ep.bad)).flatmap(lambda a, ep=ep: st.tuples(st.just(a), ep.bad[a]))

        _run_one(ep, rows, arg_value, examples)
    return record


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
    bad = [(name, r) for name, rows in record.items() for r in rows if r[2] != "clear"]
    for name, (arg, value, outcome, detail) in bad[:limit]:
        lines.append(f"  {outcome:<10} {name}({arg}={value}): {detail[:160]}")
    return totals, "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=6, help="bad inputs per entry point (default 6)")
    parser.add_argument("--only", default=None, help="fuzz only entry points whose name contains this")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))  # the fake energy source
    os.environ.setdefault("GREENLAB_RESULTS_DIR", tempfile.mkdtemp(prefix="greenlab-fuzz-results-"))
    with tempfile.TemporaryDirectory(prefix="greenlab-fuzz-") as tmp:
        record = fuzz(args.examples, Path(tmp), args.only)
    totals, text = summary(record)
    print(text)
    return 0 if totals["clear"] == sum(totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
