"""Crash-safe training checkpoints (written atomically, checksummed, read back with
``weights_only=True``) and the ``gl.train`` callback that saves the whole training state.

``save_checkpoint`` / ``load_checkpoint`` / ``check_optimizer_state`` / ``CheckpointCallback``;
``gl.train(..., resume_from=path)`` continues from a file the callback wrote.
"""

from __future__ import annotations

import hashlib
import io
import os
from datetime import datetime, timezone
from pathlib import Path

import torch

from greenlab.base.storage import atomic_write_bytes

CHECKPOINT_FORMAT = "greenlab-checkpoint"
CHECKPOINT_VERSION = 2  # version 2 wraps the version-1 payload with a SHA-256 checksum


def save_checkpoint(path, model, optimizer=None, step: int = 0, **extra) -> Path:
    """Save model (and optimizer) state, the step count and ``extra`` plain values (numbers,
    strings, lists, tuples, dicts, tensors) crash-safely: a crash mid-write leaves the previous
    file intact. ``extra`` is checked first (numpy scalars become Python numbers; anything
    ``load_checkpoint`` could not read back raises ValueError before the file is touched), and
    the file carries a SHA-256 checksum of its payload that ``load_checkpoint`` verifies."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a file path, got {type(path).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}")
    _check_count("step", step, 0)
    extra = {key: _loadable(value, f"extra[{key!r}]") for key, value in extra.items()}
    _check_round_trip(extra)
    payload = {"format": CHECKPOINT_FORMAT, "version": 1, "step": int(step),
               "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "model": model.state_dict(),
               "optimizer": optimizer.state_dict() if optimizer is not None else None,
               "optimizer_type": type(optimizer).__name__ if optimizer is not None else None,
               "param_shapes": _param_shapes(optimizer) if optimizer is not None else None,
               "extra": extra}
    inner = io.BytesIO()
    torch.save(payload, inner)
    data = inner.getvalue()
    outer = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
             "sha256": hashlib.sha256(data).hexdigest(),
             "payload": torch.frombuffer(bytearray(data), dtype=torch.uint8)}
    buffer = io.BytesIO()
    torch.save(outer, buffer)
    path = Path(path)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def load_checkpoint(path, model=None, optimizer=None, map_location="cpu") -> dict:
    """Read a checkpoint written by ``save_checkpoint`` (``torch.load`` with ``weights_only=True``:
    no code runs), verify its checksum, and load its state into ``model``/``optimizer`` when
    given. A damaged file, or one saved from a different model or optimizer, raises ValueError
    saying so. Returns the payload (``step``, ``extra``, ``saved_at``, ``model``, ``optimizer``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a file path, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if model is not None and not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module or None, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a greenlab checkpoint (written by save_checkpoint)")
    if payload.get("version") == CHECKPOINT_VERSION:
        payload = _unwrap(payload, path, map_location)
    elif payload.get("version") != 1:
        raise ValueError(f"{path}: checkpoint version {payload.get('version')!r} is not supported")
    if model is not None:
        try:
            model.load_state_dict(payload["model"])
        except (RuntimeError, KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path} was saved from a different model ({type(model).__name__} does "
                             f"not fit it): {exc}") from None
    if optimizer is not None:
        if payload["optimizer"] is None:
            raise ValueError(f"{path} holds no optimizer state")
        check_optimizer_state(payload, optimizer, path)
        try:
            optimizer.load_state_dict(payload["optimizer"])
        except (RuntimeError, KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path} was saved from a different optimizer: {exc}") from None
    return payload


def check_optimizer_state(payload: dict, optimizer, path) -> None:
    """Raise ValueError when the optimizer state in ``payload`` (from ``load_checkpoint``) was
    saved from another optimizer type or for parameters of other shapes than ``optimizer``'s
    (torch itself would load it silently when only the shapes differ)."""
    saved_type = payload.get("optimizer_type")
    if saved_type is not None and saved_type != type(optimizer).__name__:
        raise ValueError(f"{path} holds {saved_type} state, not {type(optimizer).__name__} state")
    ours = _param_shapes(optimizer)
    theirs = payload.get("param_shapes")
    if theirs is not None and [list(s) for s in theirs] != ours:
        raise ValueError(f"{path} was saved for an optimizer over parameters of other shapes "
                         f"(checkpoint: {_shapes_text(theirs)}; this optimizer: {_shapes_text(ours)}): "
                         "a checkpoint from another model")
    state = (payload.get("optimizer") or {}).get("state", {})
    for index, entry in state.items():
        if not isinstance(index, int) or not 0 <= index < len(ours):
            raise ValueError(f"{path}: optimizer state for parameter {index!r}, but this optimizer "
                             f"has {len(ours)} parameters: a checkpoint from another model")
        for key, value in (entry or {}).items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and list(value.shape) != ours[index]:
                raise ValueError(f"{path}: optimizer state {key!r} of parameter {index} has shape "
                                 f"{list(value.shape)}, the parameter {ours[index]}: a checkpoint "
                                 "from another model")


class CheckpointCallback:
    """A ``gl.train`` callback that saves the whole training state (model, optimizer, lr
    schedule, loss scaler, position in the data, random-number states, history, seconds and
    joules so far) every ``every_steps`` optimizer steps to ``path``, through
    ``state.checkpoint``; ``gl.train(..., resume_from=path)`` continues from it. At the end of a
    run that finished (completed, target reached, early-stopped) it saves the final state too;
    after a stop, an interrupt or divergence it keeps the last periodic checkpoint."""

    def __init__(self, path, every_steps: int = 100):
        _check_count("every_steps", every_steps, 1)
        self.path = Path(path)
        self.every_steps = every_steps
        self.saved = 0

    def on_step(self, state) -> None:
        if state.step % self.every_steps == 0:
            self._save(state)

    def on_end(self, state) -> None:
        if state.status in ("completed", "target-reached", "early-stopped"):
            self._save(state)

    def _save(self, state) -> None:
        state.checkpoint(self.path)
        self.saved += 1


def _unwrap(outer: dict, path, map_location) -> dict:
    """The checksummed payload inside a version-2 file."""
    blob = outer.get("payload")
    digest = outer.get("sha256")
    if not isinstance(blob, torch.Tensor) or blob.dtype != torch.uint8 or not isinstance(digest, str):
        raise ValueError(f"{path} is a damaged greenlab checkpoint (no payload or checksum)")
    data = blob.cpu().numpy().tobytes()
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"{path} is damaged: its SHA-256 checksum does not match its content "
                         "(a partial copy or a corrupted disk); use an earlier checkpoint")
    try:
        payload = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is a damaged greenlab checkpoint (payload of the wrong kind)")
    return payload


