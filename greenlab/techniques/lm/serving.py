"""Serving a ``greenlab.techniques.lm.gpt.TinyGPT``: generation with and without a KV cache, weight-only int8
linear layers (torchao, optional at run time), and joules per generated token (lesson 12 (12_adapting_and_serving)).

    text = gl.lm_serve.generate(model, prompts, new_tokens=64, kv_cache=True)
    run = gl.lm_serve.measure_generation(model, prompts, new_tokens=64, kv_cache=True)
    run.joules_per_token

Without a cache every new token runs the whole sequence so far through the model again; with one,
each layer keeps the keys and values of earlier positions and a new token costs one position's
work (Pope et al., 2022). Both give the same tokens (greedy decoding here).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from greenlab.base import optional, validation
from greenlab.energy import measure
from greenlab.energy.flags import MeasuredFlags
from greenlab.experiments import paired, short_flags, warm_up
from greenlab.techniques.lm.gpt import TinyGPT
from greenlab.techniques.lm.training import joules_per_token
from greenlab.training.flop_counting import flop_counter


@torch.no_grad()
def generate(model: TinyGPT, prompts: torch.Tensor, new_tokens: int, kv_cache: bool = True,
             step=None) -> torch.Tensor:
    """Greedy continuation of ``prompts`` (int64, batch x prompt length) by ``new_tokens`` bytes;
    returns the new tokens (batch x new_tokens). Prompt plus new tokens must fit max_seq_len.
    ``step``: with ``kv_cache``, the function ``(model, token, cache) -> (logits, cache)`` that
    decodes each new token (default :func:`decode_step`; e.g. a learner's own)."""
    validation.instance("model", model, TinyGPT, "a greenlab.techniques.lm.gpt.TinyGPT")
    validation.tensor("prompts", prompts, dims=2, integer=True)
    if prompts.shape[0] < 1 or prompts.shape[1] < 1:
        raise ValueError("prompts must be an int64 tensor of shape (batch >= 1, prompt length >= 1), "
                         f"got shape {tuple(prompts.shape)}")
    vocab = model.tok.num_embeddings
    if prompts.numel() and (int(prompts.min()) < 0 or int(prompts.max()) >= vocab):
        raise ValueError(f"prompts must hold token ids in [0, {vocab - 1}], got values "
                         f"from {int(prompts.min())} to {int(prompts.max())}")
    new_tokens = validation.integer("new_tokens", new_tokens, low=1, high=model.max_seq_len)
    if prompts.shape[1] + new_tokens > model.max_seq_len:
        raise ValueError(f"prompt length {prompts.shape[1]} + new_tokens {new_tokens} exceeds the "
                         f"model's max_seq_len {model.max_seq_len}")
    validation.flag("kv_cache", kv_cache)
    if step is not None and not callable(step):
        raise ValueError(f"step must be a function (model, token, cache) -> (logits, cache), got {type(step).__name__}")
    step = step or decode_step
    prompts = prompts.to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    seq, out = prompts, []
    if kv_cache:
        logits, cache = _forward_cached(model, prompts, None)
        for _ in range(new_tokens):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if len(out) < new_tokens:
                logits, cache = step(model, nxt, cache)
    else:
        for _ in range(new_tokens):
            nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            seq = torch.cat([seq, nxt], dim=1)
    model.train(was_training)
    return torch.cat(out, dim=1)


def prefill(model: TinyGPT, prompts: torch.Tensor):
    """Run ``prompts`` (batch x length) through ``model`` once: (logits, cache), the cache a list
    with one (keys, values) pair per layer, each (batch, heads, length, head_dim)."""
    return _forward_cached(model, prompts, None)


def decode_step(model: TinyGPT, token: torch.Tensor, cache: list):
    """One decoding step: logits (batch, 1, vocab) of the next position for ``token`` (batch, 1)
    after the positions in ``cache``, and the cache with this position's keys and values appended.
    Equal to running the whole sequence again (``model(sequence)[:, -1:]``)."""
    if cache is None:
        raise ValueError("decode_step continues a cache: make the first one with prefill(model, prompts)")
    return _forward_cached(model, token, cache)


def cache_bytes(cache: list) -> int:
    """Bytes of a KV cache's tensors as they are (keys and values of every layer)."""
    return sum(k.nbytes + v.nbytes for k, v in cache)


def kv_cache_bytes(model: TinyGPT, batch_size: int, seq_len: int, bytes_per_value: int = 4) -> int:
    """Memory of a full KV cache: keys and values of every layer, batch x seq x d_model each."""
    validation.instance("model", model, TinyGPT, "a greenlab.techniques.lm.gpt.TinyGPT")
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len), ("bytes_per_value", bytes_per_value)):
        validation.integer(name, value, low=1, high=2**40)
    return 2 * model.n_layers * batch_size * seq_len * model.d_model * bytes_per_value


