"""Models and training recipes shared by ``benchmarks/gpu_suite.py`` and the capstone lesson.

A recipe is a :class:`Recipe` ``(model_fn, config, data_spec)``: ``model_fn()`` builds a fresh
model, ``config`` is a ``TrainConfig``, ``data_spec`` a dict of keyword arguments for
``gl.data.load`` (``name``, ``n_train``, ``n_test``). The suite records both recipes on a GPU; the
capstone lesson imports the same definitions so the recorded figures and the lesson describe the
same runs.

- :func:`naive_recipe` is anchored outside the course: the defaults of PyTorch's own tutorial
  "Training a Classifier" (pytorch.org/tutorials/beginner/blitz/cifar10_tutorial.html, CIFAR-10):
  its LeNet-style network, SGD with momentum 0.9 at lr 0.001, batches of 4 from a ``DataLoader``,
  a fixed number of passes, fp32, scored once per pass. Scaled to the lesson's data: one input
  channel and 28x28 images, and the passes it needs to reach the target in every repeat.
- :func:`green_recipe` is built from the course: a larger batch with its own tuned rate and a
  warm-up (04), a network with less work per image that reaches the target (05: the reference CNN
  with batch normalisation in full mode, SMALL_MLP on a CPU), device-resident data (08), a one-cycle
  schedule (04), a stop at the validation target checked every few hundred samples (08, 09), bf16 on
  the full-size network where ``gl.hardware.precision_support`` says it is native (02), channels-last
  only on CUDA.

Three sizes (SIZES, :func:`capstone_size`): "full" (a CUDA GPU, what the suite records), "cpu" (a
learner's CPU: ``gl.budget(cpu=...)``) and "quick" (CI and ``GREENLAB_QUICK=1``). Both recipes share
the seed, the data and the epoch budget (the green one stops at the target well before it).
``tune_lr`` gives each recipe the same learning-rate search (the same candidates around its own rate,
the same samples each at most, judged on the validation split), and ``one_change_at_a_time`` builds
the ladder from one recipe to the other, one change per row; ``compare_ends`` runs the headline
(naive against green, paired repeats) and ``compare_ladder`` the rows, reusing the headline's runs for
the ladder's two ends. The honest bill over those runs (energy to a model that reaches the
validation target, the search included) is ``greenlab.course.bills`` (``gl.bills``).

Lesson 10's language-model recipes go through the same ladder: :func:`naive_lm_recipe` (the
defaults of a public GPT tutorial) and :func:`green_lm_recipe` (the course's changes), both with
``LMConfig``s, compared to one validation loss (LM_LADDER); the green one searches its rate by
successive halving (:func:`halving_lm_lr`).

    from greenlab import recipes
    model_fn, cfg, spec = recipes.green_recipe(quick=True)
    res = gl.train(model_fn(), gl.data.load(**spec), cfg)
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

from greenlab.base import progress
from greenlab.base.units import plain_number
from greenlab.experiments import Comparison, compare
from greenlab.session import hardware
from greenlab.session.config import seed_everything
from greenlab.techniques.lm import comparison as lm_comparison
from greenlab.techniques.lm.gpt import TinyGPT
from greenlab.techniques.lm.training import LMConfig
from greenlab.training import loop, models
from greenlab.training.loop import TrainConfig

# The reference CNN the lessons and reference runs compare precisions on (gl.models.build options).
REFERENCE_CNN = {"depth": 3, "width": 64, "kernel_size": 3, "norm": "batch"}
# The ResNet recorded beside it: CIFAR-style ResNet-20 (depth 6n+2 with n = 3).
REFERENCE_RESNET = {"depth": 20, "width": 16, "norm": "batch"}
# Validation accuracy both capstone recipes must reach (fraction of the validation split); the
# test split gives the accuracy reported at the end.
CAPSTONE_TARGET_ACCURACY = 0.90
CAPSTONE_DATA = {"name": "fashion-mnist", "n_train": 60000, "n_test": 10000}
# Quick mode (``quick=True``, for CI and GREENLAB_QUICK=1): the same recipes on 1024/256 images with a
# lower target, since a tiny run on the (often generated) stand-in data does not reach 90%.
# Full mode (the default) is what the GPU suite records.
QUICK_CNN = {**REFERENCE_CNN, "width": 8}
QUICK_DATA = {"name": "fashion-mnist", "n_train": 1024, "n_test": 256}
CAPSTONE_QUICK_TARGET_ACCURACY = 0.60
# A learner's CPU (quick mode that the device chose, not GREENLAB_QUICK=1 or CI: ``gl.budget(cpu=...)``):
# 8192 training images (819 of them held out for validation), an 80% target, a few minutes at most.
CPU_DATA = {"name": "fashion-mnist", "n_train": 8192, "n_test": 2048}
CAPSTONE_CPU_TARGET_ACCURACY = 0.80
# The green recipe's network on a CPU: a one-hidden-layer MLP (784-64-10). On a CPU a step's cost
# follows its arithmetic; this network reaches the CPU sizes' targets with a fraction of the tutorial
# CNN's work per image (the smallest network that reaches the target: lesson 04's question).
SMALL_MLP = {"hidden": (64,)}
# The tutorial's settings, and the passes that carry them to the target on the lesson's data (the
# naive recipe scores once per pass and must reach the target in every repeat, so it gets the passes
# it needs; the green recipe has the same budget and stops at the target).
TUTORIAL_LR, TUTORIAL_BATCH = 0.001, 4
EPOCHS, CPU_EPOCHS, QUICK_EPOCHS = 6, 6, 5
# The green recipe's batch, warm-up (optimizer steps) and evaluation cadence (samples).
GREEN_BATCH, CPU_GREEN_BATCH, QUICK_GREEN_BATCH = 256, 64, 32
GREEN_WARMUP_STEPS, CPU_GREEN_WARMUP_STEPS, QUICK_GREEN_WARMUP_STEPS = 20, 5, 3
EVAL_EVERY_SAMPLES, CPU_EVAL_EVERY_SAMPLES, QUICK_EVAL_EVERY_SAMPLES = 10240, 1024, 256
# The learning-rate search every recipe gets: five candidates from a third of the recipe's own
# starting rate to 30 times it (x1/3, x1, x3, x10, x30), so that neither recipe's choice sits at an end
# of its grid, each trained on the same number of samples at most, judged by validation accuracy. The
# green recipe's trials stop at the target, as the green recipe does.
LR_FACTORS = (1 / 3, 1.0, 3.0, 10.0, 30.0)
LR_CANDIDATES = (0.01, 0.03, 0.1)
GREEN_LR = 0.01
TUNING_SAMPLES, CPU_TUNING_SAMPLES, QUICK_TUNING_SAMPLES = 60000, 8192, 2048
SIZES = ("full", "cpu", "quick")

# Lesson 10's language-model recipes (naive_lm_recipe, green_lm_recipe): a byte-level TinyGPT on
# CPython's pydoc topics. Quick mode is tiny on purpose, so that the lesson's ladder of paired
# repeats stays within seconds on a 2-core CPU; full mode is the lesson's full-mode model (not
# measured here: the GPU suite's to record). The target is a validation loss in nats per byte.
LM_CORPUS = "pydoc-topics"
LM_QUICK = {"d_model": 32, "n_layers": 2, "n_heads": 4, "seq_len": 32, "batch_size": 8, "steps": 150,
            "target_loss": 3.6}
LM_FULL = {"d_model": 128, "n_layers": 4, "n_heads": 4, "seq_len": 128, "batch_size": 32, "steps": 1000,
           "target_loss": 2.8}
LM_TUTORIAL_LR = 3e-4
LM_TUTORIAL_EVAL_SHARE = 0.8  # evaluation batches per training step: 2 x 200 every 500 steps
LM_GREEN_LR = 1e-3
# The language-model search: five candidates over a factor of 100 (x1 to x100 of each recipe's own
# rate), wide enough that neither recipe's chosen rate sits at an end of its grid (the tutorial's
# 3e-4 is far below what this small model trains best at).
LM_LR_FACTORS = (1.0, 3.0, 10.0, 30.0, 100.0)
# Lesson 10 chooses the green recipe's changes (bf16, the fused optimizer) and its rate on runs seeded
# from 0; the paired comparison that then estimates the recipes' factor starts from this seed, so the
# repeats that select a change are not the repeats that estimate it.
ESTIMATE_SEED = 1000
LM_GREEN_EVAL = (5, 2)  # every 5 steps, on 2 validation batches
LM_SCORE_BATCHES = 16  # the final model of every run is scored on these, after its energy window


class Recipe(NamedTuple):
    """A fresh-model function, a ``TrainConfig`` and a ``gl.data.load`` spec (it unpacks as
    ``model_fn, config, data_spec``)."""

    model_fn: Callable
    config: object
    data_spec: dict

    @property
    def model_name(self) -> str:
        """Which network ``model_fn`` builds, for the ladder's row names."""
        return getattr(self.model_fn, "model_name", getattr(self.model_fn, "__name__", "model"))

    def lr_candidates(self) -> tuple:
        """The learning rates this recipe's search tries: LR_FACTORS times its own rate
        (LM_LR_FACTORS for a language-model recipe)."""
        factors = LM_LR_FACTORS if hasattr(self.config, "target_loss") else LR_FACTORS
        return tuple(round(self.config.lr * f, 6) for f in factors)


