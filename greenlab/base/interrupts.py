"""Ctrl-C during the course's long calls: one exception that says what was spent, and the partial
result it leaves (``gl.Interrupted``, ``gl.last_interrupted()``). Low in the house so that
``gl.setup`` can teach IPython to show it as one line without importing the training loop."""

from __future__ import annotations
from greenlab.base.units import plain_number


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (Kernel > Interrupt) stopped ``gl.train`` or ``gl.compare`` before the work was
    done. ``str()`` is one line: what was interrupted, the time and energy spent, and where the
    partial result is; ``result`` is that partial result (a ``RunResult`` with status
    "interrupted", or a ``Comparison``), also returned by ``last_interrupted()``.

    It is a KeyboardInterrupt, so the interrupt still stops what runs after it (a notebook's
    Run All, a script); in a notebook set up by ``gl.setup()`` it shows as its one line."""

    def __init__(self, line: str, result):
        super().__init__(line)
        self.line = line
        self.result = result

    def __str__(self) -> str:
        return self.line


_last_interrupted = None


def last_interrupted():
    """The partial result of the latest interrupted ``gl.train``/``gl.compare`` (None before)."""
    return _last_interrupted


def remember_interrupted(line: str, result) -> Interrupted:
    """Keep ``result`` for ``last_interrupted()`` and return the ``Interrupted`` to raise."""
    global _last_interrupted
    _last_interrupted = result
    return Interrupted(line, result)


def interrupted_run(who: str, result, total_steps: int, where: str = "gl.last_interrupted()") -> Interrupted:
    """The ``Interrupted`` for a training run stopped by Ctrl-C before its last step: one line
    from the partial ``result`` (its label, steps, seconds, joules and whether they are an
    estimate), kept for ``last_interrupted()``. ``who`` names the call ("greenlab.train")."""
    label = f" {result.label!r}" if result.label else ""
    est = " (estimate)" if result.estimated else ""
    line = (f"{who}: interrupted{label} at step {result.steps} of {total_steps}, after "
            f"{plain_number(result.seconds)} s and {plain_number(result.joules, 4)} J{est}; "
            f"the partial run is in {where}; "
            "a variable this cell assigns keeps its previous value")
    return remember_interrupted(line, result)
