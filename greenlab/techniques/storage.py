"""Storage and data formats (lesson 13): how many bytes a training run keeps, and reading a
dataset back from many small files against a few sequential tar shards.

- ``training_storage``: bytes of the tokenised dataset, of one checkpoint (weights plus optimizer
  state, bytes per parameter stated) and of all the checkpoints and artefacts kept.
- ``write_small_files`` / ``read_small_files``: one file per sample (the "folder of images" layout).
- ``write_shards`` / ``read_shards``: samples packed into tar files read front to back, the layout
  of the WebDataset format (each sample's fields are members sharing one base name, the extension
  naming the field: ``000042.x``, ``000042.cls``); written and read with Python's ``tarfile``.
- ``compare_reads``: both layouts read back in alternating, measured windows (paired repeats).
"""

from __future__ import annotations

import io
import math
import os
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from greenlab.base import limits, validation
from greenlab.energy import measure
from greenlab.energy.flags import PooledFlags
from greenlab.experiments import paired, window_short

# Bytes per parameter of a checkpoint that can resume mixed-precision AdamW training: fp32 master
# weights (4), Adam's first and second moments in fp32 (4 + 4), and the bf16 working copy (2);
# Rajbhandari et al. (2020, ZeRO) count the same 16 bytes of model state with fp16 gradients (2),
# which a checkpoint need not keep.
CHECKPOINT_BYTES_PER_PARAM = 4 + 4 + 4 + 2
WEIGHTS_BYTES_PER_PARAM = 2  # the bf16 weights a released model ships


@dataclass(frozen=True)
class StoragePlan:
    """Bytes of one run: the tokenised dataset, one checkpoint, the checkpoints kept, the released
    weights, and their total. Inputs are kept in ``assumptions``."""

    dataset_bytes: float
    checkpoint_bytes: float
    checkpoints_bytes: float
    weights_bytes: float
    total_bytes: float
    assumptions: dict

    def rows(self) -> list:
        """(what, bytes) rows for a table."""
        return [("tokenised dataset", self.dataset_bytes), ("one checkpoint", self.checkpoint_bytes),
                (f"{self.assumptions['checkpoints_kept']} checkpoints kept", self.checkpoints_bytes),
                ("released weights", self.weights_bytes), ("total", self.total_bytes)]


def training_storage(params: float, tokens: float, checkpoints_kept: int, bytes_per_token: float = 2.0,
                     checkpoint_bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM,
                     weights_bytes_per_param: float = WEIGHTS_BYTES_PER_PARAM) -> StoragePlan:
    """Storage of a run with ``params`` parameters trained on ``tokens`` tokens (stored at
    ``bytes_per_token``: 2 for token ids below 65,536), keeping ``checkpoints_kept`` checkpoints
    of ``checkpoint_bytes_per_param`` each and one release of ``weights_bytes_per_param``."""
    for name, value in (("params", params), ("tokens", tokens), ("bytes_per_token", bytes_per_token),
                        ("checkpoint_bytes_per_param", checkpoint_bytes_per_param),
                        ("weights_bytes_per_param", weights_bytes_per_param)):
        validation.number(name, value, low=0)
    validation.integer("checkpoints_kept", checkpoints_kept, low=0)
    dataset = tokens * bytes_per_token
    one = params * checkpoint_bytes_per_param
    weights = params * weights_bytes_per_param
    return StoragePlan(dataset_bytes=dataset, checkpoint_bytes=one, checkpoints_bytes=one * checkpoints_kept,
                       weights_bytes=weights, total_bytes=dataset + one * checkpoints_kept + weights,
                       assumptions={"params": params, "tokens": tokens, "bytes_per_token": bytes_per_token,
                                    "checkpoint_bytes_per_param": checkpoint_bytes_per_param,
                                    "weights_bytes_per_param": weights_bytes_per_param,
                                    "checkpoints_kept": checkpoints_kept})


# --- two layouts on disk -------------------------------------------------------------------

def write_small_files(x: torch.Tensor, y: torch.Tensor, folder) -> Path:
    """One file per sample in ``folder``: ``000042.bin`` holds the label (8 bytes, int64) and then
    the sample's float32 values. Returns the folder."""
    x, y = _samples(x, y)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(len(y)):
        (folder / f"{i:06d}.bin").write_bytes(_label_bytes(y[i]) + x[i].numpy().tobytes())
    return folder


