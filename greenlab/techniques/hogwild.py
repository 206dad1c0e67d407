"""Lesson 14: synchronous data parallelism against asynchronous (Hogwild-style) updates.

Both run ``workers`` CPU processes (one thread each) on the same data, model and learning rate,
until the validation accuracy reaches ``target_accuracy`` (checked by worker 0 every
``eval_every`` of its updates) or ``max_updates`` updates per worker:

- **synchronous**: every step each worker computes the gradient of its own mini-batch, the
  gradients are summed with an all-reduce (``torch.distributed``, gloo) and one update is applied
  to the weights every worker reads (the mean gradient at ``lr x workers``, the linear scaling
  rule, so both modes move the weights as far per sample): no update is ever computed on old
  weights (staleness 0);
- **asynchronous** (Hogwild, Recht et al. 2011): the model's parameters live in shared memory
  (``tensor.share_memory_()``); each worker reads them, computes a gradient and writes its
  update without waiting for, or locking against, the others. Meanwhile the others may have
  written: the *staleness* of an update is the number of other workers' updates applied between
  the read its gradient came from and its own write, counted with a shared version counter.

    result = gl.hogwild.run(data, "async", target_accuracy=0.5)
    print(result.summary())

The parent measures the training with ``gl.measure`` (which counts the parent and its child
processes), the same window for both modes: it opens once every worker has set up (started,
imported torch and, when synchronous, joined the process group with ``init_process_group``) and
closes once every worker has reported its last update; start-up and join are outside it for both
arms (``setup_seconds`` says how long the set-up took, unmeasured).
"""

from __future__ import annotations

import multiprocessing as _mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from greenlab import energy
from greenlab.base.janitor import Janitor
from greenlab.base.processes import die_with_parent
from greenlab.base import limits, validation
from greenlab.base.units import plain_number
from greenlab.training import models

__all__ = ["MODES", "ParallelResult", "run", "staleness_histogram"]

MODES = ("sync", "async")


@dataclass
class ParallelResult:
    """One run: ``reached`` (the target), updates applied per worker, the staleness of every
    update (worker order; all 0 when synchronous), the validation accuracy at the end, and the
    run's seconds and joules (``estimated`` on a CPU)."""

    mode: str
    workers: int
    batch_size: int
    reached: bool
    updates: list
    staleness: list
    val_accuracy: float | None
    seconds: float
    joules: float
    estimated: bool
    seconds_to_target: float | None = None
    setup_seconds: float = 0.0  # processes started and set up, before the window (not measured)

    @property
    def samples(self) -> int:
        """Training samples read, all workers together."""
        return sum(self.updates) * self.batch_size

    @property
    def weight_updates(self) -> int:
        """Writes to the weights: one per step when synchronous, one per worker step when not."""
        return self.updates[0] if self.mode == "sync" else sum(self.updates)

    @property
    def mean_staleness(self) -> float:
        return sum(self.staleness) / len(self.staleness) if self.staleness else 0.0

    @property
    def max_staleness(self) -> int:
        return max(self.staleness, default=0)

    def summary(self) -> str:
        kind = "estimate" if self.estimated else "measured"
        got = "reached" if self.reached else "did NOT reach"
        acc = "-" if self.val_accuracy is None else f"{self.val_accuracy:.1%}"
        return (f"{self.mode}: {self.workers} workers, {got} the target ({acc} validation accuracy) after "
                f"{self.samples} samples ({self.weight_updates} weight updates), "
                f"staleness mean {self.mean_staleness:.2f} / max {self.max_staleness} "
                f"versions; {self.seconds:.2f} s, {plain_number(self.joules)} J ({kind})")


