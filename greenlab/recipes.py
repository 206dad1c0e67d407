"""Models and training recipes shared by ``benchmarks/gpu_suite.py`` and the capstone lesson.

A recipe is ``(model_fn, TrainConfig, data_spec)``: ``model_fn()`` builds a fresh model,
``data_spec`` is a dict of keyword arguments for ``gl.data.load`` (``name``, ``n_train``,
``n_test``). The suite records both recipes on a GPU; the capstone lesson imports the same
definitions so the recorded figures and the lesson describe the same runs.

Both recipes share the seed, the epoch budget and the evaluation schedule (in samples), so a
comparison of the two changes only what the recipes are about. ``tune_lr`` gives each recipe the
same learning-rate search (same candidates, same samples each, judged on the validation split),
and ``one_change_at_a_time`` builds the ladder of configs from one recipe to the other.

    from benchmarks.recipes import naive_recipe, green_recipe   # from the repository root
    model_fn, cfg, spec = green_recipe()
    res = gl.train(model_fn(), gl.data.load(**spec), cfg)
"""

from __future__ import annotations

import dataclasses

# The reference CNN the lessons and reference runs compare precisions on (gl.models.build options).
REFERENCE_CNN = {"depth": 3, "width": 64, "kernel_size": 3, "norm": "batch"}
# The ResNet recorded beside it: CIFAR-style ResNet-20 (depth 6n+2 with n = 3).
REFERENCE_RESNET = {"depth": 20, "width": 16, "norm": "batch"}
# Validation accuracy both capstone recipes must reach (fraction of the validation split); the
# test split gives the accuracy reported at the end.
CAPSTONE_TARGET_ACCURACY = 0.90
CAPSTONE_DATA = {"name": "fashion-mnist", "n_train": 60000, "n_test": 10000}
# Quick mode (``quick=True``, for CPU lessons and CI): the same recipes, shrunk so each run takes
# seconds on a laptop CPU. The reference CNN keeps its depth at an eighth of the width, the data
# keeps 1024/256 images and the target is lower, since a tiny run on the (often generated)
# stand-in data does not reach 90%. Full mode (the default) is what the GPU suite records.
QUICK_CNN = {**REFERENCE_CNN, "width": 8}
QUICK_DATA = {"name": "fashion-mnist", "n_train": 1024, "n_test": 256}
CAPSTONE_QUICK_TARGET_ACCURACY = 0.70
# Evaluation schedules, in samples (the same for both recipes whatever their batch size).
EVAL_EVERY_SAMPLES = 10240
QUICK_EVAL_EVERY_SAMPLES = 256
# Epoch budget of both recipes (the green one usually stops at the target well before it).
EPOCHS, QUICK_EPOCHS = 3, 3
# The learning-rate search every recipe gets (SGD with momentum 0.9): the same candidates, each
# trained on the same number of samples, judged by validation accuracy.
LR_CANDIDATES = (0.01, 0.03, 0.1)
TUNING_SAMPLES, QUICK_TUNING_SAMPLES = 20480, 768


def reference_cnn(in_channels: int = 1, num_classes: int = 10):
    """A fresh reference CNN (3 conv blocks of 64, 128, 256 channels, batch norm)."""
    from greenlab import models

    return models.build("cnn", in_channels=in_channels, num_classes=num_classes, **REFERENCE_CNN)


def reference_resnet(in_channels: int = 3, num_classes: int = 10):
    """A fresh ResNet-20 (widths 16, 32, 64) for 32x32 colour images."""
    from greenlab import models

    return models.build("resnet", in_channels=in_channels, num_classes=num_classes, **REFERENCE_RESNET)


