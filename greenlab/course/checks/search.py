"""Lesson 04 (efficient architecture search): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, _sorted_indices, check_function, drawn_inputs, graded,
    is_placeholder, number_or_none)
from greenlab.techniques.search import Arch, SearchSpace, grad_norm, pareto_front

# Lesson 04 (architecture search) checkers: separable_conv_flops, pareto_indices,
# regularized_evolution, grad_norm_proxy.


@graded
def separable_conv_flops(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(c_in, c_out, kernel_size, height, width) -> (standard, separable)``:
    forward FLOPs of one k x k convolution layer, stride 1, 'same' padding (the output is
    height x width), no bias, counted like PyTorch's FlopCounterMode (2 FLOPs per multiply-add).
    Standard: 2 c_in c_out k^2 H W. Depthwise-separable (depthwise k x k, then pointwise 1 x 1):
    2 c_in k^2 H W + 2 c_in c_out H W."""
    inputs = [(1, 1, 1, 1, 1), (3, 8, 3, 4, 4), (16, 32, 3, 14, 14), (8, 8, 5, 7, 7), (32, 64, 1, 2, 3)]
    inputs += drawn_inputs(seed, "separable_conv_flops", lambda rng: (
        rng.randint(1, 64), rng.randint(1, 128), rng.choice([1, 3, 5, 7]), rng.randint(1, 32), rng.randint(1, 32)))
    cases = [((ci, co, k, h, w), (2 * ci * co * k * k * h * w, 2 * ci * k * k * h * w + 2 * ci * co * h * w))
             for ci, co, k, h, w in inputs]

    def as_pair(c_in, c_out, kernel_size, height, width):
        got = fn(c_in, c_out, kernel_size, height, width)
        if is_placeholder(got):
            return got
        return tuple(float(v) for v in got)

    def hint(args, expected, got):
        ci, co, k, h, w = args
        if not isinstance(got, tuple) or len(got) != 2:
            return "return two numbers: (standard_flops, separable_flops)."
        if math.isclose(got[0], expected[0] / 2) or math.isclose(got[1], expected[1] / 2):
            return "count 2 FLOPs per multiply-add (one multiply, one add), as FlopCounterMode does."
        if math.isclose(got[1], 2 * co * k * k * h * w + 2 * ci * co * h * w) and ci != co:
            return "the depthwise part has one k x k filter per INPUT channel: 2 c_in k^2 H W."
        if math.isclose(got[1], 2 * ci * k * k * h * w) or math.isclose(got[1], 2 * ci * co * h * w):
            return "a separable layer is both parts: the depthwise k x k and the pointwise 1 x 1."
        return None

    as_pair.__name__ = "separable_conv_flops"
    verdict = _not_a_function(fn, "separable_conv_flops")
    if verdict is not None:
        return verdict
    return check_function(as_pair, cases, rtol=1e-9, atol=0.0, name="separable_conv_flops", hint=hint)


