"""Lesson 15's experiment: the lesson's CNN served from a data-centre GPU, joules per image."""

from __future__ import annotations

from benchmarks.gpu.context import Context, inference_rows

LESSON_CNN = {"depth": 2, "width": 16}  # the lesson's model in full mode (gl.budget's full width)


def exp_beyond_the_data_centre(ctx: Context) -> None:
    """Lesson 15: the data centre's side of edge-versus-remote inference: the lesson's fp32 CNN
    on the GPU, batched requests first (the figure the lesson reads), then one request at a time."""
    from greenlab.training import models

    torch = ctx.torch
    net = models.build("cnn", in_channels=1, **LESSON_CNN).to(ctx.device).eval()
    batches = (ctx.sizes.infer_batch, 1)
    items = [(f"lesson CNN fp32, batch {batch}", net, torch.randn((batch, 1, 28, 28), device=ctx.device))
             for batch in batches]
    for batch, row in zip(batches, inference_rows(ctx, items, "fp32")):  # A B A B: drift falls on both
        row["batch_size"] = batch
        ctx.row(row)
    ctx.note(f"The lesson's CNN ({LESSON_CNN}), fp32 inference (PyTorch defaults) on the GPU: joules per "
             "image from NVML over windows interleaved between the two rows (A B A B), medians (GPU only: "
             "the host, network and facility are not counted). The lesson adds the network's share from a "
             "cited kWh/GB figure.")
