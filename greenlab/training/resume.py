"""Resuming a run: the whole training state a checkpoint holds (``save_train_state``), reading it
for a run with the same config (fields in ``RESUME_FREE_FIELDS`` may differ) and data size
(``load_train_checkpoint``), and putting it back into that run (``restore_train_state``)."""

from __future__ import annotations

import os
import time

import torch

from greenlab.training.config import TrainConfig
from greenlab.training.checkpoint import check_optimizer_state, load_checkpoint, save_checkpoint

TRAIN_STATE_VERSION = 1
# TrainConfig fields that do not change what is trained (so a resumed run may differ in them)
RESUME_FREE_FIELDS = ("label", "region", "eval_batch_size", "pin_memory", "prefetch_factor")


def load_train_checkpoint(path, config: TrainConfig, data) -> dict:
    """Read a training checkpoint for resuming with ``config`` on ``data``. Raises
    FileNotFoundError when there is no file, ValueError when it is damaged, is not a training
    checkpoint, cannot be resumed, or was written with a config that changes the run
    (the message names the differing fields)."""
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


def save_train_state(run, path, event) -> str:
    """Write the whole training state of ``run`` (a ``greenlab.training.loop.TrainingRun``) to ``path`` at
    ``event`` ("step" or "end"; see ``TrainState.checkpoint``); returns the path."""
    if event not in ("step", "end"):
        raise ValueError(f"state.checkpoint() works in on_step (or on_end), not in on_{event}: "
                         "an evaluation's stopping rules are applied after its callbacks")
    if event == "end" and run.status not in ("completed", "target-reached", "early-stopped"):
        raise ValueError(f"the run ended with status {run.status!r} (not at a clean step); "
                         "resume from the last checkpoint written during training")
    cuda = run.dev.type == "cuda"
    state = {
        "version": TRAIN_STATE_VERSION,
        "resumable": event == "step",
        "status": run.status if event == "end" else "running",
        "config": _plain(run.cfg.to_dict()),
        "n_train": run.n_train,
        "step": run.step, "epoch": run.epoch, "samples": run.samples,
        "epochs_run": run.epochs_run, "batch_in_epoch": run.batch_in_epoch,
        "loader_rng_epoch_start": run.epoch_loader_rng,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(run.dev) if cuda else None,
        "scheduler": run.scheduler.state_dict() if run.scheduler is not None else None,
        "scaler": run.scaler.state_dict() if run.scaler.is_enabled() else None,
        "history": [dict(row) for row in run.history],
        "best": run.best, "last_acc": run.last_acc, "evals_since_best": run.evals_since_best,
        "target": list(run.target) if run.target else None,
        "loss_sum": run.loss_sum.detach().cpu(), "loss_steps": run.loss_steps,
        "seconds": run.prior_seconds + time.perf_counter() - run.start_s,
        "joules": run.prior_joules + run.meter.joules(),
    }
    return str(save_checkpoint(path, run.model, run.optimizer, step=run.step,
                               samples=run.samples, accuracy=run.last_acc, train_state=state))

def restore_train_state(run, saved, path) -> None:
    """Load a checkpoint payload (from ``load_train_checkpoint``) into ``run`` (a
    ``greenlab.training.loop.TrainingRun``)."""
    st = saved["extra"]["train_state"]
    try:
        run.model.load_state_dict(saved["model"])
        check_optimizer_state(saved, run.optimizer, path)
        run.optimizer.load_state_dict(saved["optimizer"])
        if run.scheduler is not None:
            run.scheduler.load_state_dict(st["scheduler"])
        if run.scaler.is_enabled():
            run.scaler.load_state_dict(st["scaler"])
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {path} does not fit this model/optimizer: {exc}") from exc
    run.step, run.epoch, run.samples = st["step"], st["epoch"], st["samples"]
    run.start_step, run.start_samples = run.step, run.samples
    run.resumed_from_step = run.step
    run.epochs_run = st["epochs_run"]
    run.start_epoch, run.resume_batch = st["epoch"], st["batch_in_epoch"]
    run.epoch_loader_rng = st["loader_rng_epoch_start"]
    run.rng_after_resume = {"torch": st["torch_rng"], "cuda": st["cuda_rng"]}
    run.history = [dict(row) for row in st["history"]]
    run.best, run.last_acc = st["best"], st["last_acc"]
    run.evals_since_best = st["evals_since_best"]
    run.target = tuple(st["target"]) if st["target"] else None
    run.loss_sum = st["loss_sum"].to(run.dev)
    run.loss_steps = st["loss_steps"]
    run.prior_seconds, run.prior_joules = float(st["seconds"]), float(st["joules"])


def set_rng_state(states, dev):
    """Put back the random-number states a checkpoint saved: torch's, and the CUDA device's on CUDA."""
    torch.set_rng_state(states["torch"])
    if states["cuda"] is not None and dev.type == "cuda":
        torch.cuda.set_rng_state(states["cuda"], dev)


def _plain(value):
    """Tuples to lists, recursively, so configs compare equal after a save/load round trip."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
