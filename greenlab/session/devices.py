"""Which device to run on (CUDA, then Apple MPS, then CPU; never an assertion) and whether
quick mode is on (``GREENLAB_QUICK``, ``CI``, or no CUDA GPU)."""

from __future__ import annotations

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


GRADING_ENV = "GREENLAB_GRADING"


def grading_mode(environ) -> bool:
    """True when ``GREENLAB_GRADING`` is on (1/true/yes/on): a course's autograder runs the
    lessons, at the smallest size, writing to no class leaderboard (``greenlab.course.nbgrader``'s
    config sets it). ValueError for a value that is neither on nor off."""
    raw = (environ.get(GRADING_ENV) or "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{GRADING_ENV} must be 1/true or 0/false, got {environ.get(GRADING_ENV)!r}")


def quick_decision(environ, device: str) -> tuple[bool, str]:
    """(quick, reason) from the environment and the device: grading mode (``GREENLAB_GRADING``)
    first, always quick; then ``GREENLAB_QUICK`` (1 or 0), then ``CI``, then quick mode whenever
    ``device`` is not a CUDA GPU."""
    if grading_mode(environ):
        return True, f"{GRADING_ENV}={environ.get(GRADING_ENV)}: grading runs the smallest sizes"
    raw = environ.get("GREENLAB_QUICK")
    if raw is not None and raw.strip():
        value = raw.strip().lower()
        if value in _TRUE:
            return True, f"GREENLAB_QUICK={raw}"
        if value in _FALSE:
            return False, f"GREENLAB_QUICK={raw}"
        raise ValueError(f"GREENLAB_QUICK must be 1/true or 0/false, got {raw!r}")
    if environ.get("CI", "").strip().lower() not in _FALSE:
        return True, "CI is set"
    if not device.startswith("cuda"):
        what = "Apple GPU (MPS)" if device == "mps" else "no GPU"
        return True, f"{what}: full sizes are meant for a CUDA GPU; GREENLAB_QUICK=0 forces them"
    return False, "CUDA GPU"


def choose_device(requested: str | None) -> str:
    """The device to use: ``requested`` checked (ValueError when this machine lacks it), else the
    best one here."""
    import torch

    if requested is None:
        if torch.cuda.is_available():
            return "cuda"
        if mps_available():
            return "mps"
        return "cpu"
    if not isinstance(requested, str):
        raise ValueError(f"device must be 'cuda', 'cuda:N', 'mps' or 'cpu', got {requested!r}")
    name = requested.strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "mps":
        if not mps_available():
            raise ValueError("device 'mps' was asked for but no Apple GPU (MPS) is available here; "
                             "use device='cpu' or leave device=None to pick automatically")
        return "mps"
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {requested!r} was asked for but no CUDA GPU is available here; "
                             "use device='cpu' or leave device=None to pick automatically")
        if name.startswith("cuda:"):
            index = name.split(":", 1)[1]
            if not index.isdigit() or int(index) >= torch.cuda.device_count():
                raise ValueError(f"device {requested!r}: this machine has "
                                 f"{torch.cuda.device_count()} CUDA device(s), cuda:0..")
        return name
    raise ValueError(f"device must be 'cuda', 'cuda:N', 'mps' or 'cpu', got {requested!r}")


def mps_available() -> bool:
    """True when PyTorch can use an Apple GPU here."""
    import torch

    try:
        return bool(torch.backends.mps.is_available())
    except (AttributeError, RuntimeError):  # builds without the MPS backend
        return False


def device_name(dev: str) -> str:
    """The GPU's marketing name for ``dev``, or \"\" on a CPU."""
    import torch

    if dev.startswith("cuda"):
        try:
            return torch.cuda.get_device_name(torch.device(dev))
        except Exception:  # noqa: BLE001 - the name is cosmetic
            return ""
    if dev == "mps":
        return "Apple GPU"
    return ""


def synchronize(device) -> None:
    """Wait until the work queued on ``device`` has finished, so a clock read after it counts that
    work: ``torch.accelerator.synchronize`` on a GPU (CUDA, Apple MPS, ...); nothing on a CPU, whose
    operations are done when they return. ``device``: a ``torch.device``, or a name such as "cuda:1"."""
    import torch

    dev = torch.device(device)
    if dev.type != "cpu":
        torch.accelerator.synchronize(dev)
