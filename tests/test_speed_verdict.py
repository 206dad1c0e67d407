"""SpeedComparison.verdict: a timing is described with its spread, never asserted."""

import pytest

from greenlab.techniques.compress import SpeedComparison


def comparison(ratios):
    return SpeedComparison(median_seconds={"dense": 1.0, "other": 1.0},
                           ratios={"dense": 1.0, "other": sorted(ratios)[len(ratios) // 2]},
                           baseline="dense", rounds=len(ratios), batch_size=8,
                           round_ratios={"dense": [1.0] * len(ratios), "other": ratios})


def test_faster_slower_or_no_clear_difference_from_the_middle_half():
    assert comparison([0.40, 0.42, 0.45, 0.47, 0.50, 0.95]).verdict("other").startswith("faster than dense")
    assert comparison([1.2, 1.3, 1.25, 1.4, 0.9]).verdict("other").startswith("slower than dense")
    noisy = comparison([0.81, 0.95, 1.0, 1.02, 1.1, 1.2]).verdict("other")  # a 0.81 round is noise
    assert noisy.startswith("no clear difference from dense") and "middle half of 6 rounds" in noisy
    assert "too few rounds" in comparison([0.5, 0.6]).verdict("other")


def test_unknown_name_is_refused():
    with pytest.raises(ValueError, match="name must be one of"):
        comparison([1.0] * 4).verdict("sparse")


def test_compare_inference_speed_keeps_every_rounds_ratio():
    import torch

    from greenlab.techniques.compress import compare_inference_speed

    model = torch.nn.Linear(4, 2)
    speed = compare_inference_speed({"a": model, "b": model}, torch.randn(3, 4), rounds=5, warmup=0)
    assert len(speed.round_ratios["b"]) == 5 and speed.round_ratios["a"] == [1.0] * 5
    assert speed.verdict("b")
