"""Lesson 11's experiment: what one GPU holds for a training step of a language model, piece by
piece, counted from the tensors, and how the activations grow with the batch."""

from __future__ import annotations

from benchmarks.gpu.context import Context


def exp_fitting_in_memory(ctx: Context) -> None:
    """Lesson 11: the suite's TinyGPT (``sizes.lm``) trained one fp32 AdamW step on the device at
    several batches, plain, with bf16 autocast, and with activation checkpointing: weights,
    gradients and optimizer state counted from their tensors, what autograd saves for the backward
    pass (``gl.memory.saved_for_backward``) and the peak of live tensor storage the step created
    (``gl.batching.measure_step_peak_bytes``). Bytes only: no energy window."""
    import time

    from greenlab.techniques.batching.max_batch import measure_step_peak_bytes
    from greenlab.techniques import lm
    from greenlab.techniques.lm.sharding_run import held_bytes
    from greenlab.training.memory import saved_for_backward
    from greenlab.training.optimizers import state_bytes

    z = ctx.sizes
    torch = ctx.torch
    corpus = lm.load_corpus()
    seq = z.lm["max_seq_len"]
    batches = sorted({max(1, z.lm_batch // 4), z.lm_batch})
    configs = [(f"fp32, batch {b}", b, None, False) for b in batches]
    configs += [(f"bf16 autocast, batch {batches[-1]}", batches[-1], torch.bfloat16, False),
                (f"fp32 + activation checkpointing, batch {batches[-1]}", batches[-1], None, True)]
    if ctx.device == "cuda" and not torch.cuda.is_bf16_supported():
        configs = [c for c in configs if c[2] is None]
    params = None
    for label, batch, dtype, checkpoint in configs:
        if not ctx.enough_for(2.0):
            break
        t0 = time.perf_counter()
        torch.manual_seed(0)
        model = lm.TinyGPT(**{**z.lm, "checkpoint": checkpoint}).to(ctx.device)
        optimizer = lm.make_optimizer(model, lm.LMConfig(seq_len=seq, batch_size=batch, lr=1e-4))
        g = torch.Generator().manual_seed(0)
        x, y = lm.batch(corpus.train, seq, batch, g)
        x, y = x.to(ctx.device), y.to(ctx.device)

        def step():
            with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
                loss = lm.lm_loss(model, x, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)  # the gradients stay allocated, as in training
            return float(loss.detach())

        loss, peak = measure_step_peak_bytes(step)
        params = sum(p.numel() for p in model.parameters())
        saved = saved_for_backward(model, x, dtype).activation_bytes
        ctx.row({"label": label, "batch_windows": batch, "seq_len": seq, "checkpointing": checkpoint,
                 "precision": "bf16 autocast" if dtype is not None else "fp32",
                 "params": params,
                 "weight_bytes": held_bytes(model.parameters()),
                 "grad_bytes": held_bytes(p.grad for p in model.parameters()),
                 "optimizer_bytes": state_bytes(optimizer), "saved_activation_bytes": saved,
                 "step_peak_bytes": peak, "first_loss": loss, "seconds": time.perf_counter() - t0,
                 "energy_source": "not measured (bytes only)"})
        del model, optimizer
        if ctx.device == "cuda":
            torch.cuda.empty_cache()
    ctx.note(f"greenlab.techniques.lm.gpt.TinyGPT {z.lm} ({params or 0:,} parameters) on the lesson's corpus, "
             f"windows of {seq} bytes; one AdamW step (gl.lm.make_optimizer) per row on a fresh model. Weights, "
             "gradients and optimizer state are counted from their tensors after the step; saved_activation_bytes is "
             "what autograd keeps for the backward pass of one forward (gl.memory.saved_for_backward); step_peak_bytes "
             "is the peak of live tensor storage the step created (gl.batching.measure_step_peak_bytes), the "
             "resident weights not included. One device: the lesson's DDP-against-FSDP run needs two.")
