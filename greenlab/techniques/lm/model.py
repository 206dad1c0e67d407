"""A small language model, trained on text every Python installation ships, measured in joules per token.

    corpus = gl.lm.load_corpus()                       # CPython's pydoc topics, bytes, PSF licence
    model = gl.lm.TinyGPT(d_model=64, n_layers=2, n_heads=4, max_seq_len=64)
    run = gl.lm.train_lm(model, corpus, gl.lm.LMConfig(seq_len=64, batch_size=16, steps=200))
    run.joules_per_token, run.val_loss, run.joules_to_target

Byte-level (a vocabulary of 256), so no tokenizer is downloaded. The model is a decoder-only
transformer whose attention is ``torch.nn.functional.scaled_dot_product_attention`` (causal), with
optional activation checkpointing per block (``torch.utils.checkpoint``). ``train_lm`` is one
``greenlab.measure`` window around the training steps; each evaluation point in ``history`` carries
the cumulative joules, so the energy to reach a validation loss is read off it. ``compare_lm``
runs paired repeats and returns a ``greenlab.experiments.Comparison`` (verdicts with intervals).
Losses are in nats per byte (cross-entropy with the natural log).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import progress, validation
from greenlab.base.units import plain_number
from greenlab.energy.flags import MeasuredFlags
from greenlab.session.devices import synchronize

VOCAB = 256  # bytes
CORPORA = ("pydoc-topics", "stdlib-source")
# pure-Python standard-library modules whose source makes the "stdlib-source" corpus (a new kind of
# text for fine-tuning a model trained on the help texts)
STDLIB_MODULES = ("bisect", "calendar", "csv", "dataclasses", "difflib", "enum", "fractions", "functools",
                  "heapq", "json.decoder", "json.encoder", "shlex", "statistics", "string", "textwrap")
PRECISIONS = ("fp32", "bf16")
LR_SCHEDULES = ("constant", "warmup-cosine")
MAX_COUNT = 2**31
MAX_TOKENS_PER_BATCH = 2**27  # seq_len x batch_size: 1 GiB of int64 ids, far beyond a lesson's batch
MAX_PARAMS = 2**31  # parameters of a TinyGPT: 8 GiB in fp32


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A byte corpus split once, deterministically: ``train`` and ``val`` are uint8 tensors.

    ``name``, ``source`` and ``licence`` say what the text is; sizes are in bytes (= tokens)."""

    name: str
    source: str
    licence: str
    train: torch.Tensor
    val: torch.Tensor

    @property
    def n_bytes(self) -> int:
        return int(self.train.numel() + self.val.numel())

    def describe(self) -> str:
        """One line: what, where from, licence, sizes."""
        return (f"{self.name}: {self.source}; licence: {self.licence}; {self.n_bytes:,} bytes "
                f"({self.train.numel():,} train, {self.val.numel():,} validation)")

    def unigram_entropy(self) -> float:
        """Entropy of the training split's byte frequencies, nats per byte: the validation loss of
        the best model that ignores context (a model that beats it has learned from context)."""
        counts = torch.bincount(self.train.long(), minlength=VOCAB).double()
        p = counts[counts > 0] / counts.sum()
        return float(-(p * p.log()).sum())


def load_corpus(name: str = "pydoc-topics", val_fraction: float = 0.1, max_bytes: int | None = None) -> Corpus:
    """Load a corpus that ships with Python and split it: the last ``val_fraction`` of the bytes
    (after the topics are sorted by name) is the validation split.

    ``pydoc-topics``: the help texts of CPython's ``pydoc_data.topics`` (the language reference
    sections ``help()`` shows), UTF-8 bytes. ``stdlib-source``: the Python source of the
    standard-library modules in ``STDLIB_MODULES``, in that order. ``max_bytes`` keeps only the
    first bytes (both splits shrink in proportion). Both are part of CPython (PSF licence)."""
    validation.choice("name", name, CORPORA)
    val_fraction = validation.number("val_fraction", val_fraction, low=0, high=0.5, low_open=True)
    max_bytes = validation.integer("max_bytes", max_bytes, low=1024, high=MAX_COUNT, allow_none=True)
    if max_bytes is not None and max_bytes - int(max_bytes * (1 - val_fraction)) < 2:
        raise ValueError(f"val_fraction {val_fraction:g} of max_bytes {max_bytes} leaves fewer than 2 bytes "
                         "for validation (one input and its target): raise one of them")
    import sys

    if name == "pydoc-topics":
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[k] for k in sorted(topics))
        what = f"pydoc_data.topics ({len(topics)} help topics)"
    else:
        import importlib
        import inspect

        text = "\n\n".join(inspect.getsource(importlib.import_module(m)) for m in STDLIB_MODULES)
        what = f"standard-library source of {len(STDLIB_MODULES)} modules ({', '.join(STDLIB_MODULES)})"
    data = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8)
    if max_bytes is not None:
        data = data[:max_bytes]
    cut = int(len(data) * (1 - val_fraction))
    version = ".".join(map(str, sys.version_info[:3]))
    return Corpus(name=name, source=f"CPython {version} {what}",
                  licence="Python Software Foundation License (PSF-2.0)",
                  train=data[:cut].clone(), val=data[cut:].clone())


