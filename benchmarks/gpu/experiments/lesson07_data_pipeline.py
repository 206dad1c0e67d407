"""Lesson 07's experiment: the device-resident loader against DataLoaders."""

from __future__ import annotations

import os

from benchmarks.gpu.context import Config, Context, StepLoop, _cnn_fn, _repeats, interleaved_rows
from benchmarks.gpu.records import _ratio


def exp_data_pipeline(ctx: Context) -> None:
    """Lesson 07: the device-resident loader against DataLoaders (workers, pinned memory),
    calibrated one by one, then measured in interleaved windows (A B C D A B C D)."""
    from greenlab.training.data import make_dataloader

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    w0, w1 = z.loader_workers
    configs = [("device loader", None), (f"DataLoader workers={w0}", dict(num_workers=w0)),
               (f"DataLoader workers={w0} pinned", dict(num_workers=w0, pin_memory=True)),
               (f"DataLoader workers={w1} pinned", dict(num_workers=w1, pin_memory=True))]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    runs = []
    for label, opts in configs:
        loader = make_dataloader(ds, z.loader_batch, **opts, seed=0) if opts is not None else None
        torch.manual_seed(0)
        loop = StepLoop(ctx, _cnn_fn(ctx, lesson=True)(), ds, z.loader_batch, precision, loader=loader)
        runs.append(Config(label, loop, {"batch_size": z.loader_batch, **(opts or {"loader": "device"})}))
    rows = interleaved_rows(ctx, runs, repeats)  # A B C D A B C D: drift falls on all alike
    base = rows[0]
    for row in rows:
        row["speedup_vs_device_loader"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        ctx.row(row)
    del runs
    ctx.note(f"Lesson 07's reference CNN on {ds.describe()}; {precision}; batch {z.loader_batch}. Each "
             "loader is greenlab.training.data.make_dataloader (persistent_workers off, as gl.train uses it), so "
             "worker start-up at each new pass over the data falls inside the windows, as in a lesson. "
             "Per loader: warm-up and a synchronised calibration of the step time, one after another; then "
             f"{repeats} window(s) each of at least {ctx.min_window_s:.2g} s, interleaved across the loaders "
             "(A B C D A B C D), so drift in clocks and temperature falls on all of them alike; medians with "
             f"min/max. CPU: {os.cpu_count()} logical cores. The loaders' work is on the host: "
             "cpu_joules_per_sample is the CPU's energy in the same windows (cpu_energy_source says "
             "whether it is a model estimate); joules are the GPU's alone, gross (idle included), and "
             "joules_above_idle_per_sample subtracts measurement_core's idle power over each window.")
