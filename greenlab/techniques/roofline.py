"""This machine's roofline (lessons 00 and 01): the FLOP/s it reaches on a large matrix multiply,
the bytes/s it reaches on a large copy, and what a workload of a given arithmetic intensity
(FLOPs per byte moved) can attain under both roofs (Williams, Waterman and Patterson, 2009).

- ``matmul_intensity(m, n, k, bytes_per_element)``: FLOPs per byte of an (m x k) @ (k x n) product
  that reads both inputs and writes the output once.
- ``measure(device, dtypes)``: a ``Roofline`` measured here, labelled with the machine; each figure
  is the best of a few timed windows (the least disturbed one), in FLOP/s and bytes/s.
- ``Roofline.attainable(intensity, dtype)``: min(peak FLOP/s, bandwidth x intensity).
- ``seconds_per_call(fn)``: how long one call of a workload takes, for placing it on the roofline.
- ``count(fn)``: the FLOPs (the course's counter, ``greenlab.training.flop_counting``) and the bytes (each operation reads its tensor
  inputs once and writes its outputs once) of one call, and so its arithmetic intensity.
- ``place(label, fn)``: a measured ``Point``: counted FLOPs and bytes, timed seconds per call.
- ``plot(roofline, points)``: the roofs on log-log axes with workloads placed on them.

``measure`` keeps what it measured for the rest of the Python session and hands it out again for
the same arguments (``reuse=False`` measures afresh).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_leaves
from torch.utils._python_dispatch import TorchDispatchMode

from greenlab.base import limits
from greenlab.base.units import plain_number
from greenlab.energy.estimate import cpu_model_name
from greenlab.session.config import device as default_device
from greenlab.session.devices import synchronize
from greenlab.training.flop_counting import flop_counter as course_flop_counter

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Roofline:
    """Measured roofs of one machine: ``peak_flops`` {dtype name: FLOP/s} from an n x n matmul,
    ``bandwidth_bytes_per_s`` from a copy (bytes read + written per second); ``machine`` names the
    device it was measured on; ``matmul_n`` and ``copy_bytes`` the sizes used."""

    machine: str
    device: str
    peak_flops: dict
    bandwidth_bytes_per_s: float
    matmul_n: int
    copy_bytes: int
    notes: list = field(default_factory=list)

    def attainable(self, intensity: float, dtype: str = "fp32") -> float:
        """FLOP/s attainable at ``intensity`` FLOPs per byte: min(peak, bandwidth x intensity)."""
        if not intensity > 0:
            raise ValueError(f"intensity must be > 0 FLOPs per byte, got {intensity!r}")
        return min(self._peak(dtype), self.bandwidth_bytes_per_s * intensity)

    def ridge_point(self, dtype: str = "fp32") -> float:
        """The intensity (FLOPs per byte) where the memory roof meets the compute roof: below it,
        work is memory-bound; above it, compute-bound."""
        return self._peak(dtype) / self.bandwidth_bytes_per_s

    def bound(self, intensity: float, dtype: str = "fp32") -> str:
        """"memory-bound" or "compute-bound" at ``intensity`` under this roofline."""
        return "memory-bound" if intensity < self.ridge_point(dtype) else "compute-bound"

    def floor_seconds(self, flops: float, bytes_moved: float, dtype: str = "fp32") -> float:
        """The least time the roofs allow for ``flops`` FLOPs moving ``bytes_moved`` bytes:
        max(FLOPs / peak, bytes / bandwidth), in seconds (a prediction, not a measurement)."""
        for name, v in (("flops", flops), ("bytes_moved", bytes_moved)):
            if not v >= 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        return max(flops / self._peak(dtype), bytes_moved / self.bandwidth_bytes_per_s)

    def summary(self) -> str:
        """One line: the roofs and what they were measured with (matmul size, copy size and, on a
        CPU, threads), since a peak measured with other sizes or threads differs, in one lesson or
        between two."""
        peaks = ", ".join(f"{d} {plain_number(f / 1e9)} GFLOP/s" for d, f in self.peak_flops.items())
        how = "; ".join([f"{self.matmul_n}x{self.matmul_n} matmul", *self.notes])
        return (f"roofline measured on {self.machine} ({self.device}): peak {peaks} ({how}); bandwidth "
                f"{plain_number(self.bandwidth_bytes_per_s / 1e9)} GB/s (copy of {self.copy_bytes / 2**20:.0f} MiB); "
                f"ridge point {self.ridge_point():.3g} FLOP/byte (fp32). A peak is the best this matmul size "
                "reached at these threads: a roofline measured with other sizes or threads has other roofs")

    def _peak(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise ValueError(f"dtype must be one of the measured {sorted(self.peak_flops)}, got {dtype!r}")
        return self.peak_flops[dtype]


def matmul_intensity(m: int, n: int, k: int, bytes_per_element: int = 4) -> float:
    """FLOPs per byte of an (m x k) @ (k x n) matmul: 2mnk FLOPs over (mk + kn + mn) elements of
    ``bytes_per_element`` bytes each (inputs read once, output written once)."""
    for name, v in (("m", m), ("n", n), ("k", k), ("bytes_per_element", bytes_per_element)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return 2 * m * n * k / ((m * k + k * n + m * n) * bytes_per_element)


def measure(device=None, dtypes=("fp32",), matmul_n: int = 1024, copy_bytes: int = 64 * 2**20,
            min_seconds: float = 0.2, rounds: int = 3, machine: str | None = None,
            reuse: bool = True) -> Roofline:
    """Measure this machine's roofline on ``device`` (default: greenlab's device). Peak FLOP/s per
    dtype from ``matmul_n`` x ``matmul_n`` matmuls, bandwidth from copying ``copy_bytes`` bytes; each
    repeated for at least ``min_seconds`` per window, best of ``rounds`` windows. With ``reuse``,
    a roofline measured earlier in this Python session with the same arguments and thread count is
    returned instead (its notes say so)."""
    _check_windows(min_seconds, rounds)
    dev = torch.device(device or default_device())
    key = (str(dev), tuple(dtypes), matmul_n, copy_bytes, min_seconds, rounds, machine, torch.get_num_threads())
    if reuse and key in _MEASURED:
        return _MEASURED[key]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown or not dtypes:
        raise ValueError(f"dtypes must be some of {sorted(DTYPES)}, got {list(dtypes)!r}")
    peaks = {}
    for name in dtypes:
        a = torch.randn(matmul_n, matmul_n, device=dev).to(DTYPES[name])
        b = torch.randn(matmul_n, matmul_n, device=dev).to(DTYPES[name])
        out = torch.empty(matmul_n, matmul_n, device=dev, dtype=DTYPES[name])
        per_call = _best_seconds(lambda: torch.mm(a, b, out=out), dev, min_seconds, rounds)
        peaks[name] = 2 * matmul_n ** 3 / per_call
    n_floats = max(1, copy_bytes // 4)
    src = torch.randn(n_floats, device=dev)
    dst = torch.empty_like(src)
    per_copy = _best_seconds(lambda: dst.copy_(src), dev, min_seconds, rounds)
    bandwidth = 2 * n_floats * 4 / per_copy  # every byte is read once and written once
    roof = Roofline(machine or _machine_name(dev), str(dev), peaks, bandwidth, matmul_n, n_floats * 4,
                    notes=[f"threads: {torch.get_num_threads()}"] if dev.type == "cpu" else [])
    _MEASURED[key] = roof
    return roof


@dataclass(frozen=True)
class Counts:
    """What one call of a workload does: ``flops`` (matrix multiplies, convolutions and attention,
    as ``torch.utils.flop_counter`` counts them; element-wise work counts 0) and ``bytes`` (every
    operation reads each of its tensor inputs once and writes each output once: the least traffic
    that operation-by-operation execution needs; views move nothing)."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte; 0.0 for work that moves no bytes."""
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True)
class Point:
    """A workload placed on the roofline: its counted FLOPs and bytes per call and its measured
    seconds per call (the fastest window of ``place``)."""

    label: str
    flops: int
    bytes: int
    seconds: float

    @property
    def intensity(self) -> float:
        """Counted FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def flops_per_s(self) -> float:
        """Measured FLOP/s: counted FLOPs over measured seconds per call."""
        return self.flops / self.seconds

    @property
    def bytes_per_s(self) -> float:
        """Measured bytes/s at the counted traffic."""
        return self.bytes / self.seconds

    def share_of_roof(self, roofline: Roofline, dtype: str = "fp32") -> float:
        """Measured FLOP/s as a fraction of what the roofline allows at this intensity."""
        return self.flops_per_s / roofline.attainable(self.intensity, dtype)

    def line(self, roofline: Roofline, dtype: str = "fp32") -> str:
        """One line: counts, intensity, bound, measured throughput against the roof."""
        return (f"{self.label}: {_si(self.flops, 'FLOP')}, {_si(self.bytes, 'B')} per call -> "
                f"{self.intensity:.3g} FLOP/byte ({roofline.bound(self.intensity, dtype)}); measured "
                f"{plain_number(self.seconds * 1e3)} ms, {plain_number(self.flops_per_s / 1e9)} GFLOP/s = "
                f"{self.share_of_roof(roofline, dtype):.0%} of the roof's "
                f"{roofline.attainable(self.intensity, dtype) / 1e9:.3g}")


def count(fn) -> Counts:
    """FLOPs and bytes of one call of ``fn()`` (see ``Counts``), counted at PyTorch's operator
    level while it runs; backward passes inside ``fn`` are counted too."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}")
    with course_flop_counter() as flop_counter, _ByteCounter() as bytes_counter:
        fn()
    return Counts(int(flop_counter.get_total_flops()), int(bytes_counter.bytes))


