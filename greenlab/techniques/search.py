"""Efficient architecture search over greenlab's CNN family, with its own energy bill (lesson 04
(04_architecture_search)).

- ``SearchSpace``: depth x width x kernel size x separable convolutions; every candidate's
  parameters and FLOPs (``greenlab.training.models.count_params`` / ``flops``).
- ``pareto_front`` / ``plot_pareto``: the non-dominated candidates (e.g. most accurate per joule).
- ``random_search`` and ``regularized_evolution`` (Real et al., 2019), deterministic under a seed;
  both add up the joules their evaluations measured.
- Zero-cost proxies from one mini-batch (Abdelfattah et al., 2021): ``synflow``, ``grad_norm``;
  ``spearman`` to see how well a proxy ranks candidates.
- ``evolution_loop`` / ``evolve``: the bare aging-evolution loop on one fitness, and a search run by
  any such loop (a learner's own).
- ``compare_archs``: finalists retrained in paired, interleaved repeats, to pick a winner on means
  and verdicts rather than on one noisy run each.
- ``break_even``: how many uses before a search pays for itself; ``energy_per_inference``.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import random
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import progress, validation
from greenlab.base.units import plain_number
from greenlab.experiments import paired
from greenlab.experiments.arms import rotated, stepped, warm_up, warmup_config
from greenlab.techniques.compress import energy_per_inference as _measure_inference
from greenlab.training import loop as training_loop, models

DIRECTIONS = ("max", "min")
DEFAULT_OBJECTIVES = (("accuracy", "max"), ("joules", "min"))


# --- the search space --------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Arch:
    """One CNN architecture of ``greenlab.training.models.build("cnn", ...)``."""

    depth: int
    width: int
    kernel_size: int
    separable: bool

    def to_dict(self) -> dict:
        return {"depth": self.depth, "width": self.width, "kernel_size": self.kernel_size,
                "separable": self.separable}

    def __str__(self) -> str:
        sep = " sep" if self.separable else ""
        return f"d{self.depth} w{self.width} k{self.kernel_size}{sep}"


class SearchSpace:
    """All combinations of the given options for greenlab's CNN family.

    ``input_shape`` (C, H, W) and ``num_classes`` fix the model's input and output; ``norm`` is
    passed to ``models.build``. Costs (parameters, FLOPs per sample) are computed on demand and
    cached."""

    def __init__(self, depth=(1, 2, 3), width=(8, 16, 32), kernel_size=(3, 5), separable=(False, True),
                 input_shape=(1, 28, 28), num_classes: int = 10, norm: str = "batch"):
        self.options = {}
        for name, values in (("depth", depth), ("width", width), ("kernel_size", kernel_size),
                             ("separable", separable)):
            values = validation.items(name, values)
            if not values:
                raise ValueError(f"the search space is empty: {name} has no options")
            if len(set(values)) != len(values):
                raise ValueError(f"{name} has repeated options: {values}")
            self.options[name] = values
        for d in self.options["depth"]:
            models._check_int("depth", d, minimum=1, maximum=6)
        for w in self.options["width"]:
            models._check_int("width", w, minimum=1)
        for k in self.options["kernel_size"]:
            models._check_int("kernel_size", k, minimum=1)
            if k % 2 == 0:
                raise ValueError(f"kernel_size options must be odd, got {k}")
        for s in self.options["separable"]:
            if not isinstance(s, bool):
                raise ValueError(f"separable options must be True/False, got {s!r}")
        self.input_shape = tuple(validation.integer("input_shape entries", s, low=1, high=2**16)
                                 for s in validation.items("input_shape", input_shape))
        if len(self.input_shape) != 3:
            raise ValueError(f"input_shape must be (C, H, W), got {input_shape!r}")
        self.num_classes = validation.integer("num_classes", num_classes, low=2)
        self.norm = validation.text("norm", norm)
        self._costs = {}

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.options.values())

    def candidates(self) -> list:
        """Every architecture in the space, in a fixed order."""
        o = self.options
        return [Arch(d, w, k, s) for d, w, k, s in
                itertools.product(o["depth"], o["width"], o["kernel_size"], o["separable"])]

    def sample(self, rng) -> Arch:
        """One architecture chosen uniformly with ``rng`` (a ``random.Random`` or an int seed)."""
        rng = _rng(rng)
        o = self.options
        return Arch(rng.choice(o["depth"]), rng.choice(o["width"]), rng.choice(o["kernel_size"]),
                    rng.choice(o["separable"]))

    def mutate(self, arch: Arch, rng) -> Arch:
        """``arch`` with one dimension changed to a different option (a dimension with a single
        option never changes; in a one-candidate space the same arch comes back)."""
        rng = _rng(rng)
        free = [name for name, values in self.options.items() if len(values) > 1]
        if not free:
            return arch
        name = rng.choice(free)
        current = getattr(arch, name)
        choice = rng.choice([v for v in self.options[name] if v != current])
        return Arch(**{**arch.to_dict(), name: choice})

    def build(self, arch: Arch) -> nn.Module:
        """A fresh model for ``arch``."""
        return models.build("cnn", num_classes=self.num_classes, in_channels=self.input_shape[0],
                            depth=arch.depth, width=arch.width, kernel_size=arch.kernel_size,
                            separable=arch.separable, norm=self.norm)

    def cost(self, arch: Arch) -> dict:
        """{"params": trainable parameters, "flops": forward FLOPs per sample,
        "train_flops": forward+backward FLOPs per sample} (counted, not estimated)."""
        if arch not in self._costs:
            model = self.build(arch)
            # batch of 2: batch normalisation cannot train on one sample once the map is 1x1
            count = models.flops(model, self.input_shape, batch_size=2)
            self._costs[arch] = {"params": models.count_params(model),
                                 "flops": int(count.forward_per_sample),
                                 "train_flops": int(count.train_step_per_sample)}
        return dict(self._costs[arch])

    def table(self) -> list:
        """Every candidate as a dict with its parameters and FLOPs."""
        return [{**a.to_dict(), "arch": str(a), **self.cost(a)} for a in self.candidates()]

    def __repr__(self) -> str:
        return f"SearchSpace({len(self)} candidates: {self.options})"


# --- Pareto fronts -----------------------------------------------------------------------

def pareto_front(points, objectives=DEFAULT_OBJECTIVES) -> list:
    """The points no other point dominates, in their input order.

    ``points``: dicts (or objects with attributes) holding every objective. ``objectives``: pairs
    (key, "max" | "min"). A dominates B when A is at least as good on every objective and strictly
    better on one; equal points do not dominate each other, so duplicates on the front all stay.
    """
    objectives = _check_objectives(objectives)
    points = validation.items("points", points)
    values = [[validation.number(f"points: {key!r} of {p!r}", _value(p, key)) for key, _ in objectives]
              for p in points]
    signs = [1.0 if d == "max" else -1.0 for _, d in objectives]
    keyed = [[s * v for s, v in zip(signs, vals)] for vals in values]  # larger is better everywhere
    front = []
    for i, a in enumerate(keyed):
        dominated = any(all(x >= y for x, y in zip(b, a)) and any(x > y for x, y in zip(b, a))
                        for j, b in enumerate(keyed) if j != i)
        if not dominated:
            front.append(points[i])
    return front


def plot_pareto(points, x: str = "joules", y: str = "accuracy", objectives=DEFAULT_OBJECTIVES,
                label=None, ax=None):
    """Scatter every point (``x`` against ``y``) and draw its Pareto front. Returns the axes.
    ``label``: key whose value annotates front points (e.g. "arch")."""
    import matplotlib.pyplot as plt

    points = list(points)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([_value(p, x) for p in points], [_value(p, y) for p in points], color="0.6",
               label="candidates")
    front = sorted(pareto_front(points, objectives), key=lambda p: _value(p, x))
    ax.plot([_value(p, x) for p in front], [_value(p, y) for p in front], "o-", color="tab:green",
            label="Pareto front")
    if label is not None:
        for p in front:
            ax.annotate(str(_value(p, label)), (_value(p, x), _value(p, y)), fontsize=8,
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend()
    return ax


# --- search strategies -------------------------------------------------------------------

@dataclass
class SearchResult:
    """Every evaluation of a search, in order, and what the search cost.

    ``evaluations``: dicts with "arch" (an ``Arch``), "step", the candidate's params/FLOPs and
    whatever ``evaluate`` returned (at least the objectives and "joules").
    ``joules``: sum of the evaluations' measured joules (the search's own energy)."""

    evaluations: list
    objectives: tuple
    strategy: str
    seed: int
    seconds: float
    joules: float = 0.0
    estimated: bool = False
    notes: list = field(default_factory=list)

    def front(self) -> list:
        """Pareto-optimal evaluations under the search's objectives."""
        return pareto_front(self.evaluations, self.objectives)

    def archs(self) -> list:
        return [e["arch"] for e in self.evaluations]

    def best(self, key: str = "accuracy", direction: str = "max") -> dict:
        """The evaluation with the best ``key`` (first one on ties)."""
        pick = max if direction == "max" else min
        return pick(self.evaluations, key=lambda e: e[key])

    def summary(self) -> str:
        est = " (includes estimated energy)" if self.estimated else ""
        return (f"{self.strategy}: {len(self.evaluations)} evaluations, {len(self.front())} on the "
                f"Pareto front, search energy {plain_number(self.joules, 4)} J{est}, {plain_number(self.seconds)} s")


