"""Dynamic batch sizing: how big a batch fits, how big a batch helps, and what it costs.

- ``find_max_batch``: the largest batch a training step fits in, found by running real steps
  (on CUDA until a real out-of-memory error; on a CPU against an explicit memory budget, using the
  measured tensor memory of each step).
- Batch-size schedules for ``TrainConfig.batch_schedule``: ``constant``, ``stepwise``, ``ramp``,
  ``on_plateau``; learning-rate helpers ``linear_scaling_lr``, ``warmup``, ``goyal_warmup``
  (Goyal et al., 2017) as step -> multiplier callables for ``TrainConfig.lr_schedule``.
- ``gradient_noise_scale``: the "simple" noise scale B_simple of McCandlish et al. (2018), measured
  from gradient norms at two batch sizes.
- ``sweep_batch_sizes`` / ``sweep_cost``: energy and time to a target accuracy per batch size, and
  what the sweep itself cost.
- ``batch_growth_vs_lr_decay``: the two configurations of Smith et al. (2018) for ``gl.compare``.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import time
import weakref
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from greenlab.base import validation
# batching.PRECISIONS as before
from greenlab.training.precision import PRECISIONS, dtype as precision_dtype  # noqa: F401
from greenlab.session.devices import synchronize

# --- largest batch that fits -------------------------------------------------------------

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


# --- batch-size and learning-rate schedules ----------------------------------------------

class Constant:
    """Batch size ``size`` at every epoch."""

    def __init__(self, size: int):
        self.size = _check_positive_int("size", size)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        return self.size

    def __repr__(self) -> str:
        return f"constant({self.size})"


class Stepwise:
    """Batch size from a table {first epoch: size}; each size holds until the next key."""

    def __init__(self, sizes: dict):
        if not isinstance(sizes, dict) or not sizes:
            raise ValueError("sizes must be a non-empty dict {epoch: batch size}, e.g. {0: 32, 5: 128}")
        for e, s in sizes.items():
            _check_epoch(e, "sizes: epoch")
            _check_positive_int("sizes: batch size", s)
        if 0 not in sizes:
            raise ValueError(f"sizes needs a batch size for epoch 0, got keys {sorted(sizes)}")
        self.sizes = dict(sorted(sizes.items()))

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        size = self.sizes[0]
        for first, s in self.sizes.items():
            if epoch >= first:
                size = s
        return size

    def __repr__(self) -> str:
        return f"stepwise({self.sizes})"


class Ramp:
    """Batch size growing linearly from ``start`` (epoch 0) to ``end`` (epoch ``epochs`` and after),
    rounded to a multiple of ``multiple_of``."""

    def __init__(self, start: int, end: int, epochs: int, multiple_of: int = 1):
        self.start = _check_positive_int("start", start)
        self.end = _check_positive_int("end", end)
        self.epochs = _check_positive_int("epochs", epochs)
        self.multiple_of = _check_positive_int("multiple_of", multiple_of)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        frac = min(epoch, self.epochs) / self.epochs
        size = self.start + (self.end - self.start) * frac
        size = int(round(size / self.multiple_of)) * self.multiple_of
        return max(self.multiple_of, size)

    def __repr__(self) -> str:
        return f"ramp({self.start}, {self.end}, {self.epochs})"


class OnPlateau:
    """Batch size that grows by ``factor`` (up to ``max_size``) when the loss stops improving.

    It needs the loss, so with ``gl.train`` pass the same object twice:
    ``TrainConfig(batch_schedule=p)`` and ``callbacks=[p]``. Its ``on_eval(state)`` reads the
    mean training loss (``state.mean_loss``, or ``state["loss"]``) at every evaluation (each epoch end, and
    every ``eval_every`` steps if set); ``observe(loss)`` does the same by hand. After ``patience``
    observations without an improvement larger than ``min_delta`` (relative), the size grows by
    ``factor`` and the counter restarts. ``__call__(epoch)`` returns the current size.
    """

    def __init__(self, start: int, factor: float = 2, patience: int = 1, max_size: int = 4096,
                 min_delta: float = 0.0):
        self.size = _check_positive_int("start", start)
        self.factor = validation.number("factor", factor, low=1, low_open=True, high=1e6)
        self.patience = _check_positive_int("patience", patience)
        self.max_size = _check_positive_int("max_size", max_size)
        if max_size < start:
            raise ValueError(f"max_size ({max_size}) must be >= start ({start})")
        self.min_delta = validation.number("min_delta", min_delta, low=0, high=1e6)
        self.best_loss = math.inf
        self.bad_epochs = 0
        self.history = []  # (loss, size after observing it)

    def observe(self, loss: float) -> int:
        """Record one epoch's loss; returns the batch size for the next epoch."""
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            loss = loss.item()
        loss = validation.number("loss", loss)
        if loss < self.best_loss - self.min_delta * abs(self.best_loss if math.isfinite(self.best_loss) else 0):
            self.best_loss = loss
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                self.size = min(self.max_size, int(round(self.size * self.factor)))
                self.bad_epochs = 0
        self.history.append((loss, self.size))
        return self.size

    def on_eval(self, state) -> None:
        """Training-callback hook: observe the mean training loss since the last evaluation
        (``state.mean_loss``; a dict's ``"loss"``). The last step's loss alone is too noisy:
        at an epoch end it is often a small leftover batch."""
        if isinstance(state, dict):
            loss = state.get("loss")
        else:
            loss = getattr(state, "mean_loss", None)
            if loss is None:
                loss = getattr(state, "loss", None)
        if loss is not None:
            self.observe(loss)

    def __call__(self, epoch: int) -> int:
        _check_epoch(epoch)
        return self.size

    def __repr__(self) -> str:
        return f"on_plateau(size={self.size}, factor={self.factor}, patience={self.patience})"


