"""Compression: pruning, quantisation, distillation and transfer learning (lesson 07).

Every function returns a new model and leaves the one passed in untouched.

- ``prune_unstructured``: zero the smallest weights (global L1 magnitude, through
  ``torch.nn.utils.prune.global_unstructured``). The tensors keep their shape, so dense
  kernels do the same arithmetic: smaller when compressed on disk, not faster.
- ``prune_channels``: remove whole output channels of convolutions (chosen by L2 norm with
  ``torch.nn.utils.prune.ln_structured``) and rebuild smaller dense layers, so every later
  layer does less arithmetic. Works on greenlab's ``"cnn"`` models and plain ``nn.Sequential``
  conv nets (no residual connections).
- ``quantize_dynamic`` / ``quantize_static``: int8 through ``torch.ao.quantization`` (eager dynamic
  quantisation of ``nn.Linear``; FX graph mode static quantisation with calibration). Quantised
  models run on the CPU. PyTorch marks ``torch.ao.quantization`` as deprecated in favour of the
  separate ``torchao`` package; it still works in the PyTorch versions greenlab supports, and its
  deprecation warnings are silenced inside these two functions only.
- ``distill``: knowledge distillation (Hinton, Vinyals and Dean, 2015, "Distilling the Knowledge
  in a Neural Network", arXiv:1503.02531), measured with ``greenlab.energy.measure``.
- ``energy_per_inference`` and ``break_even_inferences``: when does compression pay back?
"""

from __future__ import annotations

import copy
import io
import math
import statistics
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import prune

from greenlab.base import validation
from greenlab.energy.flags import MeasuredFlags, PooledFlags

PRUNABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


# --- pruning -----------------------------------------------------------------------------

def prune_unstructured(model: nn.Module, amount: float, permanent: bool = True) -> nn.Module:
    """A copy of ``model`` with the fraction ``amount`` of all conv/linear weights set to zero,
    chosen by global L1 magnitude (smallest absolute values across all layers together).

    ``permanent=True`` bakes the zeros into ``weight`` (``prune.remove``); ``False`` keeps torch's
    ``weight_orig`` + ``weight_mask`` so that fine-tuning keeps pruned weights at zero.
    """
    validation.module("model", model)
    amount = _check_amount(amount)
    validation.flag("permanent", permanent)
    pruned = copy.deepcopy(model)
    targets = [(m, "weight") for m in pruned.modules() if isinstance(m, PRUNABLE)]
    if not targets:
        raise ValueError("the model has no Conv/Linear layers to prune")
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=amount)
    if permanent:
        for module, name in targets:
            prune.remove(module, name)
    return pruned


def sparsity(model: nn.Module) -> float:
    """Fraction (0..1) of conv/linear weight entries that are exactly zero."""
    zeros = total = 0
    for m in model.modules():
        if isinstance(m, PRUNABLE):
            w = m.weight.detach()
            zeros += int((w == 0).sum())
            total += w.numel()
    if total == 0:
        raise ValueError("the model has no Conv/Linear weights")
    return zeros / total


def prune_channels(model: nn.Module, amount: float, channel_fn=None) -> nn.Module:
    """A smaller dense copy of ``model`` with the fraction ``amount`` of output channels removed
    from every Conv2d whose output feeds another conv or linear layer.

    Channels are chosen per layer by the L2 norm of their filters (``prune.ln_structured``); the
    conv, its normalisation layer and the next layer's inputs are rebuilt with fewer channels.
    At least one channel stays; with GroupNorm the kept count is a multiple of its groups.
    Supports greenlab's ``"cnn"`` models (``features`` + ``head``) and plain ``nn.Sequential``
    nets of Conv2d, BatchNorm2d/GroupNorm, pooling, activations, Flatten and Linear layers.

    ``channel_fn(conv, next_layer, keep) -> (new_conv, new_next, kept)`` (e.g. a learner's
    ``channel_prune``; sorted kept indices) chooses and slices a conv and the layer that reads its
    channels wherever that layer is a plain Conv2d, or a Linear reading one value per channel,
    with no GroupNorm or depthwise conv between; elsewhere the L2 choice above applies.
    """
    amount = _check_amount(amount)
    if channel_fn is not None and not callable(channel_fn):
        raise ValueError(f"channel_fn must be a function (conv, next_layer, keep), got {channel_fn!r}")
    pruned = copy.deepcopy(model)
    leaves = _chain_leaves(pruned)
    pending = None  # indices of the channels kept so far, or None when unchanged
    channels = None  # channel count reaching the current layer before pruning
    replaced = {}  # leaf index -> the consumer layer channel_fn already sliced
    for i, (parent, name, module) in enumerate(leaves):
        if i in replaced:  # already sliced on its inputs; its own outputs may still be pruned
            module, pending = replaced.pop(i), None
        if isinstance(module, nn.Conv2d) and channel_fn is not None and pending is None \
                and module.groups == 1 and amount > 0 and _consumer(leaves, i) is not None:
            j = _consumer(leaves, i)
            n = module.out_channels
            keep = max(1, n - int(round(amount * n)))
            module, replaced[j], kept = channel_fn(module, leaves[j][2], keep)
            channels = n
            pending = torch.as_tensor(kept, dtype=torch.long).flatten().sort().values
        elif isinstance(module, nn.Conv2d):
            if _is_depthwise(module):
                if pending is not None:
                    module = _slice_depthwise(module, pending)
            else:
                if pending is not None:
                    module = _slice_conv(module, inputs=pending)
                    pending = None
                channels = module.out_channels
                groups = _lookahead(leaves, i) if module.groups == 1 else None
                if groups is not None and amount > 0:
                    keep = _choose_channels(module, amount, groups)
                    module = _slice_conv(module, outputs=keep)
                    pending = keep
        elif isinstance(module, nn.BatchNorm2d) and pending is not None:
            module = _slice_batchnorm(module, pending)
        elif isinstance(module, nn.GroupNorm) and pending is not None:
            module = _slice_groupnorm(module, pending)
        elif isinstance(module, nn.Linear):
            if pending is not None:
                module = _slice_linear_inputs(module, pending, channels)
                pending = None
        setattr(parent, name, module)
        leaves[i] = (parent, name, module)
    return pruned


# --- quantisation ------------------------------------------------------------------------

