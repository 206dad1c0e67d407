"""Instant exercise checkers for the lessons (``gl.check``).

A checker looks at a learner's answer and returns a :class:`Check`: passed,
failed (with exactly what was wrong) or not attempted yet. Checkers never raise
for a wrong answer, an exception inside the learner's code, or a placeholder
answer (``None`` / ``NotImplemented``), so a learner notebook runs top to bottom
even when an exercise is skipped.

Generic helpers: :func:`check_close`, :func:`check_function`,
:func:`check_gradients_match`. Lesson-specific checkers are plain functions in
this module, named after the exercise, e.g. :func:`joules_per_gflop`::

    gl.check.joules_per_gflop(joules_per_gflop)   # shows a green tick, red cross or grey "not attempted"
"""

from __future__ import annotations

import copy
import html
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

PASSED = "passed"
FAILED = "failed"
NOT_ATTEMPTED = "not attempted"

_SYMBOLS = {PASSED: "\u2714", FAILED: "\u2718", NOT_ATTEMPTED: "\u25cb"}
_COLOURS = {PASSED: "#1a7f37", FAILED: "#cf222e", NOT_ATTEMPTED: "#6e7781"}


@dataclass
class Check:
    """The outcome of one checker.

    ``status`` is ``"passed"``, ``"failed"`` or ``"not attempted"``; ``message``
    is one sentence; ``details`` are extra lines (one per failing case, hints).
    Shown as text by ``print``/``repr`` and as a coloured box in notebooks.
    """

    name: str
    status: str
    message: str
    details: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in _SYMBOLS:
            raise ValueError(
                f"Check status must be one of {sorted(_SYMBOLS)}, got {self.status!r}"
            )

    @property
    def passed(self) -> bool:
        """True when the answer is right."""
        return self.status == PASSED

    @property
    def attempted(self) -> bool:
        """False while the learner's answer is still a placeholder (None/NotImplemented)."""
        return self.status != NOT_ATTEMPTED

    def text(self) -> str:
        """Plain-text rendering: a symbol, the name, the message, then indented details."""
        lines = [f"{_SYMBOLS[self.status]} {self.name}: {self.status} - {self.message}"]
        lines += [f"    {d}" for d in self.details]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        details = f"<ul style='margin:4px 0 0 0'>{items}</ul>" if items else ""
        return (
            f"<div style='border-left:4px solid {colour};padding:4px 8px;margin:4px 0'>"
            f"<span style='color:{colour};font-weight:bold'>{_SYMBOLS[self.status]} "
            f"{html.escape(self.name)}: {html.escape(self.status)}</span> "
            f"{html.escape(self.message)}{details}</div>"
        )


def is_placeholder(value: Any) -> bool:
    """True for the values a learner stub returns before it is filled in (None, NotImplemented, ...)."""
    return value is None or value is NotImplemented or value is Ellipsis


def check_close(
    name: str,
    got: Any,
    expected: Any,
    rtol: float = 1e-6,
    atol: float = 0.0,
) -> Check:
    """Compare a learner's number (or array/tensor) with the expected one.

    Passes when ``|got - expected| <= atol + rtol * |expected|`` everywhere.
    ``None``/``NotImplemented`` count as not attempted.
    """
    _check_tolerances(rtol, atol)
    if is_placeholder(got):
        return Check(name, NOT_ATTEMPTED, "no answer yet (the value is still a placeholder).")
    problem = _compare(got, expected, rtol, atol)
    if problem is None:
        return Check(name, PASSED, f"{_short(got)} matches the expected value.")
    return Check(name, FAILED, problem)


def _sorted_indices(got: Any) -> Any:
    """A learner's answer of row indices (list, tuple or tensor) as a sorted list of ints,
    so any order is accepted; a placeholder answer is passed through."""
    if is_placeholder(got):
        return got
    if hasattr(got, "tolist"):
        got = got.tolist()
    return sorted(int(i) for i in got)


def _not_a_function(fn: Any, label: str) -> Check | None:
    """The verdict for an answer that is no function yet (None, ...) or not a function at all;
    None when ``fn`` can be called."""
    if is_placeholder(fn):
        return Check(label, NOT_ATTEMPTED, "the function is not defined yet.")
    if not callable(fn):
        return Check(label, FAILED, f"expected a function, got {type(fn).__name__} {_short(fn)}.")
    return None


