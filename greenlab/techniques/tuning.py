"""Lesson 14: tuning without waste. A full sweep against successive halving (ASHA, Optuna's pruner).

A *full sweep* trains every candidate configuration for the whole budget (``max_steps``) and keeps
the best. *Successive halving* (Jamieson & Talwalkar 2016; asynchronous, ASHA: Li et al. 2020)
checks every candidate's validation accuracy at rungs of ``min_steps x eta^k`` steps and lets only
the top ``1/eta`` of those seen at a rung go on: most bad candidates stop early, so most of the
sweep's energy is never spent. Both run on Optuna: the same sampler and seed give both methods the
same candidates (a random sampler: what it proposes does not depend on results), every candidate
is a real ``gl.train`` run whose energy is measured, and the full sweep is the same study with
Optuna's ``NopPruner``.

    result = gl.tuning.sweep(data, model_fn, config, n_trials=8, max_steps=90, min_steps=10, eta=3,
                             method="asha", seed=0)
    print(result.summary())

:func:`promote` is successive halving's rule (keep the top ``1/eta``); :func:`rule_pruner` makes
an Optuna pruner from any such rule, so a learner's rule can run a real search.
:func:`shared_study` runs one study from several processes at once through Optuna's
``JournalStorage`` on a file (no database server), as workers on several machines would share it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from greenlab.base import processes, progress, validation
from greenlab.base.janitor import Janitor
from greenlab.base.optional import require
from greenlab.base.units import plain_number
from greenlab.energy.measure import Measurement
from greenlab.energy.provenance import how_measured
from greenlab.energy.windows import measure
from greenlab.experiments import paired, rotated, short_flags, warm_up, window_short
from greenlab.session.config import seed_everything, setup
from greenlab.training import loop, models
from greenlab.training.dataset_files import load_dataset, save_dataset
from greenlab.training.loop import StopTraining, TrainConfig

__all__ = ["METHODS", "TrialRow", "SweepResult", "TuningComparison", "promote", "rungs", "rule_pruner",
           "sweep", "compare_sweeps", "shared_study", "SharedStudy"]

METHODS = ("full", "asha", "rule")


def promote(scores: Sequence[float], eta: int) -> list:
    """Successive halving's promotion rule: the indices (ascending) of the scores in the top
    ``1/eta`` of ``scores`` (higher is better), i.e. the best ``max(1, len(scores) // eta)``, with
    every score equal to the last one kept also kept (ties go on, as in Optuna's pruner). A NaN score
    (a diverged trial) ranks below every other, as the worst, and is never promoted."""
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
        raise ValueError(f"eta must be an integer >= 2, got {eta!r}")

    scores = [validation.number("each score", s, allow_none=False) if not _is_nan(s) else math.nan
              for s in validation.items("scores", scores)]
    if not scores:
        return []
    # a diverged trial (NaN) ranks below every score, as the worst; it is never promoted
    ranked = [-math.inf if math.isnan(s) else s for s in scores]
    keep = max(1, len(scores) // eta)
    threshold = sorted(ranked, reverse=True)[keep - 1]
    return [i for i, s in enumerate(ranked) if s >= threshold and not math.isnan(scores[i])]


def _is_nan(value) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isnan(value)
    except TypeError:
        return False


def rungs(min_steps: int, eta: int, max_steps: int) -> list:
    """The rung steps ``min_steps x eta^k`` below ``max_steps`` (where a candidate can be stopped)."""
    _positive_int("min_steps", min_steps)
    _positive_int("max_steps", max_steps)
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
        raise ValueError(f"eta must be an integer >= 2, got {eta!r}")
    out, step = [], min_steps
    while step < max_steps:
        out.append(step)
        step *= eta
    return out


def rule_pruner(rule: Callable[[list, int], Sequence[int]], min_steps: int, eta: int):
    """An Optuna pruner that applies ``rule(scores, eta) -> indices kept`` at every rung: a trial
    reporting at rung step ``s`` competes with every trial's value at ``s`` (its own last), and is
    pruned unless its index is kept. With :func:`promote` it decides as Optuna's
    ``SuccessiveHalvingPruner(min_resource=min_steps, reduction_factor=eta)`` does."""
    optuna = require("optuna", "early-stopped tuning")  # lazy: optuna is an extra (scheduling)

    rung_steps = set(rungs(min_steps, eta, 2 ** 62))

    class _RulePruner(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            step = trial.last_step
            if step is None or step not in rung_steps:
                return False
            others = [t.intermediate_values[step] for t in study.get_trials(deepcopy=False)
                      if t.number != trial.number and step in t.intermediate_values]
            scores = others + [trial.intermediate_values[step]]
            kept = rule(scores, eta)
            if kept is None:
                raise ValueError("the promotion rule returned None: it must return the indices it keeps")
            return (len(scores) - 1) not in {int(i) for i in kept}

    return _RulePruner()


@dataclass
class TrialRow:
    """One candidate: its learning rate, how far it trained, its last validation accuracy, what it
    cost (joules, seconds; ``estimated`` when the energy is a CPU estimate), how it ended, and its
    run's energy window (``energy``, a ``Measurement``, as the trial's process recorded it)."""

    number: int
    lr: float
    steps: int
    val_accuracy: float | None
    joules: float
    seconds: float
    state: str  # "complete" or "pruned"
    estimated: bool = True
    worker: int | None = None
    energy: object = None
    pid: int | None = None  # the process that ran it (shared_study)


@dataclass
class SweepResult:
    """A whole search: every trial, and the totals."""

    method: str
    trials: list
    seed: int = 0
    energy: object = None  # the Measurement of one window around the whole search, or None

    @property
    def joules(self) -> float:
        """The search's energy: its own window's when it has one (every trial, and the model
        builds and the study's bookkeeping between them), else the sum of its trials' windows."""
        return self.energy.joules if self.energy is not None else sum(t.joules for t in self.trials)

    @property
    def seconds(self) -> float:
        return self.energy.seconds if self.energy is not None else sum(t.seconds for t in self.trials)

    @property
    def short(self) -> bool:
        """True when the window its energy comes from was too short to read (without a window of
        its own: any trial's), so an energy verdict on it is "not measurable at this size"."""
        if self.energy is not None:
            return bool(self.energy.short)
        return any(window_short(t.energy) for t in self.trials if t.energy is not None)

    @property
    def steps(self) -> int:
        return sum(t.steps for t in self.trials)

    @property
    def estimated(self) -> bool:
        return any(t.estimated for t in self.trials)

    def measurements(self) -> list:
        """(label, Measurement) of every trial's run, for ``how_measured``."""
        return [(f"trial {t.number}", t.energy) for t in self.trials if t.energy is not None]

    @property
    def best(self) -> TrialRow | None:
        """The completed trial with the best validation accuracy (pruned ones never win)."""
        done = [t for t in self.trials if t.state == "complete" and t.val_accuracy is not None]
        return max(done, key=lambda t: t.val_accuracy) if done else None

    @property
    def best_val_accuracy(self) -> float | None:
        return None if self.best is None else self.best.val_accuracy

    @property
    def pruned(self) -> int:
        return sum(t.state == "pruned" for t in self.trials)

    def summary(self) -> str:
        best = self.best
        kind = how_measured(self, short=True) if self.measurements() else ("estimate" if self.estimated else "measured")
        chosen = (f"best lr {best.lr:.3g} at {best.val_accuracy:.1%} validation accuracy" if best
                  else "no trial completed")
        return (f"{self.method}: {len(self.trials)} trials, {self.pruned} stopped early, {self.steps} training "
                f"steps, {plain_number(self.joules)} J ({kind}), {self.seconds:.1f} s; {chosen}")


def sweep(data, model_fn, config, n_trials: int = 8, max_steps: int = 90, min_steps: int = 10, eta: int = 3,
          method: str = "asha", seed: int = 0, rule: Callable | None = None, lr_range=(1e-3, 0.5),
          storage=None, study_name: str | None = None, worker: int | None = None) -> SweepResult:
    """Tune the learning rate of ``model_fn()`` on ``data`` with ``n_trials`` candidates drawn
    log-uniformly from ``lr_range`` by Optuna's ``RandomSampler(seed)``; each trains with
    ``config`` for at most ``max_steps`` steps, evaluated every ``min_steps`` steps on the
    validation split. ``method``: "full" (no pruning), "asha" (Optuna's SuccessiveHalvingPruner)
    or "rule" (:func:`rule_pruner` with ``rule``, e.g. a learner's promotion rule).
    ``storage``/``study_name``: an Optuna storage to share (see :func:`shared_study`)."""
    optuna = require("optuna", "early-stopped tuning")  # lazy: optuna is an extra (scheduling)

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "rule" and not callable(rule):
        raise ValueError("method='rule' needs rule, a function (scores, eta) -> indices kept")
    if not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    _positive_int("n_trials", n_trials)
    rungs(min_steps, eta, max_steps)  # checks the three sizes
    lo, hi = (float(v) for v in lr_range)
    if not 0 < lo < hi:
        raise ValueError(f"lr_range must be (low, high) with 0 < low < high, got {lr_range!r}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = {"full": lambda: optuna.pruners.NopPruner(),
              "asha": lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=min_steps, reduction_factor=eta),
              "rule": lambda: rule_pruner(rule, min_steps, eta)}[method]()
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed),
                                pruner=pruner, storage=storage, study_name=study_name,
                                load_if_exists=storage is not None)
    epochs = max(1, math.ceil(max_steps * config.effective_batch_size / max(1, int(data.train_x.shape[0]))))
    objective = _Objective(data, model_fn, config, max_steps, min_steps, epochs, lo, hi, worker)
    with measure(f"{method} search, seed {seed}") as window:
        study.optimize(objective, n_trials=n_trials, catch=())
    return SweepResult(method, _rows(study), seed, energy=window.result)


