"""gl.stopping (early stopping with patience and min_delta) and gl.prefetch (a double-buffered
loader): behaviour on tiny inputs; no timing is asserted."""

import threading

import pytest

from fakes import SlopeSource
from greenlab.training import data, models
from greenlab.techniques import prefetch, stopping
from greenlab.training.loop import TrainConfig, train


def test_should_stop_counts_evaluations_without_an_improvement_above_min_delta():
    assert not stopping.should_stop([], 1)
    assert not stopping.should_stop([0.5, 0.6, 0.7], 2)
    assert stopping.should_stop([0.5, 0.6, 0.6, 0.6], 2)
    assert stopping.should_stop([0.5, 0.505, 0.509, 0.508], 3, min_delta=0.01)  # small rises are noise
    assert not stopping.should_stop([0.5, 0.505, 0.52, 0.51], 2, min_delta=0.01)
    with pytest.raises(ValueError, match="patience"):
        stopping.should_stop([0.5], 0)
    with pytest.raises(ValueError, match="min_delta"):
        stopping.should_stop([0.5], 1, min_delta=-0.1)


def test_early_stopping_callback_stops_a_run():
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    stop = stopping.EarlyStopping(patience=1, rule=lambda accs, patience, min_delta: len(accs) >= 2)
    cfg = TrainConfig(batch_size=16, epochs=3, eval_every=1, target_accuracy=None)
    res = train(models.build("mlp", input_shape=(1, 28, 28), hidden=(4,)), ds, cfg, callbacks=[stop],
                log=False, save=False, sources=[SlopeSource()], device="cpu")
    assert res.status == "stopped" and stop.stopped_at_step == 2 and len(stop.accuracies) == 2


def test_prefetch_yields_everything_in_order_and_raises_the_loaders_error():
    assert list(prefetch.prefetch(range(7), depth=2)) == list(range(7))
    assert list(prefetch.prefetch([], depth=1)) == []

    def failing():
        yield 1
        raise RuntimeError("disk gone")

    got = []
    with pytest.raises(RuntimeError, match="disk gone"):
        for item in prefetch.prefetch(failing()):
            got.append(item)
    assert got == [1]
    with pytest.raises(ValueError, match="depth"):
        next(prefetch.prefetch([1], depth=0))


def test_prefetch_loads_ahead_within_depth_and_stops_its_thread_on_break():
    pulled, second = [], threading.Event()

    def source():
        for i in range(50):
            pulled.append(i)
            if len(pulled) >= 2:
                second.set()
            yield i

    it = prefetch.prefetch(source(), depth=2)
    assert next(it) == 0
    assert second.wait(timeout=5)
    it.close()  # like a break out of the loop
    assert len(pulled) <= 4


def test_compare_loaders_pairs_plain_and_wrapped_windows():
    ds = data.load("synthetic", n_train=64, n_test=32, verbose=False)
    cfg = TrainConfig(batch_size=16, loader="dataloader")
    out = prefetch.compare_loaders(lambda: models.build("mlp", input_shape=(1, 28, 28), hidden=(4,)), ds, cfg,
                                   wrap=lambda loader: prefetch.prefetch(loader, 2), steps=6, repeats=3)
    assert len(out["plain"]) == len(out["prefetched"]) == 3
    assert out["seconds"].n == 3 and out["joules"].metric == "joules"
