"""A double-buffered loader (lesson 07): the next batch is prepared while the model trains on
this one, by one background thread, with at most ``depth`` batches waiting.

A ``DataLoader`` with ``num_workers=0`` prepares each batch (indexing, augmentation, collation)
in the training process between steps, while nothing else happens. A thread can overlap that
work with the step where the step releases Python's lock (most of PyTorch's kernels do); on a
GPU it also overlaps the host work with the device's. Whether it pays on a given machine is
measured, paired, by :func:`compare_loaders`.

    for x, y in gl.prefetch.prefetch(loader, depth=2):
        ...
"""

from __future__ import annotations

import itertools
import queue
import threading
from typing import Callable, Iterable, Iterator

from greenlab.energy import measure
from greenlab.experiments import paired, short_flags, warm_up
from greenlab.session.config import seed_everything
from greenlab.training.data import make_dataloader

_DONE = object()


def prefetch(batches: Iterable, depth: int = 2) -> Iterator:
    """Yield the items of ``batches`` in order while a background thread loads ahead, keeping
    at most ``depth`` loaded items waiting. An exception raised by ``batches`` is raised here,
    at the item where it happened. Stopping early (``break``) stops the thread too."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a whole number of batches >= 1, got {depth!r}")
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def load() -> None:
        try:
            for item in batches:
                if not put((item, None)):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put((_DONE, exc))
            return
        put((_DONE, None))

    thread = threading.Thread(target=load, name="greenlab-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=5.0)  # the loader finishes the item in hand and stops: no thread outlives the loop


def compare_loaders(model_fn: Callable, data, config, wrap: Callable, steps: int = 20, repeats: int = 3,
                    name: str = "prefetched"):
    """Train ``model_fn()`` for ``steps`` steps on ``config``'s loader (a ``DataLoader`` per
    ``gl.data.make_dataloader``), plain and through ``wrap(loader)``, in ``repeats`` paired and
    alternating ``gl.measure`` windows (the same seed and batches in both). Returns
    ``{"plain": [Measurement], name: [Measurement], "seconds": Paired, "joules": Paired}``: the
    paired verdicts of ``name`` against "plain"."""
    import torch

    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a whole number >= 1, got {steps!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")

    def one(use_wrap: bool, seed: int):
        seed_everything(seed)
        model = model_fn()
        opt = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
        loader = make_dataloader(data, config.batch_size, num_workers=config.num_workers,
                                 augment=config.augment, seed=seed)
        with measure(name if use_wrap else "plain") as window:
            for x, y in itertools.islice(_epochs(loader, wrap if use_wrap else None), steps):
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        return window.result

    warm_up({"plain": lambda: one(False, seed=0), name: lambda: one(True, seed=0)})  # both arms, discarded
    out = {"plain": [], name: []}
    for r in range(repeats):
        order = (False, True) if r % 2 == 0 else (True, False)
        for use_wrap in order:
            out[name if use_wrap else "plain"].append(one(use_wrap, seed=r))
    for metric, attr in (("seconds", "seconds"), ("joules", "joules")):
        out[metric] = paired([getattr(m, attr) for m in out[name]], [getattr(m, attr) for m in out["plain"]],
                             metric, variant=name, baseline="plain",
                             short=short_flags(out[name], out["plain"], metric))
    return out


def _epochs(loader, wrap):
    """Batches of ``loader`` pass after pass (each pass through ``wrap`` when given)."""
    while True:
        yield from (wrap(loader) if wrap is not None else loader)