def constant(size: int) -> Constant:
    """Schedule: the same batch size every epoch."""
    return Constant(size)


def stepwise(sizes: dict) -> Stepwise:
    """Schedule: {first epoch: batch size}, e.g. ``stepwise({0: 32, 3: 128})``."""
    return Stepwise(sizes)


def ramp(start: int, end: int, epochs: int, multiple_of: int = 1) -> Ramp:
    """Schedule: linear growth from ``start`` to ``end`` over ``epochs`` epochs."""
    return Ramp(start, end, epochs, multiple_of)


def on_plateau(start: int, factor: float = 2, patience: int = 1, max_size: int = 4096,
               min_delta: float = 0.0) -> OnPlateau:
    """Schedule: grow the batch by ``factor`` when the loss plateaus (see ``OnPlateau``)."""
    return OnPlateau(start, factor, patience, max_size, min_delta)


def linear_scaling_lr(base_lr: float, base_batch: int, batch: int) -> float:
    """Linear scaling rule (Goyal et al., 2017): lr = base_lr x batch / base_batch."""
    base_lr = validation.number("base_lr", base_lr, low=0, low_open=True)
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("batch", batch)
    lr = base_lr * batch / base_batch
    if not math.isfinite(lr):
        raise ValueError(f"base_lr x batch / base_batch overflows: base_lr={base_lr!r}, batch={batch}")
    return lr


class Warmup:
    """Learning-rate multiplier for ``TrainConfig.lr_schedule`` (a callable step -> multiplier of
    ``lr``): rises linearly from ``start_factor`` at step 0 to 1 at step ``warmup_steps``, then
    stays at 1."""

    def __init__(self, warmup_steps: int, start_factor: float = 0.0):
        if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
        if isinstance(start_factor, bool) or not isinstance(start_factor, (int, float)) \
                or not 0 <= start_factor <= 1:
            raise ValueError(f"start_factor must be a number in [0, 1], got {start_factor!r}")
        self.warmup_steps, self.start_factor = warmup_steps, float(start_factor)

    def __call__(self, step: int) -> float:
        _check_epoch(step, "step")
        if self.warmup_steps == 0 or step >= self.warmup_steps:
            return 1.0
        return self.start_factor + (1.0 - self.start_factor) * step / self.warmup_steps

    def __repr__(self) -> str:
        return f"warmup({self.warmup_steps}, start_factor={self.start_factor})"