@dataclass
class TuningComparison:
    """Every method's searches, one per repeat (repeat ``r`` uses seed ``r``: the same candidates)."""

    results: dict  # method name -> list of SweepResult, one per repeat
    baseline: str

    @property
    def repeats(self) -> int:
        return len(next(iter(self.results.values())))

    def values(self, method: str, metric: str) -> list:
        get = {"joules": lambda r: r.joules, "seconds": lambda r: r.seconds,
               "val_accuracy": lambda r: r.best_val_accuracy, "steps": lambda r: r.steps}[metric]
        return [get(r) for r in self.results[method]]

    def paired(self, method: str, metric: str):
        """``gl.experiments.paired`` of ``method`` against the baseline (the full sweep)."""
        return paired(self.values(method, metric), self.values(self.baseline, metric), metric,
                      variant=method, baseline=self.baseline,
                      short=short_flags(self.results[method], self.results[self.baseline], metric))

    def table(self) -> str:
        lines = [f"{'method':<18}{'mean J':>10}{'mean steps':>12}{'best val. acc. (each repeat)':>34}"]
        for name, runs in self.results.items():
            accs = ", ".join("-" if r.best_val_accuracy is None else f"{r.best_val_accuracy:.1%}" for r in runs)
            lines.append(f"{name:<18}{sum(r.joules for r in runs) / len(runs):>10.3g}"
                         f"{sum(r.steps for r in runs) / len(runs):>12.0f}{accs:>34}")
        return "\n".join(lines)


