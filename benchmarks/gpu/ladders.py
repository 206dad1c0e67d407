"""The recipes' ladders on the GPU: the rows of ``greenlab.course.recipes.one_change_at_a_time``
(naive first, one change more per row, green last), trained in paired repeats (repeat r gives
every row seed ``seed + r``, in an order rotated each repeat, as ``gl.compare`` pairs them), each
run bounded by its time share (status "stopped" when it runs out), one record row per ladder row.

    rows = run_ladder(ctx, ladder, train_one, final="final_accuracy", prefix="")

``train_one(recipe, seed, stop_event)`` trains one row once (``gl.train`` or ``gl.lm.train_lm``)
and returns its result (``seconds``, ``joules``, ``seconds_to_target``, ``joules_to_target``,
``status`` and the ``final`` metric)."""

from __future__ import annotations

import threading
import time

from benchmarks.gpu.context import Context, _device_joules
from benchmarks.gpu.records import _median

END_STATUSES = ("completed", "target-reached", "early-stopped")  # a run that ran to its own end
MARGIN_S = 1.0  # kept back from every run's share: writing the row, the next model's build
RATIO_METRICS = ("joules", "joules_to_target", "seconds", "seconds_to_target")


def run_ladder(ctx: Context, ladder: dict, train_one, final: str, prefix: str = "") -> list:
    """Train every row of ``ladder`` ({row name: Recipe}, from ``one_change_at_a_time``) in up to
    ``ctx.sizes.ladder_repeats`` paired repeats, as many as the time share holds; returns the
    record rows (one per ladder row, in ladder order), saved after every run.

    Time: the first repeat starts at the second row, so the naive row (the long one) runs last
    and gets whatever the others leave; each run may use what is left less ``ladder_floor_s`` for
    every run still to come in its repeat (their measured time once a repeat has measured it). A
    further repeat starts only when the whole ladder, at its measured times, fits in what is
    left and no run was stopped (a stopped row would give no pair)."""
    from greenlab.session.config import seed_everything

    z = ctx.sizes
    names = list(ladder)
    rows = {n: ctx.row(_new_row(prefix, n, i, len(names))) for i, n in enumerate(names)}
    runs: dict = {n: [] for n in names}  # one entry per repeat: the result, or None when not run
    took: dict = {}
    for r in range(z.ladder_repeats):
        if r and not _another_repeat_fits(ctx, names, took, runs):
            break
        shift = (r + 1) % len(names)
        order = names[shift:] + names[:shift]
        for i, name in enumerate(order):
            reserve = sum(took.get(n, z.ladder_floor_s) for n in order[i + 1:])
            share = ctx.left() - MARGIN_S - reserve
            if share < z.ladder_floor_s / 2:
                ctx.ran_out = True
                runs[name].append(None)
                continue
            recipe = ladder[name]
            seed = recipe.config.seed + r
            seed_everything(seed)
            stop = threading.Event()
            timer = threading.Timer(share, stop.set)
            t0 = time.monotonic()
            timer.start()
            try:
                result = train_one(recipe, seed, stop)
            except (FloatingPointError, RuntimeError) as exc:  # a diverged or failed run: recorded
                result = _Failed(f"failed: {type(exc).__name__}: {exc}"[:300])
            finally:
                timer.cancel()
            took[name] = time.monotonic() - t0
            runs[name].append(result)
            _summarise(ctx, rows, runs, names, final)
    _summarise(ctx, rows, runs, names, final)
    return [rows[n] for n in names]


def repeats_note(rows: list) -> str:
    """What the repeats allow: "one repeat: no verdict", "2 repeats: too few for an interval, no
    verdict", or "N paired repeats: a verdict per row"."""
    n = min((r.get("repeats") or 0) for r in rows) if rows else 0
    if n <= 1:
        return "one repeat: no verdict."
    from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL

    if n < MIN_REPEATS_FOR_INTERVAL:
        return f"{n} repeats: too few for an interval, no verdict."
    return (f"{n} paired repeats: each row's verdict_* gives its paired ratio and 95% interval against "
            "the naive row and against the row before it.")


class _Failed:
    """A run that raised: its status, no figures."""

    def __init__(self, status: str):
        self.status = status
        self.seconds = self.joules = self.seconds_to_target = self.joules_to_target = None
        self.energy = None


