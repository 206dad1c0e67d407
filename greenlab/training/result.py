"""``RunResult``: the outcome of one ``gl.train`` call (times in seconds, energy in joules), its
statuses, and the CO2e figure it carries."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from greenlab.base.units import plain_number
from greenlab.energy.flags import MeasuredFlags
from greenlab.training.provenance import provenance
from greenlab.base.version import __version__
from greenlab.impact.carbon import co2e_g

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
    # classes of the task (chance accuracy is 1 / num_classes); None when the data did not say
    num_classes: int | None = None

    def summary(self) -> str:
        """One readable line."""
        acc = "n/a" if self.final_accuracy is None else f"{self.final_accuracy:.1%}"
        if self.val_accuracy is not None:
            acc += f" (validation {self.val_accuracy:.1%})"
        est = " (CPU energy is an estimate)" if self.estimated else ""
        line = (f"{self.label or 'run'}: {self.status}, test accuracy {acc}, {plain_number(self.seconds)} s, "
                f"{plain_number(self.joules, 4)} J{est}, {plain_number(self.samples_per_second, 4)} samples/s")
        if self.joules_to_target is not None:
            line += f"; target in {plain_number(self.seconds_to_target)} s / {plain_number(self.joules_to_target, 4)} J"
        elif self.config.get("target_accuracy") is not None:
            line += f"; target {self.config['target_accuracy']:.1%} NOT reached"
        if self.problems:
            line += "; energy incomplete: " + "; ".join(self.problems)
        if self.callback_problems:
            line += f"; {len(self.callback_problems)} callback(s) failed (see message)"
        return line

    def to_dict(self) -> dict:
        """The result as the results log stores it: its fields, its measurement flags, the energy's own dict and
        ``kind`` "train"."""
        out = {k: v for k, v in self.__dict__.items() if k != "energy"}
        out.update(self.flags())
        out["energy"] = self.energy.to_dict()
        out["kind"] = "train"
        return out


def pack_result(run, energy, flop_count, params, peak) -> RunResult:
    """The ``RunResult`` of ``run`` (a ``greenlab.training.loop.TrainingRun`` that has ended) from its
    energy window's ``Measurement``, FLOP count, parameter count and peak-memory reading."""
    if run.meter is not None:  # a source that failed mid-run: the figure says so itself
        energy = energy.with_problems(run.meter.problems)
    cfg = run.cfg
    train_seconds = max(energy.seconds - run.eval_seconds, 1e-12)
    co2e = _co2e(energy.joules, cfg.region)
    fl = flop_count.to_dict()
    fl["train_step_per_sample"] = flop_count.train_step_per_sample
    fl["forward_per_sample"] = flop_count.forward_per_sample
    fl["train_total_estimate"] = flop_count.train_step_per_sample * (run.samples - run.start_samples)
    fl["train_total_model"] = ("train_step_per_sample x samples trained in this session "
                               "(FLOPs scale with batch size)")
    message = run.message
    for problem in list(run.meter.problems if run.meter is not None else ()) + run.callback_problems:
        message = f"{message}; {problem}" if message else problem
    if cfg.target_accuracy is not None and run.target is None:
        best = "n/a" if run.best is None else f"{run.best:.1%}"
        missed = (f"target accuracy {cfg.target_accuracy:.1%} not reached within the budget "
                  f"(best validation accuracy {best} after {run.step} steps)")
        message = f"{message}; {missed}" if message else missed
    return RunResult(
        status=run.status, label=cfg.label, final_accuracy=run.test_acc, best_accuracy=run.best,
        val_accuracy=run.last_acc,
        history=run.history, seconds=energy.seconds, joules=energy.joules, energy=energy,
        seconds_to_target=run.target[0] if run.target else None,
        joules_to_target=run.target[1] if run.target else None,
        steps_to_target=run.target[2] if run.target else None,
        co2e_g=co2e, region=cfg.region, steps=run.step, samples=run.samples,
        epochs_run=run.epochs_run,
        samples_per_second=(run.samples - run.start_samples) / train_seconds,
        train_seconds=train_seconds,
        train_cpu_seconds=max(0.0, run.end_cpu_s - run.start_cpu_s - run.eval_cpu_seconds),
        peak_memory_bytes=peak.bytes(), peak_memory_kind=peak.kind,
        flops=fl, params=params, provenance=provenance(run.dev, energy.sources, __version__),
        config=cfg.to_dict(), message=message, resumed_from_step=run.resumed_from_step,
        prior_seconds=run.prior_seconds, prior_joules=run.prior_joules,
        cumulative_seconds=run.prior_seconds + energy.seconds,
        cumulative_joules=run.prior_joules + energy.joules,
        steps_this_session=run.step - run.start_step,
        samples_this_session=run.samples - run.start_samples,
        callback_problems=list(run.callback_problems),
        num_classes=getattr(run.data, "num_classes", None))


def _co2e(joules, region):
    """Grams CO2e for ``joules`` in ``region``; None (with a warning) when it cannot be worked out,
    so a finished run is never lost to a carbon-table problem."""
    try:
        return co2e_g(joules, region=region)
    except (ImportError, OSError, ValueError) as exc:
        warnings.warn(f"CO2e not computed: {exc}", RuntimeWarning, stacklevel=3)
        return None