def quantize_dynamic(model: nn.Module, dtype=torch.qint8) -> nn.Module:
    """A copy of ``model`` (on the CPU, eval mode) with every ``nn.Linear`` replaced by an int8
    dynamically quantised one: weights stored as int8, activations quantised on the fly.
    Convolutions stay float (dynamic quantisation covers Linear/RNN layers only)."""
    from torch.ao import quantization as tq

    if not any(isinstance(m, nn.Linear) for m in model.modules()):
        raise ValueError("quantize_dynamic needs at least one nn.Linear layer; for conv nets use "
                         "quantize_static(model, calibration_batches)")
    work = copy.deepcopy(model).cpu().eval()
    with _quiet_quantization():
        return tq.quantize_dynamic(work, {nn.Linear}, dtype=dtype)


def quantize_static(model: nn.Module, calibration_batches, backend: str | None = None,
                    max_batches: int = 10) -> nn.Module:
    """A copy of ``model`` (CPU, eval) with weights and activations in int8, by FX graph mode
    post-training quantisation: trace, insert observers, run up to ``max_batches`` calibration
    batches (tensors or (x, y) pairs) to record activation ranges, convert.

    ``backend``: a quantised engine from ``torch.backends.quantized.supported_engines`` ("x86",
    "fbgemm", "qnnpack", "onednn"); None uses the current engine. Models that torch.fx cannot
    trace (data-dependent control flow) raise ValueError.
    """
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    backend = backend or torch.backends.quantized.engine
    if backend not in engines:
        raise ValueError(f"backend must be one of {engines}, got {backend!r}")
    if not isinstance(max_batches, int) or max_batches < 1:
        raise ValueError(f"max_batches must be a positive integer, got {max_batches!r}")
    batches = []
    for batch in calibration_batches:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        if not isinstance(x, torch.Tensor):
            raise ValueError("calibration_batches must yield tensors or (x, y) pairs")
        batches.append(x.detach().cpu().float())
        if len(batches) >= max_batches:
            break
    if not batches:
        raise ValueError("calibration_batches is empty; give at least one batch of inputs")
    work = copy.deepcopy(model).cpu().eval()
    with _quiet_quantization():
        try:
            prepared = prepare_fx(work, get_default_qconfig_mapping(backend), (batches[0],))
        except Exception as exc:  # torch.fx raises several error types when tracing fails
            raise ValueError(f"quantize_static could not trace {type(model).__name__} with torch.fx "
                             f"({type(exc).__name__}: {exc}); use quantize_dynamic instead") from exc
        with torch.no_grad():
            for x in batches:
                prepared(x)
        return convert_fx(prepared)


def model_size_bytes(model: nn.Module) -> int:
    """Size in bytes of the model's serialised ``state_dict`` (``torch.save`` to memory)."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getbuffer().nbytes


# --- distillation and transfer learning ---------------------------------------------------

def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      targets: torch.Tensor, temperature: float = 4.0, alpha: float = 0.5) -> torch.Tensor:
    """Hinton et al. (2015) loss: ``alpha * T^2 * KL(softmax(t/T) || softmax(s/T))
    + (1 - alpha) * cross_entropy(s, targets)``. The T^2 keeps the soft term's gradients on the
    same scale as the hard term's when T changes."""
    temperature = validation.number("temperature", temperature, low=0, high=1e3, low_open=True)
    alpha = validation.number("alpha", alpha, low=0, high=1)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.log_softmax(teacher_logits / temperature, dim=1),
                    reduction="batchmean", log_target=True)
    hard = F.cross_entropy(student_logits, targets)
    return alpha * temperature ** 2 * soft + (1.0 - alpha) * hard


@dataclass
class DistillResult:
    """A distillation run: the trained student, time (s), energy (J) and per-step history."""

    student: nn.Module
    steps: int
    samples: int
    seconds: float
    joules: float
    accuracy: float | None
    teacher_accuracy: float | None
    energy: object  # greenlab.energy Measurement (with sources and whether it is an estimate)
    history: list = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"steps": self.steps, "samples": self.samples, "seconds": self.seconds,
                "joules": self.joules, "accuracy": self.accuracy,
                "teacher_accuracy": self.teacher_accuracy, "energy": self.energy.to_dict(),
                "history": list(self.history), "config": dict(self.config)}


def distill(teacher: nn.Module, student: nn.Module, data, config=None, temperature: float = 4.0,
            alpha: float = 0.5, device=None, loss_fn=None) -> DistillResult:
    """Train a copy of ``student`` to match ``teacher``'s softened outputs and the labels.

    ``data``: a greenlab ``Dataset`` (``train_x``/``train_y``, tested on ``test_x``/``test_y``).
    ``config``: a ``TrainConfig`` (uses ``batch_size``, ``lr``, ``epochs``, ``max_steps``, ``seed``)
    or None for defaults. The teacher runs in eval mode without gradients; the whole loop,
    teacher forward passes included, is one ``greenlab.energy.measure`` window.
    ``loss_fn(student_logits, teacher_logits, targets, temperature, alpha)``: the loss to train
    with (default ``distillation_loss``), e.g. a learner's own.
    """
    from greenlab.training.data import DeviceLoader

    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    loss_of = distillation_loss if loss_fn is None else loss_fn
    if not callable(loss_of):
        raise ValueError(f"loss_fn must be a function, got {loss_fn!r}")
    opts = _loop_options(config)
    dev = torch.device(device) if device is not None else _model_device(teacher)
    teacher_was_training = teacher.training
    teacher = teacher.to(dev).eval()
    student = copy.deepcopy(student).to(dev).train()
    torch.manual_seed(opts["seed"])
    optimizer = torch.optim.SGD(student.parameters(), lr=opts["lr"], momentum=0.9)
    loader = DeviceLoader(data.train_x, data.train_y, opts["batch_size"], shuffle=True,
                          device=dev, seed=opts["seed"])
    history, step, samples = [], 0, 0
    window = _measure("distill")
    with window:
        for _epoch in range(opts["epochs"]):
            for xb, yb in loader:
                with torch.no_grad():
                    teacher_logits = teacher(xb)
                loss = loss_of(student(xb), teacher_logits, yb, float(temperature), float(alpha))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                step += 1
                samples += xb.shape[0]
                history.append({"step": step, "samples": samples, "loss": float(loss.detach())})
                if opts["max_steps"] is not None and step >= opts["max_steps"]:
                    break
            if opts["max_steps"] is not None and step >= opts["max_steps"]:
                break
    result = window.result
    student.eval()
    teacher_accuracy = _accuracy(teacher, data, dev)
    teacher.train(teacher_was_training)
    return DistillResult(student=student, steps=step, samples=samples, seconds=result.seconds,
                         joules=result.joules, accuracy=_accuracy(student, data, dev),
                         teacher_accuracy=teacher_accuracy, energy=result, history=history,
                         config={**opts, "temperature": float(temperature), "alpha": float(alpha)})


