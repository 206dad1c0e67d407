"""Argument checks shared by the Python API and the command line.

Each helper returns the value in plain Python form (a numpy or torch scalar becomes a float or
int) or raises an error that names the argument and the accepted range. A value of the wrong
type raises ``ArgumentTypeError``, which is both a ``TypeError`` and a ``ValueError``, so callers
may catch either.
"""

from __future__ import annotations

import math
import numbers


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type (a TypeError that is also a ValueError)."""


def number(name: str, value, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False, allow_none: bool = False):
    """A finite real number in the given range, returned as float (or None when allowed)."""
    if value is None and allow_none:
        return None
    accepted = describe_range(low, high, low_open, high_open)
    accepted = f" {accepted}" if accepted else ""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number{accepted}, got {_show(value)}")
    try:
        out = float(value)
    except (OverflowError, TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number{accepted}, got {_show(value)}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number{accepted}, got {_show(value)}")
    if low is not None and (out < low or (low_open and out == low)):
        raise ValueError(f"{name} must be{accepted}, got {_show(value)}")
    if high is not None and (out > high or (high_open and out == high)):
        raise ValueError(f"{name} must be{accepted}, got {_show(value)}")
    return out


def _scalar(value):
    """A one-element torch tensor or numpy array as its Python number (other values unchanged)."""
    if isinstance(value, (bool, numbers.Number, str, bytes)) or value is None:
        return value
    try:
        if (callable(getattr(value, "item", None))
                and int(getattr(value, "numel", lambda: getattr(value, "size", 0))()) == 1):
            if getattr(value, "is_meta", False) or getattr(value, "requires_grad", False):
                return value
            return value.item()
    except Exception:
        return value
    return value


def integer(name: str, value, *, low: int | None = None, high: int | None = None,
            allow_none: bool = False):
    """An integer in [low, high], returned as int (or None when allowed). Floats are refused."""
    if value is None and allow_none:
        return None
    accepted = describe_range(low, high, False, False)
    accepted = f" {accepted}" if accepted else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be an integer{accepted}, got {_show(value)}")
    out = int(value)
    if (low is not None and out < low) or (high is not None and out > high):
        raise ValueError(f"{name} must be an integer{accepted}, got {_show(value)}")
    return out


def flag(name: str, value) -> bool:
    """True or False only (not 0/1, not "no")."""
    if not isinstance(value, bool):
        try:
            import numpy

            if isinstance(value, numpy.bool_):
                return bool(value)
        except ImportError:  # pragma: no cover - numpy is a dependency
            pass
        raise ArgumentTypeError(f"{name} must be True or False, got {_show(value)}")
    return value


def choice(name: str, value, options) -> str:
    """One of ``options`` (strings)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be one of {', '.join(options)}, got {_show(value)}")
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}, got {value!r}")
    return value


def text(name: str, value, *, allow_empty: bool = True) -> str:
    """A string (non-empty unless ``allow_empty``)."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a string, got {_show(value)}")
    if not allow_empty and not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def describe_range(low, high, low_open=False, high_open=False) -> str:
    """'in [0, 1)', '>= 0', '> 0' and so on."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {_fmt(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {_fmt(high)}"
    return ""


def _fmt(bound) -> str:
    if isinstance(bound, int):
        return str(bound) if abs(bound) < 10**7 else f"{bound:_}"
    return f"{bound:g}"


