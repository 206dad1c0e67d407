"""Dynamic batch sizing: how big a batch fits, how big a batch helps, and what it costs (lessons 02
(02_gradient_accumulation), 03 (03_batch_sizing) and 10 (10_language_model)). One module per idea; every name is
also here, as ``gl.batching.<name>``.

- ``max_batch``: ``find_max_batch``, the largest batch a training step fits in, found by running real steps
  (on CUDA until a real out-of-memory error; on a CPU against an explicit memory budget, using the
  measured tensor memory of each step); ``measure_step_peak_bytes``.
- ``schedules``: batch-size schedules for ``TrainConfig.batch_schedule``: ``constant``, ``stepwise``, ``ramp``,
  ``on_plateau``; learning-rate helpers ``linear_scaling_lr``, ``warmup``, ``goyal_warmup``
  (Goyal et al., 2017) as step -> multiplier callables for ``TrainConfig.lr_schedule``;
  ``batch_growth_vs_lr_decay``: the two configurations of Smith et al. (2018) for ``gl.compare``.
- ``noise_scale``: ``gradient_noise_scale``, the "simple" noise scale B_simple of McCandlish et al. (2018),
  measured from gradient norms at two batch sizes.
- ``sweep``: ``sweep_batch_sizes`` / ``sweep_cost``: energy and time to a target accuracy per batch size, and
  what the sweep itself cost.
- ``inputs``: the checks and model helpers the others share.
"""

from greenlab.techniques.batching.max_batch import BatchProbe, MaxBatchResult, find_max_batch, measure_step_peak_bytes
from greenlab.techniques.batching.noise_scale import (
    NoiseScale, gradient_noise_scale, gradient_sq_norms, simple_noise_scale)
from greenlab.techniques.batching.schedules import (
    Constant, OnPlateau, Ramp, StepDecay, Stepwise, Warmup, batch_growth_vs_lr_decay, constant, goyal_warmup,
    grow_batch_then_decay, linear_scaling_lr, on_plateau, ramp, schedule_config, stepwise, warmup)
from greenlab.techniques.batching.sweep import SweepResult, SweepRow, plot_sweep, sweep_batch_sizes, sweep_cost
from greenlab.training.precision import PRECISIONS  # the precisions find_max_batch takes

__all__ = [
    "BatchProbe", "MaxBatchResult", "find_max_batch", "measure_step_peak_bytes", "PRECISIONS",
    "Constant", "Stepwise", "Ramp", "OnPlateau", "constant", "stepwise", "ramp", "on_plateau", "linear_scaling_lr",
    "Warmup", "warmup", "goyal_warmup", "StepDecay", "batch_growth_vs_lr_decay", "grow_batch_then_decay",
    "schedule_config",
    "NoiseScale", "simple_noise_scale", "gradient_sq_norms", "gradient_noise_scale",
    "SweepRow", "SweepResult", "sweep_batch_sizes", "sweep_cost", "plot_sweep",
]
