"""Tests for greenlab.recipes: the capstone's ladder of one change per row and the shared
learning-rate search."""

import dataclasses

import pytest

from fakes import SlopeSource
from greenlab.training import data, models
from greenlab.course import bills, recipes
from greenlab.training.loop import TrainConfig


def test_recipes_share_seed_passes_and_data_and_the_naive_one_is_the_tutorials():
    for quick in (True, False):
        naive = recipes.naive_recipe(quick=quick)
        green = recipes.green_recipe(device="cpu", quick=quick)
        model_fn, config, spec = naive  # unpacks as the GPU suite reads it
        assert naive.config.seed == green.config.seed and naive.config.epochs == green.config.epochs
        assert naive.data_spec == green.data_spec
        assert naive.config.target_accuracy == green.config.target_accuracy
        cfg = naive.config
        assert (cfg.batch_size, cfg.lr, cfg.momentum, cfg.optimizer, cfg.precision, cfg.loader) == (
            4, 0.001, 0.9, "sgd", "fp32", "dataloader")
        assert cfg.eval_every_samples is None and not cfg.stop_at_target  # scored once per pass, no stop
        assert green.config.stop_at_target and green.config.lr_schedule == "warmup-linear"
        assert naive.lr_candidates() == (0.000333, 0.001, 0.003, 0.01, 0.03)
        assert len(green.lr_candidates()) == len(naive.lr_candidates())  # the same search budget