def check_function(
    fn: Any,
    cases: Iterable[tuple[Any, Any]],
    rtol: float = 1e-6,
    atol: float = 0.0,
    name: str | None = None,
    hint: Callable[[tuple, Any, Any], str | None] | None = None,
) -> Check:
    """Call the learner's ``fn`` on small inputs and compare with expected results.

    ``cases`` is a list of ``(args, expected)``; ``args`` is a tuple of positional
    arguments (a non-tuple is one argument). ``expected`` may be a number,
    array/tensor, any value compared with ``==``, or an exception class the
    function must raise. Reports which input failed, expected vs got, and the
    exception text. ``hint(args, expected, got)`` may return an extra line of
    advice for a wrong answer. A function that returns ``None``/``NotImplemented``
    for every case is "not attempted".
    """
    _check_tolerances(rtol, atol)
    cases = [_as_case(c) for c in cases]
    if not cases:
        raise ValueError("check_function needs at least one (args, expected) case")
    label = name or getattr(fn, "__name__", None) or "function"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict

    failures: list[str] = []
    placeholders = 0
    for args, expected in cases:
        call = f"{label}({', '.join(_short(a) for a in args)})"
        try:
            got = fn(*copy.deepcopy(args))
        except Exception as exc:  # the learner's code failed: report it, never raise
            if isinstance(expected, type) and isinstance(exc, expected):
                continue
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if isinstance(expected, type) and issubclass(expected, BaseException):
            failures.append(f"{call} returned {_short(got)}; expected it to raise {expected.__name__}")
            continue
        if is_placeholder(got):
            placeholders += 1
            failures.append(f"{call} returned {_short(got)}; expected {_short(expected)}")
            continue
        problem = _compare(got, expected, rtol, atol)
        if problem is not None:
            line = f"{call}: {problem}"
            advice = _safe_hint(hint, args, expected, got)
            failures.append(f"{line} Hint: {advice}" if advice else line)

    if placeholders == len(cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        n = len(cases)
        return Check(label, FAILED, f"{len(failures)} of {n} test inputs wrong.", failures)
    return Check(label, PASSED, f"all {len(cases)} test inputs give the expected result.")


def check_gradients_match(model_a: Any, model_b: Any, atol: float = 1e-6, rtol: float = 1e-5) -> Check:
    """Compare the ``.grad`` of every parameter of two models with the same structure.

    ``model_a`` is the reference, ``model_b`` the learner's. Not attempted when
    ``model_b`` is None or has no gradients at all; otherwise names the parameter
    with the largest mismatch.
    """
    _check_tolerances(rtol, atol)
    label = "gradients match"
    if is_placeholder(model_b):
        return Check(label, NOT_ATTEMPTED, "no model yet.")
    try:
        params_a = dict(model_a.named_parameters())
        params_b = dict(model_b.named_parameters())
    except AttributeError as exc:
        return Check(label, FAILED, f"expected two torch.nn.Module objects ({exc}).")
    if list(params_a) != list(params_b):
        only_a = sorted(set(params_a) - set(params_b))
        only_b = sorted(set(params_b) - set(params_a))
        return Check(
            label, FAILED, "the two models have different parameters.",
            [f"only in the reference: {only_a}", f"only in yours: {only_b}"],
        )
    if all(p.grad is None for p in params_b.values()):
        return Check(label, NOT_ATTEMPTED, "your model has no gradients yet (call loss.backward()).")

    failures: list[str] = []
    worst_name, worst_diff = None, -1.0
    for pname, pa in params_a.items():
        ga, gb = pa.grad, params_b[pname].grad
        if ga is None and gb is None:
            continue
        if ga is None or gb is None:
            which = "yours" if gb is None else "the reference"
            failures.append(f"{pname}: no gradient in {which}")
            continue
        if tuple(ga.shape) != tuple(gb.shape):
            failures.append(f"{pname}: gradient shape {tuple(gb.shape)}, expected {tuple(ga.shape)}")
            continue
        try:
            if gb.is_complex() or gb.is_meta:
                raise TypeError(f"a {'complex' if gb.is_complex() else 'meta'} tensor has no real values")
            a = ga.detach().double().cpu()
            b = gb.detach().double().cpu()
            diff = float((a - b).abs().max()) if a.numel() else 0.0
            tol_ok = bool(((a - b).abs() <= atol + rtol * a.abs()).all())
        except Exception as exc:  # an odd gradient is a wrong answer, never an error
            failures.append(f"{pname}: cannot compare the gradient ({type(exc).__name__}: {exc})")
            continue
        if not tol_ok or math.isnan(diff):
            failures.append(f"{pname}: max |difference| {diff:.3g} (allowed {atol:g} + {rtol:g}*|expected|)")
        if diff > worst_diff:
            worst_name, worst_diff = pname, diff
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(params_a)} parameters differ.", failures)
    return Check(
        label, PASSED,
        f"all {len(params_a)} parameter gradients agree (largest difference {worst_diff:.2g} in {worst_name}).",
    )


# --- lesson-specific checkers ---------------------------------------------------------------


def joules_per_gflop(fn: Any) -> Check:
    """Check a learner's ``fn(joules, flops) -> joules per GFLOP`` (1 GFLOP = 1e9 FLOP)."""
    cases = [
        ((100.0, 2e9), 50.0),
        ((3.0, 1e9), 3.0),
        ((3.6e6, 1e12), 3600.0),
        ((0.25, 5e8), 0.5),
    ]

    def hint(args, expected, got):
        try:
            ratio = float(got) / float(expected)
        except (TypeError, ValueError, ZeroDivisionError):
            return None
        if math.isclose(ratio, 1e-9, rel_tol=1e-6):
            return "divide by GFLOPs (flops / 1e9), not by raw FLOPs."
        if math.isclose(ratio, 1e9, rel_tol=1e-6):
            return "the factor 1e9 went the wrong way: GFLOPs = flops / 1e9."
        joules, flops = args
        if math.isclose(float(got), (flops / 1e9) / joules, rel_tol=1e-6):
            return "that is GFLOPs per joule; the question asks for joules per GFLOP."
        return None

    return check_function(fn, cases, rtol=1e-9, name="joules_per_gflop", hint=hint)


# --- helpers ----------------------------------------------------------------------------------


def _check_tolerances(rtol: float, atol: float) -> None:
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol!r}, atol={atol!r}")


def _as_case(case: Any) -> tuple[tuple, Any]:
    try:
        args, expected = case
    except (TypeError, ValueError):
        raise ValueError(f"each case must be a pair (args, expected), got {case!r}") from None
    if not isinstance(args, tuple):
        args = (args,)
    return args, expected


def _safe_hint(hint, args, expected, got) -> str | None:
    """A hint's advice, or None when there is no hint or the hint itself fails on an odd answer
    (a complex or meta tensor, a huge integer): a checker never raises for a wrong answer."""
    if hint is None:
        return None
    try:
        advice = hint(args, expected, got)
    except Exception:
        return None
    return advice if isinstance(advice, str) else None


