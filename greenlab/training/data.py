"""Datasets as tensors, and the two ways to feed them to a model.

``load(name)`` returns a ``Dataset`` bundle of normalised float images (N, C, H, W) and long
labels. FashionMNIST and CIFAR-10 come through torchvision's own dataset classes from one shared
cache (``greenlab.session.config.cache_dir()``, or ``root``), checked against torchvision's checksums and
downloaded when missing, except in quick mode and CI, which never use the network (the rules,
``GREENLAB_DOWNLOAD`` included, are in ``greenlab.training.datacache``). Without the files, ``load``
generates a deterministic stand-in of the same shape and says so in one line
(``.source == "generated"``, ``.note``).

Loaders:
- ``DeviceLoader``: the whole dataset lives on the device; shuffling and augmentation are tensor
  operations there (the fast path, no worker processes).
- ``make_dataloader``: ``torch.utils.data.DataLoader`` with workers and pinned memory, for the
  data-pipeline lesson.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from greenlab.training.catalogue import (
    ALIASES as _ALIASES,
    DATASETS,
    SPECS as _SPECS,
    canonical as _canonical,
)  # noqa: F401
from greenlab.session import config
from greenlab.training import datacache
from greenlab.base import limits, validation
from greenlab.base.paths import user_cache_dir
# The validation split: this share of the training images, at least 1 and at most VAL_MAX_SIZE.
VAL_FRACTION = 0.1
VAL_MAX_SIZE = 5000


@dataclass
class Dataset:
    """Train, validation and test splits as tensors. Images: float (N, C, H, W), normalised with
    the training split's per-channel mean and std (``mean``/``std``, in [0, 1] pixel units);
    labels: long.

    ``val_x``/``val_y`` are held out from the training data (never trained on): targets, early
    stopping, patience and schedules read them while training; the test split is kept for the
    one accuracy reported at the end. A Dataset built without them carves them from the training
    tensors given (``validation_size`` rows, chosen with a seeded permutation)."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    source: str  # "torchvision" or "generated"
    note: str = ""
    mean: tuple = ()
    std: tuple = ()
    classes: list = field(default_factory=list)
    val_x: torch.Tensor | None = None
    val_y: torch.Tensor | None = None

    def __post_init__(self):
        if (self.val_x is None) != (self.val_y is None):
            raise ValueError("val_x and val_y must be given together (or both left out to carve a "
                             "validation split from the training data)")
        if self.val_x is None:
            self.train_x, self.train_y, self.val_x, self.val_y = split_validation(
                self.train_x, self.train_y, validation_size(int(self.train_x.shape[0])))
        elif self.val_x.shape[0] != self.val_y.shape[0]:
            raise ValueError(f"val_x and val_y differ in length: {self.val_x.shape[0]} vs {self.val_y.shape[0]}")

    @property
    def input_shape(self) -> tuple:
        """(C, H, W) of one image."""
        return tuple(self.train_x.shape[1:])

    @property
    def n_train(self) -> int:
        return int(self.train_x.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_x.shape[0])

    @property
    def n_val(self) -> int:
        return int(self.val_x.shape[0])

    def describe(self) -> str:
        """One line: name, sizes, shape, source."""
        return (f"{self.name}: {self.n_train} train / {self.n_val} validation / {self.n_test} test "
                f"images of shape {self.input_shape}, {self.num_classes} classes, source {self.source}")

    def __repr__(self) -> str:
        return f"Dataset({self.describe()})"

    def subset(self, train_indices=None, classes=None) -> "Dataset":
        """A smaller dataset: ``classes`` keeps only those labels in both splits and relabels
        them 0..len(classes)-1 (a new task from the same images); ``train_indices`` then picks
        training rows (a list, a tensor of indices, or an int n for the first n). The validation
        and test splits are kept whole (after the class filter), so accuracies stay comparable and
        no validation image ever becomes a training image."""
        train_x, train_y, test_x, test_y = self.train_x, self.train_y, self.test_x, self.test_y
        val_x, val_y = self.val_x, self.val_y
        num_classes, names = self.num_classes, list(self.classes)
        if classes is not None:
            keep = [int(c) for c in classes]
            if not keep or len(set(keep)) != len(keep) or not all(0 <= c < self.num_classes for c in keep):
                raise ValueError(f"classes must be distinct labels in 0..{self.num_classes - 1}, got {classes!r}")
            order = torch.tensor(sorted(keep))
            relabel = torch.full((self.num_classes,), -1, dtype=torch.long)
            relabel[torch.tensor(keep)] = torch.arange(len(keep))
            train_rows = torch.isin(train_y, order.to(train_y.device))
            test_rows = torch.isin(test_y, order.to(test_y.device))
            val_rows = torch.isin(val_y, order.to(val_y.device))
            train_x, train_y = train_x[train_rows], relabel.to(train_y.device)[train_y[train_rows]]
            test_x, test_y = test_x[test_rows], relabel.to(test_y.device)[test_y[test_rows]]
            val_x, val_y = val_x[val_rows], relabel.to(val_y.device)[val_y[val_rows]]
            num_classes, names = len(keep), [names[c] for c in keep] if names else [str(c) for c in keep]
        if train_indices is not None:
            if isinstance(train_indices, int) and not isinstance(train_indices, bool):
                if not 0 < train_indices <= len(train_y):
                    raise ValueError(f"train_indices as a count must be in 1..{len(train_y)}, got {train_indices}")
                rows = torch.arange(train_indices)
            else:
                rows = torch.as_tensor(train_indices, dtype=torch.long)
                if rows.ndim != 1 or len(rows) == 0 or int(rows.min()) < 0 or int(rows.max()) >= len(train_y):
                    raise ValueError(f"train_indices must be a non-empty 1-D list of rows in 0..{len(train_y) - 1}")
            train_x, train_y = train_x[rows.to(train_x.device)], train_y[rows.to(train_y.device)]
        return dataclasses.replace(self, train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y,
                                   val_x=val_x, val_y=val_y, num_classes=num_classes, classes=names)