def fine_tune(model: nn.Module, new_num_classes: int, freeze_features: bool = True) -> nn.Module:
    """A copy of ``model`` with a fresh classification head for ``new_num_classes`` classes
    (the last ``nn.Linear`` is replaced). ``freeze_features=True`` sets ``requires_grad=False``
    on every other parameter, so only the head trains (normalisation statistics still update
    in train mode; call ``.eval()`` on the features to freeze those too)."""
    if isinstance(new_num_classes, bool) or not isinstance(new_num_classes, int) or new_num_classes < 2:
        raise ValueError(f"new_num_classes must be an integer >= 2, got {new_num_classes!r}")
    adapted = copy.deepcopy(model)
    last = None
    for name, module in adapted.named_modules():
        if isinstance(module, nn.Linear):
            last = name
    if last is None:
        raise ValueError(f"{type(model).__name__} has no nn.Linear head to replace")
    parent, attr = _parent_of(adapted, last)
    old = getattr(parent, attr)
    head = nn.Linear(old.in_features, new_num_classes, bias=old.bias is not None)
    head.to(device=old.weight.device, dtype=old.weight.dtype)
    setattr(parent, attr, head)
    if freeze_features:
        for p in adapted.parameters():
            p.requires_grad = False
        for p in head.parameters():
            p.requires_grad = True
    return adapted


# --- does it pay back? ---------------------------------------------------------------------

@dataclass
class InferenceCost(MeasuredFlags):
    """Cost of inference per sample: seconds and joules (from one ``measure`` window over all
    repeats), the median seconds per batch over the repeats, the window's provenance and
    whether it was still too short to read (``short_window``; show ``flag`` beside it)."""

    seconds_per_sample: float
    joules_per_sample: float
    median_seconds_per_batch: float
    batch_size: int
    repeats: int
    energy: object  # greenlab.energy Measurement: estimated / complete / problems / sources
    short_window: bool = False  # the window stayed too short to read even at max_repeats

    @property
    def flag(self) -> str:
        """"" or the mark every table showing this figure carries: " (short window)"."""
        return " (short window)" if self.short_window else ""

    def to_dict(self) -> dict:
        return {"seconds_per_sample": self.seconds_per_sample, "short_window": self.short_window,
                "joules_per_sample": self.joules_per_sample,
                "median_seconds_per_batch": self.median_seconds_per_batch,
                "batch_size": self.batch_size, "repeats": self.repeats,
                **self.flags(), "energy": self.energy.to_dict()}


