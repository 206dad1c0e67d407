"""Tests for greenlab.recipes: the capstone's ladder of one change per row and the shared
learning-rate search."""

import dataclasses

import pytest

from fakes import SlopeSource
from greenlab import data, models, recipes
from greenlab.train import TrainConfig


def test_recipes_share_seed_budget_and_evaluation_schedule():
    for quick in (True, False):
        naive = recipes.naive_recipe(quick=quick)[1]
        green = recipes.green_recipe(device="cpu", quick=quick)[1]
        assert naive.seed == green.seed and naive.epochs == green.epochs
        assert naive.eval_every is None and green.eval_every is None
        assert naive.eval_every_samples == green.eval_every_samples is not None


def test_the_ladder_changes_one_thing_per_row_and_ends_at_green():
    naive = recipes.naive_recipe(quick=True)[1]
    green = dataclasses.replace(recipes.green_recipe(device="cpu", quick=True)[1], precision="bf16",
                                channels_last=True)
    ladder = recipes.one_change_at_a_time(naive, green)
    assert list(ladder) == ["naive", "+ device data", "+ batch 32, lr 0.1", "+ bf16", "+ channels-last"]
    rows = list(ladder.values())
    names = [f.name for f in dataclasses.fields(TrainConfig) if f.name != "label"]
    for before, after in zip(rows, rows[1:]):
        changed = {n for n in names if getattr(before, n) != getattr(after, n)}
        assert changed and any(changed <= set(group) for group, _ in recipes.LADDER), changed
    assert all(r.stop_at_target for r in rows)
    last = dataclasses.replace(rows[-1], label=green.label)
    assert last == dataclasses.replace(green, stop_at_target=True)
    # the CPU recipes share precision and memory format: those rows are left out
    cpu = recipes.one_change_at_a_time(naive, recipes.green_recipe(device="cpu", quick=True)[1])
    assert list(cpu) == ["naive", "+ device data", "+ batch 32, lr 0.1"]


def test_the_ladder_refuses_recipes_that_differ_elsewhere():
    naive = recipes.naive_recipe(quick=True)[1]
    green = recipes.green_recipe(device="cpu", quick=True)[1]
    with pytest.raises(ValueError, match="seed"):
        recipes.one_change_at_a_time(naive, dataclasses.replace(green, seed=1))
    with pytest.raises(ValueError, match="eval_every_samples"):
        recipes.one_change_at_a_time(naive, dataclasses.replace(green, eval_every_samples=64))
    with pytest.raises(ValueError, match="TrainConfig"):
        recipes.one_change_at_a_time(naive, {"lr": 1})


def test_tune_lr_gives_each_candidate_the_same_samples_and_picks_by_validation(monkeypatch, capsys):
    import importlib

    gl_train = importlib.import_module("greenlab.train")
    real_train = gl_train.train

    def train_diverging_at_90(model, ds, cfg, **kw):
        res = real_train(model, ds, cfg, **kw)
        if cfg.lr == 90.0:  # stands for a run whose loss became NaN
            res.status = "diverged"
        return res

    monkeypatch.setattr(gl_train, "train", train_diverging_at_90)
    ds = data.load("synthetic", n_train=96, n_test=32, verbose=False)

    def model_fn():
        return models.build("mlp", input_shape=(1, 28, 28), hidden=(8,))

    base = TrainConfig(batch_size=16, epochs=1, target_accuracy=0.9, patience=2, eval_every_samples=32)
    tuning = recipes.tune_lr(model_fn, ds, base, candidates=(0.001, 0.05, 90.0), samples=160,
                             sources=[SlopeSource()], device="cpu")
    assert [r["lr"] for r in tuning.rows] == [0.001, 0.05, 90.0]
    assert tuning.samples_per_candidate == 160  # 10 steps of 16, over two epochs of 96
    scored = [r for r in tuning.rows if r["val_accuracy"] is not None]
    assert tuning.best_lr == max(scored, key=lambda r: r["val_accuracy"])["lr"]
    assert tuning.rows[2]["status"] == "diverged" and tuning.best_lr != 90.0  # a diverged run never wins
    assert tuning.joules > 0 and "chosen" in tuning.table()
    lines = capsys.readouterr().out.splitlines()  # a line per trial, as it runs
    assert [line.split(" ...")[0] for line in lines] == [
        f"greenlab.tune_lr recipe [{i}/3] lr {lr}, 10 steps" for i, lr in ((1, "0.001"), (2, "0.05"), (3, "90"))]
    assert lines[0].split(" ... ")[1].startswith("validation ") and lines[2].endswith("... diverged")
    with pytest.raises(ValueError, match="candidates"):
        recipes.tune_lr(model_fn, ds, base, candidates=())
    with pytest.raises(ValueError, match="samples"):
        recipes.tune_lr(model_fn, ds, base, samples=0)
