"""``torch.compile`` as an energy decision: a cost paid once against a saving on every step (lesson 10
(10_language_model)).

``measure_compile`` trains two copies of the same model on the same batches, one eager and one
compiled, and measures:

- the **first compiled step**, which includes tracing and code generation (on a CPU, building C++
  kernels): its time and energy minus an ordinary compiled step are the compile cost;
- then windows of ``steps`` ordinary steps, eager and compiled alternately (paired, order rotated),
  read as a ``greenlab.experiments.Comparison`` with a verdict and spread;
- the **break-even**: compile cost / saving per step, in steps, for time and for energy (infinite
  when the compiled step is not cheaper: then compiling never pays). ``summary`` and ``plot`` state
  a break-even only where the paired windows show a detectable saving per step; otherwise there is
  none to report (a finite figure from an undetectable saving would be noise divided into a cost).

PyTorch keeps compiled code in an on-disk cache (the "FX graph cache"), so the second compile of
the same model in a later process is much cheaper than the first. ``cache`` says which happened,
from ``torch._dynamo``'s counters.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math

import torch
import torch.nn as nn

from greenlab.base import progress, validation
from greenlab.base.units import plain_number
from greenlab.energy import default_sources, measure
from greenlab.experiments import Comparison
from greenlab.session import config as gl_config
from greenlab.techniques.lm.corpus import Corpus, batch
from greenlab.techniques.lm.costs import compile_break_even_steps
from greenlab.techniques.lm.training import LMConfig, LMRun, make_optimizer, train_step


@dataclasses.dataclass
class CompileMeasurement:
    """What compiling cost and saved. Seconds and joules; ``comparison`` holds the step windows
    (variants "eager" and "compiled", ``steps_per_window`` steps each)."""

    first_step_seconds: float
    first_step_joules: float
    steps_per_window: int
    comparison: object
    cache: str
    first_loss_difference: float
    first_step: object  # greenlab.energy.Measurement of the first compiled step

    @property
    def estimated(self) -> bool:
        """True when the first step's or any window's energy is an estimate."""
        return self.first_step.estimated or self.comparison.estimated

    @property
    def problems(self) -> list:
        """What the first step's and the windows' measurements lost (empty when complete)."""
        return [f"first compiled step: {p}" for p in self.first_step.problems] + list(self.comparison.problems)

    @property
    def complete(self) -> bool:
        return not self.problems

    def step_seconds(self, name: str) -> float:
        """Mean seconds of one ordinary step of ``name`` ("eager" or "compiled")."""
        return self._mean(name, "seconds") / self.steps_per_window

    def step_joules(self, name: str) -> float:
        """Mean joules of one ordinary step of ``name`` ("eager" or "compiled")."""
        return self._mean(name, "joules") / self.steps_per_window

    @property
    def compile_seconds(self) -> float:
        """The first compiled step's time beyond an ordinary compiled step (at least 0)."""
        return max(0.0, self.first_step_seconds - self.step_seconds("compiled"))

    @property
    def compile_joules(self) -> float:
        """The first compiled step's energy beyond an ordinary compiled step (at least 0)."""
        return max(0.0, self.first_step_joules - self.step_joules("compiled"))

    def break_even_steps(self, metric: str = "seconds") -> float:
        """Steps after which compiling has paid for itself in ``metric`` ("seconds" or "joules");
        ``inf`` when the compiled step is not cheaper."""
        validation.choice("metric", metric, ("seconds", "joules"))
        if metric == "seconds":
            return compile_break_even_steps(self.compile_seconds, self.step_seconds("eager"),
                                            self.step_seconds("compiled"))
        eager, compiled = self.step_joules("eager"), self.step_joules("compiled")
        if not (eager > 0 and compiled > 0):
            return math.inf
        return compile_break_even_steps(self.compile_joules, eager, compiled)

    def saving_detectable(self, metric: str = "seconds") -> bool:
        """True when the paired windows show the compiled step detectably cheaper in ``metric``
        ("seconds" or "joules"): the interval of the compiled/eager ratio lies below 1."""
        validation.choice("metric", metric, ("seconds", "joules"))
        p = self.comparison.paired("compiled", "eager", metric=metric)
        return bool(p.detectable) and p.estimate < 1

    def reported_break_even(self, metric: str = "seconds") -> float | None:
        """The break-even in steps where the saving per step is detectable, else None."""
        return self.break_even_steps(metric) if self.saving_detectable(metric) else None

    def summary(self) -> str:
        est = " (estimate)" if self.estimated else ""
        lines = [f"first compiled step: {plain_number(self.first_step_seconds)} s, "
                 f"{plain_number(self.first_step_joules, 4)} J{est} ({self.cache})",
                 f"one step: eager {plain_number(self.step_seconds('eager') * 1e3)} ms, compiled "
                 f"{plain_number(self.step_seconds('compiled') * 1e3)} ms; "
                 f"compile cost {plain_number(self.compile_seconds)} s, {plain_number(self.compile_joules, 4)} J{est}"]
        for metric, word in (("seconds", "time"), ("joules", "energy")):
            steps = self.reported_break_even(metric)
            if steps is not None:
                lines.append(f"break-even in {word}: {steps:,.0f} steps")
            else:
                p = self.comparison.paired("compiled", "eager", metric=metric)
                why = ("the compiled step is detectably dearer" if p.detectable else
                       "no detectable per-step saving" if p.detectable is False else "too few repeats for an interval")
                lines.append(f"break-even in {word}: none to report ({why})")
        if self.problems:
            lines.append("incomplete: " + "; ".join(self.problems))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def plot(self, ax=None, metric: str = "joules", max_steps: int | None = None):
        """Cumulative ``metric`` ("joules" or "seconds") against steps for eager and compiled
        training, from the measured step costs and the first compiled step; where the lines
        cross is the break-even. ``max_steps``: the x range (default: twice the break-even, or
        1,000 steps when no break-even is reported: see ``reported_break_even``). Returns the axes."""
        import matplotlib.pyplot as plt

        validation.choice("metric", metric, ("seconds", "joules"))
        per_step = self.step_joules if metric == "joules" else self.step_seconds
        first = self.first_step_joules if metric == "joules" else self.first_step_seconds
        reported = self.reported_break_even(metric)
        even = reported if reported is not None else math.inf
        if max_steps is None:
            max_steps = max(10, int(2 * even)) if math.isfinite(even) else 1000
        max_steps = validation.integer("max_steps", max_steps, low=2, high=10**9)
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        steps = [0, max_steps]
        ax.plot(steps, [0, per_step("eager") * max_steps], label="eager")
        ax.plot(steps, [first - per_step("compiled"), first + per_step("compiled") * (max_steps - 1)],
                label="compiled (first step includes compiling)")
        if math.isfinite(even) and even <= max_steps:
            ax.axvline(even, color="grey", linestyle=":", label=f"break-even: {even:,.0f} steps")
        unit = "energy (J)" + (" [estimate]" if self.estimated else "") if metric == "joules" else "time (s)"
        ax.set_xlabel("training steps")
        ax.set_ylabel(f"cumulative {unit}")
        ax.set_title("torch.compile: paid once, saved per step")
        ax.legend(fontsize=8)
        return ax

    def _mean(self, name: str, metric: str) -> float:
        runs = self.comparison.runs[name]
        return sum(getattr(r, metric) for r in runs) / len(runs)