def _to_float_list(value: Any) -> tuple[list[float], tuple] | None:
    """Flatten a number, sequence, numpy array or torch tensor into floats plus a shape; None
    for anything that is not real numbers (complex, meta tensors, integers too big for a float)."""
    try:
        return _to_float_list_unchecked(value)
    except (TypeError, ValueError, OverflowError, RuntimeError, NotImplementedError, AttributeError):
        return None


def _to_float_list_unchecked(value: Any) -> tuple[list[float], tuple] | None:
    if hasattr(value, "detach"):  # torch tensor
        if getattr(value, "is_complex", lambda: False)() or getattr(value, "is_meta", False):
            return None
        value = value.detach().cpu()
        return [float(x) for x in value.reshape(-1).tolist()], tuple(value.shape)
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # numpy array or scalar
        flat = value.reshape(-1).tolist() if hasattr(value, "reshape") else [value.tolist()]
        try:
            return [float(x) for x in flat], tuple(value.shape)
        except (TypeError, ValueError):
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return [float(value)], ()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        parts = [_to_float_list_unchecked(v) for v in value]
        if any(p is None or p[1] != () for p in parts):
            return None
        return [p[0][0] for p in parts], (len(parts),)
    return None


def _compare(got: Any, expected: Any, rtol: float, atol: float) -> str | None:
    """None when ``got`` matches ``expected``; otherwise one sentence saying how it differs."""
    try:
        return _compare_unchecked(got, expected, rtol, atol)
    except Exception as exc:  # an answer of an odd type: a wrong answer, never an error
        return f"could not compare {_short(got)} with {_short(expected)} ({type(exc).__name__}: {exc})."


def _compare_unchecked(got: Any, expected: Any, rtol: float, atol: float) -> str | None:
    want = _to_float_list(expected)
    if want is None:
        try:
            same = bool(got == expected)
        except Exception as exc:  # an odd type whose == raises
            return f"could not compare {_short(got)} with {_short(expected)} ({exc})."
        return None if same else f"expected {_short(expected)}, got {_short(got)}."
    have = _to_float_list(got)
    if have is None:
        return f"expected a number like {_short(expected)}, got {type(got).__name__} {_short(got)}."
    (w, wshape), (h, hshape) = want, have
    if len(w) != len(h) or (wshape and hshape and wshape != hshape):
        return f"expected shape {wshape}, got shape {hshape}."
    for i, (g, e) in enumerate(zip(h, w)):
        if math.isnan(g) and not math.isnan(e):
            where = f" at index {i}" if wshape else ""
            return f"got NaN{where}; expected {e:.6g}."
        if math.isinf(e) or math.isinf(g):  # inf - inf is nan and inf * rtol is inf: compare exactly
            close = g == e
        else:
            close = abs(g - e) <= atol + rtol * abs(e)
        if not close:
            where = f" at index {i}" if wshape else ""
            return f"expected {e:.6g}{where}, got {g:.6g} (difference {g - e:.3g})."
    return None


def _short(value: Any, limit: int = 60) -> str:
    try:
        if hasattr(value, "detach") and hasattr(value, "shape") and getattr(value, "numel", lambda: 0)() > 8:
            return f"tensor of shape {tuple(value.shape)}"
        text = repr(value)
    except Exception:  # a repr that fails (or an int too long to print) must not fail the check
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# === lesson 06 (carbon) checkers: co2e_grams, best_start_hour ===============================
# Owned by the carbon-lesson author; kept in one block at the end of the file.


def co2e_grams(fn: Any) -> Check:
    """Check a learner's ``fn(kwh, g_per_kwh, pue) -> grams CO2e`` (energy x intensity x PUE)."""
    cases = [
        ((1.0, 100.0, 1.0), 100.0),
        ((0.5, 400.0, 1.5), 300.0),
        ((2.0, 50.0, 1.1), 110.0),
        ((0.0, 471.84, 1.58), 0.0),
    ]

    def hint(args, expected, got):
        try:
            value = float(got)
        except (TypeError, ValueError):
            return None
        kwh, g_per_kwh, pue = args
        if math.isclose(value, kwh * g_per_kwh, rel_tol=1e-9) and pue != 1.0:
            return "multiply by the PUE too: the facility's overhead counts."
        if pue and math.isclose(value, kwh * g_per_kwh / pue, rel_tol=1e-9):
            return "PUE multiplies (total facility energy = IT energy x PUE); do not divide by it."
        if math.isclose(value, kwh * g_per_kwh * pue / 1000, rel_tol=1e-9):
            return "the answer is in grams: kWh x g/kWh is already grams, no /1000 needed."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="co2e_grams", hint=hint)


def best_start_hour(fn: Any) -> Check:
    """Check a learner's ``fn(values, hours_needed) -> start hour`` with the lowest mean
    intensity over a contiguous window (no wrap past the end; ties: earliest hour)."""
    cases = [
        (([300, 200, 100, 50, 60, 400], 2), 3),
        (([5, 1, 1, 5], 1), 1),
        (([10, 500, 500, 10, 10], 2), 3),
        (([7, 7, 7], 3), 0),
        (([90, 80, 70, 200, 10], 3), 0),
    ]

    def hint(args, expected, got):
        values, hours = args
        if got == values.index(min(values)):
            return ("compare the mean of each whole window of hours_needed hours, "
                    "not single hours: the cheapest hour may sit next to expensive ones.")
        return None

    return check_function(fn, cases, name="best_start_hour", hint=hint)
# === end of lesson 06 checkers ==============================================================


# --- lesson 00 (measuring energy) checkers: energy_window ----------------------------------
# Owned by the lesson-00 author; kept in one block at the end of the file.


