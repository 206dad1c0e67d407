"""Resuming a run: the training state a checkpoint holds, and reading it back for a run with the
same config (fields in ``RESUME_FREE_FIELDS`` may differ) and data size."""

from __future__ import annotations

import os

import torch

from greenlab.training.config import TrainConfig

TRAIN_STATE_VERSION = 1
# TrainConfig fields that do not change what is trained (so a resumed run may differ in them)
RESUME_FREE_FIELDS = ("label", "region", "eval_batch_size", "pin_memory", "prefetch_factor")


def load_train_checkpoint(path, config: TrainConfig, data) -> dict:
    """Read a training checkpoint for resuming with ``config`` on ``data``. Raises
    FileNotFoundError when there is no file, ValueError when it is damaged, is not a training
    checkpoint, cannot be resumed, or was written with a config that changes the run
    (the message names the differing fields)."""
    from greenlab.training.checkpoint import load_checkpoint

    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"resume_from must be a file path or None, got {type(path).__name__}")
    saved = load_checkpoint(path)
    st = (saved.get("extra") or {}).get("train_state")
    if not isinstance(st, dict) or st.get("version") != TRAIN_STATE_VERSION:
        raise ValueError(f"{path} holds no training state to resume from (it was not written by "
                         "state.checkpoint / CheckpointCallback during gl.train)")
    if not st.get("resumable"):
        raise ValueError(f"{path} was written at the end of a finished run (status "
                         f"{st.get('status')!r}); there is nothing left to resume")
    ours, theirs = _plain(config.to_dict()), st["config"]
    differ = sorted(k for k in set(ours) | set(theirs)
                    if k not in RESUME_FREE_FIELDS and ours.get(k) != theirs.get(k))
    if differ:
        detail = ", ".join(f"{k}: checkpoint {theirs.get(k)!r} vs config {ours.get(k)!r}" for k in differ)
        raise ValueError(f"cannot resume from {path}: the config differs in {', '.join(differ)} "
                         f"({detail}). Resume with the checkpoint's config, or start a new run.")
    n_train = int(data.train_x.shape[0])
    if st["n_train"] != n_train:
        raise ValueError(f"cannot resume from {path}: it was trained on {st['n_train']} samples, "
                         f"this data has {n_train}")
    return saved


def _plain(value):
    """Tuples to lists, recursively, so configs compare equal after a save/load round trip."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _set_rng_state(states, dev):
    torch.set_rng_state(states["torch"])
    if states["cuda"] is not None and dev.type == "cuda":
        torch.cuda.set_rng_state(states["cuda"], dev)