def warmup(warmup_steps: int, start_factor: float = 0.0) -> Warmup:
    """Linear warm-up of the learning rate: step -> multiplier (for ``TrainConfig.lr_schedule``)."""
    return Warmup(warmup_steps, start_factor)


def goyal_warmup(base_batch: int, batch: int, warmup_steps: int) -> Warmup:
    """Gradual warm-up of Goyal et al. (2017) for a large batch: use it with
    ``lr=linear_scaling_lr(base_lr, base_batch, batch)``; the rate starts at ``base_lr`` (the
    multiplier ``base_batch / batch``) and rises linearly to the scaled rate over ``warmup_steps``."""
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("batch", batch)
    if batch < base_batch:
        raise ValueError(f"batch ({batch}) must be >= base_batch ({base_batch}) for a warm-up")
    return Warmup(warmup_steps, start_factor=base_batch / batch)


class StepDecay:
    """Learning-rate multiplier (step -> multiplier): divided by ``factor`` at each milestone step."""

    def __init__(self, milestone_steps, factor: float):
        if isinstance(milestone_steps, (str, bytes)) or not hasattr(milestone_steps, "__iter__"):
            raise validation.ArgumentTypeError(f"milestone_steps must be a list of steps, got {milestone_steps!r}")
        self.milestone_steps = sorted(validation.integer("milestone_steps entries", m, low=0)
                                      for m in milestone_steps)
        self.factor = validation.number("factor", factor, low=0, low_open=True, high=1e6)

    def __call__(self, step: int) -> float:
        passed = sum(1 for m in self.milestone_steps if step >= m)
        return 1.0 / self.factor ** passed

    def __repr__(self) -> str:
        return f"StepDecay({self.milestone_steps}, factor={self.factor})"


# --- gradient noise scale ----------------------------------------------------------------

@dataclass
class NoiseScale:
    """Simple gradient noise scale B_simple = S / |G|^2 (McCandlish et al., 2018, appendix A).

    ``g2``: estimate of |G|^2, the squared norm of the true gradient; ``trace_cov``: estimate of
    S = tr(Sigma), the per-sample gradient covariance's trace; both averaged over ``n_estimates``
    independent pairs of batches. ``b_simple_low``/``_high``: 16th and 84th percentiles of a
    bootstrap over the pairs (a 68% interval)."""

    b_simple: float
    g2: float
    g2_std: float
    trace_cov: float
    trace_cov_std: float
    b_simple_low: float
    b_simple_high: float
    small_batch: int
    big_batch: int
    n_estimates: int
    seconds: float

    def summary(self) -> str:
        return (f"B_simple = {self.b_simple:.1f} (68% bootstrap interval {self.b_simple_low:.1f} to "
                f"{self.b_simple_high:.1f}) from {self.n_estimates} pairs of batches of "
                f"{self.small_batch} and {self.big_batch}, measured in {self.seconds:.1f} s")


def simple_noise_scale(small_sq_norm: float, big_sq_norm: float, small_batch: int,
                       big_batch: int) -> tuple:
    """(|G|^2, tr(Sigma), B_simple) from the squared gradient norms of one batch of
    ``small_batch`` and one of ``big_batch`` samples (McCandlish et al., 2018, appendix A.1):
    E|G_B|^2 = |G|^2 + tr(Sigma)/B, solved for the two unknowns. B_simple = tr(Sigma) / |G|^2
    (samples); inf when the |G|^2 estimate is not positive."""
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    small = validation.number("small_sq_norm", small_sq_norm, low=0)
    big = validation.number("big_sq_norm", big_sq_norm, low=0)
    g2 = (big_batch * big - small_batch * small) / (big_batch - small_batch)
    trace_cov = (small - big) / (1.0 / small_batch - 1.0 / big_batch)
    return g2, trace_cov, (trace_cov / g2 if g2 > 0 else math.inf)


