"""Tests for greenlab.train: the loop's correctness, stopping rules and records."""

import copy
import json
import threading

import pytest
import torch

from greenlab.training import data, models
from greenlab.base import results
from fakes import SlopeSource
from greenlab.training.loop import Interrupted, StopTraining, TrainConfig, last_interrupted, train




@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def ds():
    return data.load("synthetic", n_train=240, n_test=120, verbose=False)


def tiny_mlp(seed=0, shape=(1, 28, 28)):
    torch.manual_seed(seed)
    return models.build("mlp", input_shape=shape, hidden=(32,))


def run(model, dataset, **kw):
    opts = {"log": False, "sources": [SlopeSource()], "device": "cpu"}
    cfg = kw.pop("cfg")
    opts.update(kw)
    return train(model, dataset, cfg, **opts)


@pytest.mark.parametrize("kw,match", [
    ({"batch_size": 0}, "batch_size"), ({"batch_size": -3}, "batch_size"), ({"accum_steps": 0}, "accum_steps"),
    ({"epochs": 0}, "epochs"), ({"max_steps": 0}, "max_steps"), ({"precision": "fp8"}, "fp32, bf16, fp16"),
    ({"target_accuracy": 1.5}, "\\(0, 1\\]"), ({"target_accuracy": 0}, "\\(0, 1\\]"),
    ({"lr": 0}, "lr"), ({"loader": "magic"}, "device, dataloader"), ({"lr_schedule": "wiggle"}, "cosine"),
    ({"batch_schedule": [(0, 0)]}, "batch size"), ({"patience": 0}, "patience"), ({"optimizer": "lion"}, "sgd"),
])
def test_config_refuses_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kw)


def _tiny_dataset(n=10, shape=(1, 4, 4)):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, *shape, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    held_x, held_y = torch.randn(4, *shape, generator=g), torch.randint(0, 3, (4,), generator=g)
    return data.Dataset("tiny", x, y, held_x, held_y, num_classes=3, source="generated",
                        val_x=held_x.clone(), val_y=held_y.clone())


@pytest.mark.parametrize("micro,accum,big", [(2, 3, 6), (3, 2, 6), (3, 4, 12)])
def test_accumulation_equals_one_big_batch(micro, accum, big):
    # 10 samples: windows of 6+4 (a short final window) or one window of 10 (partial micro-batch)
    tiny = _tiny_dataset()
    start = models.build("mlp", input_shape=(1, 4, 4), hidden=(8,), num_classes=3)
    a, b = copy.deepcopy(start), copy.deepcopy(start)
    common = {"lr": 0.5, "momentum": 0.0, "epochs": 1, "seed": 3}
    ra = run(a, tiny, cfg=TrainConfig(batch_size=micro, accum_steps=accum, **common), save=False)
    rb = run(b, tiny, cfg=TrainConfig(batch_size=big, accum_steps=1, **common), save=False)
    assert ra.steps == rb.steps and ra.samples == rb.samples == 10
    for pa, pb, p0 in zip(a.parameters(), b.parameters(), start.parameters()):
        assert not torch.equal(pa, p0)  # it trained
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_batchnorm_breaks_accumulation_equivalence():
    tiny = _tiny_dataset(n=12)
    torch.manual_seed(0)
    start = models.build("cnn", in_channels=1, depth=1, width=4, norm="batch", num_classes=3)
    a, b = copy.deepcopy(start), copy.deepcopy(start)
    common = {"lr": 0.5, "momentum": 0.0, "epochs": 1, "seed": 3}
    run(a, tiny, cfg=TrainConfig(batch_size=3, accum_steps=4, **common), save=False)
    run(b, tiny, cfg=TrainConfig(batch_size=12, accum_steps=1, **common), save=False)
    diff = max((pa - pb).abs().max().item() for pa, pb in zip(a.parameters(), b.parameters()))
    assert diff > 1e-4  # statistics over 3 samples are not those over 12


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_runs(ds, precision):
    res = run(tiny_mlp(), ds, cfg=TrainConfig(precision=precision, batch_size=60, epochs=1), save=False)
    assert res.status == "completed" and res.steps == 4
    assert res.final_accuracy is not None and res.config["precision"] == precision


def test_history_carries_cumulative_joules_and_result_fields(ds, tmp_path):
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=30, epochs=2, eval_every=3))
    steps = [h["step"] for h in res.history]
    assert steps == [3, 6, 8, 9, 12, 15, 16]  # every 3 steps, plus epoch ends
    joules = [h["joules"] for h in res.history]
    assert joules == sorted(joules) and joules[0] > 0
    assert res.joules >= joules[-1]
    assert res.joules == pytest.approx(10 * res.seconds, rel=0.05)  # the fake 10 W meter
    assert res.samples == 480 and res.epochs_run == 2 and res.samples_per_second > 0
    assert res.params == models.count_params(tiny_mlp())
    assert res.flops["train_step_per_sample"] > res.flops["forward_per_sample"] > 0
    assert res.provenance["device"] == "cpu" and "torch" in res.provenance
    assert "host" not in json.dumps(res.provenance).lower()
    assert res.peak_memory_kind.startswith("cpu process RSS")
    saved = results.load()
    assert len(saved) == 1 and saved[0]["status"] == "completed" and saved[0]["kind"] == "train"


