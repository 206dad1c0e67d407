"""Tests for greenlab.search: space, Pareto fronts, seeded searches, proxies, spearman, break-even."""

import math
import random

import pytest
import torch
import torch.nn as nn

import greenlab.techniques.search as gs


def _space(**kw):
    opts = dict(depth=[1, 2], width=[4, 8], kernel_size=[3, 5], separable=[False, True],
                input_shape=(1, 8, 8))
    opts.update(kw)
    return gs.SearchSpace(**opts)


# --- search space ----------------------------------------------------------------------

def test_space_candidates_sample_mutate():
    space = _space()
    cands = space.candidates()
    assert len(cands) == len(space) == 16 and len(set(cands)) == 16
    rng = random.Random(0)
    for _ in range(30):
        a = space.sample(rng)
        assert a in cands
        b = space.mutate(a, rng)
        diffs = [k for k in a.to_dict() if getattr(a, k) != getattr(b, k)]
        assert len(diffs) == 1 and b in cands
    single = _space(depth=[2], width=[4], kernel_size=[3], separable=[False])
    only = single.candidates()[0]
    assert single.mutate(only, 1) == only


@pytest.mark.parametrize("field", ["depth", "width", "kernel_size", "separable"])
def test_empty_space_rejected(field):
    with pytest.raises(ValueError, match="empty"):
        _space(**{field: []})


def test_space_rejects_bad_options():
    with pytest.raises(ValueError):
        _space(kernel_size=[4])
    with pytest.raises(ValueError):
        _space(separable=[0])


def test_candidate_costs_match_hand_counts():
    """FLOPs and parameters through greenlab.training.models on layers whose counts are known by hand."""
    space = gs.SearchSpace(depth=[1], width=[4], kernel_size=[3], separable=[False, True],
                           input_shape=(1, 8, 8), num_classes=10, norm="none")
    plain, sep = space.candidates()
    # plain: conv 1->4, 3x3, padding 1 on 8x8: 2*(4*8*8)*(1*3*3) = 4608 FLOPs; head 4->10: 2*4*10 = 80
    assert space.cost(plain)["flops"] == 4608 + 80
    assert space.cost(plain)["params"] == (4 * 9 + 4) + (4 * 10 + 10)
    # separable: depthwise 1 channel 3x3: 2*64*9 = 1152; pointwise 1->4: 2*64*4 = 512; head 80
    assert space.cost(sep)["flops"] == 1152 + 512 + 80
    assert space.cost(sep)["params"] == (9 + 1) + (4 + 4) + (4 * 10 + 10)
    assert space.cost(plain)["train_flops"] > space.cost(plain)["flops"]
    rows = space.table()
    assert [r["flops"] for r in rows] == [4688, 1744]


# --- Pareto fronts ---------------------------------------------------------------------

def test_pareto_front_hand_made_points():
    pts = [
        {"name": "a", "accuracy": 0.90, "joules": 100},
        {"name": "b", "accuracy": 0.85, "joules": 50},
        {"name": "c", "accuracy": 0.80, "joules": 60},   # dominated by b
        {"name": "d", "accuracy": 0.90, "joules": 120},  # dominated by a (tie on accuracy)
        {"name": "e", "accuracy": 0.95, "joules": 300},
        {"name": "f", "accuracy": 0.85, "joules": 50},   # duplicate of b: both stay
        {"name": "g", "accuracy": 0.70, "joules": 50},   # tie on joules with b, worse accuracy
    ]
    assert [p["name"] for p in gs.pareto_front(pts)] == ["a", "b", "e", "f"]
    assert gs.pareto_front(pts[:1]) == pts[:1]
    assert gs.pareto_front([]) == []
    # one objective: only the best (and its ties)
    assert [p["name"] for p in gs.pareto_front(pts, [("joules", "min")])] == ["b", "f", "g"]
    # reversed directions pick the other corner
    worst = gs.pareto_front(pts, [("accuracy", "min"), ("joules", "max")])
    assert [p["name"] for p in worst] == ["c", "d", "e", "g"]


def test_pareto_front_bad_input():
    with pytest.raises(ValueError):
        gs.pareto_front([{"accuracy": 1}], [("accuracy", "up")])
    with pytest.raises(ValueError, match="joules"):
        gs.pareto_front([{"accuracy": 1}])


def test_plot_pareto_runs():
    import matplotlib

    matplotlib.use("Agg")
    pts = [{"accuracy": 0.9, "joules": 10, "arch": "x"}, {"accuracy": 0.8, "joules": 20, "arch": "y"}]
    ax = gs.plot_pareto(pts, label="arch")
    assert ax.get_xlabel() == "joules"


# --- search strategies -----------------------------------------------------------------

