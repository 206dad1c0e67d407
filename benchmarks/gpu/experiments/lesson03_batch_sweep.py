"""Lesson 03's experiment: time and energy to a target accuracy across batch sizes."""

from __future__ import annotations

import math
import threading

from benchmarks.gpu.context import Context, StepLoop, _cnn_fn, _device_joules, _model_text


def exp_batch_sweep(ctx: Context) -> None:
    """Lesson 03: time and energy to a target accuracy across batch sizes (gl.train)."""
    from greenlab.training.loop import TrainConfig, train

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    base_lr, base_bs = 0.05, 128
    for bs in z.sweep_batches:
        if not ctx.enough_for(ctx.min_window_s * 1.6 + 3):
            break
        lr = base_lr * math.sqrt(bs / base_bs)
        probe = StepLoop(ctx, _cnn_fn(ctx, lesson=True)(), ds, bs, precision, lr=lr)
        steps, per_step = ctx.calibrate(probe.run)
        del probe
        cfg = TrainConfig(precision=precision, batch_size=bs, lr=lr, epochs=10**5, max_steps=steps,
                          eval_every=max(1, steps // z.sweep_evals), target_accuracy=z.sweep_target,
                          stop_at_target=False, seed=0, channels_last=ctx.device == "cuda",
                          label=f"batch {bs}")
        torch.manual_seed(0)
        stop = threading.Event()
        timer = threading.Timer(max(1.0, ctx.left() - 1), stop.set)
        timer.start()
        try:
            res = train(_cnn_fn(ctx, lesson=True)(), ds, cfg, stop_event=stop, device=ctx.device, log=False,
                        save=False, sources=ctx.device_sources)
        finally:
            timer.cancel()
        dev_j = _device_joules(res, ctx)
        ctx.row({"label": f"batch {bs}", "batch_size": bs, "lr": lr, "precision": precision,
                 "status": res.status, "steps": res.steps, "samples": res.samples,
                 "seconds": res.seconds, "window_ok": res.seconds >= ctx.min_window_s,
                 "train_seconds": res.train_seconds, "samples_per_second": res.samples_per_second,
                 "joules": dev_j, "joules_above_idle": ctx.above_idle(dev_j, res.seconds),
                 "final_accuracy": res.final_accuracy,
                 "reached_target": res.seconds_to_target is not None,
                 "seconds_to_target": res.seconds_to_target,
                 "joules_to_target": res.joules_to_target if ctx.energy_ok else None,
                 "joules_to_target_above_idle": ctx.above_idle(res.joules_to_target if ctx.energy_ok else None,
                                                               res.seconds_to_target),
                 "idle_watts": ctx.idle_w,
                 "evaluations": len(res.history),
                 "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    ctx.note(f"Lesson 03's reference CNN ({_model_text(_cnn_fn(ctx, lesson=True))}) with gl.train on "
             f"{ds.describe()}; {precision}; lr = {base_lr} x sqrt(batch / {base_bs}); target accuracy "
             f"{z.sweep_target:g} on the validation split, checked {z.sweep_evals} times per run. Each "
             f"run's length is calibrated to at least {ctx.min_window_s:.2g} s and does not stop at the "
             "target, so its energy window is long enough; time and energy to target are read at the "
             "first evaluation that reached it (evaluations run inside the window, as in the lesson; "
             "joules_to_target then has the counter's resolution, one update period). joules are gross "
             "device energy (idle included); joules_above_idle and joules_to_target_above_idle are "
             "gross-minus-idle: measurement_core's idle power (idle_watts) times the seconds subtracted; "
             "None where that idle power is unknown.")