def energy_window(measurement: Any, min_seconds: float = 0.0, name: str = "energy window") -> Check:
    """Check a learner's measurement window (a ``greenlab.energy.Measurement``).

    Passes when the window has at least one component, every component names its source,
    the energy is a finite number > 0, the window raised no short-window warning (it lasted
    at least 10 of its counters' update periods), nothing was lost (``problems`` is empty) and
    it lasted at least ``min_seconds``.
    ``None`` is "not attempted".
    """
    if not (isinstance(min_seconds, (int, float)) and not isinstance(min_seconds, bool)
            and math.isfinite(min_seconds) and min_seconds >= 0):
        raise ValueError(f"min_seconds must be a finite number >= 0, got {min_seconds!r}")
    if is_placeholder(measurement):
        return Check(name, NOT_ATTEMPTED, "no measurement yet (the value is still None).")
    if not all(hasattr(measurement, a) for a in ("joules", "seconds", "components", "warnings")):
        return Check(name, FAILED, f"expected the Measurement of a gl.measure window (its .result), "
                                   f"got {type(measurement).__name__}.",
                     ["with gl.measure('label') as window: ... then use window.result"])
    problems: list[str] = []
    try:
        components = dict(measurement.components)
    except Exception as exc:  # an odd object: a wrong answer, never an error
        return Check(name, FAILED, f"the measurement's components are not a mapping ({type(exc).__name__}).")
    if not components:
        problems.append("the window has no energy components: no source could measure it.")
    unlabelled = sorted(k for k, c in components.items() if not getattr(c, "source", ""))
    if unlabelled:
        problems.append(f"components without a source label: {', '.join(unlabelled)}.")
    try:
        joules = float(measurement.joules)
        seconds = float(measurement.seconds)
    except Exception as exc:  # an odd object: a wrong answer, never an error
        return Check(name, FAILED, f"the measurement's joules/seconds are not numbers ({type(exc).__name__}: {exc}).")
    if not (math.isfinite(joules) and joules > 0):
        problems.append(f"the energy is {joules!r} J; a real window uses more than 0 J.")
    short = [w for w in measurement.warnings if "shorter than" in str(w)]
    if short:
        problems.append("the window was shorter than 10 of its counter's update periods; repeat "
                        "the work many times inside one window and divide by the number of calls.")
    lost = list(getattr(measurement, "problems", []) or [])
    if lost:
        problems.append("the measurement is incomplete: " + "; ".join(lost))
    if seconds < min_seconds:
        problems.append(f"the window lasted {seconds:.3g} s; make it last at least "
                        f"{min_seconds:g} s so the counters move many times.")
    if problems:
        return Check(name, FAILED, f"{len(problems)} problem(s) with this window.", problems)
    sources = ", ".join(f"{k} {c.source}{' (estimate)' if c.estimated else ''}"
                        for k, c in components.items())
    return Check(name, PASSED, f"{joules:.4g} J over {seconds:.3g} s from {sources}.")
# --- end of lesson 00 checkers -------------------------------------------------------------


# --- lesson 01 (cost-benefit of scaling out) checkers: scale_out_costs -----------------------
# Owned by the lesson-01 author; kept in one block at the end of the file.


def scale_out_costs(fn: Any) -> Check:
    """Check a learner's ``fn(single_device_hours, n_devices, scaling_efficiency,
    watts_per_device, price_per_device_hour) -> (wall_hours, energy_kwh, cost_usd)``.

    Expected values come from ``greenlab.scaling.cost_benefit``; a price of None must give
    a cost of None. The prices in the cases are test inputs, not prices of any offer.
    """
    from greenlab import scaling

    gpu_name = scaling.gpus()[0].name  # any catalogue GPU: watts are given, so its TDP is unused
    inputs = [
        (10.0, 1, 1.0, 300.0, 2.0),
        (40.0, 8, 0.8, 400.0, 3.0),
        (12.0, 4, 0.5, 250.0, 1.5),
        (100.0, 16, 0.9, 700.0, 0.0),
    ]
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
                 "greenlab.scaling.cost_benefit.")
# --- end of lesson 01 checkers -------------------------------------------------------------


# --- lesson 08 ---
# Lesson 08 (data pipeline) checker: most_uncertain. Owned by the lesson-08 author.


def most_uncertain(fn: Any) -> Check:
    """Check a learner's ``fn(probs, k) -> indices`` of the ``k`` samples the model is least sure
    of: the lowest top-class probability. ``probs`` is a float tensor (N, classes) whose rows sum
    to 1; any order of the returned indices is accepted (list, tuple or tensor of ints)."""
    import torch

    cases = [
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 1), [1]),
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 2), [1, 2]),
        ((torch.tensor([[0.4, 0.3, 0.3], [0.8, 0.1, 0.1], [0.34, 0.33, 0.33], [0.5, 0.45, 0.05]]), 2), [0, 2]),
        ((torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.2, 0.6], [0.05, 0.9, 0.05]]), 3), [0, 1, 2]),
        ((torch.tensor([[0.7, 0.3], [0.55, 0.45]]), 0), []),
    ]

    def as_sorted_indices(probs, k):
        return _sorted_indices(fn(probs, k))

    def hint(args, expected, got):
        probs, k = args
        most_sure = sorted(probs.max(dim=1).values.argsort(descending=True)[:k].tolist())
        if k and got == most_sure and got != expected:
            return "those are the samples the model is most sure of; pick the lowest top-class probability."
        if isinstance(got, list) and len(got) != k:
            return f"return exactly k = {k} indices."
        return None

    as_sorted_indices.__name__ = "most_uncertain"
    if is_placeholder(fn):
        return Check("most_uncertain", NOT_ATTEMPTED, "the function is not defined yet.")
    return check_function(as_sorted_indices, cases, name="most_uncertain", hint=hint)


