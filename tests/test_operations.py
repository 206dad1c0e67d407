"""Lesson 13's library: checkpoint intervals, spot arithmetic, a real pre-empted run, idle and
scale-to-zero arithmetic, the alert rule, and the two storage layouts."""

import math

import pytest
import torch

from greenlab.impact import idle
from greenlab.techniques import monitoring, preemption, storage
from greenlab.training import data as gl_data
from greenlab.training.loop import TrainConfig


# --- intervals and expected cost -----------------------------------------------------------------

def test_young_and_daly_by_hand():
    assert preemption.young_interval(2.0, 100.0) == pytest.approx(20.0)
    d, m = 2.0, 100.0
    x = d / (2 * m)
    assert preemption.daly_interval(d, m) == pytest.approx(20.0 * (1 + math.sqrt(x) / 3 + x / 9) - 2.0)
    assert preemption.daly_interval(5.0, 2.0) == 2.0  # d >= 2M: tau = M


def test_the_young_interval_minimises_the_first_order_expected_time():
    d, r, m = 1.0, 5.0, 2000.0
    taus = [t / 10 for t in range(10, 2000)]
    best = min(taus, key=lambda t: preemption.expected_wall_seconds(1000.0, t, d, r, m))
    assert best == pytest.approx(preemption.young_interval(d, m), rel=0.1)


def test_expected_wall_is_infinite_when_failures_outpace_progress():
    assert preemption.expected_wall_seconds(100.0, 10.0, 1.0, 20.0, 20.0) == math.inf
    assert preemption.expected_wall_seconds(100.0, 10.0, 0.0, 0.0, 1e12) == pytest.approx(100.0)


def test_spot_costs_less_at_a_low_price_ratio_and_uses_more_energy():
    s = preemption.spot_vs_on_demand(100.0, 2.0, 0.3, 10.0, 60.0, 300.0, 400.0)
    assert s.spot_hours > s.on_demand_hours and s.spot_kwh > s.on_demand_kwh
    assert s.spot_cost < s.on_demand_cost and s.on_demand_kwh == pytest.approx(40.0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="mtbf_s"):
        preemption.young_interval(1.0, 0)
    with pytest.raises(ValueError, match="checkpoint_s"):
        preemption.daly_interval(-1.0, 3.0)
    with pytest.raises(ValueError, match="mean_s"):
        preemption.lifetimes(0, 3)


def test_lifetimes_are_seeded_and_exponential():
    a, b = preemption.lifetimes(2.0, 2000, seed=3), preemption.lifetimes(2.0, 2000, seed=3)
    assert a == b != preemption.lifetimes(2.0, 2000, seed=4)
    assert sum(a) / len(a) == pytest.approx(2.0, rel=0.1)


def test_a_killed_process_resumes_from_its_checkpoint_and_finishes(tmp_path):
    """The only test of the real harness: one SIGKILL, then a resume from the last checkpoint."""
    ds = gl_data.load("synthetic", n_train=200, n_test=40, verbose=False)
    cfg = TrainConfig(batch_size=20, lr=0.05, max_steps=400, epochs=50)
    with preemption.Launcher(tmp_path) as launcher:
        assert launcher.cold_start_s > 0
        whole = launcher.run({"name": "mlp", "hidden": (16,)}, ds, cfg, None, [])
        step_s = whole.lives[0].seconds / cfg.max_steps
        run = launcher.run({"name": "mlp", "hidden": (16,)}, ds, cfg, 10, [whole.lives[0].seconds / 3])
    assert [life.killed for life in run.lives] == [True, False]
    first, last = run.lives
    assert first.checkpointed % 10 == 0 and last.resumed_at == first.checkpointed
    assert 0 <= first.lost_steps < 10 and last.reached == cfg.max_steps
    assert run.steps_run == cfg.max_steps + run.lost_steps
    assert run.checkpoints >= cfg.max_steps // 10 and run.checkpoint_seconds > 0
    assert run.preemptions == 1 and run.final_accuracy is not None and len(run.restart_seconds(step_s)) == 1
    assert run.joules > 0 and whole.preemptions == 0 and whole.checkpoints == 0


def test_run_refuses_a_job_without_max_steps(tmp_path):
    with pytest.raises(ValueError, match="max_steps"):
        preemption.run_preemptible({"name": "mlp"}, None, TrainConfig(), 5, [], tmp_path)
    with pytest.raises(TypeError, match="model"):
        preemption.run_preemptible(lambda: None, None, TrainConfig(max_steps=3), 5, [], tmp_path)
    with pytest.raises(ValueError, match="plain values"):
        cfg = TrainConfig(max_steps=3, augment=gl_data.Augment(flip=False, crop_padding=2))
        preemption.run_preemptible({"name": "mlp"}, None, cfg, 5, [], tmp_path)
    with pytest.raises(ValueError, match="kill_after_s"):
        preemption.run_preemptible({"name": "mlp"}, None, TrainConfig(max_steps=3), 5, [-1.0], tmp_path)