def validation_size(n_train: int) -> int:
    """Validation images held out for ``n_train`` training images: VAL_FRACTION of them,
    rounded, at least 1 and at most VAL_MAX_SIZE (0 when there are fewer than 2)."""
    if n_train < 2:
        return 0
    return min(VAL_MAX_SIZE, max(1, round(VAL_FRACTION * n_train)))


def split_validation(x: torch.Tensor, y: torch.Tensor, n_val: int, seed: int = 0):
    """(train_x, train_y, val_x, val_y): ``n_val`` rows chosen by a seeded permutation are held
    out; the remaining rows keep their order. Same inputs and seed, same split."""
    n = int(x.shape[0])
    if isinstance(n_val, bool) or not isinstance(n_val, int) or not 0 <= n_val < max(n, 1):
        raise ValueError(f"n_val must be an integer in 0..{max(n - 1, 0)} (some rows must stay for "
                         f"training), got {n_val!r}")
    held = torch.zeros(n, dtype=torch.bool)
    held[torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))[:n_val]] = True
    held = held.to(x.device)
    return x[~held], y[~held], x[held], y[held]


def load(name: str, n_train: int | None = None, n_test: int | None = None, root=None,
         download: bool | None = None, seed: int = 0, difficulty: float = 1.0,
         verbose: bool = True) -> Dataset:
    """Load ``name`` ("fashion-mnist", "cifar10" or "synthetic") as a ``Dataset``.

    ``n_train``/``n_test``: how many images to keep (a seeded random subset; None = all).
    ``root``: folder holding torchvision's files (default ``greenlab.session.config.cache_dir()``).
    ``download``: None lets ``GREENLAB_DOWNLOAD`` and quick mode decide (``datacache.policy``);
    True tries a download when the files are missing, False never does.
    ``difficulty``: noise scale of the generated stand-in (1.0 default; larger is harder).
    Prints one line saying where the data came from (``verbose=False`` to silence). Raises
    RuntimeError when ``GREENLAB_DOWNLOAD=1`` requires a download that fails.
    """
    key = _canonical(name)
    tv_name, shape, num_classes, full_train, full_test = _SPECS[key]
    n_train = _check_size("n_train", n_train, full_train)
    n_test = _check_size("n_test", n_test, full_test)
    if not isinstance(difficulty, (int, float)) or not difficulty >= 0:
        raise ValueError(f"difficulty must be a number >= 0, got {difficulty!r}")
    mode, why = datacache.policy(download)
    root = Path(root).expanduser() if root is not None else config.cache_dir()

    ds = None
    reason = "the synthetic dataset is always generated"
    if tv_name is not None:
        ds, reason = _load_torchvision(key, tv_name, root, (mode, why), n_train, n_test, seed)
    if ds is None:
        ds = generate(key, n_train, n_test, seed=seed, difficulty=difficulty)
        ds.note = (f"generated stand-in with the shape of {key} {shape}: {reason}. "
                   "Seeded textured shapes, calibrated so that models rank and learn as on "
                   f"FashionMNIST; numbers from it are not comparable with published {key} results.")
    if verbose:
        if ds.source == "generated":  # one line; ds.note has the whole story
            why = reason.split(" (stage it with")[0].split("; stage it with")[0]
            print(f"greenlab.data: {ds.describe()}. NOTE: not the real {key} ({why}); its numbers "
                  "are not comparable with published results")
        else:
            print(f"greenlab.data: {ds.describe()} ({ds.note})")
    return ds