def random_search(space: SearchSpace, evaluate, budget: int, seed: int = 0,
                  objectives=DEFAULT_OBJECTIVES) -> SearchResult:
    """Evaluate ``budget`` distinct candidates drawn at random (all of them if the space is
    smaller). ``evaluate(arch) -> dict`` must return the objectives and "joules" (measured energy
    of that evaluation). Same seed, same candidates in the same order."""
    _check_budget(budget)
    objectives = _check_objectives(objectives)
    rng = random.Random(seed)
    pool = space.candidates()
    chosen = rng.sample(pool, min(budget, len(pool)))
    t0 = time.perf_counter()
    evals = [_evaluate(space, evaluate, arch, step, objectives) for step, arch in enumerate(chosen)]
    result = _result(evals, objectives, "random search", seed, time.perf_counter() - t0)
    if budget > len(pool):
        result.notes.append(f"budget {budget} > {len(pool)} candidates: evaluated every candidate once")
    return result


def regularized_evolution(space: SearchSpace, evaluate, budget: int, population: int = 8,
                          sample_size: int = 3, seed: int = 0, objectives=DEFAULT_OBJECTIVES,
                          fitness=None) -> SearchResult:
    """Regularized (aging) evolution of Real et al. (2019).

    Start with ``population`` random candidates; then, until ``budget`` evaluations, pick
    ``sample_size`` members of the population at random, take the best of them as parent,
    evaluate a mutated child, add it and remove the oldest member. "Best" is a random member of
    the sample's Pareto front under ``objectives`` (Pareto ranking), or, with ``fitness``
    (evaluation dict -> float, higher is better), the highest fitness (a scalarisation).
    Every evaluation counts toward ``budget`` (a repeated architecture is evaluated again).
    """
    _check_budget(budget)
    objectives = _check_objectives(objectives)
    _check_positive("population", population)
    _check_positive("sample_size", sample_size)
    if sample_size > population:
        raise ValueError(f"sample_size ({sample_size}) must be <= population ({population})")
    rng = random.Random(seed)
    t0 = time.perf_counter()
    evals, alive = [], []
    while len(evals) < min(population, budget):
        ev = _evaluate(space, evaluate, space.sample(rng), len(evals), objectives)
        evals.append(ev)
        alive.append(ev)
    while len(evals) < budget:
        contenders = rng.sample(alive, sample_size)
        if fitness is None:
            parent = rng.choice(pareto_front(contenders, objectives))
        else:
            parent = max(contenders, key=fitness)
        child = space.mutate(parent["arch"], rng)
        ev = _evaluate(space, evaluate, child, len(evals), objectives)
        ev["parent"] = parent["arch"]
        evals.append(ev)
        alive.append(ev)
        alive.pop(0)
    return _result(evals, objectives, "regularized evolution", seed, time.perf_counter() - t0)