def one_cycle(step: int, total_steps: int, warmup_steps: int) -> float:
    """The learning-rate multiplier of the green recipe's one-cycle schedule at optimizer step
    ``step`` (0-based): ``(step + 1) / warmup_steps`` during the warm-up, then a linear fall to 0
    at ``total_steps`` (never below 0). The same rule as ``TrainConfig(lr_schedule="warmup-linear")``."""
    for name, value in (("step", step), ("total_steps", total_steps), ("warmup_steps", warmup_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def tutorial_cnn(in_channels: int = 1, num_classes: int = 10, image_size: int = 28):
    """The network of PyTorch's "Training a Classifier" tutorial (two 5x5 convolutions of 6 and
    16 channels, each with ReLU and 2x2 max-pooling, then fully connected 120, 84, classes), for
    ``in_channels`` images of ``image_size`` pixels (28 here; 32 in the tutorial)."""
    from torch import nn

    side = ((image_size - 4) // 2 - 4) // 2
    if side < 1:
        raise ValueError(f"image_size must be at least 16 pixels, got {image_size!r}")
    return nn.Sequential(
        nn.Conv2d(in_channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * side * side, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_classes))


def reference_cnn(in_channels: int = 1, num_classes: int = 10):
    """A fresh reference CNN (3 conv blocks of 64, 128, 256 channels, batch norm)."""
    return models.build("cnn", in_channels=in_channels, num_classes=num_classes, **REFERENCE_CNN)


def reference_resnet(in_channels: int = 3, num_classes: int = 10):
    """A fresh ResNet-20 (widths 16, 32, 64) for 32x32 colour images."""
    return models.build("resnet", in_channels=in_channels, num_classes=num_classes, **REFERENCE_RESNET)


def naive_recipe(device: str | None = None, n_train: int | None = None, n_test: int | None = None,
                 quick: bool = False, size: str | None = None) -> Recipe:
    """The tutorial recipe (see the module docstring): the tutorial's network, SGD with momentum
    0.9 at its rate, batches of 4 from a ``DataLoader``, fp32, a fixed number of passes scored
    once per pass; the target is only recorded (no stop).

    ``device`` is accepted for symmetry with :func:`green_recipe` (the naive recipe is the same
    everywhere). ``n_train``/``n_test`` shrink the data (None: the size's split).
    ``size``: "full" (CAPSTONE_DATA, the GPU suite's), "cpu" (CPU_DATA, a learner's CPU) or
    "quick" (QUICK_DATA, CI); None: "quick" when ``quick`` else "full".
    """
    _check_device(device)
    plan = capstone_size(_size(quick, size))
    cfg = TrainConfig(precision="fp32", batch_size=TUTORIAL_BATCH, lr=TUTORIAL_LR, momentum=0.9,
                      epochs=plan["epochs"], loader="dataloader", num_workers=0,
                      pin_memory=False, eval_every_samples=None, stop_at_target=False,
                      target_accuracy=plan["target_accuracy"], label="naive")
    return Recipe(tutorial_cnn, cfg, _data_spec(n_train, n_test, plan["data"]))


def green_recipe(device: str | None = None, n_train: int | None = None, n_test: int | None = None,
                 quick: bool = False, size: str | None = None, bf16: bool | None = None) -> Recipe:
    """The course's recipe: a network that reaches the target with little work per image (the
    reference CNN with batch norm in full mode; on a CPU, SMALL_MLP), device-resident data, a larger
    batch with its warm-up and a one-cycle schedule (linear warm-up, then linear decay), a stop at the
    target checked every few hundred samples, bf16 autocast where it can pay, and channels-last
    memory on CUDA. Its rate is a starting point for ``tune_lr``.

    ``device``: "cuda"/"cpu" (None: CUDA when available). ``size``: as for :func:`naive_recipe`.
    ``bf16``: None takes it in full mode wherever ``gl.hardware.precision_support`` says the device
    runs bf16 natively, and leaves it out of the CPU and quick sizes, whose 64-wide matrices are too
    small for it to pay (casting to bf16 and back costs more than the products save; lesson 01
    measures where it pays); True is refused where bf16 is emulated; False leaves it out.
    """
    import torch

    device = _check_device(device)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_cuda = device.startswith("cuda") and torch.cuda.is_available()
    name = _size(quick, size)
    plan = capstone_size(name)
    if bf16 is not None and not isinstance(bf16, bool):
        raise ValueError(f"bf16 must be True, False or None, got {bf16!r}")
    native = hardware.precision_support("bf16", device if on_cuda else "cpu").native
    if bf16 and not native:
        raise ValueError("bf16=True, but bf16 is emulated on this device: the green recipe takes it only "
                         "where it is native")
    use_bf16 = (native and name == "full") if bf16 is None else bf16
    cfg = TrainConfig(precision="bf16" if use_bf16 else "fp32", batch_size=plan["green_batch"],
                      lr=GREEN_LR, momentum=0.9, epochs=plan["epochs"], loader="device",
                      lr_schedule="warmup-linear", warmup_steps=plan["warmup_steps"],
                      eval_every_samples=plan["eval_every_samples"], target_accuracy=plan["target_accuracy"],
                      stop_at_target=True, channels_last=on_cuda, label="green")
    return Recipe(plan["green_model"], cfg, _data_spec(n_train, n_test, plan["data"]))


def capstone_size(size: str) -> dict:
    """What a capstone size holds: ``data`` (a ``gl.data.load`` spec), ``target_accuracy``
    (validation), ``epochs`` (both recipes' pass budget), ``green_model``, ``green_batch``,
    ``warmup_steps``, ``eval_every_samples`` (the green recipe's) and ``tuning_samples`` (each
    learning-rate trial's most). ``size``: "full", "cpu" or "quick" (SIZES)."""
    if size == "full":
        return {"data": CAPSTONE_DATA, "target_accuracy": CAPSTONE_TARGET_ACCURACY, "epochs": EPOCHS,
                "green_model": reference_cnn, "green_batch": GREEN_BATCH, "warmup_steps": GREEN_WARMUP_STEPS,
                "eval_every_samples": EVAL_EVERY_SAMPLES, "tuning_samples": TUNING_SAMPLES}
    if size == "cpu":
        return {"data": CPU_DATA, "target_accuracy": CAPSTONE_CPU_TARGET_ACCURACY, "epochs": CPU_EPOCHS,
                "green_model": small_mlp, "green_batch": CPU_GREEN_BATCH, "warmup_steps": CPU_GREEN_WARMUP_STEPS,
                "eval_every_samples": CPU_EVAL_EVERY_SAMPLES, "tuning_samples": CPU_TUNING_SAMPLES}
    if size == "quick":
        return {"data": QUICK_DATA, "target_accuracy": CAPSTONE_QUICK_TARGET_ACCURACY, "epochs": QUICK_EPOCHS,
                "green_model": small_mlp, "green_batch": QUICK_GREEN_BATCH,
                "warmup_steps": QUICK_GREEN_WARMUP_STEPS, "eval_every_samples": QUICK_EVAL_EVERY_SAMPLES,
                "tuning_samples": QUICK_TUNING_SAMPLES}
    raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")


# What the ladder changes, in order: TrainConfig field groups and the network ("model": a
# Recipe's model_fn); each group is one row, and a group the two recipes share is skipped. The
# batch comes first, so that only the naive row pays for batches of 4; the stop at the target
# comes as soon as the network can reach it, so the rows after it train only as long as needed.
LADDER = (
    (("batch_size", "lr", "warmup_steps"), "+ batch {batch_size}, lr {lr:g}, warm-up {warmup_steps}"),
    (("model",), "+ {model_name}"),
    (("stop_at_target",), "+ stop at target"),
    (("loader", "num_workers", "pin_memory", "prefetch_factor"), "+ device data"),
    (("lr_schedule",), "+ one-cycle schedule"),
    (("eval_every_samples",), "+ evaluate every {eval_every_samples} samples"),
    (("precision",), "+ {precision}"),
    (("channels_last",), "+ channels-last"),
    (("compile",), "+ torch.compile"),
)
_FREE = ("label",)
# Lesson 10's ladder from the naive language-model recipe to the green one (LMConfig fields). The
# stop comes first, so every later row trains only to the target; the sequence length and batch
# are the same in both (see naive_lm_recipe), so they have no row.
LM_LADDER = (
    (("stop_at_target",), "+ stop at target"),
    (("lr_schedule", "lr", "warmup_steps"), "+ warm-up {warmup_steps} and cosine, lr {lr:g}"),
    (("eval_every", "eval_batches"), "+ evaluate every {eval_every} steps on {eval_batches} batches"),
    (("fused",), "+ fused AdamW"),
    (("precision",), "+ {precision}"),
)


def one_change_at_a_time(naive, green) -> dict:
    """{row name: Recipe} from ``naive`` to ``green`` (Recipes, or configs alone), each row
    changing one group more, in order (the network when the two Recipes build different ones):
    LADDER for ``TrainConfig`` recipes, LM_LADDER for ``LMConfig`` ones (lesson 10). The first row
    is "naive", the last one equals ``green``. Raises ValueError naming any other field in which
    the two differ (seed, epochs, ...): the ladder would not isolate it."""
    config_types = _config_types()
    as_configs = isinstance(naive, config_types) and isinstance(green, config_types)
    if as_configs:
        naive, green = Recipe(None, naive, {}), Recipe(None, green, {})
    if not (isinstance(naive, Recipe) and isinstance(green, Recipe)
            and isinstance(naive.config, config_types) and type(naive.config) is type(green.config)):
        raise ValueError("naive and green must both be Recipes (from naive_recipe/green_recipe or "
                         "naive_lm_recipe/green_lm_recipe) or configs of one kind (TrainConfig or LMConfig)")
    n_cfg, g_cfg = naive.config, green.config
    ladder = _ladder_for(n_cfg)
    grouped = {f for fields, _ in ladder for f in fields}
    other = [f.name for f in dataclasses.fields(type(n_cfg))
             if f.name not in grouped and f.name not in _FREE and getattr(n_cfg, f.name) != getattr(g_cfg, f.name)]
    if other:
        detail = ", ".join(f"{f} ({getattr(n_cfg, f)!r} vs {getattr(g_cfg, f)!r})" for f in other)
        raise ValueError(f"the recipes also differ in {detail}; make them equal so that each row "
                         "of the ladder changes one thing")
    current = naive._replace(config=dataclasses.replace(n_cfg, label="naive"))
    rows = {"naive": current}
    for fields, name in ladder:
        if fields == ("model",):
            if current.model_fn is green.model_fn:
                continue
            label = name.format(model_name=green.model_name)
            current = current._replace(model_fn=green.model_fn, config=dataclasses.replace(current.config, label=label))
            rows[label] = current
            continue
        if all(getattr(current.config, f) == getattr(g_cfg, f) for f in fields):
            continue
        label = name.format(**{f: getattr(g_cfg, f) for f in fields})
        cfg = dataclasses.replace(current.config, label=label, **{f: getattr(g_cfg, f) for f in fields})
        current = current._replace(config=cfg)
        rows[label] = current
    if as_configs:
        return {name: row.config for name, row in rows.items()}
    return rows


def compare_ends(naive, green, data, repeats: int = 3, **compare_kwargs):
    """The headline: ``naive`` against ``green`` (Recipes of one kind) in paired repeats, rows
    "naive" and "green". Give it to :func:`compare_ladder` as ``ends`` and the ladder reuses these
    runs for its first and last rows (which are these two recipes) instead of training them again."""
    cmp = compare_ladder({"naive": naive, "green": green}, data, repeats=repeats, **compare_kwargs)
    cmp.recipe_configs = {"naive": naive.config, "green": green.config}
    return cmp


def compare_ladder(ladder: dict, data, repeats: int = 3, ends=None, **compare_kwargs):
    """Paired repeats over the rows of :func:`one_change_at_a_time`, each row with its own
    network: ``gl.compare`` for ``TrainConfig`` rows (``data`` a Dataset), ``gl.lm.compare_lm`` for
    ``LMConfig`` rows (``data`` a Corpus); repeat r gives every row seed r, in rotated order.

    ``ends``: a :func:`compare_ends` result for the same two recipes and repeats: its runs stand
    for the first and the last row (repeat r for repeat r, the same seeds), and only the rows
    between them are trained. Raises ValueError when its recipes or repeats are not the ladder's."""
    if not isinstance(ladder, dict) or not ladder or not all(isinstance(r, Recipe) for r in ladder.values()):
        raise ValueError("ladder must be a non-empty dict {row name: Recipe} (from one_change_at_a_time)")
    names = list(ladder)
    if ends is None:
        return _compare_rows(ladder, data, repeats, compare_kwargs)
    first, last = names[0], names[-1]
    configs = getattr(ends, "recipe_configs", None)
    if configs is None or not isinstance(ends, Comparison):
        raise ValueError("ends must be the Comparison that compare_ends returned")
    for row, end in ((first, "naive"), (last, "green")):
        if dataclasses.replace(configs[end], label="") != dataclasses.replace(ladder[row].config, label=""):
            raise ValueError(f"ends' {end} recipe is not the ladder's row {row!r}: compare_ends(naive, green) "
                             "must get the two recipes the ladder was built from")
    if ends.repeats != repeats:
        raise ValueError(f"ends has {ends.repeats} complete repeats, the ladder asks for {repeats}: use the same")
    middle = {n: ladder[n] for n in names[1:-1]}
    inner = _compare_rows(middle, data, repeats, compare_kwargs) if middle else None
    repeat_runs = []
    for r in range(repeats):
        runs = {first: ends.repeat_runs[r]["naive"], last: ends.repeat_runs[r]["green"]}
        if inner is not None:
            runs.update(inner.repeat_runs[r])
        repeat_runs.append({n: runs[n] for n in names})
    order = [{"naive": first, "green": last}[n] for n in ends.order] + (inner.order if inner is not None else [])
    return Comparison(names, repeat_runs, order, requested_repeats=repeats)


def _compare_rows(ladder, data, repeats, compare_kwargs):
    """The rows of ``ladder`` through the comparison their kind of config needs."""
    if isinstance(next(iter(ladder.values())).config, LMConfig):
        fns = {name: row.model_fn for name, row in ladder.items()}
        rows = {name: dataclasses.replace(row.config, label=name) for name, row in ladder.items()}
        return lm_comparison.compare_lm(rows, lambda cfg: fns[cfg.label](), data, repeats=repeats, **compare_kwargs)

    return compare({name: row.config for name, row in ladder.items()}, data=data, repeats=repeats,
                   model_fn={name: row.model_fn for name, row in ladder.items()}, **compare_kwargs)


@dataclasses.dataclass
class LrTuning:
    """The outcome of ``tune_lr``: one row per candidate (lr, validation accuracy, joules,
    seconds, status), the chosen ``best_lr``, and what the search cost in total."""

    label: str
    rows: list
    best_lr: float
    samples_per_candidate: int
    joules: float
    seconds: float
    estimated: bool

    def table(self) -> str:
        lines = [f"{self.label}: {len(self.rows)} learning rates, at most {self.samples_per_candidate} samples "
                 f"each (validation accuracy), {plain_number(self.joules, 4)} J in all"
                 f"{' (estimate)' if self.estimated else ''}"]
        for r in self.rows:
            acc = "-" if r["val_accuracy"] is None else f"{r['val_accuracy']:.1%}"
            mark = "  <- chosen" if r["lr"] == self.best_lr else ""
            reach = "" if r.get("samples_to_target") is None else f", target after {r['samples_to_target']} samples"
            lines.append(f"  lr {r['lr']:<8g} {acc:>7}  {plain_number(r['joules']):>8} J  {r['status']}{reach}{mark}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def tune_lr(model_fn, data, config, candidates=LR_CANDIDATES, samples: int = QUICK_TUNING_SAMPLES,
            **train_kwargs) -> LrTuning:
    """Train ``model_fn()`` with ``config`` at each learning rate in ``candidates`` for at most
    ``samples`` training samples (the same seed for each, no patience) and choose one. A config
    that stops at its target (``stop_at_target`` with a ``target_accuracy``) keeps that stop in
    its trials, as the recipe runs, and the rate that reached the target in the fewest samples
    wins (then the best validation accuracy); otherwise every trial runs all its samples and the
    best validation accuracy at the end wins (the first on a tie; a diverged run never wins).
    Give every recipe the same number of ``candidates`` and the same ``samples``: that is the
    same tuning budget. ``train_kwargs`` go to ``gl.train`` (default log=False, save=False)."""
    import math

    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    candidates = list(candidates)
    if not candidates or any(isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0
                             for c in candidates):
        raise ValueError(f"candidates must be a non-empty list of learning rates > 0, got {candidates!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    steps = max(1, math.ceil(samples / config.effective_batch_size))
    epochs = max(config.epochs, math.ceil(samples / max(1, int(data.train_x.shape[0]))))
    kwargs = {"log": False, "save": False, **train_kwargs}
    early = bool(config.stop_at_target and config.target_accuracy is not None)
    keep = {} if early else {"target_accuracy": None, "eval_every": None, "eval_every_samples": None}
    rows, runs = [], []
    lines = progress.Steps(f"greenlab.tune_lr {config.label or 'recipe'}", len(candidates), unit="trial")
    for lr in candidates:
        lines.start(f"lr {lr:g}, {steps} steps")
        cfg = dataclasses.replace(config, lr=float(lr), max_steps=steps, epochs=epochs, patience=None,
                                  label=f"{config.label or 'recipe'} lr {lr:g}", **keep)
        seed_everything(cfg.seed)
        res = loop.train(model_fn(), data, cfg, **kwargs)
        runs.append(res)
        ok = res.status != "diverged" and res.val_accuracy is not None
        rows.append({"lr": float(lr), "val_accuracy": res.val_accuracy if ok else None,
                     "joules": res.joules, "seconds": res.seconds, "status": res.status,
                     "samples_to_target": _samples_to_target(res) if ok and early else None})
        lines.done(f"validation {res.val_accuracy:.1%}, {plain_number(res.seconds)} s" if ok else res.status)
    scored = [r for r in rows if r["val_accuracy"] is not None]
    if not scored:
        raise ValueError(f"every learning rate in {candidates} diverged; try smaller ones")
    reached = [r for r in scored if r["samples_to_target"] is not None]
    if reached:  # the fewest samples to the target; then accuracy; min keeps the first of equals
        best = min(reached, key=lambda r: (r["samples_to_target"], -r["val_accuracy"]))
    else:
        best = max(scored, key=lambda r: r["val_accuracy"])  # max keeps the first of equals
    return LrTuning(config.label or "recipe", rows, best["lr"], steps * config.effective_batch_size,
                    sum(r.joules for r in runs), sum(r.seconds for r in runs), any(r.estimated for r in runs))


def naive_lm_recipe(quick: bool = False) -> Recipe:
    """The language-model recipe a newcomer copies (lesson 10), anchored outside the course in
    the ``gpt.py`` of Karpathy's lecture "Let's build GPT: from scratch, in code, spelled out"
    (2023, github.com/karpathy/ng-video-lecture): ``torch.optim.AdamW`` at a constant 3e-4, no
    schedule, fp32, a fixed number of steps (5000 there), the loss estimated every tenth of the
    run (every 500 steps) on 200 batches of each split, 0.8 evaluation batches per training step.
    Scaled to the lesson: LM_QUICK (or LM_FULL) sets the model, the sequence length, the batch and
    the steps; the evaluation keeps the tutorial's cadence (a tenth of the run) and its share
    (0.8 validation batches per training step). No stop at the target: it is only recorded.
    ``model_fn()`` builds a fresh TinyGPT; ``data_spec`` holds ``gl.lm.load_corpus`` arguments."""
    _check_quick(quick)
    size = LM_QUICK if quick else LM_FULL
    every = max(1, size["steps"] // 10)
    cfg = LMConfig(seq_len=size["seq_len"], batch_size=size["batch_size"], steps=size["steps"], lr=LM_TUTORIAL_LR,
                   eval_every=every, eval_batches=max(1, round(LM_TUTORIAL_EVAL_SHARE * every)),
                   target_loss=size["target_loss"], score_batches=LM_SCORE_BATCHES, label="naive")
    return Recipe(_lm_model_fn(size), cfg, {"name": LM_CORPUS})


def green_lm_recipe(device: str | None = None, quick: bool = False, fused: bool = False,
                    bf16: bool | None = None) -> Recipe:
    """The course's language-model recipe (lesson 10): the same model, sequence length, batch
    and step budget as :func:`naive_lm_recipe`, with a linear warm-up over a tenth of the steps
    and a cosine fall (its rate is a starting point for ``gl.lm.tune_lr``), a stop at the target
    validation loss, a check every few steps on a few batches (LM_GREEN_EVAL: less evaluation than
    the tutorial's, often enough to stop near the target), and two changes decided by measurement
    on the machine: bf16 autocast (``bf16``: None takes it wherever ``gl.hardware.precision_support``
    says the device runs bf16 natively; False leaves it out, as where a measurement found no saving;
    True is refused where bf16 is emulated) and the fused AdamW kernel (``fused``, off by default)."""
    import torch

    device = _check_device(device)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_cuda = device.startswith("cuda") and torch.cuda.is_available()
    if not isinstance(fused, bool):
        raise ValueError(f"fused must be True or False, got {fused!r}")
    if bf16 is not None and not isinstance(bf16, bool):
        raise ValueError(f"bf16 must be True, False or None, got {bf16!r}")
    naive = naive_lm_recipe(quick=quick)
    every, batches = LM_GREEN_EVAL
    native = hardware.precision_support("bf16", device if on_cuda else "cpu").native
    if bf16 and not native:
        raise ValueError("bf16=True, but bf16 is emulated on this device: the green recipe takes it only "
                         "where it is native")
    bf16 = native if bf16 is None else bf16
    cfg = dataclasses.replace(naive.config, lr=LM_GREEN_LR, lr_schedule="warmup-cosine",
                              warmup_steps=max(1, naive.config.steps // 10), stop_at_target=True,
                              eval_every=every, eval_batches=batches, fused=fused,
                              precision="bf16" if bf16 else "fp32", label="green")
    return naive._replace(config=cfg)


def small_mlp(num_classes: int = 10, input_shape=(1, 28, 28)):
    """A fresh SMALL_MLP (flatten, one hidden layer of 64 with ReLU, a linear head): the green
    recipe's network on a CPU."""
    return models.build("mlp", num_classes=num_classes, input_shape=input_shape, **SMALL_MLP)


def halving_lm_lr(model_fn, corpus, config, rates, first_share: float = 0.1, keep: int = 2,
                  device=None) -> tuple:
    """The green recipe's learning-rate search for a language model (lesson 10): successive halving
    (Jamieson & Talwalkar, AISTATS 2016; the rung of Li et al.'s Hyperband, JMLR 2018) over the same
    ``rates`` and the same most steps per trial as ``gl.lm.tune_lr``. Rung 1 trains every rate for
    ``first_share`` of ``config.steps`` (its schedule compressed to them) and scores each by its
    validation loss there (on the config's evaluation batches); rung 2 runs the ``keep`` best again from
    the start through ``gl.lm.tune_lr`` with ``config`` as it is (its stop at the target included). Returns (best
    rate, {rate: the rung-2 LMRun, or the rung-1 one for a rate dropped there, or None where it
    diverged}, joules of both rungs, {rate: "rung 1" or "rung 2"})."""
    import math

    rates = list(rates)
    if not rates:
        raise ValueError("rates must hold at least one learning rate")
    if isinstance(first_share, bool) or not isinstance(first_share, (int, float)) or not 0 < first_share < 1:
        raise ValueError(f"first_share must be a fraction in (0, 1), got {first_share!r}")
    if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= len(rates):
        raise ValueError(f"keep must be a whole number from 1 to {len(rates)}, got {keep!r}")
    short = max(1, round(config.steps * first_share))
    rung1 = dataclasses.replace(config, steps=short, eval_every=short, stop_at_target=False,
                                warmup_steps=min(config.warmup_steps, short - 1), label=f"{config.label} rung 1")
    _, first, spent1 = lm_comparison.tune_lr(model_fn, corpus, rung1, rates, device=device)
    ranked = sorted(rates, key=lambda r: math.inf if first[r] is None else first[r].val_loss)  # stable: first of equals
    kept = ranked[:keep]
    best, second, spent2 = lm_comparison.tune_lr(model_fn, corpus, config, kept, device=device)
    trials = {r: second[r] if r in second else first[r] for r in rates}
    where = {r: "rung 2" if r in second else "rung 1" for r in rates}
    return best, trials, spent1 + spent2, where


def quick_cnn(in_channels: int = 1, num_classes: int = 10):
    """A fresh quick-mode CNN: the reference CNN's shape at an eighth of its width (8, 16, 32)."""
    return models.build("cnn", in_channels=in_channels, num_classes=num_classes, **QUICK_CNN)


_LM_MODEL_FNS: dict = {}


def _lm_model_fn(size):
    """One model function per size (so both recipes of a size hold the same one)."""
    key = tuple(sorted(size.items()))
    if key not in _LM_MODEL_FNS:
        _LM_MODEL_FNS[key] = _new_lm_model_fn(size)
    return _LM_MODEL_FNS[key]


def _new_lm_model_fn(size):
    def tiny_gpt():
        return TinyGPT(d_model=size["d_model"], n_layers=size["n_layers"], n_heads=size["n_heads"],
                       max_seq_len=size["seq_len"])

    tiny_gpt.model_name = f"TinyGPT d{size['d_model']} x {size['n_layers']} layers"
    return tiny_gpt


def _config_types():
    return (TrainConfig, LMConfig)


def _ladder_for(config):
    return LM_LADDER if isinstance(config, LMConfig) else LADDER


def _samples_to_target(res):
    if res.steps_to_target is None:
        return None
    return res.steps_to_target * res.config["batch_size"] * res.config["accum_steps"]


def _data_spec(n_train, n_test, base=CAPSTONE_DATA) -> dict:
    spec = dict(base)
    if n_train is not None:
        spec["n_train"] = n_train
    if n_test is not None:
        spec["n_test"] = n_test
    return spec


def _size(quick, size):
    _check_quick(quick)
    if size is None:
        return "quick" if quick else "full"
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)} or None, got {size!r}")
    if quick and size == "full":
        raise ValueError("quick=True and size='full' disagree: give one of them")
    return size


def _check_quick(quick):
    if not isinstance(quick, bool):
        raise ValueError(f"quick must be True or False, got {quick!r}")


def _check_device(device):
    if device is None:
        return None
    if not isinstance(device, str) or not (device == "cpu" or device == "cuda" or device.startswith("cuda:")):
        raise ValueError(f"device must be 'cuda', 'cuda:N', 'cpu' or None, got {device!r}")
    return device


tutorial_cnn.model_name = "tutorial CNN"
reference_cnn.model_name = quick_cnn.model_name = "batch-norm CNN"
small_mlp.model_name = "MLP 784-64-10"
