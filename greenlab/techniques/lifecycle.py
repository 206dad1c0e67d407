"""The whole bill of one small language model over its life (lesson 16 (16_the_whole_bill)): training it
once, serving generated tokens, and operating it (checkpoint writes while it trains, idle power between
requests), each phase in joules, and two whole lives measured against each other in paired repeats.

    bill = gl.lifecycle.lifecycle_bill(training_joules=20.0, joules_per_token=0.005, tokens=100_000,
                                       checkpoint_joules=0.1, writes=3, idle_watts=5.0, idle_seconds=600)
    gl.lifecycle.crossover_tokens(fixed_a, per_token_a, fixed_b, per_token_b)  # where two lives cost the same
    cmp = gl.lifecycle.compare_lifecycles({"naive": naive_arm, "green": green_arm}, corpus, prompts, 24)
    cmp.paired(tokens=100_000, variant="naive", baseline="green")            # naive / green, per repeat

The phases are arithmetic on measured figures (a training window, a generation window, a checkpoint write,
the machine's idle power) and on stated assumptions (how many tokens, how often the machine is taken
away, how long it waits between requests), which the caller names; nothing here is a typical value.
"""

from __future__ import annotations

import copy
import dataclasses
import math

from greenlab.base import validation
from greenlab.experiments import paired as paired_verdict
from greenlab.experiments import short_flags, warm_up
from greenlab.session.config import seed_everything
from greenlab.techniques import preemption
from greenlab.techniques.lm import serving
from greenlab.techniques.lm.corpus import Corpus
from greenlab.techniques.lm.training import LMConfig, train_lm

PHASES = ("training", "checkpoints", "serving", "idle")  # the order a bill is read in


def lifecycle_bill(training_joules: float, joules_per_token: float, tokens: float,
                   checkpoint_joules: float = 0.0, writes: int = 0, idle_watts: float = 0.0,
                   idle_seconds: float = 0.0) -> dict:
    """Joules per phase of one model's life: {"training": training_joules, "checkpoints": writes x
    checkpoint_joules (each write's energy), "serving": tokens x joules_per_token, "idle": idle_watts x
    idle_seconds}, in the order of ``PHASES``. Every input is a number >= 0 (``writes`` a whole one)."""
    for name, value in (("training_joules", training_joules), ("joules_per_token", joules_per_token),
                        ("tokens", tokens), ("checkpoint_joules", checkpoint_joules), ("idle_watts", idle_watts),
                        ("idle_seconds", idle_seconds)):
        validation.number(name, value, low=0)
    writes = validation.integer("writes", writes, low=0)
    return {"training": float(training_joules), "checkpoints": writes * float(checkpoint_joules),
            "serving": float(tokens) * float(joules_per_token), "idle": float(idle_watts) * float(idle_seconds)}


def dominant_phase(bill: dict) -> str:
    """The phase of ``bill`` (a :func:`lifecycle_bill`) with the most joules; the first in ``PHASES`` of equals."""
    if not isinstance(bill, dict) or set(bill) != set(PHASES):
        raise ValueError(f"bill must be a dict with the phases {', '.join(PHASES)} (lifecycle_bill), got {bill!r}")
    return max(PHASES, key=lambda phase: bill[phase])  # max keeps the first of equals


def crossover_tokens(fixed_a: float, per_token_a: float, fixed_b: float, per_token_b: float) -> float | None:
    """The served tokens N > 0 at which two lives cost the same, ``fixed_a + N per_token_a = fixed_b + N
    per_token_b`` (fixed: joules paid once, such as training; per token: joules per served token): below it
    the life with the smaller fixed cost is cheaper, above it the one with the smaller cost per token.
    None where the lines do not cross at any N > 0 (one life is never dearer, or both cost the same)."""
    for name, value in (("fixed_a", fixed_a), ("per_token_a", per_token_a), ("fixed_b", fixed_b),
                        ("per_token_b", per_token_b)):
        validation.number(name, value, low=0)
    if per_token_a == per_token_b:
        return None
    n = (fixed_b - fixed_a) / (per_token_a - per_token_b)
    return float(n) if n > 0 else None