def place(label: str, fn, device=None, min_seconds: float = 0.05, rounds: int = 3) -> Point:
    """``fn``'s ``Point``: one counted call (``count``), then seconds per call measured by
    ``seconds_per_call`` (fastest of ``rounds`` windows of at least ``min_seconds``)."""
    if not isinstance(label, str) or not label:
        raise ValueError(f"label must be a non-empty str, got {label!r}")
    counted = count(fn)
    if counted.flops <= 0 or counted.bytes <= 0:
        raise ValueError(f"{label!r}: fn must do counted FLOPs (a matmul, convolution or attention) and move "
                         f"bytes to be placed on the roofline; counted {counted.flops} FLOPs, {counted.bytes} bytes")
    seconds = seconds_per_call(fn, device, min_seconds=min_seconds, rounds=rounds)
    return Point(label, counted.flops, counted.bytes, seconds)


def seconds_per_call(fn, device=None, min_seconds: float = 0.2, rounds: int = 3) -> float:
    """Seconds one call of ``fn()`` takes: the fastest of ``rounds`` windows of repeated calls,
    each at least ``min_seconds`` long, the device synchronised at the window edges."""
    _check_windows(min_seconds, rounds)
    return _best_seconds(fn, torch.device(device or default_device()), min_seconds, rounds)


