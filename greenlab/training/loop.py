"""One training loop with the knobs the lessons turn, measured from start to finish.

    cfg = gl.TrainConfig(precision="bf16", batch_size=128, epochs=2, target_accuracy=0.85)
    res = gl.train(model, ds, cfg)
    res.seconds, res.joules, res.joules_to_target, res.status

The whole run is one ``greenlab.energy.measure`` window; each evaluation point in
``history`` carries the cumulative joules read from the same energy sources.

Precision: "fp32"; "bf16" (autocast, no loss scaling); "fp16" (autocast with a GradScaler, on
CUDA and on CPU, where ``torch.amp.GradScaler("cpu")`` is used; on CPUs without native fp16
arithmetic it runs much slower than fp32, which is itself a lesson).

Gradient accumulation: each micro-batch's loss is the *sum* of per-sample losses divided by the
number of samples in its accumulation window (the last window of an epoch may be shorter). With
equal micro-batches this is dividing the mean loss by the number of micro-batches actually in the
window; either way the accumulated gradient equals the gradient of one big batch of the same
samples (for models without batch-dependent layers such as BatchNorm).

Resuming: ``state.checkpoint(path)`` (from an ``on_step`` callback, e.g.
``greenlab.training.checkpoint.CheckpointCallback``) saves the whole training state at an optimizer-step
boundary; ``train(..., resume_from=path)`` continues from it and, on the same machine and
software, ends with the same weights and history rows as a run that was never interrupted.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import platform
import signal
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import torch

from greenlab.base import validation
from greenlab.training.accuracy import accuracy
from greenlab.energy.flags import MeasuredFlags
from greenlab.base.interrupts import Interrupted, last_interrupted, remember_interrupted  # noqa: F401  as before
from greenlab.training.precision import PRECISIONS, dtype as precision_dtype  # noqa: F401  train.PRECISIONS as before
from greenlab.training.step import backward, classifier_loss, make_scaler, optimizer_step

LOADERS = ("device", "dataloader")
OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCHEDULES = ("constant", "step", "cosine", "warmup-linear")
STATUSES = ("completed", "target-reached", "early-stopped", "stopped", "interrupted", "diverged")
TRAIN_STATE_VERSION = 1
# TrainConfig fields that do not change what is trained (so a resumed run may differ in them)
RESUME_FREE_FIELDS = ("label", "region", "eval_batch_size", "pin_memory", "prefetch_factor")
# accepted ranges (checked before any work starts)
MAX_LR = 100.0  # a learning rate above this diverges for any model here
MAX_EPOCHS = 100_000
MAX_COUNT = 2**40  # sizes and step counts
MAX_SEED = 2**63 - 1  # what torch.manual_seed accepts


class StopTraining(Exception):
    """Raise from a callback to end the run cleanly (status "stopped")."""


@dataclass
class TrainConfig:
    """Everything that shapes a run. Sizes are in samples, steps are optimizer steps.

    batch_size: micro-batch size; the optimizer sees batch_size x accum_steps samples per step.
    batch_schedule: callable epoch -> batch size, or a list of (first_epoch, batch_size) steps.
    lr_schedule: "constant", "step" (x lr_gamma every lr_step_size steps), "cosine" (to 0 over the
      run), "warmup-linear" (linear warm-up over warmup_steps, then linear decay to 0), or a
      callable step -> multiplier of lr.
    eval_every_samples: evaluate each time the samples trained pass a multiple of this (the
      fair schedule when batch sizes differ: every variant is checked after the same amount of
      data); eval_every: the same in optimizer steps. Set at most one (None for both: at each epoch
      end only; epoch ends are always evaluated). Evaluations read the validation split.
    target_accuracy: in (0, 1], validation accuracy; time and energy to reach it are recorded, and
      the run stops there when stop_at_target. patience: stop after this many evaluations without
      a new best validation accuracy. The test split is scored once, at the end of the run.
    loader: "device" (tensors on the device) or "dataloader" (torch DataLoader with num_workers,
      pin_memory, prefetch_factor). augment: None, True or a greenlab.training.data.Augment.
    """

    precision: str = "fp32"
    batch_size: int = 128
    accum_steps: int = 1
    lr: float = 0.05
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 0.0
    epochs: int = 1
    max_steps: int | None = None
    target_accuracy: float | None = None
    stop_at_target: bool = True
    patience: int | None = None
    eval_every: int | None = None
    eval_every_samples: int | None = None
    eval_batch_size: int = 1024
    eval_autocast: bool = False
    seed: int = 0
    batch_schedule: object = None
    lr_schedule: object = "constant"
    lr_step_size: int = 100
    lr_gamma: float = 0.1
    warmup_steps: int = 0
    grad_clip: float | None = None
    channels_last: bool = False
    compile: bool = False
    region: str = "WORLD"
    loader: str = "device"
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None
    augment: object = None
    label: str = ""

    def __post_init__(self):
        v = validation
        for name in ("batch_size", "accum_steps", "eval_batch_size", "lr_step_size"):
            setattr(self, name, v.integer(name, getattr(self, name), low=1, high=MAX_COUNT))
        self.epochs = v.integer("epochs", self.epochs, low=1, high=MAX_EPOCHS)
        for name in ("max_steps", "eval_every", "patience", "prefetch_factor"):
            setattr(self, name, v.integer(name, getattr(self, name), low=1, high=MAX_COUNT, allow_none=True))
        self.warmup_steps = v.integer("warmup_steps", self.warmup_steps, low=0, high=MAX_COUNT)
        self.num_workers = v.integer("num_workers", self.num_workers, low=0, high=1024)
        self.seed = v.integer("seed", self.seed, low=0, high=MAX_SEED)
        v.choice("precision", self.precision, PRECISIONS)
        v.choice("optimizer", self.optimizer, OPTIMIZERS)
        v.choice("loader", self.loader, LOADERS)
        self.lr = v.number("lr", self.lr, low=0, high=MAX_LR, low_open=True)
        self.momentum = v.number("momentum", self.momentum, low=0, high=1, high_open=True)
        self.weight_decay = v.number("weight_decay", self.weight_decay, low=0, high=1)
        self.lr_gamma = v.number("lr_gamma", self.lr_gamma, low=0, high=1, low_open=True)
        self.target_accuracy = v.number("target_accuracy (e.g. 0.9 for 90%)", self.target_accuracy,
                                        low=0, high=1, low_open=True, allow_none=True)
        self.grad_clip = v.number("grad_clip", self.grad_clip, low=0, low_open=True, allow_none=True)
        for name in ("stop_at_target", "eval_autocast", "channels_last", "compile", "pin_memory"):
            setattr(self, name, v.flag(name, getattr(self, name)))
        v.text("label", self.label)
        if not (callable(self.lr_schedule) or self.lr_schedule is None
                or (isinstance(self.lr_schedule, str) and self.lr_schedule in LR_SCHEDULES)):
            raise ValueError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)} or a callable "
                             f"step -> multiplier, got {self.lr_schedule!r}")
        if self.batch_schedule is not None and not callable(self.batch_schedule):
            _check_steps(self.batch_schedule)
        _check_region(self.region)
        from greenlab.training.data import as_augment

        as_augment(self.augment)
        if self.eval_every_samples is not None:
            _positive_int("eval_every_samples", self.eval_every_samples)
            if self.eval_every is not None:
                raise ValueError("set eval_every (optimizer steps) or eval_every_samples (samples), "
                                 f"not both; got {self.eval_every} and {self.eval_every_samples}")

    @property
    def effective_batch_size(self) -> int:
        """Samples per optimizer step (batch_size x accum_steps), before any batch schedule."""
        return self.batch_size * self.accum_steps

    def batch_size_at(self, epoch: int) -> int:
        """Micro-batch size for ``epoch`` (0-based) under the batch schedule."""
        if self.batch_schedule is None:
            return self.batch_size
        if callable(self.batch_schedule):
            size = self.batch_schedule(epoch)
            _positive_int(f"batch_schedule({epoch})", size)
            return int(size)
        size = self.batch_size
        for first_epoch, value in sorted(self.batch_schedule):
            if epoch >= first_epoch:
                size = value
        return size

    def to_dict(self) -> dict:
        """Plain data; callables are named, not stored."""
        out = {}
        for key, value in asdict(self).items():
            if callable(value):
                value = f"callable {getattr(value, '__name__', type(value).__name__)}"
            elif key == "augment" and value is not None and not isinstance(value, (bool, str)):
                value = repr(value)
            out[key] = value
        return out


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
    _run: object = None

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


def train(model, data, config: TrainConfig | None = None, callbacks=(), stop_event=None,
          device=None, log: bool = True, sources=None, idle=None, save: bool = True,
          results_path=None, resume_from=None) -> RunResult:
    """Train ``model`` on ``data`` (a ``greenlab.training.data.Dataset``) as ``config`` says.

    callbacks: objects with optional ``on_step(state)``, ``on_eval(state)``, ``on_end(state)``
      methods, or plain functions (called after every optimizer step). Raising ``StopTraining``
      ends the run with status "stopped"; so does setting ``stop_event`` (a threading.Event).
    A callback that raises anything else is dropped and the run goes on; the failure is in
    ``callback_problems`` and the message (a failing checkpoint does not lose the run).
    Ctrl-C (KeyboardInterrupt) before the last step saves the partial run (status
    "interrupted") and raises ``Interrupted``, whose one line says what was spent and that
    ``gl.last_interrupted()`` holds the partial run: the interrupt still stops a notebook's Run
    All, and no variable silently keeps a result that looks new. Once the last step is done, a
    Ctrl-C (during the final evaluation, the window's end read, the packing or the log append)
    no longer loses the run: it is returned, marked "interrupted", the message saying where.
    A NaN/inf loss ends the run with "diverged". Every run, whatever its status, is appended
    to the results log (``save=False`` to skip; ``results_path`` to choose the file).
    sources / idle: energy sources and an IdlePower passed to ``greenlab.energy.measure``.
    Inside a ``torch.distributed`` job (process group initialised) every rank must call train():
    the energy window is collective and ``energy`` is the job's, reduced across ranks.
    resume_from: a checkpoint written by ``state.checkpoint`` / ``CheckpointCallback`` during a
      run with the same config (fields in ``RESUME_FREE_FIELDS`` may differ) and data size; the
      run continues from it. ``seconds``/``joules`` then cover this call only, and
      ``cumulative_seconds``/``cumulative_joules`` add the earlier session up to the checkpoint;
      history rows and *_to_target figures are cumulative.
    """
    from greenlab.session import config as gl_config
    from greenlab.energy import default_sources, measure
    from greenlab.training.models import count_params, flops

    cfg = config if config is not None else TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(cfg).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dev = validation.device("device", device) if device is not None else torch.device(gl_config.device())
    if dev.type == "cuda" and dev.index is None:  # so batch.device == dev compares equal
        dev = torch.device("cuda", torch.cuda.current_device())
    _check_data(data)
    callbacks = _as_callbacks(callbacks)
    if sources is None:  # only the GPU the run uses is counted (none for a CPU run)
        sources = default_sources(gpus=[dev.index] if dev.type == "cuda" else [])
    sources = _check_sources(sources)
    validation.flag("log", log)
    validation.flag("save", save)
    if stop_event is not None and not callable(getattr(stop_event, "is_set", None)):
        raise validation.ArgumentTypeError(f"stop_event must be a threading.Event or None, got {stop_event!r}")

    saved = load_train_checkpoint(resume_from, cfg, data) if resume_from is not None else None
    torch.manual_seed(cfg.seed)
    model = model.to(dev)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    params = count_params(model)
    flop_count = flops(model, data.input_shape, batch_size=1, device=dev)
    net = torch.compile(model) if cfg.compile else model
    run = _Run(cfg, model, net, data, dev, callbacks, stop_event, log, sources)
    if saved is not None:
        run.restore(saved, resume_from)

    peak = _PeakMemory(dev)
    # inside a torch.distributed job every rank calls train(); the window is then collective
    window = measure(cfg.label or "train", idle=idle, sources=sources, distributed=None)
    window.start()
    try:
        run.meter = _Meter(sources)
        run.start_s = time.perf_counter()
        run.start_cpu_s = time.process_time()
        run.loop()
    except BaseException:  # loop() keeps Ctrl-C itself; anything else closes the window first
        if window.running:
            window.stop()
        raise
    # the last step is done: from here on a Ctrl-C is kept on the run instead of losing it
    result = _finish(run, window, flop_count, params, peak, save, results_path)
    if run.interrupted_in_loop:
        raise _interrupted(result, run, save)
    if log:
        print(("greenlab.train: " + result.message + "\n" if result.message else "") +
              "greenlab.train: " + result.summary())
    return result


def _interrupted(result, run, save) -> Interrupted:
    label = f" {result.label!r}" if result.label else ""
    est = " (estimate)" if result.estimated else ""
    where = ("the results log and gl.last_interrupted()" if save and "not saved" not in result.message
             else "gl.last_interrupted() (not in the results log)")
    line = (f"greenlab.train: interrupted{label} at step {result.steps} of {run.total_steps}, after "
            f"{result.seconds:.3g} s and {result.joules:.4g} J{est}; the partial run is in {where}; "
            "a variable this cell assigns keeps its previous value")
    return remember_interrupted(line, result)


def _finish(run, window, flop_count, params, peak, save, results_path) -> RunResult:
    """Close the window, pack the result and append it to the log. A Ctrl-C in any of these
    steps (a real SIGINT is held back until they are done; a KeyboardInterrupt raised inside
    them is caught) leaves the run returned, marked interrupted, and says in which step."""
    stages = []
    with _held_sigint() as pending:
        try:
            run.end_cpu_s = time.process_time()
            peak.sample()
        except KeyboardInterrupt:
            stages.append("the window's end read")
        try:
            energy = window.stop()
        except KeyboardInterrupt:
            if "the window's end read" not in stages:
                stages.append("the window's end read")
            energy = _energy_from_meter(run, window)
        result = None
        for _ in range(3):  # packing is plain arithmetic: an interrupt there is retried
            try:
                result = run.result(energy, flop_count, params, peak)
                break
            except KeyboardInterrupt:
                if "the result packing" not in stages:
                    stages.append("the result packing")
        if result is None:
            raise KeyboardInterrupt
        late = not run.interrupted_in_loop  # an interrupt before the last step says so itself
        if late and (pending or stages):
            _mark_interrupted_after_last_step(result, stages)
        if save:
            try:
                _save_result(result, results_path)
            except KeyboardInterrupt:
                if late:
                    _mark_interrupted_after_last_step(result, ["the results-log append"])
                result.message += "; the run was not saved to the results log"
        if late and pending and not stages:  # a SIGINT held during the append
            _mark_interrupted_after_last_step(result, [])
    return result


def _mark_interrupted_after_last_step(result, stages):
    if result.status == "interrupted" and "after the last step" in result.message:
        return
    where = " and ".join(stages) if stages else "the end of the run (held until the run was saved)"
    note = (f"Ctrl-C after the last step, during {where}: the training had finished "
            f"(status would have been {result.status!r})")
    if result.status == "interrupted":  # interrupted during the final evaluation already
        note = f"Ctrl-C after the last step, during {where}"
    result.status = "interrupted"
    result.message = f"{result.message}; {note}" if result.message else note


def _energy_from_meter(run, window):
    """A Measurement from the run's own meter, for a window whose end read was interrupted."""
    from greenlab.energy.measure import ComponentEnergy, Measurement

    seconds = time.perf_counter() - run.start_s
    problems = ["the energy window's end read was interrupted (Ctrl-C); the figures are read "
                "again from the run's meter, which started just after the window"]
    components = {}
    meter = run.meter
    for s, j0 in zip(meter.sources, meter.start):
        try:
            joules = s.read_joules() - j0
        except Exception as exc:  # noqa: BLE001 - a failed read leaves the component out
            problems.append(f"{s.component}: {getattr(s, 'name', '?')} failed at the re-read ({exc}); "
                            "its energy is missing from this total")
            continue
        components[s.component] = ComponentEnergy(
            s.component, getattr(s, "name", "?"), joules, seconds, joules / seconds if seconds > 0 else 0.0,
            bool(getattr(s, "estimated", False)), float(getattr(s, "rel_uncertainty", 0.0)),
            getattr(s, "note", ""), getattr(s, "model", ""), getattr(s, "attribution", ""))
    return Measurement(getattr(window, "label", "train"), seconds, components, None, [], [], problems)


@contextlib.contextmanager
def _held_sigint():
    """Hold a Ctrl-C (SIGINT) back until the block is done; yields a list that gets an entry
    per SIGINT received. Outside the main thread (no handler can be set) nothing is held."""
    pending = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    except (ValueError, OSError, TypeError):
        yield pending
        return
    try:
        yield pending
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


# --- the loop ------------------------------------------------------------------------------

class _Run:
    """State of one run; ``loop()`` trains, ``result()`` packs the outcome."""

    def __init__(self, cfg, model, net, data, dev, callbacks, stop_event, log, sources):
        from greenlab.training.data import DeviceLoader, make_dataloader

        self.cfg, self.model, self.net, self.data, self.dev = cfg, model, net, data, dev
        self.callbacks, self.stop_event, self.log, self.sources = callbacks, stop_event, log, sources
        self.device_type = dev.type
        self.dtype = precision_dtype(cfg.precision)
        self.amp = cfg.precision != "fp32"
        self.scaler = make_scaler(self.device_type, cfg.precision)
        first_bs = cfg.batch_size_at(0)
        if cfg.loader == "device":
            self.loader = DeviceLoader(data.train_x, data.train_y, first_bs, shuffle=True,
                                       augment=cfg.augment, device=dev, seed=cfg.seed)
        else:
            self.loader = make_dataloader(data, first_bs, num_workers=cfg.num_workers,
                                          pin_memory=cfg.pin_memory, prefetch_factor=cfg.prefetch_factor,
                                          augment=cfg.augment, seed=cfg.seed)
        self.n_train = int(data.train_x.shape[0])
        if getattr(data, "val_x", None) is None or int(data.val_x.shape[0]) == 0:
            raise ValueError("data has no validation split (val_x): targets and early stopping read "
                             "it; build the Dataset with gl.data.load, or with at least 2 training "
                             "samples so that some can be held out")
        self.val_x = data.val_x.to(dev)  # read while training
        self.val_y = data.val_y.to(dev)
        self.test_x = data.test_x  # scored once, at the end
        self.test_y = data.test_y
        self.test_acc = None
        self.optimizer = _optimizer(cfg, model)
        self.scheduler = _scheduler(cfg, self.optimizer, self._total_steps())
        self.state = TrainState(model=model, config=cfg, _run=self)
        self.history: list[dict] = []
        self.status = "completed"
        self.message = ""
        self.step = 0
        self.samples = 0
        self.epoch = 0
        self.epochs_run = 0
        self.eval_seconds = 0.0
        self.eval_cpu_seconds = 0.0
        self.start_cpu_s = self.end_cpu_s = 0.0
        self.best = None
        self.last_acc = None
        self.evals_since_best = 0
        self.target = None  # (seconds, joules, step) at the first evaluation reaching the target
        self.meter = None
        self.start_s = 0.0
        self.loss_sum = torch.zeros((), device=dev)  # window losses since the last evaluation
        self.loss_steps = 0
        # position inside the epoch and resume bookkeeping
        self.batch_in_epoch = 0  # micro-batches of this epoch consumed so far
        self.epoch_loader_rng = None  # the loader generator's state when this epoch began
        self.start_epoch = 0
        self.resume_batch = 0  # micro-batches to skip in start_epoch (resumed runs)
        self.resumed_from_step = None
        self.start_step = self.start_samples = 0
        self.prior_seconds = self.prior_joules = 0.0
        self.rng_after_resume = None
        self.total_steps = self._total_steps()
        self.interrupted_in_loop = False  # Ctrl-C before the last step (train() raises then)
        self.callback_problems: list[str] = []

    # one pass over everything; sets self.status
    def loop(self):
        cfg = self.cfg
        bar = _progress(self.total_steps, self.log, cfg.label, initial=self.step)
        try:
            for epoch in range(self.start_epoch, cfg.epochs):
                self.epoch = epoch
                if self._epoch(epoch, bar):
                    break
                self.epochs_run = epoch + 1
                if not self._evaluate_now():  # epoch end
                    break
        except StopTraining as exc:
            self.status = "stopped"
            if isinstance(exc, LrScheduleError):
                self.message = f"stopped at step {self.step}: {exc}"
            else:
                self.message = f"stopped by a callback at step {self.step}" + (f": {exc}" if str(exc) else "")
        except KeyboardInterrupt:
            self.status = "interrupted"
            self.interrupted_in_loop = self.step < self.total_steps
            self.message = f"interrupted at step {self.step} of {self.total_steps}"
        finally:
            bar.close()
        try:
            if self.status in ("completed", "stopped"):  # no-op if this step was evaluated
                self._evaluate_now(rules=self.status == "completed")
            if self.status not in ("interrupted", "diverged"):
                self._test()
            self.state.status = self.status
            self._notify("on_end", "end")
        except StopTraining:
            pass
        except KeyboardInterrupt:
            self.status = "interrupted"
            self.message = (f"Ctrl-C after the last step (step {self.step}), during the final "
                            "evaluation: the training had finished; the test split was not scored")

    def _epoch(self, epoch, bar) -> bool:
        """Train one epoch; True when the run must end now."""
        cfg = self.cfg
        bs = cfg.batch_size_at(epoch)
        self.loader.set_batch_size(bs)
        self.state.batch_size = bs
        sizes = _micro_sizes(self.n_train, bs)
        windows = _window_totals(sizes, cfg.accum_steps)
        last = len(sizes) - 1
        window_loss = torch.zeros((), device=self.dev)
        self.net.train()
        batches, skip = self._batches(epoch)
        if skip and self._after_step(epoch, skip - 1, last):  # finish the checkpointed step
            return True
        for i, (xb, yb) in enumerate(batches, start=skip):
            if xb.device != self.dev:
                xb = xb.to(self.dev, non_blocking=True)
                yb = yb.to(self.dev, non_blocking=True)
            if cfg.channels_last:
                xb = xb.contiguous(memory_format=torch.channels_last)
            total = windows[i // cfg.accum_steps]
            loss = classifier_loss(self.net, xb, yb, total, self.dtype, self.amp)
            backward(loss, self.scaler)
            window_loss += loss.detach()
            self.batch_in_epoch = i + 1
            if (i + 1) % cfg.accum_steps and i != last:
                continue
            self._optimizer_step()
            self.step += 1
            self.samples += total
            self.loss_sum += window_loss
            self.loss_steps += 1
            self.state._loss = window_loss
            window_loss = torch.zeros((), device=self.dev)
            bar.update(1)
            if self.step % 50 == 0 and not self._finite():
                return True
            if self.callbacks:
                self._notify("on_step", "step")
            if self._after_step(epoch, i, last):
                return True
        return False

    def _after_step(self, epoch, i, last) -> bool:
        """What follows an optimizer step's callbacks (``i``: its last micro-batch); True when
        the run must end now."""
        cfg = self.cfg
        if getattr(self, "schedule_error", None) is not None:
            raise self.schedule_error
        if self.stop_event is not None and self.stop_event.is_set():
            self.status = "stopped"
            self.message = f"stop requested at step {self.step}"
            return True
        if self._eval_due() and i != last:
            if not self._evaluate_now():
                return True
            self.net.train()
        if cfg.max_steps is not None and self.step >= cfg.max_steps:
            self.epochs_run = epoch + (1 if i == last else 0)
            self._evaluate_now()
            return True
        return False

    def _eval_due(self) -> bool:
        """True when the schedule asks for an evaluation after this optimizer step."""
        cfg = self.cfg
        if cfg.eval_every:
            return self.step % cfg.eval_every == 0
        if cfg.eval_every_samples:
            before = self.history[-1]["samples"] if self.history else 0
            return self.samples // cfg.eval_every_samples > before // cfg.eval_every_samples
        return False

    def _test(self):
        """Score the test split once, at the end (its time counts as evaluation time)."""
        t0, c0 = time.perf_counter(), time.process_time()
        self.test_acc = _accuracy(self.net, self.test_x.to(self.dev), self.test_y.to(self.dev), self.cfg,
                                  self.device_type, self.dtype)
        self.eval_seconds += time.perf_counter() - t0
        self.eval_cpu_seconds += time.process_time() - c0

    def _batches(self, epoch):
        """(iterator over this epoch's micro-batches, micro-batches already done). A resumed
        run replays the loader from the epoch's saved generator state and skips the batches the
        checkpoint already trained on, so the remaining batches (and augmentations) are the same."""
        generator = self.loader.generator
        if epoch == self.start_epoch and self.resume_batch:
            generator.set_state(self.epoch_loader_rng)
            it = iter(self.loader)
            for _ in range(self.resume_batch):
                next(it)
            _set_rng_state(self.rng_after_resume, self.dev)
            skip, self.resume_batch = self.resume_batch, 0
            self.batch_in_epoch = skip
            return it, skip
        self.epoch_loader_rng = generator.get_state()
        self.batch_in_epoch = 0
        return iter(self.loader), 0

    def _optimizer_step(self):
        optimizer_step(self.optimizer, self.scaler, self.model.parameters(), self.cfg.grad_clip)
        if self.scheduler is not None:
            try:
                self.scheduler.step()
            except LrScheduleError as exc:  # raised in _after_step, once this step is counted
                self.schedule_error = exc

    def _finite(self) -> bool:
        """False (and status "diverged") when a loss since the last check was NaN or inf."""
        if bool(torch.isfinite(self.loss_sum)):
            return True
        self.status = "diverged"
        self.message = (f"training diverged by step {self.step}: the loss became NaN or infinite. "
                        "Try a lower learning rate, grad_clip, or fp32/bf16 instead of fp16.")
        return False

    def _evaluate_now(self, rules: bool = True) -> bool:
        """Evaluate and record a history row; with ``rules``, apply the target and patience
        rules. Returns False when the run must stop."""
        if self.history and self.history[-1]["step"] == self.step:
            return self.status == "completed"
        if not self._finite():
            return False
        t0, c0 = time.perf_counter(), time.process_time()
        acc = _accuracy(self.net, self.val_x, self.val_y, self.cfg, self.device_type, self.dtype)
        self.eval_seconds += time.perf_counter() - t0
        self.eval_cpu_seconds += time.process_time() - c0
        seconds = self.prior_seconds + time.perf_counter() - self.start_s
        joules = self.prior_joules + self.meter.joules()
        loss = float(self.loss_sum) / self.loss_steps if self.loss_steps else None
        self.loss_sum = torch.zeros((), device=self.dev)
        self.loss_steps = 0
        self.last_acc = acc
        self.state.mean_loss = loss
        self.history.append({"step": self.step, "epoch": self.epoch, "samples": self.samples,
                             "seconds": seconds, "joules": joules, "loss": loss, "accuracy": acc,
                             "lr": self.optimizer.param_groups[0]["lr"]})
        if self.best is None or acc > self.best:
            self.best = acc
            self.evals_since_best = 0
        else:
            self.evals_since_best += 1
        self._notify("on_eval", "eval")
        cfg = self.cfg
        if cfg.target_accuracy is not None and self.target is None and acc >= cfg.target_accuracy:
            self.target = (seconds, joules, self.step)
            if cfg.stop_at_target and rules:
                self.status = "target-reached"
                return False
        if not rules:
            return True
        if cfg.patience is not None and self.evals_since_best >= cfg.patience:
            self.status = "early-stopped"
            self.message = f"no improvement in {cfg.patience} evaluation(s); stopped at step {self.step}"
            return False
        return True

    def _notify(self, method, event):
        s = self.state
        s.event, s.step, s.epoch, s.samples = event, self.step, self.epoch, self.samples
        s.seconds = time.perf_counter() - self.start_s
        s.accuracy, s.best_accuracy = self.last_acc, self.best
        s.lr = self.optimizer.param_groups[0]["lr"]
        s._meter = self.meter
        for cb in list(self.callbacks):
            fn = getattr(cb, method, None)
            if fn is None and method == "on_step" and callable(cb) and not hasattr(cb, "on_eval"):
                fn = cb
            if fn is None:
                continue
            try:
                fn(s)
            except (StopTraining, KeyboardInterrupt):
                raise
            except Exception as exc:  # noqa: BLE001 - a failing callback must not lose the run
                self._callback_failed(cb, method, exc)

    def _callback_failed(self, cb, method, exc):
        """Drop a callback that raised: the run goes on, and the failure is reported on the
        result (``callback_problems`` and its message) and warned about at once."""
        name = getattr(cb, "__name__", None) or type(cb).__name__
        problem = (f"callback {name}.{method} failed at step {self.step} ({type(exc).__name__}: "
                   f"{exc}); it was not called again")
        self.callback_problems.append(problem)
        self.callbacks = [c for c in self.callbacks if c is not cb]
        warnings.warn(problem, RuntimeWarning, stacklevel=2)

    def _total_steps(self) -> int:
        total = 0
        for epoch in range(self.cfg.epochs):
            total += math.ceil(len(_micro_sizes(self.n_train, self.cfg.batch_size_at(epoch))) / self.cfg.accum_steps)
        if self.cfg.max_steps is not None:
            total = min(total, self.cfg.max_steps)
        return max(total, 1)

    def result(self, energy, flop_count, params, peak) -> RunResult:
        from greenlab.base.version import __version__

        if self.meter is not None:  # a source that failed mid-run: the figure says so itself
            energy = energy.with_problems(self.meter.problems)
        cfg = self.cfg
        train_seconds = max(energy.seconds - self.eval_seconds, 1e-12)
        co2e = _co2e(energy.joules, cfg.region)
        fl = flop_count.to_dict()
        fl["train_step_per_sample"] = flop_count.train_step_per_sample
        fl["forward_per_sample"] = flop_count.forward_per_sample
        fl["train_total_estimate"] = flop_count.train_step_per_sample * (self.samples - self.start_samples)
        fl["train_total_model"] = ("train_step_per_sample x samples trained in this session "
                                   "(FLOPs scale with batch size)")
        message = self.message
        for problem in list(self.meter.problems if self.meter is not None else ()) + self.callback_problems:
            message = f"{message}; {problem}" if message else problem
        if cfg.target_accuracy is not None and self.target is None:
            best = "n/a" if self.best is None else f"{self.best:.1%}"
            missed = (f"target accuracy {cfg.target_accuracy:.1%} not reached within the budget "
                      f"(best validation accuracy {best} after {self.step} steps)")
            message = f"{message}; {missed}" if message else missed
        return RunResult(
            status=self.status, label=cfg.label, final_accuracy=self.test_acc, best_accuracy=self.best,
            val_accuracy=self.last_acc,
            history=self.history, seconds=energy.seconds, joules=energy.joules, energy=energy,
            seconds_to_target=self.target[0] if self.target else None,
            joules_to_target=self.target[1] if self.target else None,
            steps_to_target=self.target[2] if self.target else None,
            co2e_g=co2e, region=cfg.region, steps=self.step, samples=self.samples,
            epochs_run=self.epochs_run,
            samples_per_second=(self.samples - self.start_samples) / train_seconds,
            train_seconds=train_seconds,
            train_cpu_seconds=max(0.0, self.end_cpu_s - self.start_cpu_s - self.eval_cpu_seconds),
            peak_memory_bytes=peak.bytes(), peak_memory_kind=peak.kind,
            flops=fl, params=params, provenance=provenance(self.dev, energy.sources, __version__),
            config=cfg.to_dict(), message=message, resumed_from_step=self.resumed_from_step,
            prior_seconds=self.prior_seconds, prior_joules=self.prior_joules,
            cumulative_seconds=self.prior_seconds + energy.seconds,
            cumulative_joules=self.prior_joules + energy.joules,
            steps_this_session=self.step - self.start_step,
            samples_this_session=self.samples - self.start_samples,
            callback_problems=list(self.callback_problems))

    # --- checkpoints ---

    def checkpoint(self, path, event):
        """Write the whole training state to ``path`` (see ``TrainState.checkpoint``)."""
        from greenlab.training.checkpoint import save_checkpoint

        if event not in ("step", "end"):
            raise ValueError(f"state.checkpoint() works in on_step (or on_end), not in on_{event}: "
                             "an evaluation's stopping rules are applied after its callbacks")
        if event == "end" and self.status not in ("completed", "target-reached", "early-stopped"):
            raise ValueError(f"the run ended with status {self.status!r} (not at a clean step); "
                             "resume from the last checkpoint written during training")
        cuda = self.dev.type == "cuda"
        state = {
            "version": TRAIN_STATE_VERSION,
            "resumable": event == "step",
            "status": self.status if event == "end" else "running",
            "config": _plain(self.cfg.to_dict()),
            "n_train": self.n_train,
            "step": self.step, "epoch": self.epoch, "samples": self.samples,
            "epochs_run": self.epochs_run, "batch_in_epoch": self.batch_in_epoch,
            "loader_rng_epoch_start": self.epoch_loader_rng,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.dev) if cuda else None,
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else None,
            "history": [dict(row) for row in self.history],
            "best": self.best, "last_acc": self.last_acc, "evals_since_best": self.evals_since_best,
            "target": list(self.target) if self.target else None,
            "loss_sum": self.loss_sum.detach().cpu(), "loss_steps": self.loss_steps,
            "seconds": self.prior_seconds + time.perf_counter() - self.start_s,
            "joules": self.prior_joules + self.meter.joules(),
        }
        return str(save_checkpoint(path, self.model, self.optimizer, step=self.step,
                                   samples=self.samples, accuracy=self.last_acc, train_state=state))

    def restore(self, saved, path):
        """Load a checkpoint payload (from ``load_train_checkpoint``) into this run."""
        from greenlab.training.checkpoint import check_optimizer_state

        st = saved["extra"]["train_state"]
        try:
            self.model.load_state_dict(saved["model"])
            check_optimizer_state(saved, self.optimizer, path)
            self.optimizer.load_state_dict(saved["optimizer"])
            if self.scheduler is not None:
                self.scheduler.load_state_dict(st["scheduler"])
            if self.scaler.is_enabled():
                self.scaler.load_state_dict(st["scaler"])
        except (RuntimeError, KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"checkpoint {path} does not fit this model/optimizer: {exc}") from exc
        self.step, self.epoch, self.samples = st["step"], st["epoch"], st["samples"]
        self.start_step, self.start_samples = self.step, self.samples
        self.resumed_from_step = self.step
        self.epochs_run = st["epochs_run"]
        self.start_epoch, self.resume_batch = st["epoch"], st["batch_in_epoch"]
        self.epoch_loader_rng = st["loader_rng_epoch_start"]
        self.rng_after_resume = {"torch": st["torch_rng"], "cuda": st["cuda_rng"]}
        self.history = [dict(row) for row in st["history"]]
        self.best, self.last_acc = st["best"], st["last_acc"]
        self.evals_since_best = st["evals_since_best"]
        self.target = tuple(st["target"]) if st["target"] else None
        self.loss_sum = st["loss_sum"].to(self.dev)
        self.loss_steps = st["loss_steps"]
        self.prior_seconds, self.prior_joules = float(st["seconds"]), float(st["joules"])


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


# --- helpers ----------------------------------------------------------------------------------

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


class _Meter:
    """Cumulative joules since creation, read from the run's energy sources. A source that fails
    mid-run does not end the run: the failure is recorded in ``problems`` and every later
    reading is NaN (missing), never a smaller total presented as whole."""

    def __init__(self, sources):
        self.sources = list(sources)
        self.start = [s.read_joules() for s in self.sources]
        self.problems: list[str] = []

    def joules(self) -> float:
        if self.problems:
            return math.nan
        try:
            return sum(s.read_joules() - j0 for s, j0 in zip(self.sources, self.start))
        except Exception as exc:  # a meter fault must not lose the run
            failed = next((s for s in self.sources if not _reads(s)), None)
            name = (f"{getattr(failed, 'component', '?')} ({getattr(failed, 'name', '?')})"
                    if failed is not None else "an energy source")
            self.problems.append(f"{name} failed during the run ({type(exc).__name__}: {exc}); "
                                 "energy figures from then on are missing (NaN) and the run's "
                                 "total leaves that source out")
            return math.nan


def _reads(source) -> bool:
    try:
        source.read_joules()
        return True
    except Exception:
        return False


class _PeakMemory:
    """Memory the run added: CUDA peak allocated above the start of the run (model and data are
    already resident then, so they are not counted), or (CPU) the growth of the process's
    resident set size (psutil when installed, else /proc/self/statm)."""

    def __init__(self, dev):
        self.dev = dev
        self.peak_rss = None
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            self.base = int(torch.cuda.memory_allocated(dev))
            torch.cuda.reset_peak_memory_stats(dev)
            self.kind = "cuda max_memory_allocated above the start of the run (model and data resident)"
        else:
            self.rss0 = _rss_bytes()
            self.kind = ("cpu process RSS growth (start to end of run)" if self.rss0 is not None
                         else "not measured (no RSS reading on this system)")

    def sample(self):
        if self.dev.type != "cuda" and self.rss0 is not None:
            rss = _rss_bytes()
            if rss is not None:
                self.peak_rss = rss if self.peak_rss is None else max(self.peak_rss, rss)

    def bytes(self) -> int | None:
        if self.dev.type == "cuda":
            return max(0, int(torch.cuda.max_memory_allocated(self.dev)) - self.base)
        if self.rss0 is None:
            return None
        return max(0, int((self.peak_rss or self.rss0) - self.rss0))


def _rss_bytes() -> int | None:
    """This process's resident set size in bytes: psutil when installed, else /proc/self/statm;
    None where neither exists."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        pass
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def provenance(dev, sources: dict, version: str) -> dict:
    """Hardware and software facts for a result (no host name)."""
    gpu = ""
    if dev.type == "cuda":
        gpu = torch.cuda.get_device_name(dev)
    return {"device": str(dev), "cpu": _cpu_model(), "gpu": gpu, "torch": torch.__version__,
            "greenlab": version, "python": platform.python_version(), "os": platform.system(),
            "energy_sources": dict(sources), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpu_threads": torch.get_num_threads()}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _co2e(joules, region):
    """Grams CO2e for ``joules`` in ``region``; None (with a warning) when it cannot be worked out,
    so a finished run is never lost to a carbon-table problem."""
    try:
        from greenlab.impact.carbon import co2e_g

        return co2e_g(joules, region=region)
    except (ImportError, OSError, ValueError) as exc:
        warnings.warn(f"CO2e not computed: {exc}", RuntimeWarning, stacklevel=3)
        return None


def _accuracy(net, x, y, cfg, device_type, dtype) -> float:
    amp = cfg.eval_autocast and cfg.precision != "fp32"
    return accuracy(net, x, y, batch_size=cfg.eval_batch_size, autocast_dtype=dtype if amp else None,
                    channels_last=cfg.channels_last)


def _micro_sizes(n, batch_size) -> list:
    full, rest = divmod(n, batch_size)
    return [batch_size] * full + ([rest] if rest else [])


def _window_totals(sizes, accum_steps) -> list:
    return [sum(sizes[i:i + accum_steps]) for i in range(0, len(sizes), accum_steps)]


def _optimizer(cfg, model):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def _scheduler(cfg, optimizer, total_steps):
    sched = cfg.lr_schedule
    lrs = torch.optim.lr_scheduler
    if sched is None or sched == "constant":
        return None
    if callable(sched):
        return lrs.LambdaLR(optimizer, _checked_schedule(sched))
    if sched == "step":
        return lrs.StepLR(optimizer, step_size=cfg.lr_step_size, gamma=cfg.lr_gamma)
    if sched == "cosine":
        return lrs.CosineAnnealingLR(optimizer, T_max=max(1, total_steps))
    warm = cfg.warmup_steps

    def warmup_linear(step):
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warm))

    return lrs.LambdaLR(optimizer, warmup_linear)


class LrScheduleError(StopTraining, ValueError):
    """A callable ``lr_schedule`` returned something other than a finite multiplier >= 0.
    Before training it is raised (a ValueError); during training it stops the run (status
    "stopped", the reason in the message), so the work done so far is kept."""


def _checked_schedule(fn):
    """Wrap a callable ``lr_schedule`` so a negative, NaN or non-numeric multiplier stops the run
    instead of training at a nonsense learning rate. (A plain function, so LambdaLR's
    state_dict stores nothing for it and checkpoints stay loadable.)"""

    def checked(step):
        value = fn(step)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or not 0 <= value <= MAX_LR:
            raise LrScheduleError(f"lr_schedule({step}) returned {value!r}; it must return a finite "
                                  f"multiplier of lr in [0, {MAX_LR:g}]")
        return value

    return checked


def _progress(total, log, label, initial=0):
    """A tqdm progress bar over the run's steps when ``log`` (``greenlab.base.progress.bar``)."""
    from greenlab.base import progress

    return progress.bar(total, label or "train", unit="step", show=log, initial=initial)


def _as_callbacks(callbacks):
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


def _check_sources(sources) -> list:
    """``sources`` must be a non-empty list of energy sources: with none, the run's energy would
    read 0 J, which is not a measurement."""
    if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
        raise validation.ArgumentTypeError(
            f"sources must be a list of energy sources (greenlab.energy.default_sources()), got "
            f"{type(sources).__name__}")
    if not isinstance(sources, list):  # a list from default_sources() keeps its problems
        sources = list(sources)
    if not sources:
        raise ValueError("sources must hold at least one energy source (an empty list would "
                         "report 0 J); leave sources=None for what this machine offers")
    for i, s in enumerate(sources):
        if not (callable(getattr(s, "read_joules", None)) and hasattr(s, "component")):
            raise validation.ArgumentTypeError(
                f"sources[{i}] must be an energy source (with read_joules() and component), got "
                f"{type(s).__name__}")
    return sources


def _check_data(data):
    """The dataset must have non-empty train and test splits of matching lengths, with labels in
    [0, num_classes): an empty or mislabelled test split would score 0.0 without any error."""
    for name in ("train_x", "train_y", "test_x", "test_y"):
        if not isinstance(getattr(data, name, None), torch.Tensor):
            raise validation.ArgumentTypeError(
                f"data must be a greenlab.training.data.Dataset (from gl.data.load) with tensor {name}, "
                f"got {type(data).__name__}")
    splits = ("train", "val", "test") if isinstance(getattr(data, "val_x", None), torch.Tensor) \
        else ("train", "test")
    for split in splits:
        x, y = getattr(data, f"{split}_x"), getattr(data, f"{split}_y")
        if not isinstance(y, torch.Tensor):
            raise validation.ArgumentTypeError(f"data.{split}_y must be a tensor of labels")
        if x.dim() < 1 or x.shape[0] == 0:
            raise ValueError(f"data.{split}_x is empty: the {split} split needs at least one sample")
        if y.dim() != 1 or y.shape[0] != x.shape[0]:
            raise ValueError(f"data.{split}_y must hold one label per sample ({x.shape[0]}), "
                             f"got shape {tuple(y.shape)}")
        if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
            raise ValueError(f"data.{split}_y must hold integer class labels, got {y.dtype}")
    classes = getattr(data, "num_classes", None)
    if classes is not None:
        classes = validation.integer("data.num_classes", classes, low=2)
        for split in splits:
            y = getattr(data, f"{split}_y")
            low, high = int(y.min()), int(y.max())
            if low < 0 or high >= classes:
                raise ValueError(f"data.{split}_y labels must be in [0, {classes - 1}] "
                                 f"(num_classes={classes}), found {low}..{high}")


def _save_result(result, path):
    """Append the run to the results log; a log that cannot be written keeps the run (returned
    as it is), warns, and names the path in the result's message."""
    from greenlab.base import results

    try:
        results.append(result.to_dict(), path=path)
    except (OSError, ValueError, TypeError) as exc:
        problem = f"the run was not saved to the results log: {exc}"
        result.message = f"{result.message}; {problem}" if result.message else problem
        warnings.warn(problem, RuntimeWarning, stacklevel=3)


def _check_region(region):
    """``region`` must name a row of the carbon table; a table that cannot be read is left for
    the end of the run (where CO2e is then reported as missing, with a warning)."""
    validation.text("region", region, allow_empty=False)
    from greenlab.impact import carbon

    carbon.check_region(region)


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_steps(steps):
    try:
        pairs = [(e, s) for e, s in steps]
    except (TypeError, ValueError):
        raise ValueError("batch_schedule must be a callable epoch -> batch size or a list of "
                         "(first_epoch, batch_size) pairs") from None
    for e, s in pairs:
        if isinstance(e, bool) or not isinstance(e, int) or e < 0:
            raise ValueError(f"batch_schedule epochs must be integers >= 0, got {e!r}")
        _positive_int("batch_schedule batch size", s)