# image-sized float32 tensors _samples holds at its peak, counted from its code (along, stripes, image,
# x, the noise, their product and their sum): the memory generate() needs per image
GENERATE_PEAK_COPIES = 7


def generate(name: str = "synthetic", n_train: int = 1000, n_test: int = 200, seed: int = 0,
             difficulty: float = 1.0, shape: tuple | None = None, num_classes: int | None = None) -> Dataset:
    """A deterministic image-classification stand-in, calibrated so that the course's models
    relate as they do on FashionMNIST: a linear model well below an MLP, below the small CNN,
    accuracy rising over several evaluations, and errors mostly within confusable pairs.

    Each class has a smooth silhouette (shared by several classes), a brightness and a striped
    texture. An image is its class silhouette filled with the texture at a random phase, its
    direction jittered, shifted by up to 5 pixels (at 28 x 28), plus Gaussian pixel noise (std
    0.3 x ``difficulty``, pixels in [0, 1]). The pairs in ``CONFUSABLE_PAIRS`` share a silhouette
    and differ only in the texture's direction, as T-shirts and shirts do. Same seed, same data.
    Numbers on it are not comparable with published results on the real datasets.
    """
    key = _canonical(name)
    validation.integer("n_train", n_train, low=1, high=10**7)
    validation.integer("n_test", n_test, low=1, high=10**7)
    validation.integer("seed", seed, low=0, high=2**63 - 1)
    validation.number("difficulty", difficulty, low=0, high=100)
    _, default_shape, default_classes, _, _ = _SPECS[key]
    shape = tuple(shape or default_shape)
    num_classes = int(num_classes or default_classes)
    if len(shape) != 3 or min(shape) < 1 or num_classes < 2:
        raise ValueError(f"shape must be (C, H, W) with positive sizes and num_classes >= 2, "
                         f"got {shape}, {num_classes}")
    g = torch.Generator().manual_seed(int(seed))
    for name, count in (("n_train", n_train), ("n_test", n_test)):  # float32 images, allocated now
        limits.held(name, count, what="images generated", now=True,
                    bytes_each=GENERATE_PEAK_COPIES * 4 * math.prod(shape))
    protos = _prototypes(num_classes, shape, g)
    train_x, train_y = _samples(protos, n_train, difficulty, g)
    test_x, test_y = _samples(protos, n_test, difficulty, g)
    val = _samples(protos, validation_size(n_train), difficulty, g)  # drawn like training images
    ds = _finish(key, train_x, train_y, test_x, test_y, num_classes, "generated", "", val=val)
    ds.classes = [f"pattern {i}" for i in range(num_classes)]
    return ds