def _fake_evaluate(calls):
    """A cheap stand-in for training: accuracy and joules are fixed functions of the arch (the
    search logic is under test, not the training)."""

    def evaluate(arch):
        calls.append(arch)
        acc = 0.5 + 0.1 * arch.depth + 0.002 * arch.width - 0.01 * arch.kernel_size - 0.03 * arch.separable
        joules = arch.depth * arch.width * arch.kernel_size * (0.4 if arch.separable else 1.0)
        return {"accuracy": acc, "joules": joules, "estimated": True}

    return evaluate


def test_random_search_is_deterministic_and_counts_energy():
    space = _space()
    c1, c2, c3 = [], [], []
    r1 = gs.random_search(space, _fake_evaluate(c1), budget=6, seed=3)
    r2 = gs.random_search(space, _fake_evaluate(c2), budget=6, seed=3)
    r3 = gs.random_search(space, _fake_evaluate(c3), budget=6, seed=4)
    assert c1 == c2 and r1.archs() == r2.archs() and len(set(c1)) == 6
    assert c1 != c3
    assert r1.joules == pytest.approx(sum(e["joules"] for e in r1.evaluations))
    assert r1.estimated
    assert all(e in r1.evaluations for e in r1.front())
    assert "flops" in r1.evaluations[0] and "params" in r1.evaluations[0]
    every = gs.random_search(space, _fake_evaluate([]), budget=100, seed=0)
    assert len(every.evaluations) == 16 and every.notes
    assert "Pareto" in r1.summary()


def test_regularized_evolution_deterministic_and_improves():
    space = gs.SearchSpace(depth=[1, 2, 3], width=[2, 4, 8], kernel_size=[1, 3, 5],
                           separable=[False, True], input_shape=(1, 4, 4), norm="none")
    c1, c2 = [], []
    r1 = gs.regularized_evolution(space, _fake_evaluate(c1), budget=40, population=8, sample_size=3, seed=7)
    r2 = gs.regularized_evolution(space, _fake_evaluate(c2), budget=40, population=8, sample_size=3, seed=7)
    assert c1 == c2 and len(c1) == 40
    assert r1.joules == pytest.approx(sum(e["joules"] for e in r1.evaluations))
    assert all("parent" in e for e in r1.evaluations[8:])
    for e in r1.evaluations[8:]:
        diffs = [k for k in e["arch"].to_dict() if getattr(e["arch"], k) != getattr(e["parent"], k)]
        assert len(diffs) == 1
    # scalarised: fitness = accuracy only; evolution should find a better arch than its start
    c3 = []
    r3 = gs.regularized_evolution(space, _fake_evaluate(c3), budget=60, population=6, sample_size=3, seed=1,
                                  fitness=lambda e: e["accuracy"])
    first = max(e["accuracy"] for e in r3.evaluations[:6])
    assert r3.best()["accuracy"] > first


@pytest.mark.parametrize("fn", [gs.random_search, gs.regularized_evolution])
def test_budget_zero_rejected(fn):
    with pytest.raises(ValueError, match="budget"):
        fn(_space(), _fake_evaluate([]), budget=0)


def test_evaluate_must_report_joules():
    with pytest.raises(ValueError, match="joules"):
        gs.random_search(_space(), lambda arch: {"accuracy": 0.5}, budget=2)


def test_evolution_sample_size_checked():
    with pytest.raises(ValueError, match="sample_size"):
        gs.regularized_evolution(_space(), _fake_evaluate([]), budget=5, population=2, sample_size=3)


# --- zero-cost proxies -----------------------------------------------------------------

def test_synflow_known_value_and_model_untouched():
    # Linear 3->2 with weights w and bias b; ones input; R = sum(|W| 1 + |b|)
    # dR/dW_ij = 1, so synflow = sum |W_ij| * 1
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]))
    before = lin.weight.detach().clone()
    assert gs.synflow(lin, (3,)) == pytest.approx(7.5)
    assert torch.equal(lin.weight, before) and lin.weight.grad is None
    # two layers: R = 1^T |W2| |W1| 1; score = sum |W1 * dR/dW1| + sum |W2 * dR/dW2| = 2R
    net = nn.Sequential(nn.Linear(2, 2, bias=False), nn.ReLU(), nn.Linear(2, 1, bias=False))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        net[2].weight.copy_(torch.tensor([[0.5, -1.0]]))
    r = 0.5 * 3 + 1.0 * 7
    assert gs.synflow(net, (2,)) == pytest.approx(2 * r)


def test_grad_norm_known_value():
    lin = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        lin.weight.zero_()
    x = torch.tensor([[1.0, 2.0]])
    y = torch.tensor([[1.0]])
    # loss = (w.x - y)^2, grad = 2 (0 - 1) x = (-2, -4), norm sqrt(20)
    assert gs.grad_norm(lin, (x, y), nn.functional.mse_loss) == pytest.approx(math.sqrt(20))
    assert lin.weight.grad is None


def test_proxies_on_cnn_candidates():
    space = _space()
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 10, (8,))
    torch.manual_seed(0)
    small, big = space.build(gs.Arch(1, 4, 3, False)), space.build(gs.Arch(2, 8, 5, False))
    assert gs.synflow(big, (1, 8, 8)) > gs.synflow(small, (1, 8, 8)) > 0
    assert gs.grad_norm(small, (x, y)) > 0