def checkpoint_writes(training_seconds: float, checkpoint_s: float, mtbf_s: float) -> int:
    """Checkpoint writes during ``training_seconds`` of compute at Young's interval (lesson 13,
    ``greenlab.techniques.preemption.young_interval``: ``sqrt(2 checkpoint_s mtbf_s)`` compute seconds
    apart): the whole intervals that fit, none for a run shorter than one interval."""
    validation.number("training_seconds", training_seconds, low=0)
    return int(training_seconds // preemption.young_interval(checkpoint_s, mtbf_s))


def idle_seconds(tokens: float, tokens_per_request: int, gap_s: float) -> float:
    """Seconds a serving machine waits between requests: one ``gap_s`` after each of the requests that
    ``tokens`` generated tokens take at ``tokens_per_request`` each (the last one partly filled)."""
    validation.number("tokens", tokens, low=0)
    tokens_per_request = validation.integer("tokens_per_request", tokens_per_request, low=1)
    validation.number("gap_s", gap_s, low=0)
    return math.ceil(tokens / tokens_per_request) * float(gap_s)


@dataclasses.dataclass
class Arm:
    """One way through a model's life: a fresh-model function, the training config (its ``lr`` chosen
    already), and how it serves (a KV cache or not; int8 weights in the blocks or fp32).
    ``tuning_joules``: the energy its learning-rate search took, paid once (0 where none ran)."""

    model_fn: object
    config: LMConfig
    kv_cache: bool
    int8: bool = False
    tuning_joules: float = 0.0


@dataclasses.dataclass
class LifecycleComparison:
    """Lives measured in paired repeats: ``training[name]`` and ``generation[name]`` hold one
    ``LMRun`` and one ``GenerationRun`` per repeat, in repeat order; ``arms[name]`` the :class:`Arm`."""

    names: list
    arms: dict
    training: dict
    generation: dict

    @property
    def estimated(self) -> bool:
        """True when any window's energy is an estimate (a CPU power model), not a measurement."""
        return any(r.estimated for runs in (*self.training.values(), *self.generation.values()) for r in runs)

    @property
    def repeats(self) -> int:
        return len(self.training[self.names[0]])

    def measurements(self) -> list:
        """(label, Measurement) of every window, training and generation: what ``gl.report.how_measured``
        reads to say how the energy was obtained."""
        return [(r.label, r.energy) for name in self.names for r in (*self.training[name], *self.generation[name])]

    def training_joules(self, name: str) -> list:
        """Per repeat: the run's joules plus the arm's search (paid once, the same in every repeat)."""
        tuning = self._arm(name).tuning_joules
        return [tuning + r.joules for r in self.training[name]]

    def joules_per_token(self, name: str) -> list:
        """Per repeat: joules per generated token."""
        self._arm(name)
        return [r.joules_per_token for r in self.generation[name]]

    def mean(self, name: str, what: str) -> float:
        """The mean over the repeats of "training_joules", "joules_per_token", "training_seconds" or
        "val_loss"."""
        validation.choice("what", what, ("training_joules", "joules_per_token", "training_seconds", "val_loss"))
        self._arm(name)
        if what == "training_seconds":
            values = [r.seconds for r in self.training[name]]
        elif what == "val_loss":
            values = [r.val_loss for r in self.training[name]]
        else:
            values = getattr(self, what)(name)
        return sum(values) / len(values)

    def reached(self, name: str) -> int:
        """How many of ``name``'s training runs reached their config's target validation loss."""
        self._arm(name)
        return sum(r.joules_to_target is not None for r in self.training[name])

    def wholes(self, name: str, tokens: float) -> list:
        """Per repeat: training (search included) plus ``tokens`` generated tokens' serving, joules."""
        validation.number("tokens", tokens, low=0)
        return [t + tokens * s for t, s in zip(self.training_joules(name), self.joules_per_token(name))]

    def paired(self, tokens: float, variant: str, baseline: str | None = None):
        """``variant``'s whole life against ``baseline``'s (default the first arm) for ``tokens`` served
        tokens, paired by repeat: a ``greenlab.experiments.Paired`` of variant / baseline joules, "not
        measurable at this size" where a window of either was too short for its energy source."""
        baseline = self.names[0] if baseline is None else baseline
        self._arm(variant), self._arm(baseline)
        short = [a or b for a, b in zip(short_flags(self.training[variant], self.training[baseline]),
                                        short_flags(self.generation[variant], self.generation[baseline]))]
        return paired_verdict(self.wholes(variant, tokens), self.wholes(baseline, tokens), "joules",
                              variant, baseline, short=short)

    def paired_training(self, variant: str, baseline: str | None = None):
        """``variant``'s training joules (search included) against ``baseline``'s, paired by repeat."""
        baseline = self.names[0] if baseline is None else baseline
        return paired_verdict(self.training_joules(variant), self.training_joules(baseline), "joules", variant,
                              baseline, short=short_flags(self.training[variant], self.training[baseline]))

    def paired_per_token(self, variant: str, baseline: str | None = None):
        """``variant``'s joules per generated token against ``baseline``'s, paired by repeat."""
        baseline = self.names[0] if baseline is None else baseline
        return paired_verdict(self.joules_per_token(variant), self.joules_per_token(baseline), "joules", variant,
                              baseline, short=short_flags(self.generation[variant], self.generation[baseline]))

    def _arm(self, name: str) -> Arm:
        if name not in self.arms:
            raise ValueError(f"unknown arm {name!r}; this comparison has {', '.join(self.names)}")
        return self.arms[name]


def serving_model(model, int8: bool):
    """``model`` ready to serve: a copy in eval mode, with int8 linear layers in its blocks
    (``greenlab.techniques.lm.serving.quantize_linears_int8``) where ``int8``."""
    validation.flag("int8", int8)
    out = copy.deepcopy(model).eval()
    return serving.quantize_linears_int8(out) if int8 else out


def compare_lifecycles(arms: dict, corpus: Corpus, prompts, new_tokens: int, repeats: int = 3,
                       per_window: int = 20, sources=None, on_repeat=None) -> LifecycleComparison:
    """Measure whole lives in paired repeats: repeat r trains every arm (``arms``: {name: :class:`Arm`},
    the first the baseline) with seed ``config.seed + r`` (the same initial weights and batches), then
    generates ``new_tokens`` after ``prompts`` ``per_window`` times in one window with each trained model as
    its arm serves; the arms' order is rotated from repeat to repeat, and each arm's serving set-up is warmed
    up once (a discarded generation by an untrained model of its shape) before the first repeat.
    ``on_repeat(r)``, where given, is called after each repeat (a progress line)."""
    if not isinstance(arms, dict) or len(arms) < 2:
        raise validation.ArgumentTypeError("arms must be a dict of at least two {name: Arm}")
    for name, arm in arms.items():
        if not isinstance(arm, Arm):
            raise validation.ArgumentTypeError(f"arms[{name!r}] must be a greenlab.techniques.lifecycle.Arm, "
                                               f"got {type(arm).__name__}")
        validation.instance(f"arms[{name!r}].config", arm.config, LMConfig, "a greenlab.techniques.lm.LMConfig")
        validation.number(f"arms[{name!r}].tuning_joules", arm.tuning_joules, low=0)
    validation.instance("corpus", corpus, Corpus, "a greenlab.techniques.lm.corpus.Corpus")
    repeats = validation.integer("repeats", repeats, low=1, high=1000)
    per_window = validation.integer("per_window", per_window, low=1, high=10_000)
    names = list(arms)
    warm_up({name: (lambda a=arms[name]: serving.measure_generation(
        serving_model(a.model_fn(), a.int8), prompts, new_tokens, kv_cache=a.kv_cache, sources=sources))
        for name in names})
    training = {name: [] for name in names}
    generation = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            arm = arms[name]
            cfg = dataclasses.replace(arm.config, seed=arm.config.seed + r, label=arm.config.label or name)
            seed_everything(cfg.seed)
            model = arm.model_fn()
            training[name].append(train_lm(model, corpus, cfg, sources=sources))
            generation[name].append(serving.measure_generation(
                serving_model(model, arm.int8), prompts, new_tokens, kv_cache=arm.kv_cache, repeats=per_window,
                sources=sources, label=f"{name} serving"))
        if on_repeat is not None:
            on_repeat(r)
    return LifecycleComparison(names, dict(arms), training, generation)