class DeviceLoader:
    """Batches (x, y) from tensors held on ``device``; shuffles with ``torch.randperm`` on the
    device (seeded generator) and augments on tensors. No worker processes.

    ``augment``: None, True/"standard" (flip + 4-pixel crop), or an ``Augment``.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, shuffle: bool = True,
                 augment=None, device=None, drop_last: bool = False, seed: int = 0):
        for label, t in (("x", x), ("y", y)):
            if not isinstance(t, torch.Tensor) or t.dim() < 1:
                raise validation.ArgumentTypeError(f"{label} must be a tensor with a batch dimension, got {t!r}")
        validation.flag("shuffle", shuffle)
        validation.flag("drop_last", drop_last)
        validation.integer("seed", seed, low=0, high=2**63 - 1)
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"x and y differ in length: {x.shape[0]} vs {y.shape[0]}")
        if x.shape[0] == 0:
            raise ValueError("DeviceLoader needs at least one sample")
        dev = torch.device(device) if device is not None else x.device
        self.device = dev
        self.x = x.to(dev)
        self.y = y.to(dev)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.augment = as_augment(augment)
        self.generator = torch.Generator(device=dev).manual_seed(int(seed))
        self.batch_size = 1
        self.set_batch_size(batch_size)

    def set_batch_size(self, batch_size: int) -> None:
        """Change the batch size for the next pass (for batch-size schedules)."""
        self.batch_size = _check_batch_size(batch_size)

    def __len__(self) -> int:
        n = self.x.shape[0]
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self):
        n = self.x.shape[0]
        bs = self.batch_size
        order = torch.randperm(n, device=self.device, generator=self.generator) if self.shuffle else None
        stop = (n // bs) * bs if self.drop_last else n
        for start in range(0, stop, bs):
            if order is None:
                xb, yb = self.x[start:start + bs], self.y[start:start + bs]
            else:
                idx = order[start:start + bs]
                xb, yb = self.x[idx], self.y[idx]
            if self.augment is not None:
                xb = self.augment.apply(xb, self.generator)
            yield xb, yb


@dataclass(frozen=True)
class Augment:
    """Random horizontal flip (probability 0.5) and random crop after zero-padding by
    ``crop_padding`` pixels, done on a batch tensor."""

    flip: bool = True
    crop_padding: int = 4

    def __post_init__(self):
        validation.flag("flip", self.flip)
        validation.integer("crop_padding", self.crop_padding, low=0, high=64)

    def apply(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Augment a batch (N, C, H, W); returns a new tensor."""
        n, _, h, w = x.shape
        if self.flip:
            mask = torch.rand(n, device=x.device, generator=generator) < 0.5
            x = torch.where(mask[:, None, None, None], x.flip(3), x)
        p = self.crop_padding
        if p > 0:
            padded = F.pad(x, (p, p, p, p))
            oy = torch.randint(0, 2 * p + 1, (n,), device=x.device, generator=generator)
            ox = torch.randint(0, 2 * p + 1, (n,), device=x.device, generator=generator)
            rows = (oy[:, None] + torch.arange(h, device=x.device))[:, :, None]  # (n, h, 1)
            cols = (ox[:, None] + torch.arange(w, device=x.device))[:, None, :]  # (n, 1, w)
            batch = torch.arange(n, device=x.device)[:, None, None]
            x = padded.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2).contiguous()
        return x


def as_augment(augment) -> Augment | None:
    """None/False -> None; True/"standard" -> Augment(); an Augment passes through."""
    if augment is None or augment is False:
        return None
    if augment is True or augment == "standard":
        return Augment()
    if isinstance(augment, Augment):
        return augment
    raise ValueError(f"augment must be None, True, 'standard' or an Augment(...), got {augment!r}")


def make_dataloader(ds, batch_size: int, num_workers: int = 0, pin_memory: bool = False,
                    prefetch_factor: int | None = None, augment=None, shuffle: bool = True,
                    split: str = "train", drop_last: bool = False, seed: int = 0) -> "TorchLoader":
    """A ``torch.utils.data.DataLoader`` over a ``Dataset`` split (batches arrive on the CPU).

    Augmentation runs per sample in the loader (in its worker processes when ``num_workers`` > 0).
    ``ds`` may also be a ``torch.utils.data.Dataset`` yielding (x, y).
    """
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    if not isinstance(num_workers, int) or num_workers < 0:
        raise ValueError(f"num_workers must be an integer >= 0, got {num_workers!r}")
    if prefetch_factor is not None and (num_workers == 0 or prefetch_factor < 1):
        raise ValueError("prefetch_factor needs num_workers > 0 and must be >= 1")
    if isinstance(ds, Dataset):
        x, y = {"train": (ds.train_x, ds.train_y), "val": (ds.val_x, ds.val_y),
                "test": (ds.test_x, ds.test_y)}[split]
        source = _AugmentedTensors(x.cpu(), y.cpu(), as_augment(augment), seed)
    else:
        if augment is not None:
            raise ValueError("augment is only supported for greenlab Dataset bundles")
        source = ds
    return TorchLoader(source, batch_size, num_workers=num_workers, pin_memory=pin_memory,
                       prefetch_factor=prefetch_factor, shuffle=shuffle, drop_last=drop_last, seed=seed)