def gradient_sq_norms(model, data, small_batch: int = 8, big_batch: int = 128, n_pairs: int = 20,
                      loss_fn=None, seed: int = 0) -> list:
    """``n_pairs`` pairs (|G_small|^2, |G_big|^2): squared norms of the gradient of the mean loss
    on a random batch of ``small_batch`` and one of ``big_batch`` samples (drawn with replacement
    from ``data``'s training split or a pair (x, y)), at the model's current weights. The model's
    state and gradients are restored afterwards. The raw input of ``simple_noise_scale``."""
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    _check_positive_int("n_pairs", n_pairs)
    x, y = _xy(data)
    loss_fn = loss_fn or F.cross_entropy
    dev = _model_device(model)
    g = torch.Generator().manual_seed(int(seed))
    saved = _snapshot(model.state_dict())
    pairs = []
    try:
        for _ in range(n_pairs):
            small = _grad_sq_norm(model, x, y, loss_fn, small_batch, g, dev)
            big = _grad_sq_norm(model, x, y, loss_fn, big_batch, g, dev)
            pairs.append((small, big))
    finally:
        model.zero_grad(set_to_none=True)
        model.load_state_dict(saved)
    return pairs


def gradient_noise_scale(model, data, loss_fn=None, small_batch: int = 8, big_batch: int = 128,
                         n_estimates: int = 20, seed: int = 0, n_bootstrap: int = 1000) -> NoiseScale:
    """Measure the simple gradient noise scale at the model's current weights.

    For each of ``n_estimates`` pairs, gradients of the mean loss are taken on a random batch of
    ``small_batch`` and one of ``big_batch`` samples (drawn with replacement from ``data``), and
    with E|G_B|^2 = |G|^2 + S/B:
        |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
        S     ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)
    B_simple is the ratio of the averages (less biased than the average of ratios).
    ``data``: a greenlab Dataset (its training split) or a pair of tensors (x, y).
    ``loss_fn``: mean-reduced loss(output, y); default cross-entropy.
    The model's state (weights, buffers) and gradients are restored afterwards.
    """
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    _check_positive_int("n_estimates", n_estimates)
    t0 = time.perf_counter()
    g2s, covs = [], []
    for small, big in gradient_sq_norms(model, data, small_batch, big_batch, n_estimates, loss_fn, seed):
        g2, cov, _ = simple_noise_scale(small, big, small_batch, big_batch)
        g2s.append(g2)
        covs.append(cov)
    seconds = time.perf_counter() - t0
    g2_t, cov_t = torch.tensor(g2s, dtype=torch.float64), torch.tensor(covs, dtype=torch.float64)
    g2, cov = float(g2_t.mean()), float(cov_t.mean())
    low, high = _bootstrap_ratio(cov_t, g2_t, n_bootstrap, seed)
    std = (lambda t: float(t.std()) if t.numel() > 1 else 0.0)
    return NoiseScale(b_simple=cov / g2 if g2 > 0 else math.inf, g2=g2, g2_std=std(g2_t), trace_cov=cov,
                      trace_cov_std=std(cov_t), b_simple_low=low, b_simple_high=high,
                      small_batch=small_batch, big_batch=big_batch, n_estimates=n_estimates,
                      seconds=seconds)


# --- sweeps over batch sizes -------------------------------------------------------------

@dataclass
class SweepRow:
    """One training run of a batch-size sweep."""

    batch_size: int
    repeat: int
    status: str
    reached_target: bool
    seconds: float
    joules: float
    seconds_to_target: float | None
    joules_to_target: float | None
    final_accuracy: float | None
    lr: float
    estimated: bool


