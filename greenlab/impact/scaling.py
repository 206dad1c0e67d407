"""Cost-benefit of scaling out to more devices (logic only; widgets live elsewhere).

The energy model is an estimate, and says so:

    energy [kWh] = k [W] x device-hours / 1000

where ``k`` is the average power per device. Either pass a ``k`` measured on your
own hardware (``watts_per_device``), or the model takes the GPU's TDP times a
stated fraction (``utilisation_power_fraction``). Wall-clock time follows from a
scaling efficiency ``eff`` in (0, 1]: ``wall = single_device_hours / (n x eff)``,
so device-hours are ``single_device_hours / eff`` and any efficiency below 1 is
energy spent on communication and waiting rather than learning.

That energy grows about linearly with device-hours was measured for data-parallel
training of ResNet50 and FourCastNet by Huber et al. (2025), "Energy Consumption in
Parallel Neural Network Training", arXiv:2508.07706; they also found that ``k``
differs between models and hardware, which is why a measured ``k`` is preferred.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from greenlab.impact import carbon
from greenlab.base import tables

DEFAULT_POWER_FRACTION = 0.76
"""Average power as a fraction of TDP when no measurement is given (estimate).
Source: Newkirk et al. (2025), 'Empirically-Calibrated H100 Node Power Models for Reducing
Uncertainty in AI Training Energy Estimation', arXiv:2506.14551: computationally intensive
training on 8-GPU H100 nodes drew about 76% of the whole node's 10.2 kW rating, host CPUs,
memory and fans included. It is a node-level ratio for one system type, not a per-GPU
measurement; applied to one GPU's TDP it is a rough stand-in. Measure your own ``k`` when you can."""


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator from ``cited_tables/gpus.csv``. Tensor figures are dense (no sparsity);
    missing figures and prices are None."""

    name: str
    vendor: str
    architecture: str
    year: int
    tdp_w: float
    memory_gb: float
    memory_type: str
    fp32_tflops: float | None
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    int8_tops: float | None
    price_usd_per_hour: float | None
    price_date: str
    price_source: str
    spec_source: str
    spec_checked: str


@dataclass(frozen=True)
class ScalingResult:
    """Outcome of one scenario. Energy is an estimate unless ``power_source`` is 'measured'."""

    gpu: str
    n_devices: int
    scaling_efficiency: float
    single_device_hours: float
    wall_hours: float
    device_hours: float
    speedup: float
    watts_per_device: float
    power_source: str
    energy_kwh: float
    perfect_energy_kwh: float
    wasted_energy_kwh: float
    cost_usd: float | None
    co2e_g: float
    region: str
    pue: float
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ScalingScenario:
    """The inputs of ``cost_benefit`` bundled, e.g. for a calculator widget."""

    gpu: str
    n_devices: int
    single_device_hours: float
    scaling_efficiency: float
    region: str = "WORLD"
    pue: float | None = None
    price_per_device_hour: float | None = None
    utilisation_power_fraction: float = DEFAULT_POWER_FRACTION
    watts_per_device: float | None = None

    def result(self) -> ScalingResult:
        """Evaluate this scenario with ``cost_benefit``."""
        return cost_benefit(
            self.gpu,
            self.n_devices,
            self.single_device_hours,
            self.scaling_efficiency,
            region=self.region,
            pue=self.pue,
            price_per_device_hour=self.price_per_device_hour,
            utilisation_power_fraction=self.utilisation_power_fraction,
            watts_per_device=self.watts_per_device,
        )


@dataclass(frozen=True)
class Question:
    """One item of the scale-out checklist: option -> (weight, reason)."""

    key: str
    text: str
    options: Mapping[str, tuple[int, str]]


@dataclass(frozen=True)
class Recommendation:
    """Checklist outcome: decision is 'scale out', 'try a small test first' or 'stay on one device'."""

    decision: str
    score: int
    reasons: tuple[str, ...]
    text: str


# --- public API ---------------------------------------------------------------


def gpus() -> list[GpuSpec]:
    """All accelerators in ``cited_tables/gpus.csv``, in file order."""
    return list(_load_gpus(str(carbon.data_dir() / "gpus.csv")))


def gpu(name: str | GpuSpec) -> GpuSpec:
    """Find a GPU by name (case-insensitive; spaces, dashes and a leading 'NVIDIA' optional)."""
    if isinstance(name, GpuSpec):
        return name
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"gpu name must be a non-empty string such as 'NVIDIA A100 SXM 80GB', got {name!r}")
    table = gpus()
    wanted = _squash(name)
    for spec in table:
        if _squash(spec.name) == wanted or _squash(spec.name.removeprefix("NVIDIA ")) == wanted:
            return spec
    by_key = {spec.name.lower(): spec.name for spec in table}
    close = difflib.get_close_matches(name.strip().lower(), list(by_key), n=4, cutoff=0.3)
    hint = ", ".join(by_key[c] for c in close) if close else "none; see greenlab.impact.scaling.gpus()"
    raise ValueError(f"unknown GPU name {name!r}; closest matches: {hint}")


def cost_benefit(
    gpu_or_name: str | GpuSpec,
    n_devices: int,
    single_device_hours: float,
    scaling_efficiency: float,
    region: str = "WORLD",
    pue: float | None = None,
    price_per_device_hour: float | None = None,
    utilisation_power_fraction: float = DEFAULT_POWER_FRACTION,
    watts_per_device: float | None = None,
) -> ScalingResult:
    """Time, energy, cost and CO2e of running a job on ``n_devices`` devices.

    ``single_device_hours``: wall-clock hours the job takes on one device.
    ``scaling_efficiency``: achieved speedup / n, in (0, 1] (see ``scaling_efficiency()``).
    ``watts_per_device``: measured average power per device (W); if None, the
    estimate TDP x ``utilisation_power_fraction`` is used and labelled as such.
    ``price_per_device_hour``: USD; if None, the catalogue price (often missing) is used;
    cost is None when no price is known.
    """
    spec = gpu(gpu_or_name)
    n = _check_devices(n_devices)
    hours = _positive(single_device_hours, "single_device_hours")
    eff = _check_efficiency(scaling_efficiency)
    notes: list[str] = []

    if watts_per_device is None:
        fraction = _check_fraction(utilisation_power_fraction)
        watts = spec.tdp_w * fraction
        power_source = f"estimate: TDP {spec.tdp_w:g} W x {fraction:g}"
        notes.append("energy is an estimate (TDP x fraction); pass watts_per_device to use a measurement")
        if fraction == DEFAULT_POWER_FRACTION:
            notes.append("the default fraction 0.76 is a whole-node ratio (8-GPU H100 nodes, host included; "
                         "Newkirk et al., 2025), not a per-GPU measurement")
    else:
        watts = _positive(watts_per_device, "watts_per_device")
        power_source = "measured"

    wall = hours / (n * eff)
    device_hours = n * wall
    energy_kwh = watts * device_hours / 1000.0
    perfect_kwh = watts * hours / 1000.0

    price = price_per_device_hour if price_per_device_hour is not None else spec.price_usd_per_hour
    if price is None:
        cost = None
        notes.append("no price known: pass price_per_device_hour to get a cost")
    else:
        cost = _non_negative(price, "price_per_device_hour") * device_hours

    grid = carbon.intensity(region)
    pue_used = carbon.DEFAULT_PUE if pue is None else pue
    grams = carbon.co2e_g(energy_kwh * carbon.JOULES_PER_KWH, grid, pue)

    return ScalingResult(
        gpu=spec.name,
        n_devices=n,
        scaling_efficiency=eff,
        single_device_hours=hours,
        wall_hours=wall,
        device_hours=device_hours,
        speedup=n * eff,
        watts_per_device=watts,
        power_source=power_source,
        energy_kwh=energy_kwh,
        perfect_energy_kwh=perfect_kwh,
        wasted_energy_kwh=energy_kwh - perfect_kwh,
        cost_usd=cost,
        co2e_g=grams,
        region=grid.code,
        pue=float(pue_used),
        notes=tuple(notes),
    )


def sweep(
    gpu_or_name: str | GpuSpec,
    counts: Sequence[int] = (1, 2, 4, 8, 16),
    single_device_hours: float = 1.0,
    scaling_efficiency: float | Callable[[int], float] = 0.9,
    **kwargs,
) -> list[ScalingResult]:
    """``cost_benefit`` for each device count, for plots against n.

    ``scaling_efficiency`` is a number used for every n > 1 (n = 1 is always 1.0),
    or a function n -> efficiency. Other keyword arguments go to ``cost_benefit``.
    """
    if not counts:
        raise ValueError("counts must list at least one device count, e.g. [1, 2, 4, 8]")
    results = []
    for n in counts:
        if callable(scaling_efficiency):
            eff = scaling_efficiency(n)
        else:
            eff = 1.0 if n == 1 else scaling_efficiency
        results.append(cost_benefit(gpu_or_name, n, single_device_hours, eff, **kwargs))
    return results


def scaling_efficiency(t1_seconds: float, tn_seconds: float, n_devices: int) -> float:
    """Measured efficiency ``t1 / (n x tn)`` from one-device and n-device times.

    1.0 is perfect scaling. A value above 1 (superlinear, e.g. cache effects) is
    returned as measured; ``cost_benefit`` only accepts values in (0, 1].
    """
    t1 = _positive(t1_seconds, "t1_seconds")
    tn = _positive(tn_seconds, "tn_seconds")
    n = _check_devices(n_devices)
    return t1 / (n * tn)


def ring_all_reduce(tensors) -> tuple:
    """Simulate a ring all-reduce (sum) of one tensor per rank in a single process.

    Each of the N ranks splits its tensor into N chunks. Reduce-scatter: in N - 1 steps rank r
    sends one chunk to rank r + 1, which adds it to its own, so that rank r ends up holding the
    full sum of chunk (r + 1) mod N. All-gather: N - 1 more steps pass the summed chunks round the
    ring. Returns (the N summed tensors, bytes each rank sent): 2 (N - 1) / N x the tensor's bytes
    when it splits evenly (``greenlab.techniques.lm.sharding.ring_allreduce_bytes``)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("tensors must hold one tensor per rank (at least one)")
    shape = tensors[0].shape
    if any(t.shape != shape for t in tensors):
        raise ValueError("every rank's tensor must have the same shape")
    n = len(tensors)
    chunks = [list(t.detach().reshape(-1).clone().tensor_split(n)) for t in tensors]
    sent = [0] * n
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            # each rank's outgoing chunk is chosen before anything changes in this step
            offset = step if phase == "reduce-scatter" else step - 1
            outgoing = [(r, (r - offset) % n, chunks[r][(r - offset) % n].clone()) for r in range(n)]
            for r, c, payload in outgoing:
                dst = (r + 1) % n
                if phase == "reduce-scatter":
                    chunks[dst][c] += payload
                else:
                    chunks[dst][c] = payload
                sent[r] += payload.numel() * payload.element_size()
    return [_cat(cs).reshape(shape) for cs in chunks], sent