class StepClock:
    """A fake ``time.perf_counter`` that stands still except for one second per optimizer step
    (its ``on_step``), so time and the 10 W meter's joules are exact whatever the machine's load."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def on_step(self, state):
        self.now += 1.0


def test_target_accuracy_records_time_and_energy_and_stops(ds, monkeypatch):
    import time

    clock = StepClock()
    monkeypatch.setattr(time, "perf_counter", clock)
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=5, eval_every=2, lr=0.1,
                                              target_accuracy=0.5), callbacks=[clock])
    assert res.status == "target-reached"
    hit = next(h for h in res.history if h["accuracy"] >= 0.5)
    assert res.steps_to_target == hit["step"] == res.steps
    assert res.joules_to_target == hit["joules"]
    assert res.seconds_to_target == hit["seconds"] <= res.seconds
    assert res.seconds_to_target == pytest.approx(res.steps_to_target * 1.0)  # one fake second a step
    assert res.joules_to_target == pytest.approx(10 * res.seconds_to_target)  # the 10 W meter, exactly


def test_training_reads_the_validation_split_and_scores_the_test_split_once(ds):
    import dataclasses

    cfg = TrainConfig(batch_size=20, epochs=3, eval_every=2, lr=0.1, target_accuracy=0.6, patience=4)
    plain = run(tiny_mlp(), ds, cfg=cfg)
    # scrambled test labels change the reported accuracy and nothing else: no rule reads them
    scrambled = dataclasses.replace(ds, test_y=(ds.test_y + 1) % ds.num_classes)
    other = run(tiny_mlp(), scrambled, cfg=cfg)
    assert [h["accuracy"] for h in plain.history] == [h["accuracy"] for h in other.history]
    assert plain.steps == other.steps and plain.status == other.status
    assert plain.steps_to_target == other.steps_to_target
    assert plain.final_accuracy != other.final_accuracy
    model = tiny_mlp()
    res = run(model, ds, cfg=cfg)
    with torch.no_grad():
        val = float((model(ds.val_x).argmax(1) == ds.val_y).float().mean())
        test = float((model(ds.test_x).argmax(1) == ds.test_y).float().mean())
    assert res.val_accuracy == pytest.approx(val) == pytest.approx(res.history[-1]["accuracy"])
    assert res.final_accuracy == pytest.approx(test)
    assert "test accuracy" in res.summary() and "validation" in res.summary()


def test_evaluation_in_samples_is_the_same_schedule_for_every_batch_size(ds):
    rows = {}
    for bs in (8, 16, 48):
        res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=bs, epochs=1, eval_every_samples=48, lr=0.05))
        rows[bs] = [h["samples"] for h in res.history]
    assert rows[8] == rows[16] == rows[48] == [48, 96, 144, 192, 240]
    with pytest.raises(ValueError, match="not both"):
        TrainConfig(eval_every=2, eval_every_samples=64)
    with pytest.raises(ValueError, match="eval_every_samples"):
        TrainConfig(eval_every_samples=0)


def test_an_interrupted_run_reports_no_test_accuracy(ds):
    def on_step(state):
        if state.step == 2:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=1), callbacks=[on_step], save=False)
    res = info.value.result
    assert res.status == "interrupted" and res.final_accuracy is None


def test_target_without_stopping_keeps_training(ds):
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=2, eval_every=2, lr=0.1,
                                              target_accuracy=0.3, stop_at_target=False))
    assert res.status == "completed" and res.steps == 24
    assert res.steps_to_target is not None and res.steps_to_target < 24


def test_stop_event_stops_cleanly(ds):
    stop = threading.Event()

    def on_step(state):
        if state.step == 3:
            stop.set()

    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=3), callbacks=[on_step], stop_event=stop)
    assert res.status == "stopped" and res.steps == 3
    assert res.history[-1]["step"] == 3 and res.final_accuracy is not None


def test_stop_training_from_a_callback(ds):
    class Stopper:
        def on_eval(self, state):
            assert state.accuracy is not None and state.joules > 0 and state.loss > 0
            raise StopTraining("enough")

    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=3, eval_every=2), callbacks=[Stopper()])
    assert res.status == "stopped" and res.steps == 2 and "enough" in res.message


def test_keyboard_interrupt_returns_partial_result_and_saves_it(ds):
    def ctrl_c(state):
        if state.step == 5:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=3), callbacks=ctrl_c)
    res = info.value.result
    assert res is last_interrupted()
    assert res.status == "interrupted" and res.steps == 5 and res.samples == 100
    assert res.joules > 0
    saved = results.load()
    assert [r["status"] for r in saved] == ["interrupted"]


def test_nan_loss_is_reported_as_diverged(ds, capsys):
    bad = copy.copy(ds)
    bad.train_x = ds.train_x.clone()
    bad.train_x[7] = float("nan")
    res = run(tiny_mlp(), bad, cfg=TrainConfig(batch_size=20, epochs=2), log=True)
    assert res.status == "diverged"
    assert "diverged" in res.message and "learning rate" in res.message
    assert "diverged" in capsys.readouterr().out
    assert results.load()[0]["status"] == "diverged"


def test_patience_stops_a_run_that_does_not_improve(ds):
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=20, epochs=5, eval_every=1, lr=1e-12, patience=2))
    assert res.status == "early-stopped" and len(res.history) == 3


def test_batch_schedule_and_max_steps(ds):
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=40, epochs=3, batch_schedule=[(1, 80), (2, 120)]),
              save=False)
    assert res.steps == 6 + 3 + 2
    res = run(tiny_mlp(), ds, cfg=TrainConfig(batch_size=40, epochs=3, batch_schedule=lambda e: 60 * (e + 1),
                                              max_steps=5), save=False)
    assert res.steps == 5 and res.samples == 4 * 60 + 120


@pytest.mark.parametrize("sched", ["step", "cosine", "warmup-linear", lambda step: 0.5])
def test_lr_schedules(ds, sched):
    cfg = TrainConfig(batch_size=20, epochs=1, lr=0.1, lr_schedule=sched, lr_step_size=4, warmup_steps=3)
    res = run(tiny_mlp(), ds, cfg=cfg, save=False)
    last_lr = res.history[-1]["lr"]
    expected = {"step": 0.1 * 0.1 ** 3, "cosine": 0.0, "warmup-linear": 0.0}.get(sched, 0.05)
    assert last_lr == pytest.approx(expected, abs=1e-9)


def test_dataloader_path_channels_last_and_augment(ds):
    torch.manual_seed(0)
    cnn = models.build("cnn", width=4, depth=1)
    cfg = TrainConfig(batch_size=40, epochs=1, loader="dataloader", channels_last=True, augment=True)
    res = run(cnn, ds, cfg=cfg, save=False)
    assert res.status == "completed" and res.samples == 240


def test_train_refuses_bad_arguments(ds):
    with pytest.raises(ValueError, match="TrainConfig"):
        train(tiny_mlp(), ds, {"batch_size": 2}, log=False)
    with pytest.raises(ValueError, match="Dataset"):
        train(tiny_mlp(), (ds.train_x, ds.train_y), TrainConfig(), log=False)


@pytest.mark.parametrize("sources, error, match", [
    ([], ValueError, "at least one energy source"),
    ({"cpu": SlopeSource()}, TypeError, "sources must be a list of energy sources"),
    ([SlopeSource(), "rapl"], TypeError, r"sources\[1\] must be an energy source"),
])
def test_train_refuses_sources_that_cannot_measure_before_any_work(ds, sources, error, match):
    with pytest.raises(error, match=match):
        run(tiny_mlp(), ds, cfg=TrainConfig(), sources=sources, save=False)


def test_train_keeps_the_sources_list_it_was_given():
    from greenlab.training.meter import check_sources

    given = [SlopeSource()]
    assert check_sources(given) is given
    assert check_sources(iter(given)) == given


def test_eval_callbacks_see_the_mean_loss_since_the_last_evaluation():
    import greenlab as gl

    data = gl.data.load("synthetic", n_train=96, n_test=32, verbose=False)
    seen = []

    class Watch:
        def on_eval(self, state):
            seen.append(state.mean_loss)

    model = gl.models.build("mlp", num_classes=data.num_classes, input_shape=data.input_shape)
    result = gl.train(model, data, gl.TrainConfig(batch_size=32, epochs=2), callbacks=[Watch()],
                      log=False, save=False)
    assert len(seen) == len(result.history) >= 2
    assert seen == [row["loss"] for row in result.history]
    assert all(loss is not None and loss > 0 for loss in seen)


def test_an_impossible_target_ends_at_the_budget_and_says_so():
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    model = models.build("mlp", num_classes=ds.num_classes, input_shape=ds.input_shape)
    result = train(model, ds, TrainConfig(batch_size=32, epochs=1, target_accuracy=1.0), log=False, save=False)
    assert result.status == "completed" and result.joules_to_target is None
    assert "not reached within the budget" in result.message
    assert "NOT reached" in result.summary()