# --- lesson 04 ---
# Lesson 04 (dynamic batch sizing) checker: scaled_lr_with_warmup. Owned by the lesson-04 author.


def scaled_lr_with_warmup(fn: Any) -> Check:
    """Check a learner's ``fn(step, base_lr, base_batch, batch, warmup_steps) -> learning rate``:
    the linear scaling rule (lr = base_lr x batch / base_batch) reached by Goyal et al.'s (2017)
    gradual warm-up, which rises linearly from ``base_lr`` at step 0 to the scaled rate at step
    ``warmup_steps`` and stays there (no warm-up when ``warmup_steps`` is 0)."""
    from greenlab.batching import goyal_warmup, linear_scaling_lr

    inputs = [
        (0, 0.1, 256, 1024, 100),
        (50, 0.1, 256, 1024, 100),
        (100, 0.1, 256, 1024, 100),
        (5000, 0.1, 256, 1024, 100),
        (25, 0.01, 100, 300, 100),
        (10, 0.05, 32, 32, 20),
        (3, 0.2, 64, 512, 0),
    ]
    cases = [(args, linear_scaling_lr(args[1], args[2], args[3]) * goyal_warmup(args[2], args[3], args[4])(args[0]))
             for args in inputs]

    def hint(args, expected, got):
        try:
            value = float(got)
        except (TypeError, ValueError):
            return None
        step, base_lr, base_batch, batch, warmup_steps = args
        target = base_lr * batch / base_batch
        if math.isclose(value, base_lr * base_batch / batch, rel_tol=1e-9):
            return "the ratio is upside down: a batch k times larger gets a k times larger rate."
        if step < warmup_steps and math.isclose(value, target, rel_tol=1e-9):
            return "before warmup_steps the rate is still rising: start at base_lr, not at the scaled rate."
        if step < warmup_steps and math.isclose(value, target * step / warmup_steps, rel_tol=1e-9):
            return "Goyal et al.'s warm-up starts from base_lr (the small-batch rate), not from zero."
        if math.isclose(value, base_lr, rel_tol=1e-9) and batch != base_batch:
            return "after the warm-up the rate is base_lr x batch / base_batch (the linear scaling rule)."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="scaled_lr_with_warmup", hint=hint)
# --- end of lesson 04 checkers -------------------------------------------------------------


# --- lesson 07 ---
# Compression checkers: tensor_sparsity, break_even. Owned by the compression-lesson author.


def tensor_sparsity(fn: Any) -> Check:
    """Check a learner's ``fn(tensor) -> fraction (0..1) of entries that are exactly zero``."""
    import torch

    cases = [
        (torch.tensor([0.0, 1.0, 0.0, 2.0]), 0.5),
        (torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0]]), 5 / 6),
        (torch.tensor([1.0, -1.0, 0.5]), 0.0),
        (torch.zeros(2, 2, 3), 1.0),
        (torch.tensor([[1e-8, 0.0], [-0.0, 4.0]]), 0.5),
    ]

    def hint(args, expected, got):
        (t,) = args
        try:
            value = float(got)
        except (TypeError, ValueError):
            return None
        if math.isclose(value, 1.0 - expected, abs_tol=1e-9):
            return "that is the share of non-zero entries (density); sparsity is the share of zeros."
        if math.isclose(value, expected * t.numel(), abs_tol=1e-9) and t.numel() > 1:
            return "that is the count of zeros; divide by the number of entries (t.numel())."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="tensor_sparsity", hint=hint)


def break_even(fn: Any) -> Check:
    """Check a learner's ``fn(compression_joules, joules_before, joules_after) -> inferences``:
    the smallest whole number n with n x (before - after) >= compression_joules; ``math.inf``
    when the compressed model saves nothing per inference; 0 when compressing cost nothing."""
    cases = [
        ((100.0, 0.5, 0.25), 400),
        ((10.0, 0.3, 0.0), 34),
        ((1.0, 0.3, 0.1), 5),
        ((50.0, 0.2, 0.2), math.inf),
        ((50.0, 0.2, 0.4), math.inf),
        ((0.0, 0.2, 0.1), 0),
    ]

    def hint(args, expected, got):
        joules, before, after = args
        try:
            value = float(got)
        except (TypeError, ValueError):
            return None
        saving = before - after
        if saving > 0 and math.isfinite(value):
            exact = joules / saving
            if math.isclose(value, exact, rel_tol=1e-9) and exact != expected:
                return "a count of inferences is a whole number: round up (math.ceil)."
            if math.isclose(value, math.floor(exact), rel_tol=1e-9):
                return "round up, not down: after floor(n) inferences the cost is not yet paid back."
        if before > 0 and math.isclose(value, joules / before, rel_tol=1e-9):
            return "divide by the saving per inference (before - after), not by the energy before."
        if saving <= 0 and joules > 0:
            return "when the compressed model saves nothing per inference it never pays back: return math.inf."
        return None

    # exact match (counts are whole numbers); rtol=0 also keeps a finite answer from matching math.inf
    return check_function(fn, cases, rtol=0.0, atol=0.0, name="break_even", hint=hint)


# --- lesson 05 ---
# Lesson 05 (architecture search) checkers: separable_conv_flops, pareto_indices.
# Owned by the lesson-05 author.