def batch(data: torch.Tensor, seq_len: int, batch_size: int, generator: torch.Generator | None = None,
          device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``seq_len`` bytes: inputs and next-byte targets (int64)."""
    validation.tensor("data", data, dims=1, integer=True)
    seq_len = validation.integer("seq_len", seq_len, low=1, high=len(data) - 1)
    batch_size = validation.integer("batch_size", batch_size, low=1, high=MAX_COUNT)
    _check_tokens(seq_len, batch_size)
    if device is not None:
        validation.device("device", device)
    if generator is not None:
        validation.instance("generator", generator, torch.Generator, "a torch.Generator or None")
    start = torch.randint(0, len(data) - seq_len, (batch_size,), generator=generator)
    idx = start[:, None] + torch.arange(seq_len + 1)
    chunk = data[idx].long()
    if device is not None:
        chunk = chunk.to(device)
    return chunk[:, :-1], chunk[:, 1:]


# --- the model ---------------------------------------------------------------------------------


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal scaled-dot-product attention of (batch, heads, seq, head_dim) tensors: PyTorch's
    ``scaled_dot_product_attention`` with ``is_causal=True`` (a fused kernel where one exists)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def checkpoint_blocks(blocks, x: torch.Tensor, segment: int = 1) -> torch.Tensor:
    """Run ``blocks`` in order on ``x``, keeping for the backward pass only the input of each run of
    ``segment`` consecutive blocks (``torch.utils.checkpoint``, non-reentrant) and recomputing the
    rest. ``segment=1``: every block's input (the per-block variant); ``segment`` near the square
    root of the depth: Chen et al. (2016)'s sqrt(n) segments."""
    blocks = list(blocks)
    segment = validation.integer("segment", segment, low=1, high=max(1, len(blocks)))
    for start in range(0, len(blocks), segment):
        group = blocks[start:start + segment]

        def run(h, group=group):
            for block in group:
                h = block(h)
            return h

        x = torch.utils.checkpoint.checkpoint(run, x, use_reentrant=False) if torch.is_grad_enabled() else run(x)
    return x


def use_attention(model: nn.Module, attention=None) -> nn.Module:
    """Make every block of ``model`` compute its attention with ``attention(q, k, v)`` (None: the
    library's :func:`causal_attention`), e.g. a learner's own implementation. Returns ``model``."""
    if attention is not None and not callable(attention):
        raise ValueError(f"attention must be a function (q, k, v) -> output or None, got {type(attention).__name__}")
    for block in getattr(model, "blocks", ()):
        block.attention = attention or causal_attention
    return model


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (``self.attention``, by default
    :func:`causal_attention`) and a 4x-wide GELU MLP."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.attention = causal_attention
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        att = self.attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A decoder-only byte-level transformer: token and learned position embeddings, ``n_layers``
    blocks, a final LayerNorm and an output layer tied to the token embedding.

    ``checkpoint=True`` recomputes each block's activations in the backward pass instead of
    keeping them (``torch.utils.checkpoint``, non-reentrant): less memory, one more forward pass.
    ``run_blocks``: when set to a function ``(blocks, x) -> x`` (e.g. :func:`checkpoint_blocks`
    with another segment length, or a learner's own), the forward pass runs the blocks through it."""

    def __init__(self, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, max_seq_len: int = 256,
                 checkpoint: bool = False, vocab: int = VOCAB):
        super().__init__()
        vocab = validation.integer("vocab", vocab, low=1, high=2**20)
        d_model = validation.integer("d_model", d_model, low=1, high=65536)
        n_heads = validation.integer("n_heads", n_heads, low=1, high=d_model)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        validation.integer("n_layers", n_layers, low=1, high=1024)
        validation.integer("max_seq_len", max_seq_len, low=1, high=MAX_COUNT)
        params = 12 * n_layers * d_model**2 + (vocab + max_seq_len) * d_model
        if params > MAX_PARAMS:
            raise ValueError(f"d_model {d_model}, n_layers {n_layers}, max_seq_len {max_seq_len} and vocab "
                             f"{vocab} make about {plain_number(params)} parameters, more than {MAX_PARAMS:.3g} "
                             "(8 GiB in fp32): choose smaller sizes")
        self.checkpoint = validation.flag("checkpoint", checkpoint)
        self.max_seq_len = max_seq_len
        self.d_model, self.n_layers, self.n_heads = d_model, n_layers, n_heads
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.run_blocks = None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (batch, seq, vocab) for int64 byte ids (batch, seq)."""
        if idx.shape[-1] > self.max_seq_len:
            raise ValueError(f"sequence length {idx.shape[-1]} exceeds max_seq_len {self.max_seq_len}")
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[-1], device=idx.device))
        if self.run_blocks is not None:
            return self.head(self.ln(self.run_blocks(self.blocks, x)))
        for block in self.blocks:
            if self.checkpoint and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln(x))


def lm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy, nats per byte."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


# --- training ----------------------------------------------------------------------------------


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
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def samples_per_second(self) -> float:  # for Comparison: a token is the sample here
        return self.tokens_per_second

    def summary(self) -> str:
        est = " (estimate)" if self.estimated else ""
        line = (f"{self.label or 'run'}: {self.steps} steps, {self.tokens:,} tokens, {plain_number(self.seconds)} s, "
                f"{plain_number(self.joules, 4)} J{est}, {self.joules_per_token * 1e6:.4g} uJ/token, "
                f"val loss {self.val_loss:.3f}")
        if self.joules_to_target is not None:
            line += (f"; target loss in {plain_number(self.seconds_to_target)} s / "
                     f"{plain_number(self.joules_to_target, 4)} J")
        return line


def _check_tokens(seq_len: int, batch_size: int) -> None:
    """ValueError naming both when ``seq_len`` x ``batch_size`` is beyond MAX_TOKENS_PER_BATCH."""
    if seq_len * batch_size > MAX_TOKENS_PER_BATCH:
        raise ValueError(f"seq_len x batch_size = {seq_len} x {batch_size} tokens per batch is more than "
                         f"{MAX_TOKENS_PER_BATCH:,}: lower one of them")


def _check_language_model(model) -> None:
    """TypeError naming ``model`` unless it is a module that reads byte ids (it has ``max_seq_len``)."""
    validation.module("model", model)
    if not isinstance(getattr(model, "max_seq_len", None), int):
        raise validation.ArgumentTypeError(
            f"model must be a greenlab.techniques.lm.model.TinyGPT or a language model like it "
            f"(byte ids in, logits out, with max_seq_len), got {type(model).__name__}")


def _check_model_and_corpus(model, corpus) -> None:
    """TypeError naming ``model`` or ``corpus`` when either is of the wrong kind."""
    _check_language_model(model)
    if next(model.parameters(), None) is None:
        raise ValueError("model has no parameters: expected a greenlab.techniques.lm.model.TinyGPT or a model like it")
    validation.instance("corpus", corpus, Corpus,
                        "a greenlab.techniques.lm.model.Corpus (greenlab.techniques.lm.model.load_corpus())")


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
    from greenlab.training import optimizers

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
    validation.instance("config", config, LMConfig, "a greenlab.techniques.lm.model.LMConfig")
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
    from greenlab.base.version import __version__
    from greenlab.session import config as gl_config
    from greenlab.training import optimizers
    from greenlab.energy import default_sources, measure
    from greenlab.training.loop import _Meter, provenance

    cfg = config if config is not None else LMConfig()
    validation.instance("config", cfg, LMConfig, "a greenlab.techniques.lm.model.LMConfig")
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
                    raise FloatingPointError(f"training loss became {loss.item()} at step {step}; lower lr")
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
    if cfg.score_batches is not None and not interrupted:  # after the window: one yardstick for every run
        final = evaluate(model, corpus, cfg.seq_len, cfg.score_batches, cfg.batch_size, precision="fp32")
    status = ("interrupted" if interrupted else
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
        from greenlab.base.interrupts import interrupted_run

        raise interrupted_run("greenlab.lm.train_lm", run, cfg.steps)
    return run


def compare_lm(variants: dict, model_fn, corpus: Corpus, repeats: int = 3, warmup: int = 0, device=None):
    """Train every variant ``repeats`` times, paired (repeat r gives every variant seed
    ``config.seed + r``: the same initial weights and batches), in an order rotated each repeat.
    ``variants``: {name: LMConfig}, the first is the baseline; ``model_fn(config)`` returns a fresh
    model for a config. Returns a ``greenlab.experiments.Comparison``."""
    from greenlab.session.config import seed_everything
    from greenlab.experiments import Comparison

    if not isinstance(variants, dict) or not variants:
        raise validation.ArgumentTypeError("variants must be a non-empty dict {name: LMConfig}")
    if not callable(model_fn) or isinstance(model_fn, type):
        raise validation.ArgumentTypeError(
            f"model_fn must be a function config -> model, got {type(model_fn).__name__}")
    validation.instance("corpus", corpus, Corpus,
                        "a greenlab.techniques.lm.model.Corpus (greenlab.techniques.lm.model.load_corpus())")
    if device is not None:
        validation.device("device", device)
    for name, cfg in variants.items():
        if not isinstance(cfg, LMConfig):
            raise validation.ArgumentTypeError(
                f"variants[{name!r}] must be a greenlab.techniques.lm.model.LMConfig, got {type(cfg).__name__}")
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    warmup = validation.integer("warmup", warmup, low=0, high=100)
    names = list(variants)

    def one(name, r):
        cfg = dataclasses.replace(variants[name], seed=variants[name].seed + r, label=variants[name].label or name)
        seed_everything(cfg.seed)
        return train_lm(model_fn(cfg), corpus, cfg, device=device)

    for _ in range(warmup):
        for name in names:
            one(name, 0)
    repeat_runs, order = [], []
    for r in range(repeats):
        shift = r % len(names)
        repeat_runs.append({})
        for name in names[shift:] + names[:shift]:
            repeat_runs[r][name] = one(name, r)
            order.append(name)
    return Comparison(names, repeat_runs, order)


# --- counted facts: FLOPs and attention cost ----------------------------------------------------


def train_step_flops(model: nn.Module, seq_len: int, batch_size: int = 1) -> dict:
    """FLOPs of one training step (forward + backward) counted by ``torch.utils.flop_counter``
    on ``batch_size`` windows of ``seq_len`` bytes: {"total", "attention", "other"}, where
    attention is the scaled-dot-product attention (the L-squared part)."""
    from greenlab.training.flop_counting import flop_counter

    _check_language_model(model)
    seq_len = validation.integer("seq_len", seq_len, low=1, high=getattr(model, "max_seq_len", MAX_COUNT))
    batch_size = validation.integer("batch_size", batch_size, low=1, high=MAX_COUNT)
    dev = next(model.parameters()).device
    x = torch.zeros(batch_size, seq_len, dtype=torch.long, device=dev)
    counter = flop_counter()
    with counter:
        lm_loss(model, x, x).backward()
    model.zero_grad(set_to_none=True)
    by_op = counter.get_flop_counts()["Global"]
    attention = sum(n for op, n in by_op.items() if "scaled_dot_product" in str(op))
    total = int(sum(by_op.values()))
    return {"total": total, "attention": int(attention), "other": total - int(attention)}


def attention_flops(seq_len: int, d_model: int, n_layers: int, batch_size: int = 1, backward: bool = True) -> int:
    """FLOPs of the attention matmuls by arithmetic, for ``batch_size`` sequences of ``seq_len``:
    forward, Q K^T and weights x V, 2 matmuls of 2 x L x L x d FLOPs per layer; the backward pass
    of a fused (flash-style) kernel recomputes Q K^T and does 4 more (gradients of the weights, V,
    Q and K): 5 matmuls, so forward + backward = 3.5 x forward. Causal masking is not subtracted
    (the counted kernels are charged the whole square)."""
    for name, value in (("seq_len", seq_len), ("d_model", d_model), ("n_layers", n_layers),
                        ("batch_size", batch_size)):
        validation.integer(name, value, low=1, high=MAX_COUNT)
    validation.flag("backward", backward)
    matmul = 2 * seq_len * seq_len * d_model * n_layers * batch_size
    return matmul * (7 if backward else 2)


def compile_break_even_steps(compile_seconds: float, eager_step_seconds: float,
                             compiled_step_seconds: float) -> float:
    """Steps after which compiling has paid for itself: compile time / time saved per step
    (``inf`` when the compiled step is not faster)."""
    compile_seconds = validation.number("compile_seconds", compile_seconds, low=0)
    eager = validation.number("eager_step_seconds", eager_step_seconds, low=0, low_open=True)
    compiled = validation.number("compiled_step_seconds", compiled_step_seconds, low=0, low_open=True)
    saved = eager - compiled
    if saved > 0 and not math.isfinite(compile_seconds / saved):
        raise ValueError(f"compile_seconds {compile_seconds:g} over a step_seconds saving of {saved:g} s "
                         "overflows: the figures are not on one scale")
    return compile_seconds / saved if saved > 0 else math.inf


# --- words for results ---------------------------------------------------------------------------


def plain_verdict(p) -> str:
    """A paired verdict (``greenlab.experiments.Paired``) in words a stakeholder reads, no interval
    figures: "about 23% lower", "no detectable difference", or "too few repeats to tell"."""
    return p.plain()


def explain_bf16(p, native: bool) -> str:
    """Which explanation fits a measured bf16-against-fp32 energy verdict ``p`` (a ``Paired`` of
    bf16 / fp32 joules), on hardware whose bf16 is ``native`` or emulated."""
    if not native:
        return ("bf16 is emulated on this CPU (no AVX-512 BF16 or AMX): each bf16 operation is done in "
                "software, so the measured cost is the emulation's and says nothing about bf16 units.")
    if p.low is None:
        return "too few repeats for an interval: the run cannot say which way bf16 went here."
    if not p.detectable:
        return ("no detectable difference: at this model's size the time bf16 units save in the matrix "
                "multiplications is about what autocast spends casting weights and activations, memory-bound "
                "work they do not speed up.")
    if p.estimate < 1:
        return ("bf16 used less energy: the native bf16 units did the matrix multiplications faster than "
                "fp32 by more than autocast's casts cost, as predicted for hardware with bf16 units.")
    return ("bf16 used more energy although this CPU has bf16 units: the matrices here are small (64 wide "
            "in quick mode), so each matmul is short and the casts autocast adds around it (weights and "
            "activations to bf16 and back, every step) are memory-bound work the bf16 units do not speed up; "
            "on the roofline this model sits on the memory side, where halving the arithmetic's cost buys "
            "little. Larger matrices move it towards the compute side, where bf16 pays.")


def tune_lr(model_fn, corpus: Corpus, config: LMConfig, rates, device=None) -> tuple:
    """The same small tuning budget for any recipe: one run of ``config`` (its steps and seed) per
    learning rate in ``rates``, scored by the final validation loss (a diverging rate scores inf).
    A config that stops at its target keeps that stop in its trials, as the recipe runs, and the
    rate that reached the target in the fewest steps wins (then the lower loss); rates that missed
    it rank after those that reached it. ``model_fn(config)`` returns a fresh model. Returns (best
    rate, {rate: LMRun or None}, joules spent on tuning: the bill of the search itself)."""
    from greenlab.session.config import seed_everything

    rates = [validation.number("rate", r, low=0, high=10, low_open=True) for r in rates]
    if not rates:
        raise ValueError("rates must hold at least one learning rate")
    runs, spent = {}, 0.0
    for rate in rates:
        cfg = dataclasses.replace(config, lr=rate)
        seed_everything(cfg.seed)
        try:
            runs[rate] = train_lm(model_fn(cfg), corpus, cfg, device=device)
            spent += runs[rate].joules
        except FloatingPointError:
            runs[rate] = None
    def score(rate):
        run = runs[rate]
        if run is None:
            return (math.inf, math.inf)
        reached = config.stop_at_target and run.steps_to_target is not None
        return (run.steps_to_target if reached else math.inf, run.val_loss)

    best = min(rates, key=score)  # min keeps the first of equals
    return best, runs, spent
