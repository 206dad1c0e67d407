"""Lesson 04 checkers: right answers pass, typical mistakes fail with a hint, stubs are not attempted."""

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from greenlab.course import checks


def right_flops(c_in, c_out, k, h, w):
    return 2 * c_in * c_out * k * k * h * w, 2 * c_in * k * k * h * w + 2 * c_in * c_out * h * w


def right_pareto(points):
    front = []
    for i, (a, j) in enumerate(points):
        dominated = any(a2 >= a and j2 <= j and (a2 > a or j2 < j) for a2, j2 in points)
        if not dominated:
            front.append(i)
    return front


def test_formula_matches_pytorch_flop_counter():
    # the checker's expected values must agree with what greenlab.training.models.flops counts
    c_in, c_out, k, h, w = 6, 10, 3, 9, 7
    x = torch.zeros(1, c_in, h, w)
    standard = nn.Conv2d(c_in, c_out, k, padding=k // 2, bias=False)
    separable = nn.Sequential(nn.Conv2d(c_in, c_in, k, padding=k // 2, groups=c_in, bias=False),
                              nn.Conv2d(c_in, c_out, 1, bias=False))
    counted = []
    for layer in (standard, separable):
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            layer(x)
        counted.append(counter.get_total_flops())
    assert tuple(counted) == right_flops(c_in, c_out, k, h, w)


def test_separable_conv_flops_passes_right_answer():
    result = checks.separable_conv_flops(right_flops)
    assert result.passed, result.text()


def test_separable_conv_flops_macs_get_hint():
    result = checks.separable_conv_flops(lambda *a: tuple(v / 2 for v in right_flops(*a)))
    assert result.status == checks.FAILED
    assert any("multiply-add" in d for d in result.details)


def test_separable_conv_flops_depthwise_on_output_channels_gets_hint():
    def wrong(ci, co, k, h, w):
        return 2 * ci * co * k * k * h * w, 2 * co * k * k * h * w + 2 * ci * co * h * w
    result = checks.separable_conv_flops(wrong)
    assert result.status == checks.FAILED
    assert any("INPUT channel" in d for d in result.details)


def test_separable_conv_flops_missing_pointwise_gets_hint():
    result = checks.separable_conv_flops(
        lambda ci, co, k, h, w: (right_flops(ci, co, k, h, w)[0], 2 * ci * k * k * h * w))
    assert result.status == checks.FAILED
    assert any("both parts" in d for d in result.details)


def test_separable_conv_flops_stub_and_non_function():
    assert checks.separable_conv_flops(lambda *a: None).status == checks.NOT_ATTEMPTED
    assert checks.separable_conv_flops(None).status == checks.NOT_ATTEMPTED
    assert checks.separable_conv_flops(42).status == checks.FAILED


def test_separable_conv_flops_crash_is_reported_not_raised():
    result = checks.separable_conv_flops(lambda *a: 1 / 0)
    assert result.status == checks.FAILED
    assert any("ZeroDivisionError" in d for d in result.details)


def test_pareto_indices_passes_right_answer_in_any_order():
    assert checks.pareto_indices(right_pareto).passed
    assert checks.pareto_indices(lambda pts: list(reversed(right_pareto(pts)))).passed
    assert checks.pareto_indices(lambda pts: torch.tensor(right_pareto(pts))).passed


def test_pareto_indices_only_best_gets_hint():
    result = checks.pareto_indices(lambda pts: [max(range(len(pts)), key=lambda i: pts[i][0])])
    assert result.status == checks.FAILED
    assert any("every trade-off" in d for d in result.details)


def test_pareto_indices_keeping_everything_fails():
    result = checks.pareto_indices(lambda pts: list(range(len(pts))))
    assert result.status == checks.FAILED
    assert any("dominated" in d for d in result.details)


def test_pareto_indices_wrong_direction_fails():
    def more_joules_better(points):
        return right_pareto([(a, -j) for a, j in points])
    assert checks.pareto_indices(more_joules_better).status == checks.FAILED


def test_pareto_indices_duplicates_must_both_stay():
    def drops_duplicates(points):
        front = right_pareto(points)
        return [i for i in front if points[i] not in points[:i]]
    result = checks.pareto_indices(drops_duplicates)
    assert result.status == checks.FAILED


def test_pareto_indices_stub_not_attempted():
    assert checks.pareto_indices(lambda pts: None).status == checks.NOT_ATTEMPTED
    assert checks.pareto_indices(None).status == checks.NOT_ATTEMPTED


# --- implementation exercises: one correct answer not the library's, planted mistakes ---------

import copy  # noqa: E402

import pytest  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def details(result):
    return " ".join(result.details)


def evolve_by_hand(space, fitness_of, budget, population, sample_size, rng, retire="oldest",
                   extra_call=False, pick=max):
    members, history = [], []
    for _ in range(min(population, budget)):
        arch = space.sample(rng)
        history.append((arch, fitness_of(arch)))
        members.append(history[-1])
    if extra_call:
        fitness_of(members[0][0])
    while len(history) < budget:
        sample = rng.sample(members, sample_size)
        parent = pick(sample, key=lambda m: m[1])
        child = space.mutate(parent[0], rng)
        history.append((child, fitness_of(child)))
        members.append(history[-1])
        if retire == "oldest":
            del members[0]
        else:  # the non-regularised variant: the worst member dies
            members.remove(min(members, key=lambda m: m[1]))
    return history


def test_regularized_evolution_passes_a_correct_implementation():
    assert checks.regularized_evolution(evolve_by_hand).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"retire": "worst"}, "OLDEST"),
    ({"extra_call": True}, "counts toward the budget"),
    ({"pick": min}, "fittest"),
])
def test_regularized_evolution_mistakes_get_their_own_hint(kwargs, hint):
    result = checks.regularized_evolution(lambda *a: evolve_by_hand(*a, **kwargs))
    assert result.status == checks.FAILED
    assert hint in details(result)


def test_regularized_evolution_stub_is_not_attempted():
    assert checks.regularized_evolution(lambda *a: None).status == checks.NOT_ATTEMPTED


def grad_norm_by_hand(model, x, y, which="layers", how="per layer", copy_model=True):
    net = copy.deepcopy(model) if copy_model else model
    net.train()
    F.cross_entropy(net(x), y).backward()
    if which == "layers":
        grads = [m.weight.grad for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    else:
        grads = [p.grad for p in net.parameters()]
    if how == "per layer":
        return sum(float(g.norm()) for g in grads)
    if how == "squared":
        return sum(float((g * g).sum()) for g in grads)
    return float(torch.cat([g.flatten() for g in grads]).norm())


def test_grad_norm_proxy_passes_a_correct_implementation():
    assert checks.grad_norm_proxy(grad_norm_by_hand).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"which": "all"}, "no biases"),
    ({"how": "global"}, "single norm"),
    ({"how": "squared"}, "squared"),
    ({"copy_model": False}, "deepcopy"),
])
def test_grad_norm_proxy_mistakes_get_their_own_hint(kwargs, hint):
    result = checks.grad_norm_proxy(lambda m, x, y: grad_norm_by_hand(m, x, y, **kwargs))
    assert result.status == checks.FAILED
    assert hint in details(result)