def separable_conv_flops(fn: Any) -> Check:
    """Check a learner's ``fn(c_in, c_out, kernel_size, height, width) -> (standard, separable)``:
    forward FLOPs of one k x k convolution layer, stride 1, 'same' padding (the output is
    height x width), no bias, counted like PyTorch's FlopCounterMode (2 FLOPs per multiply-add).
    Standard: 2 c_in c_out k^2 H W. Depthwise-separable (depthwise k x k, then pointwise 1 x 1):
    2 c_in k^2 H W + 2 c_in c_out H W."""
    inputs = [(1, 1, 1, 1, 1), (3, 8, 3, 4, 4), (16, 32, 3, 14, 14), (8, 8, 5, 7, 7), (32, 64, 1, 2, 3)]
    cases = [((ci, co, k, h, w), (2 * ci * co * k * k * h * w, 2 * ci * k * k * h * w + 2 * ci * co * h * w))
             for ci, co, k, h, w in inputs]

    def as_pair(c_in, c_out, kernel_size, height, width):
        got = fn(c_in, c_out, kernel_size, height, width)
        if is_placeholder(got):
            return got
        return tuple(float(v) for v in got)

    def hint(args, expected, got):
        ci, co, k, h, w = args
        if not isinstance(got, tuple) or len(got) != 2:
            return "return two numbers: (standard_flops, separable_flops)."
        if math.isclose(got[0], expected[0] / 2) or math.isclose(got[1], expected[1] / 2):
            return "count 2 FLOPs per multiply-add (one multiply, one add), as FlopCounterMode does."
        if math.isclose(got[1], 2 * co * k * k * h * w + 2 * ci * co * h * w) and ci != co:
            return "the depthwise part has one k x k filter per INPUT channel: 2 c_in k^2 H W."
        if math.isclose(got[1], 2 * ci * k * k * h * w) or math.isclose(got[1], 2 * ci * co * h * w):
            return "a separable layer is both parts: the depthwise k x k and the pointwise 1 x 1."
        return None

    as_pair.__name__ = "separable_conv_flops"
    verdict = _not_a_function(fn, "separable_conv_flops")
    if verdict is not None:
        return verdict
    return check_function(as_pair, cases, rtol=1e-9, atol=0.0, name="separable_conv_flops", hint=hint)


def pareto_indices(fn: Any) -> Check:
    """Check a learner's ``fn(points) -> indices`` of the Pareto front of ``points``, a list of
    (accuracy, joules) pairs where higher accuracy and lower joules are better. A point is on the
    front when no other point is at least as good on both and strictly better on one (equal
    points all stay). Any order of the returned indices is accepted."""
    from greenlab.search import pareto_front

    inputs = [
        [(0.9, 10.0)],
        [(0.8, 5.0), (0.9, 10.0), (0.7, 8.0)],
        [(0.5, 1.0), (0.6, 2.0), (0.7, 3.0), (0.65, 4.0), (0.7, 5.0)],
        [(0.8, 4.0), (0.8, 4.0), (0.6, 6.0)],
        [(0.9, 2.0), (0.5, 1.0), (0.95, 9.0), (0.9, 3.0), (0.4, 1.0)],
    ]
    cases = []
    for pts in inputs:
        dicts = [{"i": i, "accuracy": a, "joules": j} for i, (a, j) in enumerate(pts)]
        cases.append(((pts,), sorted(p["i"] for p in pareto_front(dicts))))

    def as_sorted_indices(points):
        return _sorted_indices(fn(points))

    def hint(args, expected, got):
        (pts,) = args
        if not isinstance(got, list):
            return None
        best = max(range(len(pts)), key=lambda i: pts[i][0])
        if got == [best] and len(expected) > 1:
            return "the front holds every trade-off, not only the most accurate point."
        if len(got) > len(expected) and set(expected) <= set(got):
            return "drop the dominated points: another point is at least as accurate AND uses no more joules."
        if len(got) < len(expected) and set(got) <= set(expected):
            return ("a point is dominated only by one that is at least as good on both and strictly "
                    "better on one; equal points do not dominate each other.")
        return "fewer joules is better: check the direction of each objective."

    as_sorted_indices.__name__ = "pareto_indices"
    verdict = _not_a_function(fn, "pareto_indices")
    if verdict is not None:
        return verdict
    return check_function(as_sorted_indices, cases, name="pareto_indices", hint=hint)
# --- end of lesson 05 checkers -------------------------------------------------------------


# --- lesson 03 ---
# Gradient accumulation: accumulate_gradients(model, x, y, micro_batch_size).

_ACCUM_CASES = ((12, 4), (10, 4), (10, 3), (9, 2), (7, 7))  # (samples, micro-batch size)


def accumulate_gradients(fn: Any) -> Check:
    """Check a learner's ``fn(model, x, y, micro_batch_size)``: forward and backward over ``x``
    in micro-batches of ``micro_batch_size`` samples (the last one may be smaller), leaving in
    every parameter's ``.grad`` the gradient of the mean cross-entropy over all of ``x``, as one
    big batch would. No optimizer step. Tried on a tiny model without BatchNorm, with sample
    counts that do and do not divide by the micro-batch size; fp32 tolerance."""
    import torch

    label = "accumulate_gradients"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict

    failures: list[str] = []
    placeholders = 0
    for seed, (n, micro) in enumerate(_ACCUM_CASES):
        model, x, y = _accum_case(n, seed)
        reference = copy.deepcopy(model)
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        mine = copy.deepcopy(model)
        call = f"{label}(model, x[{n} samples], y, micro_batch_size={micro})"
        try:
            out = fn(mine, x.clone(), y.clone(), micro)
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(out):
            placeholders += 1
            failures.append(f"{call} returned {_short(out)}; return the model")
            continue
        learner = out if isinstance(out, torch.nn.Module) else mine
        result = check_gradients_match(reference, learner, atol=1e-6, rtol=1e-5)
        if result.passed:
            continue
        line = f"{call}: {result.message}"
        advice = _accum_hint(model, x, y, micro, learner) if result.attempted else None
        failures.append(f"{line} Hint: {advice}" if advice else line)

    if placeholders == len(_ACCUM_CASES):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(_ACCUM_CASES)} test inputs wrong.", failures)
    return Check(label, PASSED, f"accumulated gradients equal the big batch's on all {len(_ACCUM_CASES)} "
                                "test inputs, including a short last micro-batch.")


