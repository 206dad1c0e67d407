"""Models and training recipes shared by ``benchmarks/gpu_suite.py`` and the capstone lesson.

A recipe is ``(model_fn, TrainConfig, data_spec)``: ``model_fn()`` builds a fresh model,
``data_spec`` is a dict of keyword arguments for ``gl.data.load`` (``name``, ``n_train``,
``n_test``). The suite records both recipes on a GPU; the capstone lesson imports the same
definitions so the recorded figures and the lesson describe the same runs.

    from benchmarks.recipes import naive_recipe, green_recipe   # from the repository root
    model_fn, cfg, spec = green_recipe()
    res = gl.train(model_fn(), gl.data.load(**spec), cfg)
"""

from __future__ import annotations

# The reference CNN the lessons and reference runs compare precisions on (gl.models.build options).
REFERENCE_CNN = {"depth": 3, "width": 64, "kernel_size": 3, "norm": "batch"}
# The ResNet recorded beside it: CIFAR-style ResNet-20 (depth 6n+2 with n = 3).
REFERENCE_RESNET = {"depth": 20, "width": 16, "norm": "batch"}
# Test accuracy both capstone recipes are judged by (fraction of the test split).
CAPSTONE_TARGET_ACCURACY = 0.90
CAPSTONE_DATA = {"name": "fashion-mnist", "n_train": 60000, "n_test": 10000}
# Quick mode (``quick=True``, for CPU lessons and CI): the same recipes, shrunk so each run takes
# seconds on a laptop CPU. The reference CNN keeps its depth at an eighth of the width, the data
# keeps 1024/256 images and the target is lower, since a tiny run on the (often generated)
# stand-in data does not reach 90%. Full mode (the default) is what the GPU suite records.
QUICK_CNN = {**REFERENCE_CNN, "width": 8}
QUICK_DATA = {"name": "fashion-mnist", "n_train": 1024, "n_test": 256}
CAPSTONE_QUICK_TARGET_ACCURACY = 0.80


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
        cfg = TrainConfig(precision="fp32", batch_size=16, lr=0.02, epochs=5, loader="dataloader",
                          num_workers=0, pin_memory=False, target_accuracy=CAPSTONE_QUICK_TARGET_ACCURACY,
                          stop_at_target=False, eval_every=16, label="naive")
        return quick_cnn, cfg, _data_spec(n_train, n_test, QUICK_DATA)
    cfg = TrainConfig(precision="fp32", batch_size=64, lr=0.02, epochs=2, loader="dataloader",
                      num_workers=0, pin_memory=False, target_accuracy=CAPSTONE_TARGET_ACCURACY,
                      stop_at_target=False, eval_every=200, label="naive")
    return reference_cnn, cfg, _data_spec(n_train, n_test)


def green_recipe(device: str | None = None, n_train: int | None = None, n_test: int | None = None,
                 quick: bool = False):
    """The same model trained for less energy: bf16 autocast on a CUDA GPU with bf16 support
    (fp32 elsewhere, where bf16 autocast is usually slower), larger batches from a
    device-resident loader, channels-last memory on CUDA, and a stop as soon as the target
    accuracy is reached (checked every 20 steps).

    ``device``: "cuda"/"cpu" (None: CUDA when available). ``quick``: the CPU-sized version
    (see :func:`naive_recipe`): batches of 32 against the naive 16, checked every 8 steps.
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
        cfg = TrainConfig(precision="bf16" if bf16 else "fp32", batch_size=32, lr=0.1, epochs=8,
                          loader="device", target_accuracy=CAPSTONE_QUICK_TARGET_ACCURACY,
                          stop_at_target=True, eval_every=8, channels_last=on_cuda, label="green")
        return quick_cnn, cfg, _data_spec(n_train, n_test, QUICK_DATA)
    cfg = TrainConfig(precision="bf16" if bf16 else "fp32", batch_size=512, lr=0.1, epochs=4,
                      loader="device", target_accuracy=CAPSTONE_TARGET_ACCURACY, stop_at_target=True,
                      eval_every=20, channels_last=on_cuda, label="green")
    return reference_cnn, cfg, _data_spec(n_train, n_test)


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