def evolution_loop(space: SearchSpace, fitness_of, budget: int, population: int, sample_size: int,
                   rng) -> list:
    """The bare regularized-evolution loop (Real et al., 2019) on one fitness (higher is
    better): ``population`` random architectures first (``space.sample(rng)``), then until
    ``budget`` evaluations: sample ``sample_size`` living members (``rng.sample``), mutate the
    fittest (``space.mutate(parent, rng)``), evaluate the child, add it and retire the OLDEST.
    ``fitness_of(arch) -> float``. Returns every evaluation in order as (arch, fitness) pairs."""
    _check_budget(budget)
    _check_positive("population", population)
    _check_positive("sample_size", sample_size)
    rng = _rng(rng)
    history, alive = [], []
    while len(history) < min(population, budget):
        arch = space.sample(rng)
        history.append((arch, fitness_of(arch)))
        alive.append(history[-1])
    while len(history) < budget:
        parent = max(rng.sample(alive, min(sample_size, len(alive))), key=lambda member: member[1])
        child = space.mutate(parent[0], rng)
        history.append((child, fitness_of(child)))
        alive.append(history[-1])
        alive.pop(0)
    return history


def evolve(space: SearchSpace, evaluate, budget: int, fitness, population: int = 8, sample_size: int = 3,
           seed: int = 0, loop=None, objectives=DEFAULT_OBJECTIVES) -> SearchResult:
    """Regularized evolution run by ``loop(space, fitness_of, budget, population, sample_size, rng)``
    (default ``evolution_loop``; e.g. a learner's own), with every evaluation recorded like
    ``regularized_evolution``'s: ``evaluate(arch) -> dict`` (objectives and measured "joules")
    and ``fitness(evaluation dict) -> float`` (higher is better)."""
    _check_budget(budget)
    objectives = _check_objectives(objectives)
    loop = evolution_loop if loop is None else loop
    if not callable(loop) or not callable(fitness):
        raise ValueError("loop and fitness must be functions")
    evals = []

    def fitness_of(arch):
        if len(evals) >= budget:
            raise ValueError(f"the loop evaluated more than budget={budget} architectures")
        ev = _evaluate(space, evaluate, arch, len(evals), objectives)
        evals.append(ev)
        return float(fitness(ev))

    t0 = time.perf_counter()
    loop(space, fitness_of, budget, population, sample_size, random.Random(seed))
    return _result(evals, objectives, "regularized evolution", seed, time.perf_counter() - t0)


