"""Lesson 09 checker: a valid recipe that reached the target and is on the leaderboard passes;
each missing piece fails with what to do; a stub is not attempted."""

from types import SimpleNamespace

from greenlab import checks
from greenlab.leaderboard import Leaderboard
from greenlab.train import TrainConfig


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
    from greenlab import recipes

    naive = recipes.naive_recipe(quick=True)
    green = recipes.green_recipe(device="cpu", quick=True)
    for model_fn, config, spec in (naive, green):
        assert config.target_accuracy == recipes.CAPSTONE_QUICK_TARGET_ACCURACY
        assert spec == recipes.QUICK_DATA
        assert model_fn is recipes.quick_cnn
    assert green[1].batch_size > naive[1].batch_size and green[1].stop_at_target
    assert not naive[1].stop_at_target and naive[1].loader == "dataloader"
    assert recipes.naive_recipe()[1].target_accuracy == recipes.CAPSTONE_TARGET_ACCURACY  # full by default
    import pytest

    with pytest.raises(ValueError, match="quick"):
        recipes.naive_recipe(quick="yes")


def test_quick_green_recipe_reaches_its_target():
    import greenlab as gl
    from greenlab import recipes

    model_fn, config, spec = recipes.green_recipe(device="cpu", quick=True)
    ds = gl.data.load(**spec, verbose=False)
    gl.config.seed_everything(config.seed)
    run = gl.train(model_fn(), ds, config, device="cpu", log=False, save=False)
    assert run.status == "target-reached" and run.joules_to_target is not None