def fit_energy_per_device_hour(device_hours, energy) -> float:
    """k of ``energy ~ k x device-hours``: the least-squares slope through the origin,
    sum(x y) / sum(x^2), in energy units per device-hour."""
    xs = [_positive(x, "device_hours") for x in device_hours]
    ys = [_non_negative(y, "energy") for y in energy]
    if not xs or len(xs) != len(ys):
        raise ValueError(f"device_hours and energy need the same, non-zero length (got {len(xs)} and {len(ys)})")
    return sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)


def watts_per_device(energy_kwh, n_devices, wall_hours) -> float:
    """k of one job, in W per device (Wh per device-hour): ``energy_kwh`` x 1000 / (``n_devices``
    x ``wall_hours``). ``energy_kwh``: the job's total over all devices, kWh; ``wall_hours``: its
    wall-clock time, hours."""
    energy = _non_negative(energy_kwh, "energy_kwh")
    n = _positive(n_devices, "n_devices")
    hours = _positive(wall_hours, "wall_hours")
    return energy * 1000.0 / (n * hours)


def _cat(chunks):
    import torch

    return torch.cat(chunks)


SCALE_OUT_QUESTIONS: tuple[Question, ...] = (
    Question(
        key="fits_on_one_device",
        text="Do the model, optimiser state and a useful batch fit in one device's memory?",
        options={
            "yes": (-2, "everything fits on one device, so scaling out is a choice, not a necessity"),
            "no": (4, "the model does not fit on one device, so it has to be split across devices"),
        },
    ),
    Question(
        key="single_device_time",
        text="How long does one training run take on a single device?",
        options={
            "minutes": (-3, "a run takes minutes; coordination overhead would dominate"),
            "hours": (0, "a run takes hours; more devices help only if time really matters"),
            "days": (2, "a run takes days; shorter turnaround speeds up every experiment"),
            "weeks": (3, "a run takes weeks; a single device is too slow to iterate"),
        },
    ),
    Question(
        key="time_criticality",
        text="How critical is wall-clock time (deadline, fast iteration)?",
        options={
            "flexible": (-1, "time is flexible, so the cheaper and greener single device wins"),
            "important": (1, "time matters, which can justify some extra energy"),
            "critical": (2, "time is critical, which can justify paying for imperfect scaling"),
        },
    ),
    Question(
        key="hardware_budget",
        text="Is there budget for more devices (hours x devices x price)?",
        options={
            "none": (-3, "there is no budget for extra device-hours"),
            "some": (0, "there is some budget; imperfect scaling spends it on overhead"),
            "ample": (1, "the budget covers the extra device-hours"),
        },
    ),
    Question(
        key="engineering_budget",
        text="Is there time to write, debug and maintain distributed code?",
        options={
            "none": (-2, "there is no engineering time for distributed code"),
            "some": (0, "there is some engineering time"),
            "ample": (1, "there is engineering time to do it properly"),
        },
    ),
    Question(
        key="skills",
        text="Has the team run distributed training (DDP, sharding) before?",
        options={
            "none": (-1, "no one has run distributed training before, so expect a learning curve"),
            "some": (0, "the team has some distributed experience"),
            "experienced": (1, "the team has run distributed training before"),
        },
    ),
    Question(
        key="single_device_optimised",
        text="Have single-device speedups been tried first (mixed precision, batch size, data loading)?",
        options={
            "no": (-2, "cheaper single-device speedups have not been tried yet"),
            "yes": (1, "single-device speedups are already in place"),
        },
    ),
)