def train_evaluator(data, config, space: SearchSpace, train_kwargs=None):
    """An ``evaluate(arch)`` that trains ``space.build(arch)`` with ``greenlab.training.loop.train`` and
    returns accuracy (validation accuracy at the end: the search selects on it), test_accuracy
    (scored once at the end, for reporting only), joules and seconds (measured) and whether the
    energy was estimated."""
    kwargs = {"log": False} if train_kwargs is None else dict(train_kwargs)

    def evaluate(arch):
        res = training_loop.train(space.build(arch), data, config, **kwargs)
        return {"accuracy": res.val_accuracy if res.val_accuracy is not None else 0.0,
                "test_accuracy": res.final_accuracy, "joules": res.joules, "seconds": res.seconds,
                "estimated": bool(res.estimated), "status": res.status}

    return evaluate


@dataclass
class ArchComparison:
    """Architectures trained side by side in paired, interleaved repeats: repeat r trains every
    architecture once with seed ``seed + r``, one after the other, so a slow spell of the machine
    hits all of them. ``runs[arch]``: one ``RunResult`` per repeat."""

    archs: list
    runs: dict
    repeats: int

    def values(self, arch: Arch, metric: str) -> list:
        """Per-repeat figures of ``metric`` ("joules", "seconds", "val_accuracy", ...)."""
        if arch not in self.runs:
            raise ValueError(f"arch must be one of {[str(a) for a in self.archs]}, got {arch!r}")
        return [getattr(run, metric) for run in self.runs[arch]]

    def mean(self, arch: Arch, metric: str) -> float:
        """Mean of ``metric`` over the repeats that have it."""
        values = [v for v in self.values(arch, metric) if v is not None]
        if not values:
            raise ValueError(f"no repeat of {arch} has {metric!r}")
        return sum(values) / len(values)

    def paired(self, arch: Arch, baseline: Arch, metric: str):
        """``arch`` against ``baseline`` on ``metric``, paired by repeat (``experiments.Paired``)."""
        return paired(self.values(arch, metric), self.values(baseline, metric), metric, str(arch), str(baseline))

    @property
    def joules(self) -> float:
        """Energy of every training in the comparison (joules): part of a search's bill."""
        return float(sum(run.joules for runs in self.runs.values() for run in runs))

    @property
    def estimated(self) -> bool:
        return any(bool(run.estimated) for runs in self.runs.values() for run in runs)