def _shapes_text(shapes) -> str:
    text = ", ".join("x".join(map(str, s)) or "scalar" for s in shapes[:6])
    return text + (f", ... ({len(shapes)} tensors)" if len(shapes) > 6 else "")


def _param_shapes(optimizer) -> list:
    return [list(p.shape) for group in optimizer.param_groups for p in group["params"]]


_PLAIN = (type(None), bool, int, float, str, torch.Tensor, torch.dtype, torch.Size)


def _loadable(value, where: str):
    """``value`` with numpy scalars as Python numbers; ValueError naming ``where`` for anything a
    ``weights_only`` load cannot read back (objects, functions, numpy arrays)."""
    if type(value) in _PLAIN or isinstance(value, (torch.Tensor, torch.dtype, torch.Size)):
        return value
    for kind in (bool, int, float, str):  # subclasses (numpy.float64, enums) as the plain type
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"{where} has a key {k!r} ({type(k).__name__}); checkpoint keys must "
                                 "be strings or integers")
            out[k] = _loadable(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        items = [_loadable(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        item = value.item()
        if isinstance(item, (bool, int, float, str)):
            return item
    raise ValueError(f"{where} is a {type(value).__name__}, which a checkpoint cannot hold "
                     "(allowed: None, bool, int, float, str, tensors, and lists/tuples/dicts of "
                     "these; convert numpy arrays with torch.from_numpy)")


def _check_round_trip(extra: dict) -> None:
    buffer = io.BytesIO()
    try:
        torch.save(extra, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    except Exception as exc:
        raise ValueError(f"extra values cannot be saved in a loadable checkpoint: {exc}") from None


def _check_count(label, value, minimum) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{label} must be an integer >= {minimum}, got {value!r}")
