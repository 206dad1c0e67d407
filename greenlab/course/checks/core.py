"""Instant exercise checkers for the lessons (``gl.check``).

A checker looks at a learner's answer and returns a :class:`Check`: passed,
failed (with exactly what was wrong) or not attempted yet. Checkers never raise
for a wrong answer, an exception inside the learner's code, or a placeholder
answer (``None`` / ``NotImplemented``), so a learner notebook runs top to bottom
even when an exercise is skipped.

This module holds what every checker shares: :class:`Check`, :func:`check_close`,
:func:`check_function`, :func:`check_gradients_match`. The checkers themselves live
beside it, one module per lesson, and ``greenlab.course.checks`` exposes them all by the
exercise's name::

    gl.check.joules_per_gflop(joules_per_gflop)   # shows a green tick, red cross or grey "not attempted"
"""

from __future__ import annotations

import contextlib
import copy
import functools
import html
import importlib
import inspect
import math
import os
import sys
import sysconfig
import types
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
        """Plain-text rendering: a symbol, the name and status, the message, then indented
        details, e.g. "✘ add_one failed: 4 of 4 test inputs give a wrong result." """
        lines = [f"{_SYMBOLS[self.status]} {self.name} {self.status}: {self.message}"]
        lines += [f"    {d}" for d in self.details]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` (its message: this check's text, hints included) unless the
        answer passed: for autograded test cells, where a failing exercise must lose its points."""
        if not self.passed:
            raise AssertionError(self.text())

    def pick(self, yours: Any, reference: Any, what: str) -> Any:
        """The implementation the lesson measures next: ``yours`` when it passed this check,
        else the library's ``reference``. Prints one line saying whose ``what`` (e.g.
        ``"pruning"``) is measured and why, so a figure is never credited to the wrong code."""
        if self.passed:
            print(f"Measured below: your {what} (it passed the checker).")
            return yours
        reason = "is not written yet" if not self.attempted else "did not pass the checker yet"
        print(f"Measured below: the library's {what} (yours {reason}).")
        return reference

    def whose(self, what: str) -> str:
        """A label that says whose ``what`` runs after ``pick``: "your LoRA" when this check
        passed, else "the library's LoRA"; for a figure, a legend or a comparison's arm."""
        return f"your {what}" if self.passed else f"the library's {what}"

    def _repr_html_(self) -> str:
        colour = _COLOURS[self.status]
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        details = f"<ul style='margin:4px 0 0 0'>{items}</ul>" if items else ""
        return (
            f"<div style='border-left:4px solid {colour};padding:4px 8px;margin:4px 0'>"
            f"<span style='color:{colour};font-weight:bold'>{_SYMBOLS[self.status]} "
            f"{html.escape(self.name)} {html.escape(self.status)}:</span> "
            f"{html.escape(self.message)}{details}</div>"
        )


class CheckerArgumentError(ValueError):
    """A checker's own argument (a seed, a tolerance, a lesson, a minimum) that is not valid: the
    one error a checker raises, since it is the caller's (the lesson's or the grader's), never the
    learner's answer."""


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``seed`` as an int >= 0 (or None): the seed grade time draws extra cases (or a quiz's
    option order) from; anything else is refused naming ``name``."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise CheckerArgumentError(f"{name} must be an integer >= 0 or None (the seed extra cases are drawn "
                                   f"from), got {_short(seed)}")
    return int(seed)


def exception_text(exc: BaseException) -> str:
    """``"Type: message"`` of an exception raised by the learner's code, even when its message
    cannot be turned into text (its ``__str__`` raises)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return f"{type(exc).__name__} (its message cannot be shown)"


def wrong_inputs(wrong: int, total: int) -> str:
    """The one sentence of a failed function check: "1 of 4 test inputs gives a wrong result."."""
    verb = "gives" if wrong == 1 else "give"
    if wrong == total:
        return (f"the test input gives a wrong result." if total == 1
                else f"all {total} test inputs give a wrong result.")
    return f"{wrong} of {total} test inputs {verb} a wrong result."


def variant_hint(wrong, otherwise: Callable[[tuple, Any, Any], str | None] | None = None):
    """A ``hint`` for :func:`check_function` from typical mistakes: ``wrong`` is a list of
    ``(wrong_function, advice)``; the advice of the first one that gives the learner's answer on
    this input (and differs from the right one) is the hint, else ``otherwise(args, expected, got)``."""

    def hint(args, expected, got):
        for variant, advice in wrong:
            try:
                if variant(*args) == got != expected:
                    return advice
            except Exception:  # a planted variant that fails on this input says nothing
                continue
        return otherwise(args, expected, got) if otherwise is not None else None

    return hint


LIBRARY_PACKAGE = "greenlab"


def library_answer(answer: Any) -> str | None:
    """Why ``answer`` is the library's own implementation rather than the learner's, or None.

    An answer is the library's when it is, or wraps (``functools.partial``, a bound method,
    ``functools.wraps``' ``__wrapped__``), a function or class defined in the ``greenlab``
    package (by its ``__module__``), a class with such a class among its bases, or a callable
    instance of one. ``fedavg_aggregate = gl.federated.fedavg`` and
    ``class MyLoRA(gl.lora.LoRALinear): pass`` are both refused: a checker that compares the
    answer with that same reference would otherwise pass it for no work. Answers that are no
    callable (numbers, text, a measurement, a config) are never refused here."""
    seen: set[int] = set()
    target = answer
    while id(target) not in seen:
        seen.add(id(target))
        try:
            if isinstance(target, functools.partial):
                target = target.func
            elif inspect.ismethod(target):
                target = target.__func__
            elif inspect.isfunction(target) and inspect.isfunction(getattr(target, "__wrapped__", None)):
                target = target.__wrapped__
        except Exception:  # an answer whose attributes raise is no library object
            return None
    if inspect.isclass(target):
        for klass in _mro(target):
            if _in_library(klass):
                what = "is" if klass is target else f"subclasses"
                return (f"your answer {what} the library's own {_qualified(klass)}: a graded exercise "
                        "counts only code you wrote. Write the technique yourself (you may use torch).")
        return None
    if inspect.isroutine(target) and _in_library(target):
        return (f"your answer is the library's own {_qualified(target)}: a graded exercise counts only "
                "code you wrote. Write the technique yourself (you may use torch).")
    if callable(target) and not inspect.isroutine(target):
        for klass in _mro(type(target)):
            if _in_library(klass):
                return (f"your answer is an instance of the library's own {_qualified(klass)}: a graded "
                        "exercise counts only code you wrote.")
    return None


def graded(checker: Callable[..., Check] | None = None, *, code: bool = True, reference: Sequence[str] = ()):
    """Decorate a public checker so that it refuses the library's own implementation (see
    :func:`library_answer`) as any positional argument, with the reason, before it checks anything,
    and so that the library's ``reference`` (``"module:qualname"`` names of the functions and
    classes the exercise asks the learner to write) cannot be used from the learner's code while
    the checker runs (see :func:`withheld`): a thin wrapper, a lambda or a class that calls the
    reference gets no points either. Every ``gl.check.NAME`` is decorated, so both refusals live
    in this one place; ``@graded(code=False)`` marks a checker whose answer is a value, not code (a
    measurement, a statement), which is never refused for being a library object. The undecorated
    checker stays reachable as ``__wrapped__`` (tests check that the library passes its own checker)."""
    if checker is None:
        return functools.partial(graded, code=code, reference=reference)
    try:
        params = inspect.signature(checker).parameters
    except (TypeError, ValueError):
        params = {}
    reference = tuple(reference)

    @functools.wraps(checker)
    def _graded_check(*args: Any, **kwargs: Any) -> Check:  # its frames mark where a checker's own code begins
        for answer in args if code else ():  # linear_quantize takes two functions: both are the learner's
            reason = library_answer(answer)
            if reason is not None:
                return Check(checker.__name__, FAILED, "refused: the library's implementation is not your work.",
                             [reason])
        if "seed" in params:
            try:
                seed = inspect.signature(checker).bind_partial(*args, **kwargs).arguments.get("seed")
            except TypeError:
                seed = None  # the call itself is wrong: the checker's own call reports it
            check_seed(seed)
        with withheld(reference) as called:
            try:
                verdict = checker(*args, **kwargs)
            except CheckerArgumentError:
                raise
            except Exception as exc:  # the answer broke the checker: a wrong answer, never a crash
                cause = exc.__context__  # the learner's own exception, when reporting it is what failed
                verdict = Check(checker.__name__, FAILED, "your answer could not be checked: using it raised an "
                                "error (see below); return the kind of value the exercise asks for.",
                                [exception_text(exc) + (f" (while reporting {exception_text(cause)})"
                                                        if cause is not None else "")])
            if not isinstance(verdict, Check):
                raise TypeError(f"{checker.__name__} returned {type(verdict).__name__}, not a Check")
        if called:
            return Check(checker.__name__, FAILED, "refused: your answer calls the library's implementation.",
                         [_withheld_message(name) for name in dict.fromkeys(called)])
        return verdict

    _graded_check.draws_cases = "seed" in params  # True when it can draw random cases from a seed (grade time)
    _graded_check.reference = reference
    return _graded_check


class LibraryWithheld(RuntimeError):
    """Raised when the learner's answer calls the library's own implementation of the exercise
    while a checker runs."""


# Module maps (name -> module) besides ``sys.modules`` whose copies of the references are withheld
# too: at grade time ``greenlab.course.grading`` imports the checkers afresh and adds the copies the
# learner's kernel holds, which are the ones the learner's code calls.
HELD_COPIES: list = []
_WITHHELD: dict = {}  # stand-in code object -> (the function as it was, the reference's name, calls list)


@contextlib.contextmanager
def withheld(reference: Sequence[str]):
    """Inside the block, every function named in ``reference`` (``"module:qualname"``; for a
    class, the methods it defines), in ``sys.modules`` and in :data:`HELD_COPIES`, raises
    :class:`LibraryWithheld` when called from code outside the library (the learner's) that runs
    under a graded checker, and runs as before when the library or the checker calls it. The
    function objects keep their identity (their code is swapped and restored after), so a name
    the learner bound before the check is withheld too. Yields the list of references the
    learner's code called."""
    called: list[str] = []
    swapped = []
    try:
        for name in reference:
            for fn in _functions_named(name):
                if any(fn is f for f, _ in swapped):
                    continue
                original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                              fn.__closure__)
                original.__kwdefaults__ = fn.__kwdefaults__
                stand_in = _stand_in.__code__.replace(co_name=fn.__code__.co_name,
                                                      co_qualname=fn.__code__.co_qualname)
                _WITHHELD[stand_in] = (original, name, called)
                swapped.append((fn, fn.__code__))
                fn.__code__ = stand_in
        yield called
    finally:
        for fn, saved in swapped:
            _WITHHELD.pop(fn.__code__, None)
            fn.__code__ = saved


def _stand_in(*args, **kwargs):
    # Runs as the code of a withheld function, with that function's module globals: it reaches
    # this module through sys.modules, by name.
    import sys
    return sys.modules["greenlab.course.checks.core"]._call_withheld(sys._getframe(), args, kwargs)


def _call_withheld(frame, args, kwargs):
    original, name, called = _WITHHELD[frame.f_code]
    caller = frame.f_back
    while caller is not None and not _is_checker_frame(caller):
        if _is_learners(caller.f_code.co_filename):
            called.append(name)
            raise LibraryWithheld(_withheld_message(name))
        caller = caller.f_back
    return original(*args, **kwargs)


def _withheld_message(name: str) -> str:
    return (f"the library's own {name.replace(':', '.')} was called from your answer: a graded exercise "
            "counts only code you wrote. Write the technique yourself (you may use torch).")


def _functions_named(name: str) -> list:
    """The plain functions behind ``"module:qualname"`` in every module map: the function itself
    (the innermost one a decorator wraps), or the functions a class defines."""
    module_name, _, qualname = name.partition(":")
    # imported now if it is not yet: gl.* loads a module on first use, and that use may be the
    # learner's answer calling it in the middle of the check
    importlib.import_module(module_name)
    found = []
    for modules in [sys.modules, *HELD_COPIES]:
        obj = modules.get(module_name)
        for part in qualname.split(".") if obj is not None else ():
            obj = getattr(obj, part, None)
        if obj is None:
            continue
        members = [v for v in vars(obj).values()] if inspect.isclass(obj) else [obj]
        for member in members:
            member = getattr(member, "__func__", member)  # a staticmethod or classmethod
            while inspect.isfunction(member) and member.__closure__ and inspect.isfunction(
                    getattr(member, "__wrapped__", None)):
                member = member.__wrapped__
            if inspect.isfunction(member) and not member.__closure__ and _in_library(member):
                found.append(member)
    return found


_THIS_FILE = __file__
_LIBRARY_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_NEUTRAL_DIRS = tuple(sorted({os.path.abspath(p) + os.sep for key, p in sysconfig.get_paths().items()
                              if key in ("stdlib", "platstdlib", "purelib", "platlib")} | {_LIBRARY_DIR + os.sep}))


def _is_checker_frame(frame) -> bool:
    return frame.f_code.co_name == "_graded_check" and frame.f_code.co_filename == _THIS_FILE


def _is_learners(filename: str) -> bool:
    """True for code that is neither the library's, Python's own nor an installed package's: the
    learner's cells (and anything else they defined)."""
    if filename.startswith("<frozen"):
        return False
    return not os.path.abspath(filename).startswith(_NEUTRAL_DIRS) if not filename.startswith("<") else True


def drawn(seed: int | None, stream: str):
    """A ``random.Random`` for the cases a checker draws at grade time from ``seed`` (None: no
    drawn cases, the checker keeps to its fixed ones), one stream per checker by name."""
    import random  # lazy: only grade time draws cases

    seed = check_seed(seed)
    if seed is None:
        return None
    return random.Random(f"{seed}:{stream}")


def drawn_inputs(seed: int | None, stream: str, make: Callable[[Any], tuple], count: int = 4) -> list:
    """``count`` more inputs for a checker, each made by ``make(rng)`` from :func:`drawn` (none
    without a seed): grade time adds them to the visible ones, so an answer fitted to those fails."""
    rng = drawn(seed, stream)
    return [make(rng) for _ in range(count)] if rng is not None else []


def _mro(klass: type) -> tuple:
    try:
        return tuple(klass.__mro__)
    except Exception:  # a class-like object without an MRO
        return (klass,)


def _in_library(obj: Any) -> bool:
    try:
        module = obj.__module__
    except Exception:  # no module attribute (or one that raises): not a library object
        return False
    return isinstance(module, str) and (module == LIBRARY_PACKAGE or module.startswith(LIBRARY_PACKAGE + "."))


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


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
    problem = _compare(got, expected, max(rtol, dtype_rtol(got)), atol)
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


def number_or_none(value: Any) -> float | None:
    """``value`` as a float, or None when it is not a number: for hints, which look at a wrong
    answer only when it is one."""
    try:
        return float(value)
    except (TypeError, ValueError):
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
    try:
        cases = [_as_case(c) for c in cases]
    except TypeError:
        raise CheckerArgumentError(f"cases must be a list of (args, expected) pairs, got {_short(cases)}") from None
    if not cases:
        raise CheckerArgumentError("check_function needs at least one (args, expected) case")
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
            failures.append(f"{call} raised {exception_text(exc)}")
            continue
        if isinstance(expected, type) and issubclass(expected, BaseException):
            failures.append(f"{call} returned {_short(got)}; expected it to raise {expected.__name__}")
            continue
        if is_placeholder(got):
            placeholders += 1
            failures.append(f"{call} returned {_short(got)}; expected {_short(expected)}")
            continue
        # a float32 input carries float32 rounding into any right answer: the tolerance fits the dtype
        problem = _compare(got, expected, max(rtol, dtype_rtol(args), dtype_rtol(got)), atol)
        if problem is not None:
            line = f"{call}: {problem}"
            advice = _safe_hint(hint, args, expected, got)
            failures.append(f"{line} Hint: {advice}" if advice else line)

    if placeholders == len(cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        return Check(label, FAILED, wrong_inputs(len(failures), len(cases)), failures)
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
    except Exception as exc:  # not a module, or one that breaks: a wrong answer, never an error
        return Check(label, FAILED, f"expected two torch.nn.Module objects ({exception_text(exc)}).")
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


# --- helpers ----------------------------------------------------------------------------------


_EPSILON = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
_ROUNDINGS = 8  # a right answer computed in a dtype may differ from the float64 reference by a few roundings
# The tolerance of a right answer computed with torch's default float32 from Python numbers and
# handed back as a Python float (float(t), t.item()), which carries no dtype for dtype_rtol to see:
# a trapezoid over [10.0, 12.0, ...] W gives 8.349999428 J for 8.35 J.
FLOAT32_RTOL = _ROUNDINGS * _EPSILON["float32"]


def dtype_rtol(value: Any) -> float:
    """The relative tolerance a right answer computed in ``value``'s floating dtype needs:
    8 x the machine epsilon of the least precise float tensor or array in ``value`` (searched
    through lists, tuples and dicts), 0 when it holds none. A float32 sparsity of 5/6 is
    0.83333331, not 0.83333333: a checker asking for 1e-9 fails the right answer."""
    found = 0.0
    stack, seen = [value], 0
    while stack and seen < 1000:
        item, seen = stack.pop(), seen + 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            try:  # an answer whose attributes raise has no dtype
                dtype = str(getattr(item, "dtype", "")).replace("torch.", "")
                if dtype in _EPSILON and getattr(item, "shape", None) is not None:
                    found = max(found, _ROUNDINGS * _EPSILON[dtype])
            except Exception:
                continue
    return found


def _check_tolerances(rtol: float, atol: float) -> None:
    """A tolerance is a finite real number >= 0: True, NaN or inf would pass any answer."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
            raise CheckerArgumentError(f"{name} must be a finite number >= 0, got {_short(value)}")


def _as_case(case: Any) -> tuple[tuple, Any]:
    try:
        args, expected = case
    except (TypeError, ValueError):
        raise CheckerArgumentError(f"each case must be a pair (args, expected), got {_short(case)}") from None
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
            same = _equal(got, expected)
        except Exception as exc:  # an odd type whose == raises
            return f"could not compare {_short(got)} with {_short(expected)} ({exception_text(exc)})."
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
            digits = ".6g" if f"{e:.6g}" != f"{g:.6g}" else ".10g"
            return f"expected {e:{digits}}{where}, got {g:{digits}} (difference {g - e:.3g})."
    return None


def _equal(got: Any, expected: Any, depth: int = 0) -> bool:
    """``got == expected`` taken apart: a dict, list or tuple must be one with equal items, a
    number a real number of the same value, any other value one of the expected type; so an
    answer whose ``==`` says True to anything is no match."""
    if depth > 100:
        return False
    if isinstance(expected, dict):
        return (isinstance(got, dict) and len(got) == len(expected)
                and all(k in got and _equal(got[k], v, depth + 1) for k, v in expected.items()))
    if isinstance(expected, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(_equal(g, e, depth + 1) for g, e in zip(got, expected)))
    if expected is None:
        return got is None
    if isinstance(expected, bool):
        return isinstance(got, bool) and got == expected
    if isinstance(expected, (int, float)):
        have = _to_float_list(got)
        return have is not None and have[1] == () and have[0][0] == float(expected)
    return isinstance(got, type(expected)) and bool(expected == got) and bool(got == expected)


def _short(value: Any, limit: int = 60) -> str:
    try:
        if hasattr(value, "detach") and hasattr(value, "shape") and getattr(value, "numel", lambda: 0)() > 8:
            return f"tensor of shape {tuple(value.shape)}"
        text = repr(value)
    except Exception:  # a repr that fails (or an int too long to print) must not fail the check
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
