"""Tests for greenlab.base.progress and the progress lines of long library calls."""

import io
import re
import logging
import threading
import time

import pytest

from greenlab.base import progress


def test_steps_prints_a_line_per_item_that_ends_with_its_note():
    out = io.StringIO()
    lines = progress.Steps("greenlab.tune_lr", 3, out=out)
    lines.start("lr 0.01")
    assert out.getvalue() == "greenlab.tune_lr [1/3] lr 0.01 ..."  # shown before the work ends
    lines.done("validation 80.0%")
    lines.start("lr 0.1")
    lines.done()
    lines.start("lr 1")
    lines.close()
    text = out.getvalue().splitlines()
    assert text[0] == "greenlab.tune_lr [1/3] lr 0.01 ... validation 80.0%"
    assert text[1].startswith("greenlab.tune_lr [2/3] lr 0.1 ... ") and text[1].endswith(" s")
    assert text[2] == "greenlab.tune_lr [3/3] lr 1 ... stopped"


def test_a_single_item_has_no_count_and_an_unfinished_line_is_ended_by_the_next():
    out = io.StringIO()
    lines = progress.Steps("greenlab.measure_compile", 1, out=out)
    lines.start("compiling the model: the first step includes compilation")
    lines.start("again")
    assert out.getvalue().splitlines() == [
        "greenlab.measure_compile compiling the model: the first step includes compilation ...",
        "greenlab.measure_compile again ..."]


def test_progress_can_be_silenced(monkeypatch):
    out = io.StringIO()
    progress.Steps("x", 2, show=False, out=out).start("a")
    monkeypatch.setenv("GREENLAB_PROGRESS", "0")
    progress.Steps("x", 2, out=out).start("a")
    assert out.getvalue() == ""
    assert isinstance(progress.bar(10, "x"), progress.NoBar)
    monkeypatch.delenv("GREENLAB_PROGRESS")
    assert isinstance(progress.bar(10, "x", show=False), progress.NoBar)
    bar = progress.bar(10, "x")
    assert not isinstance(bar, progress.NoBar)  # tqdm is installed here
    bar.close()


def test_pytorchs_cuda_home_notice_is_hidden_while_compiling(caplog):
    from greenlab.techniques.lm.compiling import _no_cuda_home_notice

    logger = logging.getLogger("torch.utils.cpp_extension")
    with caplog.at_level(logging.WARNING):
        with _no_cuda_home_notice():
            logger.warning("No CUDA runtime is found, using CUDA_HOME='%s'", "/usr/local/cuda")
            logger.warning("another warning")
        logger.warning("No CUDA runtime is found, using CUDA_HOME='%s'", "/opt/cuda")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["another warning", "No CUDA runtime is found, using CUDA_HOME='/opt/cuda'"]


def test_train_lm_shows_a_bar_over_its_steps(monkeypatch):
    import greenlab as gl
    from fakes import SlopeSource

    made = []

    class Bar(progress.NoBar):
        def __init__(self, total, label):
            self.total, self.label, self.closed = total, label, False
            made.append(self)

        def close(self):
            self.closed = True

    monkeypatch.setattr(progress, "bar", lambda total, label, **kw: Bar(total, label))
    corpus = gl.lm.load_corpus(max_bytes=20_000)
    model = gl.lm.TinyGPT(d_model=16, n_layers=1, n_heads=2, max_seq_len=16)
    cfg = gl.lm.LMConfig(seq_len=16, batch_size=2, steps=3, eval_every=3, eval_batches=1, label="tiny")
    gl.lm.train_lm(model, corpus, cfg, device="cpu", sources=[SlopeSource()])
    assert [(b.total, b.label, b.n, b.closed) for b in made] == [(3, "tiny", 3, True)]


def test_heartbeat_prints_while_a_long_call_runs_and_leaves_no_thread():
    out = io.StringIO()
    with progress.heartbeat("greenlab.launch", every_s=0.01, out=out):
        deadline = time.monotonic() + 30
        while out.getvalue().count("...") < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
    lines = out.getvalue().splitlines()
    assert sum(line.startswith("greenlab.launch ... ") for line in lines) >= 2
    assert lines[-1].startswith("greenlab.launch done in ")
    assert not [t for t in threading.enumerate() if t.name.startswith("greenlab-heartbeat")]


def test_heartbeat_says_stopped_when_the_block_raises_and_nothing_for_a_short_block():
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with progress.heartbeat("greenlab.compile", every_s=0.01, out=out):
            deadline = time.monotonic() + 30
            while "..." not in out.getvalue() and time.monotonic() < deadline:
                time.sleep(0.005)
            raise KeyboardInterrupt
    assert out.getvalue().splitlines()[-1].startswith("greenlab.compile stopped after ")
    assert not [t for t in threading.enumerate() if t.name.startswith("greenlab-heartbeat")]
    short = io.StringIO()
    with progress.heartbeat("greenlab.short", every_s=60, out=short):
        pass
    assert short.getvalue() == ""


def test_heartbeat_refuses_a_period_that_is_not_positive():
    with pytest.raises(ValueError, match="every_s"):
        with progress.heartbeat("x", every_s=0):
            pass


def test_ticking_adds_elapsed_seconds_to_the_open_line_and_leaves_it_open_for_done():
    """A long single item (the first compiled step) is never silent: its open line gains its
    elapsed seconds while it runs, then ends with done()'s note; the ticking thread is gone after."""
    out = io.StringIO()
    lines = progress.Steps("greenlab.measure_compile", 1, out=out)
    lines.start("compiling the model")
    with lines.ticking(every_s=0.01):
        deadline = time.monotonic() + 30
        while out.getvalue().count("…") < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
    lines.done("38 s (compiled afresh)")
    text = out.getvalue()
    assert re.match(r"greenlab\.measure_compile compiling the model \.\.\. \d+ s… \d+ s…", text), text
    assert text.endswith("… 38 s (compiled afresh)\n") and text.count("\n") == 1
    assert not [t for t in threading.enumerate() if t.name.startswith("greenlab-ticking")]
    quiet = io.StringIO()
    with progress.Steps("x", 1, out=quiet).ticking(every_s=0.01):  # no open line: nothing to add to
        time.sleep(0.05)
    assert quiet.getvalue() == ""
    with pytest.raises(ValueError, match="every_s"):
        with lines.ticking(every_s=0):
            pass


def test_arms_measured_in_turn_print_a_line_each_and_can_be_quiet(capsys):
    """measure_arms (used by the lessons' paired comparisons) names every call it makes, warm-ups
    included, so a cell measuring several arms is never silent; show_progress=False prints nothing."""
    from greenlab.experiments.arms import measure_arms

    out = measure_arms({"a": lambda r: r, "b": lambda r: 10 + r}, repeats=2)
    assert out == {"a": [0, 1], "b": [10, 11]}
    lines = [line.split(" ... ")[0] for line in capsys.readouterr().out.splitlines()]
    assert lines == ["greenlab.measure_arms [1/6] warm-up a (discarded)", "greenlab.measure_arms [2/6] warm-up b (discarded)",
                     "greenlab.measure_arms [3/6] a repeat 1/2", "greenlab.measure_arms [4/6] b repeat 1/2",
                     "greenlab.measure_arms [5/6] b repeat 2/2", "greenlab.measure_arms [6/6] a repeat 2/2"]
    measure_arms({"a": lambda r: r}, repeats=1, show_progress=False)
    assert capsys.readouterr().out == ""
