"""What a ``gl.train`` callback sees and may do: ``TrainState`` after each step or evaluation,
``StopTraining`` to end the run cleanly; what counts as a callback, and how each is called
(``notify``: one that fails is dropped and reported, never the run)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from greenlab.base import validation
from greenlab.training.config import TrainConfig

class StopTraining(Exception):
    """Raise from a callback to end the run cleanly (status "stopped")."""


@dataclass
class TrainState:
    """What callbacks see after each step or evaluation. ``loss`` and ``joules`` are read on
    access (reading them costs a device sync / a meter read, so the loop does not by default)."""

    event: str = "step"  # "step", "eval" or "end"
    step: int = 0
    epoch: int = 0
    samples: int = 0
    seconds: float = 0.0
    accuracy: float | None = None  # last evaluation's validation accuracy
    mean_loss: float | None = None  # mean training loss over the steps since the evaluation before
    best_accuracy: float | None = None
    batch_size: int = 0
    lr: float = 0.0
    model: object = None
    config: TrainConfig | None = None
    status: str = "running"  # the run's status at event "end"
    _loss: object = None
    _meter: object = None
    _run: object = None  # the greenlab.training.loop.TrainingRun this state belongs to

    def checkpoint(self, path) -> str:
        """Save the whole training state to ``path`` (atomically) so that
        ``train(..., resume_from=path)`` can continue exactly from here. Call it from
        ``on_step`` (an optimizer-step boundary); at ``on_end`` of a run that finished it saves
        the final state, which can be loaded but not resumed. Returns the path."""
        if self._run is None:
            raise ValueError("this TrainState belongs to no running train() call")
        return self._run.checkpoint(path, self.event)

    @property
    def loss(self) -> float | None:
        """Mean training loss of the last optimizer step (float)."""
        if self._loss is None:
            return None
        return float(self._loss)

    @property
    def joules(self) -> float | None:
        """Energy so far in this run, joules (read now from the run's energy sources)."""
        return None if self._meter is None else self._meter.joules()


def notify(callbacks: list, method: str, state: TrainState, problems: list) -> None:
    """Call ``method`` ("on_step", "on_eval" or "on_end") of each of ``callbacks`` with ``state``
    (a plain function counts as ``on_step``). ``StopTraining`` and Ctrl-C pass through. A callback
    that raises anything else is removed from ``callbacks`` and the run goes on (a checkpoint that
    cannot be written does not lose the run): its failure is appended to ``problems`` and warned
    about at once."""
    for cb in list(callbacks):
        fn = getattr(cb, method, None)
        if fn is None and method == "on_step" and callable(cb) and not hasattr(cb, "on_eval"):
            fn = cb
        if fn is None:
            continue
        try:
            fn(state)
        except (StopTraining, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - a failing callback must not lose the run
            name = getattr(cb, "__name__", None) or type(cb).__name__
            problem = (f"callback {name}.{method} failed at step {state.step} ({type(exc).__name__}: "
                       f"{exc}); it was not called again")
            problems.append(problem)
            del callbacks[next(k for k, c in enumerate(callbacks) if c is cb)]
            warnings.warn(problem, RuntimeWarning, stacklevel=3)


def as_callbacks(callbacks):
    if callbacks is None:
        return []
    if _is_callback(callbacks):
        return [callbacks]
    if isinstance(callbacks, (str, bytes)) or not hasattr(callbacks, "__iter__"):
        raise validation.ArgumentTypeError(
            "callbacks must be a callable, an object with on_step/on_eval/on_end methods, or a "
            f"list of these; got {type(callbacks).__name__}")
    out = list(callbacks)
    for i, cb in enumerate(out):
        if not _is_callback(cb):
            raise validation.ArgumentTypeError(
                f"callbacks[{i}] must be a callable or an object with on_step/on_eval/on_end "
                f"methods, got {cb!r} ({type(cb).__name__})")
    return out


def _is_callback(cb) -> bool:
    return callable(cb) or any(hasattr(cb, m) for m in ("on_step", "on_eval", "on_end"))
