"""Lesson 10's experiments: the byte-level transformer's training throughput and energy
(``language_model``: eager configurations, interleaved), and ``torch.compile`` in its own share
(``language_model-compile``: the first compiled step with the CPU's energy of the same window,
the compiled step, and the break-even against the eager row of the same precision)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

from benchmarks.gpu.context import Config, Context, _repeats, interleaved_rows, math_mode, throughput_row
from benchmarks.gpu.records import _ratio


def exp_language_model(ctx: Context) -> None:
    """Lesson 10: tokens per second and joules per token for fp32 (PyTorch defaults: IEEE fp32
    matmuls), fp32 with TF32 matmuls, bf16 autocast and bf16 with activation checkpointing."""
    from greenlab.techniques import lm

    z = ctx.sizes
    torch = ctx.torch
    corpus = lm.load_corpus()
    seq = z.lm["max_seq_len"]
    step_flops, params = _model_facts(ctx, lm)
    configs = [("fp32 (PyTorch defaults)", "fp32", False, "highest"),
               ("fp32, TF32 matmuls", "fp32", False, "high"),
               ("bf16 autocast", "bf16", False, None),
               ("bf16 + activation checkpointing", "bf16", True, None)]
    if ctx.device != "cuda":  # TF32 is a CUDA mode: on the CPU the row would repeat the first
        configs = [c for c in configs if c[3] != "high"]
    if ctx.device == "cuda" and not torch.cuda.is_bf16_supported():
        configs = [c for c in configs if c[1] == "fp32"]
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    runs = []
    for label, precision, checkpoint, matmul in configs:
        torch.manual_seed(0)
        model = lm.TinyGPT(**{**z.lm, "checkpoint": checkpoint}).to(ctx.device)
        loop = _lm_training_loop(ctx, model, corpus, precision, matmul_precision=matmul)
        with _matmul_precision(torch, matmul):
            mode = math_mode(ctx, precision, convolutions=False)
        runs.append(Config(label, loop, {"precision": precision, "checkpointing": checkpoint,
                                         "batch_windows": z.lm_batch, "seq_len": seq},
                           flops_per_sample=step_flops / seq / 3, profile=not checkpoint, math_mode=mode))
    rows = {}
    for row in interleaved_rows(ctx, runs, repeats):
        row["tokens_per_second"] = row.get("samples_per_second")
        row["joules_per_token"] = row.get("joules_per_sample")
        rows[row["label"]] = ctx.row(row)
    del runs
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    base = rows.get(configs[0][0], {})
    for row in rows.values():
        row["speedup_vs_fp32"] = _ratio(row.get("tokens_per_second"), base.get("tokens_per_second"))
    ctx._save("running")
    ctx.note(f"greenlab.techniques.lm.gpt.TinyGPT {z.lm} ({params:,} parameters) on {corpus.describe()}; "
             f"{z.lm_batch} "
             f"random windows of {seq} bytes per step (a token is a byte); AdamW from gl.lm.make_optimizer "
             f"(fused on CUDA). {step_flops / seq / 1e6:.4g} MFLOP per token per training step "
             "(torch.utils.flop_counter, forward and backward); tflops_achieved uses it. Per configuration: "
             f"warm-up and a synchronised calibration; then {repeats} window(s) of at least "
             f"{ctx.min_window_s:.2g} s each, interleaved across configurations. fp32 (PyTorch defaults) "
             "uses IEEE fp32 matmuls; the TF32 row sets torch.set_float32_matmul_precision('high') around "
             "its own steps only; math_mode says what each row used. joules are gross device energy "
             "(idle included). The torch.compile row comes from the language_model-compile stage, run "
             "in its own time share after these rows.")


def exp_language_model_compile(ctx: Context) -> None:
    """Lesson 10: ``torch.compile`` of the same model in its own time share. The first compiled
    step (tracing and code generation, CPU work) is one window with the GPU's and the CPU's
    energy of that window; then calibrated windows of compiled steps; the break-even against the
    eager row of the same precision that ``language_model`` recorded (read from its part file)."""
    from greenlab.techniques import lm

    z = ctx.sizes
    torch = ctx.torch
    corpus = lm.load_corpus()
    seq = z.lm["max_seq_len"]
    step_flops, _ = _model_facts(ctx, lm)
    precision = "bf16" if (ctx.device != "cuda" or torch.cuda.is_bf16_supported()) else "fp32"
    eager_label = "bf16 autocast" if precision == "bf16" else "fp32 (PyTorch defaults)"
    eager = _eager_row(ctx, eager_label)
    repeats = _repeats(ctx, 1, ctx.min_window_s * z.window_margin)
    row = _lm_compile_row(ctx, lm, corpus, precision, eager, repeats, step_flops / seq / 3)
    ctx.row(row)


def _model_facts(ctx: Context, lm) -> tuple:
    z = ctx.sizes
    probe = lm.TinyGPT(**z.lm).to(ctx.device)
    step_flops = lm.train_step_flops(probe, z.lm["max_seq_len"], batch_size=1)["total"]
    params = sum(p.numel() for p in probe.parameters())
    del probe
    return step_flops, params


def _eager_row(ctx: Context, label: str) -> dict:
    """The eager row ``label`` of this run's language_model part file ({} when there is none)."""
    try:
        data = json.loads((Path(ctx.part).parent / "language_model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return next((r for r in data.get("rows", []) if r.get("label") == label and r.get("status") == "ok"), {})


@contextlib.contextmanager
def _matmul_precision(torch, value):
    """``torch.set_float32_matmul_precision(value)`` inside the block only (None: unchanged)."""
    if value is None:
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _lm_training_loop(ctx: Context, model, corpus, precision: str, matmul_precision=None) -> SimpleNamespace:
    """``run(n)``: n AdamW steps (``gl.lm.make_optimizer``, fused on CUDA) of ``model`` on 8 fixed
    batches; ``matmul_precision``: fp32 matmul precision around these steps only."""
    from greenlab.techniques import lm

    torch, z = ctx.torch, ctx.sizes
    seq = z.lm["max_seq_len"]
    opt = lm.make_optimizer(model, lm.LMConfig(lr=3e-4, fused=ctx.device == "cuda"))
    gen = torch.Generator().manual_seed(0)
    batches = [lm.batch(corpus.train, seq, z.lm_batch, generator=gen, device=ctx.device) for _ in range(8)]
    state = {"i": 0}

    def run(n):
        with _matmul_precision(torch, matmul_precision):
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
    the eager row of the same precision (None where the compiled step is not cheaper or there is
    no eager row)."""
    torch, z = ctx.torch, ctx.sizes
    torch.manual_seed(0)
    model = torch.compile(lm.TinyGPT(**z.lm).to(ctx.device))
    loop = _lm_training_loop(ctx, model, corpus, precision)
    first = ctx.window("torch.compile: first step", lambda: loop.run(1))
    row = throughput_row(ctx, f"{precision} + torch.compile", loop,
                         {"precision": precision, "checkpointing": False, "compiled": True,
                          "batch_windows": z.lm_batch, "seq_len": z.lm["max_seq_len"]},
                         repeats, flops_per_sample=flops_per_sample)
    row["math_mode"] = math_mode(ctx, precision, convolutions=False)
    row["first_step_seconds"] = first["seconds"]
    row["first_step_joules_gpu_only"] = first["joules"]
    # compilation runs on the host: the CPU's energy of the same window, labelled with its source
    row["first_step_joules_cpu"] = first.get("cpu_joules")
    row["first_step_cpu_energy_source"] = first.get("cpu_energy_source")
    row["tokens_per_second"] = row.get("samples_per_second")
    row["joules_per_token"] = row.get("joules_per_sample")
    row["break_even_against"] = eager.get("label") or "no eager row recorded in this run"
    tokens = loop.samples_per_step
    for metric, per_token, first_value in (("seconds", lambda r: 1 / r["samples_per_second"], first["seconds"]),
                                           ("joules_gpu_only", lambda r: r["joules_per_sample"], first["joules"])):
        key = "samples_per_second" if metric == "seconds" else "joules_per_sample"
        if row.get(key) is None or eager.get(key) is None or first_value is None:
            row[f"compile_{metric}"] = row[f"break_even_steps_{metric}"] = None
            continue
        compiled_step, eager_step = per_token(row) * tokens, per_token(eager) * tokens
        cost = max(0.0, first_value - compiled_step)
        steps = lm.compile_break_even_steps(cost, eager_step, compiled_step)
        row[f"compile_{metric}"] = cost
        row[f"break_even_steps_{metric}"] = steps if steps != float("inf") else None
    ctx.note(f"torch.compile (default mode) of the same model, {precision}, in its own time share: the "
             "first compiled step is measured in its own window (tracing and kernel generation included; "
             "PyTorch's on-disk compile cache as found); compile_* = first step minus one compiled step; "
             f"break_even_steps_* against the '{row['break_even_against']}' row of language_model; None "
             "where the compiled step is not cheaper. *_joules_gpu_only counts the GPU's energy only; "
             "compilation is CPU work, whose energy in the same window is first_step_joules_cpu "
             "(first_step_cpu_energy_source says whether it is an estimate).")
    del model, loop
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    return row


def exp_language_model_recipes(ctx: Context) -> None:
    """Lesson 10: the ladder from the naive language-model recipe to the green one
    (``greenlab.course.recipes.naive_lm_recipe`` / ``green_lm_recipe``, one change per row), each
    row trained with ``gl.lm.train_lm`` to the recipes' validation loss, in paired repeats as the
    time share allows, each run bounded by its share (in its own worker; recorded in
    ``language_model``'s record, labelled "recipe ladder: ...")."""
    import dataclasses

    from benchmarks.gpu.ladders import repeats_note, run_ladder
    from greenlab.course import recipes
    from greenlab.techniques import lm

    quick = bool(ctx.sizes.dry)
    naive = recipes.naive_lm_recipe(quick=quick)
    green = recipes.green_lm_recipe(device=ctx.device, quick=quick, fused=ctx.device == "cuda")
    ladder = recipes.one_change_at_a_time(naive, green)
    corpus = lm.load_corpus(**naive.data_spec)

    def train_one(recipe, seed, stop):
        cfg = dataclasses.replace(recipe.config, seed=seed)
        return lm.train_lm(recipe.model_fn(), corpus, cfg, device=ctx.device, sources=ctx.device_sources,
                           stop_event=stop)

    rows = run_ladder(ctx, ladder, train_one, final="final_val_loss", prefix="recipe ladder: ")
    size = naive.config
    for row in rows:
        cfg = ladder[row["change"]].config
        row.update({"target_val_loss": size.target_loss, "precision": cfg.precision, "fused_adamw": cfg.fused,
                    "lr_schedule": cfg.lr_schedule, "eval_every": cfg.eval_every, "steps_max": cfg.steps})
    ctx._save("running")
    ctx.note(f"Recipe ladder: naive_lm_recipe to green_lm_recipe from greenlab/course/recipes.py "
             f"({'quick mode' if quick else 'full mode'}: {naive.model_name}, {size.batch_size} windows of "
             f"{size.seq_len} bytes per step, {size.steps} steps at most, target validation loss "
             f"{size.target_loss} nats/byte) on {corpus.describe()}, one change per row "
             "(one_change_at_a_time), each row trained with gl.lm.train_lm at its recipe's own rate (no "
             "rate search here), paired by repeat (repeat r: seed r, the order rotated each repeat; the "
             "first repeat runs the naive row last). The green recipe as run here takes bf16 where the "
             "device runs it natively and the fused AdamW kernel on CUDA: choices, not decided by a "
             "measurement in this run (lesson 10 decides both from its own). Each run is bounded by its "
             "time share; one cut short has status 'stopped' and its joules and seconds are lower bounds, "
             "left out of the ratios. final_val_loss: each run's final model on the recipes' fixed "
             "validation batches, after its energy window. joules are gross device energy (idle included, "
             "evaluation passes inside the window); joules_above_idle and joules_to_target_above_idle are "
             "gross-minus-idle: measurement_core's idle power times the seconds subtracted, None where "
             "that idle power is unknown. *_over_naive: the row's paired ratio to the naive row (the "
             "green row's is green/naive). " + repeats_note(rows))