def compare_sweeps(data, model_fn, config, methods: dict, repeats: int = 3, baseline: str | None = None,
                   **sweep_kwargs) -> TuningComparison:
    """Run each of ``methods`` (``{name: {"method": ..., "rule": ...}}``) once per repeat, repeats
    interleaved (repeat ``r``: every method with seed ``r``, so each sees the same candidates), each
    method first warmed up by a discarded one-candidate search, the order rotated from repeat to
    repeat. Each search's energy is one window around it (``SweepResult.energy``)."""
    _positive_int("repeats", repeats)
    if not methods:
        raise ValueError("methods must name at least one method")
    results = {name: [] for name in methods}
    # every method warmed up by a search of one candidate (discarded), then the order rotated each repeat
    warm_up({name: (lambda kw=kw: sweep(data, model_fn, config, seed=0, **{**sweep_kwargs, **kw, "n_trials": 1}))
             for name, kw in methods.items()})
    for r in range(repeats):
        for name in rotated(methods, r):
            results[name].append(sweep(data, model_fn, config, seed=r, **{**sweep_kwargs, **methods[name]}))
    return TuningComparison(results, baseline or next(iter(methods)))


@dataclass
class SharedStudy:
    """One study run by several processes: every finished trial (complete or pruned) with the
    worker (process) that ran it. ``failures``: worker -> why it ended without finishing its
    trials (exit code or signal and the end of its stderr); the trial it was running is marked
    FAIL in the journal, and the other workers' trials are kept."""

    study_name: str
    journal: str
    trials: list
    pids: dict = field(default_factory=dict)  # worker -> process id
    returncodes: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)  # worker -> reason
    failed_trials: list = field(default_factory=list)  # trial numbers marked FAIL (a worker died in them)

    def by_worker(self) -> dict:
        out: dict = {}
        for t in self.trials:
            out.setdefault(t.worker, []).append(t)
        return out

    @property
    def complete(self) -> bool:
        """True when every worker finished its trials."""
        return not self.failures

    @property
    def best(self) -> TrialRow | None:
        return SweepResult("shared", self.trials).best


