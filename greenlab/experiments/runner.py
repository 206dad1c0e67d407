"""``compare``: train each variant in paired repeats (same seed within a repeat, rotated order,
warm-up rounds discarded), keeping what finished when it is stopped or interrupted."""

from __future__ import annotations

import dataclasses
import os

from greenlab.base import limits, progress, validation
from greenlab.base.units import plain_number
from greenlab.experiments.arms import rotated, warm_rounds, warm_up, warmup_config
from greenlab.experiments.comparison import Comparison
from greenlab.session.config import seed_everything
from greenlab.training import loop
from greenlab.training.loop import Interrupted, TrainConfig, remember_interrupted

# run statuses that mean "cut short by the user": such a run is kept but left out of every mean
PARTIAL_STATUSES = ("interrupted",)


def compare(variants: dict, model_fn, data, repeats: int = 3, warmup: int = 1, callbacks=(),
            log: bool = False, device=None, sources=None, idle=None, save: bool = True,
            results_path=None, stop_event=None, seed: int | None = None,
            show_progress: bool = True) -> "Comparison":
    """Train each variant ``repeats`` times, paired, and summarise.

    variants: {name: TrainConfig}; the first is the baseline for ratios and verdicts. The
      variants must share one seed (leave ``seed`` at its default in each).
    model_fn: returns a fresh model; it is called after seeding, so within a repeat every
      variant starts from the same weights. A dict {name: model_fn} gives each variant its
      own model (a ladder row that changes the architecture); every variant needs one.
    data: a Dataset, or a dict {name: Dataset} giving each variant its own (a row that changes
      the data itself: a subset, more samples); every variant needs one.
    seed: repeat r runs every variant with seed ``seed + r`` (default: the variants' seed), so
      within a repeat all variants see the same initial weights and sample order, and repeats
      differ from each other.
    warmup: rounds of every variant run first and discarded (not saved), to warm caches,
      clocks and allocators; with 0, every variant still runs a short warm-up
      (``greenlab.experiments.arms.warmup_config``: a few steps), so no arm is measured cold.
      Repeat r runs the variants in an order rotated by r, so no variant always goes first.
    stop_event: a threading.Event; setting it stops the whole comparison. Runs finished before
      are kept; the run cut short is kept in ``partial`` and left out of every mean and verdict.
    Ctrl-C does the same, then raises ``greenlab.training.loop.Interrupted``: one line with the time
      and energy spent, the partial Comparison in ``gl.last_interrupted()``.
    show_progress: a line per run (which variant and repeat, then its time and energy).
    """
    if not isinstance(variants, dict) or not variants:
        raise ValueError("variants must be a non-empty dict {name: TrainConfig}")
    for name, cfg in variants.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"variant names must be non-empty strings, got {name!r}")
        if not isinstance(cfg, TrainConfig):
            raise ValueError(f"variant {name!r} must be a TrainConfig, got {type(cfg).__name__}")
    datasets = data if isinstance(data, dict) else {name: data for name in variants}
    if set(datasets) != set(variants):
        raise ValueError(f"data must be a Dataset or a dict with one for every variant; got {sorted(datasets)} "
                         f"for variants {sorted(variants)}")
    model_fns = model_fn if isinstance(model_fn, dict) else {name: model_fn for name in variants}
    for name in variants:  # a model passed as its own factory failed inside its forward
        if callable(model_fns.get(name)):
            validation.factory("model_fn", model_fns[name])
    missing = [name for name in variants if not callable(model_fns.get(name))]
    if missing:
        raise ValueError("model_fn must be a callable that returns a fresh torch.nn.Module, or a dict "
                         f"with one for every variant (missing or not callable: {', '.join(missing)})")
    repeats = limits.steps("repeats", repeats, what="rounds of training runs")
    warmup = limits.steps("warmup", warmup, low=0, what="rounds of training runs")
    seeds = {cfg.seed for cfg in variants.values()}
    if seed is None:
        if len(seeds) > 1:
            raise ValueError(f"the variants differ in seed ({sorted(seeds)}); a paired comparison gives "
                             "every variant the same seed in each repeat: leave TrainConfig.seed alone "
                             "and pass compare(..., seed=N) to choose it")
        seed = seeds.pop()
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")

    validation.flag("show_progress", show_progress)
    validation.flag("save", save)  # a truthy NaN or text would save the runs, as asked by no one
    validation.flag("log", log)
    if results_path is not None and (not isinstance(results_path, (str, os.PathLike))
                                     or not os.fspath(results_path).strip()):
        raise validation.ArgumentTypeError(f"results_path must be a file's path or None, got {results_path!r}")
    names = list(variants)
    configs = {n: (c if c.label else dataclasses.replace(c, label=n)) for n, c in variants.items()}

    def one(name, repeat_seed, keep, short=False):
        cfg = dataclasses.replace(configs[name], seed=repeat_seed)
        if short:
            cfg = warmup_config(cfg)
        seed_everything(repeat_seed)
        model = model_fns[name]()
        # a short warm-up leaves the callbacks alone: they may count or keep state
        return loop.train(model, datasets[name], cfg, callbacks=() if short else callbacks, device=device, log=log,
                          sources=sources, idle=idle, save=save and keep, results_path=results_path,
                          stop_event=stop_event)

    def cut_short(result) -> bool:
        return result.status in PARTIAL_STATUSES or (stop_event is not None and stop_event.is_set())

    repeat_runs = []  # one {name: RunResult} per repeat (finished runs only)
    order, partial, interrupted, ctrl_c = [], [], False, False
    where = "before the first run"
    steps = progress.Steps("greenlab.compare", (warm_rounds(max(warmup, 1)) + repeats) * len(names), unit="run",
                           show=show_progress)

    def warm(name):
        nonlocal where
        where = f"the warm-up run of {name!r}"
        steps.start(f"warm-up {name} (discarded)")
        try:
            with steps.ticking():
                result = _train_kept(lambda *a: one(*a, short=warmup == 0), name, seed, False)
        except _CutShort:
            raise KeyboardInterrupt from None
        if cut_short(result):
            raise KeyboardInterrupt
        steps.done(_run_note(result))

    try:
        warm_up({name: (lambda name=name: warm(name)) for name in names}, rounds=max(warmup, 1))
        for r in range(repeats):
            repeat_runs.append({})
            for name in rotated(names, r):
                where = f"{name!r} repeat {r + 1} of {repeats}"
                steps.start(f"{name} repeat {r + 1}/{repeats}")
                try:
                    with steps.ticking():
                        result = _train_kept(one, name, seed + r, True)
                except _CutShort as cut:
                    partial.append((name, r, cut.result))
                    raise KeyboardInterrupt from None
                if cut_short(result):
                    partial.append((name, r, result))
                    raise KeyboardInterrupt
                order.append(name)
                repeat_runs[r][name] = result
                steps.done(_run_note(result))
    except KeyboardInterrupt:
        interrupted = True
        ctrl_c = not (stop_event is not None and stop_event.is_set())
    finally:
        steps.close()
    cmp = Comparison(names, repeat_runs, order, partial=partial, interrupted=interrupted,
                     requested_repeats=repeats)
    if ctrl_c:
        raise _interrupted(cmp, where) from None
    return cmp