# --- idle capacity and scale to zero ---------------------------------------------------------------

def test_idle_week_by_hand():
    c = idle.idle_cost(50.0, price_per_kwh=0.2, rent_per_hour=1.5, region="FRA")
    assert c.kwh == pytest.approx(50 * 168 / 1000) and c.electricity_cost == pytest.approx(8.4 * 0.2)
    assert c.rent == pytest.approx(252.0) and c.g_co2e > 0
    assert idle.idle_cost(10.0, hours=1).rent is None


def test_scale_to_zero_break_even():
    s = idle.scale_to_zero(busy_hours=40, idle_watts=60, starts=20, cold_start_s=120, start_watts=300)
    assert s.always_on_idle_kwh == pytest.approx(60 * 128 / 1000)
    assert s.cold_start_kwh == pytest.approx(20 * 300 * 120 / 3.6e6)
    assert s.break_even_starts == pytest.approx(s.always_on_idle_kwh / (300 * 120 / 3.6e6))
    assert s.added_wait_s == 2400
    with pytest.raises(ValueError, match="busy_hours"):
        idle.scale_to_zero(busy_hours=200, idle_watts=60, starts=1, cold_start_s=1, start_watts=1)


# --- alerts ---------------------------------------------------------------------------------------

def test_alert_fires_once_per_long_enough_stretch():
    t = [0, 1, 2, 3, 4, 5, 6, 7]
    v = [9, 1, 1, 1, 9, 1, 9, 1]
    assert monitoring.alert_times(t, v, below=5, for_s=2) == [3]
    assert monitoring.alert_times(t, v, below=5, for_s=0) == [1, 5, 7]
    with pytest.raises(ValueError, match="length"):
        monitoring.alert_times([0], [], 1, 1)


def test_stall_callback_waits_at_its_step():
    class State:
        step = 3

    s = monitoring.Stall(at_step=3, seconds=0.0)
    s.on_step(State())
    assert s.started_s is not None
    with pytest.raises(ValueError, match="at_step"):
        monitoring.Stall(at_step=0, seconds=1)


# --- storage --------------------------------------------------------------------------------------

def test_storage_plan_by_hand():
    plan = storage.training_storage(7e9, 2e12, checkpoints_kept=10)
    assert plan.checkpoint_bytes == 7e9 * 14 and plan.dataset_bytes == 4e12
    assert plan.total_bytes == 4e12 + 10 * 7e9 * 14 + 7e9 * 2
    assert storage.format_bytes(1.5e12) == "1.5 TB"


def test_both_layouts_read_back_what_was_written(tmp_path):
    x = torch.randn(25, 1, 4, 4)
    y = torch.arange(25) % 10
    small = storage.write_small_files(x, y, tmp_path / "small")
    shards = storage.write_shards(x, y, tmp_path / "shards", samples_per_shard=10)
    assert len(shards) == 3 and len(list(small.iterdir())) == 25
    for bx, by in (storage.read_small_files(small, (1, 4, 4)), storage.read_shards(shards, (1, 4, 4))):
        assert torch.equal(bx, x) and torch.equal(by, y)


def test_compare_reads_pairs_its_repeats(tmp_path):
    x, y = torch.randn(30, 3), torch.arange(30) % 3
    c = storage.compare_reads(x, y, tmp_path, repeats=3, samples_per_shard=8)
    assert c.files == {"small files": 30, "tar shards": 4}
    assert all(len(v) == 3 for v in c.seconds.values()) and c.paired("joules").n == 3
    assert all(n >= 1 for n in c.passes.values())
    # the flags come from the six windows themselves (each a layout's repeat)
    assert [label for label, _ in c.measurements()] == ["small files repeat 1", "tar shards repeat 1",
                                                         "tar shards repeat 2", "small files repeat 2",
                                                         "small files repeat 3", "tar shards repeat 3"]
    assert c.estimated == any(m.estimated for _, m in c.windows) and c.complete


def test_checkpoint_write_cost_fills_its_window(tmp_path):
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    seconds, joules, writes, m = preemption.checkpoint_write_cost(net, opt, tmp_path, writes=2, min_seconds=0.15)
    assert writes >= 2 and seconds * writes >= 0.15 and joules == pytest.approx(m.joules / writes)
    assert list(tmp_path.iterdir()) == []  # its own temporary folder went with it