def shared_study(journal_path, data, study_name: str = "shared", workers: int = 2, trials_per_worker: int = 3,
                 model: str = "mlp", batch_size: int = 64, max_steps: int = 60, min_steps: int = 10, eta: int = 3,
                 timeout_s: float = 300.0) -> SharedStudy:
    """Start ``workers`` Python processes at once, each running ``trials_per_worker`` trials of the
    same ASHA study (``gl.models.build(model)`` on ``data``, a Dataset the workers read from a file),
    stored in one Optuna ``JournalStorage`` file (``journal_path``; the journal takes a file lock
    for every write, so no server is needed); wait for them, then read the study back. Each trial
    records the worker (and process id) that ran it.

    A worker that dies (or outlives ``timeout_s``, and is killed) does not lose the others' work:
    the trials that finished are returned, the dead worker is named in ``failures`` with its exit
    code or signal and the end of its stderr (and a warning says so), and the trial it was running
    is marked FAIL in the journal. Only when no worker finished a trial is an error raised. The
    workers die with this process, and their files go with them."""
    import signal as _signal
    import time
    import warnings

    optuna = require("optuna", "early-stopped tuning")  # lazy: optuna is an extra (scheduling)
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    _positive_int("workers", workers)
    _positive_int("trials_per_worker", trials_per_worker)
    validation.number("timeout_s", timeout_s, low=0, low_open=True)
    journal = str(Path(journal_path))
    storage = JournalStorage(JournalFileBackend(journal))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(direction="maximize", storage=storage, study_name=study_name, load_if_exists=True)
    spec = {"journal": journal, "study": study_name, "trials": trials_per_worker, "model": model,
            "batch_size": batch_size, "max_steps": max_steps, "min_steps": min_steps, "eta": eta}
    env = {**os.environ, "GREENLAB_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": _pythonpath(),
           processes.PARENT_ENV: str(os.getpid())}
    supervisor = str(Path(processes.__file__).resolve())
    procs, codes, tails, timed_out = {}, {}, {}, set()
    # the watcher kills the workers' process groups and removes the folder when this process ends,
    # however it ends; each worker also dies with this process by itself (processes.die_with_parent)
    with Janitor() as janitor:
        tmp = Path(janitor.make_temp_dir("greenlab-study-"))
        spec["data"] = save_dataset(data, tmp / "data.pt")
        errs = {}
        try:
            for w in range(workers):
                path = tmp / f"worker{w}.json"
                path.write_text(json.dumps({**spec, "worker": w}))
                errs[w] = open(tmp / f"worker{w}.err", "w+")
                procs[w] = subprocess.Popen([sys.executable, supervisor, "--", "greenlab.techniques.tuning", str(path)],
                                            env=env, stdout=subprocess.DEVNULL, stderr=errs[w],
                                            start_new_session=True)
                janitor.watch_group(procs[w].pid)
            end = time.monotonic() + float(timeout_s)
            with progress.heartbeat(f"greenlab.tuning: {workers} workers sharing one study"):
                for w, p in procs.items():
                    try:
                        p.wait(timeout=max(0.0, end - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        timed_out.add(w)
                        processes.kill_group(p, grace_s=2.0)
                    codes[w] = p.returncode
            for w, f in errs.items():
                f.seek(0)
                tails[w] = f.read()[-3000:]
        finally:
            for f in errs.values():
                f.close()
            processes.kill_groups(list(procs.values()), grace_s=0.0)
    failures = {}
    for w, code in codes.items():
        if code == 0:
            continue
        if w in timed_out:
            why = f"still running after timeout_s={timeout_s} s, killed"
        elif code is not None and code < 0:
            try:
                why = f"killed by signal {_signal.Signals(-code).name}"
            except ValueError:
                why = f"killed by signal {-code}"
        else:
            why = f"exited with code {code}"
        tail = "\n".join((tails.get(w) or "").strip().splitlines()[-15:])
        failures[w] = (f"worker {w} (process {procs[w].pid}) {why}"
                       + (f"; the end of its stderr:\n{tail}" if tail else ""))
    study = optuna.load_study(study_name=study_name, storage=storage)
    failed = _fail_orphans(study, storage, {procs[w].pid for w in failures})
    rows = _rows(study)
    ours = {p.pid for p in procs.values()}
    result = SharedStudy(study_name, journal, rows,
                         {w: p.pid for w, p in procs.items()}, codes, failures, failed)
    if failures:
        if not any(r.pid in ours for r in result.trials):
            raise RuntimeError("no worker of the shared study finished a trial: " + "; ".join(failures.values()))
        warnings.warn("the shared study lost a worker (its finished trials are kept, its running trial "
                      f"{failed} marked FAIL): " + "; ".join(failures.values()), RuntimeWarning, stacklevel=2)
    return result


def _fail_orphans(study, storage, pids) -> list:
    """Mark FAIL every trial still RUNNING that one of ``pids`` (dead workers) was running: a killed
    process never ends its trial, which would otherwise stay RUNNING in the journal for good."""
    import optuna

    failed = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if t.user_attrs.get("pid") in pids:
            storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
            failed.append(t.number)
    return failed


# --- helpers ---------------------------------------------------------------------------------------

class _Objective:
    def __init__(self, data, model_fn, config, max_steps, min_steps, epochs, lo, hi, worker):
        self.data, self.model_fn, self.config = data, model_fn, config
        self.max_steps, self.min_steps, self.epochs, self.lo, self.hi = max_steps, min_steps, epochs, lo, hi
        self.worker = worker

    def __call__(self, trial):
        import optuna

        if self.worker is not None:  # first: a worker that dies in this trial is found by its pid
            trial.set_user_attr("worker", int(self.worker))
            trial.set_user_attr("pid", os.getpid())
        lr = trial.suggest_float("lr", self.lo, self.hi, log=True)
        cfg = dataclasses.replace(self.config, lr=lr, max_steps=self.max_steps, epochs=self.epochs,
                                  eval_every=self.min_steps, eval_every_samples=None, target_accuracy=None,
                                  patience=None, label=f"{self.config.label or 'trial'} lr {lr:.3g}")
        reporter = _Reporter(trial, self.max_steps)
        seed_everything(cfg.seed)
        res = loop.train(self.model_fn(), self.data, cfg, callbacks=[reporter], log=False, save=False)
        trial.set_user_attr("joules", float(res.joules))
        trial.set_user_attr("seconds", float(res.seconds))
        trial.set_user_attr("steps", int(res.steps))
        trial.set_user_attr("estimated", bool(res.estimated))
        if res.energy is not None:
            trial.set_user_attr("energy", res.energy.to_dict())
        trial.set_user_attr("val_accuracy", res.val_accuracy)
        if reporter.pruned:
            raise optuna.TrialPruned()
        if res.val_accuracy is None or res.status == "diverged":
            return 0.0
        return float(res.val_accuracy)


class _Reporter:
    """An ``on_eval`` callback: reports the validation accuracy to the trial (not at the last step,
    which is no rung) and stops the run when the pruner says so."""

    def __init__(self, trial, max_steps):
        self.trial, self.max_steps, self.pruned = trial, max_steps, False

    def on_eval(self, state):
        if state.accuracy is None or state.step >= self.max_steps:
            return
        self.trial.report(float(state.accuracy), int(state.step))
        if self.trial.should_prune():
            self.pruned = True
            raise StopTraining(f"pruned at step {state.step}")


def _rows(study) -> list:
    import optuna

    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED):
            continue
        a = t.user_attrs
        rows.append(TrialRow(t.number, float(t.params["lr"]), int(a.get("steps", 0)), a.get("val_accuracy"),
                             float(a.get("joules", 0.0)), float(a.get("seconds", 0.0)),
                             "complete" if t.state == optuna.trial.TrialState.COMPLETE else "pruned",
                             bool(a.get("estimated", True)), a.get("worker"),
                             Measurement.from_dict(a["energy"]) if a.get("energy") else None, a.get("pid")))
    return rows


def _pythonpath() -> str:
    here = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return here + (os.pathsep + rest if rest else "")


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _worker(spec_path: str) -> int:
    """One process of :func:`shared_study`: load the study from the journal and run its trials."""
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    spec = json.loads(Path(spec_path).read_text())
    setup(verbose=False)
    ds = load_dataset(spec["data"])
    storage = JournalStorage(JournalFileBackend(spec["journal"]))
    sweep(ds, lambda: models.build(spec["model"]), TrainConfig(batch_size=spec["batch_size"], seed=spec["worker"]),
          n_trials=spec["trials"], max_steps=spec["max_steps"], min_steps=spec["min_steps"], eta=spec["eta"],
          method="asha", seed=100 + spec["worker"], storage=storage, study_name=spec["study"], worker=spec["worker"])
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one worker of greenlab.tuning.shared_study")
    parser.add_argument("spec")
    sys.exit(_worker(parser.parse_args().spec))