@dataclass
class SweepResult:
    """Energy and time to ``target_accuracy`` per batch size; ``runs`` keeps each RunResult."""

    rows: list
    target_accuracy: float
    runs: list = field(default_factory=list)

    def by_size(self) -> dict:
        """batch size -> median joules_to_target (None when no repeat reached the target)."""
        out = {}
        for b in sorted({r.batch_size for r in self.rows}):
            hits = sorted(r.joules_to_target for r in self.rows if r.batch_size == b and r.reached_target)
            out[b] = _median(hits) if hits else None
        return out

    def best(self) -> int | None:
        """Batch size with the least median energy to target (None if none reached it)."""
        reached = {b: j for b, j in self.by_size().items() if j is not None}
        return min(reached, key=reached.get) if reached else None

    def table(self) -> str:
        lines = [f"{'batch':>6} {'rep':>3} {'lr':>8} {'status':>15} {'s to target':>12} "
                 f"{'J to target':>12} {'total J':>10} {'final acc':>9}"]
        for r in self.rows:
            s_t = "-" if r.seconds_to_target is None else f"{r.seconds_to_target:.2f}"
            j_t = "-" if r.joules_to_target is None else f"{r.joules_to_target:.1f}"
            acc = "-" if r.final_accuracy is None else f"{r.final_accuracy:.3f}"
            lines.append(f"{r.batch_size:>6} {r.repeat:>3} {r.lr:>8.4g} {r.status:>15} {s_t:>12} "
                         f"{j_t:>12} {r.joules:>10.1f} {acc:>9}")
        if any(r.estimated for r in self.rows):
            lines.append("energy figures include estimated components (see each run's energy sources)")
        return "\n".join(lines)

    def misses(self) -> dict:
        """batch size -> number of repeats that did not reach the target."""
        return {b: sum(1 for r in self.rows if r.batch_size == b and not r.reached_target)
                for b in sorted({r.batch_size for r in self.rows})}

    def paired(self, baseline: int, metric: str = "joules_to_target") -> dict:
        """batch size -> ``gl.experiments.Paired`` of ``metric`` against batch ``baseline``,
        repeat by repeat (repeat r of every size shares seed and sample order). A repeat where
        either run missed the target has no figure and is left out of the pair."""
        from greenlab.experiments import paired, short_flags

        sizes = sorted({r.batch_size for r in self.rows})
        if baseline not in sizes:
            raise ValueError(f"baseline must be one of the swept sizes {sizes}, got {baseline!r}")

        def values(b):
            by_rep = {r.repeat: getattr(r, metric) for r in self.rows if r.batch_size == b}
            return [by_rep[k] for k in sorted(by_rep)]

        def runs(b):  # each repeat's RunResult, so a verdict can refuse windows too short to read
            by_rep = {r.repeat: run for r, run in zip(self.rows, self.runs) if r.batch_size == b}
            return [by_rep.get(k) for k in sorted({r.repeat for r in self.rows if r.batch_size == b})]

        base = values(baseline)
        return {b: paired(values(b), base, metric, variant=f"batch {b}", baseline=f"batch {baseline}",
                          short=short_flags(runs(b), runs(baseline), metric) if self.runs else None)
                for b in sizes if b != baseline}

    def to_dict(self) -> dict:
        return {"target_accuracy": self.target_accuracy, "rows": [dataclasses.asdict(r) for r in self.rows]}


