"""Lesson 12's experiment: joules per generated token."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from benchmarks.gpu.context import Config, Context, _repeats, interleaved_rows


def exp_language_model_serving(ctx: Context) -> None:
    """Lesson 12: joules per generated token for greedy generation with and without a KV cache,
    at batch 1 and at a larger batch, and with int8 weights (torchao; a row marked not measured
    where torchao is not installed) (a lesson-sized model, untrained: generation cost does not
    depend on what the weights say)."""
    from greenlab.techniques import lm
    from greenlab.techniques.lm import serving as lm_serve
    from greenlab.base import optional

    z = ctx.sizes
    torch = ctx.torch
    seq = z.lm["max_seq_len"]
    prompt_len = max(1, seq // 4)
    new_tokens = seq - prompt_len
    torch.manual_seed(0)
    model = lm.TinyGPT(**z.lm).to(ctx.device).eval()
    int8_label = f"int8 weights, KV cache, batch {z.lm_batch}"
    int8_missing = optional.missing("torchao")
    int8 = None
    if not int8_missing:
        int8 = lm_serve.quantize_weights_int8(copy.deepcopy(model).cpu()).to(ctx.device).eval()
    configs = [("KV cache, batch 1", model, True, 1), ("no KV cache, batch 1", model, False, 1),
               (f"KV cache, batch {z.lm_batch}", model, True, z.lm_batch)]
    if int8 is None:
        ctx.row({"label": int8_label, "status": f"not measured: {int8_missing}"})
    else:
        configs.append((int8_label, int8, True, z.lm_batch))
    repeats = _repeats(ctx, len(configs), ctx.min_window_s * z.window_margin)
    runs = []
    for label, net, cache, batch in configs:
        prompts = torch.randint(0, 256, (batch, prompt_len), generator=torch.Generator().manual_seed(0))

        def run(n, net=net, prompts=prompts, cache=cache):
            for _ in range(n):
                lm_serve.generate(net, prompts, new_tokens, kv_cache=cache)

        loop = SimpleNamespace(run=run, samples_per_step=batch * new_tokens)
        runs.append(Config(label, loop, {"kv_cache": cache, "batch": batch, "prompt_len": prompt_len,
                                         "new_tokens": new_tokens, "weights": "int8" if net is int8 else "fp32"}))
    for row in interleaved_rows(ctx, runs, repeats):  # A B C A B C: drift falls on all alike
        row["tokens_per_second"] = row.get("samples_per_second")
        row["joules_per_generated_token"] = row.get("joules_per_sample")
        ctx.row(row)
    del runs
    ctx._save("running")
    ctx.note(f"greenlab.techniques.lm.gpt.TinyGPT {z.lm}, greedy generation of {new_tokens} bytes after a "
             f"{prompt_len}-byte "
             "prompt (greenlab.techniques.lm.serving.generate); a token is a byte. Per configuration: warm-up and a "
             f"synchronised calibration, one after another; then {repeats} window(s) each of at least "
             f"{ctx.min_window_s:.2g} s, interleaved across the configurations (A B C A B C), so drift in "
             "clocks and temperature falls on all of them alike; medians with min/max. joules are gross "
             "device energy (idle included); joules_above_idle_per_sample subtracts measurement_core's idle "
             "power over each window.")