def energy_per_inference(model: nn.Module, x: torch.Tensor, repeats: int = 20,
                         warmup: int = 2, max_repeats: int = 5000) -> InferenceCost:
    """Run ``model(x)`` ``repeats`` times (after ``warmup`` untimed runs) in eval mode without
    gradients inside one energy window; report seconds and joules per sample. While the
    energy library flags the window as too short to read (``ShortWindowWarning``), the passes
    are doubled and measured again, up to ``max_repeats``; a figure still from a short window
    says so (``short_window=True``, and "short window" in ``to_dict``)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[0] < 1:
        raise ValueError("x must be a batch tensor with at least one sample")
    max_repeats = validation.integer("max_repeats", max_repeats, low=repeats)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for _ in range(warmup):
                model(x)
            r, times, repeats, short = _timed_window(model, x, repeats, max_repeats)
    finally:
        model.train(was_training)
    n = repeats * x.shape[0]
    return InferenceCost(seconds_per_sample=r.seconds / n, joules_per_sample=r.joules / n,
                         median_seconds_per_batch=statistics.median(times), batch_size=x.shape[0],
                         repeats=repeats, energy=r, short_window=short)


def _timed_window(model, x, repeats: int, max_repeats: int):
    """One energy window over ``repeats`` forward passes (per-pass times kept), doubling the
    passes and measuring again while the library flags the window as too short, up to
    ``max_repeats``. Returns (Measurement, per-pass seconds, passes, still_short)."""
    from greenlab.energy import ShortWindowWarning

    while True:
        times = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ShortWindowWarning)
            window = _measure("inference")
            with window:
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    model(x)
                    _sync(x)
                    times.append(time.perf_counter() - t0)
        short = any(issubclass(w.category, ShortWindowWarning) for w in caught)
        for w in caught:  # pass on everything but the short-window warnings this loop handles
            if not issubclass(w.category, ShortWindowWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if not short or repeats >= max_repeats:
            return window.result, times, repeats, short
        repeats = min(2 * repeats, max_repeats)


@dataclass
class SpeedComparison:
    """Inference timings of several models on the same batch, measured in interleaved rounds
    (one forward pass of each model per round), so background load hits all of them alike.
    ``median_seconds``: per model, median seconds per batch; ``ratios``: per model, median over
    rounds of (its time / the baseline's time in the same round); ``round_ratios``: those
    per-round ratios, the spread ``verdict`` reads."""

    median_seconds: dict
    ratios: dict
    baseline: str
    rounds: int
    batch_size: int
    round_ratios: dict = field(default_factory=dict)

    def verdict(self, name: str) -> str:
        """``name``'s time against the baseline's, in words, with its spread: "faster" or "slower"
        only when the middle half of the rounds' ratios (quartiles) lies on one side of 1,
        otherwise "no clear difference". Timings on a shared machine are noisy: show this,
        don't assert on it."""
        if name not in self.ratios:
            raise ValueError(f"name must be one of {list(self.ratios)}, got {name!r}")
        ratios = self.round_ratios.get(name, [])
        median = self.ratios[name]
        if len(ratios) < 4:
            return (f"{median:.2f}x the time of {self.baseline} (median of {len(ratios) or self.rounds} "
                    "rounds; too few rounds to tell a difference from noise)")
        low, _, high = statistics.quantiles(ratios, n=4)
        spread = f"median {median:.2f}x the time of {self.baseline}, middle half of {len(ratios)} rounds {low:.2f}-{high:.2f}x"
        if high < 1:
            return f"faster than {self.baseline}: {spread}"
        if low > 1:
            return f"slower than {self.baseline}: {spread}"
        return f"no clear difference from {self.baseline}: {spread}"

    def table(self) -> str:
        lines = [f"{'model':<20} {'median ms/batch':>16} {'x ' + self.baseline:>14}"]
        for name, seconds in self.median_seconds.items():
            lines.append(f"{name:<20} {seconds * 1000:>16.2f} {self.ratios[name]:>14.2f}")
        lines.append(f"(median of {self.rounds} interleaved rounds, batch of {self.batch_size}; "
                     "time.perf_counter)")
        return "\n".join(lines)


def compare_inference_speed(variants: dict, x: torch.Tensor, rounds: int = 25, warmup: int = 3,
                            baseline: str | None = None) -> SpeedComparison:
    """Time ``model(x)`` for each model in ``variants`` (name -> model) in eval mode without
    gradients, over ``rounds`` interleaved rounds after ``warmup`` untimed passes each.
    ``baseline``: the name the ratios are relative to (default: the first)."""
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict of name -> model")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    baseline = baseline if baseline is not None else next(iter(variants))
    if baseline not in variants:
        raise ValueError(f"baseline must be one of {list(variants)}, got {baseline!r}")
    modes = {name: m.training for name, m in variants.items()}
    times = {name: [] for name in variants}
    try:
        with torch.inference_mode():
            for m in variants.values():
                m.eval()
                for _ in range(warmup):
                    m(x)
            for _ in range(rounds):
                for name, m in variants.items():
                    t0 = time.perf_counter()
                    m(x)
                    _sync(x)
                    times[name].append(time.perf_counter() - t0)
    finally:
        for name, m in variants.items():
            m.train(modes[name])
    base = times[baseline]
    round_ratios = {name: [t / b for t, b in zip(ts, base)] for name, ts in times.items()}
    ratios = {name: statistics.median(rs) for name, rs in round_ratios.items()}
    return SpeedComparison(median_seconds={n: statistics.median(ts) for n, ts in times.items()},
                           ratios=ratios, baseline=baseline, rounds=rounds, batch_size=x.shape[0],
                           round_ratios=round_ratios)

def joules_text(joules: float) -> str:
    """Energy in words a reader takes in: "0.213 mJ", "4.1 J", "3.6 kJ" (three significant figures)."""
    from greenlab.base.units import format_energy

    joules = validation.number("joules", joules)
    if 0 < abs(joules) < 1:
        return f"{joules * 1e3:.3g} mJ" if abs(joules) >= 1e-3 else f"{joules * 1e6:.3g} µJ"
    return format_energy(joules)


@dataclass
class BreakEven:
    """When a one-off cost (joules) is repaid by a per-use saving measured in paired rounds.

    ``saving``: mean per-use saving (joules; before - after) over ``rounds`` paired rounds,
    ``low``/``high`` its 95% t-interval (None with fewer than 3 rounds). ``uses``/``uses_low``/
    ``uses_high``: the break-even count at the mean saving and across the interval, stated only
    when the whole interval is a saving (``detectable``); otherwise None: with a saving that may
    be zero or negative the honest break-even is "possibly never"."""

    one_off_joules: float
    saving: float
    low: float | None
    high: float | None
    rounds: int
    what: str = "use"

    @property
    def detectable(self) -> bool:
        """True when the interval of the per-use saving lies above zero."""
        return self.low is not None and self.low > 0

    @property
    def costs_more(self) -> bool:
        """True when the interval lies below zero: each use costs more, it never pays back."""
        return self.high is not None and self.high < 0

    def _count(self, saving) -> int:
        if self.one_off_joules == 0:
            return 0
        n = self.one_off_joules / saving
        return math.ceil(n - 1e-9 * n)

    @property
    def uses(self) -> int | None:
        return self._count(self.saving) if self.detectable else None

    @property
    def uses_low(self) -> int | None:
        return self._count(self.high) if self.detectable else None

    @property
    def uses_high(self) -> int | None:
        return self._count(self.low) if self.detectable else None

    def sentence(self) -> str:
        """The break-even in words, following the verdict on the saving."""
        format_energy = joules_text
        once = format_energy(self.one_off_joules)
        if self.low is None:
            return (f"{once} spent once; {self.rounds} paired round(s) are too few for an interval on "
                    f"the saving per {self.what}, so no break-even is stated")
        if self.detectable:
            return (f"{once} spent once is repaid after about {self.uses:,} {self.what}s "
                    f"(95% interval {self.uses_low:,}-{self.uses_high:,}; saving per {self.what} "
                    f"{format_energy(self.saving)}, {self.rounds} paired rounds)")
        if self.costs_more:
            return (f"{once} spent once is never repaid: each {self.what} costs more "
                    f"({format_energy(-self.saving)} more on average, {self.rounds} paired rounds)")
        return (f"{once} spent once; no detectable saving per {self.what} over {self.rounds} paired "
                f"rounds (the interval includes zero), so no break-even to report: it may never be repaid")

    def to_dict(self) -> dict:
        return {"one_off_joules": self.one_off_joules, "saving": self.saving, "low": self.low,
                "high": self.high, "rounds": self.rounds, "what": self.what,
                "detectable": self.detectable, "uses": self.uses, "uses_low": self.uses_low,
                "uses_high": self.uses_high}


def break_even_interval(one_off_joules: float, before, after, what: str = "use") -> BreakEven:
    """The break-even of a one-off cost (joules) from paired per-round figures: ``before[i]`` and
    ``after[i]`` are the joules per use of the old and new model in round i (measured side by
    side, so shared noise cancels in the difference). See ``BreakEven``."""
    from greenlab.experiments import summarize

    one_off_joules = validation.number("one_off_joules", one_off_joules, low=0)
    before, after = list(before), list(after)
    if len(before) != len(after) or not before:
        raise ValueError(f"before and after need the same number of rounds (>= 1), got "
                         f"{len(before)} and {len(after)}")
    diffs = [validation.number("before", b) - validation.number("after", a) for b, a in zip(before, after)]
    stat = summarize(diffs)
    low = high = None
    if stat.ci95 is not None and len(diffs) >= 3:
        low, high = stat.mean - stat.ci95, stat.mean + stat.ci95
    return BreakEven(one_off_joules, stat.mean, low, high, len(diffs), validation.text("what", what))


@dataclass
class InferenceComparison(PooledFlags):
    """Inference of several models measured side by side: ``rounds`` interleaved rounds, each
    giving every model one energy window (in a rotating order), so background load and drift hit
    all of them alike. Per model: ``joules`` (joules per sample, one per round), ``seconds``
    (median seconds per batch within each round's window), ``short`` (rounds whose window
    stayed too short to read) and ``windows`` (each round's ``Measurement``, from which
    ``estimated``, ``complete``, ``problems`` and ``sources`` are read). Every figure of one
    table comes from one such comparison."""

    names: list
    joules: dict
    seconds: dict
    short: dict
    baseline: str
    rounds: int
    batch_size: int
    windows: dict  # name -> one greenlab.energy Measurement per round

    def measurements(self) -> list:
        """(label, Measurement) of every window: "name round r"."""
        return [(f"{name} round {r + 1}", m) for name in self.names
                for r, m in enumerate(self.windows[name])]

    def _check(self, name):
        if name not in self.joules:
            raise ValueError(f"name must be one of {self.names}, got {name!r}")

    def joules_per_sample(self, name: str) -> float:
        """Median over the rounds of ``name``'s joules per sample."""
        self._check(name)
        return statistics.median(self.joules[name])

    def seconds_per_batch(self, name: str) -> float:
        """Median over the rounds of ``name``'s median seconds per batch."""
        self._check(name)
        return statistics.median(self.seconds[name])

    def flag(self, name: str) -> str:
        """" (short window)" when any of ``name``'s windows stayed too short to read, else ""."""
        self._check(name)
        return " (short window)" if any(self.short[name]) else ""

    def verdict(self, name: str, metric: str = "joules"):
        """``name`` against the baseline, paired by round: a ``greenlab.experiments.Paired`` on
        the per-round ratios of ``metric`` ("joules" per sample or "seconds" per batch)."""
        from greenlab.experiments import paired

        self._check(name)
        if metric not in ("joules", "seconds"):
            raise ValueError(f"metric must be 'joules' or 'seconds', got {metric!r}")
        values = self.joules if metric == "joules" else self.seconds
        return paired(values[name], values[self.baseline], metric, name, self.baseline)

    def break_even(self, name: str, one_off_joules: float, baseline: str | None = None) -> BreakEven:
        """How many inferences of ``name`` repay ``one_off_joules`` against ``baseline``
        (default: the comparison's baseline), from the paired per-round energies."""
        self._check(name)
        base = self.baseline if baseline is None else baseline
        self._check(base)
        return break_even_interval(one_off_joules, self.joules[base], self.joules[name], what="prediction")

    def table(self) -> str:
        """Median time per batch and energy per sample, with each model's paired energy verdict."""
        format_energy = joules_text
        lines = [f"{'model':<20} {'ms/batch':>9} {'energy/image':>13}  energy vs {self.baseline}"]
        for name in self.names:
            verdict = "-" if name == self.baseline else self.verdict(name).short()
            lines.append(f"{name:<20} {self.seconds_per_batch(name) * 1e3:>9.2f} "
                         f"{format_energy(self.joules_per_sample(name)):>13}  {verdict}{self.flag(name)}")
        kind = "estimate" if self.estimated else "measured"
        lines.append(f"(medians of {self.rounds} interleaved rounds, batch of {self.batch_size}; "
                     f"energy {kind}, sources {self.sources})")
        if self.problems:
            lines.append("energy INCOMPLETE (lower bounds): " + "; ".join(self.problems))
        return "\n".join(lines)


def compare_inference(variants: dict, x: torch.Tensor, rounds: int = 5, repeats: int = 10,
                      warmup: int = 2, baseline: str | None = None,
                      max_repeats: int = 5000) -> InferenceComparison:
    """Measure ``model(x)`` for each model of ``variants`` (name -> model) in ``rounds``
    interleaved rounds: each round runs every model, in an order rotated round by round, inside
    its own energy window of ``repeats`` passes (doubled while the window is too short to read,
    up to ``max_repeats``; the count found is kept for later rounds). Eval mode, no gradients.
    ``baseline``: the name verdicts and break-evens compare against (default: the first)."""
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict of name -> model")
    rounds = validation.integer("rounds", rounds, low=1)
    repeats = validation.integer("repeats", repeats, low=1)
    warmup = validation.integer("warmup", warmup, low=0)
    max_repeats = validation.integer("max_repeats", max_repeats, low=repeats)
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[0] < 1:
        raise ValueError("x must be a batch tensor with at least one sample")
    names = list(variants)
    baseline = names[0] if baseline is None else baseline
    if baseline not in variants:
        raise ValueError(f"baseline must be one of {names}, got {baseline!r}")
    modes = {name: m.training for name, m in variants.items()}
    passes = {name: repeats for name in names}
    joules = {name: [] for name in names}
    seconds = {name: [] for name in names}
    short = {name: [] for name in names}
    windows = {name: [] for name in names}
    try:
        with torch.inference_mode():
            for m in variants.values():
                m.eval()
                for _ in range(warmup):
                    m(x)
            for r in range(rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    result, times, passes[name], is_short = _timed_window(
                        variants[name], x, passes[name], max_repeats)
                    joules[name].append(result.joules / (passes[name] * x.shape[0]))
                    seconds[name].append(statistics.median(times))
                    short[name].append(is_short)
                    windows[name].append(result)
    finally:
        for name, m in variants.items():
            m.train(modes[name])
    return InferenceComparison(names=names, joules=joules, seconds=seconds, short=short,
                               baseline=baseline, rounds=rounds, batch_size=x.shape[0], windows=windows)



def break_even_inferences(compression_joules: float, joules_per_inference_before: float,
                          joules_per_inference_after: float) -> float:
    """How many inferences the compressed model must serve before the energy spent compressing
    it (pruning, fine-tuning, distilling; joules) is paid back: the smallest whole n with
    ``n * (before - after) >= compression_joules``. ``math.inf`` when it never pays back
    (the compressed model does not use less energy per inference)."""
    values = {"compression_joules": compression_joules,
              "joules_per_inference_before": joules_per_inference_before,
              "joules_per_inference_after": joules_per_inference_after}
    for label, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise ValueError(f"{label} must be a finite number >= 0 (joules), got {value!r}")
    saving = joules_per_inference_before - joules_per_inference_after
    if compression_joules == 0:
        return 0
    if saving <= 0:
        return math.inf
    n = compression_joules / saving
    return math.ceil(n - 1e-9 * n)  # 1e-9: so 1.0 / (0.3 - 0.1) counts 5, not 6


# --- the techniques one tensor at a time (the lesson's exercises' reference answers) ----------

def fine_grained_prune(weight: torch.Tensor, sparsity: float):
    """Magnitude pruning of one tensor: ``(pruned, mask)``, where ``mask`` (bool, same shape) is
    False for the ``round(sparsity * numel)`` entries of smallest absolute value (ties broken by
    torch's ``topk``) and ``pruned = weight * mask``. ``weight`` itself is left untouched.
    Through ``torch.nn.utils.prune.L1Unstructured``."""
    if not isinstance(weight, torch.Tensor) or weight.numel() == 0:
        raise ValueError("weight must be a non-empty torch.Tensor")
    sparsity = validation.number("sparsity (a fraction of entries to zero)", sparsity, low=0, high=1)
    w = weight.detach()
    mask = prune.L1Unstructured(amount=sparsity).compute_mask(w, default_mask=torch.ones_like(w))
    mask = mask.bool()
    return w * mask, mask


def channel_prune(conv: nn.Conv2d, next_layer: nn.Module, keep: int):
    """Keep the ``keep`` output channels of ``conv`` whose filters have the largest L1 norm:
    ``(new_conv, new_next, kept)``, with ``kept`` the sorted indices of the kept channels,
    ``new_conv`` holding only those filters (and biases) and ``new_next`` (a Conv2d or a Linear
    that reads ``conv``'s channels directly) only the matching input channels. On the kept
    channels ``new_conv``'s output equals ``conv``'s. Channels chosen with
    ``torch.nn.utils.prune.ln_structured(n=1)``; the layers passed in are left untouched."""
    if not isinstance(conv, nn.Conv2d) or conv.groups != 1:
        raise ValueError("conv must be an nn.Conv2d with groups=1")
    if not isinstance(next_layer, (nn.Conv2d, nn.Linear)):
        raise ValueError(f"next_layer must be an nn.Conv2d or nn.Linear, got {type(next_layer).__name__}")
    inputs = next_layer.in_channels if isinstance(next_layer, nn.Conv2d) else next_layer.in_features
    if inputs != conv.out_channels or getattr(next_layer, "groups", 1) != 1:
        raise ValueError(f"next_layer must read conv's {conv.out_channels} channels directly, "
                         f"it reads {inputs}")
    keep = validation.integer("keep (output channels to keep)", keep, low=1, high=conv.out_channels)
    n = conv.out_channels
    if keep == n:
        kept = torch.arange(n)
    else:
        probe = nn.Conv2d(conv.in_channels, n, conv.kernel_size, bias=False)
        probe.weight.data.copy_(conv.weight.detach().cpu())
        prune.ln_structured(probe, "weight", amount=n - keep, n=1, dim=0)
        kept = torch.nonzero(probe.weight_mask.flatten(1).amax(dim=1), as_tuple=False).flatten()
    new_conv = _slice_conv(conv, outputs=kept)
    if isinstance(next_layer, nn.Conv2d):
        new_next = _slice_conv(next_layer, inputs=kept)
    else:
        new_next = _slice_linear_inputs(next_layer, kept, n)
    return new_conv, new_next, kept


def quantization_range(bits: int) -> tuple:
    """(qmin, qmax) of signed ``bits``-bit integers: (-2^(bits-1), 2^(bits-1) - 1)."""
    bits = validation.integer("bits", bits, low=2, high=8)
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def linear_quantize(weight: torch.Tensor, bits: int = 8, per_channel: bool = False):
    """Asymmetric (affine) linear quantisation to signed ``bits``-bit integers:
    ``(q, scale, zero_point)`` with ``weight ~ scale * (q - zero_point)``. The range
    [min(w, 0), max(w, 0)] maps onto [qmin, qmax]; ``scale = range / (qmax - qmin)``,
    ``zero_point = qmin - round(min / scale)``, ``q = clamp(round(w / scale) + zero_point)``.
    ``per_channel``: one scale and zero point per row (dim 0, an output channel), else one
    for the tensor. ``q`` is int32; scale float32 and zero_point int32 (shape () or (rows,)).
    Parameters from torch's min/max observers, integers from ``torch.quantize_per_tensor`` /
    ``quantize_per_channel`` at 8 bits and ``torch.fake_quantize_per_*_affine`` below."""
    from torch.ao.quantization.observer import MinMaxObserver, PerChannelMinMaxObserver

    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point() or weight.numel() == 0:
        raise ValueError("weight must be a non-empty floating-point torch.Tensor")
    qmin, qmax = quantization_range(bits)
    validation.flag("per_channel", per_channel)
    w = weight.detach().float().cpu()
    if per_channel and w.dim() < 1:
        raise ValueError("per_channel quantisation needs a tensor with at least one dimension")
    with _quiet_quantization():
        if per_channel:
            observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, quant_min=qmin, quant_max=qmax,
                                                qscheme=torch.per_channel_affine)
        else:
            observer = MinMaxObserver(dtype=torch.qint8, quant_min=qmin, quant_max=qmax,
                                      qscheme=torch.per_tensor_affine)
        observer(w)
        scale, zero_point = observer.calculate_qparams()
        scale, zero_point = scale.float(), zero_point.int()
        if per_channel:
            if bits == 8:
                q = torch.quantize_per_channel(w, scale.double(), zero_point.long(), 0, torch.qint8).int_repr()
            else:
                fq = torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, qmin, qmax)
                shape = (-1,) + (1,) * (w.dim() - 1)
                q = torch.round(fq / scale.view(shape)) + zero_point.view(shape)
        else:
            scale, zero_point = scale.reshape(()), zero_point.reshape(())
            if bits == 8:
                q = torch.quantize_per_tensor(w, float(scale), int(zero_point), torch.qint8).int_repr()
            else:
                fq = torch.fake_quantize_per_tensor_affine(w, float(scale), int(zero_point), qmin, qmax)
                q = torch.round(fq / scale) + zero_point
    return q.to(torch.int32), scale, zero_point