class TorchLoader:
    """A DataLoader whose batch size can change between passes (it is rebuilt on change).

    Shuffled passes draw ``torch.randperm`` from ``generator`` once per pass, as ``DeviceLoader``
    does, so on a CPU both loaders with the same seed give the same sample order (a comparison
    of the two then changes only how batches are delivered). Worker seeds come from a second
    generator, so they do not shift the order."""

    def __init__(self, source, batch_size, num_workers=0, pin_memory=False, prefetch_factor=None,
                 shuffle=True, drop_last=False, seed=0):
        self.source = source
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = torch.Generator().manual_seed(int(seed))
        self.worker_generator = torch.Generator().manual_seed(int(seed))
        self.batch_size = _check_batch_size(batch_size)
        self.loader = self._build()

    def set_batch_size(self, batch_size: int) -> None:
        """Change the batch size for the next pass."""
        batch_size = _check_batch_size(batch_size)
        if batch_size != self.batch_size:
            self.batch_size = batch_size
            self.loader = self._build()

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        return iter(self.loader)

    def _build(self):
        kw = {}
        if self.num_workers > 0:
            kw["persistent_workers"] = False
            if self.prefetch_factor is not None:
                kw["prefetch_factor"] = self.prefetch_factor
        sampler = _Permutation(len(self.source), self.generator) if self.shuffle else None
        return torch.utils.data.DataLoader(self.source, batch_size=self.batch_size, sampler=sampler,
                                           num_workers=self.num_workers, pin_memory=self.pin_memory,
                                           drop_last=self.drop_last, generator=self.worker_generator, **kw)


class _Permutation(torch.utils.data.Sampler):
    """A fresh ``torch.randperm(n, generator=generator)`` per pass."""

    def __init__(self, n, generator):
        self.n, self.generator = n, generator

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=self.generator).tolist())

    def __len__(self):
        return self.n


# --- helpers ---------------------------------------------------------------------------

class _AugmentedTensors(torch.utils.data.Dataset):
    """Tensor pairs with optional per-sample augmentation (runs in loader workers)."""

    def __init__(self, x, y, augment, seed):
        self.x, self.y, self.augment, self.seed = x, y, augment, seed

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        xi = self.x[i]
        if self.augment is not None:
            xi = self.augment.apply(xi.unsqueeze(0)).squeeze(0)
        return xi, self.y[i]


def _check_size(label: str, value, full: int) -> int:
    if value is None:
        return full
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{label} must be a positive integer or None (all), got {value!r}")
    return value


def _check_batch_size(batch_size) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size


def _writable_cache_fix() -> str:
    """What to do when the dataset cache cannot be written, in one clause."""

    return (f"set GREENLAB_CACHE_DIR to a folder you can write, e.g. GREENLAB_CACHE_DIR={user_cache_dir()} "
            "(in a notebook: %env GREENLAB_CACHE_DIR=..., then run the cell again), or ask the admin "
            "to stage the datasets there with `greenlab data fetch`")


