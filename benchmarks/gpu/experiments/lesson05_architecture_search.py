"""Lesson 05's experiment: candidate architectures' FLOPs against inference time and energy."""

from __future__ import annotations

from benchmarks.gpu.context import Context, _inference_row


def exp_architecture_search(ctx: Context) -> None:
    """Lesson 05: candidate architectures' FLOPs against measured inference time and energy."""
    from greenlab.training import models
    from greenlab.training.models import count_params, flops

    z = ctx.sizes
    torch = ctx.torch
    shape = (1, 28, 28)
    x = torch.randn((z.infer_batch, *shape), device=ctx.device)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    for family, opts in z.arch_candidates:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 1):
            break
        kw = dict(opts)
        if family == "mlp":
            kw["input_shape"] = shape
        net = models.build(family, **kw).to(ctx.device).eval()
        fwd = flops(net, shape, batch_size=1).forward
        label = family + " " + ", ".join(f"{k}={v}" for k, v in opts.items())
        row = _inference_row(ctx, label, net, x, precision)
        row.update({"family": family, "params": count_params(net), "gflop_forward_per_sample": fwd / 1e9,
                    "joules_per_gflop": (row["joules_per_sample"] / (fwd / 1e9))
                    if row.get("joules_per_sample") and fwd else None})
        ctx.row(row)
    ctx.note(f"Inference on random 28x28 inputs, batch {z.infer_batch}, {precision} autocast, "
             "inference_mode; one window per candidate of at least the shortest window after a "
             "warm-up and a calibration. FLOPs from gl.flops (forward, per sample).")