def test_spearman_golden_values():
    assert gs.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233)
    assert gs.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert gs.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # 1 - 6 sum d^2 / (n (n^2 - 1)) for untied ranks: d = (0, 2, -1, -1) -> 1 - 36/60 = 0.4
    assert gs.spearman([1, 2, 3, 4], [1, 4, 2, 3]) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        gs.spearman([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError):
        gs.spearman([1, 2], [1])


def test_break_even():
    assert gs.break_even(1000.0, 10.0) == 100
    assert gs.break_even(1.0, 0.2) == 5
    assert gs.break_even(1001.0, 10.0) == 101
    assert gs.break_even(0.0, 5.0) == 0
    assert gs.break_even(10.0, 0.0) == math.inf
    assert gs.break_even(10.0, -1.0) == math.inf
    with pytest.raises(ValueError):
        gs.break_even(-1.0, 1.0)
    assert "Strubell" in gs.break_even.__doc__ and "Patterson" in gs.break_even.__doc__


def test_energy_per_inference_measures():
    space = _space()
    cost = gs.energy_per_inference(space.build(gs.Arch(1, 4, 3, False)), (1, 8, 8), batch_size=8, repeats=3)
    assert cost.joules_per_sample > 0 and cost.seconds_per_sample > 0
    assert cost.sources  # provenance carried


def test_train_evaluator_real_run():
    from greenlab.training import data
    from greenlab.training.loop import TrainConfig

    ds = data.generate("synthetic", n_train=64, n_test=32, seed=0, shape=(1, 8, 8))
    space = _space(depth=[1], width=[4], kernel_size=[3], separable=[False, True])
    evaluate = gs.train_evaluator(ds, TrainConfig(batch_size=32, epochs=1), space,
                                  train_kwargs={"log": False, "save": False})
    res = gs.random_search(space, evaluate, budget=2, seed=0)
    assert len(res.evaluations) == 2
    assert res.joules == pytest.approx(sum(e["joules"] for e in res.evaluations)) and res.joules > 0


def test_evolve_runs_a_given_loop_and_records_every_evaluation():
    from greenlab.techniques import search as gsearch

    space = gsearch.SearchSpace(depth=(1, 2), width=(4, 8), kernel_size=(3,), separable=(False, True))

    def evaluate(arch):
        return {"accuracy": arch.depth / 10 + arch.width / 100, "joules": float(arch.width)}

    result = gsearch.evolve(space, evaluate, budget=7, fitness=lambda e: e["accuracy"], population=3,
                            sample_size=3, seed=0)
    assert len(result.evaluations) == 7 and result.joules == sum(e["joules"] for e in result.evaluations)
    history = gsearch.evolution_loop(space, lambda a: evaluate(a)["accuracy"], 7, 3, 3, 0)
    assert [e["arch"] for e in result.evaluations] == [a for a, _ in history]

    def greedy(space, fitness_of, budget, population, sample_size, rng):
        for _ in range(budget + 1):
            fitness_of(space.sample(rng))

    with pytest.raises(ValueError, match="more than budget"):
        gsearch.evolve(space, evaluate, budget=3, fitness=lambda e: e["accuracy"], loop=greedy)


def test_compare_archs_trains_every_arch_per_repeat_with_paired_seeds():
    from greenlab.training import data
    from greenlab.training.loop import TrainConfig

    ds = data.generate("synthetic", n_train=64, n_test=32, seed=0, shape=(1, 8, 8))
    space = gs.SearchSpace(depth=(1,), width=(4, 8), kernel_size=(3,), separable=(False,),
                           input_shape=(1, 8, 8), num_classes=ds.num_classes)
    a, b = space.candidates()
    result = gs.compare_archs(space, [a, b, a], ds, TrainConfig(batch_size=32, max_steps=2, seed=5), repeats=3,
                              train_kwargs={"log": False, "save": False})
    assert result.archs == [a, b] and all(len(result.runs[x]) == 3 for x in (a, b))
    assert [r.config["seed"] for r in result.runs[a]] == [5, 6, 7] == [r.config["seed"] for r in result.runs[b]]
    assert result.paired(b, a, "joules").n == 3
    assert result.joules == sum(r.joules for x in (a, b) for r in result.runs[x])
    with pytest.raises(ValueError):
        result.values(gs.Arch(2, 4, 3, False), "joules")
    # fresh repeats for an estimate: seeds past the selection's, none shared with it
    fresh = gs.compare_archs(space, [a, b], ds, TrainConfig(batch_size=32, max_steps=2, seed=5), repeats=3,
                             train_kwargs={"log": False, "save": False}, seed_offset=3)
    assert [r.config["seed"] for r in fresh.runs[a]] == [8, 9, 10]
    assert not {r.config["seed"] for r in fresh.runs[b]} & {r.config["seed"] for r in result.runs[b]}
