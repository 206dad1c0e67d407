"""Lesson 08's experiment: a real DistributedDataParallel run through torchrun."""

from __future__ import annotations

import math

from benchmarks.gpu.context import Context, StepLoop


def exp_ddp_scaling(ctx: Context) -> None:
    """Lesson 08: a real DistributedDataParallel run via torchrun, one worker per GPU."""
    from greenlab.techniques import ddp
    from greenlab.training import models
    from greenlab.course import recipes

    z = ctx.sizes
    torch = ctx.torch
    gpus = torch.cuda.device_count() if ctx.device == "cuda" else 1
    counts = [1] + ([2] if gpus >= 2 else [])
    n_train, n_test = z.fmnist
    model = {"name": "cnn", **recipes.REFERENCE_CNN, **({"width": 8} if ctx.dry_run else {})}
    data = ctx.dataset("fashion-mnist", n_train, n_test)
    # the training window must last the shortest window: steps from a calibrated step time of the
    # same model and per-worker batch in this process (DDP's all-reduce adds to it, never takes away)
    probe = StepLoop(ctx, models.build(**model), data, z.ddp_per_worker_batch, "fp32", lr=0.05)
    _, per_step = ctx.calibrate(probe.run)
    del probe
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    steps = max(z.min_steps, min(z.max_steps, math.ceil(ctx.min_window_s * z.window_margin * 1.2 / per_step)))
    for n in counts:
        if not ctx.enough_for(15 if not ctx.dry_run else 1):
            break
        epochs = max(z.ddp_epochs, math.ceil(steps * z.ddp_per_worker_batch * n / n_train) + 1)
        res = ddp.run_ddp(n, data=data, model=model, per_worker_batch=z.ddp_per_worker_batch,
                          epochs=epochs, max_steps=steps, device=ctx.device,
                          timeout_s=max(10.0, ctx.left() - 2), label=f"{n} worker(s)")
        energy = res.train_energy or {}
        comps = energy.get("components") or {}
        gpu_j = comps.get("gpu", {}).get("joules") if isinstance(comps.get("gpu"), dict) else None
        ctx.row({"label": f"{n} worker(s)", "workers": n, "backend": res.backend, "device": res.device,
                 "global_batch": res.global_batch, "steps": res.steps, "samples": res.samples,
                 "calibrated_step_ms": per_step * 1000, "steps_planned": steps,
                 "train_seconds": res.train_seconds,
                 # every worker's window must be long enough: a sum of windows is short when any part is
                 "window_ok": res.train_seconds >= ctx.min_window_s and not res.train_energy_short,
                 "train_energy_short": res.train_energy_short,
                 "samples_per_second": res.samples_per_second, "wall_seconds": res.wall_seconds,
                 "train_joules_gpu": gpu_j if ctx.energy_ok else None,
                 # gross-minus-idle; the idle power is one GPU's, so only for one worker
                 "train_joules_gpu_above_idle": ctx.above_idle(gpu_j if ctx.energy_ok else None,
                                                               res.train_seconds) if n == 1 else None,
                 "idle_watts": ctx.idle_w,
                 "train_joules_all_components": res.train_joules,
                 "final_accuracy": res.final_accuracy, "energy_complete": res.energy_complete})
    if gpus < 2:
        ctx.note("This machine has one GPU: the one-worker DDP run is recorded (its overhead is "
                 "DDP's wrapper and the launch); scaling to more GPUs was not measured here.")
    ctx.note(f"greenlab.techniques.ddp.run_ddp via torchrun (NCCL on CUDA, gloo on the CPU); reference CNN, "
             f"{n_train} training images, batch {z.ddp_per_worker_batch} per worker; the step count comes "
             "from a calibrated single-process step time (calibrated_step_ms) so the training window "
             "lasts at least the shortest window (window_ok says whether it did, and is false where any worker's "
             "own energy window was shorter than its sources read reliably: train_energy_short). "
             "train_joules_all_components also counts the CPU (a model estimate unless RAPL "
             "is readable); train_joules_gpu is the GPU's NVML figure, gross (idle included); "
             "train_joules_gpu_above_idle is gross-minus-idle: measurement_core's idle power (idle_watts) "
             "times train_seconds subtracted (one worker only, the idle power being one GPU's; None where "
             "it is unknown).")