def _accum_case(n: int, seed: int):
    """A tiny model (Linear-Tanh-Linear, no BatchNorm) and n samples of 6 features, 3 classes."""
    import torch

    g = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(n, 6, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(200 + seed)
        model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    return model, x, y


def _accum_hint(model, x, y, micro: int, learner) -> str | None:
    """Name the usual mistake when the learner's gradients equal one of its known results."""
    import torch
    import torch.nn.functional as F

    chunks = list(zip(x.split(micro), y.split(micro)))
    k = len(chunks)
    mistakes = {
        "per-batch mean / number of micro-batches": (
            lambda m: [(F.cross_entropy(m(xb), yb) / k).backward() for xb, yb in chunks],
            "the last micro-batch is smaller, so 1/(number of micro-batches) weights its samples "
            "too much; sum the per-sample losses and divide by the total number of samples."),
        "sum of per-batch means": (
            lambda m: [F.cross_entropy(m(xb), yb).backward() for xb, yb in chunks],
            "the gradients add up over micro-batches, so each loss must be scaled down "
            "(by its share of the samples) before backward()."),
        "last micro-batch only": (
            lambda m: [(m.zero_grad(), F.cross_entropy(m(xb), yb).backward()) for xb, yb in chunks],
            "only the last micro-batch's gradient is left: do not zero the gradients between "
            "micro-batches (backward() adds to .grad, which is the point)."),
    }
    got = _flat_grads(learner)
    if got is None:
        return None
    for run, advice in mistakes.values():
        m = copy.deepcopy(model)
        run(m)
        expected = _flat_grads(m)
        if expected is not None and expected.shape == got.shape and torch.allclose(got, expected, rtol=1e-5, atol=1e-6):
            return advice
    return None


def _flat_grads(model):
    import torch

    grads = [p.grad.detach().reshape(-1).double().cpu() for p in model.parameters() if p.grad is not None]
    if len(grads) != len(list(model.parameters())):
        return None
    return torch.cat(grads)
# --- end of lesson 03 checkers -------------------------------------------------------------


# --- lesson 02 ---
# Mixed precision checker: amp_step. Owned by the lesson-02 author.


def amp_step(fn: Any) -> Check:
    """Check a learner's ``fn(model, optimizer, scaler, x, y) -> loss``: one fp16 mixed-precision
    training step (autocast to float16 on ``x.device.type``, cross-entropy loss, a scaled
    backward pass, ``scaler.step(optimizer)``, ``scaler.update()``, gradients cleared each step).

    Run on CPU against a reference step on a tiny linear model, in three cases: ordinary
    gradients (two steps, the weights must match the reference); gradients so small that fp16
    flushes them to zero unless the loss is scaled; and a loss scale so large that the scaled
    gradients overflow (the step must be skipped and the scale halved).
    """
    import torch

    label = "amp_step"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict

    failures: list[str] = []
    for case in ("ordinary", "tiny", "overflow"):
        mine, ref = _amp_case(case), _amp_case(case)
        w0 = [p.detach().clone() for p in mine["model"].parameters()]
        dtypes: list = []
        hook = mine["model"].register_forward_hook(lambda mod, inp, out: dtypes.append(out.dtype))
        try:
            for _ in range(mine["steps"]):
                got = fn(mine["model"], mine["optimizer"], mine["scaler"], mine["x"], mine["y"])
                _amp_reference_step(ref["model"], ref["optimizer"], ref["scaler"], ref["x"], ref["y"])
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{case} case: your step raised {type(exc).__name__}: {exc}")
            continue
        finally:
            hook.remove()
        params = list(mine["model"].parameters())
        unchanged = all(torch.equal(p.detach(), w) for p, w in zip(params, w0))
        if case == "ordinary" and is_placeholder(got) and unchanged and all(p.grad is None for p in params):
            return Check(label, NOT_ATTEMPTED, "the function still returns None and trains nothing; fill it in.")
        if not dtypes or any(d != torch.float16 for d in dtypes):
            seen = sorted({str(d).replace("torch.", "") for d in dtypes}) or ["no forward pass"]
            failures.append(f"{case} case: the model's output was {', '.join(seen)}; run the forward pass "
                            "inside torch.autocast(x.device.type, dtype=torch.float16).")
            continue
        problem = _amp_compare(case, mine, ref, unchanged)
        if problem:
            failures.append(f"{case} case: {problem}")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of 3 cases wrong.", failures)
    return Check(label, PASSED, "your step matches the reference in all 3 cases (ordinary, tiny and "
                 "overflowing gradients).")


def _amp_case(case: str) -> dict:
    """A fresh tiny model, SGD optimizer, GradScaler("cpu") and batch for one ``amp_step`` case."""
    import torch

    torch.manual_seed(2)
    model = torch.nn.Linear(4, 3)
    x = torch.randn(8, 4)
    y = torch.randint(0, 3, (8,))
    init_scale = 1.0 if case == "ordinary" else 2.0 ** 16  # scale 1: stale gradients are not hidden
    if case == "tiny":  # a confident model: d(loss)/d(logits) is about 1e-9, below fp16's range
        with torch.no_grad():
            model.weight.zero_()
            model.bias.copy_(torch.tensor([20.0, 0.0, 0.0]))
        y = torch.zeros(8, dtype=torch.long)
    if case == "overflow":  # scaled gradients exceed fp16's largest value (65504)
        init_scale = 2.0 ** 30
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    return {"model": model, "optimizer": optimizer, "scaler": scaler, "x": x, "y": y,
            "steps": 2 if case == "ordinary" else 1, "init_scale": init_scale}


def _amp_reference_step(model, optimizer, scaler, x, y):
    """The reference fp16 mixed-precision step (as in ``greenlab.train``)."""
    import torch
    import torch.nn.functional as F

    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def _amp_compare(case: str, mine: dict, ref: dict, unchanged: bool) -> str | None:
    """What is wrong with the learner's state after an ``amp_step`` case, or None."""
    import torch

    params = [p.detach() for p in mine["model"].parameters()]
    if not all(bool(torch.isfinite(p).all()) for p in params):
        return ("the weights became inf or NaN: step with scaler.step(optimizer), which unscales the "
                "gradients and skips a step whose gradients overflowed.")
    if case == "overflow":
        if not unchanged:
            return ("the weights changed although the scaled gradients overflowed; scaler.step(optimizer) "
                    "would have skipped this step.")
        if mine["scaler"].get_scale() != ref["scaler"].get_scale():
            return (f"the loss scale is {mine['scaler'].get_scale():g}, expected {ref['scaler'].get_scale():g}: "
                    "call scaler.update() after scaler.step(optimizer) so the scale backs off after an overflow.")
        return None
    if case == "tiny" and unchanged:
        return ("the weights did not change: the tiny gradients underflowed to zero in fp16. Scale the loss "
                "first: scaler.scale(loss).backward().")
    w0 = [p.detach().clone() for p in _amp_case(case)["model"].parameters()]
    refs = [p.detach() for p in ref["model"].parameters()]
    change = max(float((r - w).abs().max()) for r, w in zip(refs, w0))
    diff = max(float((p - r).abs().max()) for p, r in zip(params, refs))
    if diff > 1e-2 * change + 1e-12:
        hint = ""
        if case == "ordinary":
            hint = (" Clear the gradients at every step (optimizer.zero_grad()) and step with "
                    "scaler.step(optimizer), not optimizer.step().")
        return (f"the updated weights differ from the reference by up to {diff:.3g} "
                f"(the reference update is {change:.3g}).{hint}")
    return None
# --- end of lesson 02 checkers -------------------------------------------------------------


# --- lesson 09 ---
# Capstone checker: capstone_submission. Owned by the capstone-lesson author.


def capstone_submission(config: Any, result: Any = None, board: Any = None,
                        target_accuracy: float | None = None) -> Check:
    """Check a learner's capstone attempt: ``config`` is a valid ``TrainConfig`` aimed at
    ``target_accuracy`` (fraction 0-1), ``result`` (a ``RunResult`` from ``gl.train``) reached
    it, and ``board`` (a ``gl.Leaderboard``) holds an entry with the run's energy (joules)."""
    from greenlab.train import TrainConfig

    name = "capstone_submission"
    if is_placeholder(config):
        return Check(name, NOT_ATTEMPTED, "my_recipe() still returns None: return a gl.TrainConfig.")
    if not isinstance(config, TrainConfig):
        return Check(name, FAILED, f"my_recipe() must return a gl.TrainConfig, got {type(config).__name__}.",
                     ["build one with gl.TrainConfig(precision=..., batch_size=..., ...)"])
    problems = []
    if target_accuracy is not None and config.target_accuracy != target_accuracy:
        problems.append(f"set target_accuracy={target_accuracy!r} (got {config.target_accuracy!r}), so the run "
                        "is judged on the same target as the recipes.")
    if config.target_accuracy is not None and not config.stop_at_target:
        problems.append("stop_at_target=False keeps training after the target: energy spent after it is wasted.")
    if problems:
        return Check(name, FAILED, "the recipe's config needs a change.", problems)
    if result is None:
        return Check(name, FAILED, "the config is valid, but no run was given: train it with gl.train.")
    if not hasattr(result, "joules_to_target") or not hasattr(result, "joules"):
        return Check(name, FAILED, f"result must be a RunResult from gl.train, got {type(result).__name__}.")
    if result.joules_to_target is None:
        best = "n/a" if result.best_accuracy is None else f"{result.best_accuracy:.1%}"
        return Check(name, FAILED, f"the run did not reach the target (best accuracy {best}, status "
                     f"{result.status}).", ["try more epochs, a larger learning rate, or a wider model; "
                                            "patience stops a run that has stalled."])
    if board is None or not hasattr(board, "entries"):
        return Check(name, FAILED, "the run reached the target; now add it to the leaderboard "
                     "(board.add_result(name, run)) and pass the board.")
    mine = [e for e in board.entries() if math.isclose(e.get("joules", -1.0), float(result.joules), rel_tol=1e-9)]
    if not mine:
        return Check(name, FAILED, "the run reached the target, but the leaderboard has no entry with its "
                     "energy: add it with board.add_result(name, run).")
    entry = mine[-1]
    rank = next((e["rank"] for e in board.ranked() if e.get("id") == entry.get("id")), None)
    return Check(name, PASSED, f"your recipe reached the target with {result.joules_to_target:.4g} J "
                 f"(rank {rank} of {len(board.entries())} on the leaderboard).",
                 [f"time to target {result.seconds_to_target:.3g} s; CO2e of the whole run "
                  f"{entry.get('co2e_g', float('nan')):.3g} g"
                  + (" (energy is an estimate)" if result.estimated else "")])
# --- end of lesson 09 checkers -------------------------------------------------------------


# --- lessons 10 and 11 (their checkers live in greenlab/checks_lm.py) ---
from greenlab.checks_lm import lora_trainable_params, zero_bytes_per_rank  # noqa: E402