def dequantize(q: torch.Tensor, scale, zero_point) -> torch.Tensor:
    """Float values ``scale * (q - zero_point)`` of integers from ``linear_quantize``; a scale
    and zero point of shape (rows,) apply per row (dim 0)."""
    scale = torch.as_tensor(scale, dtype=torch.float32)
    zero_point = torch.as_tensor(zero_point, dtype=torch.float32)
    if scale.dim() == 1 and q.dim() >= 1:
        shape = (-1,) + (1,) * (q.dim() - 1)
        scale, zero_point = scale.view(shape), zero_point.view(shape)
    return scale * (q.float() - zero_point)


def fake_quantize(weight: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Per-tensor fake quantisation for quantisation-aware training: the forward value is
    ``dequantize(*linear_quantize(weight, bits))`` (rounded onto the integer grid and back); the
    gradient passes straight through (the straight-through estimator of Bengio et al., 2013, as
    used by Jacob et al., 2018). Through ``torch.fake_quantize_per_tensor_affine``."""
    _q, scale, zero_point = linear_quantize(weight, bits)
    qmin, qmax = quantization_range(bits)
    return torch.fake_quantize_per_tensor_affine(weight, float(scale), int(zero_point), qmin, qmax)


def prune_with_masks(model: nn.Module, amount: float, prune_fn=None):
    """A copy of ``model`` with the fraction ``amount`` of all conv/linear weights zeroed,
    chosen globally by ``prune_fn(weights, sparsity) -> (pruned, mask)`` (default
    ``fine_grained_prune``) applied to every such weight flattened into one vector; returns
    ``(pruned_model, masks)``, ``masks`` a dict of parameter name -> bool mask, for
    ``keep_masks`` during fine-tuning. Lets a lesson prune a model with a learner's function."""
    validation.module("model", model)
    amount = _check_amount(amount)
    prune_fn = fine_grained_prune if prune_fn is None else prune_fn
    if not callable(prune_fn):
        raise ValueError(f"prune_fn must be a function (weights, sparsity) -> (pruned, mask), got {prune_fn!r}")
    pruned = copy.deepcopy(model)
    params = [(f"{name}.weight", m.weight) for name, m in pruned.named_modules() if isinstance(m, PRUNABLE)]
    if not params:
        raise ValueError("the model has no Conv/Linear layers to prune")
    flat = torch.cat([p.detach().flatten() for _, p in params])
    _values, mask = prune_fn(flat.clone(), amount)
    mask = torch.as_tensor(mask).to(device=flat.device).flatten().bool()
    if mask.numel() != flat.numel():
        raise ValueError(f"prune_fn returned a mask of {mask.numel()} entries for {flat.numel()} weights")
    masks, start = {}, 0
    with torch.no_grad():
        for name, p in params:
            m = mask[start:start + p.numel()].view_as(p)
            p.mul_(m)
            masks[name] = m.clone()
            start += p.numel()
    return pruned, masks


def keep_masks(masks: dict):
    """A ``greenlab.training.loop`` callback that multiplies each masked parameter by its mask after every
    optimizer step, so pruned weights stay exactly zero while a pruned model is fine-tuned."""
    if not isinstance(masks, dict) or not masks:
        raise ValueError("masks must be a non-empty dict of parameter name -> mask")

    def keep(state):
        with torch.no_grad():
            for name, p in state.model.named_parameters():
                if name in masks:
                    p.mul_(masks[name].to(p.device, p.dtype))

    return keep


class _FakeQuantized(nn.Module):
    """A parametrisation: the weight as ``fake_quant(weight, bits)`` sees it."""

    def __init__(self, fake_quant, bits: int):
        super().__init__()
        self.fake_quant, self.bits = fake_quant, bits

    def forward(self, weight):
        return self.fake_quant(weight, self.bits)


def fake_quantized(model: nn.Module, bits: int = 8, fake_quant=None) -> nn.Module:
    """A copy of ``model`` whose conv/linear weights pass through ``fake_quant(weight, bits)``
    (default ``fake_quantize``) on every forward pass, through
    ``torch.nn.utils.parametrize``: evaluated as is, it is post-training weight quantisation;
    trained with ``greenlab.training.loop``, it is quantisation-aware training (the gradient reaches the
    float weights through the straight-through estimator)."""
    from torch.nn.utils import parametrize

    validation.module("model", model)
    qmin, qmax = quantization_range(bits)
    fake_quant = fake_quantize if fake_quant is None else fake_quant
    if not callable(fake_quant):
        raise ValueError(f"fake_quant must be a function (weight, bits) -> tensor, got {fake_quant!r}")
    work = copy.deepcopy(model)
    for m in work.modules():
        if isinstance(m, PRUNABLE):
            parametrize.register_parametrization(m, "weight", _FakeQuantized(fake_quant, bits))
    return work


# --- helpers -------------------------------------------------------------------------------

def _check_amount(amount) -> float:
    return validation.number("amount (a fraction, e.g. 0.5 removes half)", amount, low=0, high=1,
                             high_open=True)


_PASS_THROUGH = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.Hardswish, nn.Tanh,
                 nn.Sigmoid, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d,
                 nn.Dropout, nn.Dropout2d, nn.Identity, nn.Flatten)