def sweep_batch_sizes(model_fn, data, sizes, base_config, target_accuracy: float, repeats: int = 1,
                      scale_lr: bool = True, train_fn=None, verbose: bool = True, lrs: dict | None = None,
                      max_samples: int | None = None, **train_kwargs) -> SweepResult:
    """Train a fresh ``model_fn()`` at each batch size in ``sizes`` until ``target_accuracy``.

    ``base_config``: a ``TrainConfig``; each run copies it with ``batch_size``, ``target_accuracy``
    and (with ``scale_lr``) the linearly scaled learning rate from ``base_config.batch_size``.
    ``train_fn``: defaults to ``greenlab.training.loop.train``; ``train_kwargs`` go to it (e.g. log=False).
    Runs are paired: repeat r uses seed base seed + r at every batch size (same initial weights
    and sample order). Evaluations are scheduled in samples so that every size is checked after
    the same amount of data: ``base_config.eval_every`` steps become ``eval_every_samples`` =
    eval_every x base_config's effective batch size (an ``eval_every_samples`` is kept as is).
    The target is validation accuracy.
    ``lrs``: {batch size: learning rate}, e.g. each size's rate tuned with the same budget
    (``gl.recipes.tune_lr``); it replaces the linear scaling (every size must be in it).
    ``max_samples``: cap every run at this many training samples (``max_steps`` =
    ceil(max_samples / batch), epochs raised to fit), so each size gets the same data budget
    rather than the same epochs (which would give a large batch very few updates).
    """
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes must hold at least one batch size")
    for b in sizes:
        _check_positive_int("batch size", b)
    _check_positive_int("repeats", repeats)
    validation.number("target_accuracy", target_accuracy, low=0, high=1, low_open=True)
    default_train = train_fn is None
    if train_fn is None:
        from greenlab.training.loop import train as train_fn
    if (getattr(base_config, "eval_every", None) is not None
            and getattr(base_config, "eval_every_samples", None) is None):
        base_config = dataclasses.replace(
            base_config, eval_every=None,
            eval_every_samples=base_config.eval_every * base_config.batch_size * base_config.accum_steps)
    if lrs is not None:
        missing = [b for b in sizes if b not in lrs]
        if missing:
            raise ValueError(f"lrs has no learning rate for batch size(s) {missing}")
        for b in sizes:
            validation.number(f"lrs[{b}]", lrs[b], low=0, low_open=True)
    if max_samples is not None:
        _check_positive_int("max_samples", max_samples)
    n_train = int(_xy(data)[0].shape[0]) if max_samples is not None else None
    from greenlab.experiments.arms import rotated, warm_up, warmup_config

    def config_for(b, rep):
        if lrs is not None:
            lr = float(lrs[b])
        else:
            lr = linear_scaling_lr(base_config.lr, base_config.batch_size, b) if scale_lr else base_config.lr
        cap = {}
        if max_samples is not None:
            per_step = b * getattr(base_config, "accum_steps", 1)
            cap = {"max_steps": math.ceil(max_samples / per_step),
                   "epochs": max(base_config.epochs, math.ceil(max_samples / max(1, n_train)))}
        return dataclasses.replace(base_config, batch_size=b, lr=lr, target_accuracy=target_accuracy,
                                   seed=base_config.seed + rep, **cap)

    # every size warmed up the same way before any is measured, then repeats in rotating order
    warm_kwargs = dict(train_kwargs, save=False) if default_train else train_kwargs
    warm_up({b: (lambda b=b: train_fn(model_fn(), data, warmup_config(config_for(b, 0)), **warm_kwargs))
             for b in sizes})
    measured = {}
    for rep in range(repeats):
        for b in rotated(sizes, rep):
            cfg = config_for(b, rep)
            res = train_fn(model_fn(), data, cfg, **train_kwargs)
            measured[b, rep] = (cfg.lr, res)
            if verbose:
                print(f"batch {b:>5} repeat {rep}: {res.status}, {res.joules:.1f} J, {res.seconds:.1f} s")
    rows, runs = [], []
    for b in sizes:
        for rep in range(repeats):
            lr, res = measured[b, rep]
            reached = res.joules_to_target is not None
            rows.append(SweepRow(batch_size=b, repeat=rep, status=res.status, reached_target=reached,
                                 seconds=res.seconds, joules=res.joules,
                                 seconds_to_target=res.seconds_to_target, joules_to_target=res.joules_to_target,
                                 final_accuracy=res.final_accuracy, lr=lr,
                                 estimated=res.estimated))
            runs.append(res)
    return SweepResult(rows=rows, target_accuracy=float(target_accuracy), runs=runs)


def sweep_cost(results) -> dict:
    """What a sweep itself cost: total joules and seconds of every run in it.

    ``results``: a ``SweepResult``, or a list of results with ``joules`` and ``seconds``."""
    rows = results.rows if isinstance(results, SweepResult) else list(results)
    if not rows:
        raise ValueError("sweep_cost needs at least one run")
    return {"joules": float(sum(r.joules for r in rows)), "seconds": float(sum(r.seconds for r in rows)),
            "runs": len(rows), "estimated": any(bool(getattr(r, "estimated", False)) for r in rows)}