@graded(reference=("greenlab.techniques.search:pareto_front",))
def pareto_indices(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(points) -> indices`` of the Pareto front of ``points``, a list of
    (accuracy, joules) pairs where higher accuracy and lower joules are better. A point is on the
    front when no other point is at least as good on both and strictly better on one (equal
    points all stay). Any order of the returned indices is accepted."""
    inputs = [
        [(0.9, 10.0)],
        [(0.8, 5.0), (0.9, 10.0), (0.7, 8.0)],
        [(0.5, 1.0), (0.6, 2.0), (0.7, 3.0), (0.65, 4.0), (0.7, 5.0)],
        [(0.8, 4.0), (0.8, 4.0), (0.6, 6.0)],
        [(0.9, 2.0), (0.5, 1.0), (0.95, 9.0), (0.9, 3.0), (0.4, 1.0)],
    ] + drawn_inputs(seed, "pareto_indices", lambda rng: [
        (rng.randint(40, 99) / 100, float(rng.randint(1, 30))) for _ in range(rng.randint(1, 10))])
    cases = []
    for pts in inputs:
        dicts = [{"i": i, "accuracy": a, "joules": j} for i, (a, j) in enumerate(pts)]
        cases.append(((pts,), sorted(p["i"] for p in pareto_front(dicts))))

    def as_sorted_indices(points):
        return _sorted_indices(fn(points))

    def hint(args, expected, got):
        (pts,) = args
        if not isinstance(got, list):
            return None
        best = max(range(len(pts)), key=lambda i: pts[i][0])
        if got == [best] and len(expected) > 1:
            return "the front holds every trade-off, not only the most accurate point."
        if len(got) > len(expected) and set(expected) <= set(got):
            return "drop the dominated points: another point is at least as accurate AND uses no more joules."
        if len(got) < len(expected) and set(got) <= set(expected):
            return ("a point is dominated only by one that is at least as good on both and strictly "
                    "better on one; equal points do not dominate each other.")
        return "fewer joules is better: check the direction of each objective."

    as_sorted_indices.__name__ = "pareto_indices"
    verdict = _not_a_function(fn, "pareto_indices")
    if verdict is not None:
        return verdict
    return check_function(as_sorted_indices, cases, name="pareto_indices", hint=hint)


@graded(reference=(
    "greenlab.techniques.search:regularized_evolution",
    "greenlab.techniques.search:evolution_loop",
    "greenlab.techniques.search:evolve",
))
def regularized_evolution(fn: Any) -> Check:
    """Check a learner's ``fn(space, fitness_of, budget, population, sample_size, rng) ->
    [(arch, fitness), ...]``: exactly ``budget`` evaluations, each fitness the one
    ``fitness_of`` gave, the first ``population`` sampled, every later one a single mutation of a
    member still alive (the last ``population`` evaluations: the oldest retires), and, when the
    whole population is sampled, of the fittest member."""
    import random

    space = SearchSpace(depth=(1, 2, 3), width=(4, 8, 16), kernel_size=(3, 5), separable=(False, True))

    def score(arch):  # distinct and deterministic: deeper and wider is fitter, separable a bit less
        return arch.depth * 10 + arch.width / 4 + arch.kernel_size / 10 - (0.05 if arch.separable else 0.0)

    cases = [(12, 4, 4, 0), (15, 5, 2, 1), (6, 3, 3, 2), (3, 5, 2, 3)]
    label = "regularized_evolution"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    failures, placeholders = [], 0
    for budget, population, sample_size, seed in cases:
        calls = []

        def fitness_of(arch):
            calls.append(arch)
            return score(arch)

        where = f"budget={budget}, population={population}, sample_size={sample_size}"
        try:
            got = fn(space, fitness_of, budget, population, sample_size, random.Random(seed))
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{where}: raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(got):
            placeholders += 1
            continue
        problem = _judge_evolution(list(got), calls, budget, population, sample_size, score, Arch)
        if problem:
            failures.append(f"{where}: {problem}")
    if placeholders == len(cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures or placeholders:
        failures += ["returned None"] * placeholders
        return Check(label, FAILED, f"{len(failures)} of {len(cases)} runs wrong.", failures)
    return Check(label, PASSED, f"all {len(cases)} runs evolve as regularized evolution does.")


def _judge_evolution(history, calls, budget, population, sample_size, score, Arch) -> str | None:
    if len(calls) != budget or len(history) != budget:
        if len(calls) > budget:
            return (f"fitness_of was called {len(calls)} times for a budget of {budget}. Hint: every "
                    "evaluation, the first population's included, counts toward the budget.")
        return (f"{len(history)} evaluations returned ({len(calls)} calls to fitness_of), expected "
                f"{budget}. Hint: keep going until budget evaluations; return every one in order.")
    for i, item in enumerate(history):
        arch, fit = item
        if not isinstance(arch, Arch) or arch != calls[i] or fit != score(arch):
            return (f"evaluation {i} is not ({calls[i]}, its fitness). Hint: return (arch, fitness) pairs in "
                    "the order you evaluated them.")
    for i in range(population, budget):
        alive = history[i - population:i]
        child = history[i][0]
        parents = [a for a, _ in alive if _one_mutation(a, child)]
        if not parents:
            older = [a for a, _ in history[:i - population] if _one_mutation(a, child)]
            if older:
                return (f"evaluation {i} ({child}) is a child of a member that should have retired. Hint: "
                        "regularized evolution removes the OLDEST member (alive.pop(0)), not the worst.")
            return (f"evaluation {i} ({child}) is not one mutation of any living member. Hint: "
                    "child = space.mutate(parent, rng) changes exactly one dimension.")
        if sample_size >= population:
            best = max(alive, key=lambda m: m[1])[0]
            if best not in parents:
                return (f"evaluation {i}: with the whole population in the sample, the parent must be its "
                        f"fittest member ({best}). Hint: parent = max(sample, key=fitness).")
    return None


def _one_mutation(a, b) -> bool:
    da, db = a.to_dict(), b.to_dict()
    return sum(da[k] != db[k] for k in da) == 1


@graded(reference=("greenlab.techniques.search:grad_norm",))
def grad_norm_proxy(fn: Any) -> Check:
    """Check a learner's ``fn(model, x, y) -> float``: the sum over Conv2d/Linear layers of the
    L2 norm of the weight gradient of the cross-entropy on (x, y), as ``gl.search.grad_norm``,
    leaving the model's weights and gradients as they were."""
    import torch
    import torch.nn as nn

    def cases():
        out = []
        for seed, (c, w) in enumerate([(4, 3), (6, 4), (3, 5)]):
            torch.manual_seed(seed)
            model = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, w))
            x = torch.randn(4, 1, 6, 6)
            y = torch.arange(4) % w
            out.append((model, x, y))
        return out

    label = "grad_norm_proxy"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    failures, placeholders = [], 0
    all_cases = cases()
    for model, x, y in all_cases:
        want = grad_norm(model, (x, y))
        before = {k: v.clone() for k, v in model.state_dict().items()}
        try:
            got = fn(model, x, y)
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(got):
            placeholders += 1
            continue
        value = number_or_none(got)
        changed = any(not torch.equal(before[k], v) for k, v in model.state_dict().items()
                      if not k.endswith(("running_mean", "running_var", "num_batches_tracked")))
        left = any(p.grad is not None for p in model.parameters())
        if value is None:
            failures.append(f"expected a number, got {type(got).__name__}")
        elif math.isclose(value, want, rel_tol=1e-4):
            if changed or left:
                failures.append("the score is right but the model was changed (weights or .grad left behind). "
                                "Hint: work on copy.deepcopy(model).")
            continue
        else:
            failures.append(f"expected {want:.5g}, got {value:.5g}. Hint: {_grad_norm_hint(model, x, y, value)}")
    if placeholders == len(all_cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    failures += ["returned None"] * placeholders
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(all_cases)} models wrong.", failures)
    return Check(label, PASSED, f"all {len(all_cases)} models give gl.search.grad_norm's score.")


def _grad_norm_hint(model, x, y, value) -> str:
    import copy

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    net = copy.deepcopy(model).train()
    F.cross_entropy(net(x), y).backward()
    layers = [m.weight.grad for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    every = [p.grad for p in net.parameters() if p.grad is not None]
    if math.isclose(value, sum(float(g.norm()) for g in every), rel_tol=1e-4):
        return "only the weights of conv and linear layers count (no biases, no normalisation parameters)."
    if math.isclose(value, float(torch.sqrt(sum((g ** 2).sum() for g in layers))), rel_tol=1e-4):
        return "sum one L2 norm per layer; do not take a single norm over all layers together."
    if math.isclose(value, sum(float((g ** 2).sum()) for g in layers), rel_tol=1e-4):
        return "that is the squared norm: take g.norm() (the square root) per layer."
    return "the gradient of F.cross_entropy(model(x), y) in train mode, one weight.grad.norm() per conv/linear layer."
