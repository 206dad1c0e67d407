"""greenlab.lm_compile: torch.compile's cost and saving, measured on the lesson-10 model."""

import math
import types

import pytest
import torch

import greenlab as gl
from greenlab.techniques.lm.compiling import CompileMeasurement, _cache_state


@pytest.fixture(scope="module")
def measured():
    # The lesson-10 quick model and batch shape, so the compiled graphs are the ones the lesson
    # builds (PyTorch's on-disk cache then serves whichever of the two compiles second).
    corpus = gl.lm.load_corpus(max_bytes=200_000)
    torch.manual_seed(0)
    model = gl.lm.TinyGPT(d_model=64, n_layers=2, n_heads=4, max_seq_len=256)
    before = [p.detach().clone() for p in model.parameters()]
    config = gl.lm.LMConfig(seq_len=64, batch_size=16, lr=1e-2)
    result = gl.lm_compile.measure_compile(model, corpus, config, steps=8, repeats=2, device="cpu")
    return model, before, result


def test_compiled_model_computes_the_eager_loss_and_the_model_is_not_changed(measured):
    model, before, result = measured
    assert result.first_loss_difference < 1e-4
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "the caller's model is copied"


def test_windows_are_paired_and_the_break_even_follows_from_them(measured):
    _, _, r = measured
    cmp = r.comparison
    assert cmp.names == ["eager", "compiled"] and cmp.repeats == 2
    assert all(run.steps == 8 and run.tokens == 8 * 64 * 16 for runs in cmp.runs.values() for run in runs)
    assert r.first_step_seconds > 0 and r.first_step_joules > 0
    assert r.step_seconds("eager") == pytest.approx(sum(x.seconds for x in cmp.runs["eager"]) / 2 / 8)
    assert r.compile_seconds == pytest.approx(max(0.0, r.first_step_seconds - r.step_seconds("compiled")))
    expected = gl.lm.compile_break_even_steps(r.compile_seconds, r.step_seconds("eager"), r.step_seconds("compiled"))
    assert r.break_even_steps("seconds") == expected
    assert r.cache.startswith(("compiled from scratch", "loaded from PyTorch's on-disk compile cache"))
    text = r.summary()
    assert "first compiled step" in text and "break-even in energy" in text


def _fake(first_s, first_j, eager, compiled, steps=10, spread=(0.99, 1.0, 1.01)):
    """Three paired windows per variant around the given (seconds, joules); ``spread`` scales the
    compiled windows repeat by repeat (wide: the saving is not detectable)."""
    from greenlab.experiments import paired

    def run(seconds, joules, f=1.0):
        return types.SimpleNamespace(seconds=seconds * f, joules=joules * f)
    runs = {"eager": [run(*eager) for _ in spread], "compiled": [run(*compiled, f) for f in spread]}

    def pair(variant, baseline, metric):
        return paired([getattr(r, metric) for r in runs[variant]], [getattr(r, metric) for r in runs[baseline]],
                      metric, variant, baseline)
    cmp = types.SimpleNamespace(runs=runs, paired=pair, estimated=True, problems=[])
    first = types.SimpleNamespace(estimated=True, problems=[])
    return CompileMeasurement(first_s, first_j, steps, cmp, "compiled from scratch: 1 graph(s) built", 0.0,
                              first)


def test_break_even_arithmetic():
    # eager 0.1 s and 2 J per step, compiled 0.05 s and 1 J: first step 10.05 s and 201 J
    r = _fake(10.05, 201.0, (1.0, 20.0), (0.5, 10.0))
    assert r.compile_seconds == pytest.approx(10.0) and r.compile_joules == pytest.approx(200.0)
    assert r.break_even_steps("seconds") == pytest.approx(200.0)
    assert r.break_even_steps("joules") == pytest.approx(200.0)
    slower = _fake(10.0, 200.0, (0.5, 10.0), (1.0, 20.0))
    assert slower.break_even_steps("seconds") == math.inf and slower.break_even_steps("joules") == math.inf
    assert "none to report (the compiled step is detectably dearer)" in slower.summary()
    assert "break-even in time: 200 steps" in r.summary()
    with pytest.raises(ValueError, match="metric"):
        r.break_even_steps("watts")


def test_no_break_even_is_reported_without_a_detectable_saving():
    # the mean saving would give a finite figure, but the compiled windows scatter across the eager ones
    noisy = _fake(10.05, 201.0, (1.0, 20.0), (0.9, 18.0), spread=(0.6, 1.2, 1.4))
    assert math.isfinite(noisy.break_even_steps("seconds"))
    assert noisy.reported_break_even("seconds") is None and not noisy.saving_detectable("joules")
    assert "none to report (no detectable per-step saving)" in noisy.summary()
    assert "steps\n" not in noisy.summary() + "\n"
    import matplotlib
    matplotlib.use("Agg")
    assert len(noisy.plot(metric="seconds").get_lines()) == 2  # no break-even line


def test_cache_state_reads_the_counters():
    zero = {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 0}
    assert (_cache_state(zero, {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 2})
            == "compiled from scratch: 2 graph(s) built")
    assert _cache_state(zero, {"fxgraph_cache_hit": 2, "fxgraph_cache_miss": 0}).startswith("loaded from")
    assert _cache_state(zero, zero) == "cache use unknown"
    assert _cache_state({}, {}) == "cache use unknown"


@pytest.mark.parametrize("kwargs, match", [
    ({"steps": 0}, "steps"), ({"repeats": 0}, "repeats"), ({"config": "fast"}, "LMConfig"),
    ({"compile_kwargs": "max"}, "compile_kwargs"),
])
def test_bad_input_is_named(kwargs, match):
    model = gl.lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=32)
    corpus = gl.lm.load_corpus(max_bytes=20_000)
    with pytest.raises(ValueError, match=match):
        gl.lm_compile.measure_compile(model, corpus, **kwargs)
    with pytest.raises(ValueError, match="model"):
        gl.lm_compile.measure_compile("gpt", corpus)


def test_plot_draws_both_lines_and_marks_the_break_even():
    import matplotlib
    matplotlib.use("Agg")
    r = _fake(10.05, 201.0, (1.0, 20.0), (0.5, 10.0))
    ax = r.plot(metric="joules")
    lines = ax.get_lines()
    assert len(lines) == 3 and lines[2].get_xdata()[0] == pytest.approx(200.0)
    eager, compiled = lines[0].get_ydata(), lines[1].get_ydata()
    assert eager[-1] == pytest.approx(2.0 * 400) and compiled[-1] == pytest.approx(201.0 + 1.0 * 399)
    never = _fake(10.0, 200.0, (0.5, 10.0), (1.0, 20.0)).plot(metric="seconds")
    assert len(never.get_lines()) == 2 and never.get_xlim()[1] >= 1000


def test_a_compiled_model_that_computes_nan_is_named_not_blamed_on_the_learning_rate(monkeypatch):
    class Broken(torch.nn.Module):  # stands in for wrongly compiled code: NaN logits
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, idx):
            return self.model(idx) * float("nan")

    monkeypatch.setattr(torch, "compile", lambda model, **kw: Broken(model))
    corpus = gl.lm.load_corpus(max_bytes=20_000)
    model = gl.lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=32)
    with pytest.raises(RuntimeError, match="TORCHINDUCTOR_CACHE_DIR"):
        gl.lm_compile.measure_compile(model, corpus, gl.lm.LMConfig(seq_len=16, batch_size=2), steps=1,
                                      repeats=1, device="cpu")