def _show(value) -> str:
    """A short repr (long values cut) with the type for non-basic values."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    if isinstance(value, (bool, int, float, str, type(None))):
        return text
    return f"{text} ({type(value).__name__})"


def module(name: str, value):
    """A torch.nn.Module."""
    import torch

    if not isinstance(value, torch.nn.Module):
        raise ArgumentTypeError(f"{name} must be a torch.nn.Module, got {_show(value)}")
    return value


def factory(name: str, value, *, classes: bool = True):
    """A function that builds a fresh model (a class too when ``classes``), not a model itself:
    a torch.nn.Module is callable, so one passed here failed later inside its own forward."""
    import torch

    if (not callable(value) or isinstance(value, torch.nn.Module)
            or (not classes and isinstance(value, type))):
        raise ArgumentTypeError(f"{name} must be a function that builds a fresh model (not a model itself), "
                                f"got {_show(value)}")
    return value


def items(name: str, value) -> list:
    """A list, tuple or other iterable (not a string or a mapping) as a list."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"{name} must be a list, got {_show(value)}")
    return list(value)


def instance(name: str, value, kind, what: str):
    """``value`` if it is an instance of ``kind`` (a class or tuple of classes); ``what`` names
    the accepted kind in the error, e.g. "a greenlab.techniques.lm.corpus.Corpus"."""
    if not isinstance(value, kind):
        raise ArgumentTypeError(f"{name} must be {what}, got {_show(value)}")
    return value


def tensor(name: str, value, *, dims: int | None = None, integer: bool | None = None):
    """A torch.Tensor with ``dims`` dimensions (when given) and an integer or floating dtype
    (when ``integer`` is True or False)."""
    import torch

    shape = f"{dims}-dimensional " if dims is not None else ""
    kind = {True: "integer ", False: "floating-point ", None: ""}[integer]
    if not isinstance(value, torch.Tensor):
        raise ArgumentTypeError(f"{name} must be a {shape}{kind}torch.Tensor, got {_show(value)}")
    if dims is not None and value.dim() != dims:
        raise ValueError(f"{name} must be a {shape}{kind}torch.Tensor, got shape {tuple(value.shape)}")
    if integer is not None and (value.is_floating_point() or value.is_complex()
                                or value.dtype == torch.bool) == integer:
        raise ValueError(f"{name} must be a {shape}{kind}torch.Tensor, got dtype {value.dtype}")
    return value


def parameters(name: str, value) -> list:
    """An iterable of torch.nn.Parameter (or of parameter-group dicts), as a non-empty list."""
    import torch

    if isinstance(value, torch.nn.Module):
        raise ArgumentTypeError(f"{name} must be the model's parameters (model.parameters()), "
                                f"not the model itself, got {_show(value)}")
    if isinstance(value, (str, bytes, torch.Tensor)) or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"{name} must be an iterable of parameters, got {_show(value)}")
    out = list(value)
    if not out:
        raise ValueError(f"{name} must hold at least one parameter, got an empty list")
    for p in out:
        if not isinstance(p, (torch.Tensor, dict)):
            raise ArgumentTypeError(f"{name} must hold torch parameters (or parameter-group dicts), "
                                    f"got an element {_show(p)}")
    return out


DEVICES = "'cpu', 'cuda', 'cuda:N' or 'mps'"


def device(name: str, value):
    """A torch device this machine has, from a string (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
    ``"mps"``) or a ``torch.device``; returned as ``torch.device``."""
    import torch

    if isinstance(value, torch.device):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip().lower()
    else:
        raise ArgumentTypeError(f"{name} must be {DEVICES} (a string or torch.device), got {_show(value)}")
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and not index.isdigit()) or (index and kind != "cuda"):
        raise ValueError(f"{name} must be {DEVICES}, got {value!r}")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{name} {value!r} was asked for but no CUDA GPU is available here; "
                             "use 'cpu' or leave it None to pick automatically")
        if index and int(index) >= torch.cuda.device_count():
            raise ValueError(f"{name} {value!r}: this machine has {torch.cuda.device_count()} "
                             "CUDA device(s), numbered from 0")
    if kind == "mps":
        backend = getattr(torch.backends, "mps", None)
        if backend is None or not backend.is_available():
            raise ValueError(f"{name} 'mps' was asked for but no Apple GPU (MPS) is available here; "
                             "use 'cpu' or leave it None to pick automatically")
    return torch.device(text)