def _load_torchvision(key, tv_name, root: Path, policy: tuple, n_train, n_test, seed):
    """(Dataset, "") from torchvision, or (None, reason) when it cannot be had. ``policy``:
    (mode, why) from ``datacache.policy``; mode "require" turns a failed download into an error."""
    mode, why = policy
    if importlib.util.find_spec("torchvision") is None:  # found without importing it (over a second)
        return None, "torchvision is not installed (pip install torchvision)"
    try:
        found = datacache.ensure(key, root, network=mode != "never")
    except PermissionError as exc:  # a read-only cache (a package folder, a hub's shared install)
        if mode == "require":
            raise RuntimeError(f"{tv_name} cannot be cached in {root}: {exc}; {_writable_cache_fix()}") from None
        return None, (f"the dataset cache {root} is not writable here ({exc.strerror or exc}): "
                      f"{_writable_cache_fix()}")
    except (datacache.FetchError, OSError) as exc:
        if mode == "require":
            raise RuntimeError(f"{tv_name} could not be downloaded into {root} and {why}: {exc}") from None
        return None, (f"a download of {tv_name} into {root} was tried and failed: {exc} "
                      f"(stage it with `greenlab data fetch {key}`, or set GREENLAB_DOWNLOAD=0 not to try)")
    if not found.usable:
        return None, (f"{tv_name} is {found.state} in {root} ({found.detail}) and {why}; "
                      f"stage it with `greenlab data fetch {key}`")
    try:  # only now: reading the files needs torchvision (over a second to import), finding them does not
        import torchvision.datasets as tvd
    except Exception as exc:  # noqa: BLE001
        return None, f"torchvision could not be imported ({exc})"
    cls = getattr(tvd, tv_name)
    try:
        train = cls(str(root), train=True, download=False)
        test = cls(str(root), train=False, download=False)
    except Exception as exc:  # noqa: BLE001 - unreadable files fall back, with the reason shown
        return None, f"{tv_name} in {root} could not be read ({type(exc).__name__}: {exc})"
    checked = ("checksums verified" if found.state == "verified"
               else "checksums not verified: the archives are not in the cache")
    tx, ty = _tensors(train)
    vx, vy = _tensors(test)
    n_val = validation_size(min(n_train, tx.shape[0]))
    tx, ty = _subset(tx, ty, n_train + n_val, seed)  # the validation rows come from the training pool
    tx, ty, val_x, val_y = split_validation(tx, ty, min(n_val, tx.shape[0] - 1), seed)
    vx, vy = _subset(vx, vy, n_test, seed + 1)
    ds = _finish(key, tx, ty, vx, vy, len(train.classes), "torchvision",
                 f"torchvision.datasets.{tv_name} from {root}, {checked}", val=(val_x, val_y))
    ds.classes = list(train.classes)
    return ds, ""


def _tensors(tv_ds):
    data = tv_ds.data
    if not isinstance(data, torch.Tensor):  # CIFAR: numpy (N, H, W, C) uint8
        data = torch.from_numpy(data).permute(0, 3, 1, 2)
    elif data.dim() == 3:  # MNIST family: (N, H, W) uint8
        data = data.unsqueeze(1)
    x = data.contiguous().float().div_(255.0)
    y = torch.as_tensor(tv_ds.targets, dtype=torch.long)
    return x, y


def _subset(x, y, n, seed):
    if n >= x.shape[0]:
        return x, y
    idx = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(int(seed)))[:n]
    return x[idx], y[idx]


def _finish(key, tx, ty, vx, vy, num_classes, source, note, val) -> Dataset:
    """Normalise every split with the training split's per-channel mean and std. ``val``: the
    validation (x, y), held out from the training images before this point."""
    mean = tx.mean(dim=(0, 2, 3))
    std = tx.std(dim=(0, 2, 3)).clamp_min(1e-6) if tx.shape[0] > 1 else torch.ones_like(mean)
    tx = (tx - mean[None, :, None, None]) / std[None, :, None, None]
    vx = (vx - mean[None, :, None, None]) / std[None, :, None, None]
    val_x = (val[0] - mean[None, :, None, None]) / std[None, :, None, None]
    return Dataset(name=key, train_x=tx.contiguous(), train_y=ty.long(), test_x=vx.contiguous(),
                   test_y=vy.long(), val_x=val_x.contiguous(), val_y=val[1].long(),
                   num_classes=num_classes, source=source, note=note,
                   mean=tuple(round(float(m), 6) for m in mean), std=tuple(round(float(s), 6) for s in std))


# The generated stand-in (see ``generate``). Classes that share a silhouette and differ only in
# the direction of their texture, like FashionMNIST's T-shirt/shirt, pullover/coat, sandal/sneaker:
CONFUSABLE_PAIRS = ((0, 6), (2, 4), (5, 7))
_SILHOUETTES = 4          # distinct outlines shared among the classes
_PAIR_ANGLE = 0.4         # radians between the textures of a confusable pair
_ANGLE_JITTER = 0.15      # radians, per-image spread of the texture direction
_PERIOD_PX = 4.0          # texture period of most classes, pixels
_NOISE = 0.3              # pixel noise std at difficulty 1 (pixel values in [0, 1])
_SHIFT = 5 / 28           # largest shift, as a share of the image size (5 px at 28 x 28)


