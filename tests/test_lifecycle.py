"""greenlab.techniques.lifecycle: a model's bill by phase, where two lives cost the same, and two
whole lives measured in paired repeats."""

import math

import pytest
import torch

import greenlab as gl
from greenlab.techniques import lifecycle


def test_bill_by_phase_in_the_order_it_is_read():
    bill = lifecycle.lifecycle_bill(20.0, 0.005, 100_000, checkpoint_joules=0.02, writes=3, idle_watts=5.0,
                                    idle_seconds=600.0)
    assert list(bill) == list(lifecycle.PHASES)
    assert bill == pytest.approx({"training": 20.0, "checkpoints": 0.06, "serving": 500.0, "idle": 3000.0})
    assert lifecycle.dominant_phase(bill) == "idle"
    assert lifecycle.dominant_phase(lifecycle.lifecycle_bill(20.0, 0.005, 1000)) == "training"


@pytest.mark.parametrize("kwargs", [dict(training_joules=-1.0), dict(tokens=math.nan), dict(writes=1.5),
                                    dict(idle_watts="5")])
def test_bill_refuses_what_is_not_a_cost(kwargs):
    args = dict(training_joules=1.0, joules_per_token=0.1, tokens=10)
    with pytest.raises((ValueError, TypeError)):
        lifecycle.lifecycle_bill(**{**args, **kwargs})


def test_crossover_where_the_lines_cross_and_none_where_they_do_not():
    assert lifecycle.crossover_tokens(10.0, 0.008, 25.0, 0.004) == pytest.approx(3750.0)
    assert lifecycle.crossover_tokens(25.0, 0.004, 10.0, 0.008) == pytest.approx(3750.0)
    assert lifecycle.crossover_tokens(10.0, 0.004, 25.0, 0.008) is None  # a is cheaper at every N
    assert lifecycle.crossover_tokens(10.0, 0.005, 30.0, 0.005) is None  # parallel
    assert lifecycle.crossover_tokens(40.0, 0.5, 40.0, 0.25) is None  # they meet at N = 0 only


def test_checkpoint_writes_at_youngs_interval_and_idle_between_requests():
    tau = gl.preemption.young_interval(0.01, 600.0)
    assert lifecycle.checkpoint_writes(3.5 * tau, 0.01, 600.0) == 3
    assert lifecycle.checkpoint_writes(0.5 * tau, 0.01, 600.0) == 0
    assert lifecycle.idle_seconds(100, 24, 2.0) == 5 * 2.0  # 5 requests, the last one partly filled
    assert lifecycle.idle_seconds(0, 24, 2.0) == 0.0


def test_two_lives_in_paired_repeats(monkeypatch):
    monkeypatch.setenv("GREENLAB_PROGRESS", "0")
    corpus = gl.lm.load_corpus("pydoc-topics")

    def model_fn():
        return gl.lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)

    config = gl.lm.LMConfig(seq_len=16, batch_size=2, steps=3, eval_every=3, eval_batches=1)
    arms = {"naive": lifecycle.Arm(model_fn, config, kv_cache=False),
            "green": lifecycle.Arm(model_fn, config, kv_cache=True, int8=True, tuning_joules=1.5)}
    prompts, _ = gl.lm.batch(corpus.val, 4, 1, torch.Generator().manual_seed(0))
    seen = []
    cmp = lifecycle.compare_lifecycles(arms, corpus, prompts, 4, repeats=2, per_window=1, on_repeat=seen.append)
    assert seen == [0, 1] and cmp.repeats == 2
    # the same seed per repeat: both arms trained the same model on the same batches
    assert [r.val_loss for r in cmp.training["naive"]] == pytest.approx([r.val_loss for r in cmp.training["green"]])
    assert [r.config["seed"] for r in cmp.training["naive"]] == [0, 1]
    assert cmp.training_joules("green") == pytest.approx([1.5 + r.joules for r in cmp.training["green"]])
    assert all(g.tokens == 4 for runs in cmp.generation.values() for g in runs)
    wholes = cmp.wholes("naive", 1000)
    assert wholes == pytest.approx([t.joules + 1000 * g.joules_per_token
                                    for t, g in zip(cmp.training["naive"], cmp.generation["naive"])])
    verdict = cmp.paired(1000, "naive", "green")
    assert verdict.kind == "ratio" and verdict.n == 2
    assert cmp.paired_training("green", "naive").n == cmp.paired_per_token("green").n == 2
    with pytest.raises(ValueError, match="unknown arm"):
        cmp.wholes("other", 10)


def test_serving_model_copies_and_quantizes():
    model = gl.lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)
    served = lifecycle.serving_model(model, int8=True)
    assert served is not model and not served.training
    assert any(isinstance(m, gl.lm_serve.Int8Linear) for m in served.modules())
    assert not any(isinstance(m, gl.lm_serve.Int8Linear) for m in model.modules())