class _CutShort(Exception):
    """A run of the comparison was interrupted; ``result`` is its partial RunResult."""

    def __init__(self, result):
        super().__init__("interrupted")
        self.result = result


def _train_kept(one, name, seed, keep):
    """One run; an ``Interrupted`` from gl.train becomes ``_CutShort`` carrying its partial run."""
    try:
        return one(name, seed, keep)
    except Interrupted as exc:
        raise _CutShort(exc.result) from None


def _run_note(result) -> str:
    est = " (estimate)" if result.estimated else ""
    return f"{plain_number(result.seconds)} s, {plain_number(result.joules, 4)} J{est}"


def _interrupted(cmp, where):
    """The ``Interrupted`` (one line) for a comparison stopped by Ctrl-C during ``where``."""
    every = [r for rs in cmp.runs.values() for r in rs] + [p[2] for p in cmp.partial]
    seconds = sum(r.seconds for r in every)
    joules = sum(r.joules for r in every)
    est = " (estimate)" if cmp.estimated else ""
    finished = sum(len(rs) for rs in cmp.runs.values())
    line = (f"greenlab.compare: interrupted during {where}, after {finished} finished run(s), "
            f"{plain_number(seconds)} s and {plain_number(joules, 4)} J{est} in all; the partial comparison (finished "
            "runs only in its means) is in gl.last_interrupted(); a variable this cell assigns "
            "keeps its previous value")
    return remember_interrupted(line, cmp)
