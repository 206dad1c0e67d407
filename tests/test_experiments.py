"""Tests for greenlab.experiments: run order, statistics, ratios and the renderings."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from greenlab.training import data, models
from greenlab import experiments
from greenlab.base import results  # noqa: E402
from fakes import SlopeSource  # noqa: E402
from greenlab.training.loop import Interrupted, TrainConfig  # noqa: E402




@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture(scope="module")
def ds():
    return data.load("synthetic", n_train=120, n_test=60, verbose=False)


def model_fn():
    return models.build("mlp", input_shape=(1, 28, 28), hidden=(16,))


def test_order_alternates_warmups_are_discarded_and_variants_are_paired(ds):
    inits = []

    def recording_model_fn():
        m = model_fn()
        inits.append(next(m.parameters()).detach().clone())
        return m

    variants = {"a": TrainConfig(batch_size=60, epochs=1), "b": TrainConfig(batch_size=40, epochs=1)}
    cmp = experiments.compare(variants, recording_model_fn, ds, repeats=3, warmup=1,
                              sources=[SlopeSource()])
    assert cmp.order == ["a", "b", "b", "a", "a", "b"]
    assert len(inits) == 8  # 2 warm-up + 6 measured
    # within a repeat every variant starts from the same weights; repeats use seeds 0, 1, 2
    assert torch.equal(inits[0], inits[1]) and torch.equal(inits[2], inits[3])  # warm-up, repeat 1
    assert torch.equal(inits[4], inits[5]) and torch.equal(inits[6], inits[7])
    assert not torch.equal(inits[2], inits[4])
    assert [[r.config["seed"] for r in cmp.runs[n]] for n in "ab"] == [[0, 1, 2], [0, 1, 2]]
    saved = results.load()
    assert len(saved) == 6 and {r["label"] for r in saved} == {"a", "b"}
    assert [r.steps for r in cmp.runs["a"]] == [2, 2, 2] and [r.steps for r in cmp.runs["b"]] == [3, 3, 3]


def test_statistics_ratios_and_renderings():
    # 60 validation images, so a 5% target is one that every run clearly reaches
    ds = data.load("synthetic", n_train=600, n_test=60, verbose=False)
    variants = {"base": TrainConfig(batch_size=60, epochs=1, target_accuracy=0.05),
                "small": TrainConfig(batch_size=20, epochs=1, target_accuracy=0.05)}
    cmp = experiments.compare(variants, model_fn, ds, repeats=2, warmup=0, sources=[SlopeSource()])
    joules = [r.joules for r in cmp.runs["small"]]
    s = cmp.stats["small"]["joules"]
    assert s.n == 2 and s.mean == pytest.approx(sum(joules) / 2)
    assert s.min == min(joules) and s.max == max(joules)
    assert s.ci95 == pytest.approx(12.706 * s.std / math.sqrt(2), rel=1e-3)
    assert s.interval() is None  # two runs: too few for an interval worth printing
    assert cmp.ratios["base"]["joules"] == 1.0
    assert cmp.ratios["small"]["joules"] == pytest.approx(s.mean / cmp.stats["base"]["joules"].mean)
    rows = cmp.table()
    assert [r["variant"] for r in rows] == ["base", "small"] and rows[1]["reached_target"] == "2/2"
    text = str(cmp)
    assert "base" in text and "small" in text and "estimate" in text
    assert "too few repeats for an interval" in text and "±" not in text
    assert cmp._repr_html_().startswith("<table>")
    summary = cmp.stakeholder_summary()
    assert "Energy to reach 5% validation accuracy: small" in summary
    assert "too few repeats to tell" in summary and "less energy" not in summary and "95% CI" not in summary
    assert "estimates" in summary and "2 paired run(s)" in summary and " J" in summary
    axes = cmp.plot()
    assert len(axes) == 2 and len(axes[0].patches) == 2
    assert not axes[0].lines and "too few repeats" in axes[0].get_title()  # no error bars drawn


class _Run:
    """The fields of a RunResult that Comparison reads."""

    def __init__(self, joules, seconds=1.0, accuracy=0.8, to_target=True):
        self.joules, self.seconds, self.final_accuracy, self.val_accuracy = joules, seconds, accuracy, accuracy
        self.joules_to_target = joules if to_target else None
        self.seconds_to_target = seconds if to_target else None
        self.samples_per_second, self.co2e_g, self.estimated, self.status = 100.0, None, True, "completed"
        self.problems, self.complete = [], True  # what its Measurement says
        self.provenance = {"device": "cpu", "cpu": "test cpu", "energy_sources": {"cpu": "estimate"}}
        self.config = {"target_accuracy": 0.5}


def _comparison(base, other, **kw):
    reps = [{"base": _Run(b, **kw), "other": _Run(o, **kw)} for b, o in zip(base, other)]
    return experiments.Comparison(["base", "other"], reps, [])


def test_identical_configurations_give_no_detectable_difference():
    same = _comparison([10.0, 30.0, 20.0], [10.0, 30.0, 20.0])
    for metric in ("joules", "joules_to_target", "seconds", "final_accuracy"):
        assert same.verdict("other", "base", metric).startswith("no detectable difference")
    noisy = _comparison([10.0, 30.0, 20.0], [10.4, 29.1, 20.5])
    assert noisy.verdict("other", metric="joules") == (
        "no detectable difference in energy between other and base at 3 repeats (95% CI of the ratio "
        + noisy.verdict("other").split("ratio ")[1])
    assert noisy.paired("other").detectable is False and noisy.table()[1]["energy_vs_baseline"] == \
        "no detectable difference"


def test_verdicts_are_paired_and_get_the_direction_right():
    # large shared noise between repeats, a steady 23% saving within each: paired, it shows
    lower = _comparison([10.0, 100.0, 1000.0], [7.6, 78.0, 770.0])
    p = lower.paired("other")
    assert p.detectable and p.estimate == pytest.approx(0.77, abs=0.01)
    assert p.low < p.estimate < p.high < 1
    sentence = lower.verdict("other")
    assert sentence.startswith("other is 23% lower in energy than base (95% CI ")
    lo, hi = (int(v) for v in sentence.split("CI ")[1].rstrip("%)").split("–"))
    assert lo <= 23 <= hi
    assert lower.stats["base"]["joules"].interval()[0] == 0.0  # the mean's interval is clipped at 0
    higher = _comparison([10.0, 11.0, 12.0], [12.9, 14.2, 15.5])  # 129% of the baseline's energy
    assert higher.verdict("other").startswith("other is 29% higher in energy than base")
    summary = higher.stakeholder_summary()
    assert "less" not in summary and "other against base: about 29% higher" in summary and "CI" not in summary
    much = _comparison([1.0, 1.1, 1.2], [20.0, 23.0, 25.0])
    assert "times higher in energy" in much.verdict("other")
    two = _comparison([10.0, 11.0], [5.0, 5.4])
    assert "too few repeats for an interval" in two.verdict("other") and "CI" not in two.verdict("other")
    assert two.paired("other").detectable is None
    acc = _comparison([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert acc.verdict("other", metric="final_accuracy").startswith("no detectable difference in test accuracy")
    with pytest.raises(ValueError, match="metric"):
        lower.verdict("other", metric="watts")
    with pytest.raises(ValueError, match="unknown variant"):
        lower.verdict("nope")


class _WorkSource(SlopeSource):
    """A deterministic meter: 1 J per training sample, counted by a callback, so a real run's
    energy depends only on the work it did."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def read_joules(self):
        return float(self.count)


