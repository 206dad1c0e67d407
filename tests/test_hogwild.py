"""Synchronous against asynchronous (Hogwild) updates in two real CPU processes."""

import warnings

import pytest

from greenlab.techniques import hogwild


@pytest.fixture(scope="module")
def ds():
    from greenlab.training import data as gl_data

    warnings.simplefilter("ignore")
    return gl_data.load("fashion-mnist", n_train=256, n_test=64, verbose=False)


def test_sync_updates_are_never_stale_and_async_ones_are_counted(ds):
    sync = hogwild.run(ds, "sync", target_accuracy=1.0, max_updates=30, eval_every=10)
    assert sync.updates == [30, 30] and sync.staleness == [0] * 60 and sync.weight_updates == 30
    assert not sync.reached and sync.val_accuracy is not None and sync.samples == 60 * 32
    hog = hogwild.run(ds, "async", target_accuracy=1.0, max_updates=30, eval_every=10)
    assert hog.updates == [30, 30] and len(hog.staleness) == 60 and hog.weight_updates == 60
    assert all(s >= 0 for s in hog.staleness) and max(hog.staleness) < 60
    assert sum(hogwild.staleness_histogram(hog.staleness).values()) == 60
    assert hog.joules > 0 and sync.joules > 0


def test_a_reachable_target_stops_both_workers(ds):
    result = hogwild.run(ds, "async", target_accuracy=0.01, max_updates=200, eval_every=5)
    assert result.reached and result.val_accuracy >= 0.01 and sum(result.updates) < 400


@pytest.mark.parametrize("kwargs, match", [({"mode": "ring"}, "mode"), ({"workers": 0}, "workers"),
                                           ({"lr": -1.0}, "lr"), ({"target_accuracy": 2.0}, "target_accuracy"),
                                           ({"timeout_s": -1}, "timeout_s"), ({"timeout_s": 0}, "timeout_s"),
                                           ({"timeout_s": float("nan")}, "timeout_s"), ({"seed": -1}, "seed")])
def test_bad_arguments_are_refused(ds, kwargs, match):
    with pytest.raises(ValueError, match=match):
        hogwild.run(ds, **kwargs)


@pytest.mark.parametrize("mode", hogwild.MODES)
def test_both_arms_set_up_before_the_measured_window_opens(ds, tmp_path, monkeypatch, mode):
    # The order of events is written to one file (appends from the parent and the forked workers):
    # every worker's set-up, the synchronous arm's init_process_group included, must end before the
    # window opens, in both modes, or the arms would be timed over different work.
    import os

    import greenlab.energy
    from types import SimpleNamespace

    log = tmp_path / "events"

    def note(what):
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, (what + "\n").encode())
        os.close(fd)

    real_setup = hogwild._setup

    def setup(rank, *args):
        out = real_setup(rank, *args)
        note(f"set up {rank}")
        return out

    class Window:
        result = None

        def __init__(self, label):
            pass

        def __enter__(self):
            note("open")
            return self

        def __exit__(self, *exc):
            note("close")
            self.result = SimpleNamespace(joules=1.0, estimated=True)
            return False

    monkeypatch.setattr(hogwild, "_setup", setup)
    monkeypatch.setattr(greenlab.energy, "measure", Window)
    result = hogwild.run(ds, mode, target_accuracy=1.0, max_updates=5, eval_every=5)
    events = log.read_text().splitlines()
    assert sorted(events[:2]) == ["set up 0", "set up 1"] and events[2:] == ["open", "close"]
    assert result.updates == [5, 5] and result.setup_seconds > 0
