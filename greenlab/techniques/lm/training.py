"""Training a language model, measured in joules per token (lessons 10 (10_language_model) and 12
(12_adapting_and_serving)).

``train_lm`` is one ``greenlab.measure`` window around the training steps; each evaluation point in ``history``
carries the cumulative joules, so the energy to reach a validation loss is read off it. ``LMConfig`` says what
one run does, ``LMRun`` what it measured; ``evaluate``, ``make_optimizer``, ``make_scheduler`` and
``train_step`` are its parts, for a loop of one's own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time

import torch
import torch.nn as nn

from greenlab.base import progress, validation
from greenlab.base.interrupts import interrupted_run
from greenlab.base.units import plain_number
from greenlab.base.version import __version__
from greenlab.energy import default_sources, measure
from greenlab.energy.flags import MeasuredFlags
from greenlab.session import config as gl_config
from greenlab.session.devices import synchronize
from greenlab.techniques.lm.corpus import MAX_COUNT, Corpus, _check_tokens, batch
from greenlab.techniques.lm.gpt import _check_language_model, lm_loss
from greenlab.training import optimizers
from greenlab.training.loop import _Meter, provenance

PRECISIONS = ("fp32", "bf16")
LR_SCHEDULES = ("constant", "warmup-cosine")


@dataclasses.dataclass
class LMConfig:
    """One language-model run. ``steps`` optimizer steps of ``batch_size`` windows of ``seq_len``
    bytes (tokens per step = batch_size x seq_len); AdamW at ``lr``; ``fused``: the fused AdamW
    kernel (a tensor's whole update in one kernel; on a CPU one call per tensor, on CUDA one launch
    per group of tensors) instead of the multi-tensor ``foreach`` one this library asks for
    otherwise (PyTorch's own default on a CPU is the per-tensor loop);
    ``precision``: "fp32" or "bf16" (autocast); ``optimizer_states``: "fp32" (torch AdamW) or
    "8bit" (bitsandbytes' AdamW8bit, see ``greenlab.training.optimizers``); evaluation every
    ``eval_every`` steps on ``eval_batches`` fixed validation batches; ``target_loss``: validation loss (nats/byte) whose
    first crossing records time and energy to target; ``stop_at_target``: end the run there.
    ``lr_schedule``: "constant", or "warmup-cosine" (``torch.optim.lr_scheduler``: a linear rise
    over ``warmup_steps`` optimizer steps to ``lr``, then a cosine fall to 0 at ``steps``).
    ``score_batches``: when set, the final model's validation loss on that many fixed batches,
    taken after the energy window (``LMRun.final_val_loss``): one yardstick for runs that evaluate
    differently while they train."""

    seq_len: int = 64
    batch_size: int = 16
    steps: int = 200
    lr: float = 3e-3
    fused: bool = False
    precision: str = "fp32"
    optimizer_states: str = "fp32"
    eval_every: int = 50
    eval_batches: int = 4
    target_loss: float | None = None
    stop_at_target: bool = False
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    score_batches: int | None = None
    seed: int = 0
    label: str = ""

    def __post_init__(self):
        v = validation
        for name in ("seq_len", "batch_size", "steps", "eval_every", "eval_batches"):
            setattr(self, name, v.integer(name, getattr(self, name), low=1, high=MAX_COUNT))
        self.lr = v.number("lr", self.lr, low=0, high=10, low_open=True)
        self.fused = v.flag("fused", self.fused)
        v.choice("precision", self.precision, PRECISIONS)
        v.choice("optimizer_states", self.optimizer_states, ("fp32", "8bit"))
        if self.fused and self.optimizer_states != "fp32":
            raise ValueError("fused applies to fp32 optimizer states only (optimizer_states='fp32')")
        self.target_loss = v.number("target_loss (nats per byte)", self.target_loss, low=0, high=20,
                                    low_open=True, allow_none=True)
        self.stop_at_target = v.flag("stop_at_target", self.stop_at_target)
        if self.stop_at_target and self.target_loss is None:
            raise ValueError("stop_at_target needs a target_loss (nats per byte) to stop at")
        v.choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        self.warmup_steps = v.integer("warmup_steps", self.warmup_steps, low=0, high=self.steps - 1)
        self.score_batches = v.integer("score_batches", self.score_batches, low=1, high=MAX_COUNT, allow_none=True)
        self.seed = v.integer("seed", self.seed, low=0, high=2**63 - 1)
        v.text("label", self.label)
        _check_tokens(self.seq_len, self.batch_size)

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one optimizer step: ``seq_len`` x ``batch_size``."""
        return self.seq_len * self.batch_size


@dataclasses.dataclass
class LMRun(MeasuredFlags):
    """The outcome of ``train_lm``: times in seconds, energy in joules, losses in nats per byte.

    ``history``: one dict per evaluation (step, tokens, seconds, joules, val_loss), cumulative.
    ``joules_to_target``/``seconds_to_target``: at the first evaluation with val_loss <= target.
    ``optimizer_state_bytes``: counted from the optimizer's state tensors after the last step.
    ``steps``/``tokens``: what ran (fewer than asked when the run stopped at its target, status
    "target-reached", or at a ``stop_event``, status "stopped"); ``steps_to_target``: the step of that first crossing; ``final_val_loss``:
    the final model scored on ``config.score_batches`` fixed validation batches (None unless set).
    The attribute names match ``greenlab.training.loop.RunResult`` where they mean the same, so a
    ``greenlab.experiments.Comparison`` can hold these runs (accuracy fields are None)."""

    label: str
    config: dict
    steps: int
    tokens: int
    seconds: float
    joules: float
    val_loss: float
    history: list
    joules_to_target: float | None
    seconds_to_target: float | None
    energy: object  # greenlab.energy.Measurement: estimated / complete / problems / sources
    provenance: dict
    status: str = "completed"
    final_accuracy: float | None = None
    val_accuracy: float | None = None
    co2e_g: float | None = None
    optimizer_state_bytes: int | None = None
    final_val_loss: float | None = None
    steps_to_target: int | None = None

    @property
    def joules_per_token(self) -> float:
        """Energy of the run per training token, joules: the window includes the periodic evaluation
        passes (as ``joules`` does), so this is not training-only energy."""
        return joules_per_token(self.joules, self.tokens)

    @property
    def tokens_per_second(self) -> float:
        """Training tokens over the run's seconds (nan for a run of no time)."""
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def samples_per_second(self) -> float:  # for Comparison: a token is the sample here
        """``tokens_per_second``, under the name a ``Comparison`` reads."""
        return self.tokens_per_second

    def summary(self) -> str:
        """One line: steps, tokens, seconds, joules (and whether estimated), uJ per token, validation loss, and the
        target's time and energy when reached."""
        est = " (estimate)" if self.estimated else ""
        line = (f"{self.label or 'run'}: {self.steps} steps, {self.tokens:,} tokens, {plain_number(self.seconds)} s, "
                f"{plain_number(self.joules, 4)} J{est}, {self.joules_per_token * 1e6:.4g} uJ/token, "
                f"val loss {self.val_loss:.3f}")
        if self.joules_to_target is not None:
            line += (f"; target loss in {plain_number(self.seconds_to_target)} s / "
                     f"{plain_number(self.joules_to_target, 4)} J")
        return line


def _check_model_and_corpus(model, corpus) -> None:
    """TypeError naming ``model`` or ``corpus`` when either is of the wrong kind."""
    _check_language_model(model)
    if next(model.parameters(), None) is None:
        raise ValueError("model has no parameters: expected a greenlab.techniques.lm.gpt.TinyGPT or a model like it")
    validation.instance("corpus", corpus, Corpus,
                        "a greenlab.techniques.lm.corpus.Corpus (greenlab.techniques.lm.corpus.load_corpus())")


def joules_per_token(joules: float, tokens: int) -> float:
    """Energy per token, joules. ``tokens`` must be a positive integer."""
    tokens = validation.integer("tokens", tokens, low=1, high=2**62)
    joules = validation.number("joules", joules, low=0)
    return joules / tokens


def evaluate(model: nn.Module, corpus: Corpus, seq_len: int, batches: int = 4, batch_size: int = 16,
             seed: int = 1234, precision: str = "fp32") -> float:
    """Mean validation loss (nats per byte) on ``batches`` fixed windows of the validation split
    (the same windows for every call with the same arguments)."""
    _check_model_and_corpus(model, corpus)
    batches = validation.integer("batches", batches, low=1, high=MAX_COUNT)
    seed = validation.integer("seed", seed, low=0, high=2**63 - 1)
    validation.choice("precision", precision, PRECISIONS)
    seq_len = validation.integer("seq_len", seq_len, low=1, high=getattr(model, "max_seq_len", MAX_COUNT))
    batch_size = validation.integer("batch_size", batch_size, low=1, high=MAX_COUNT)
    _check_tokens(seq_len, batch_size)
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    total = 0.0
    with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        for _ in range(batches):
            x, y = batch(corpus.val, seq_len, batch_size, g, dev)
            total += float(lm_loss(model, x, y))
    model.train(was_training)
    return total / batches


def make_optimizer(model: nn.Module, config: LMConfig):
    """AdamW over ``model``'s parameters as ``config`` asks: its learning rate, fp32 states
    (the fused or the multi-tensor kernel) or 8-bit states (``greenlab.training.optimizers``)."""
    if config.optimizer_states == "fp32":
        return optimizers.adamw(model.parameters(), config.lr, fused=config.fused or None,
                                foreach=None if config.fused else True)
    return optimizers.adamw(model.parameters(), config.lr, states=config.optimizer_states)


def make_scheduler(optimizer, config: LMConfig):
    """The learning-rate schedule ``config.lr_schedule`` asks for, from ``torch.optim.lr_scheduler``
    (step it once per optimizer step): None for "constant"; for "warmup-cosine" a ``LinearLR`` rise
    from ``lr / warmup_steps`` to ``lr`` over ``warmup_steps`` steps, then a ``CosineAnnealingLR``
    fall to 0 at ``config.steps`` (a ``SequentialLR`` of the two; the cosine alone without warm-up)."""
    from torch.optim import lr_scheduler

    validation.instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    validation.instance("config", config, LMConfig, "a greenlab.techniques.lm.training.LMConfig")
    if config.lr_schedule == "constant":
        return None
    warmup = config.warmup_steps
    cosine = lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.steps - warmup, eta_min=0.0)
    if warmup == 0:
        return cosine
    rise = lr_scheduler.LinearLR(optimizer, start_factor=1.0 / warmup, end_factor=1.0, total_iters=max(1, warmup - 1))
    return lr_scheduler.SequentialLR(optimizer, [rise, cosine], milestones=[warmup])


def train_step(model: nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor, precision: str = "fp32"
               ) -> torch.Tensor:
    """One optimizer step on the batch ``x``, ``y`` ("bf16": the forward pass under autocast);
    returns the loss tensor (not synchronised: reading it waits for the device)."""
    validation.module("model", model)
    validation.instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not any(id(p) in held for p in model.parameters()):
        raise ValueError("optimizer must hold the model's parameters (build it from model.parameters()); "
                         "this one updates none of them")
    validation.tensor("x", x, dims=2, integer=True)
    validation.tensor("y", y, dims=2, integer=True)
    validation.choice("precision", precision, PRECISIONS)
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = lm_loss(model, x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def train_lm(model: nn.Module, corpus: Corpus, config: LMConfig | None = None, device=None,
             sources=None, stop_event=None) -> LMRun:
    """Train ``model`` on ``corpus`` for ``config.steps`` AdamW steps inside one energy window.

    The batches come from a generator seeded with ``config.seed`` (same seed, same batches), and
    the evaluation windows are fixed, so runs differ only in what the config changes.
    ``stop_event`` (a threading.Event): once set, the run ends before its next step, status
    "stopped" (as ``gl.train``'s). Ctrl-C
    closes the window and raises ``gl.Interrupted`` (one line in a notebook set up by
    ``gl.setup()``); the partial run, status "interrupted", is in ``gl.last_interrupted()``."""
    cfg = config if config is not None else LMConfig()
    validation.instance("config", cfg, LMConfig, "a greenlab.techniques.lm.training.LMConfig")
    _check_model_and_corpus(model, corpus)
    if stop_event is not None and not callable(getattr(stop_event, "is_set", None)):
        raise validation.ArgumentTypeError(f"stop_event must be a threading.Event or None, got {stop_event!r}")
    if cfg.seq_len > getattr(model, "max_seq_len", cfg.seq_len):
        raise ValueError(f"seq_len {cfg.seq_len} exceeds the model's max_seq_len {model.max_seq_len}")
    dev = validation.device("device", device) if device is not None else torch.device(gl_config.device())
    if sources is None:
        sources = default_sources(gpus=[dev.index or 0] if dev.type == "cuda" else [])
    model = model.to(dev).train()
    optimizer = make_optimizer(model, cfg)
    scheduler = make_scheduler(optimizer, cfg)
    g = torch.Generator().manual_seed(cfg.seed)
    history, target, step = [], None, 0
    window = measure(cfg.label or "train_lm", sources=sources)
    bar = progress.bar(cfg.steps, cfg.label or "train_lm")
    interrupted = stopped = False
    diverged = None  # why the loss stopped being finite
    with window, contextlib.closing(bar):
        meter = _Meter(sources)
        start = time.perf_counter()
        try:
            for step in range(1, cfg.steps + 1):
                if stop_event is not None and stop_event.is_set():
                    stopped, step = True, step - 1  # the steps that ran
                    break
                lr = optimizer.param_groups[0]["lr"]  # the rate this step uses
                x, y = batch(corpus.train, cfg.seq_len, cfg.batch_size, g, dev)
                loss = train_step(model, optimizer, x, y, cfg.precision)
                if scheduler is not None:
                    scheduler.step()
                bar.update(1)
                if not math.isfinite(loss.item()):
                    diverged = f"training loss became {loss.item()} at step {step}; lower lr"
                    break
                if step % cfg.eval_every == 0 or step == cfg.steps:
                    val = evaluate(model, corpus, cfg.seq_len, cfg.eval_batches, cfg.batch_size,
                                   precision=cfg.precision)
                    synchronize(dev)
                    row = {"step": step, "tokens": step * cfg.tokens_per_step, "lr": lr,
                           "seconds": time.perf_counter() - start, "joules": meter.joules(), "val_loss": val}
                    history.append(row)
                    if target is None and cfg.target_loss is not None and val <= cfg.target_loss:
                        target = row
                        if cfg.stop_at_target:
                            break
        except KeyboardInterrupt:  # Ctrl-C: the window closes, the partial run is kept
            interrupted = True
    result = window.result
    final = None
    if cfg.score_batches is not None and not interrupted and diverged is None:  # after the window: one yardstick for every run
        final = evaluate(model, corpus, cfg.seq_len, cfg.score_batches, cfg.batch_size, precision="fp32")
    status = ("interrupted" if interrupted else "diverged" if diverged else
              "target-reached" if target and cfg.stop_at_target else "stopped" if stopped else "completed")
    run = LMRun(label=cfg.label, config=dataclasses.asdict(cfg), steps=step,
                tokens=step * cfg.tokens_per_step, seconds=result.seconds, joules=result.joules,
                val_loss=history[-1]["val_loss"] if history else math.nan, history=history,
                joules_to_target=target["joules"] if target else None,
                seconds_to_target=target["seconds"] if target else None,
                energy=result.with_problems(meter.problems),
                provenance=provenance(dev, result.sources, __version__), status=status,
                optimizer_state_bytes=optimizers.state_bytes(optimizer),
                final_val_loss=final, steps_to_target=target["step"] if target else None)
    if interrupted:
        raise interrupted_run("greenlab.lm.train_lm", run, cfg.steps)
    if diverged:
        raise Diverged(diverged, run)
    return run


class Diverged(FloatingPointError):
    """``train_lm``'s run whose training loss stopped being finite: ``run`` is the partial LMRun
    (status "diverged"), its energy window closed at that step, so a search that tried the rate
    can count what it cost."""

    def __init__(self, message: str, run: LMRun):
        super().__init__(message)
        self.run = run