def test_a_real_comparison_of_identical_configurations_finds_no_difference():
    ds = data.load("synthetic", n_train=600, n_test=60, verbose=False)  # enough to reach 30%
    meter = _WorkSource()
    last = {"samples": 0}

    def count(state):
        meter.count += state.samples - last["samples"] if state.samples >= last["samples"] else state.samples
        last["samples"] = state.samples

    cfg = TrainConfig(batch_size=20, epochs=2, lr=0.1, target_accuracy=0.3, eval_every_samples=40)
    cmp = experiments.compare({"a": cfg, "b": cfg}, model_fn, ds, repeats=3, warmup=0,
                              sources=[meter], callbacks=[count], save=False)
    assert cmp.repeats == 3 and cmp.reached_target("a") and cmp.reached_target("b")
    for metric in ("joules_to_target", "final_accuracy"):
        assert cmp.verdict("b", "a", metric).startswith("no detectable difference"), cmp.verdict("b", "a", metric)
    # the repeats differ from each other (seeds 0, 1, 2), the variants within a repeat do not
    assert [r.final_accuracy for r in cmp.runs["a"]] == [r.final_accuracy for r in cmp.runs["b"]]


def test_interrupting_a_comparison_stops_it_and_keeps_the_finished_runs(ds):
    calls = {"n": 0}

    def interrupt_fourth_run(state):
        if state.step == 1:
            calls["n"] += 1
        if calls["n"] == 4 and state.step == 2:
            raise KeyboardInterrupt

    variants = {"a": TrainConfig(batch_size=40, epochs=1), "b": TrainConfig(batch_size=30, epochs=1)}
    with pytest.raises(Interrupted) as info:
        experiments.compare(variants, model_fn, ds, repeats=3, warmup=0, sources=[SlopeSource()],
                            callbacks=[interrupt_fourth_run])
    cmp = info.value.result
    assert cmp.interrupted and calls["n"] == 4  # nothing ran after the interrupt
    assert cmp.order == ["a", "b", "b"] and cmp.repeats == 1
    assert [(n, r, res.status) for n, r, res in cmp.partial] == [("a", 1, "interrupted")]
    assert len(cmp.runs["a"]) == 1 and len(cmp.runs["b"]) == 2
    assert cmp.stats["a"]["joules"].n == 1  # the cut-short run is in no mean
    assert "INTERRUPTED" in str(cmp) and "a (repeat 2, interrupted)" in str(cmp)
    assert "interrupted after 1 of 3" in cmp.stakeholder_summary()
    saved = results.load()
    assert len(saved) == 4 and saved[-1]["status"] == "interrupted"  # nothing lost

    import threading

    stop = threading.Event()

    def press_stop(state):
        if state.step == 2:
            stop.set()

    halted = experiments.compare(variants, model_fn, ds, repeats=3, warmup=1, sources=[SlopeSource()],
                                 callbacks=[press_stop], stop_event=stop)
    assert halted.interrupted and halted.order == [] and halted.repeats == 0 and not halted.partial


