"""``RunResult``: the outcome of one ``gl.train`` call (times in seconds, energy in joules), its
statuses, and the CO2e figure it carries."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from greenlab.energy.flags import MeasuredFlags

STATUSES = ("completed", "target-reached", "early-stopped", "stopped", "interrupted", "diverged")


@dataclass
class RunResult(MeasuredFlags):
    """The outcome of one ``train()`` call. Times in seconds, energy in joules.

    ``samples_per_second`` and ``train_seconds`` exclude evaluation passes;
    ``train_cpu_seconds`` is this process's CPU time (all threads) while training, evaluation
    excluded. ``peak_memory_kind`` says what ``peak_memory_bytes`` measures.

    Accuracy: ``final_accuracy`` is the test split's, scored once when the run ends (None when it
    was interrupted or diverged); ``val_accuracy``/``best_accuracy`` are the last/best validation
    accuracy, which targets and early stopping read, as do the ``accuracy`` of ``history`` rows."""

    status: str
    label: str
    final_accuracy: float | None
    best_accuracy: float | None
    history: list
    seconds: float
    joules: float
    energy: object  # greenlab.energy.Measurement
    seconds_to_target: float | None
    joules_to_target: float | None
    steps_to_target: int | None
    co2e_g: float | None
    region: str
    steps: int
    samples: int
    epochs_run: int
    samples_per_second: float
    train_seconds: float
    train_cpu_seconds: float
    peak_memory_bytes: int | None
    peak_memory_kind: str
    flops: dict
    params: int
    provenance: dict
    config: dict
    message: str = ""
    # estimated / complete / problems / sources: read from ``energy`` (MeasuredFlags)
    # resuming: seconds/joules above are this call's only; the cumulative figures add what the
    # checkpoint records for the earlier session(s) up to the checkpoint (work done after the
    # checkpoint in an interrupted session is lost and not counted). ``steps``/``samples`` are
    # positions in the whole run; the *_this_session counts are this call's.
    resumed_from_step: int | None = None
    prior_seconds: float = 0.0
    prior_joules: float = 0.0
    cumulative_seconds: float = 0.0
    cumulative_joules: float = 0.0
    steps_this_session: int = 0
    samples_this_session: int = 0
    val_accuracy: float | None = None
    # callbacks that raised (each was dropped and the run went on): what failed, when and why
    callback_problems: list = field(default_factory=list)

    def summary(self) -> str:
        """One readable line."""
        acc = "n/a" if self.final_accuracy is None else f"{self.final_accuracy:.1%}"
        if self.val_accuracy is not None:
            acc += f" (validation {self.val_accuracy:.1%})"
        est = " (CPU energy is an estimate)" if self.estimated else ""
        line = (f"{self.label or 'run'}: {self.status}, test accuracy {acc}, {self.seconds:.3g} s, "
                f"{self.joules:.4g} J{est}, {self.samples_per_second:.4g} samples/s")
        if self.joules_to_target is not None:
            line += f"; target in {self.seconds_to_target:.3g} s / {self.joules_to_target:.4g} J"
        elif self.config.get("target_accuracy") is not None:
            line += f"; target {self.config['target_accuracy']:.1%} NOT reached"
        if self.problems:
            line += "; energy incomplete: " + "; ".join(self.problems)
        if self.callback_problems:
            line += f"; {len(self.callback_problems)} callback(s) failed (see message)"
        return line

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "energy"}
        out.update(self.flags())
        out["energy"] = self.energy.to_dict()
        out["kind"] = "train"
        return out


def _co2e(joules, region):
    """Grams CO2e for ``joules`` in ``region``; None (with a warning) when it cannot be worked out,
    so a finished run is never lost to a carbon-table problem."""
    try:
        from greenlab.impact.carbon import co2e_g

        return co2e_g(joules, region=region)
    except (ImportError, OSError, ValueError) as exc:
        warnings.warn(f"CO2e not computed: {exc}", RuntimeWarning, stacklevel=3)
        return None