def read_small_files(folder, sample_shape) -> tuple:
    """Read every ``*.bin`` of ``folder`` (sorted by name) back into (x, y) tensors."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".bin"))
    xs, ys = [], []
    per = 4 * math.prod(sample_shape)
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
        if len(raw) != 8 + per:
            raise ValueError(f"{os.path.join(folder, name)} is damaged: {len(raw)} bytes, not the 8-byte label and "
                             f"{per} bytes of a {tuple(sample_shape)} sample")
        ys.append(int.from_bytes(raw[:8], "little", signed=True))
        xs.append(torch.frombuffer(bytearray(raw[8:]), dtype=torch.float32))
    return _stack(xs, ys, sample_shape)


def write_shards(x: torch.Tensor, y: torch.Tensor, folder, samples_per_shard: int = 1000) -> list:
    """Pack the samples into tar files of ``samples_per_shard`` samples (``shard-000000.tar``, ...),
    each sample as two members, ``NNNNNN.x`` (float32 bytes) and ``NNNNNN.cls`` (the label as
    text), in the WebDataset layout. Returns the shard paths."""
    x, y = _samples(x, y)
    validation.integer("samples_per_shard", samples_per_shard, low=1)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for start in range(0, len(y), samples_per_shard):
        path = folder / f"shard-{start // samples_per_shard:06d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(start, min(start + samples_per_shard, len(y))):
                _add(tar, f"{i:06d}.x", x[i].numpy().tobytes())
                _add(tar, f"{i:06d}.cls", str(int(y[i])).encode())
        paths.append(path)
    return paths


def read_shards(paths, sample_shape) -> tuple:
    """Stream the shards front to back (``tarfile`` mode ``"r|"``: no seeking, as from object
    storage or a tape) and return (x, y) tensors in member order."""
    xs, ys = [], []
    for path in validation.items("paths", paths):
        try:
            with tarfile.open(path, "r|") as tar:
                for member in tar:
                    if not member.isfile():
                        raise ValueError(f"member {member.name!r} is not a file")
                    data = tar.extractfile(member).read()
                    if member.name.endswith(".x"):
                        if len(data) % 4:
                            raise ValueError(f"member {member.name!r} holds {len(data)} bytes, not float32 values")
                        xs.append(torch.frombuffer(bytearray(data), dtype=torch.float32))
                    elif member.name.endswith(".cls"):
                        try:
                            ys.append(int(data))
                        except ValueError:
                            raise ValueError(f"member {member.name!r} holds {data[:20]!r}, not a label") from None
        except (tarfile.TarError, EOFError, ValueError) as exc:
            raise ValueError(f"shard {path} is damaged: {exc}") from None
        except OSError as exc:
            raise ValueError(f"shard {path} cannot be read: {exc.strerror or exc}") from None
    return _stack(xs, ys, sample_shape)


@dataclass
class ReadComparison(PooledFlags):
    """Per-repeat seconds and joules of reading the whole dataset once from each layout (a
    window's figure divided by its ``passes[layout]`` reads; repeat r of both layouts is one
    pair), the files' counts and sizes, and every window's ``Measurement`` (``windows``), from
    which ``estimated``, ``complete``, ``problems`` and ``sources`` are read."""

    samples: int
    passes: dict
    seconds: dict
    joules: dict
    files: dict
    bytes_on_disk: dict
    windows: list  # (label, Measurement), one per window, in the order they ran

    def measurements(self) -> list:
        return list(self.windows)

    def paired(self, metric: str = "seconds"):
        """The shards against the small files, paired by repeat (``gl.experiments.paired``); an
        energy verdict resting on a window too short to read says "not measurable at this size"."""
        table = {"seconds": self.seconds, "joules": self.joules}[metric]
        short = [window_short(self._window("tar shards", r), metric)
                 or window_short(self._window("small files", r), metric) for r in range(len(table["tar shards"]))]
        return paired(table["tar shards"], table["small files"], metric, variant="tar shards",
                      baseline="small files", short=short)

    def _window(self, name: str, repeat: int):
        """The Measurement of ``name``'s window in repeat ``repeat`` (0-based), None if not kept."""
        return dict(self.windows).get(f"{name} repeat {repeat + 1}")