@dataclass(frozen=True)
class _Classes:
    """What defines each class of the stand-in: a silhouette, a brightness per channel and a
    striped texture (direction in radians, frequency in cycles per pixel)."""

    silhouettes: torch.Tensor  # (K, H, W) in [0, 1]
    colors: torch.Tensor       # (K, C)
    angles: torch.Tensor       # (K,)
    freqs: torch.Tensor        # (K,)
    phases: torch.Tensor       # (K,)

    @property
    def shape(self):
        k, h, w = self.silhouettes.shape
        return k, self.colors.shape[1], h, w


def _pairs(num_classes):
    if num_classes == 10:
        return CONFUSABLE_PAIRS
    return tuple((i, i + 1) for i in range(0, min(6, num_classes - 1), 2))


def _prototypes(num_classes, shape, g) -> _Classes:
    """The class definitions of the stand-in, drawn from ``g``."""
    c, h, w = shape
    pairs = _pairs(num_classes)
    family = list(range(num_classes))
    for a, b in pairs:
        family[b] = a
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    window = torch.exp(-(xx ** 2 + yy ** 2) / (2 * 0.45 ** 2))
    outline = _smooth(num_classes, h, w, g)
    own = _smooth(num_classes, h, w, g)
    silhouettes = torch.stack([torch.sigmoid(3.0 * (outline[family[k] % _SILHOUETTES] + 0.35 * own[k])) * window
                               for k in range(num_classes)])
    singles = [k for k in range(num_classes) if family[k] == k]
    angles, freqs = torch.zeros(num_classes), torch.zeros(num_classes)
    order = torch.randperm(len(singles), generator=g).tolist()
    for k, j in zip(singles, order):  # four directions, at three frequencies
        angles[k] = math.pi * (j % 4) / 4 + 0.3 * float(torch.rand(1, generator=g))
        freqs[k] = (1.0 if j < 4 else 0.6 if j < 8 else 1.5) / _PERIOD_PX
    for a, b in pairs:
        angles[b], freqs[b] = angles[a] + _PAIR_ANGLE, freqs[a]
    phases = 2 * math.pi * torch.rand(num_classes, generator=g)
    colors = 0.5 + torch.rand(num_classes, c, generator=g)
    return _Classes(silhouettes, colors, angles, freqs, phases)


def _samples(classes: _Classes, n, difficulty, g):
    """``n`` labelled images in [0, 1]: a class silhouette of random brightness, striped with the
    class texture (random phase, jittered direction and contrast), shifted, plus pixel noise."""
    num_classes, c, h, w = classes.shape
    y = torch.arange(n) % num_classes
    y = y[torch.randperm(n, generator=g)]
    yy, xx = torch.meshgrid(torch.arange(h) - (h - 1) / 2, torch.arange(w) - (w - 1) / 2, indexing="ij")
    angle = classes.angles[y] + _ANGLE_JITTER * torch.randn(n, generator=g)
    phase = classes.phases[y] + 2 * math.pi * torch.rand(n, generator=g)
    along = xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None]
    stripes = torch.sin(2 * math.pi * classes.freqs[y][:, None, None] * along + phase[:, None, None])
    brightness = 0.5 + 0.5 * torch.rand(n, generator=g)
    contrast = 0.8 + 0.4 * torch.rand(n, generator=g)
    image = classes.silhouettes[y] * (brightness[:, None, None] + contrast[:, None, None] * stripes)
    image = image[:, None] * classes.colors[y][:, :, None, None]
    max_shift = max(1, round(_SHIFT * min(h, w)))
    dy = torch.randint(-max_shift, max_shift + 1, (n,), generator=g)
    dx = torch.randint(-max_shift, max_shift + 1, (n,), generator=g)
    x = torch.empty_like(image)
    for sy in range(-max_shift, max_shift + 1):  # one roll per distinct shift
        for sx in range(-max_shift, max_shift + 1):
            sel = (dy == sy) & (dx == sx)
            if sel.any():
                x[sel] = torch.roll(image[sel], shifts=(sy, sx), dims=(2, 3))
    x = x + _NOISE * float(difficulty) * torch.randn(x.shape, generator=g)
    return x.clamp_(0.0, 1.0), y


def _smooth(n, h, w, g):
    """``n`` smooth random fields of size (h, w): 4 x 4 normal values, upsampled bicubically."""
    low = torch.randn(n, 1, 4, 4, generator=g)
    return F.interpolate(low, size=(h, w), mode="bicubic", align_corners=False)[:, 0]