def measure_compile(model: nn.Module, corpus: Corpus, config: LMConfig | None = None, steps: int = 40,
                    repeats: int = 3, device=None, sources=None, compile_kwargs: dict | None = None
                    ) -> CompileMeasurement:
    """Measure ``torch.compile(model)`` against the eager ``model`` on ``corpus`` (see the module
    text). ``config``: batch shape, learning rate and precision (its ``steps`` is not used);
    ``steps``: ordinary steps per window; ``repeats``: paired windows per variant;
    ``compile_kwargs``: passed to ``torch.compile``. ``model`` is copied, not changed."""
    cfg = config if config is not None else LMConfig()
    validation.instance("config", cfg, LMConfig, "a greenlab.techniques.lm.training.LMConfig")
    validation.module("model", model)
    validation.instance("corpus", corpus, Corpus,
                        "a greenlab.techniques.lm.corpus.Corpus (greenlab.techniques.lm.corpus.load_corpus())")
    steps = validation.integer("steps", steps, low=1, high=100_000)
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    if compile_kwargs is not None and not isinstance(compile_kwargs, dict):
        raise validation.ArgumentTypeError(
            f"compile_kwargs must be a dict or None, got {type(compile_kwargs).__name__}")
    dev = validation.device("device", device) if device is not None else torch.device(gl_config.device())
    if sources is None:
        sources = default_sources(gpus=[dev.index or 0] if dev.type == "cuda" else [])

    eager_model = copy.deepcopy(model).to(dev).train()
    compiled_base = copy.deepcopy(eager_model)
    compiled_model = torch.compile(compiled_base, **(compile_kwargs or {}))
    # the compiled model's first loss is checked against the eager one below, with a better message
    variants = {"eager": _Stepper(eager_model, corpus, cfg, dev),
                "compiled": _Stepper(compiled_model, corpus, cfg, dev, check_finite=False)}

    # One eager step first (one-time allocations), on the same batch the compiled model sees first.
    try:
        eager_loss = variants["eager"].run(1)
    except (RuntimeError, TypeError, IndexError) as exc:  # a model of another kind failed deep in torch
        if isinstance(exc, torch.OutOfMemoryError):
            raise
        raise ValueError("model must be a language model mapping (batch, seq_len) token ids to logits over "
                         f"the vocabulary; its first training step on the corpus failed: {exc}") from exc
    before = _cache_counters()
    lines = progress.Steps("greenlab.measure_compile", 1 + 2 * repeats, unit="window")
    lines.start("compiling the model: the first step includes compilation")
    with _no_cuda_home_notice(), lines.ticking(), measure("first compiled step", sources=sources) as first:
        compiled_loss = variants["compiled"].run(1)  # tens of seconds on a CPU: the line ticks meanwhile
    cache = _cache_state(before, _cache_counters())
    lines.done(f"{plain_number(first.result.seconds)} s ({cache})")
    if not math.isfinite(compiled_loss):
        raise RuntimeError(
            f"the compiled model computed a loss of {compiled_loss} on the first batch, where the eager model "
            f"computed {eager_loss:.4g}: the compiled code is wrong here ({cache}). Code loaded from PyTorch's "
            "compile cache may have been built under other settings (for example ATEN_CPU_CAPABILITY or "
            "ONEDNN_MAX_CPU_ISA): point TORCHINDUCTOR_CACHE_DIR at an empty folder and run again.")

    variants["compiled"].check_finite = True
    repeat_runs, order = [], []
    for r in range(repeats):
        names = ["eager", "compiled"] if r % 2 == 0 else ["compiled", "eager"]
        repeat_runs.append({})
        for name in names:
            lines.start(f"{name}, {steps} steps (repeat {r + 1}/{repeats})")
            with measure(name, sources=sources) as window:
                variants[name].run(steps)
            res = window.result
            lines.done()
            repeat_runs[r][name] = LMRun(
                label=name, config=dataclasses.asdict(cfg), steps=steps, tokens=steps * cfg.tokens_per_step,
                seconds=res.seconds, joules=res.joules, val_loss=math.nan, history=[],
                joules_to_target=None, seconds_to_target=None, energy=res, provenance={})
            order.append(name)
    comparison = Comparison(["eager", "compiled"], repeat_runs, order)
    return CompileMeasurement(
        first_step_seconds=first.result.seconds, first_step_joules=first.result.joules,
        steps_per_window=steps, comparison=comparison, cache=cache,
        first_loss_difference=abs(eager_loss - compiled_loss), first_step=first.result)