def compare_archs(space: SearchSpace, archs, data, config, repeats: int = 3, train_kwargs=None,
                  seed_offset: int = 0) -> ArchComparison:
    """Train each of ``archs`` (distinct ``Arch``es) ``repeats`` times with ``greenlab.training.loop``, in
    paired, interleaved repeats (see ``ArchComparison``): to confirm a search's winner with
    repeated runs instead of trusting one noisy evaluation each. Repeat r uses seed
    ``config.seed + seed_offset + r``: a second comparison with ``seed_offset`` past the first's
    repeats gives fresh runs, to estimate the winner's saving on repeats it was not chosen on."""
    import dataclasses

    archs = list(dict.fromkeys(validation.items("archs", archs)))
    if not archs or not all(isinstance(a, Arch) for a in archs):
        raise ValueError("archs must be a non-empty list of Arch")
    repeats = validation.integer("repeats", repeats, low=1)
    seed_offset = validation.integer("seed_offset", seed_offset, low=0)
    kwargs = {"log": False} if train_kwargs is None else dict(train_kwargs)
    runs = {a: [] for a in archs}
    lines = progress.Steps("greenlab.compare_archs", (1 + repeats) * len(archs), unit="run")
    with contextlib.closing(lines):
        # every architecture warmed up by a short discarded run first, then the repeats in rotating order
        warm_up({a: (lambda a=a: stepped(lines, f"warm-up {a} (discarded)", lambda: training_loop.train(
            space.build(a), data, warmup_config(dataclasses.replace(config, label=str(a))),
            **dict(kwargs, save=False)))) for a in archs})
        for r in range(repeats):
            for arch in rotated(archs, r):
                cfg = dataclasses.replace(config, seed=config.seed + seed_offset + r,
                                          label=f"{arch} repeat {seed_offset + r + 1}")
                runs[arch].append(stepped(lines, f"{arch} repeat {r + 1}/{repeats}",
                                          lambda: training_loop.train(space.build(arch), data, cfg, **kwargs)))
    return ArchComparison(archs=archs, runs=runs, repeats=repeats)


# --- zero-cost proxies -------------------------------------------------------------------

def synflow(model: nn.Module, input_shape) -> float:
    """SynFlow score (Tanaka et al., 2020; used as a zero-cost NAS proxy by Abdelfattah et al.,
    2021): on a copy of the model with |weights|, normalisation layers removed, in float64, the
    sum over conv/linear weights of |w x d(sum of outputs)/dw| for an all-ones input. No data."""
    net = _strip_norms(copy.deepcopy(model)).double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    net.zero_grad(set_to_none=True)
    dev = _device(net)
    x = torch.ones((1, *tuple(int(s) for s in input_shape)), dtype=torch.float64, device=dev)
    net(x).sum().backward()
    score = 0.0
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and m.weight.grad is not None:
            score += float((m.weight.detach() * m.weight.grad).abs().sum())
    return score


def grad_norm(model: nn.Module, batch, loss_fn=None) -> float:
    """Gradient-norm proxy (Abdelfattah et al., 2021): the sum over conv/linear layers of the L2
    norm of the weight gradient of ``loss_fn`` (default cross-entropy) on one mini-batch (x, y).
    Runs on a copy, so the model's weights, buffers and gradients are untouched."""
    x, y = batch
    net = copy.deepcopy(model).train()
    net.zero_grad(set_to_none=True)
    dev = _device(net)
    (loss_fn or F.cross_entropy)(net(x.to(dev)), y.to(dev)).backward()
    total = 0.0
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and m.weight.grad is not None:
            total += float(m.weight.grad.norm())
    return total


def spearman(a, b) -> float:
    """Spearman rank correlation of two equal-length sequences (ties get average ranks)."""
    a = [validation.number(f"a[{i}]", v) for i, v in enumerate(validation.items("a", a))]
    b = [validation.number(f"b[{i}]", v) for i, v in enumerate(validation.items("b", b))]
    if len(a) != len(b):
        raise ValueError(f"a and b differ in length: {len(a)} vs {len(b)}")
    if len(a) < 2:
        raise ValueError("spearman needs at least two pairs")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    if va == 0 or vb == 0:
        raise ValueError("spearman is undefined when one sequence is constant")
    return cov / math.sqrt(va * vb)


