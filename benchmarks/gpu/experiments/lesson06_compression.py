"""Lesson 06's experiment: dense against pruned models at inference."""

from __future__ import annotations

import copy

from benchmarks.gpu.context import Context, _cnn_fn, _model_text, inference_rows
from benchmarks.gpu.records import _ratio


def exp_compression(ctx: Context) -> None:
    """Lesson 06: dense against pruned models, inference time and energy per sample."""
    import copy

    from greenlab.techniques import compress
    from greenlab.training.models import count_params

    z = ctx.sizes
    torch = ctx.torch
    shape = (1, 28, 28)
    x = torch.randn((z.infer_batch, *shape), device=ctx.device)
    dense = _cnn_fn(ctx)().to(ctx.device).eval()
    variants = {"dense": dense}
    variants["unstructured 50%"] = compress.prune_unstructured(copy.deepcopy(dense), 0.5)
    variants["channels 50%"] = compress.prune_channels(copy.deepcopy(dense).cpu(), 0.5).to(ctx.device).eval()
    base = None
    rows = inference_rows(ctx, [(label, net, x) for label, net in variants.items()], "fp32")  # A B C A B C
    for row in rows:
        net = variants[row["label"]]
        row.update({"params": count_params(net), "sparsity": compress.sparsity(net),
                    "model_size_mib": compress.model_size_bytes(net) / 2**20})
        base = base or row
        row["speedup_vs_dense"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        ctx.row(row)
    ctx.row({"label": "int8 dynamic quantisation", "status": "not run on the GPU: torch.ao dynamic "
             "quantisation has CPU kernels only (GPU int8 goes through other tools)"})
    ctx.note(f"Reference CNN ({_model_text(_cnn_fn(ctx))}), fp32 inference (PyTorch defaults), batch "
             f"{z.infer_batch}; gl.compress.prune_unstructured (zeros kept in dense tensors) and "
             "prune_channels (a smaller dense model). Windows interleaved across the variants (A B C A B C), "
             "medians with min/max.")
