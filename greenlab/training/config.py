"""``TrainConfig``: everything that shapes a ``gl.train`` run, checked before any work starts.

Sizes are in samples, steps are optimizer steps; every field is validated in ``__post_init__``
(a ValueError/TypeError names the field and its range).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from greenlab.base import limits, validation
from greenlab.training.precision import PRECISIONS
from greenlab.training.data import as_augment
from greenlab.impact import carbon

LOADERS = ("device", "dataloader")
OPTIMIZERS = ("sgd", "adam", "adamw")
LR_SCHEDULES = ("constant", "step", "cosine", "warmup-linear")
# accepted ranges (checked before any work starts)
MAX_LR = 100.0  # a learning rate above this diverges for any model here
MAX_EPOCHS = 100_000
MAX_SEED = 2**63 - 1  # what torch.manual_seed accepts


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
        # samples held at once are bounded by memory, counts done one after another by time
        for name in ("batch_size", "eval_batch_size"):
            setattr(self, name, limits.held(name, getattr(self, name), what="samples in one batch"))
        self.prefetch_factor = limits.held("prefetch_factor", self.prefetch_factor, what="batches held per worker",
                                      allow_none=True)
        self.accum_steps = limits.steps("accum_steps", self.accum_steps, what="micro-batches per optimizer step")
        self.lr_step_size = limits.steps("lr_step_size", self.lr_step_size, what="optimizer steps")
        self.epochs = v.integer("epochs", self.epochs, low=1, high=MAX_EPOCHS)
        for name, what in (("max_steps", "optimizer steps"), ("eval_every", "optimizer steps"),
                           ("patience", "evaluations")):
            setattr(self, name, limits.steps(name, getattr(self, name), what=what, allow_none=True))
        self.warmup_steps = limits.steps("warmup_steps", self.warmup_steps, low=0, what="optimizer steps")
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

        as_augment(self.augment)
        if self.eval_every_samples is not None:
            # bounded against the run's own samples by gl.train, which knows the data
            self.eval_every_samples = v.integer("eval_every_samples", self.eval_every_samples, low=1)
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
            return limits.held(f"batch_schedule({epoch})", size, what="samples in one batch")
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


# --- helpers ----------------------------------------------------------------------------------

def _check_region(region):
    """``region`` must name a row of the carbon table; a table that cannot be read is left for
    the end of the run (where CO2e is then reported as missing, with a warning)."""
    validation.text("region", region, allow_empty=False)

    carbon.check_region(region)


def _check_steps(steps):
    if isinstance(steps, (str, bytes)):
        raise validation.ArgumentTypeError("batch_schedule must be a callable epoch -> batch size or a list of "
                                           f"(first_epoch, batch_size) pairs, got {validation._show(steps)}")
    try:
        pairs = [(e, s) for e, s in steps]
    except (TypeError, ValueError):
        raise ValueError("batch_schedule must be a callable epoch -> batch size or a list of "
                         "(first_epoch, batch_size) pairs") from None
    for e, s in pairs:
        if isinstance(e, bool) or not isinstance(e, int) or e < 0:
            raise ValueError(f"batch_schedule epochs must be integers >= 0, got {e!r}")
        limits.held("batch_schedule batch size", s, what="samples in one batch")