def plot(roofline: Roofline, points=(), ax=None, dtypes=None):
    """The roofs (one compute roof per measured dtype, one memory roof) on log-log axes, with
    ``points``: ``Point``s or (label, intensity FLOP/byte, achieved FLOP/s) tuples. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    dtypes = list(dtypes or roofline.peak_flops)
    points = [(p.label, p.intensity, p.flops_per_s) if isinstance(p, Point) else p for p in points]
    intensities = [p[1] for p in points if p[1] > 0]
    low = min([-4] + [math.floor(math.log2(i)) for i in intensities])
    high = max([12] + [math.ceil(math.log2(i)) + 1 for i in intensities])
    xs = [2.0 ** e for e in range(low, high)]
    for d in dtypes:
        ax.plot(xs, [roofline.attainable(x, d) for x in xs], label=f"roof, {d}")
    for label, intensity, achieved in points:
        ax.plot([intensity], [achieved], "o")
        ax.annotate(label, (intensity, achieved), fontsize=7, xytext=(4, -10), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"Roofline measured on {roofline.machine}", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def _check_windows(min_seconds, rounds) -> None:
    """``rounds`` windows of at least ``min_seconds`` each: one measurement, so together within
    ``limits.MEASURE_LIMIT_S`` (NaN, inf or a day of windows would keep the call running)."""
    limits.measure_seconds("min_seconds", min_seconds, low=0, low_open=True)
    limits.steps("rounds", rounds, what="measurement windows")
    if rounds * min_seconds > limits.MEASURE_LIMIT_S:
        raise ValueError(f"rounds={rounds} windows of min_seconds={min_seconds:g} s take at least "
                         f"{rounds * min_seconds:.3g} s, longer than the {limits.MEASURE_LIMIT_S:g} s one "
                         "measurement may take: fewer rounds or shorter windows")


def _best_seconds(fn, dev, min_seconds, rounds) -> float:
    """Seconds per call: the fastest of ``rounds`` windows of repeated calls, each >= min_seconds."""
    fn()  # warm-up: one-off costs
    synchronize(dev)
    best = float("inf")
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - start < min_seconds:
            fn()
            calls += 1
            if dev.type != "cpu" and calls % 8 == 0:
                synchronize(dev)
        synchronize(dev)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


_MEASURED: dict = {}


def _si(value: float, unit: str) -> str:
    """``value`` with a decimal prefix: 3.93 GFLOP, 101 MB, 512 B."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
# operations that allocate or alias without moving data
_FREE = {torch.ops.aten._unsafe_view.default, torch.ops.aten.empty.memory_format, torch.ops.aten.empty_like.default,
         torch.ops.aten.empty_strided.default, torch.ops.aten.new_empty.default, torch.ops.aten.lift_fresh.default}


class _ByteCounter(TorchDispatchMode):
    """Bytes every operation reads (its distinct tensor inputs) and writes (its distinct outputs)."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not func.is_view and func not in _FREE:
            inputs = {k: v for k, v in kwargs.items() if k != "out"}
            self.bytes += _tensor_bytes((args, inputs)) + _tensor_bytes(out)
        return out


def _tensor_bytes(tree) -> int:
    seen, total = set(), 0
    for t in tree_leaves(tree):
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            total += min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
    return total


def _machine_name(dev) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)

    return cpu_model_name() or "this CPU"