def recommend(answers: Mapping[str, str]) -> Recommendation:
    """Score the ``SCALE_OUT_QUESTIONS`` answers and say whether to go distributed.

    ``answers`` maps every question key to one of its options. If the model does
    not fit on one device the answer is 'scale out' regardless of the score;
    otherwise a score >= 3 says scale out, 0..2 says test on 2 devices first
    (measure ``scaling_efficiency``), below 0 says stay on one device.
    """
    if not isinstance(answers, Mapping):
        raise ValueError("answers must be a dict of question key -> option")
    known = {q.key: q for q in SCALE_OUT_QUESTIONS}
    unknown = sorted(set(answers) - set(known))
    if unknown:
        raise ValueError(f"unknown question keys {unknown}; expected {sorted(known)}")
    missing = [k for k in known if k not in answers]
    if missing:
        raise ValueError(f"missing answers for {missing}")

    score = 0
    reasons = []
    for question in SCALE_OUT_QUESTIONS:
        choice = str(answers[question.key]).strip().lower()
        if choice not in question.options:
            raise ValueError(
                f"answer {answers[question.key]!r} to {question.key!r} must be one of {list(question.options)}"
            )
        weight, reason = question.options[choice]
        score += weight
        reasons.append(f"{reason} ({weight:+d})")

    if answers["fits_on_one_device"].strip().lower() == "no":
        decision = "scale out"
        why = "the model cannot be trained on one device"
    elif score >= 3:
        decision = "scale out"
        why = f"the checklist score {score} is 3 or more"
    elif score >= 0:
        decision = "try a small test first"
        why = (f"the checklist score {score} is between 0 and 2: "
               "measure scaling efficiency on 2 devices before committing")
    else:
        decision = "stay on one device"
        why = f"the checklist score {score} is below 0"
    text = f"Recommendation: {decision}, because {why}. Reasons: " + "; ".join(reasons) + "."
    return Recommendation(decision=decision, score=score, reasons=tuple(reasons), text=text)


