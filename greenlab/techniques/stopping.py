"""Early stopping on validation accuracy with ``patience`` and ``min_delta`` (lesson 07).

The rule: the first evaluation sets the best accuracy; a later one *improves* when it beats the
best by more than ``min_delta`` (and becomes the best); training stops once ``patience``
evaluations in a row have not improved. ``min_delta`` keeps noise from resetting the count: on
102 validation images one image is about one point, so a rise of 0.5 points is no improvement.

    stop = gl.stopping.EarlyStopping(patience=3, min_delta=0.01)
    gl.train(model, data, cfg, callbacks=[stop])          # stops with status "stopped"
"""

from __future__ import annotations

from typing import Callable, Sequence

from greenlab.training.loop import StopTraining


def should_stop(accuracies: Sequence[float], patience: int, min_delta: float = 0.0) -> bool:
    """True when the last ``patience`` of ``accuracies`` (validation accuracies, fractions, in
    evaluation order) all failed to beat the best before them by more than ``min_delta``."""
    _check(patience, min_delta)
    best, since = None, 0
    for acc in accuracies:
        if best is None or acc > best + min_delta:
            best, since = acc, 0
        else:
            since += 1
    return since >= patience


class EarlyStopping:
    """A ``gl.train`` callback: after each evaluation it asks ``rule(accuracies, patience,
    min_delta)`` (default :func:`should_stop`) and stops the run when it says so.
    ``accuracies`` keeps the validation accuracies seen, ``stopped_at_step`` the step it stopped."""

    def __init__(self, patience: int, min_delta: float = 0.0, rule: Callable | None = None):
        _check(patience, min_delta)
        self.patience, self.min_delta = patience, float(min_delta)
        self.rule = should_stop if rule is None else rule
        self.accuracies: list[float] = []
        self.stopped_at_step: int | None = None

    def on_eval(self, state) -> None:
        self.accuracies.append(float(state.accuracy))
        if self.rule(list(self.accuracies), self.patience, self.min_delta):
            self.stopped_at_step = state.step
            raise StopTraining(f"no improvement of more than {self.min_delta:g} in {self.patience} evaluations")


def _check(patience, min_delta) -> None:
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise ValueError(f"patience must be a whole number of evaluations >= 1, got {patience!r}")
    if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not 0 <= min_delta < 1:
        raise ValueError(f"min_delta must be an accuracy difference in [0, 1), got {min_delta!r}")