# --- is the search worth it? -------------------------------------------------------------

def break_even(search_joules: float, saved_joules_per_use: float) -> float:
    """How many uses (trainings or inferences) of the found model it takes to save the energy the
    search spent: the smallest whole n with n x saved >= search_joules; ``math.inf`` if the found
    model saves nothing.

    Why it matters: Strubell et al. (2019, "Energy and Policy Considerations for Deep Learning in
    NLP") estimated about 626,155 lbs of CO2e for a neural architecture search behind the Evolved
    Transformer. Patterson et al. (2021, "Carbon Emissions and Large Neural Network Training",
    arXiv:2104.10350; revisited in Patterson et al., 2022) recomputed that search's footprint with
    the hardware, data centre and energy mix actually used and found it far smaller. Either way,
    a search is a one-off cost repaid by every later use of a cheaper model.
    """
    for label, value in (("search_joules", search_joules), ("saved_joules_per_use", saved_joules_per_use)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{label} must be a finite number of joules, got {value!r}")
    if search_joules < 0:
        raise ValueError(f"search_joules must be >= 0, got {search_joules}")
    if search_joules == 0:
        return 0
    if saved_joules_per_use <= 0:
        return math.inf
    n = search_joules / saved_joules_per_use
    return math.ceil(n - 1e-9 * n)


def energy_per_inference(model: nn.Module, input_shape, batch_size: int = 64, repeats: int = 20,
                         warmup: int = 2):
    """Measured energy and time per sample of inference on random inputs of shape
    (batch_size, *input_shape): ``greenlab.techniques.compress.energy_per_inference`` (one ``gl.measure``
    window around ``repeats`` batches). Returns its ``InferenceCost``."""
    _check_positive("batch_size", batch_size)
    x = torch.randn((batch_size, *tuple(int(s) for s in input_shape)), device=_device(model))
    return _measure_inference(model, x, repeats=repeats, warmup=warmup)


# --- helpers -----------------------------------------------------------------------------

def _evaluate(space, evaluate, arch, step, objectives) -> dict:
    metrics = evaluate(arch)
    if not isinstance(metrics, dict):
        raise ValueError(f"evaluate(arch) must return a dict, got {type(metrics).__name__}")
    missing = [k for k in [key for key, _ in objectives] + ["joules"] if k not in metrics]
    if missing:
        raise ValueError(f"evaluate(arch) must return {missing} (the objectives and the measured "
                         f"'joules' of the evaluation); got keys {sorted(metrics)}")
    return {"arch": arch, "step": step, "label": str(arch), **space.cost(arch), **metrics}


def _result(evals, objectives, strategy, seed, seconds) -> SearchResult:
    return SearchResult(evaluations=evals, objectives=objectives, strategy=strategy, seed=seed,
                        seconds=seconds, joules=float(sum(e["joules"] for e in evals)),
                        estimated=any(bool(e.get("estimated", False)) for e in evals))


def _check_objectives(objectives) -> tuple:
    objectives = tuple(tuple(validation.items("objectives entries", o))
                       for o in validation.items("objectives", objectives))
    if not objectives:
        raise ValueError("objectives must name at least one (key, 'max'|'min') pair")
    for o in objectives:
        if len(o) != 2 or not isinstance(o[0], str) or o[1] not in DIRECTIONS:
            raise ValueError(f"each of objectives must be (key, 'max' or 'min'), got {o!r}")
    return objectives


def _check_budget(budget):
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive integer (number of evaluations), got {budget!r}")


def _check_positive(label, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{label} must be a positive integer, got {value!r}")


def _value(point, key):
    if isinstance(point, dict):
        if key not in point:
            raise ValueError(f"points: {point!r} has no {key!r}")
        value = point[key]
    elif not hasattr(point, key):
        raise ValueError(f"points: {point!r} has no {key!r}")
    else:
        value = getattr(point, key)
    return value


def _rng(rng) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int) and not isinstance(rng, bool):
        return random.Random(rng)
    raise ValueError(f"rng must be a random.Random or an integer seed, got {rng!r}")


def _ranks(values) -> list:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _strip_norms(module: nn.Module) -> nn.Module:
    for name, child in module.named_children():
        if isinstance(child, (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)):
            setattr(module, name, nn.Identity())
        else:
            _strip_norms(child)
    return module


def _device(model) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
