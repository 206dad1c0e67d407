"""Lesson 08 (the cost-benefit of scaling out): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _short, check_function, drawn_inputs, graded, is_placeholder,
    number_or_none, variant_hint)
from greenlab.impact import scaling
from greenlab.techniques.lm.sharding import ring_allreduce_bytes


@graded(reference=("greenlab.impact.scaling:cost_benefit",))
def scale_out_costs(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(single_device_hours, n_devices, scaling_efficiency,
    watts_per_device, price_per_device_hour) -> (wall_hours, energy_kwh, cost_usd)``.

    Expected values come from ``greenlab.impact.scaling.cost_benefit``; a price of None must give
    a cost of None. The prices in the cases are test inputs, not prices of any offer.
    """
    gpu_name = scaling.gpus()[0].name  # any catalogue GPU: watts are given, so its TDP is unused
    inputs = [
        (10.0, 1, 1.0, 300.0, 2.0),
        (40.0, 8, 0.8, 400.0, 3.0),
        (12.0, 4, 0.5, 250.0, 1.5),
        (100.0, 16, 0.9, 700.0, 0.0),
    ] + drawn_inputs(seed, "scale_out_costs", lambda rng: (
        round(rng.uniform(0.5, 500.0), 1), rng.choice([1, 2, 4, 8, 16, 32]), round(rng.uniform(0.3, 1.0), 2),
        round(rng.uniform(50.0, 1000.0)), round(rng.uniform(0.0, 5.0), 2)))
    cases = []
    for hours, n, eff, watts, price in inputs:
        r = scaling.cost_benefit(gpu_name, n, hours, eff, watts_per_device=watts,
                                 price_per_device_hour=price)
        cases.append(((hours, n, eff, watts, price), (r.wall_hours, r.energy_kwh, r.cost_usd)))

    def hint(args, expected, got):
        try:
            wall, kwh, cost = (float(v) for v in got)
        except (TypeError, ValueError):
            return "return three numbers: (wall_hours, energy_kwh, cost_usd)."
        hours, n, eff, watts, price = args
        if math.isclose(wall, hours / n, rel_tol=1e-6) and eff != 1.0:
            return "wall time is single_device_hours / (n_devices x scaling_efficiency)."
        if math.isclose(kwh, watts * hours / 1000, rel_tol=1e-6) and eff != 1.0:
            return ("energy follows device-hours (n x wall hours), which grow when efficiency "
                    "is below 1; you used the ideal single-device hours.")
        if math.isclose(kwh, expected[1] * 1000, rel_tol=1e-6):
            return "energy is asked in kWh: W x h / 1000."
        if math.isclose(cost, price * wall, rel_tol=1e-6) and n != 1:
            return "you pay for every device: cost = price x n x wall hours (device-hours)."
        return None

    check = check_function(fn, cases, rtol=1e-6, atol=1e-9, name="scale_out_costs", hint=hint)
    if not check.passed:
        return check
    try:
        no_price = fn(10.0, 2, 0.9, 300.0, None)
        cost_ok = no_price[2] is None
    except Exception as exc:  # the learner's code failed: report it, never raise
        return Check("scale_out_costs", FAILED, f"with price None it raised {type(exc).__name__}: {exc}",
                     ["without a price the cost is unknown: return None for it."])
    if not cost_ok:
        return Check("scale_out_costs", FAILED,
                     f"with price None the cost should be None (unknown), got {_short(no_price[2])}.")
    return Check("scale_out_costs", PASSED,
                 f"all {len(cases) + 1} scenarios give the wall hours, kWh and cost of "
                 "greenlab.impact.scaling.cost_benefit.")