def test_run_main_stops_on_interrupt_and_prints_the_finished_runs(monkeypatch, capsys):
    import argparse

    import importlib

    # the module (greenlab.training.loop is also a function)
    gl_train = importlib.import_module("greenlab.training.loop")
    from greenlab.cli import run as run_command

    real_train, calls = gl_train.train, {"n": 0}

    def train_then_interrupt(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:  # after the two warm-up runs, the third measured run
            def boom(state):
                raise KeyboardInterrupt
            kwargs["callbacks"] = [boom]
        return real_train(*args, **kwargs)

    monkeypatch.setattr(gl_train, "train", train_then_interrupt)
    parser = argparse.ArgumentParser()
    run_command.add_run_arguments(parser)
    args = parser.parse_args(["--dataset", "synthetic", "--model", "mlp", "--precision", "fp32,bf16",
                              "--repeats", "3", "--n-train", "64", "--n-test", "32", "--batch-size", "32",
                              "--quick", "--no-save"])
    assert run_command.run_main(args) == 130
    out, err = capsys.readouterr()
    assert calls["n"] == 5 and "INTERRUPTED" in out and "interrupted" in err


def test_equal_accuracy_saving_states_the_accuracy_cost():
    unequal = experiments.equal_accuracy_saving(50.0, 100.0, 0.57, 0.645, "small", "large")
    assert not unequal.equal_accuracy and unequal.fraction == pytest.approx(0.5)
    assert unequal.sentence() == ("small used 50% less energy than large but is 7.5 points less accurate "
                                  "(57.0% vs 64.5%): not a like-for-like saving")
    equal = experiments.equal_accuracy_saving(129.0, 100.0, 0.64, 0.645, "small", "large")
    # a point tolerance on single figures is not an equivalence test, and the sentence says so
    assert equal.equal_accuracy
    assert equal.sentence().startswith("small used 29% more energy than large, at most 1 point")
    assert "not an equivalence test" in equal.sentence()
    with pytest.raises(ValueError, match="candidate_accuracy"):
        experiments.equal_accuracy_saving(1.0, 2.0, 57, 0.6)
    with pytest.raises(ValueError, match="baseline_joules"):
        experiments.equal_accuracy_saving(1.0, 0.0, 0.5, 0.6)


def test_summarize_and_t_quantiles():
    st = experiments.summarize([1.0, 2.0, 3.0, None])
    assert st.n == 3 and st.mean == 2.0 and st.std == 1.0 and st.min == 1.0 and st.max == 3.0
    assert st.ci95 == pytest.approx(4.303 / math.sqrt(3), rel=1e-3)
    one = experiments.summarize([5.0])
    assert one.mean == 5.0 and one.ci95 is None
    assert experiments.summarize([]).mean is None
    for df, t in ((1, 12.706), (4, 2.776), (10, 2.228), (30, 2.042)):
        assert experiments.t_quantile_975(df) == pytest.approx(t, abs=1e-3)


@pytest.mark.parametrize("kw,match", [({"variants": {}}, "non-empty"), ({"repeats": 0}, "repeats"),
                                      ({"warmup": -1}, "warmup"), ({"variants": {"x": {"lr": 1}}}, "TrainConfig"),
                                      ({"model_fn": "mlp"}, "model_fn"),
                                      ({"variants": {"a": TrainConfig(seed=1), "b": TrainConfig(seed=2)}}, "seed")])
def test_bad_input_is_refused(ds, kw, match):
    args = {"variants": {"a": TrainConfig()}, "model_fn": model_fn, "data": ds, **kw}
    with pytest.raises(ValueError, match=match):
        experiments.compare(**args)


def test_an_interval_clipped_at_zero_is_marked_and_explained_where_printed():
    wide = _comparison([1.0, 10.0, 100.0], [1.0, 11.0, 99.0])  # a spread wider than the mean
    stat = wide.stats["base"]["joules"]
    assert stat.mean - stat.ci95 < 0 and stat.interval()[0] == 0.0 and stat.clipped
    row = wide.table()[0]
    assert row["joules_interval_clipped"] is True
    text = str(wide)
    assert "(0*–" in text and experiments.CLIPPED_NOTE in text
    assert "(0*–" in wide._repr_html_() and "clipped" in wide._repr_html_()
    axes = wide.plot()
    assert "clipped" in axes[0].get_title()
    narrow = _comparison([10.0, 11.0, 10.5], [9.0, 9.5, 9.2])
    assert not narrow.stats["base"]["joules"].clipped
    assert "0*" not in str(narrow) and experiments.CLIPPED_NOTE not in str(narrow)


def test_an_inverted_verdict_reads_the_other_way_round():
    variant, baseline = [1.0, 2.0, 1.5, 1.2], [4.1, 7.5, 6.3, 5.0]
    forward = experiments.paired(variant, baseline, "joules", "green", "naive")
    back = forward.inverted()
    direct = experiments.paired(baseline, variant, "joules", "naive", "green")
    assert (back.variant, back.baseline, back.n, back.kind) == ("naive", "green", 4, "ratio")
    for a, b in ((back.estimate, direct.estimate), (back.low, direct.low), (back.high, direct.high)):
        assert a == pytest.approx(b, rel=1e-12)
    assert back.detectable is True and back.estimate > 3
    points = experiments.paired([0.80, 0.82, 0.81], [0.70, 0.71, 0.69], "final_accuracy", "a", "b").inverted()
    assert points.estimate == pytest.approx(-0.11) and points.high < 0
    short = experiments.paired(variant, baseline, "joules", short=[True, False, False, False]).inverted()
    assert short.short_windows == 1 and short.detectable is None
    assert experiments.paired([1.0], [2.0], "seconds").inverted().low is None