_CHANNEL_LAYERS = (nn.Conv2d, nn.BatchNorm2d, nn.GroupNorm, nn.Linear)


def _chain_leaves(model: nn.Module) -> list:
    """(parent, attribute, module) for each layer in forward order, for chain-shaped models."""
    if isinstance(model, nn.Sequential):
        containers = [model]
    elif isinstance(getattr(model, "features", None), nn.Sequential) and isinstance(
            getattr(model, "head", None), nn.Linear) and set(dict(model.named_children())) == {"features", "head"}:
        containers = [model.features, (model, "head")]  # greenlab SmallCNN: features, pool, head
    else:
        raise ValueError(f"prune_channels supports greenlab 'cnn' models and plain nn.Sequential "
                         f"conv nets, not {type(model).__name__} (residual or branching models need "
                         "their channels pruned together)")
    leaves = []
    for c in containers:
        if isinstance(c, tuple):
            leaves.append((c[0], c[1], getattr(*c)))
        else:
            _flatten_sequential(c, leaves)
    return leaves


def _flatten_sequential(seq: nn.Sequential, out: list) -> None:
    for name, child in seq.named_children():
        if isinstance(child, nn.Sequential):
            _flatten_sequential(child, out)
        elif isinstance(child, _CHANNEL_LAYERS) or isinstance(child, _PASS_THROUGH):
            out.append((seq, name, child))
        else:
            raise ValueError(f"prune_channels cannot rebuild layer {type(child).__name__}; supported: "
                             "Conv2d, BatchNorm2d, GroupNorm, Linear, pooling, activations, Flatten, Dropout")