@graded(reference=("greenlab.impact.scaling:ring_all_reduce",))
def ring_all_reduce(fn: Any) -> Check:
    """Check a learner's ``fn(tensors) -> (summed, bytes_sent)``: a ring all-reduce simulated in
    one process over one tensor per rank (reduce-scatter, then all-gather, over N chunks).
    ``summed`` must hold, for every rank, the element-wise sum of all ranks' tensors (compared
    with ``torch.stack(tensors).sum(0)``); ``bytes_sent`` the bytes each rank sent, which for
    tensors that split evenly is ``greenlab.techniques.lm.sharding.ring_allreduce_bytes``: 2 (N - 1) / N x the
    tensor's bytes. Values are small integers in float32, so any order of summation is exact."""
    import torch

    label = "ring_all_reduce"
    if is_placeholder(fn):
        return Check(label, NOT_ATTEMPTED, "no function yet (still None).")
    if not callable(fn):
        return Check(label, FAILED, f"expected a function, got {type(fn).__name__}.")
    g = torch.Generator().manual_seed(11)
    failures, placeholders = [], 0
    shapes = [(2, 12), (3, 12), (4, 24), (6, 6), (1, 8)]
    for n, length in shapes:
        tensors = [torch.randint(-9, 10, (length,), generator=g).float() for _ in range(n)]
        want = torch.stack(tensors).sum(0)
        want_bytes = ring_allreduce_bytes(length * 4, n)
        call = f"{label}({n} ranks x {length} float32 values)"
        traced, additions = _traced_tensors()
        try:
            got = fn([t.clone().as_subclass(traced) for t in tensors])
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(got):
            placeholders += 1
            failures.append(f"{call} returned None; return (summed tensors, bytes sent per rank)")
            continue
        try:
            summed, sent = got
            summed, sent = list(summed), [float(b) for b in sent]
        except (TypeError, ValueError):
            failures.append(f"{call}: return two lists, (one summed tensor per rank, bytes sent per rank).")
            continue
        try:
            summed = [torch.as_tensor(t).as_subclass(torch.Tensor) for t in summed]
        except Exception:  # an odd answer: _ring_problem says what is wrong with it
            pass
        problem = _ring_problem(tensors, want, want_bytes, summed, sent)
        chunk = -(-length // n)
        steps = sum(1 for shapes in additions if len(shapes) == 2 and max(shapes) <= chunk)
        if problem is None and n > 1 and steps < n * (n - 1):
            problem = (f"the sums are right but no ring ran: a ring adds one received chunk (at most {chunk} "
                       f"values) per rank in each of N - 1 = {n - 1} steps, {n * (n - 1)} chunk additions in all; "
                       f"your function made {steps}. Split each tensor with tensor_split(N) and pass chunks round.")
        if problem:
            failures.append(f"{call}: {problem}")
    if placeholders == len(shapes):
        return Check(label, NOT_ATTEMPTED, "the function still returns None; fill it in.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(shapes)} rings wrong.", failures)
    return Check(label, PASSED, f"every rank holds the sum in all {len(shapes)} rings, and each rank sends "
                 "2(N-1)/N of the tensor's bytes, as the formula says.")


def _traced_tensors():
    """A tensor subclass that records, for every addition made on it, the sizes of the tensors
    added, and that list: how a ring's N (N - 1) chunk additions are told from one ``torch.sum``."""
    import torch

    additions: list[tuple[int, ...]] = []

    class Traced(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in ("add", "add_", "__add__", "__iadd__", "__radd__"):
                additions.append(tuple(a.numel() for a in args if isinstance(a, torch.Tensor)))
            return super().__torch_function__(func, types, args, kwargs or {})

    return Traced, additions


def _ring_problem(tensors, want, want_bytes, summed, sent) -> str | None:
    import torch

    n = len(tensors)
    if len(summed) != n or len(sent) != n:
        return f"expected {n} tensors and {n} byte counts (one per rank), got {len(summed)} and {len(sent)}."
    try:
        right = [bool(torch.equal(torch.as_tensor(s).reshape(-1).float(), want)) for s in summed]
    except Exception as exc:  # an odd answer: a wrong answer, never an error
        return f"could not compare your tensors with the sum ({type(exc).__name__}: {exc})."
    if not all(right):
        first = summed[right.index(False)]
        try:
            mean = torch.equal(torch.as_tensor(first).reshape(-1).float(), want / n)
        except Exception:
            mean = False
        if mean:
            return "that is the mean; an all-reduce here is a sum (DDP divides by N afterwards)."
        chunks = want.tensor_split(n)
        try:
            pieces = torch.as_tensor(first).reshape(-1).float().tensor_split(n)
            some = sum(bool(torch.equal(a, b)) for a, b in zip(pieces, chunks))
        except Exception:
            some = 0
        if 0 < some < n:
            return (f"rank {right.index(False)} holds the sum of only {some} of {n} chunks: after the "
                    "reduce-scatter each rank owns one summed chunk; the all-gather must pass them round.")
        return f"{right.count(False)} rank(s) do not hold the element-wise sum of all ranks' tensors."
    if all(math.isclose(b, want_bytes, rel_tol=1e-9, abs_tol=1e-9) for b in sent):
        return None
    bytes_total = want.numel() * want.element_size()
    if all(math.isclose(b, want_bytes / want.element_size(), rel_tol=1e-9) for b in sent) and n > 1:
        return "those are elements, not bytes: multiply by element_size() (4 for float32)."
    if all(math.isclose(b, (n - 1) * bytes_total, rel_tol=1e-9) for b in sent) and n > 1:
        return ("each rank sent its whole tensor to every other rank (N - 1 copies); a ring sends one "
                "chunk of 1/N per step, 2(N - 1) steps in all.")
    if all(math.isclose(b, want_bytes / 2, rel_tol=1e-9) for b in sent) and n > 1:
        return "only one phase was counted: reduce-scatter and all-gather each send (N - 1)/N of the tensor."
    return (f"bytes sent per rank {[_short(b) for b in sent]}, expected {want_bytes:g} each "
            f"(2(N-1)/N x {bytes_total} B).")


@graded(reference=("greenlab.impact.scaling:fit_energy_per_device_hour",))
def energy_per_device_hour(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(device_hours, energy) -> k``: the k of energy ~ k x device-hours, the
    least-squares slope through the origin of the learner's runs (a line through zero: no
    device-hours, no energy). Expected values come from ``torch.linalg.lstsq``."""
    import torch

    inputs = [([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]), ([1.0, 2.0, 4.0], [3.0, 5.0, 13.0]),
              ([0.5, 0.5, 1.0, 2.0], [300.0, 330.0, 640.0, 1180.0]), ([2.0], [7.0])]
    inputs += drawn_inputs(seed, "energy_per_device_hour", _draw_runs)

    def lstsq(xs, ys):
        x = torch.tensor(xs, dtype=torch.float64)[:, None]
        y = torch.tensor(ys, dtype=torch.float64)[:, None]
        return float(torch.linalg.lstsq(x, y).solution)

    cases = [(args, lstsq(*args)) for args in inputs]

    def hint(args, expected, got):
        value = number_or_none(got)
        if value is None:
            return None
        xs, ys = args
        if math.isclose(value, sum(y / x for x, y in zip(xs, ys)) / len(xs), rel_tol=1e-9):
            return ("the mean of the per-run ratios weights a short run like a long one; least squares "
                    "through the origin is sum(x*y) / sum(x*x).")
        if math.isclose(value, sum(ys) / sum(xs), rel_tol=1e-9):
            return "that is total energy / total device-hours; the least-squares slope is sum(x*y) / sum(x*x)."
        if math.isclose(value, sum(x * y for x, y in zip(xs, ys)) / sum(y * y for y in ys), rel_tol=1e-9):
            return "the axes are swapped: k is energy per device-hour (energy on y, device-hours on x)."
        if len(xs) > 1:
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            if math.isclose(value, slope, rel_tol=1e-9):
                return "that slope has an intercept; the model energy = k x device-hours has none (fit through 0)."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="energy_per_device_hour", hint=hint)


@graded(reference=("greenlab.impact.scaling:watts_per_device",))
def watts_per_device(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(energy_kwh, n_devices, wall_hours) -> k``: the k of one job in W per
    device (Wh per device-hour) from its total energy over all devices (kWh), its device count
    and its wall-clock hours. Expected values come from
    ``greenlab.impact.scaling.watts_per_device``; the inputs are test numbers, not published figures."""
    inputs = [(4.0, 8, 2.0), (30.0, 4, 12.5), (0.9, 1, 3.0), (120.0, 16, 10.0)]
    inputs += drawn_inputs(seed, "watts_per_device", lambda rng: (
        round(rng.uniform(0.1, 200.0), 2), rng.randint(1, 64), round(rng.uniform(0.5, 48.0), 1)))
    cases = [(args, scaling.watts_per_device(*args)) for args in inputs]
    wrong = [
        (lambda e, n, h: n * h / (e * 1000.0),
         "energy and device-hours are swapped: k is energy per device-hour, energy / (n x hours)."),
        (lambda e, n, h: h * 1000.0 / (n * e),
         "hours and energy are swapped: the energy (kWh) goes on top, the hours below."),
        (lambda e, n, h: e * 1000.0 / h,
         "that is the power of all devices together: divide by the number of devices too (per device-hour)."),
        (lambda e, n, h: e / (n * h),
         "that is kW (kWh per device-hour); k is asked in W: multiply kWh by 1000 to get Wh."),
        (lambda e, n, h: e * 1_000_000.0 / (n * h),
         "a unit slip of 1000 too many: 1 kWh is 1000 Wh, so k in W is kWh x 1000 / device-hours."),
    ]
    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="watts_per_device",
                          hint=variant_hint(wrong))


def _draw_runs(rng) -> tuple:
    k = rng.uniform(50.0, 800.0)
    device_hours = [round(rng.uniform(0.1, 20.0), 2) for _ in range(rng.randint(1, 6))]
    return (device_hours, [round(k * h * rng.uniform(0.8, 1.2), 1) for h in device_hours])