def test_tutorial_network_shape():
    import torch

    net = recipes.tutorial_cnn()
    assert net(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    convs = [m for m in net if isinstance(m, torch.nn.Conv2d)]
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    assert [c.out_channels for c in convs] == [6, 16] and [c.kernel_size for c in convs] == [(5, 5)] * 2
    assert [m.out_features for m in linears] == [120, 84, 10]
    assert recipes.tutorial_cnn(in_channels=3, image_size=32)(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
    with pytest.raises(ValueError, match="image_size"):
        recipes.tutorial_cnn(image_size=8)


def test_green_uses_bf16_only_where_native(monkeypatch):
    from greenlab.session import hardware

    def support(native):
        return lambda precision, device="cpu", **kw: hardware.PrecisionSupport(precision, device, native, "test")

    monkeypatch.setattr(hardware, "precision_support", support(False))
    assert recipes.green_recipe(device="cpu").config.precision == "fp32"
    with pytest.raises(ValueError, match="emulated"):
        recipes.green_recipe(device="cpu", bf16=True)
    monkeypatch.setattr(hardware, "precision_support", support(True))
    green = recipes.green_recipe(device="cpu")
    assert green.config.precision == "bf16" and not green.config.channels_last  # channels-last: CUDA only
    # the CPU and quick sizes' 64-wide MLP leaves bf16 out unless asked for
    for size in ("cpu", "quick"):
        assert recipes.green_recipe(device="cpu", size=size).config.precision == "fp32"
        assert recipes.green_recipe(device="cpu", size=size, bf16=True).config.precision == "bf16"


def test_the_ladder_changes_one_thing_per_row_and_ends_at_green():
    naive = recipes.naive_recipe(quick=True)
    green = recipes.green_recipe(device="cpu", quick=True)
    green = green._replace(config=dataclasses.replace(green.config, precision="bf16", channels_last=True))
    ladder = recipes.one_change_at_a_time(naive, green)
    assert list(ladder) == ["naive", "+ batch 32, lr 0.01, warm-up 3", "+ MLP 784-64-10", "+ stop at target",
                            "+ device data", "+ one-cycle schedule", "+ evaluate every 256 samples", "+ bf16",
                            "+ channels-last"]
    rows = list(ladder.values())
    names = [f.name for f in dataclasses.fields(TrainConfig) if f.name != "label"]
    groups = [set(group) for group, _ in recipes.LADDER]
    for before, after in zip(rows, rows[1:]):
        changed = {n for n in names if getattr(before.config, n) != getattr(after.config, n)}
        if before.model_fn is not after.model_fn:
            changed.add("model")
        assert changed and any(changed <= group for group in groups), changed
    assert rows[0].model_fn is recipes.tutorial_cnn and rows[-1].model_fn is green.model_fn
    assert dataclasses.replace(rows[-1].config, label=green.config.label) == green.config
    # configs alone: no network row
    configs = recipes.one_change_at_a_time(naive.config, green.config)
    assert "+ MLP 784-64-10" not in configs and list(configs)[-1] == "+ channels-last"


def test_the_ladder_refuses_recipes_that_differ_elsewhere():
    naive = recipes.naive_recipe(quick=True)
    green = recipes.green_recipe(device="cpu", quick=True)
    with pytest.raises(ValueError, match="seed"):
        recipes.one_change_at_a_time(naive, green._replace(config=dataclasses.replace(green.config, seed=1)))
    with pytest.raises(ValueError, match="epochs"):
        recipes.one_change_at_a_time(naive, green._replace(config=dataclasses.replace(green.config, epochs=9)))
    with pytest.raises(ValueError, match="Recipes"):
        recipes.one_change_at_a_time(naive, {"lr": 1})


def test_compare_ladder_gives_each_row_its_network_and_pairs_the_repeats():
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    small = TrainConfig(batch_size=16, epochs=1, max_steps=2, loader="dataloader", target_accuracy=None)
    built = []

    def mlp():
        built.append("mlp")
        return models.build("mlp", input_shape=(1, 28, 28), hidden=(4,))

    def cnn():
        built.append("cnn")
        return models.build("cnn", depth=1, width=2)

    cnn.model_name = "small CNN"
    naive = recipes.Recipe(mlp, small, {})
    green = recipes.Recipe(cnn, dataclasses.replace(small, loader="device"), {})
    ladder = recipes.one_change_at_a_time(naive, green)
    assert list(ladder) == ["naive", "+ small CNN", "+ device data"]
    result = recipes.compare_ladder(ladder, ds, repeats=1, warmup=0, save=False, sources=[SlopeSource()])
    # each row is built twice: its short warm-up run, then its measured run
    assert sorted(built) == ["cnn"] * 4 + ["mlp"] * 2 and result.names == list(ladder)
    # the headline's runs stand for the two ends: only the row between them is trained again
    ends = recipes.compare_ends(naive, green, ds, repeats=1, warmup=0, save=False, sources=[SlopeSource()])
    built.clear()
    again = recipes.compare_ladder(ladder, ds, repeats=1, ends=ends, warmup=0, save=False, sources=[SlopeSource()])
    assert built == ["cnn", "cnn"] and again.names == list(ladder)  # its warm-up, then its run
    assert again.runs["naive"][0] is ends.runs["naive"][0] and again.runs["+ device data"][0] is ends.runs["green"][0]
    with pytest.raises(ValueError, match="naive"):
        recipes.compare_ladder(recipes.one_change_at_a_time(recipes.Recipe(mlp, dataclasses.replace(small, lr=0.5), {}),
                                                            green), ds, repeats=1, ends=ends, save=False)


def test_tune_lr_with_a_stop_at_the_target_picks_the_fewest_samples(monkeypatch):
    import importlib
    from types import SimpleNamespace

    gl_train = importlib.import_module("greenlab.training.loop")
    seen = []

    def fake_train(model, ds, cfg, **kw):
        seen.append(cfg)
        steps = {0.01: None, 0.03: 4, 0.1: 2}[cfg.lr]
        return SimpleNamespace(status="target-reached" if steps else "completed", val_accuracy=0.5,
                               joules=1.0, seconds=0.1, estimated=True, steps_to_target=steps,
                               config={"batch_size": cfg.batch_size, "accum_steps": cfg.accum_steps})

    monkeypatch.setattr(gl_train, "train", fake_train)
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    cfg = TrainConfig(batch_size=16, target_accuracy=0.6, stop_at_target=True, eval_every_samples=32)
    tuning = recipes.tune_lr(lambda: None, ds, cfg, candidates=(0.01, 0.03, 0.1), samples=128)
    assert tuning.best_lr == 0.1 and [r["samples_to_target"] for r in tuning.rows] == [None, 64, 32]
    assert all(c.target_accuracy == 0.6 and c.stop_at_target and c.max_steps == 8 for c in seen)
    assert "target after 32 samples" in tuning.table()


def test_one_cycle_rises_then_falls_to_zero():
    assert [recipes.one_cycle(s, 6, 2) for s in range(7)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0]
    assert recipes.one_cycle(9, 6, 2) == 0.0
    with pytest.raises(ValueError, match="step"):
        recipes.one_cycle(-1, 6, 2)


def test_tune_lr_gives_each_candidate_the_same_samples_and_picks_by_validation(monkeypatch, capsys):
    import importlib

    gl_train = importlib.import_module("greenlab.training.loop")
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

    base = TrainConfig(batch_size=16, epochs=1, target_accuracy=0.9, stop_at_target=False, patience=2,
                       eval_every_samples=32)
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


# --- the honest bill: energy to the target, search included, only where every repeat reached it -----

def _fake_comparison(rows):
    """{row: [joules_to_target per repeat, None where missed]} as the parts of a Comparison the bills read."""
    from types import SimpleNamespace

    return SimpleNamespace(names=list(rows), runs={name: [SimpleNamespace(joules_to_target=j) for j in values]
                                                   for name, values in rows.items()})


def test_a_row_that_missed_in_any_repeat_has_no_energy_to_the_target():
    cmp = _fake_comparison({"naive": [10.0, None, 12.0], "green": [2.0, 2.2, 1.9]})
    assert not bills.reached_in_every_repeat(cmp, "naive") and bills.reached_in_every_repeat(cmp, "green")
    bill = bills.target_bill(cmp, "naive", tuning_joules=5.0)
    assert (bill.reached, bill.repeats, bill.joules) == (2, 3, None) and bill.per_repeat == [15.0, None, 17.0]
    assert bill.cell() == "none: 2 of 3 reached"
    verdict = bills.compare_bills(cmp, "naive", "green", {"naive": 5.0, "green": 1.0})
    assert verdict.factor is None
    assert "naive reached the target in 2 of 3 repeats, green in 3 of 3" in verdict.sentence()
    assert "no factor" in verdict.sentence()
    table = bills.bill_table(cmp, {"naive": 5.0})
    assert "none" in table.splitlines()[1] and "missed the target" in table.splitlines()[2]
    with pytest.raises(ValueError, match="unknown row"):
        bills.target_bill(cmp, "other")
    with pytest.raises(ValueError, match="tuning_joules"):
        bills.target_bill(cmp, "green", tuning_joules=-1)


def test_the_honest_bill_adds_each_search_to_every_repeat_and_pairs_the_ratios():
    cmp = _fake_comparison({"naive": [10.0, 11.0, 12.0], "green": [2.0, 2.0, 2.0]})
    verdict = bills.compare_bills(cmp, "naive", "green", {"naive": 20.0, "green": 1.0}, names={"green": "the green"})
    assert verdict.baseline.joules == pytest.approx(31.0) and verdict.variant.joules == pytest.approx(3.0)
    ratios = [30 / 3, 31 / 3, 32 / 3]
    assert verdict.factor.estimate == pytest.approx((ratios[0] * ratios[1] * ratios[2]) ** (1 / 3))
    assert verdict.factor.detectable and "the green" in verdict.sentence() and "detectable" in verdict.sentence()
    without = bills.compare_bills(cmp, "naive", "green")  # the runs alone
    assert without.factor.estimate == pytest.approx((5 * 5.5 * 6) ** (1 / 3))


def test_halving_keeps_the_best_rates_of_a_short_rung_and_counts_both_rungs(monkeypatch):
    from types import SimpleNamespace

    from greenlab.techniques.lm import comparison as lm

    calls = []

    def fake_tune(model_fn, corpus, config, rates, device=None):
        calls.append((config.steps, config.stop_at_target, list(rates)))
        runs = {r: SimpleNamespace(val_loss=abs(r - 0.03) + (0 if config.stop_at_target else 1),
                                   steps_to_target=10 if config.stop_at_target else None) for r in rates}
        return min(rates, key=lambda r: runs[r].val_loss), runs, 1.0 * len(rates)

    monkeypatch.setattr(lm, "tune_lr", fake_tune)
    green = recipes.green_lm_recipe(device="cpu", quick=True, bf16=False)
    rates = green.lr_candidates()
    best, trials, spent, where = recipes.halving_lm_lr(None, None, green.config, rates)
    assert calls[0] == (round(green.config.steps * 0.1), False, list(rates))  # every rate, a tenth of the steps
    assert calls[1][0] == green.config.steps and calls[1][1] and sorted(calls[1][2]) == [0.01, 0.03]
    assert best == 0.03 and spent == len(rates) + 2
    assert [where[r] for r in rates] == ["rung 1", "rung 1", "rung 2", "rung 2", "rung 1"]
    with pytest.raises(ValueError, match="keep"):
        recipes.halving_lm_lr(None, None, green.config, rates, keep=9)


def test_a_bill_verdict_names_every_recipe_without_an_energy_to_the_target():
    cmp = _fake_comparison({"naive": [10.0, None, 12.0], "green": [None, 2.2, 1.9]})
    assert "naive and green have no energy to the target" in bills.compare_bills(cmp, "naive", "green").sentence()


def test_no_bill_factor_rests_on_a_window_too_short_to_read_up_to_the_target():
    from types import SimpleNamespace

    cmp = _fake_comparison({"naive": [10.0, 11.0, 12.0], "green": [2.0, 2.0, 2.0]})
    cmp.runs["green"][1] = SimpleNamespace(joules_to_target=2.0, short=True)  # its meter could not read it
    verdict = bills.compare_bills(cmp, "naive", "green", {"naive": 20.0, "green": 1.0})
    assert not verdict.factor.measurable and verdict.factor.detectable is None
    assert "not measurable: 1 of 3 paired repeat(s)" in verdict.sentence() and "no factor" in verdict.sentence()
    assert "not measurable" in bills.bill_table(cmp).splitlines()[2]
