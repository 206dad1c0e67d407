"""Lesson 14's experiment: the idle power of one GPU, and the lesson's simulated cluster's idle
GPU-hours turned into energy with it."""

from __future__ import annotations

from benchmarks.gpu.context import Context


def exp_sharing_a_cluster(ctx: Context) -> None:
    """Lesson 14: measure one idle GPU's power (the figure the lesson multiplies its idle GPU-hours
    by), then simulate the lesson's trace on 8 GPUs under each policy with it."""
    from greenlab.energy import measure_idle
    from greenlab.techniques import cluster

    z = ctx.sizes
    idle = measure_idle(z.idle_s, sources=ctx.sources)
    watts = idle.watts_by_component.get(ctx.component) if ctx.energy_ok else None
    ctx.row({"label": "idle power", "seconds": idle.seconds, "watts": watts,
             "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    try:
        import simpy  # noqa: F401  the simulator's one dependency beyond the suite's own
    except ImportError:
        ctx.note("Policy rows not simulated: simpy is not installed here (pip install simpy).")
        return
    trace = cluster.synthetic_trace(n_jobs=400, n_gpus=8, seed=0, mean_interarrival_s=500.0)
    for name, result in cluster.compare_policies(trace, 8, idle_watts=watts).items():
        ctx.row({"label": name, "mean_wait_h": result.mean_wait_s / 3600, "utilisation": result.utilisation,
                 "idle_gpu_hours": result.idle_gpu_s / 3600,
                 "idle_kwh": None if result.idle_joules is None else result.idle_joules / 3.6e6})
    ctx.note("Idle power: this GPU's mean power over a window with no work (greenlab.energy.measure_idle, "
             "the GPU's own NVML source; 'not measured' without one). Policy rows: the lesson's synthetic "
             "400-job trace (gl.cluster.synthetic_trace, seed 0) on 8 GPUs, simulated (exact); idle_kwh = "
             "idle GPU-hours x the idle power measured here.")