def _is_depthwise(conv: nn.Conv2d) -> bool:
    return conv.groups > 1 and conv.groups == conv.in_channels == conv.out_channels


def _lookahead(leaves: list, i: int):
    """If the output channels of conv ``i`` may be pruned, the group count they must be a multiple
    of (1 without GroupNorm); None when no conv/linear layer consumes them."""
    groups = 1
    for _parent, _name, m in leaves[i + 1:]:
        if isinstance(m, nn.GroupNorm):
            groups = math.lcm(groups, m.num_groups)
        elif isinstance(m, nn.Conv2d):
            if _is_depthwise(m):
                continue
            return groups if m.groups == 1 else None
        elif isinstance(m, nn.Linear):
            return groups
    return None


def _consumer(leaves: list, i: int):
    """Index of the layer reading conv ``i``'s channels when ``channel_fn`` can slice it: a plain
    Conv2d, or a Linear with one input per channel, reached through BatchNorm, activations and
    pooling only; else None."""
    channels = leaves[i][2].out_channels
    for j in range(i + 1, len(leaves)):
        m = leaves[j][2]
        if isinstance(m, nn.Conv2d):
            return j if m.groups == 1 and m.in_channels == channels else None
        if isinstance(m, nn.Linear):
            return j if m.in_features == channels else None
        if isinstance(m, nn.GroupNorm):
            return None
    return None


