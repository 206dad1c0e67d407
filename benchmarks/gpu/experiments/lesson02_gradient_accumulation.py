"""Lesson 02's experiment: accumulated micro-batches against one true batch."""

from __future__ import annotations

from benchmarks.gpu.context import (
    Config, Context, StepLoop, _cnn_fn, _model_text, _repeats, interleaved_rows, math_mode)


def exp_gradient_accumulation(ctx: Context) -> None:
    """Lesson 02: accumulation (micro x k) against one true batch of the same size, and the
    small batch alone; time, energy and the memory each adds."""
    z = ctx.sizes
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    micro, k = z.accum
    configs = [(f"true batch {micro * k}", micro * k, 1), (f"accumulated {micro} x {k}", micro, k),
               (f"small batch {micro}", micro, 1)]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    runs = []
    for label, bs, acc in configs:
        ctx.torch.manual_seed(0)
        runs.append(Config(label, StepLoop(ctx, _cnn_fn(ctx)(), ds, bs, "fp32", accum=acc),
                           {"batch_size": bs, "accum_steps": acc, "effective_batch": bs * acc},
                           math_mode=math_mode(ctx, "fp32", convolutions=True)))
    for row in interleaved_rows(ctx, runs, repeats):  # A B C A B C: drift falls on all alike
        ctx.row(row)
    del runs
    if ctx.device == "cuda":
        ctx.torch.cuda.empty_cache()
    ctx.note(f"Reference CNN ({_model_text(_cnn_fn(ctx))}) on {ds.describe()}; fp32 with PyTorch's "
             "defaults; each micro-batch loss divided by the accumulation steps. memory_increase_mib "
             "is the peak allocated above what was resident (model, optimizer state, data) during the "
             "window: activations and gradients, which accumulation shrinks.")