# --- helpers ------------------------------------------------------------------


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


@functools.lru_cache(maxsize=8)
def _load_gpus(path: str) -> tuple[GpuSpec, ...]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"GPU table not found at {file}; set GREENLAB_DATA_DIR to the folder holding it")
    required = ("name", "vendor", "architecture", "year", "tdp_w", "memory_gb", "memory_type")
    optional = ("fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops", "int8_tops",
                "price_usd_per_hour", "price_date", "price_source", "spec_source", "spec_checked")
    rows = []
    for r in tables.read_table(file, required, optional=optional):
        def maybe(column):
            return tables.number(r, column, file, low=0.0) if r[column] else None

        rows.append(
            GpuSpec(
                name=r["name"], vendor=r["vendor"], architecture=r["architecture"],
                year=tables.integer(r, "year", file),
                tdp_w=tables.number(r, "tdp_w", file, low=0.0),
                memory_gb=tables.number(r, "memory_gb", file, low=0.0),
                memory_type=r["memory_type"],
                fp32_tflops=maybe("fp32_tflops"), tf32_tflops=maybe("tf32_tflops"),
                bf16_tflops=maybe("bf16_tflops"), fp16_tflops=maybe("fp16_tflops"),
                int8_tops=maybe("int8_tops"), price_usd_per_hour=maybe("price_usd_per_hour"),
                price_date=r["price_date"], price_source=r["price_source"],
                spec_source=r["spec_source"], spec_checked=r["spec_checked"],
            )
        )
    return tuple(rows)


def _finite(value, name: str, rule: str) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {rule}, got {value!r}") from None
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return number


def _positive(value, name: str) -> float:
    number = _finite(value, name, "a finite number > 0")
    if number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def _non_negative(value, name: str) -> float:
    number = _finite(value, name, "a finite number >= 0")
    if number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _check_devices(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_devices must be an integer >= 1, got {n!r}")
    return n


def _check_efficiency(eff) -> float:
    number = _finite(eff, "scaling_efficiency", "a number in (0, 1]")
    if not 0 < number <= 1:
        raise ValueError(f"scaling_efficiency must be in (0, 1] (1 = perfect scaling), got {eff!r}")
    return number


def _check_fraction(frac) -> float:
    number = _finite(frac, "utilisation_power_fraction", "a number in (0, 1]")
    if not 0 < number <= 1:
        raise ValueError(f"utilisation_power_fraction must be in (0, 1] (share of TDP), got {frac!r}")
    return number
