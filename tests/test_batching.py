"""Tests for greenlab.batching: max-batch search (with a simulated OOM), schedules, noise scale, sweeps."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import greenlab.techniques.batching as gb
from greenlab.training import models


def _tiny_model():
    torch.manual_seed(0)
    return models.build("cnn", depth=1, width=4)


# --- find_max_batch --------------------------------------------------------------------

def _fake_oom_step(model, optimizer, threshold, calls):
    """A real training step that also raises a CUDA out-of-memory error above ``threshold``,
    after it has already changed the weights, gradients and optimiser state (the worst case)."""

    def step(batch_size):
        calls.append(batch_size)
        x = torch.randn(batch_size, 1, 8, 8)
        y = torch.randint(0, 10, (batch_size,))
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if batch_size > threshold:
            raise torch.cuda.OutOfMemoryError(f"simulated: {batch_size} > {threshold}")
        return 1000 * batch_size

    return step


@pytest.mark.parametrize("threshold,start", [(37, 1), (64, 1), (1, 1), (100, 3), (5, 16)])
def test_find_max_batch_exact_with_simulated_oom_and_state_intact(threshold, start):
    model = _tiny_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    # give the optimiser some state first, so restoring it is meaningful
    F.cross_entropy(model(torch.randn(4, 1, 8, 8)), torch.randint(0, 10, (4,))).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    before_model = {k: v.clone() for k, v in model.state_dict().items()}
    before_opt = {i: {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
                  for i, s in opt.state_dict()["state"].items()}
    calls = []
    res = gb.find_max_batch(model, (1, 8, 8), optimizer=opt, start=start, limit=1024,
                            step_fn=_fake_oom_step(model, opt, threshold, calls))
    assert res.batch_size == threshold
    assert res.method == "step-fn"
    assert any(not p.ok and p.reason == "out-of-memory" for p in res.probes)
    assert all(p.ok == (p.batch_size <= threshold) for p in res.probes)
    assert len(calls) == len(set(calls))  # no size probed twice
    assert len(calls) <= 2 * math.ceil(math.log2(1024)) + 2
    for k, v in model.state_dict().items():
        assert torch.equal(v, before_model[k]), k
    assert all(p.grad is None for p in model.parameters())
    after_opt = opt.state_dict()["state"]
    for i, s in before_opt.items():
        for k, v in s.items():
            assert torch.equal(torch.as_tensor(after_opt[i][k]), torch.as_tensor(v)), (i, k)


def test_find_max_batch_hits_limit_without_failure():
    model = _tiny_model()
    res = gb.find_max_batch(model, (1, 8, 8), limit=48, step_fn=lambda b: b)
    assert res.batch_size == 48
    assert [p.batch_size for p in res.probes] == [1, 2, 4, 8, 16, 32, 48]


def test_find_max_batch_oom_at_one_is_an_error():
    model = _tiny_model()

    def always_oom(b):
        raise torch.cuda.OutOfMemoryError("simulated")

    with pytest.raises(ValueError, match="batch size 1"):
        gb.find_max_batch(model, (1, 8, 8), step_fn=always_oom)


def test_cpu_needs_a_budget():
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        gb.find_max_batch(_tiny_model(), (1, 8, 8), device="cpu")


def test_cpu_budget_below_one_sample():
    with pytest.raises(ValueError, match="below one sample"):
        gb.find_max_batch(_tiny_model(), (1, 8, 8), device="cpu", memory_budget_bytes=1000)


@pytest.mark.parametrize("bad", [0, -5, "1GB", True])
def test_bad_budget_rejected(bad):
    with pytest.raises(ValueError):
        gb.find_max_batch(_tiny_model(), (1, 8, 8), device="cpu", memory_budget_bytes=bad)


def test_cpu_budget_uses_measured_peak_and_is_exact():
    model = _tiny_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # a budget that fits between the measured peaks of two batch sizes
    small = gb.find_max_batch(model, (1, 16, 16), device="cpu", optimizer=opt, limit=16,
                              memory_budget_bytes=10 ** 9)
    assert small.batch_size == 16
    peaks = {p.batch_size: p.peak_bytes for p in small.probes}
    assert peaks[16] > peaks[8] > peaks[4] > peaks[1] > small.resident_bytes > 0
    budget = (peaks[8] + peaks[16]) // 2
    res = gb.find_max_batch(model, (1, 16, 16), device="cpu", optimizer=opt, limit=64,
                            memory_budget_bytes=budget)
    fits = [p for p in res.probes if p.ok]
    over = [p for p in res.probes if not p.ok]
    assert all(p.peak_bytes <= budget for p in fits)
    assert all(p.reason == "over-budget" and p.peak_bytes > budget for p in over)
    assert 8 <= res.batch_size < 16
    assert any(p.batch_size == res.batch_size + 1 and not p.ok for p in res.probes)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert "peak" in res.table()


def test_measure_step_peak_bytes_counts_live_tensors():
    def work():
        a = torch.ones(1000)           # 4000 bytes
        b = torch.ones(1000)           # 8000 live
        del a
        c = torch.ones(500)            # 6000 live
        return c.sum()

    _, peak = gb.measure_step_peak_bytes(work)
    assert peak == 8000  # a and b live together; later b + c + the 4-byte sum is 6004


# --- schedules -------------------------------------------------------------------------

def test_schedules_values():
    assert [gb.constant(64)(e) for e in range(3)] == [64, 64, 64]
    s = gb.stepwise({0: 32, 2: 64, 5: 256})
    assert [s(e) for e in range(7)] == [32, 32, 64, 64, 64, 256, 256]
    r = gb.ramp(32, 256, 4)
    assert [r(e) for e in range(6)] == [32, 88, 144, 200, 256, 256]
    assert gb.ramp(30, 100, 2, multiple_of=8)(1) == 64
    with pytest.raises(ValueError):
        gb.stepwise({1: 32})
    with pytest.raises(ValueError):
        gb.constant(0)
    with pytest.raises(ValueError):
        s(-1)


def test_on_plateau_grows_on_plateau_and_caps():
    p = gb.on_plateau(32, factor=2, patience=2, max_size=100)
    assert p(0) == 32
    sizes = [p.observe(loss) for loss in [1.0, 0.8, 0.8, 0.9, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7]]
    assert sizes == [32, 32, 32, 64, 64, 64, 100, 100, 100, 100]
    assert p(9) == 100
    q = gb.on_plateau(8, patience=1)
    q.on_eval({"loss": 1.0})
    q.on_eval(SimpleNamespace(loss=1.5))
    assert q(1) == 16


def test_lr_helpers():
    assert gb.linear_scaling_lr(0.1, 256, 8192) == pytest.approx(3.2)
    w = gb.warmup(4)
    assert [w(s) for s in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    gw = gb.goyal_warmup(256, 1024, warmup_steps=2)
    lr = gb.linear_scaling_lr(0.1, 256, 1024)
    assert [lr * gw(s) for s in range(3)] == pytest.approx([0.1, 0.25, 0.4])
    assert gb.StepDecay([10, 20], 5)(9) == 1.0 and gb.StepDecay([10, 20], 5)(20) == pytest.approx(0.04)
    with pytest.raises(ValueError):
        gb.linear_scaling_lr(0.1, 0, 32)
    with pytest.raises(ValueError):
        gb.goyal_warmup(256, 128, 5)


def test_batch_growth_vs_lr_decay_configs():
    from greenlab.training.loop import TrainConfig

    base = TrainConfig(batch_size=32, lr=0.5, epochs=6)
    cfgs = gb.batch_growth_vs_lr_decay(base, n_train=320, milestones=[2, 4], factor=5)
    decay, growth = cfgs["lr-decay"], cfgs["batch-growth"]
    # 320 samples / 32 per step = 10 steps per epoch: milestones at steps 20 and 40
    assert [decay.lr_schedule(s) for s in (0, 19, 20, 39, 40, 59)] == pytest.approx([1, 1, 0.2, 0.2, 0.04, 0.04])
    assert [growth.batch_size_at(e) for e in range(6)] == [32, 32, 160, 160, 800, 800]
    assert growth.lr_schedule == "constant" and decay.batch_schedule is None
    assert decay.epochs == growth.epochs == 6
    with pytest.raises(ValueError, match="milestones"):
        gb.batch_growth_vs_lr_decay(base, 320, milestones=[6])


def test_on_plateau_drives_real_training():
    """The OnPlateau object as both batch_schedule and callback of gl.train changes the batch."""
    from greenlab.training import data
    from greenlab.training.loop import TrainConfig, train

    ds = data.generate("synthetic", n_train=64, n_test=32, seed=0, shape=(1, 8, 8))
    seen = []

    class Spy:
        def on_step(self, state):
            seen.append(state.batch_size)

    p = gb.on_plateau(8, factor=2, patience=1, min_delta=10.0)  # demands a 10x drop: always grows
    cfg = TrainConfig(batch_size=8, lr=0.01, epochs=4, batch_schedule=p)
    res = train(_tiny_model(), ds, cfg, callbacks=[p, Spy()], log=False, save=False)
    assert res.status == "completed"
    # epoch 0's loss sets the best; each later evaluation misses the 10x drop and doubles the batch
    assert [size for _, size in p.history] == [8, 16, 32, 64]
    assert seen[0] == 8 and seen[-1] == 32 and sorted(set(seen)) == [8, 16, 32]


# --- gradient noise scale --------------------------------------------------------------

def test_noise_scale_matches_known_answer_on_linear_regression():
    torch.manual_seed(0)
    n, d = 2000, 4
    x = torch.randn(n, d, dtype=torch.float64)
    w_true = torch.randn(d, 1, dtype=torch.float64)
    y = x @ w_true + 0.5 * torch.randn(n, 1, dtype=torch.float64)
    model = nn.Linear(d, 1, bias=False).double()
    with torch.no_grad():
        model.weight.copy_((w_true + 0.3 * torch.randn(d, 1, dtype=torch.float64)).T)
    w = model.weight.detach().T.clone()
    # exact per-sample gradients of (x.w - y)^2 with respect to w, over the whole dataset
    per_sample = 2 * (x @ w - y) * x                        # (n, d)
    mean_grad = per_sample.mean(0)
    true_g2 = float(mean_grad.pow(2).sum())
    true_trace = float((per_sample - mean_grad).pow(2).sum(1).mean())   # population covariance trace
    true_b = true_trace / true_g2
    before = model.weight.detach().clone()
    est = gb.gradient_noise_scale(model, (x, y), F.mse_loss, small_batch=4, big_batch=64,
                                  n_estimates=600, seed=1)
    assert est.g2 == pytest.approx(true_g2, rel=0.15)
    assert est.trace_cov == pytest.approx(true_trace, rel=0.15)
    assert est.b_simple == pytest.approx(true_b, rel=0.2)
    assert est.b_simple_low < est.b_simple < est.b_simple_high
    assert torch.equal(model.weight, before) and model.weight.grad is None
    again = gb.gradient_noise_scale(model, (x, y), F.mse_loss, small_batch=4, big_batch=64,
                                    n_estimates=600, seed=1)
    assert again.b_simple == est.b_simple
    assert "B_simple" in est.summary()


def test_noise_scale_rejects_bad_sizes():
    model = nn.Linear(2, 1)
    data = (torch.randn(10, 2), torch.randn(10, 1))
    with pytest.raises(ValueError, match="big_batch"):
        gb.gradient_noise_scale(model, data, F.mse_loss, small_batch=8, big_batch=8)


# --- sweeps ----------------------------------------------------------------------------

def _fake_train(results):
    """A stand-in for gl.train that returns prepared outcomes per batch size (the logic under
    test is the sweep's bookkeeping, not training)."""
    seen = []

    def train(model, data, cfg):
        seen.append(cfg)
        joules, reach = results[cfg.batch_size]
        return SimpleNamespace(status="target-reached" if reach else "completed", seconds=joules / 10,
                               joules=joules, seconds_to_target=joules / 20 if reach else None,
                               joules_to_target=joules / 2 if reach else None, final_accuracy=0.9,
                               energy=SimpleNamespace(estimated=True), estimated=True)

    return train, seen


def test_sweep_bookkeeping_and_cost():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        batch_size: int = 32
        lr: float = 0.1
        seed: int = 0
        target_accuracy: float | None = None

    train, seen = _fake_train({32: (100.0, True), 128: (60.0, True), 512: (80.0, False)})
    res = gb.sweep_batch_sizes(lambda: nn.Linear(1, 1), None, [32, 128, 512], Cfg(), 0.8, repeats=2,
                               train_fn=train, verbose=False)
    # every size is warmed up once before any is measured, then the repeats run in rotating order
    assert [c.batch_size for c in seen[:3]] == [32, 128, 512]
    assert [(c.batch_size, c.seed) for c in seen[3:]] == [(32, 0), (128, 0), (512, 0), (128, 1), (512, 1), (32, 1)]
    assert {c.batch_size: c.lr for c in seen[3:]} == pytest.approx({32: 0.1, 128: 0.4, 512: 1.6})
    assert all(c.target_accuracy == 0.8 for c in seen[3:])
    assert res.by_size() == {32: 50.0, 128: 30.0, 512: None}
    assert res.best() == 128
    cost = gb.sweep_cost(res)
    assert cost["joules"] == pytest.approx(2 * (100 + 60 + 80))
    assert cost["runs"] == 6 and cost["estimated"] is True
    assert "estimated" in res.table()
    with pytest.raises(ValueError):
        gb.sweep_batch_sizes(lambda: None, None, [], Cfg(), 0.8, train_fn=train)
    with pytest.raises(ValueError):
        gb.sweep_cost([])


def test_sweep_evaluates_every_size_after_the_same_samples():
    from greenlab.training.loop import TrainConfig

    train, seen = _fake_train({16: (10.0, True), 64: (12.0, True)})
    gb.sweep_batch_sizes(lambda: None, None, [16, 64], TrainConfig(batch_size=16, accum_steps=2, eval_every=4),
                         0.8, train_fn=train, verbose=False)
    assert [(c.eval_every, c.eval_every_samples) for c in seen] == [(None, 128)] * 4  # 2 warm-ups, 2 runs


def test_plot_sweep_runs():
    import matplotlib

    matplotlib.use("Agg")
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        batch_size: int = 32
        lr: float = 0.1
        seed: int = 0
        target_accuracy: float | None = None

    train, _ = _fake_train({32: (100.0, True), 64: (90.0, False)})
    res = gb.sweep_batch_sizes(lambda: None, None, [32, 64], Cfg(), 0.8, train_fn=train, verbose=False)
    ax = gb.plot_sweep(res)
    assert "not reached" in ax.get_title()


def test_sweep_takes_tuned_rates_and_a_sample_cap():
    from greenlab.training.loop import TrainConfig

    train, seen = _fake_train({16: (10.0, True), 64: (12.0, True)})
    data = (torch.zeros(100, 2), torch.zeros(100))
    gb.sweep_batch_sizes(lambda: None, data, [16, 64], TrainConfig(batch_size=16, epochs=1), 0.8,
                         lrs={16: 0.05, 64: 0.3}, max_samples=640, train_fn=train, verbose=False)
    assert [(c.lr, c.max_steps, c.epochs) for c in seen[2:]] == [(0.05, 40, 7), (0.3, 10, 7)]
    assert [(c.max_steps, c.target_accuracy) for c in seen[:2]] == [(3, None), (3, None)]  # the warm-ups
    with pytest.raises(ValueError, match="no learning rate"):
        gb.sweep_batch_sizes(lambda: None, data, [16, 64], TrainConfig(batch_size=16), 0.8,
                             lrs={16: 0.05}, train_fn=train, verbose=False)


def test_sweep_pairs_sizes_repeat_by_repeat_and_counts_misses():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        batch_size: int = 32
        lr: float = 0.1
        seed: int = 0
        target_accuracy: float | None = None

    outcomes = {(32, 0): 100.0, (32, 1): 110.0, (32, 2): 90.0,
                (128, 0): 50.0, (128, 1): 56.0, (128, 2): 44.0, (512, 0): None, (512, 1): 80.0, (512, 2): None}

    def train(model, data, cfg):
        j = outcomes[(cfg.batch_size, cfg.seed)]
        reach = j is not None
        return SimpleNamespace(status="target-reached" if reach else "completed", seconds=1.0, joules=j or 200.0,
                               seconds_to_target=1.0 if reach else None, joules_to_target=j,
                               final_accuracy=0.9, estimated=True, energy=SimpleNamespace(estimated=True))

    res = gb.sweep_batch_sizes(lambda: None, None, [32, 128, 512], Cfg(), 0.8, repeats=3, train_fn=train,
                               verbose=False)
    assert res.misses() == {32: 0, 128: 0, 512: 2}
    verdicts = res.paired(32)
    assert verdicts[128].n == 3 and verdicts[128].detectable
    assert verdicts[128].estimate == pytest.approx(0.5, rel=0.02)
    assert verdicts[512].n == 1 and verdicts[512].detectable is None  # one pair: no interval
    with pytest.raises(ValueError, match="baseline"):
        res.paired(64)


def test_schedule_helpers_reject_bad_input():
    with pytest.raises(ValueError, match="max_batch"):
        gb.grow_batch_then_decay(0, 64, 0.1, [1], 2, 32)
    with pytest.raises(ValueError, match="epoch"):
        gb.grow_batch_then_decay(-1, 64, 0.1, [1], 2, 128)
    assert gb.grow_batch_then_decay(5, 64, 0.1, [1, 2, 3], 2, 128) == (128, pytest.approx(0.025))
    with pytest.raises(ValueError, match="small_batch"):
        gb.simple_noise_scale(1.0, 0.5, 0, 10)
