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

This module is the loop itself; its parts have modules of their own in ``greenlab.training``
(``config``, ``callbacks``, ``schedules``, ``step``, ``meter``, ``result``, ``ending``, ``resume``).
"""

from __future__ import annotations

import math
import time

import torch

from greenlab.base import progress, validation
from greenlab.base.interrupts import Interrupted, last_interrupted, remember_interrupted  # noqa: F401  as before
from greenlab.training.accuracy import accuracy
from greenlab.training.callbacks import StopTraining, TrainState, as_callbacks, notify
from greenlab.training.config import LR_SCHEDULES, OPTIMIZERS, TrainConfig  # noqa: F401  as before
from greenlab.training.ending import finish, interrupted_error
from greenlab.training.meter import RunMeter, check_sources
from greenlab.training.peak_memory import PeakMemory
from greenlab.training.precision import PRECISIONS, dtype as precision_dtype  # noqa: F401  train.PRECISIONS as before
from greenlab.training.provenance import provenance  # noqa: F401  as before (gl.lm reads it here)
from greenlab.training.result import RunResult, pack_result
from greenlab.training.resume import load_train_checkpoint, restore_train_state, save_train_state, set_rng_state
from greenlab.training.schedules import LrScheduleError, make_optimizer, make_scheduler
from greenlab.training.step import backward, classifier_loss, make_scaler, optimizer_step
from greenlab.session import config as gl_config
from greenlab.energy import default_sources, measure
from greenlab.training.data import DeviceLoader, make_dataloader

# the names outside code reads from this module, as before the loop's parts had modules of their own
_Meter, _PeakMemory, _scheduler = RunMeter, PeakMemory, make_scheduler

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
      run with the same config (fields in ``resume.RESUME_FREE_FIELDS`` may differ) and data size; the
      run continues from it. ``seconds``/``joules`` then cover this call only, and
      ``cumulative_seconds``/``cumulative_joules`` add the earlier session up to the checkpoint;
      history rows and *_to_target figures are cumulative.
    """
    from greenlab.training.models import count_params, flops  # lazy: read per call; a test stands in for flops

    cfg = config if config is not None else TrainConfig()
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(cfg).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dev = validation.device("device", device) if device is not None else torch.device(gl_config.device())
    if dev.type == "cuda" and dev.index is None:  # so batch.device == dev compares equal
        dev = torch.device("cuda", torch.cuda.current_device())
    _check_data(data)
    callbacks = as_callbacks(callbacks)
    if sources is None:  # only the GPU the run uses is counted (none for a CPU run)
        sources = default_sources(gpus=[dev.index] if dev.type == "cuda" else [])
    sources = check_sources(sources)
    validation.flag("log", log)
    validation.flag("save", save)
    if stop_event is not None and not callable(getattr(stop_event, "is_set", None)):
        raise validation.ArgumentTypeError(f"stop_event must be a threading.Event or None, got {stop_event!r}")

    try:  # a Ctrl-C while setting up (first imports, FLOP count, compile) is one line too
        saved = load_train_checkpoint(resume_from, cfg, data) if resume_from is not None else None
        torch.manual_seed(cfg.seed)
        model = model.to(dev)
        if cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        params = count_params(model)
        flop_count = flops(model, data.input_shape, batch_size=1, device=dev)
        net = torch.compile(model) if cfg.compile else model
        run = TrainingRun(cfg, model, net, data, dev, callbacks, stop_event, log, sources)
        if saved is not None:
            run.restore(saved, resume_from)
        peak = PeakMemory(dev)
    except KeyboardInterrupt as exc:
        raise interrupted_before_start(cfg, exc) from None

    # inside a torch.distributed job every rank calls train(); the window is then collective
    window = measure(cfg.label or "train", idle=idle, sources=sources, distributed=None)
    try:
        window.start()
        run.meter = RunMeter(sources)
        run.start_s = time.perf_counter()
        run.start_cpu_s = time.process_time()
        run.loop()
    except BaseException as exc:  # loop() keeps Ctrl-C itself; anything else closes the window first
        if window.running:
            window.stop()
        if isinstance(exc, KeyboardInterrupt):
            raise interrupted_before_start(cfg, exc) from None
        raise
    # the last step is done: from here on a Ctrl-C is kept on the run instead of losing it
    result = finish(run, window, flop_count, params, peak, save, results_path)
    if run.interrupted_in_loop:
        raise interrupted_error(result, run, save)
    if log:
        print(("greenlab.train: " + result.message + "\n" if result.message else "") +
              "greenlab.train: " + result.summary())
    return result


def interrupted_before_start(cfg, exc: KeyboardInterrupt) -> Interrupted:
    """The one-line ``Interrupted`` for a Ctrl-C before the first step: nothing was trained or
    saved, and ``gl.last_interrupted()`` keeps what it held. An ``Interrupted`` passes through."""
    if isinstance(exc, Interrupted):
        return exc
    label = f" {cfg.label!r}" if cfg.label else ""
    return Interrupted(f"greenlab.train: interrupted{label} before its first step, while setting up; "
                       "nothing was trained or saved", None)


