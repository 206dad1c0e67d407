"""Lesson 09 checker: a valid recipe that reached the target and is on the leaderboard passes;
each missing piece fails with what to do; a stub is not attempted."""

from types import SimpleNamespace

import pytest

from greenlab.course import checks
from greenlab.course.leaderboard import Leaderboard
from greenlab.training.loop import TrainConfig


def run(joules=12.5, to_target=4.0, best=0.85):
    return SimpleNamespace(joules=joules, seconds=3.0, joules_to_target=to_target,
                           seconds_to_target=1.0 if to_target else None, best_accuracy=best,
                           final_accuracy=best, status="target-reached" if to_target else "completed",
                           estimated=True, sources={"cpu": "estimate"}, problems=[], provenance={}, co2e_g=None,
                           region="WORLD", config={"target_accuracy": 0.8})


def cfg(**kw):
    return TrainConfig(**{"target_accuracy": 0.8, "batch_size": 64, **kw})


def test_stub_is_not_attempted():
    assert checks.capstone_submission(None).status == checks.NOT_ATTEMPTED


def test_not_a_config_fails():
    assert checks.capstone_submission({"batch_size": 64}).status == checks.FAILED


def test_wrong_target_fails_with_the_right_one():
    result = checks.capstone_submission(cfg(target_accuracy=0.5), run(), None, target_accuracy=0.8)
    assert result.status == checks.FAILED and any("0.8" in d for d in result.details)


def test_training_past_the_target_fails():
    result = checks.capstone_submission(cfg(stop_at_target=False), run(), None, target_accuracy=0.8)
    assert result.status == checks.FAILED and any("stop_at_target" in d for d in result.details)


def test_missing_run_and_missed_target_fail():
    assert checks.capstone_submission(cfg(), None, None, 0.8).status == checks.FAILED
    missed = checks.capstone_submission(cfg(), run(to_target=None, best=0.6), None, 0.8)
    assert missed.status == checks.FAILED and "did not reach" in missed.message


def test_run_must_be_on_the_board(tmp_path):
    board = Leaderboard(tmp_path / "board.json")
    r = run()
    assert checks.capstone_submission(cfg(), r, board, 0.8).status == checks.FAILED
    board.add_result("someone else", run(joules=99.0, to_target=50.0))
    assert checks.capstone_submission(cfg(), r, board, 0.8).status == checks.FAILED
    board.add_result("mine", r)
    result = checks.capstone_submission(cfg(), r, board, 0.8)
    assert result.passed, result.text()
    assert "rank 1 of 2" in result.message


def test_quick_recipes_are_small_and_share_the_target():
    from greenlab.course import recipes

    naive = recipes.naive_recipe(quick=True)
    green = recipes.green_recipe(device="cpu", quick=True)
    for model_fn, config, spec in (naive, green):
        assert config.target_accuracy == recipes.CAPSTONE_QUICK_TARGET_ACCURACY
        assert spec == recipes.QUICK_DATA
    assert naive.model_fn is recipes.tutorial_cnn and green.model_fn is recipes.small_mlp
    assert (naive.config.batch_size, naive.config.lr, naive.config.momentum) == (4, 0.001, 0.9)  # the tutorial's
    assert green[1].batch_size > naive[1].batch_size and green[1].stop_at_target
    assert not naive[1].stop_at_target and naive[1].loader == "dataloader"
    assert recipes.naive_recipe()[1].target_accuracy == recipes.CAPSTONE_TARGET_ACCURACY  # full by default
    import pytest

    with pytest.raises(ValueError, match="quick"):
        recipes.naive_recipe(quick="yes")


def test_quick_green_recipe_reaches_its_target():
    import greenlab as gl
    from greenlab.course import recipes

    import dataclasses

    green = recipes.green_recipe(device="cpu", quick=True)
    model_fn, config, spec = green
    config = dataclasses.replace(config, lr=green.lr_candidates()[3])  # a rate inside its search grid
    ds = gl.data.load(**spec, verbose=False)
    gl.config.seed_everything(config.seed)
    run = gl.train(model_fn(), ds, config, device="cpu", log=False, save=False)
    assert run.status == "target-reached" and run.joules_to_target is not None


# --- the learner's one-cycle schedule -----------------------------------------------------------

def my_cycle(step, total, warm):
    """A correct schedule written as a piecewise interpolation."""
    if warm and step < warm:
        return (step + 1) / warm
    return min(1.0, max(0.0, 1 - (step - warm) / max(1, total - warm)))


def test_one_cycle_accepts_a_correct_schedule_written_differently():
    result = checks.one_cycle(my_cycle)
    assert result.passed, result.text()


def test_one_cycle_warm_up_from_zero_fails_with_its_hint():
    result = checks.one_cycle(lambda s, t, w: s / w if s < w else my_cycle(s, t, w))
    assert result.status == checks.FAILED and "(step + 1) / warmup_steps" in " ".join(result.details)


def test_one_cycle_fall_over_the_whole_run_fails_with_its_hint():
    result = checks.one_cycle(lambda s, t, w: (s + 1) / w if s < w else max(0.0, (t - s) / t))
    assert result.status == checks.FAILED and "total_steps - warmup_steps" in " ".join(result.details)


def test_one_cycle_below_zero_fails_with_its_hint():
    result = checks.one_cycle(lambda s, t, w: (s + 1) / w if s < w else (t - s) / max(1, t - w))
    assert result.status == checks.FAILED and "clip the multiplier at 0" in " ".join(result.details)


def test_one_cycle_that_stays_at_one_fails_with_its_hint():
    result = checks.one_cycle(lambda s, t, w: (s + 1) / w if s < w else 1.0)
    assert result.status == checks.FAILED and "does not stay at 1" in " ".join(result.details)


def test_one_cycle_matches_the_training_loops_schedule():
    import importlib

    import torch

    from greenlab.course import recipes

    train = importlib.import_module("greenlab.training.loop")
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = train._scheduler(TrainConfig(lr_schedule="warmup-linear", warmup_steps=3), opt, total_steps=10)
    got = []
    for step in range(10):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert got == pytest.approx([recipes.one_cycle(s, 10, 3) for s in range(10)])
