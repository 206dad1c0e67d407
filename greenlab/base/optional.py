"""Optional libraries: whether one can be used here, and importing it without noise.

    why = gl.optional.missing("bitsandbytes")   # None, or "bitsandbytes is not installed"

A lesson that needs an optional library (bitsandbytes, torchao, torchvision) asks first and, where
it is missing, says so and shows that figure as not measured instead of failing: the GPU machines
the reference runs come from may have only torch, numpy, nvidia-ml-py and matplotlib.

The course installs as ``greenlab-course`` (PyPI's ``greenlab`` is an unrelated project) with a lean
core; the rest come in extras named for their use (``pyproject.toml``)::

    gl.optional.install_hint("optuna")   # "pip install 'greenlab-course[scheduling]'"
    gl.optional.require("optuna", "early-stopped tuning")   # LibraryMissing naming that extra
"""

from __future__ import annotations

import importlib
import logging

from greenlab.base import validation


DISTRIBUTION = "greenlab-course"
# each optional package and the extra of pyproject.toml that installs it (tests/test_packaging.py
# checks the two agree)
EXTRAS = {"jupyterlab": "lab", "sidecar": "lab", "nbconvert": "lab",
          "bitsandbytes": "lowbit", "torchao": "lowbit", "simpy": "scheduling", "optuna": "scheduling",
          "nbgrader": "grading", "nbval": "test", "amdsmi": "amd"}


class LibraryMissing(ImportError):
    """An optional library that a measurement needs is not installed (or does not import here)."""


def missing(package: str) -> str | None:
    """None when ``package`` imports here, else a short reason ("bitsandbytes is not installed")."""
    validation.text("package", package)
    try:
        quiet_import(package)
    except ImportError as exc:
        if getattr(exc, "name", None) == package:
            return f"{package} is not installed"
        return f"{package} does not import here ({type(exc).__name__}: {exc})"
    except Exception as exc:  # a broken install (e.g. a native library for another platform)
        return f"{package} does not import here ({type(exc).__name__}: {exc})"
    return None


def install_hint(package: str) -> str:
    """The pip command that installs ``package`` with this course: its extra's
    (``pip install 'greenlab-course[scheduling]'``), or the package itself when no extra names it."""
    validation.text("package", package)
    extra = EXTRAS.get(package.split(".")[0])
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {package}"


def require(package: str, purpose: str):
    """Import and return ``package`` (``quiet_import``), or raise :class:`LibraryMissing` saying
    what needs it and how to install it: "early-stopped tuning needs optuna: optuna is not
    installed; pip install 'greenlab-course[scheduling]' (in a notebook: %pip install ...)"."""
    validation.text("purpose", purpose)
    why = missing(package.split(".")[0])
    if why:
        hint = install_hint(package)
        raise LibraryMissing(f"{purpose} needs {package.split('.')[0]}: {why}; {hint} "
                             f"(in a notebook: %{hint}, then restart the kernel)")
    return quiet_import(package)


def quiet_import(package: str):
    """Import ``package`` without two import-time log lines that concern neither this course nor
    its results: bitsandbytes' note, on CPUs with AVX-512 BF16, that an optional 4-bit matmul
    kernel package is not installed, and PyTorch's deprecation note about an Enum that torchao
    registers. Every other message passes."""
    quiet = {"bitsandbytes.backends.cpu.ops": "Failed to load CPU gemm_4bit_forward",
             "torch.utils._pytree": "is an Enum subclass and is now natively supported"}
    filters = []
    for name, text in quiet.items():
        f = _DropMessage(text)
        logging.getLogger(name).addFilter(f)
        filters.append((name, f))
    try:
        return importlib.import_module(package)
    finally:
        for name, f in filters:
            logging.getLogger(name).removeFilter(f)


# --- helpers ---------------------------------------------------------------------------------


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in str(record.msg)