class _Stepper:
    """Training steps of one model with its own AdamW and its own batch stream (seeded by
    ``config.seed``, so two steppers see the same batches in the same order)."""

    def __init__(self, model, corpus, cfg, dev, check_finite: bool = True):
        self.model, self.corpus, self.cfg, self.dev = model, corpus, cfg, dev
        self.optimizer = make_optimizer(model, cfg)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.check_finite = check_finite

    def run(self, n: int) -> float:
        """``n`` training steps; returns the last step's loss (synchronised on CUDA)."""
        loss = None
        for _ in range(n):
            x, y = batch(self.corpus.train, self.cfg.seq_len, self.cfg.batch_size, self.generator, self.dev)
            loss = train_step(self.model, self.optimizer, x, y, self.cfg.precision)
        value = float(loss.detach())  # waits for the device
        if self.check_finite and not math.isfinite(value):
            raise FloatingPointError(f"training loss became {value}; lower lr")
        return value


def _cache_counters() -> dict:
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # pragma: no cover - very old or stripped PyTorch
        return {}
    return {k: counters["inductor"].get(k, 0) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss")}


def _cache_state(before: dict, after: dict) -> str:
    if not before:
        return "cache use unknown"
    hits = after["fxgraph_cache_hit"] - before["fxgraph_cache_hit"]
    misses = after["fxgraph_cache_miss"] - before["fxgraph_cache_miss"]
    if misses:
        return f"compiled from scratch: {misses} graph(s) built" + (f", {hits} from the cache" if hits else "")
    if hits:
        return f"loaded from PyTorch's on-disk compile cache: {hits} graph(s)"
    return "cache use unknown"


class _DropCudaHomeNotice(logging.Filter):
    """Drops PyTorch's "No CUDA runtime is found, using CUDA_HOME=..." warning: compiling for the
    CPU needs no CUDA, and the notice (red in a notebook) only says a CUDA toolkit is installed."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


@contextlib.contextmanager
def _no_cuda_home_notice():
    """Hide that notice while compiling (PyTorch logs it once, when compilation first loads
    ``torch.utils.cpp_extension``)."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    drop = _DropCudaHomeNotice()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)