def compare_reads(x: torch.Tensor, y: torch.Tensor, folder, repeats: int = 3, passes: int = 1,
                  samples_per_shard: int = 1000, min_window_s: float = 0.3) -> ReadComparison:
    """Write the samples both ways under ``folder``, check that both read back equal to ``x``/``y``,
    then read each layout in ``gl.measure`` windows, alternating which goes first, ``repeats``
    times: at least ``passes`` reads per window, more when one read is shorter than
    ``min_window_s`` (from the checking read). The files stay in the OS page cache (a warm read)."""
    x, y = _samples(x, y)
    limits.steps("repeats", repeats, what="repeats of both layouts' windows")
    limits.steps("passes", passes, what="reads per window")
    folder = Path(folder)
    small = write_small_files(x, y, folder / "small_files")
    shards = write_shards(x, y, folder / "shards", samples_per_shard)
    shape = tuple(x.shape[1:])
    readers = {"small files": lambda: read_small_files(small, shape),
               "tar shards": lambda: read_shards(shards, shape)}
    limits.measure_seconds("min_window_s", min_window_s, low=0)
    per_window, once = {}, {}
    for name, read in readers.items():
        t0 = time.perf_counter()
        bx, by = read()
        once[name] = time.perf_counter() - t0
        if not (torch.equal(bx, x) and torch.equal(by, y)):
            raise RuntimeError(f"the {name} did not read back the samples written")
        per_window[name] = max(passes, math.ceil(min_window_s / max(once[name], 1e-6)))
    # the checking read timed each layout: refuse counts no run could finish
    limits.check_time("passes", passes, sum(once.values()), "reads of both layouts per window")
    limits.check_time("repeats", repeats, sum(per_window[n] * once[n] for n in readers), "repeats of both layouts")
    seconds = {name: [] for name in readers}
    joules = {name: [] for name in readers}
    windows = []
    for r in range(repeats):
        order = list(readers) if r % 2 == 0 else list(readers)[::-1]
        for name in order:
            with measure(f"read {name}") as window:
                t0 = time.perf_counter()
                for _ in range(per_window[name]):
                    readers[name]()
                seconds[name].append((time.perf_counter() - t0) / per_window[name])
            joules[name].append(window.result.joules / per_window[name])
            windows.append((f"{name} repeat {r + 1}", window.result))
    sizes = {"small files": sum(p.stat().st_size for p in small.iterdir()),
             "tar shards": sum(p.stat().st_size for p in shards)}
    files = {"small files": len(y), "tar shards": len(shards)}
    return ReadComparison(samples=len(y), passes=per_window, seconds=seconds, joules=joules, files=files,
                          bytes_on_disk=sizes, windows=windows)


def format_bytes(n: float) -> str:
    """Bytes in decimal units: '1.2 TB', '340 GB', '5.1 MB'."""
    validation.number("n", n, low=0)
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


# --- helpers -----------------------------------------------------------------------------------

def _samples(x, y) -> tuple:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise validation.ArgumentTypeError("x and y must be tensors (samples and their labels)")
    if x.dim() < 1 or y.dim() != 1 or len(x) != len(y):
        raise ValueError(f"x must hold one sample per label in y, got shapes {tuple(x.shape)} and {tuple(y.shape)}")
    return x.detach().to("cpu", torch.float32).contiguous(), y.detach().to("cpu", torch.long)


def _label_bytes(label) -> bytes:
    return int(label).to_bytes(8, "little", signed=True)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _stack(xs, ys, sample_shape) -> tuple:
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} samples but {len(ys)} labels: a damaged layout")
    if not xs:
        return torch.empty((0, *sample_shape)), torch.empty(0, dtype=torch.long)
    per = math.prod(sample_shape)
    if any(t.numel() != per for t in xs):
        raise ValueError(f"a sample does not have the shape {tuple(sample_shape)}")
    return torch.stack(xs).reshape(len(xs), *sample_shape), torch.tensor(ys, dtype=torch.long)