def naive_recipe(device: str | None = None, n_train: int | None = None, n_test: int | None = None,
                 quick: bool = False):
    """The "just train it" baseline: fp32, small batches through a DataLoader, a fixed number
    of epochs with no stop at the target (the target is only recorded).

    ``device`` is accepted for symmetry with :func:`green_recipe` (the naive recipe is the same
    everywhere). ``n_train``/``n_test`` shrink the data (None: the full split in CAPSTONE_DATA).
    ``quick``: the CPU-sized version (QUICK_CNN, QUICK_DATA, CAPSTONE_QUICK_TARGET_ACCURACY).
    """
    from greenlab.train import TrainConfig

    _check_device(device)
    _check_quick(quick)
    if quick:
        cfg = TrainConfig(precision="fp32", batch_size=16, lr=0.03, epochs=QUICK_EPOCHS, loader="dataloader",
                          num_workers=0, pin_memory=False, target_accuracy=CAPSTONE_QUICK_TARGET_ACCURACY,
                          stop_at_target=False, eval_every_samples=QUICK_EVAL_EVERY_SAMPLES, label="naive")
        return quick_cnn, cfg, _data_spec(n_train, n_test, QUICK_DATA)
    cfg = TrainConfig(precision="fp32", batch_size=64, lr=0.03, epochs=EPOCHS, loader="dataloader",
                      num_workers=0, pin_memory=False, target_accuracy=CAPSTONE_TARGET_ACCURACY,
                      stop_at_target=False, eval_every_samples=EVAL_EVERY_SAMPLES, label="naive")
    return reference_cnn, cfg, _data_spec(n_train, n_test)


def green_recipe(device: str | None = None, n_train: int | None = None, n_test: int | None = None,
                 quick: bool = False):
    """The same model trained for less energy: bf16 autocast on a CUDA GPU with bf16 support
    (fp32 elsewhere, where bf16 autocast is usually slower), larger batches from a
    device-resident loader, channels-last memory on CUDA, and a stop as soon as the target
    validation accuracy is reached (checked on the same sample schedule as the naive recipe).

    ``device``: "cuda"/"cpu" (None: CUDA when available). ``quick``: the CPU-sized version
    (see :func:`naive_recipe`): batches of 32 against the naive 16.
    """
    import torch

    from greenlab.train import TrainConfig

    device = _check_device(device)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    on_cuda = device.startswith("cuda")
    bf16 = on_cuda and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    _check_quick(quick)
    if quick:
        cfg = TrainConfig(precision="bf16" if bf16 else "fp32", batch_size=32, lr=0.1, epochs=QUICK_EPOCHS,
                          loader="device", target_accuracy=CAPSTONE_QUICK_TARGET_ACCURACY, stop_at_target=True,
                          eval_every_samples=QUICK_EVAL_EVERY_SAMPLES, channels_last=on_cuda, label="green")
        return quick_cnn, cfg, _data_spec(n_train, n_test, QUICK_DATA)
    cfg = TrainConfig(precision="bf16" if bf16 else "fp32", batch_size=512, lr=0.1, epochs=EPOCHS,
                      loader="device", target_accuracy=CAPSTONE_TARGET_ACCURACY, stop_at_target=True,
                      eval_every_samples=EVAL_EVERY_SAMPLES, channels_last=on_cuda, label="green")
    return reference_cnn, cfg, _data_spec(n_train, n_test)


# fields the capstone's ladder changes, in order; each group is one row
LADDER = (
    (("loader", "num_workers", "pin_memory", "prefetch_factor"), "+ device data"),
    (("batch_size", "lr"), "+ batch {batch_size}, lr {lr:g}"),
    (("precision",), "+ {precision}"),
    (("channels_last",), "+ channels-last"),
)
_FREE = ("label", "stop_at_target")