def run(data, mode: str = "async", workers: int = 2, model: str = "mlp", batch_size: int = 32, lr: float = 0.05,
        target_accuracy: float = 0.5, max_updates: int = 400, eval_every: int = 20, seed: int = 0,
        timeout_s: float = 300.0) -> ParallelResult:
    """Train ``gl.models.build(model)`` on ``data`` with ``workers`` processes, ``mode`` "sync" or
    "async" (see the module docstring); plain SGD at ``lr``, each worker ``batch_size`` samples per
    update from its own shard of the training split. Returns a :class:`ParallelResult`."""
    import torch

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    workers = limits.processes("workers", workers)
    batch_size = limits.held("batch_size", batch_size, what="samples in one batch")
    max_updates = limits.steps("max_updates", max_updates, what="updates")
    eval_every = limits.steps("eval_every", eval_every, what="updates")
    lr = validation.number("lr", lr, low=0, low_open=True)  # True was taken for 1.0
    target_accuracy = validation.number("target_accuracy", target_accuracy, low=0, high=1, low_open=True)

    # a timeout at or below zero ran the workers and then threw their results away
    timeout_s = validation.number("timeout_s", timeout_s, low=0, low_open=True)
    seed = validation.integer("seed", seed, low=0)
    ctx = _mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    torch.manual_seed(seed)
    net = models.build(model)
    for p in net.parameters():
        p.requires_grad_(True)
    net.share_memory()
    version = ctx.Value("q", 0, lock=False)  # written under `lock` only
    lock, stop, go = ctx.Lock(), ctx.Event(), ctx.Event()
    ready = ctx.Barrier(workers + 1)  # every worker set up, and the parent
    results = ctx.Queue()
    tensors = (data.train_x, data.train_y, data.val_x, data.val_y)

    # the folder goes however this process ends (a killed kernel too): registered before it exists;
    # each worker dies with this process by itself (processes.die_with_parent in _worker)
    with Janitor() as janitor:
        tmp = janitor.make_temp_dir("greenlab-sync-")
        init = f"file://{os.path.join(tmp, 'store')}"
        args = (mode, workers, net, tensors, batch_size, float(lr), float(target_accuracy), max_updates,
                eval_every, seed, version, lock, stop, results, init, ready, go, os.getpid())
        deadline = time.monotonic() + timeout_s
        setup_start = time.perf_counter()
        procs = [ctx.Process(target=_worker, args=(rank, *args), daemon=True) for rank in range(workers)]
        for p in procs:
            p.start()
        outputs = {}
        try:  # set-up (start, imports, the process group) stays outside the window, for both modes
            ready.wait(timeout=timeout_s)
        except threading.BrokenBarrierError:
            pass  # a worker failed while setting up: it reports through the queue below
        setup_seconds = time.perf_counter() - setup_start
        with energy.measure(f"{mode} data parallel") as window:
            start = time.perf_counter()
            go.set()
            while len(outputs) < workers and time.monotonic() < deadline:
                try:
                    out = results.get(timeout=0.5)
                except Exception:  # queue.Empty: check that the workers are alive
                    if not any(p.is_alive() for p in procs) and results.empty():
                        break
                    continue
                outputs[out["rank"]] = out
            seconds = time.perf_counter() - start
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join()
    if len(outputs) < workers:
        raise RuntimeError(f"{workers - len(outputs)} {mode} worker(s) gave no result "
                           f"(exit codes {[p.exitcode for p in procs]})")
    errors = [o["error"] for o in outputs.values() if o.get("error")]
    if errors:
        raise RuntimeError(f"a {mode} worker failed: {errors[0]}")
    chief = outputs[0]
    staleness = [s for r in sorted(outputs) for s in outputs[r]["staleness"]]
    m = window.result
    return ParallelResult(mode, workers, batch_size, bool(chief["reached"]),
                          [outputs[r]["updates"] for r in sorted(outputs)],
                          staleness, chief["val_accuracy"], seconds, float(m.joules), bool(m.estimated),
                          chief.get("seconds_to_target"), setup_seconds)


def staleness_histogram(staleness) -> dict:
    """``{versions behind: count}`` in ascending order."""
    out: dict = {}
    for s in staleness:
        out[int(s)] = out.get(int(s), 0) + 1
    return dict(sorted(out.items()))


# --- the worker ----------------------------------------------------------------------------------

def _setup(rank, mode, workers, init):
    """A worker's set-up before the measured window: one thread, and the process group when
    synchronous. Returns ``torch.distributed`` (sync) or None."""
    import torch

    torch.set_num_threads(1)
    if mode != "sync":
        return None
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=workers)
    return dist


def _worker(rank, mode, workers, net, tensors, batch_size, lr, target, max_updates, eval_every, seed,
            version, lock, stop, results, init, ready, go, parent):

    die_with_parent(parent, signal.SIGKILL)  # a killed caller (or kernel) ends its workers too
    out = {"rank": rank, "updates": 0, "staleness": [], "reached": False, "val_accuracy": None}
    dist = None
    try:
        import torch
        import torch.nn.functional as F

        dist = _setup(rank, mode, workers, init)
        train_x, train_y, val_x, val_y = tensors
        shard = torch.arange(rank, train_x.shape[0], workers)
        gen = torch.Generator().manual_seed(seed * 1000 + rank)
        params = list(net.parameters())
        ready.wait()
        go.wait()
        t0 = time.perf_counter()
        for _ in range(max_updates):
            if mode == "async" and stop.is_set():
                break
            idx = shard[torch.randint(len(shard), (batch_size,), generator=gen)]
            read_version = version.value
            loss = F.cross_entropy(net(train_x[idx]), train_y[idx])
            grads = torch.autograd.grad(loss, params)
            if mode == "sync":
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)  # the sum: the mean at lr x workers
                grads, offset = [], 0
                for p in params:
                    grads.append(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
                if rank == 0:  # one copy of the weights: every worker holds the same update
                    with torch.no_grad():
                        for p, g in zip(params, grads):
                            p.add_(g, alpha=-lr)
                dist.barrier()
                out["staleness"].append(0)
            else:
                with torch.no_grad():  # Hogwild: no lock around the weights
                    for p, g in zip(params, grads):
                        p.add_(g, alpha=-lr)
                with lock:
                    out["staleness"].append(version.value - read_version)
                    version.value += 1
            out["updates"] += 1
            if out["updates"] % eval_every == 0:
                done = _evaluate(rank, net, val_x, val_y, target, out, t0) if rank == 0 else False
                if mode == "sync":
                    flag = torch.tensor([1.0 if done else 0.0])
                    dist.broadcast(flag, src=0)
                    done = bool(flag.item())
                elif done:
                    stop.set()
                if done or (mode == "async" and stop.is_set()):
                    break
        if rank == 0 and out["val_accuracy"] is None:
            _evaluate(rank, net, val_x, val_y, target, out, t0)
    except Exception as exc:  # reported to the parent, which raises it
        out["error"] = f"{type(exc).__name__}: {exc}"
        ready.abort()  # a worker that fails while setting up must not leave the others waiting
        go.set()
    results.put(out)  # the window closes when every worker has reported; tearing down is outside it
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()


def _evaluate(rank, net, val_x, val_y, target, out, t0) -> bool:
    import torch

    with torch.no_grad():
        acc = float((net(val_x).argmax(1) == val_y).float().mean())
    out["val_accuracy"] = acc
    if acc >= target and not out["reached"]:
        out["reached"] = True
        out["seconds_to_target"] = time.perf_counter() - t0
    return out["reached"]