@dataclasses.dataclass
class GenerationRun(MeasuredFlags):
    """One measured generation: ``tokens`` generated in all (batch x new tokens), seconds, joules."""

    label: str
    tokens: int
    seconds: float
    joules: float
    energy: object  # greenlab.energy.Measurement: estimated / complete / problems / sources

    @property
    def joules_per_token(self) -> float:
        return joules_per_token(self.joules, self.tokens)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def measure_generation(model: TinyGPT, prompts: torch.Tensor, new_tokens: int, kv_cache: bool = True,
                       repeats: int = 1, sources=None, label: str = "", step=None) -> GenerationRun:
    """Generate ``repeats`` times inside one energy window; energy and time per generated token.
    ``step``: the decoding step ``generate`` uses with the cache (default: the library's)."""
    repeats = validation.integer("repeats", repeats, low=1, high=10_000)
    validation.instance("model", model, TinyGPT, "a greenlab.techniques.lm.gpt.TinyGPT")
    validation.tensor("prompts", prompts, dims=2, integer=True)
    validation.flag("kv_cache", kv_cache)
    validation.text("label", label)
    label = label or ("generate, kv cache" if kv_cache else "generate, no cache")
    window = measure(label, sources=sources)
    with window:
        for _ in range(repeats):
            generate(model, prompts, new_tokens, kv_cache=kv_cache, step=step)
    r = window.result
    return GenerationRun(label=label, tokens=repeats * prompts.shape[0] * new_tokens,
                         seconds=r.seconds, joules=r.joules, energy=r)


# the words a paired verdict uses for a per-token metric (greenlab.experiments.METRIC_WORDS)
_VERDICT_METRIC = {"joules_per_token": "joules", "tokens_per_second": "samples_per_second"}


@dataclasses.dataclass
class GenerationComparison:
    """Generation set-ups measured in paired repeats: ``runs[name]`` holds one
    ``GenerationRun`` per repeat, in repeat order; ``names[0]`` is the baseline."""

    names: list
    runs: dict

    @property
    def estimated(self) -> bool:
        """True when any window's energy is an estimate (a CPU power model), not a measurement."""
        return any(r.estimated for runs in self.runs.values() for r in runs)

    def mean(self, name: str, metric: str = "joules_per_token") -> float:
        """The mean of ``metric`` ("joules_per_token" or "tokens_per_second") over ``name``'s repeats."""
        validation.choice("metric", metric, tuple(_VERDICT_METRIC))
        values = [getattr(r, metric) for r in self._runs(name)]
        return sum(values) / len(values)

    def paired(self, variant: str, baseline: str | None = None, metric: str = "joules_per_token"):
        """``variant`` against ``baseline`` (default: the first set-up) on ``metric``, paired by
        repeat: a ``greenlab.experiments.Paired`` (estimate, 95% interval, detectable)."""
        validation.choice("metric", metric, tuple(_VERDICT_METRIC))
        baseline = self.names[0] if baseline is None else baseline
        return paired([getattr(r, metric) for r in self._runs(variant)],
                      [getattr(r, metric) for r in self._runs(baseline)],
                      _VERDICT_METRIC[metric], variant, baseline,
                      short=short_flags(self._runs(variant), self._runs(baseline), _VERDICT_METRIC[metric]))

    def verdict(self, variant: str, baseline: str | None = None, metric: str = "joules_per_token") -> str:
        """One sentence on ``variant`` against ``baseline`` (default: the first set-up), paired by
        repeat, with its 95% interval (``greenlab.experiments.paired``)."""
        return self.paired(variant, baseline, metric).sentence()

    def _runs(self, name: str) -> list:
        if name not in self.runs:
            raise ValueError(f"unknown set-up {name!r}; this comparison has {', '.join(self.names)}")
        return self.runs[name]


def compare_generation(setups: dict, repeats: int = 3, sources=None) -> GenerationComparison:
    """Measure every generation set-up ``repeats`` times, paired: each repeat runs every set-up
    once, in an order rotated from repeat to repeat, after one discarded generation of each (its
    warm-up). ``setups``: {name: ``measure_generation`` arguments, ``model`` among them}; the first
    is the baseline."""
    if not isinstance(setups, dict):
        raise validation.ArgumentTypeError(
            f"setups must be a dict of at least two {{name: measure_generation arguments}}, "
            f"got {type(setups).__name__}")
    if len(setups) < 2:
        raise ValueError("setups must be a dict of at least two {name: measure_generation arguments}")
    for name, kwargs in setups.items():
        if not isinstance(kwargs, dict) or "model" not in kwargs:
            raise validation.ArgumentTypeError(
                f"setups[{name!r}] must be a dict of measure_generation arguments with a 'model'")
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    names = list(setups)
    runs = {name: [] for name in names}
    warm_up({name: (lambda name=name: measure_generation(**{"sources": sources, "label": name, **setups[name],
                                                            "repeats": 1}))
             for name in names})
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            kwargs = {"sources": sources, "label": name, **setups[name]}
            runs[name].append(measure_generation(**kwargs))
    return GenerationComparison(names, runs)


