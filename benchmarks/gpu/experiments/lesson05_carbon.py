"""Lesson 05's experiment: one measured training window turned into CO2e."""

from __future__ import annotations

from benchmarks.gpu.context import Context, StepLoop, _cnn_fn


def exp_carbon(ctx: Context) -> None:
    """Lesson 05: one measured training window turned into CO2e for several regions and PUEs."""
    from greenlab.impact import carbon

    z = ctx.sizes
    torch = ctx.torch
    ds = ctx.dataset("fashion-mnist", *z.fmnist)
    precision = "bf16" if ctx.device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    loop = StepLoop(ctx, _cnn_fn(ctx)(), ds, z.cnn_batch, precision)
    steps, per_step = ctx.calibrate(loop.run)
    ctx.warm_first(loop.run, per_step)
    w = ctx.window("carbon", lambda: loop.run(steps))
    joules = w["joules"]
    ctx.row({"label": "training window", "precision": precision, "steps": steps,
             "window_seconds": w["seconds"], "window_ok": w["window_ok"], "joules": joules,
             "window_start_temperature_c": w.get("start_temperature_c"),
             "window_end_temperature_c": w.get("end_temperature_c"),
             **ctx.per_sample(w, steps * loop.samples_per_step),
             "energy_source": ctx.energy_source if ctx.energy_ok else "not measured"})
    samples = steps * loop.samples_per_step
    for region in ("NOR", "FRA", "GBR", "USA", "DEU", "IND", "ZAF"):
        try:
            r = carbon.intensity(region)
        except (KeyError, ValueError):
            continue
        for pue in sorted(ref.pue for ref in carbon.PUE_REFERENCES):
            ctx.row({"label": f"{region} PUE {pue:g}", "region": region, "pue": pue,
                     "g_co2e_per_kwh": r.g_per_kwh, "intensity_year": r.year,
                     "g_co2e": carbon.co2e_g(joules, region=region, pue=pue) if joules is not None else None,
                     "g_co2e_per_million_samples": (carbon.co2e_g(joules, region=region, pue=pue) * 1e6
                                                    / samples)
                     if joules is not None else None})
    ctx.note("CO2e = measured GPU energy x PUE x the region's grid intensity from data/carbon_intensity.csv "
             "(gl.carbon, cited there); only the energy is measured. PUEs: "
             + "; ".join(f"{ref.pue:g} {ref.name} ({ref.year})" for ref in carbon.PUE_REFERENCES) + ".")
