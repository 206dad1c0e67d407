"""What a batch size costs (lesson 03 (03_batch_sizing)): ``sweep_batch_sizes`` trains at each batch size and
records energy and time to a target accuracy; ``sweep_cost`` is what the sweep itself cost; ``plot_sweep``
draws it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from greenlab.base import validation
from greenlab.experiments import paired, short_flags
from greenlab.experiments.arms import rotated, warm_up, warmup_config
from greenlab.techniques.batching.inputs import _check_positive_int, _xy
from greenlab.techniques.batching.schedules import linear_scaling_lr
from greenlab.training import loop


@dataclass
class SweepRow:
    """One training run of a batch-size sweep."""

    batch_size: int
    repeat: int
    status: str
    reached_target: bool
    seconds: float
    joules: float
    seconds_to_target: float | None
    joules_to_target: float | None
    final_accuracy: float | None
    lr: float
    estimated: bool


@dataclass
class SweepResult:
    """Energy and time to ``target_accuracy`` per batch size; ``runs`` keeps each RunResult."""

    rows: list
    target_accuracy: float
    runs: list = field(default_factory=list)

    def by_size(self) -> dict:
        """batch size -> median joules_to_target (None when no repeat reached the target)."""
        out = {}
        for b in sorted({r.batch_size for r in self.rows}):
            hits = sorted(r.joules_to_target for r in self.rows if r.batch_size == b and r.reached_target)
            out[b] = _median(hits) if hits else None
        return out

    def best(self) -> int | None:
        """Batch size with the least median energy to target (None if none reached it)."""
        reached = {b: j for b, j in self.by_size().items() if j is not None}
        return min(reached, key=reached.get) if reached else None

    def table(self) -> str:
        """Every run of the sweep as a text table: batch, repeat, learning rate, status, time and energy to target,
        total energy, final accuracy."""
        lines = [f"{'batch':>6} {'rep':>3} {'lr':>8} {'status':>15} {'s to target':>12} "
                 f"{'J to target':>12} {'total J':>10} {'final acc':>9}"]
        for r in self.rows:
            s_t = "-" if r.seconds_to_target is None else f"{r.seconds_to_target:.2f}"
            j_t = "-" if r.joules_to_target is None else f"{r.joules_to_target:.1f}"
            acc = "-" if r.final_accuracy is None else f"{r.final_accuracy:.3f}"
            lines.append(f"{r.batch_size:>6} {r.repeat:>3} {r.lr:>8.4g} {r.status:>15} {s_t:>12} "
                         f"{j_t:>12} {r.joules:>10.1f} {acc:>9}")
        if any(r.estimated for r in self.rows):
            lines.append("energy figures include estimated components (see each run's energy sources)")
        return "\n".join(lines)

    def misses(self) -> dict:
        """batch size -> number of repeats that did not reach the target."""
        return {b: sum(1 for r in self.rows if r.batch_size == b and not r.reached_target)
                for b in sorted({r.batch_size for r in self.rows})}

    def paired(self, baseline: int, metric: str = "joules_to_target") -> dict:
        """batch size -> ``gl.experiments.Paired`` of ``metric`` against batch ``baseline``,
        repeat by repeat (repeat r of every size shares seed and sample order). A repeat where
        either run missed the target has no figure and is left out of the pair."""
        sizes = sorted({r.batch_size for r in self.rows})
        if baseline not in sizes:
            raise ValueError(f"baseline must be one of the swept sizes {sizes}, got {baseline!r}")

        def values(b):
            by_rep = {r.repeat: getattr(r, metric) for r in self.rows if r.batch_size == b}
            return [by_rep[k] for k in sorted(by_rep)]

        def runs(b):  # each repeat's RunResult, so a verdict can refuse windows too short to read
            by_rep = {r.repeat: run for r, run in zip(self.rows, self.runs) if r.batch_size == b}
            return [by_rep.get(k) for k in sorted({r.repeat for r in self.rows if r.batch_size == b})]

        base = values(baseline)
        return {b: paired(values(b), base, metric, variant=f"batch {b}", baseline=f"batch {baseline}",
                          short=short_flags(runs(b), runs(baseline), metric) if self.runs else None)
                for b in sizes if b != baseline}

    def to_dict(self) -> dict:
        """The target and every row as plain JSON-safe values."""
        return {"target_accuracy": self.target_accuracy, "rows": [dataclasses.asdict(r) for r in self.rows]}


def sweep_batch_sizes(model_fn, data, sizes, base_config, target_accuracy: float, repeats: int = 1,
                      scale_lr: bool = True, train_fn=None, verbose: bool = True, lrs: dict | None = None,
                      max_samples: int | None = None, **train_kwargs) -> SweepResult:
    """Train a fresh ``model_fn()`` at each batch size in ``sizes`` until ``target_accuracy``.

    ``base_config``: a ``TrainConfig``; each run copies it with ``batch_size``, ``target_accuracy``
    and (with ``scale_lr``) the linearly scaled learning rate from ``base_config.batch_size``.
    ``train_fn``: defaults to ``greenlab.training.loop.train``; ``train_kwargs`` go to it (e.g. log=False).
    Runs are paired: repeat r uses seed base seed + r at every batch size (same initial weights
    and sample order). Evaluations are scheduled in samples so that every size is checked after
    the same amount of data: ``base_config.eval_every`` steps become ``eval_every_samples`` =
    eval_every x base_config's effective batch size (an ``eval_every_samples`` is kept as is).
    The target is validation accuracy.
    ``lrs``: {batch size: learning rate}, e.g. each size's rate tuned with the same budget
    (``gl.recipes.tune_lr``); it replaces the linear scaling (every size must be in it).
    ``max_samples``: cap every run at this many training samples (``max_steps`` =
    ceil(max_samples / batch), epochs raised to fit), so each size gets the same data budget
    rather than the same epochs (which would give a large batch very few updates).
    """
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes must hold at least one batch size")
    for b in sizes:
        _check_positive_int("batch size", b)
    _check_positive_int("repeats", repeats)
    validation.number("target_accuracy", target_accuracy, low=0, high=1, low_open=True)
    default_train = train_fn is None
    if train_fn is None:
        train_fn = loop.train
    if (getattr(base_config, "eval_every", None) is not None
            and getattr(base_config, "eval_every_samples", None) is None):
        base_config = dataclasses.replace(
            base_config, eval_every=None,
            eval_every_samples=base_config.eval_every * base_config.batch_size * base_config.accum_steps)
    if lrs is not None:
        missing = [b for b in sizes if b not in lrs]
        if missing:
            raise ValueError(f"lrs has no learning rate for batch size(s) {missing}")
        for b in sizes:
            validation.number(f"lrs[{b}]", lrs[b], low=0, low_open=True)
    if max_samples is not None:
        _check_positive_int("max_samples", max_samples)
    n_train = int(_xy(data)[0].shape[0]) if max_samples is not None else None

    def config_for(b, rep):
        if lrs is not None:
            lr = float(lrs[b])
        else:
            lr = linear_scaling_lr(base_config.lr, base_config.batch_size, b) if scale_lr else base_config.lr
        cap = {}
        if max_samples is not None:
            per_step = b * getattr(base_config, "accum_steps", 1)
            cap = {"max_steps": math.ceil(max_samples / per_step),
                   "epochs": max(base_config.epochs, math.ceil(max_samples / max(1, n_train)))}
        return dataclasses.replace(base_config, batch_size=b, lr=lr, target_accuracy=target_accuracy,
                                   seed=base_config.seed + rep, **cap)

    # every size warmed up the same way before any is measured, then repeats in rotating order
    warm_kwargs = dict(train_kwargs, save=False) if default_train else train_kwargs
    warm_up({b: (lambda b=b: train_fn(model_fn(), data, warmup_config(config_for(b, 0)), **warm_kwargs))
             for b in sizes})
    measured = {}
    for rep in range(repeats):
        for b in rotated(sizes, rep):
            cfg = config_for(b, rep)
            res = train_fn(model_fn(), data, cfg, **train_kwargs)
            measured[b, rep] = (cfg.lr, res)
            if verbose:
                print(f"batch {b:>5} repeat {rep}: {res.status}, {res.joules:.1f} J, {res.seconds:.1f} s")
    rows, runs = [], []
    for b in sizes:
        for rep in range(repeats):
            lr, res = measured[b, rep]
            reached = res.joules_to_target is not None
            rows.append(SweepRow(batch_size=b, repeat=rep, status=res.status, reached_target=reached,
                                 seconds=res.seconds, joules=res.joules,
                                 seconds_to_target=res.seconds_to_target, joules_to_target=res.joules_to_target,
                                 final_accuracy=res.final_accuracy, lr=lr,
                                 estimated=res.estimated))
            runs.append(res)
    return SweepResult(rows=rows, target_accuracy=float(target_accuracy), runs=runs)


def sweep_cost(results) -> dict:
    """What a sweep itself cost: total joules and seconds of every run in it.

    ``results``: a ``SweepResult``, or a list of results with ``joules`` and ``seconds``."""
    rows = results.rows if isinstance(results, SweepResult) else list(results)
    if not rows:
        raise ValueError("sweep_cost needs at least one run")
    return {"joules": float(sum(r.joules for r in rows)), "seconds": float(sum(r.seconds for r in rows)),
            "runs": len(rows), "estimated": any(bool(getattr(r, "estimated", False)) for r in rows)}


def plot_sweep(result: SweepResult, ax=None):
    """Median energy and time to target per batch size (log-2 x axis). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    energy = result.by_size()
    sizes = [b for b, j in energy.items() if j is not None]
    ax.plot(sizes, [energy[b] for b in sizes], "o-", label="energy to target (J)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("joules to target")
    missed = [b for b, j in energy.items() if j is None]
    title = f"energy to {result.target_accuracy:.0%} validation accuracy"
    if missed:
        title += f" (not reached at {missed})"
    ax.set_title(title)
    ax2 = ax.twinx()
    times = {b: _median(sorted(r.seconds_to_target for r in result.rows
                               if r.batch_size == b and r.reached_target)) for b in sizes}
    ax2.plot(sizes, [times[b] for b in sizes], "s--", color="tab:orange", label="time to target (s)")
    ax2.set_ylabel("seconds to target")
    ax.legend(loc="upper left")
    ax2.legend(loc="upper right")
    return ax


def _median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return None
    mid = n // 2
    return values[mid] if n % 2 else 0.5 * (values[mid - 1] + values[mid])