# --- the loop ------------------------------------------------------------------------------

class TrainingRun:
    """One ``train`` call while it trains: its state, and the loop over it. ``loop()`` trains, ``result()``
    packs the outcome (``greenlab.training.result.pack_result``), ``checkpoint()`` and ``restore()`` save and
    load the state (``greenlab.training.resume``); ``greenlab.training.ending.finish`` closes the run, and the
    callbacks' ``TrainState`` reaches it for ``state.checkpoint``. Those modules read these attributes:

    - what runs: ``cfg`` (the ``TrainConfig``), ``model``, ``net`` (the model, compiled when ``cfg.compile``),
      ``data``, ``dev``, ``device_type``, ``dtype`` and ``amp`` (the autocast precision), ``scaler``,
      ``loader``, ``n_train``, ``val_x``/``val_y`` (on the device), ``test_x``/``test_y``, ``optimizer``,
      ``scheduler``, ``state`` (the callbacks' ``TrainState``), ``callbacks``, ``stop_event``, ``log``,
      ``sources``, ``meter`` (the ``RunMeter``, set when the energy window starts), ``total_steps``;
    - how far it got: ``step``, ``samples``, ``epoch``, ``epochs_run``, ``batch_in_epoch``,
      ``epoch_loader_rng`` (the loader generator's state when the epoch began), ``loss_sum`` and
      ``loss_steps`` (the losses since the last evaluation), ``history`` (one row per evaluation);
    - how it went: ``status``, ``message``, ``best``, ``last_acc``, ``evals_since_best``, ``target``
      ((seconds, joules, step) at the first evaluation that reached the target), ``test_acc``,
      ``interrupted_in_loop`` (a Ctrl-C before the last step), ``callback_problems``;
    - its clocks: ``start_s``, ``start_cpu_s``, ``end_cpu_s``, ``eval_seconds``, ``eval_cpu_seconds``;
    - a resumed run's past: ``start_epoch``, ``resume_batch`` (micro-batches to skip in ``start_epoch``),
      ``resumed_from_step``, ``start_step``, ``start_samples``, ``prior_seconds``, ``prior_joules``,
      ``rng_after_resume``.
    """

    def __init__(self, cfg, model, net, data, dev, callbacks, stop_event, log, sources):
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
        self.optimizer = make_optimizer(cfg, model)
        self.scheduler = make_scheduler(cfg, self.optimizer, self._total_steps())
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

    def loop(self):
        """Train every epoch (or to a stop, a target, a divergence or a Ctrl-C), then evaluate, score the
        test split and tell the callbacks the run ended; sets ``status`` and ``message``."""
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
            set_rng_state(self.rng_after_resume, self.dev)
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
        notify(self.callbacks, method, s, self.callback_problems)

    def _total_steps(self) -> int:
        total = 0
        for epoch in range(self.cfg.epochs):
            total += math.ceil(len(_micro_sizes(self.n_train, self.cfg.batch_size_at(epoch))) / self.cfg.accum_steps)
        if self.cfg.max_steps is not None:
            total = min(total, self.cfg.max_steps)
        return max(total, 1)

    def result(self, energy, flop_count, params, peak) -> RunResult:
        """Pack the outcome (``greenlab.training.result.pack_result``)."""
        return pack_result(self, energy, flop_count, params, peak)

    # --- checkpoints (greenlab.training.resume) ---

    def checkpoint(self, path, event):
        """Write the whole training state to ``path`` (see ``TrainState.checkpoint``)."""
        return save_train_state(self, path, event)

    def restore(self, saved, path):
        """Load a checkpoint payload (from ``load_train_checkpoint``) into this run."""
        restore_train_state(self, saved, path)


# --- helpers ----------------------------------------------------------------------------------

def _accuracy(net, x, y, cfg, device_type, dtype) -> float:
    amp = cfg.eval_autocast and cfg.precision != "fp32"
    return accuracy(net, x, y, batch_size=cfg.eval_batch_size, autocast_dtype=dtype if amp else None,
                    channels_last=cfg.channels_last)


def _micro_sizes(n, batch_size) -> list:
    full, rest = divmod(n, batch_size)
    return [batch_size] * full + ([rest] if rest else [])


def _window_totals(sizes, accum_steps) -> list:
    return [sum(sizes[i:i + accum_steps]) for i in range(0, len(sizes), accum_steps)]


def _progress(total, log, label, initial=0):
    """A tqdm progress bar over the run's steps when ``log`` (``greenlab.base.progress.bar``)."""
    return progress.bar(total, label or "train", unit="step", show=log, initial=initial)


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
