"""Records and rows: JSON files, the reference schema's flat rows and units, small statistics."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path


def percentile(values, pct: float):
    """Linear-interpolated percentile (0-100) of ``values``; None when empty."""
    vals = sorted(values)
    if not vals:
        return None
    pos = (len(vals) - 1) * pct / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def write_json(path: Path, record: dict) -> None:
    """Write ``record`` as JSON (NaN/inf stored as null) through a temporary file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_finite(record), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _units_for(rows) -> dict:
    units = {"seconds": "s", "train_seconds": "s", "window_seconds": "s", "seconds_to_target": "s",
             "wall_seconds": "s", "joules": "J", "joules_to_target": "J", "joules_per_sample": "J",
             "joules_per_sample_min": "J", "joules_per_sample_max": "J", "train_joules_gpu": "J",
             "train_joules_all_components": "J", "watts": "W", "mean_watts": "W", "counter_joules": "J",
             "integrated_joules": "J", "memory_increase_mib": "MiB", "samples_per_second": "1/s",
             "difference_pct": "%", "difference_pct_min": "%", "difference_pct_max": "%",
             "difference_spread_pct": "%", "window_start_temperature_c": "C", "overhead_pct_median": "%", "interval_ms_median": "ms",
             "interval_ms_p90": "ms", "read_microseconds": "us", "calibrated_step_ms": "ms",
             "energy_saving_pct_vs_fp32": "%", "tflops_achieved": "TFLOP/s", "g_co2e": "g",
             "g_co2e_per_million_samples": "g", "g_co2e_per_kwh": "g/kWh", "model_size_mib": "MiB",
             "joules_per_gflop": "J/GFLOP", "gflop_forward_per_sample": "GFLOP",
             "profile_wall_s": "s", "profile_cpu_op_s": "s", "profile_device_kernel_s": "s",
             "joules_above_idle_per_sample": "J", "cpu_joules_per_sample": "J",
             "joules_per_sample_spread_pct": "%", "first_step_seconds": "s",
             "first_step_joules_gpu_only": "J", "first_step_joules_cpu": "J", "compile_seconds": "s",
             "compile_joules_gpu_only": "J", "joules_per_token": "J", "tokens_per_second": "1/s",
             "window_end_sm_clock_mhz": "MHz", "window_end_temperature_c": "C",
             "joules_above_idle": "J", "joules_to_target_above_idle": "J", "train_joules_gpu_above_idle": "J",
             "idle_watts": "W", "weight_bytes": "B", "grad_bytes": "B", "optimizer_bytes": "B",
             "saved_activation_bytes": "B", "step_peak_bytes": "B"}
    present = {k for r in rows for k in r}
    return {k: v for k, v in units.items() if k in present}


def _clean_row(row: dict) -> dict:
    """A flat row for the reference schema: scalars only (others become text)."""
    out = {}
    for key, value in row.items():
        if value is None or isinstance(value, (str, bool, int)):
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else None
        else:
            out[key] = str(value)
    return out


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _max(values):
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def _ratio(a, b):
    return a / b if (a is not None and b) else None
