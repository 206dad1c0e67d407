"""How big a batch fits (lessons 02 (02_gradient_accumulation), 03 (03_batch_sizing) and 10 (10_language_model);
the GPU experiment of lesson 11 (11_fitting_in_memory) reads its peak memory).

``find_max_batch``: the largest batch a training step fits in, found by running real steps (on CUDA until a
real out-of-memory error; on a CPU against an explicit memory budget, using the measured tensor memory of each
step). ``measure_step_peak_bytes``: the peak of the tensor memory a function holds alive.
"""

from __future__ import annotations

import dataclasses
import gc
import time
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from greenlab.base import validation
from greenlab.session.devices import synchronize
from greenlab.techniques.batching.inputs import _check_positive_int, _model_device, _snapshot
from greenlab.training.precision import PRECISIONS, dtype as precision_dtype


@dataclass
class BatchProbe:
    """One tried batch size: did a full training step fit? ``peak_bytes``: measured peak memory
    of the step (tensor bytes; None when the step ran out of memory)."""

    batch_size: int
    ok: bool
    peak_bytes: int | None
    reason: str  # "fits", "out-of-memory" or "over-budget"


@dataclass
class MaxBatchResult:
    """The largest batch size that fits, with every probe tried and the search's duration."""

    batch_size: int
    probes: list
    seconds: float
    device: str
    method: str  # "cuda-oom", "memory-budget" or "step-fn"
    memory_budget_bytes: int | None = None
    resident_bytes: int = 0
    note: str = ""

    @property
    def peak_bytes(self) -> int | None:
        """Measured peak of the step at the chosen batch size (bytes)."""
        for p in self.probes:
            if p.batch_size == self.batch_size and p.ok:
                return p.peak_bytes
        return None

    def table(self) -> str:
        """The probes in the order they were tried, as a text table."""
        lines = [f"{'batch':>7} {'fits':>5} {'peak MiB':>10}  reason"]
        for p in self.probes:
            mib = "-" if p.peak_bytes is None else f"{p.peak_bytes / 2**20:.1f}"
            lines.append(f"{p.batch_size:>7} {str(p.ok):>5} {mib:>10}  {p.reason}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The result as plain JSON-safe values, every probe included."""
        return {"batch_size": self.batch_size, "probes": [dataclasses.asdict(p) for p in self.probes],
                "seconds": self.seconds, "device": self.device, "method": self.method,
                "memory_budget_bytes": self.memory_budget_bytes, "resident_bytes": self.resident_bytes,
                "note": self.note}


def find_max_batch(model, input_shape, device=None, start: int = 1, limit: int = 65536,
                   memory_budget_bytes: int | None = None, optimizer=None, precision: str = "fp32",
                   num_classes: int | None = None, step_fn=None) -> MaxBatchResult:
    """Largest batch size (<= ``limit``) for which one training step fits.

    The batch doubles from ``start`` until a step fails, then a binary search between the last
    size that fitted and the first that failed finds the exact boundary. Each probe runs a real
    step (forward, cross-entropy, backward, optimiser step) on random inputs of shape
    (batch, *input_shape) under ``precision`` autocast.

    - CUDA: a step fails on a real ``torch.cuda.OutOfMemoryError`` (or, with a budget, when
      resident + measured peak exceeds it); peak = ``torch.cuda.max_memory_allocated``.
    - CPU: needs ``memory_budget_bytes``. Peak = measured peak of live tensor bytes during the
      step (every tensor storage created by an operator, counted until it is freed) plus the
      resident bytes (parameters, buffers, optimiser state). Interpreter and library memory and
      allocator overhead are not counted, so leave headroom in the budget.
    - ``step_fn(batch_size) -> peak bytes``: a custom step (or a fake for tests); it may raise
      ``torch.cuda.OutOfMemoryError``. A budget is then optional.

    After every probe, gradients are cleared, the model's and optimiser's state dicts are restored
    from a snapshot taken first, and the CUDA cache is emptied: probing does not train the model.
    ``optimizer``: default SGD(lr=0.01, momentum=0.9) on the model's parameters.
    """
    _check_positive_int("start", start)
    _check_positive_int("limit", limit)
    if start > limit:
        raise ValueError(f"start ({start}) must be <= limit ({limit})")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    memory_budget_bytes = validation.number("memory_budget_bytes", memory_budget_bytes, low=0,
                                            low_open=True, allow_none=True)
    if not isinstance(model, torch.nn.Module):
        raise validation.ArgumentTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise validation.ArgumentTypeError(f"input_shape must be a tuple of positive sizes such as "
                                           f"(1, 28, 28), got {input_shape!r}")
    input_shape = tuple(validation.integer("input_shape entries", s, low=1, high=2**31)
                        for s in input_shape)
    validation.integer("num_classes", num_classes, low=2, allow_none=True)
    if step_fn is not None and not callable(step_fn):
        raise validation.ArgumentTypeError(f"step_fn must be a callable batch_size -> peak bytes, got {step_fn!r}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise validation.ArgumentTypeError(f"optimizer must be a torch.optim.Optimizer or None, "
                                           f"got {type(optimizer).__name__}")
    dev = torch.device(device) if device is not None else _model_device(model)
    if step_fn is None and device is not None and _model_device(model).type != dev.type:
        raise ValueError(f"the model is on {_model_device(model)} but device={str(device)!r}: move it "
                         f"first (model.to({str(device)!r})) or leave device=None to probe where it is")
    if step_fn is None and dev.type != "cuda" and memory_budget_bytes is None:
        raise ValueError("on a CPU nothing runs out of memory in a useful way (the system swaps); "
                         "pass memory_budget_bytes=..., e.g. 2 * 2**30 for 2 GiB")
    if optimizer is None:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shape = tuple(int(s) for s in input_shape)

    if step_fn is not None:
        method = "step-fn"
        run_step = step_fn
    else:
        method = "cuda-oom" if dev.type == "cuda" else "memory-budget"
        if num_classes is None:
            num_classes = _infer_num_classes(model, shape, dev)
        run_step = _RealStep(model, optimizer, shape, dev, precision, num_classes)

    model_state = _snapshot(model.state_dict())
    optim_state = _snapshot(optimizer.state_dict())
    resident = _resident_bytes(model, optimizer) if method == "memory-budget" else 0

    def probe(batch_size: int) -> BatchProbe:
        peak, failed = None, False
        try:
            peak = int(run_step(batch_size))
        except torch.cuda.OutOfMemoryError:
            failed = True
        # recover outside the except block, so the exception's frames (and tensors) are gone
        optimizer.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        model.load_state_dict(model_state)
        optimizer.load_state_dict(_snapshot(optim_state))
        if dev.type == "cuda":
            if failed:
                gc.collect()  # frees any tensors a reference cycle kept from the failed step
            torch.cuda.empty_cache()
        if failed:
            return BatchProbe(batch_size, False, None, "out-of-memory")
        total = peak + resident
        if memory_budget_bytes is not None and total > memory_budget_bytes:
            return BatchProbe(batch_size, False, total, "over-budget")
        return BatchProbe(batch_size, True, total, "fits")

    t0 = time.perf_counter()
    best, probes = _grow_and_refine(probe, start, limit)
    seconds = time.perf_counter() - t0
    if best == 0:
        one = next(p for p in probes if p.batch_size == 1)
        if one.reason == "over-budget":
            raise ValueError(f"memory_budget_bytes={int(memory_budget_bytes)} is below one sample: a "
                             f"step with batch size 1 measured {one.peak_bytes} bytes")
        raise ValueError("even batch size 1 runs out of memory on this device")
    note = ""
    if method == "memory-budget":
        note = ("CPU peak = resident parameters/buffers/optimiser state + measured peak of live "
                "tensor bytes during the step; interpreter and allocator overhead not included")
    return MaxBatchResult(batch_size=best, probes=probes, seconds=seconds, device=str(dev), method=method,
                          memory_budget_bytes=memory_budget_bytes, resident_bytes=resident, note=note)


def measure_step_peak_bytes(fn) -> tuple:
    """Run ``fn()`` and return (its result, peak bytes of live tensor storage it created).

    Every tensor an operator returns is counted from creation until its storage is freed; views
    share their base's storage and are counted once. Works on any device; on a CPU it is the
    measurement ``find_max_batch`` uses."""
    with _LiveTensorBytes() as tracker:
        out = fn()
    return out, tracker.peak


def _grow_and_refine(probe, start: int, limit: int):
    """Double from ``start`` until a probe fails (or ``limit``), then binary-search the boundary.
    Returns (largest size that fitted or 0, probes in order)."""
    probes = []
    results = {}

    def fits(b):
        if b not in results:
            p = probe(b)
            probes.append(p)
            results[b] = p.ok
        return results[b]

    good, bad = 0, None
    b = start
    while True:
        if fits(b):
            good = b
            if b == limit:
                break
            b = min(2 * b, limit)
        else:
            bad = b
            break
    if bad is None:
        return good, probes
    if good == 0 and start > 1:
        if fits(1):
            good = 1
        else:
            return 0, probes
    while bad - good > 1 and good > 0:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good, probes


class _RealStep:
    """One real training step on random data; returns the measured peak memory (bytes)."""

    def __init__(self, model, optimizer, shape, device, precision, num_classes):
        self.model, self.optimizer, self.shape = model, optimizer, shape
        self.device, self.precision, self.num_classes = device, precision, num_classes

    def __call__(self, batch_size: int) -> int:
        if self.device.type == "cuda":
            synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
            self._step(batch_size)
            synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            return max(peak, base)
        _, peak = measure_step_peak_bytes(lambda: self._step(batch_size))
        return peak

    def _step(self, batch_size):
        x = torch.randn((batch_size, *self.shape), device=self.device)
        y = torch.randint(0, self.num_classes, (batch_size,), device=self.device)
        self.model.train()
        dtype = precision_dtype(self.precision)
        with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not torch.float32):
            loss = F.cross_entropy(self.model(x).float(), y)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class _LiveTensorBytes:
    """Dispatch mode counting the bytes of tensor storages created while it is active, from
    creation until freed (weak-reference finalisers); ``peak`` is the maximum."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker._track(out)
                return out

        self._mode = _Mode()
        self.current = 0
        self.peak = 0
        self._live = {}

    def __enter__(self):
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)

    def _track(self, out):
        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key = id(storage)
            if key in self._live:
                continue
            n = storage.nbytes()
            self._live[key] = n
            self.current += n
            self.peak = max(self.peak, self.current)
            weakref.finalize(storage, self._free, key)

    def _free(self, key):
        self.current -= self._live.pop(key, 0)


def _resident_bytes(model, optimizer) -> int:
    """Bytes of distinct storages held by parameters, buffers and optimiser state."""
    seen, total = set(), 0
    tensors = list(model.parameters()) + list(model.buffers())
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
    for t in tensors:
        s = t.untyped_storage()
        if s.data_ptr() not in seen:
            seen.add(s.data_ptr())
            total += s.nbytes()
    return total


def _infer_num_classes(model, shape, device) -> int:
    import copy

    probe = copy.deepcopy(model).eval()
    with torch.no_grad():
        out = probe(torch.zeros((1, *shape), device=device))
    if out.dim() != 2 or out.shape[1] < 2:
        raise ValueError(f"the model's output has shape {tuple(out.shape)}; find_max_batch needs "
                         "class logits (batch, classes), or pass step_fn=...")
    return int(out.shape[1])
