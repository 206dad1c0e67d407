"""Lesson 09's experiment: the capstone's ladder from the naive recipe to the green one, one
change per row (``greenlab.course.recipes.one_change_at_a_time``), to the same target."""

from __future__ import annotations

from benchmarks.gpu.context import Context
from benchmarks.gpu.ladders import repeats_note, run_ladder


def exp_capstone(ctx: Context) -> None:
    """Lesson 09: every row of the capstone's ladder (naive first, green last) trained with
    gl.train in paired repeats as the time share allows, each run bounded by its share."""
    import dataclasses

    from greenlab.course import recipes
    from greenlab.training.loop import train

    z = ctx.sizes
    n_train, n_test = z.capstone_data or (None, None)
    quick = bool(z.dry)
    naive = recipes.naive_recipe(device=ctx.device, n_train=n_train, n_test=n_test, quick=quick)
    green = recipes.green_recipe(device=ctx.device, n_train=n_train, n_test=n_test, quick=quick)
    ladder = recipes.one_change_at_a_time(naive, green)
    if z.capstone_target is not None:
        ladder = {n: r._replace(config=dataclasses.replace(r.config, target_accuracy=z.capstone_target))
                  for n, r in ladder.items()}
    spec = naive.data_spec
    ds = ctx.dataset(spec["name"], spec["n_train"], spec["n_test"])

    def train_one(recipe, seed, stop):
        cfg = dataclasses.replace(recipe.config, seed=seed)
        return train(recipe.model_fn(), ds, cfg, stop_event=stop, device=ctx.device, log=False, save=False,
                     sources=ctx.device_sources)

    rows = run_ladder(ctx, ladder, train_one, final="final_accuracy")
    target = next(iter(ladder.values())).config.target_accuracy
    for row in rows:
        row.update({"target_accuracy": target, "dataset_source": ds.source})
        cfg = ladder[row["change"]].config
        row.update({"precision": cfg.precision, "batch_size": cfg.batch_size, "loader": cfg.loader,
                    "stop_at_target": cfg.stop_at_target, "epochs_max": cfg.epochs})
    ctx._save("running")
    ctx.note(f"The capstone's ladder from greenlab/course/recipes.py: naive_recipe to green_recipe "
             f"({'quick mode' if quick else 'full mode'}, {ds.describe()}), one change per row "
             "(one_change_at_a_time); every row trained with gl.train at its recipe's own learning rate "
             "(no rate search here: the lesson's tuning bill is not in these figures), the rows paired "
             "by repeat (repeat r: every row seed r, the order rotated each repeat; the first repeat "
             "runs the naive row last). Each run is bounded by its time share; one cut short has status "
             "'stopped' and its joules and seconds are then lower bounds, left out of the ratios (its "
             "to-target figures stay where it reached the target first). *_over_naive: the row's paired "
             "geometric-mean ratio to the naive row (the green row's is green/naive); final_accuracy "
             "is the test split's, scored once at each run's end; the target is on the validation "
             "split. joules are gross device energy (idle included); joules_above_idle and "
             "joules_to_target_above_idle are gross-minus-idle: measurement_core's idle power times the "
             "seconds subtracted, None where that idle power is unknown. " + repeats_note(rows))