def one_change_at_a_time(naive, green, stop_at_target: bool = True) -> dict:
    """{row name: TrainConfig} from ``naive`` to ``green``, each row changing one thing more
    (the groups in LADDER, in order; a group the two configs share is skipped). The first row
    is "naive", the last one equals ``green``. Every row gets ``stop_at_target`` (energy to the
    target does not depend on what a run does after it). Raises ValueError naming any other
    field in which the two differ (seed, epochs, evaluation schedule, ...): the ladder would not
    isolate it."""
    import dataclasses

    from greenlab.train import TrainConfig

    if not isinstance(naive, TrainConfig) or not isinstance(green, TrainConfig):
        raise ValueError("naive and green must be TrainConfigs")
    grouped = {f for fields, _ in LADDER for f in fields}
    other = [f.name for f in dataclasses.fields(TrainConfig)
             if f.name not in grouped and f.name not in _FREE and getattr(naive, f.name) != getattr(green, f.name)]
    if other:
        detail = ", ".join(f"{f} ({getattr(naive, f)!r} vs {getattr(green, f)!r})" for f in other)
        raise ValueError(f"the recipes also differ in {detail}; make them equal so that each row "
                         "of the ladder changes one thing")
    current = dataclasses.replace(naive, stop_at_target=stop_at_target, label="naive")
    rows = {"naive": current}
    for fields, name in LADDER:
        if all(getattr(current, f) == getattr(green, f) for f in fields):
            continue
        current = dataclasses.replace(current, **{f: getattr(green, f) for f in fields})
        label = name.format(**{f: getattr(green, f) for f in fields})
        rows[label] = dataclasses.replace(current, label=label)
    return rows


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
        lines = [f"{self.label}: {len(self.rows)} learning rates, {self.samples_per_candidate} samples each "
                 f"(validation accuracy), {self.joules:.4g} J{' (estimate)' if self.estimated else ''}"]
        for r in self.rows:
            acc = "-" if r["val_accuracy"] is None else f"{r['val_accuracy']:.1%}"
            mark = "  <- chosen" if r["lr"] == self.best_lr else ""
            lines.append(f"  lr {r['lr']:<8g} {acc:>7}  {r['status']}{mark}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def tune_lr(model_fn, data, config, candidates=LR_CANDIDATES, samples: int = QUICK_TUNING_SAMPLES,
            **train_kwargs) -> LrTuning:
    """Train ``model_fn()`` with ``config`` at each learning rate in ``candidates`` for
    ``samples`` training samples (no target, no early stop, the same seed for each) and choose
    the one with the best validation accuracy at the end (the first on a tie; a diverged run
    never wins). Give every recipe the same ``candidates`` and ``samples``: that is the same
    tuning budget. ``train_kwargs`` go to ``gl.train`` (default log=False, save=False)."""
    import math

    from greenlab import progress
    from greenlab.config import seed_everything
    from greenlab.train import TrainConfig, train

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
    rows, runs = [], []
    lines = progress.Steps(f"greenlab.tune_lr {config.label or 'recipe'}", len(candidates), unit="trial")
    for lr in candidates:
        lines.start(f"lr {lr:g}, {steps} steps")
        cfg = dataclasses.replace(config, lr=float(lr), max_steps=steps, epochs=epochs, target_accuracy=None,
                                  patience=None, eval_every=None, eval_every_samples=None,
                                  label=f"{config.label or 'recipe'} lr {lr:g}")
        seed_everything(cfg.seed)
        res = train(model_fn(), data, cfg, **kwargs)
        runs.append(res)
        ok = res.status != "diverged" and res.val_accuracy is not None
        rows.append({"lr": float(lr), "val_accuracy": res.val_accuracy if ok else None,
                     "joules": res.joules, "seconds": res.seconds, "status": res.status})
        lines.done(f"validation {res.val_accuracy:.1%}, {res.seconds:.3g} s" if ok else res.status)
    scored = [r for r in rows if r["val_accuracy"] is not None]
    if not scored:
        raise ValueError(f"every learning rate in {candidates} diverged; try smaller ones")
    best = max(scored, key=lambda r: r["val_accuracy"])  # max keeps the first of equals
    return LrTuning(config.label or "recipe", rows, best["lr"], steps * config.effective_batch_size,
                    sum(r.joules for r in runs), sum(r.seconds for r in runs), any(r.estimated for r in runs))


def quick_cnn(in_channels: int = 1, num_classes: int = 10):
    """A fresh quick-mode CNN: the reference CNN's shape at an eighth of its width (8, 16, 32)."""
    from greenlab import models

    return models.build("cnn", in_channels=in_channels, num_classes=num_classes, **QUICK_CNN)


def _data_spec(n_train, n_test, base=CAPSTONE_DATA) -> dict:
    spec = dict(base)
    if n_train is not None:
        spec["n_train"] = n_train
    if n_test is not None:
        spec["n_test"] = n_test
    return spec


def _check_quick(quick):
    if not isinstance(quick, bool):
        raise ValueError(f"quick must be True or False, got {quick!r}")


def _check_device(device):
    if device is None:
        return None
    if not isinstance(device, str) or not (device == "cpu" or device == "cuda" or device.startswith("cuda:")):
        raise ValueError(f"device must be 'cuda', 'cuda:N', 'cpu' or None, got {device!r}")
    return device
