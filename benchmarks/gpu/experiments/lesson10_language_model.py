"""Lesson 10's experiment: the byte-level transformer's training throughput and energy."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.gpu.context import Context, _repeats, throughput_row
from benchmarks.gpu.records import _ratio


def exp_language_model(ctx: Context) -> None:
    """Lesson 10: a byte-level transformer's training throughput in tokens per second and
    joules per token: fp32 (PyTorch defaults), bf16 autocast, bf16 with activation checkpointing,
    and torch.compile (its first step, the compiled step and the break-even against eager)."""
    from greenlab import lm

    z = ctx.sizes
    torch = ctx.torch
    corpus = lm.load_corpus()
    seq = z.lm["max_seq_len"]
    probe = lm.TinyGPT(**z.lm).to(ctx.device)
    step_flops = lm.train_step_flops(probe, seq, batch_size=1)["total"]
    params = sum(p.numel() for p in probe.parameters())
    del probe
    configs = [("fp32 (PyTorch defaults)", "fp32", False), ("bf16 autocast", "bf16", False),
               ("bf16 + activation checkpointing", "bf16", True)]
    if ctx.device == "cuda" and not torch.cuda.is_bf16_supported():
        configs = configs[:1]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    rows = {}
    for label, precision, checkpoint in configs:
        if not ctx.enough_for(ctx.min_window_s * 1.5 + 2):
            break
        torch.manual_seed(0)
        model = lm.TinyGPT(**{**z.lm, "checkpoint": checkpoint}).to(ctx.device)
        loop = _lm_training_loop(ctx, model, corpus, precision)
        row = throughput_row(ctx, label, loop, {"precision": precision, "checkpointing": checkpoint,
                                                "batch_windows": z.lm_batch, "seq_len": seq}, repeats,
                             flops_per_sample=step_flops / seq / 3, profile=not checkpoint)
        row["tokens_per_second"] = row.get("samples_per_second")
        row["joules_per_token"] = row.get("joules_per_sample")
        rows[label] = ctx.row(row)
        del model, loop
        if ctx.device == "cuda":
            torch.cuda.empty_cache()
    eager_label, eager_precision, _ = configs[min(1, len(configs) - 1)]  # bf16 where the GPU has it
    if eager_label in rows and ctx.enough_for(ctx.min_window_s * (repeats + 1) + 20):
        rows["torch.compile"] = ctx.row(_lm_compile_row(ctx, lm, corpus, eager_precision, rows[eager_label],
                                                        repeats, step_flops / seq / 3))
    base = rows.get(configs[0][0], {})
    for row in rows.values():
        row["speedup_vs_fp32"] = _ratio(row.get("tokens_per_second"), base.get("tokens_per_second"))
    ctx._save("running")
    ctx.note(f"greenlab.lm.TinyGPT {z.lm} ({params:,} parameters) on {corpus.describe()}; {z.lm_batch} "
             f"random windows of {seq} bytes per step (a token is a byte), fused AdamW on CUDA. "
             f"{step_flops / seq / 1e6:.4g} MFLOP per token per training step (torch.utils.flop_counter, "
             "forward and backward); tflops_achieved uses it. Per configuration: warm-up, a synchronised "
             f"calibration, then {repeats} window(s) of at least {ctx.min_window_s:.2g} s. fp32 runs with "
             "PyTorch's default TF32 settings as found.")


def _lm_training_loop(ctx: Context, model, corpus, precision: str) -> SimpleNamespace:
    """``run(n)``: n AdamW steps of ``model`` on 8 fixed batches (fused AdamW on CUDA)."""
    from greenlab import lm

    torch, z = ctx.torch, ctx.sizes
    seq = z.lm["max_seq_len"]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, **({"fused": True} if ctx.device == "cuda" else {}))
    gen = torch.Generator().manual_seed(0)
    batches = [lm.batch(corpus.train, seq, z.lm_batch, generator=gen, device=ctx.device) for _ in range(8)]
    state = {"i": 0}

    def run(n):
        for _ in range(n):
            x, y = batches[state["i"] % len(batches)]
            state["i"] += 1
            lm.train_step(model, opt, x, y, precision)

    return SimpleNamespace(run=run, samples_per_step=z.lm_batch * seq)


def _lm_compile_row(ctx: Context, lm, corpus, precision: str, eager: dict, repeats: int,
                    flops_per_sample: float) -> dict:
    """``torch.compile`` on the lesson-10 model: the first compiled step (tracing and code
    generation included) in its own window, then calibrated windows of compiled steps; the compile
    cost is the first step minus a compiled step, the break-even is cost / saving per step against
    the eager row of the same precision (None where the compiled step is not cheaper)."""
    torch, z = ctx.torch, ctx.sizes
    torch.manual_seed(0)
    model = torch.compile(lm.TinyGPT(**z.lm).to(ctx.device))
    loop = _lm_training_loop(ctx, model, corpus, precision)
    run_one = loop.run
    first = ctx.window("torch.compile: first step", lambda: run_one(1))
    row = throughput_row(ctx, f"{precision} + torch.compile", loop,
                         {"precision": precision, "checkpointing": False, "compiled": True,
                          "batch_windows": z.lm_batch, "seq_len": z.lm["max_seq_len"]},
                         repeats, flops_per_sample=flops_per_sample)
    row["first_step_seconds"] = first["seconds"]
    row["first_step_joules"] = first["joules"]
    row["tokens_per_second"] = row.get("samples_per_second")
    row["joules_per_token"] = row.get("joules_per_sample")
    tokens = loop.samples_per_step
    for metric, per_token, first_value in (("seconds", lambda r: 1 / r["samples_per_second"], first["seconds"]),
                                           ("joules", lambda r: r["joules_per_sample"], first["joules"])):
        key = "samples_per_second" if metric == "seconds" else "joules_per_sample"
        if row.get(key) is None or eager.get(key) is None or first_value is None:
            row[f"compile_{metric}"] = row[f"break_even_steps_{metric}"] = None
            continue
        compiled_step, eager_step = per_token(row) * tokens, per_token(eager) * tokens
        cost = max(0.0, first_value - compiled_step)
        steps = lm.compile_break_even_steps(cost, eager_step, compiled_step)
        row[f"compile_{metric}"] = cost
        row[f"break_even_steps_{metric}"] = steps if steps != float("inf") else None
    ctx.note(f"torch.compile (default mode) of the same model, {precision}: the first compiled step is "
             "measured in its own window (tracing and kernel generation included; PyTorch's on-disk "
             "compile cache as found); compile_* = first step minus one compiled step; "
             f"break_even_steps_* against the '{eager['label']}' row; None where the compiled step is "
             "not cheaper.")
    del model, loop
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    return row