def _new_row(prefix: str, name: str, index: int, count: int) -> dict:
    recipe = "naive" if index == 0 else "green" if index == count - 1 else "ladder"
    return {"label": prefix + name, "ladder_row": index, "recipe": recipe, "change": name, "repeats": 0,
            "status": "not run yet"}


def _another_repeat_fits(ctx: Context, names: list, took: dict, runs: dict) -> bool:
    stopped = any(getattr(r, "status", None) == "stopped" or r is None for v in runs.values() for r in v)
    need = sum(took.get(n, ctx.sizes.ladder_floor_s) for n in names) * 1.1 + MARGIN_S * len(names)
    return not stopped and ctx.left() >= need  # fewer repeats, as _repeats gives elsewhere: not "partial"


def _figures(ctx: Context, res) -> dict:
    """One run's figures: gross device joules, joules above idle (gross-minus-idle), to target."""
    joules = _device_joules(res, ctx) if getattr(res, "energy", None) is not None else None
    to_target = res.joules_to_target if (ctx.energy_ok and res.joules_to_target is not None) else None
    return {"seconds": res.seconds, "joules": joules, "joules_above_idle": ctx.above_idle(joules, res.seconds),
            "seconds_to_target": res.seconds_to_target, "joules_to_target": to_target,
            "joules_to_target_above_idle": ctx.above_idle(to_target, res.seconds_to_target)}


def _summarise(ctx: Context, rows: dict, runs: dict, names: list, final: str) -> None:
    """Update every ladder row from its runs so far (medians), with ratios against the naive
    row, paired by repeat, and a verdict per row where the repeats allow one; then save."""
    from greenlab.experiments.stats import MIN_REPEATS_FOR_INTERVAL
    from greenlab.experiments.verdicts import paired

    figures = {n: [(_figures(ctx, r) if r is not None and r.seconds is not None else None) for r in runs[n]]
               for n in names}
    for i, name in enumerate(names):
        row, done = rows[name], [r for r in runs[name] if r is not None]
        if not done:
            row["status"] = "skipped: out of time" if ctx.ran_out else "not run yet"
            continue
        statuses = [r.status for r in done]
        row["status"] = ("ok" if all(s in END_STATUSES for s in statuses)
                         else next(s for s in statuses if s not in END_STATUSES))
        row["run_statuses"] = ",".join(statuses)
        row["repeats"] = len(done)
        mine = [f for f in figures[name] if f is not None]
        for key in ("seconds", "joules", "joules_above_idle", "seconds_to_target", "joules_to_target",
                    "joules_to_target_above_idle"):
            row[key] = _median([f[key] for f in mine])
        row["joules_per_repeat"] = ",".join("-" if f is None or f["joules"] is None else f"{f['joules']:.6g}"
                                            for f in figures[name])
        row[final] = _median([getattr(r, final, None) for r in done])
        row["reached_target"] = all(r.seconds_to_target is not None for r in done)
        row["window_ok"] = all((r.seconds or 0) >= ctx.min_window_s for r in done)
        row["energy_source"] = ctx.energy_source if ctx.energy_ok else "not measured"
        for base, tag in ((names[0], "naive"), (names[i - 1] if i else None, "previous_row")):
            if base is None or base == name:
                continue
            for metric in RATIO_METRICS:
                whole = metric in ("joules", "seconds")  # a stopped run's total is only a lower bound
                pairs = [(a[metric] if a and (not whole or _ended(runs[name][k])) else None,
                          b[metric] if b and (not whole or _ended(runs[base][k])) else None)
                         for k, (a, b) in enumerate(zip(figures[name], figures[base]))]
                p = paired([a for a, _ in pairs], [b for _, b in pairs], metric, name, base)
                if tag == "naive":
                    row[f"{metric}_over_naive"] = p.estimate
                if metric in ("joules", "joules_to_target"):
                    row[f"verdict_{metric}_vs_{tag}"] = (p.short() if p.n >= MIN_REPEATS_FOR_INTERVAL
                                                         else f"{p.n} paired repeat(s): no verdict")
    ctx._save("running")


def _ended(res) -> bool:
    return res is not None and getattr(res, "status", None) in END_STATUSES