def test_checkpoint_write_cost_never_touches_what_it_did_not_create(tmp_path):
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    mine = tmp_path / "thesis.pt"
    mine.write_bytes(b"a learner's work")
    (tmp_path / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="not a folder"):  # a file given where the folder goes
        preemption.checkpoint_write_cost(net, opt, mine, writes=1, min_seconds=0)
    with pytest.raises(ValueError, match="does not exist"):
        preemption.checkpoint_write_cost(net, opt, tmp_path / "missing", writes=1, min_seconds=0)
    with pytest.raises(ValueError, match="not a folder"):  # a device file, as root
        preemption.checkpoint_write_cost(net, opt, "/dev/null", writes=1, min_seconds=0)
    preemption.checkpoint_write_cost(net, opt, tmp_path, writes=1, min_seconds=0)
    assert mine.read_bytes() == b"a learner's work" and (tmp_path / "notes.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "thesis.pt"]
    import os
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_a_life_killed_before_it_reports_kept_the_checkpoint_it_would_have_read(tmp_path):
    assert preemption._read_progress(tmp_path / "missing.bin", 40)["resumed_at"] == 40
    (tmp_path / "short.bin").write_bytes(b"\0" * 5)
    got = preemption._read_progress(tmp_path / "short.bin", 10)
    assert got["reached"] == got["checkpointed"] == 10 and got["writes"] == 0 and got["done"] == 0


def test_preemption_costs_pair_each_kill_with_the_next_lives_start_up():
    from types import SimpleNamespace

    from greenlab.techniques.preemption import Life, PreemptibleRun

    lives = [Life(started_s=0, seconds=2, resumed_at=0, reached=7, checkpointed=5, killed=True, first_step_s=1.0),
             Life(started_s=2, seconds=2, resumed_at=5, reached=9, checkpointed=8, killed=True, first_step_s=0.7),
             Life(started_s=4, seconds=3, resumed_at=8, reached=20, checkpointed=20, killed=False, first_step_s=0.6)]
    run = PreemptibleRun(checkpoint_every=3, steps=20, lives=lives, seconds=10.0,
                         measurement=SimpleNamespace(joules=50.0, estimated=True), checkpoints=6,
                         checkpoint_seconds=0.1)
    costs = run.preemption_costs(step_s=0.1)
    # life 1 lost 2 steps and life 2 took 0.6 s beyond a step to start; life 2 lost 1, life 3 took 0.5 s
    assert costs == [pytest.approx((0.8, 4.0)), pytest.approx((0.6, 3.0))]


def test_a_write_whose_report_the_kill_took_is_counted_but_not_timed():
    from types import SimpleNamespace

    from greenlab.techniques.preemption import PreemptibleRun

    run = PreemptibleRun(checkpoint_every=10, steps=400, lives=[], seconds=5.0,
                         measurement=SimpleNamespace(joules=1.0, estimated=True), checkpoints=40,
                         checkpoint_seconds=0.39, unreported_writes=1)
    assert run.seconds_per_checkpoint == pytest.approx(0.01), "39 timed writes share 0.39 s"
    assert PreemptibleRun(checkpoint_every=10, steps=10, lives=[], seconds=1.0, measurement=None,
                          checkpoints=1, checkpoint_seconds=0.0, unreported_writes=1).seconds_per_checkpoint is None


def test_a_killed_life_is_settled_by_the_checkpoint_the_next_life_found():
    from greenlab.techniques.preemption import Life

    def killed(reached, checkpointed):
        return Life(started_s=0, seconds=1, resumed_at=0, reached=reached, checkpointed=checkpointed,
                    killed=True, first_step_s=0.5)

    # killed between the checkpoint's rename (step 20) and its report (which still said 10)
    renamed = killed(reached=20, checkpointed=10)
    renamed.settle(20)
    assert (renamed.checkpointed, renamed.reached, renamed.lost_steps) == (20, 20, 0)
    # killed during the write, before the rename: the file still holds step 10
    torn = killed(reached=20, checkpointed=10)
    torn.settle(10)
    assert (torn.checkpointed, torn.lost_steps) == (10, 10)
    # killed before its first report: it reached at least the step it would have resumed at
    silent = killed(reached=0, checkpointed=0)
    silent.settle(10)
    assert (silent.reached, silent.lost_steps) == (10, 0)
    finished = Life(started_s=0, seconds=1, resumed_at=0, reached=5, checkpointed=5, killed=False, first_step_s=0.5)
    with pytest.raises(ValueError, match="killed"):
        finished.settle(5)


def test_a_read_verdict_refuses_a_window_too_short_to_read():
    from types import SimpleNamespace

    windows = [(f"{name} repeat {r + 1}", SimpleNamespace(short=(name, r) == ("tar shards", 1)))
               for r in range(3) for name in ("small files", "tar shards")]
    c = storage.ReadComparison(samples=10, passes={}, seconds={"small files": [2.0, 2.1, 2.2], "tar shards": [1.0] * 3},
                               joules={"small files": [4.0, 4.1, 4.2], "tar shards": [1.0] * 3}, files={},
                               bytes_on_disk={}, windows=windows)
    assert c.paired("joules").short_windows == 1 and c.paired("joules").detectable is None
    assert c.paired("seconds").short_windows == 0 and c.paired("seconds").detectable is True
