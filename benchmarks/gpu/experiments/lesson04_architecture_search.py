"""Lesson 04's experiment: candidate architectures' FLOPs against inference time and energy."""

from __future__ import annotations

from benchmarks.gpu.context import Context, inference_rows


def exp_architecture_search(ctx: Context) -> None:
    """Lesson 04: candidate architectures' FLOPs against measured inference time and energy."""
    from greenlab.training import models
    from greenlab.training.models import count_params, flops

    z = ctx.sizes
    torch = ctx.torch
    shape = (1, 28, 28)
    x = torch.randn((z.infer_batch, *shape), device=ctx.device)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    items, info = [], {}
    for family, opts in z.arch_candidates:
        kw = dict(opts)
        if family == "mlp":
            kw["input_shape"] = shape
        net = models.build(family, **kw).to(ctx.device).eval()
        fwd = flops(net, shape, batch_size=1).forward
        label = family + " " + ", ".join(f"{k}={v}" for k, v in opts.items())
        items.append((label, net, x))
        info[label] = {"family": family, "params": count_params(net), "gflop_forward_per_sample": fwd / 1e9}
    for row in inference_rows(ctx, items, precision):  # A B C A B C: drift falls on all alike
        extra = info[row["label"]]
        gflop = extra["gflop_forward_per_sample"]
        row.update({**extra, "joules_per_gflop": (row["joules_per_sample"] / gflop)
                    if row.get("joules_per_sample") and gflop else None})
        ctx.row(row)
    ctx.note(f"Inference on random 28x28 inputs, batch {z.infer_batch}, {precision} autocast, "
             "inference_mode; per candidate a warm-up and a calibration, then windows of at least the shortest "
             "window interleaved across the candidates (A B C A B C), medians with min/max. FLOPs from "
             "gl.flops (forward, per sample).")
