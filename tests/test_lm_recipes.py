"""Lesson 10's language-model recipes: train_lm's learning-rate schedule and stop at the target,
the tuning rule with a stop, and the naive/green LM recipes through the capstone's ladder
(``one_change_at_a_time``, ``compare_ends``, ``compare_ladder``). Tiny sizes: seconds in all."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch

from fakes import SlopeSource
from greenlab.course import recipes
from greenlab.techniques import lm


@pytest.fixture(scope="module")
def corpus():
    return lm.load_corpus(max_bytes=20_000)


def tiny():
    return lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)


def _lrs(config, steps):
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=config.lr)
    scheduler = lm.make_scheduler(opt, config)
    seen = []
    for _ in range(steps):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        if scheduler is not None:
            scheduler.step()
    return seen


def test_warmup_cosine_rises_linearly_then_falls_to_zero():
    cfg = lm.LMConfig(steps=10, lr=1.0, lr_schedule="warmup-cosine", warmup_steps=4)
    lrs = _lrs(cfg, 10)
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])  # (step + 1) / warm-up
    cosine = [0.5 * (1 + math.cos(math.pi * k / 6)) for k in range(6)]  # from the peak to 0 at step 10
    assert lrs[4:] == pytest.approx(cosine)
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:]))
    assert _lrs(dataclasses.replace(cfg, lr_schedule="constant", warmup_steps=0), 5) == [1.0] * 5
    assert lm.make_scheduler(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0),
                             lm.LMConfig(lr=1.0)) is None


def test_train_lm_steps_its_schedule_and_records_the_rate(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=2, steps=6, lr=1e-2, eval_every=1, eval_batches=1,
                      lr_schedule="warmup-cosine", warmup_steps=2)
    run = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[SlopeSource()])
    assert [row["lr"] for row in run.history] == pytest.approx(_lrs(cfg, 6))
    assert run.history[0]["lr"] == pytest.approx(5e-3) and run.history[-1]["lr"] < run.history[1]["lr"]


def test_stop_at_target_ends_the_run_at_the_first_crossing_and_scores_it(corpus):
    cfg = lm.LMConfig(seq_len=16, batch_size=2, steps=5, eval_every=1, eval_batches=1, target_loss=19.9,
                      stop_at_target=True, score_batches=3)
    run = lm.train_lm(tiny(), corpus, cfg, device="cpu", sources=[SlopeSource()])
    assert run.status == "target-reached" and run.steps == 1 and run.steps_to_target == 1
    assert run.tokens == 16 * 2 and len(run.history) == 1
    again = lm.train_lm(tiny(), corpus, dataclasses.replace(cfg, stop_at_target=False), device="cpu",
                        sources=[SlopeSource()])
    assert again.steps == 5 and again.status == "completed" and again.steps_to_target == 1
    assert run.final_val_loss is not None and math.isfinite(run.final_val_loss)


def test_lm_config_refuses_a_stop_without_a_target_and_unknown_schedules():
    with pytest.raises(ValueError, match="stop_at_target"):
        lm.LMConfig(stop_at_target=True)
    with pytest.raises(ValueError, match="lr_schedule"):
        lm.LMConfig(lr_schedule="one-cycle")
    with pytest.raises(ValueError, match="warmup_steps"):
        lm.LMConfig(steps=5, lr_schedule="warmup-cosine", warmup_steps=5)


def test_tune_lr_with_a_stop_picks_the_fewest_steps_to_the_target(monkeypatch, corpus):
    from types import SimpleNamespace

    reach = {1e-3: None, 3e-3: 8, 1e-2: 4}

    def fake_train_lm(model, corpus, cfg, device=None):
        return SimpleNamespace(val_loss={1e-3: 3.0, 3e-3: 3.5, 1e-2: 3.9}[cfg.lr], joules=1.0,
                               steps_to_target=reach[cfg.lr])

    monkeypatch.setattr(lm.comparison, "train_lm", fake_train_lm)
    cfg = lm.LMConfig(steps=10, target_loss=4.0, stop_at_target=True)
    best, _, joules = lm.tune_lr(lambda c: None, corpus, cfg, (1e-3, 3e-3, 1e-2))
    assert best == 1e-2 and joules >= 0  # the fewest steps wins, not the lowest loss at the stop
    best, _, _ = lm.tune_lr(lambda c: None, corpus, dataclasses.replace(cfg, stop_at_target=False),
                            (1e-3, 3e-3, 1e-2))
    assert best == 1e-3  # without a stop, the lowest final loss


def test_naive_lm_recipe_is_the_tutorials_and_green_shares_its_task():
    for quick in (True, False):
        naive = recipes.naive_lm_recipe(quick=quick)
        green = recipes.green_lm_recipe(device="cpu", quick=quick)
        n, g = naive.config, green.config
        assert (n.lr, n.lr_schedule, n.precision, n.fused, n.stop_at_target) == (3e-4, "constant", "fp32", False, False)
        assert n.eval_every == n.steps // 10 and n.eval_batches == round(0.8 * n.eval_every)
        for field in ("seq_len", "batch_size", "steps", "target_loss", "seed", "score_batches"):
            assert getattr(n, field) == getattr(g, field), field
        assert g.stop_at_target and g.lr_schedule == "warmup-cosine" and g.warmup_steps == g.steps // 10
        assert g.eval_batches * n.eval_every < n.eval_batches * g.eval_every  # less evaluation per step
        assert naive.model_fn is green.model_fn and naive.lr_candidates() == (0.0003, 0.0009, 0.003, 0.009, 0.03)
        assert len(green.lr_candidates()) == len(naive.lr_candidates())
    with pytest.raises(ValueError, match="fused"):
        recipes.green_lm_recipe(device="cpu", quick=True, fused="yes")


def test_green_lm_uses_bf16_only_where_native_and_fused_only_when_asked(monkeypatch):
    from greenlab.session import hardware

    def support(native):
        return lambda precision, device="cpu", **kw: hardware.PrecisionSupport(precision, device, native, "test")

    monkeypatch.setattr(hardware, "precision_support", support(False))
    assert recipes.green_lm_recipe(device="cpu", quick=True).config.precision == "fp32"
    monkeypatch.setattr(hardware, "precision_support", support(True))
    green = recipes.green_lm_recipe(device="cpu", quick=True, fused=True)
    assert green.config.precision == "bf16" and green.config.fused
    ladder = recipes.one_change_at_a_time(recipes.naive_lm_recipe(quick=True), green)
    assert list(ladder) == ["naive", "+ stop at target", "+ warm-up 15 and cosine, lr 0.001",
                            "+ evaluate every 5 steps on 2 batches", "+ fused AdamW", "+ bf16"]
    assert dataclasses.replace(list(ladder.values())[-1].config, label="green") == green.config
    assert recipes.green_lm_recipe(device="cpu", quick=True, bf16=False).config.precision == "fp32"
    monkeypatch.setattr(hardware, "precision_support", support(False))
    with pytest.raises(ValueError, match="emulated"):
        recipes.green_lm_recipe(device="cpu", quick=True, bf16=True)


def test_the_lm_ladder_refuses_a_different_task_or_a_mixed_pair():
    naive, green = recipes.naive_lm_recipe(quick=True), recipes.green_lm_recipe(device="cpu", quick=True)
    with pytest.raises(ValueError, match="seq_len"):
        recipes.one_change_at_a_time(naive, green._replace(config=dataclasses.replace(green.config, seq_len=16)))
    with pytest.raises(ValueError, match="one kind"):
        recipes.one_change_at_a_time(naive, recipes.green_recipe(device="cpu", quick=True))


def _tiny_lm_pair():
    built = []

    def model_fn():
        built.append(1)
        return tiny()

    base = lm.LMConfig(seq_len=16, batch_size=2, steps=4, lr=1e-2, eval_every=2, eval_batches=1, target_loss=19.0)
    naive = recipes.Recipe(model_fn, base, {})
    green = recipes.Recipe(model_fn, dataclasses.replace(base, stop_at_target=True, eval_every=1,
                                                         lr_schedule="warmup-cosine", warmup_steps=1), {})
    return naive, green, built


def test_compare_ladder_reuses_the_headline_runs_for_its_ends(corpus):
    naive, green, built = _tiny_lm_pair()
    ends = recipes.compare_ends(naive, green, corpus, repeats=2, device="cpu")
    assert ends.names == ["naive", "green"] and len(built) == 4
    ladder = recipes.one_change_at_a_time(naive, green)
    assert list(ladder) == ["naive", "+ stop at target", "+ warm-up 1 and cosine, lr 0.01",
                            "+ evaluate every 1 steps on 1 batches"]
    cmp = recipes.compare_ladder(ladder, corpus, repeats=2, ends=ends, device="cpu")
    assert len(built) == 4 + 2 * 2  # only the two middle rows trained, twice each
    assert cmp.names == list(ladder) and cmp.repeats == 2
    for r in range(2):
        assert cmp.repeat_runs[r]["naive"] is ends.repeat_runs[r]["naive"]
        assert cmp.repeat_runs[r][list(ladder)[-1]] is ends.repeat_runs[r]["green"]
        assert {run.config["seed"] for run in cmp.repeat_runs[r].values()} == {r}  # paired seeds
    assert cmp.runs["+ stop at target"][0].status == "target-reached"
    with pytest.raises(ValueError, match="repeats"):
        recipes.compare_ladder(ladder, corpus, repeats=3, ends=ends, device="cpu")
    other = copy.copy(ends)  # the same runs, said to be of another green recipe
    other.recipe_configs = {"naive": naive.config, "green": naive.config}
    with pytest.raises(ValueError, match="green"):
        recipes.compare_ladder(ladder, corpus, repeats=2, ends=other, device="cpu")
    with pytest.raises(ValueError, match="compare_ends"):
        recipes.compare_ladder(ladder, corpus, repeats=2, ends=cmp, device="cpu")