def plot_sweep(result: SweepResult, ax=None):
    """Median energy and time to target per batch size (log-2 x axis). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    energy = result.by_size()
    sizes = [b for b, j in energy.items() if j is not None]
    ax.plot(sizes, [energy[b] for b in sizes], "o-", label="energy to target (J)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("joules to target")
    missed = [b for b, j in energy.items() if j is None]
    title = f"energy to {result.target_accuracy:.0%} validation accuracy"
    if missed:
        title += f" (not reached at {missed})"
    ax.set_title(title)
    ax2 = ax.twinx()
    times = {b: _median(sorted(r.seconds_to_target for r in result.rows
                               if r.batch_size == b and r.reached_target)) for b in sizes}
    ax2.plot(sizes, [times[b] for b in sizes], "s--", color="tab:orange", label="time to target (s)")
    ax2.set_ylabel("seconds to target")
    ax.legend(loc="upper left")
    ax2.legend(loc="upper right")
    return ax


def batch_growth_vs_lr_decay(base_config, n_train: int, milestones, factor: float = 5) -> dict:
    """The two configurations of Smith et al. (2018), "Don't decay the learning rate, increase
    the batch size", ready for ``gl.compare``:

    - "lr-decay": constant batch, learning rate divided by ``factor`` at each milestone epoch
      (``lr_schedule`` = ``StepDecay`` on the optimiser steps where those epochs begin);
    - "batch-growth": constant learning rate, batch multiplied by ``factor`` at each milestone.

    Both run ``base_config.epochs`` epochs over ``n_train`` samples, so they see the same data;
    batch growth takes fewer optimiser steps.
    """
    _check_positive_int("n_train", n_train)
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise validation.ArgumentTypeError(f"milestones must be a list of epochs, got {milestones!r}")
    milestones = sorted(validation.integer("milestones entries", m) for m in milestones)
    if not milestones or milestones[0] < 1:
        raise ValueError(f"milestones must be epochs >= 1, got {milestones}")
    if milestones[-1] >= base_config.epochs:
        raise ValueError(f"milestones must be below epochs ({base_config.epochs}), got {milestones}")
    validation.number("factor", factor, low=1, low_open=True, high=1e6)
    per_step = base_config.batch_size * getattr(base_config, "accum_steps", 1)
    steps_per_epoch = math.ceil(n_train / per_step)
    decay = dataclasses.replace(base_config, batch_schedule=None,
                                lr_schedule=StepDecay([m * steps_per_epoch for m in milestones], factor),
                                label="lr-decay")
    sizes = {0: base_config.batch_size}
    for i, m in enumerate(milestones, start=1):
        sizes[m] = int(round(base_config.batch_size * factor ** i))
    growth = dataclasses.replace(base_config, batch_schedule=Stepwise(sizes), lr_schedule="constant",
                                 label="batch-growth")
    return {"lr-decay": decay, "batch-growth": growth}


def grow_batch_then_decay(epoch: int, base_batch: int, base_lr: float, milestones, factor: float,
                          max_batch: int) -> tuple:
    """(batch size, learning rate) for ``epoch`` under Smith et al.'s (2018) hybrid schedule:
    at every milestone epoch reached, the batch grows ``factor`` times while the grown batch
    stays within ``max_batch`` (the memory limit); once it would not, the learning rate is
    divided by ``factor`` instead. The batch is rounded to a whole number of samples."""
    _check_epoch(epoch)
    _check_positive_int("base_batch", base_batch)
    _check_positive_int("max_batch", max_batch)
    if max_batch < base_batch:
        raise ValueError(f"max_batch ({max_batch}) must be at least base_batch ({base_batch})")
    validation.number("base_lr", base_lr, low=0, low_open=True)
    validation.number("factor", factor, low=1, low_open=True, high=1e6)
    batch, lr = base_batch, float(base_lr)
    for m in sorted(_check_epoch(m, "milestones entries") for m in milestones):
        if m > epoch:
            break
        grown = int(round(batch * factor))
        if grown <= max_batch:
            batch = grown
        else:
            lr /= factor
    return batch, lr


def schedule_config(base_config, schedule, n_train: int):
    """``base_config`` with the batch size and learning rate of ``schedule(epoch) -> (batch, lr)``:
    ``batch_schedule`` per epoch, ``lr`` = the rate of epoch 0 and ``lr_schedule`` the multiplier
    per optimiser step (an epoch of ``n_train`` samples at batch b takes ceil(n_train / b) steps,
    as ``gl.train`` counts them). For ``gl.train`` or ``gl.compare``."""
    _check_positive_int("n_train", n_train)
    if not callable(schedule):
        raise validation.ArgumentTypeError(f"schedule must be a callable epoch -> (batch, lr), got {schedule!r}")
    plan = [schedule(e) for e in range(base_config.epochs)]
    for e, (b, lr) in enumerate(plan):
        _check_positive_int(f"schedule({e}) batch", b)
        validation.number(f"schedule({e}) lr", lr, low=0, low_open=True)
    accum = getattr(base_config, "accum_steps", 1)
    first_steps, step = [], 0
    for b, _ in plan:
        first_steps.append(step)
        step += math.ceil(n_train / (b * accum))
    lr0 = float(plan[0][1])
    multipliers = [lr / lr0 for _, lr in plan]
    sizes = {e: b for e, (b, _) in enumerate(plan)}
    return dataclasses.replace(base_config, lr=lr0, batch_schedule=Stepwise(sizes),
                               lr_schedule=_EpochMultiplier(first_steps, multipliers))


# --- helpers -----------------------------------------------------------------------------

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


def _snapshot(obj):
    """A deep copy with every tensor copied to the CPU (for state dicts)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return type(obj)((k, _snapshot(v)) for k, v in obj.items())
    if isinstance(obj, list):
        return [_snapshot(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_snapshot(v) for v in obj)
    return obj


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


def _model_device(model) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _xy(data):
    if hasattr(data, "train_x") and hasattr(data, "train_y"):
        return data.train_x, data.train_y
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return data[0], data[1]
    raise ValueError("data must be a greenlab Dataset or a pair of tensors (x, y)")


def _grad_sq_norm(model, x, y, loss_fn, batch, generator, device) -> float:
    idx = torch.randint(0, x.shape[0], (batch,), generator=generator)
    xb, yb = x[idx].to(device), y[idx].to(device)
    model.zero_grad(set_to_none=True)
    loss_fn(model(xb), yb).backward()
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += float(p.grad.detach().double().pow(2).sum())
    return total


def _bootstrap_ratio(num, den, n, seed):
    if num.numel() < 2 or n < 1:
        r = float(num.mean() / den.mean())
        return r, r
    g = torch.Generator().manual_seed(int(seed) + 1)
    idx = torch.randint(0, num.numel(), (n, num.numel()), generator=g)
    ratios = num[idx].mean(1) / den[idx].mean(1)
    q = torch.quantile(ratios, torch.tensor([0.16, 0.84], dtype=torch.float64))
    return float(q[0]), float(q[1])


def _median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return None
    mid = n // 2
    return values[mid] if n % 2 else 0.5 * (values[mid - 1] + values[mid])


def _check_positive_int(label, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{label} must be a positive integer, got {value!r}")
    return value


def _check_epoch(epoch, label="epoch"):
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"{label} must be an integer >= 0, got {epoch!r}")
    return epoch


class _EpochMultiplier:
    """Step -> learning-rate multiplier that is constant within each epoch."""

    def __init__(self, first_steps, multipliers):
        self.first_steps, self.multipliers = list(first_steps), list(multipliers)

    def __call__(self, step: int) -> float:
        import bisect

        return self.multipliers[max(0, bisect.bisect_right(self.first_steps, step) - 1)]

    def __repr__(self) -> str:
        return f"per-epoch lr multipliers {[round(m, 4) for m in self.multipliers]}"
