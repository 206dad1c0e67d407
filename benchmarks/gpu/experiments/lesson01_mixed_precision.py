"""Lesson 01's experiments: fp32, bf16 and fp16 on the reference CNN and on a ResNet."""

from __future__ import annotations

from benchmarks.gpu.context import (
    Config, Context, StepLoop, _cnn_fn, _model_text, _precisions, _repeats, _resnet_fn, interleaved_rows,
    math_mode)
from benchmarks.gpu.records import _ratio


def _precision_experiment(ctx: Context, model_fn, ds, batch: int, what: str, targets: bool) -> None:
    from greenlab.training.models import flops

    precisions = _precisions(ctx)
    model_flops = flops(model_fn(), ds.input_shape, batch_size=1).forward
    repeats = _repeats(ctx, len(precisions), ctx.min_window_s * ctx.sizes.window_margin)
    configs = []
    for precision in precisions:
        ctx.torch.manual_seed(0)
        label = {"fp32": "fp32 (PyTorch defaults)", "bf16": "bf16 autocast",
                 "fp16": "fp16 autocast + GradScaler"}[precision]
        configs.append(Config(label, StepLoop(ctx, model_fn(), ds, batch, precision),
                              {"precision": precision, "batch_size": batch}, model_flops, profile=True,
                              ds=ds, math_mode=math_mode(ctx, precision, convolutions=True)))
    rows = {}
    for precision, row in zip(precisions, interleaved_rows(ctx, configs, repeats)):
        if precision == "fp16":
            row["includes"] = "GradScaler's per-step inf check (a device-to-host sync each step)"
        rows[precision] = ctx.row(row)
    del configs
    if ctx.device == "cuda":
        ctx.torch.cuda.empty_cache()
    base = rows.get("fp32", {})
    for row in rows.values():
        row["speedup_vs_fp32"] = _ratio(row.get("samples_per_second"), base.get("samples_per_second"))
        jps, jps0 = row.get("joules_per_sample"), base.get("joules_per_sample")
        row["energy_saving_pct_vs_fp32"] = (100 * (1 - jps / jps0)) if (jps and jps0) else None
    ctx._save("running")
    if targets and "bf16" in rows and rows["bf16"].get("speedup_vs_fp32") is not None:
        ctx.measured["bf16_speedup"] = rows["bf16"]["speedup_vs_fp32"]
        if rows["bf16"].get("energy_saving_pct_vs_fp32") is not None:
            ctx.measured["bf16_energy_saving_pct"] = rows["bf16"]["energy_saving_pct_vs_fp32"]
    ctx.note(f"{what} ({_model_text(model_fn)}, {model_flops / 1e9:.3g} GFLOP forward per sample) on "
             f"{ds.describe()}; batch {batch}; SGD lr 0.05 momentum 0.9; device-resident batches. "
             "Per configuration: warm-up and a synchronised calibration of the step time; then "
             f"{repeats} window(s) of at least {ctx.min_window_s:.2g} s each, interleaved across the "
             "configurations (A B C A B C), medians with min/max; window_end_* give each window's SM "
             "clock, temperature and clock-event reasons. fp32 runs with PyTorch's default TF32 "
             "settings as found; math_mode says what the products actually used. joules are gross "
             "device energy (idle included); joules_above_idle_per_sample subtracts measurement_core's "
             "idle power over each window. "
             "tflops_achieved counts 3x the forward FLOPs per sample (forward + backward). "
             "device_busy_fraction: GPU kernel time over wall time in a 3-step torch.profiler trace. "
             "Test accuracy is measured after the windows. channels_last on CUDA.")


def exp_mixed_precision(ctx: Context) -> None:
    """Lesson 01: fp32 (defaults), bf16, fp16 on the reference CNN at a compute-bound size."""
    ds = ctx.dataset("fashion-mnist", *ctx.sizes.fmnist)
    _precision_experiment(ctx, _cnn_fn(ctx), ds, ctx.sizes.cnn_batch, "Reference CNN", targets=True)


def exp_mixed_precision_resnet(ctx: Context) -> None:
    """Lesson 01: the same comparison on a ResNet-20 (CIFAR-shaped images)."""
    ds = ctx.dataset("cifar10", *ctx.sizes.cifar)
    _precision_experiment(ctx, _resnet_fn(ctx), ds, ctx.sizes.resnet_batch, "ResNet", targets=False)