def _choose_channels(conv: nn.Conv2d, amount: float, groups: int) -> torch.Tensor:
    """Sorted indices of the output channels to keep, by the L2 norm of each filter."""
    n = conv.out_channels
    keep = n - int(round(amount * n))
    keep = max(groups, keep // groups * groups) if groups > 1 else max(1, keep)
    if keep >= n:
        return torch.arange(n)
    probe = nn.Conv2d(conv.in_channels, n, conv.kernel_size, bias=False)
    probe.weight.data.copy_(conv.weight.detach().cpu())
    prune.ln_structured(probe, "weight", amount=n - keep, n=2, dim=0)
    mask = probe.weight_mask.flatten(1).amax(dim=1)
    return torch.nonzero(mask, as_tuple=False).flatten()


def _slice_conv(conv: nn.Conv2d, inputs=None, outputs=None) -> nn.Conv2d:
    w = conv.weight.detach()
    b = conv.bias.detach() if conv.bias is not None else None
    if inputs is not None:
        w = w[:, inputs.to(w.device)]
    if outputs is not None:
        w = w[outputs.to(w.device)]
        b = b[outputs.to(w.device)] if b is not None else None
    new = nn.Conv2d(w.shape[1], w.shape[0], conv.kernel_size, stride=conv.stride, padding=conv.padding,
                    dilation=conv.dilation, groups=1, bias=b is not None, padding_mode=conv.padding_mode)
    return _fill(new, conv, w, b)


def _slice_depthwise(conv: nn.Conv2d, keep: torch.Tensor) -> nn.Conv2d:
    idx = keep.to(conv.weight.device)
    w = conv.weight.detach()[idx]
    b = conv.bias.detach()[idx] if conv.bias is not None else None
    k = len(keep)
    new = nn.Conv2d(k, k, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                    dilation=conv.dilation, groups=k, bias=b is not None, padding_mode=conv.padding_mode)
    return _fill(new, conv, w, b)


def _slice_batchnorm(bn: nn.BatchNorm2d, keep: torch.Tensor) -> nn.BatchNorm2d:
    new = nn.BatchNorm2d(len(keep), eps=bn.eps, momentum=bn.momentum, affine=bn.affine,
                         track_running_stats=bn.track_running_stats)
    new = new.to(device=_any_tensor(bn).device)
    with torch.no_grad():
        idx = keep.to(_any_tensor(bn).device)
        if bn.affine:
            new.weight.copy_(bn.weight[idx])
            new.bias.copy_(bn.bias[idx])
        if bn.track_running_stats:
            new.running_mean.copy_(bn.running_mean[idx])
            new.running_var.copy_(bn.running_var[idx])
            new.num_batches_tracked.copy_(bn.num_batches_tracked)
    new.train(bn.training)
    return new


def _slice_groupnorm(gn: nn.GroupNorm, keep: torch.Tensor) -> nn.GroupNorm:
    new = nn.GroupNorm(gn.num_groups, len(keep), eps=gn.eps, affine=gn.affine)
    if gn.affine:
        new = new.to(device=gn.weight.device, dtype=gn.weight.dtype)
        with torch.no_grad():
            idx = keep.to(gn.weight.device)
            new.weight.copy_(gn.weight[idx])
            new.bias.copy_(gn.bias[idx])
    new.train(gn.training)
    return new


def _slice_linear_inputs(linear: nn.Linear, keep: torch.Tensor, channels_before: int) -> nn.Linear:
    """Keep the input features that come from the kept channels (channel-major flattening)."""
    if linear.in_features % channels_before != 0:
        raise ValueError(f"cannot match Linear in_features={linear.in_features} to {channels_before} "
                         "channels before it")
    spatial = linear.in_features // channels_before
    idx = (keep[:, None] * spatial + torch.arange(spatial)[None, :]).flatten().to(linear.weight.device)
    w = linear.weight.detach()[:, idx]
    new = nn.Linear(w.shape[1], linear.out_features, bias=linear.bias is not None)
    return _fill(new, linear, w, linear.bias.detach() if linear.bias is not None else None)


def _fill(new: nn.Module, old: nn.Module, w: torch.Tensor, b) -> nn.Module:
    new = new.to(device=w.device, dtype=w.dtype)
    with torch.no_grad():
        new.weight.copy_(w)
        if b is not None:
            new.bias.copy_(b)
    new.weight.requires_grad_(old.weight.requires_grad)
    new.train(old.training)
    return new


def _any_tensor(module: nn.Module) -> torch.Tensor:
    for t in list(module.parameters()) + list(module.buffers()):
        return t
    return torch.empty(0)


def _parent_of(model: nn.Module, dotted: str):
    *path, attr = dotted.split(".")
    parent = model
    for part in path:
        parent = getattr(parent, part)
    return parent, attr


class _quiet_quantization(warnings.catch_warnings):
    """Silence torch.ao.quantization's deprecation and observer warnings inside a block."""

    def __enter__(self):
        result = super().__enter__()
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*torch.ao.quantization.*")
        warnings.filterwarnings("ignore", category=UserWarning, message=".*reduce_range will be deprecated.*")
        warnings.filterwarnings("ignore", category=UserWarning, message=".*quantize_per_tensor.*")
        return result


def _measure(label: str):
    """A greenlab.energy measurement window (imported late: energy is a sibling module)."""
    from greenlab.energy import measure

    return measure(label)


def _sync(x: torch.Tensor) -> None:
    if x.is_cuda:
        torch.cuda.synchronize(x.device)


def _model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _loop_options(config) -> dict:
    defaults = {"batch_size": 128, "lr": 0.05, "epochs": 1, "max_steps": None, "seed": 0}
    if config is None:
        return defaults
    opts = {k: getattr(config, k, v) for k, v in defaults.items()}
    if opts["lr"] is None:
        opts["lr"] = defaults["lr"]
    return opts


def _accuracy(model: nn.Module, data, device, batch_size: int = 512) -> float | None:
    x, y = getattr(data, "test_x", None), getattr(data, "test_y", None)
    if x is None or y is None or len(y) == 0:
        return None
    from greenlab.training.accuracy import accuracy

    return accuracy(model, x, y, batch_size=batch_size, device=device)