def quantize_weights_int8(model: nn.Module) -> nn.Module:
    """Weight-only int8 (torchao's ``quantize_`` with ``Int8WeightOnlyConfig``: per output row an
    fp32 scale, max |w| / 127.5, and an int8 zero point that is 0) for every ``nn.Linear`` inside the transformer blocks of ``model``, in
    place; embeddings and the tied output layer stay fp32. Activations stay in their dtype and the
    weight is widened for each matmul, so the arithmetic is that of the original model. Raises
    ``greenlab.base.optional.LibraryMissing`` when torchao cannot be imported. Returns ``model``."""
    validation.module("model", model)
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise validation.ArgumentTypeError("model must be a greenlab.techniques.lm.gpt.TinyGPT (it has no .blocks)")
    why = optional.missing("torchao")
    if why:
        raise optional.LibraryMissing(f"int8 weights need torchao: {why} ({optional.install_hint('torchao')})")
    quantization = optional.quiet_import("torchao.quantization")
    in_blocks = {id(m) for m in blocks.modules() if type(m) is nn.Linear}
    # set_inductor_config=False: eager serving; torchao would otherwise change torch.compile's
    # global settings for the whole process. version=2 (torchao's Int8Tensor, the only layout from
    # 0.18 on) named where torchao knows it, so 0.17 stores the same bytes instead of its older
    # default; a torchao without versions (0.10, Colab's) has only that older layout, whose zero
    # point per row is an int64: int8_layout(model) reads which one was stored
    try:
        config = quantization.Int8WeightOnlyConfig(version=2, set_inductor_config=False)
    except TypeError:
        config = quantization.Int8WeightOnlyConfig(set_inductor_config=False)
    quantization.quantize_(model, config, filter_fn=lambda module, name: id(module) in in_blocks)
    return model


@dataclasses.dataclass(frozen=True)
class Int8Layout:
    """How int8 weights are stored, read from the tensors: ``rows`` (output rows over all
    quantized linear layers), ``values`` (int8 weights), ``row_bytes`` (bytes per row besides the
    int8 values: scales and zero points) and the dtypes of those per-row tensors."""

    rows: int
    values: int
    row_bytes: float
    row_dtypes: tuple

    def describe(self) -> str:
        """E.g. "5 bytes per row (float32, int8)": what each output row stores besides its values."""
        return f"{self.row_bytes:g} bytes per row ({', '.join(self.row_dtypes)})"


def int8_layout(model: nn.Module) -> Int8Layout:
    """The layout of ``model``'s quantized linear weights (after :func:`quantize_weights_int8`),
    read from the tensors each weight is made of: its int8 values and, per output row, the rest.
    Raises ValueError when no linear weight of ``model`` is stored as int8."""
    validation.module("model", model)
    rows = values = extra = 0
    dtypes = []
    for module in model.modules():
        if not isinstance(module, nn.Linear) or type(module.weight) in (torch.Tensor, nn.Parameter):
            continue
        leaves = list(_plain_tensors(module.weight))
        data = [t for t in leaves if t.dtype == torch.int8 and t.numel() == module.weight.numel()]
        if not data:
            continue
        rows += module.out_features
        values += data[0].numel()
        for t in leaves:
            if t is not data[0]:
                extra += t.untyped_storage().nbytes()
                name = str(t.dtype).replace("torch.", "")
                if name not in dtypes:
                    dtypes.append(name)
    if not rows:
        raise ValueError("model has no linear weight stored as int8 (quantize_weights_int8 first)")
    return Int8Layout(rows=rows, values=values, row_bytes=extra / rows, row_dtypes=tuple(dtypes))


def quantize_int8_per_channel(weight: torch.Tensor) -> tuple:
    """Symmetric weight-only int8 with one scale per output channel (row) of a (out, in) weight:
    (int8 values, fp32 scales of shape (out,)). The scales are PyTorch's own
    (``PerChannelMinMaxObserver``, per-channel symmetric: max |w| / 127.5, at least float eps) and
    the values those of ``torch.fake_quantize_per_channel_affine``: round(w / scale), clamped to
    [-128, 127]."""
    from torch.ao.quantization.observer import PerChannelMinMaxObserver

    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise ValueError("weight must be a 2-D tensor (out_features, in_features)")
    observer = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    observer(weight.detach().float())
    scale, zero_point = observer.calculate_qparams()
    scale = scale.float()
    fake = torch.fake_quantize_per_channel_affine(weight.detach().float(), scale, zero_point.int(), 0, -128, 127)
    return (fake / scale[:, None]).round().to(torch.int8), scale


