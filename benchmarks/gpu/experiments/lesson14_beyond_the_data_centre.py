"""Lesson 14's experiment: the lesson's CNN served from a data-centre GPU, joules per image."""

from __future__ import annotations

from benchmarks.gpu.context import Context, _inference_row

LESSON_CNN = {"depth": 2, "width": 16}  # the lesson's model in full mode (gl.budget's full width)


def exp_beyond_the_data_centre(ctx: Context) -> None:
    """Lesson 14: the data centre's side of edge-versus-remote inference: the lesson's fp32 CNN
    on the GPU, batched requests first (the figure the lesson reads), then one request at a time."""
    from greenlab.training import models

    torch = ctx.torch
    net = models.build("cnn", in_channels=1, **LESSON_CNN).to(ctx.device).eval()
    for batch in (ctx.sizes.infer_batch, 1):
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 1):
            break
        x = torch.randn((batch, 1, 28, 28), device=ctx.device)
        row = _inference_row(ctx, f"lesson CNN fp32, batch {batch}", net, x, "fp32")
        row["batch_size"] = batch
        ctx.row(row)
    ctx.note(f"The lesson's CNN ({LESSON_CNN}), fp32 inference (PyTorch defaults) on the GPU: joules per "
             "image from NVML over one window per row (GPU only: the host, network and facility are not "
             "counted). The lesson adds the network's share from a cited kWh/GB figure.")
