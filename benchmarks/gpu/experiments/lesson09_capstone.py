"""Lesson 09's experiment: the capstone's naive and green recipes to the same target."""

from __future__ import annotations

import threading

from benchmarks.gpu.context import Context, _cnn_fn, _device_joules
from benchmarks.gpu.records import _ratio


def exp_capstone(ctx: Context) -> None:
    """Lesson 09: the capstone's naive and green recipes (greenlab/course/recipes.py), to the same target."""
    from dataclasses import replace

    from greenlab.course import recipes
    from greenlab.training.loop import train

    z = ctx.sizes
    torch = ctx.torch
    plan = []
    for recipe in (recipes.naive_recipe, recipes.green_recipe):
        model_fn, cfg, spec = recipe(device=ctx.device)
        if z.capstone_scale != 1.0:
            spec = {**spec, "n_train": max(64, int(spec["n_train"] * z.capstone_scale)),
                    "n_test": max(64, int(spec["n_test"] * z.capstone_scale))}
            cfg = replace(cfg, max_steps=z.max_steps, **_eval_every_steps(cfg, 2))
            model_fn = _cnn_fn(ctx, lesson=True)
        if z.capstone_target is not None:
            cfg = replace(cfg, target_accuracy=z.capstone_target)
        plan.append((model_fn, cfg, spec))
    rows = []
    for i, (model_fn, cfg, spec) in enumerate(plan):
        share = ctx.left() / (len(plan) - i) - 1
        if share < 3:
            ctx.ran_out = True
            break
        ds = ctx.dataset(spec["name"], spec["n_train"], spec["n_test"])
        stop = threading.Event()
        timer = threading.Timer(share, stop.set)
        timer.start()
        torch.manual_seed(cfg.seed)
        try:
            res = train(model_fn(), ds, cfg, stop_event=stop, device=ctx.device, log=False, save=False,
                        sources=ctx.device_sources)
        finally:
            timer.cancel()
        rows.append(ctx.row({
            "label": cfg.label, "status": res.status, "precision": cfg.precision, "batch_size": cfg.batch_size,
            "loader": cfg.loader, "epochs_max": cfg.epochs, "target_accuracy": cfg.target_accuracy,
            "stop_at_target": cfg.stop_at_target, "seconds": res.seconds,
            "window_ok": res.seconds >= ctx.min_window_s, "joules": _device_joules(res, ctx),
            "joules_above_idle": ctx.above_idle(_device_joules(res, ctx), res.seconds),
            "final_accuracy": res.final_accuracy, "reached_target": res.seconds_to_target is not None,
            "seconds_to_target": res.seconds_to_target,
            "joules_to_target": res.joules_to_target if ctx.energy_ok else None,
            "joules_to_target_above_idle": ctx.above_idle(res.joules_to_target if ctx.energy_ok else None,
                                                          res.seconds_to_target),
            "idle_watts": ctx.idle_w,
            "to_target_window_ok": (res.seconds_to_target or 0) >= ctx.min_window_s
            if res.seconds_to_target is not None else None,
            "dataset_source": ds.source, "time_share_s": share,
            "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"}))
    if len(rows) == 2:
        for key in ("joules_to_target", "seconds_to_target", "joules"):
            rows[1][f"{key}_ratio_green_over_naive"] = _ratio(rows[1].get(key), rows[0].get(key))
        ctx._save("running")
    ctx.note("Recipes from greenlab/course/recipes.py (naive_recipe, green_recipe) trained with gl.train: the "
             "naive one runs its fixed epochs and records when it passed the target; the green one "
             "stops there. A run stopped by its time share has status 'stopped'. One repeat each. "
             "to_target_window_ok says whether the time to target was at least the shortest window. joules are "
             "gross device energy (idle included); joules_above_idle and joules_to_target_above_idle are "
             "gross-minus-idle: measurement_core's idle power (idle_watts) times the seconds subtracted; "
             "None where that idle power is unknown.")


def _eval_every_steps(cfg, steps: int) -> dict:
    """TrainConfig changes for an evaluation every ``steps`` optimizer steps (clearing a
    samples-based schedule where the config has one)."""
    from dataclasses import fields

    names = {f.name for f in fields(cfg)}
    change = {"eval_every": steps}
    if "eval_every_samples" in names:
        change["eval_every_samples"] = None
    return change
