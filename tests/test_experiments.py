"""Tests for greenlab.experiments: run order, statistics, ratios and the renderings."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from greenlab import data, experiments, models, results  # noqa: E402
from fakes import SlopeSource  # noqa: E402
from greenlab.train import TrainConfig  # noqa: E402




@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture(scope="module")
def ds():
    return data.load("synthetic", n_train=120, n_test=60, verbose=False)


def model_fn():
    return models.build("mlp", input_shape=(1, 28, 28), hidden=(16,))


def test_order_alternates_warmups_are_discarded_and_models_start_equal(ds):
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
    assert all(torch.equal(t, inits[0]) for t in inits)
    saved = results.load()
    assert len(saved) == 6 and {r["label"] for r in saved} == {"a", "b"}
    assert [r.steps for r in cmp.runs["a"]] == [2, 2, 2] and [r.steps for r in cmp.runs["b"]] == [3, 3, 3]


def test_statistics_ratios_and_renderings(ds):
    variants = {"base": TrainConfig(batch_size=60, epochs=1, target_accuracy=0.05),
                "small": TrainConfig(batch_size=20, epochs=1, target_accuracy=0.05)}
    cmp = experiments.compare(variants, model_fn, ds, repeats=2, warmup=0, sources=[SlopeSource()])
    joules = [r.joules for r in cmp.runs["small"]]
    s = cmp.stats["small"]["joules"]
    assert s.n == 2 and s.mean == pytest.approx(sum(joules) / 2)
    assert s.min == min(joules) and s.max == max(joules)
    assert s.ci95 == pytest.approx(12.706 * s.std / math.sqrt(2), rel=1e-3)
    assert cmp.ratios["base"]["joules"] == 1.0
    assert cmp.ratios["small"]["joules"] == pytest.approx(s.mean / cmp.stats["base"]["joules"].mean)
    rows = cmp.table()
    assert [r["variant"] for r in rows] == ["base", "small"] and rows[1]["reached_target"] == "2/2"
    text = str(cmp)
    assert "base" in text and "small" in text and "estimate" in text
    assert cmp._repr_html_().startswith("<table>")
    summary = cmp.stakeholder_summary()
    assert "small reached 5% test accuracy with" in summary
    assert ("less energy than base" in summary) or ("more energy than base" in summary)
    assert "estimates" in summary and "2 run(s)" in summary and " J" in summary
    axes = cmp.plot()
    assert len(axes) == 2 and len(axes[0].patches) == 2


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
                                      ({"model_fn": "mlp"}, "model_fn")])
def test_bad_input_is_refused(ds, kw, match):
    args = {"variants": {"a": TrainConfig()}, "model_fn": model_fn, "data": ds, **kw}
    with pytest.raises(ValueError, match=match):
        experiments.compare(**args)