class Int8Linear(nn.Module):
    """A linear layer whose weight is stored as int8 values and one fp32 scale per output row; each
    call widens it to the input's dtype (``q * scale``) and runs an ordinary matmul (eager, no int8
    kernel), so only the stored bytes change, not the arithmetic's cost."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        if q.dtype != torch.int8 or q.dim() != 2 or scale.shape != (q.shape[0],):
            raise ValueError("q must be int8 (out, in) and scale of shape (out,)")
        self.register_buffer("q", q)
        self.register_buffer("scale", scale.float())
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)

    def forward(self, x):
        return F.linear(x, self.q.to(x.dtype) * self.scale.to(x.dtype)[:, None], self.bias)


def quantize_linears_int8(model: nn.Module, quantize=None) -> nn.Module:
    """Replace every ``nn.Linear`` inside ``model.blocks`` by an :class:`Int8Linear` made by
    ``quantize(weight) -> (int8 values, scales per row)`` (default
    :func:`quantize_int8_per_channel`; e.g. a learner's own), in place. Needs no torchao."""
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise ValueError("model must be a greenlab.techniques.lm.gpt.TinyGPT (it has no .blocks)")
    quantize = quantize or quantize_int8_per_channel
    for parent in list(blocks.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                q, scale = quantize(child.weight.detach())
                setattr(parent, name, Int8Linear(q, scale, child.bias))
    return model


def weight_bytes(model: nn.Module) -> int:
    """Bytes of parameters and buffers, each storage once; a quantized weight (a tensor subclass
    such as torchao's) counts the tensors it is made of (int8 data, scales)."""
    validation.module("model", model)
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        for leaf in _plain_tensors(t):
            key = leaf.untyped_storage().data_ptr()
            if key not in seen:
                seen.add(key)
                total += leaf.untyped_storage().nbytes()
    return total


def serving_break_even_tokens(training_joules: float, joules_per_generated_token: float) -> float:
    """Generated tokens after which serving has used as much energy as training."""
    training_joules = validation.number("training_joules", training_joules, low=0)
    per_token = validation.number("joules_per_generated_token", joules_per_generated_token, low=0, low_open=True)
    if not math.isfinite(training_joules / per_token):
        raise ValueError(f"training_joules {training_joules:g} / joules_per_generated_token {per_token:g} "
                         "overflows: the figures are not on one scale")
    return training_joules / per_token


# --- helpers ---------------------------------------------------------------------------------


def _forward_cached(model: TinyGPT, idx: torch.Tensor, cache):
    """Logits for ``idx`` continuing the positions in ``cache`` (a list of (k, v) per layer, or
    None); returns (logits, the longer cache)."""
    if cache is not None and idx.shape[1] != 1:
        raise ValueError("with a cache, continue one token at a time (idx of shape (batch, 1))")
    start = 0 if cache is None else cache[0][0].shape[2]
    positions = torch.arange(start, start + idx.shape[1], device=idx.device)
    x = model.tok(idx) + model.pos(positions)
    new_cache = []
    for i, block in enumerate(model.blocks):
        b, t, d = x.shape
        h = block.n_heads
        q, k, v = block.qkv(block.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        new_cache.append((k, v))
        # a prompt attends causally; a single new token attends to every earlier position
        att = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and t > 1)
        x = x + block.proj(att.transpose(1, 2).reshape(b, t, d))
        x = x + block.mlp(block.ln2(x))
    return model.head(model.ln(x)), new_cache


def _plain_tensors(t: torch.Tensor):
    """The plain tensors that hold ``t``'s data: ``t`` itself, or for a wrapper subclass (which
    has no storage of its own) the inner tensors it names in ``__tensor_flatten__``."""
    if type(t) in (torch.Tensor, nn.Parameter) or not hasattr(t, "__tensor_flatten__"):
        yield t
        return
    names, _ = t.__tensor_flatten__()
    for name in names:
        inner = getattr(t, name)
        if isinstance(inner, torch.Tensor):
            yield from _plain_tensors(inner)


def generation_flops(model: TinyGPT, prompts: torch.Tensor, new_tokens: int, kv_cache: bool = True) -> int:
    """FLOPs of ``generate(...)`` counted by ``torch.utils.flop_counter`` (attention included)."""
    validation.instance("model", model, TinyGPT, "a greenlab.techniques.lm.gpt.TinyGPT")
    counter = flop_counter()
    with counter:
        generate(model, prompts, new_tokens, kv_cache=kv_cache)
    return int(counter.get_total_flops())
