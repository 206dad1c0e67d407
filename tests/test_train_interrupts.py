"""A finished run is never lost: failing callbacks, and Ctrl-C after the last step or during it."""

import importlib
import os
import signal
import warnings

import pytest
import torch

from greenlab.training import data, models
from greenlab import experiments
from greenlab.techniques import profiling
from greenlab.base import results
from fakes import SlopeSource

gl_train = importlib.import_module("greenlab.training.loop")
TrainConfig, Interrupted = gl_train.TrainConfig, gl_train.Interrupted


@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("GREENLAB_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def ds():
    return data.load("synthetic", n_train=120, n_test=60, verbose=False)


def mlp():
    torch.manual_seed(0)
    return models.build("mlp", input_shape=(1, 28, 28), hidden=(16,))


def run(dataset, cfg=None, **kw):
    opts = {"log": False, "sources": [SlopeSource()], "device": "cpu"}
    opts.update(kw)
    return gl_train.train(mlp(), dataset, cfg or TrainConfig(batch_size=20, epochs=1), **opts)


# --- failing callbacks ---

def test_an_unwritable_checkpoint_no_longer_loses_the_run(ds):
    with pytest.warns(RuntimeWarning, match="callback CheckpointCallback.on_end failed"):
        res = run(ds, callbacks=[profiling.CheckpointCallback("/proc/x/ck.pt", 10**6)])
    assert res.status == "completed" and res.steps == 6 and res.final_accuracy is not None
    assert len(res.callback_problems) == 1
    problem = res.callback_problems[0]
    assert "CheckpointCallback.on_end failed at step 6" in problem and "Error" in problem
    assert problem in res.message and "1 callback(s) failed" in res.summary()
    assert res.complete  # the energy figure is whole: a callback is not a meter
    saved = results.load()
    assert len(saved) == 1 and saved[0]["callback_problems"] == [problem]


def test_a_callback_that_fails_mid_run_is_dropped_and_training_goes_on(ds):
    calls = []

    def disk_full(state):
        calls.append(state.step)
        if state.step == 2:
            raise OSError(28, "No space left on device")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(ds, callbacks=[disk_full])
    assert calls == [1, 2]  # not called again after it failed
    assert res.status == "completed" and res.steps == 6
    assert "disk_full.on_step failed at step 2" in res.callback_problems[0]
    assert "No space left on device" in res.callback_problems[0]
    assert sum("disk_full" in str(w.message) for w in caught) == 1


def test_stop_training_from_a_callback_still_stops(ds):
    def stop(state):
        if state.step == 3:
            raise gl_train.StopTraining("enough")

    res = run(ds, callbacks=[stop])
    assert res.status == "stopped" and res.steps == 3 and not res.callback_problems


# --- Ctrl-C before the last step: one line, partial result kept ---

def test_ctrl_c_mid_run_raises_one_line_and_keeps_the_partial_run(ds):
    def ctrl_c(state):
        if state.step == 2:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as info:
        run(ds, cfg=TrainConfig(batch_size=20, epochs=1, label="baseline"), callbacks=[ctrl_c])
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith("greenlab.train: interrupted 'baseline' at step 2 of 6, after ")
    assert " J (estimate)" in line and "results log and gl.last_interrupted()" in line
    assert "keeps its previous value" in line
    assert isinstance(info.value, KeyboardInterrupt)  # so Run All and scripts still stop
    partial = info.value.result
    import greenlab as gl

    assert partial is gl.last_interrupted() and gl.Interrupted is Interrupted  # the name the line gives
    assert partial.status == "interrupted"
    assert partial.steps == 2 and partial.joules > 0
    assert [r["status"] for r in results.load()] == ["interrupted"]
    with pytest.raises(Interrupted, match="not in the results log"):
        run(ds, callbacks=[ctrl_c], save=False)


# --- Ctrl-C after the last step: the finished run is returned, marked interrupted ---

def test_ctrl_c_in_the_results_log_append_returns_the_finished_run(ds, monkeypatch):
    def append(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "append", append)
    res = run(ds)
    assert res.status == "interrupted" and res.steps == 6 and res.final_accuracy is not None
    assert "during the results-log append" in res.message
    assert "would have been 'completed'" in res.message and "not saved to the results log" in res.message


def test_ctrl_c_in_the_window_end_read_returns_the_run_with_the_meter_energy(ds, monkeypatch):
    energy_measure = importlib.import_module("greenlab.energy.measure")
    real_stop = energy_measure.EnergyWindow.stop

    def stop_then_interrupt(self):
        real_stop(self)  # the window is gone, as when Ctrl-C lands inside its end read
        raise KeyboardInterrupt

    monkeypatch.setattr(energy_measure.EnergyWindow, "stop", stop_then_interrupt)
    res = run(ds)
    assert res.status == "interrupted" and res.steps == 6
    assert "during the window's end read" in res.message
    assert res.joules > 0 and res.seconds > 0
    assert any("end read was interrupted" in p for p in res.energy.problems)
    assert results.load()[0]["status"] == "interrupted"


def test_ctrl_c_in_the_result_packing_is_retried(ds, monkeypatch):
    real_result, calls = gl_train.TrainingRun.result, []

    def interrupted_once(self, *args):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real_result(self, *args)

    monkeypatch.setattr(gl_train.TrainingRun, "result", interrupted_once)
    res = run(ds)
    assert len(calls) == 2 and res.status == "interrupted" and "the result packing" in res.message
    assert res.final_accuracy is not None


def test_ctrl_c_in_the_final_evaluation_returns_the_run(ds):
    class CtrlCAtEnd:
        def on_end(self, state):
            raise KeyboardInterrupt

    res = run(ds, callbacks=[CtrlCAtEnd()])
    assert res.status == "interrupted" and res.steps == 6
    assert "after the last step" in res.message


def test_a_real_sigint_during_the_save_is_held_until_the_run_is_kept(ds, monkeypatch):
    real_append = results.append

    def sigint_then_append(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # delivered now; held by train until it is done
        return real_append(*args, **kwargs)

    monkeypatch.setattr(results, "append", sigint_then_append)
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN when started in the background
    res = run(ds)
    assert res.status == "interrupted" and "Ctrl-C after the last step" in res.message
    assert len(results.load()) == 1
    assert signal.getsignal(signal.SIGINT) is before  # restored


# --- gl.compare ---

def test_an_interrupted_comparison_raises_one_line_with_the_partial_comparison(ds, capsys):
    count = {"n": 0}

    def ctrl_c_in_the_third_run(state):
        if state.step == 1:
            count["n"] += 1
        if count["n"] == 3 and state.step == 2:
            raise KeyboardInterrupt

    variants = {"a": TrainConfig(batch_size=20, epochs=1), "b": TrainConfig(batch_size=30, epochs=1)}
    with pytest.raises(Interrupted) as info:
        experiments.compare(variants, mlp, ds, repeats=2, warmup=0, sources=[SlopeSource()],
                            callbacks=[ctrl_c_in_the_third_run], device="cpu")
    line = str(info.value)
    assert "\n" not in line and line.startswith("greenlab.compare: interrupted during 'b' repeat 2 of 2")
    assert "after 2 finished run(s)" in line and "gl.last_interrupted()" in line
    cmp = info.value.result
    assert cmp is gl_train.last_interrupted() and cmp.interrupted and cmp.repeats == 1
    assert [(n, r) for n, r, _ in cmp.partial] == [("b", 1)]
    out = capsys.readouterr().out.splitlines()
    # warmup=0 still warms every variant with a short discarded run before any is measured
    assert out[0].startswith("greenlab.compare [1/6] warm-up a (discarded) ... ")
    assert out[2].startswith("greenlab.compare [3/6] a repeat 1/2 ... ") and out[2].endswith(" J (estimate)")
    assert out[4] == "greenlab.compare [5/6] b repeat 2/2 ... stopped"


def test_a_comparison_stopped_by_its_event_returns_without_raising(ds):
    import threading

    stop = threading.Event()

    def press_stop(state):
        if state.step == 2:
            stop.set()

    cmp = experiments.compare({"a": TrainConfig(batch_size=20, epochs=1)}, mlp, ds, repeats=2, warmup=0,
                              sources=[SlopeSource()], callbacks=[press_stop], stop_event=stop,
                              device="cpu", show_progress=False)
    assert cmp.interrupted and cmp.repeats == 0


# --- how a notebook shows it ---

def test_setup_makes_ipython_show_an_interrupt_as_its_one_line(monkeypatch, capsys):
    IPython = pytest.importorskip("IPython")
    from greenlab.session import config

    class Shell:
        def set_custom_exc(self, exc_tuple, handler):
            self.exc_tuple, self.handler = exc_tuple, handler

    shell = Shell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    config._show_interrupts_as_one_line()
    assert shell.exc_tuple == (Interrupted,)
    error = Interrupted("greenlab.train: interrupted at step 3 of 9", None)
    assert shell.handler(shell, Interrupted, error, None) is None
    assert capsys.readouterr().err == "greenlab.train: interrupted at step 3 of 9\n"


def test_compare_refuses_a_show_progress_that_is_not_a_flag(ds):
    with pytest.raises((TypeError, ValueError), match="show_progress"):
        experiments.compare({"a": TrainConfig()}, mlp, ds, show_progress="yes")


@pytest.mark.parametrize("where", ["setting up", "starting the window"])
def test_ctrl_c_before_the_first_step_is_one_line_and_keeps_the_last_partial_run(ds, monkeypatch, where):
    """A Ctrl-C in gl.train's first imports or FLOP count (a busy machine's first seconds) is the
    same one line as one during the loop, not a traceback from inside torch."""
    from greenlab.base import interrupts

    monkeypatch.setattr(interrupts, "_last_interrupted", "earlier partial run")

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "setting up":
        monkeypatch.setattr(models, "flops", ctrl_c)
    else:
        monkeypatch.setattr(gl_train, "RunMeter", ctrl_c)
    with pytest.raises(Interrupted) as caught:
        run(ds, TrainConfig(batch_size=20, epochs=1, label="probe"))
    line = str(caught.value)
    assert "\n" not in line and line.startswith("greenlab.train: interrupted 'probe' before its first step")
    assert "nothing was trained or saved" in line and caught.value.result is None
    assert interrupts.last_interrupted() == "earlier partial run"
    assert results.load() == []  # nothing was appended to the results log
