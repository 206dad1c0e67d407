"""Instant exercise checkers for the lessons (``gl.check``).

A checker looks at a learner's answer and returns a :class:`Check`: passed, failed (with exactly
what was wrong) or not attempted yet, and never raises for a wrong answer, an error in the
learner's code or a placeholder (``None``), so a notebook runs top to bottom with an exercise
skipped. ``core`` holds what every checker shares; each lesson's checkers live in a module of
their own, named after the lesson's topic, and are all reachable here by the exercise's name::

    gl.check.joules_per_gflop(joules_per_gflop)   # a green tick, a red cross or a grey "not attempted"
"""

from greenlab.course.checks.accumulation import accumulate_gradients, batchnorm_fix  # lesson 02
from greenlab.course.checks.batching import (
    batch_then_lr_schedule,
    noise_scale_from_norms,
    scaled_lr_with_warmup,
)
from greenlab.course.checks.capstone import capstone_submission, one_cycle  # lesson 09
from greenlab.course.checks.carbon import best_start_hour, co2e_grams, schedule_jobs  # lesson 05
from greenlab.course.checks.cluster import easy_backfill, promote  # lesson 14
from greenlab.course.checks.compression import (
    break_even,
    channel_prune,
    distillation_loss,
    fake_quantize,
    fine_grained_prune,
    linear_quantize,
    tensor_sparsity,
)
from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, check_close, check_function, check_gradients_match, is_placeholder,
    number_or_none)
from greenlab.course.checks.data_pipeline import early_stopping, most_uncertain, prefetch_loader  # lesson 07
from greenlab.course.checks.federated import fedavg_aggregate, round_bytes  # lesson 15
from greenlab.course.checks.knowledge import quiz_answer  # every lesson's knowledge check, graded
from greenlab.course.checks.language_models import lora_trainable_params, zero_bytes_per_rank  # lessons 12, 11
from greenlab.course.checks.lm_serving import (
    int8_per_channel,
    kv_cache_bytes,
    kv_decode_step,
    lora_linear,
)  # lesson 12
from greenlab.course.checks.lm_training import (
    activation_bytes_per_layer,
    causal_attention,
    checkpoint_blocks,
    zero1_step,
)  # lessons 10 (attention, checkpointing) and 15 (activation memory, ZeRO-1)
from greenlab.course.checks.measuring import (
    counter_joules,
    energy_window,
    integrate_power,
    joules_per_gflop,
)  # lesson 00
from greenlab.course.checks.operations import daly_interval, idle_alert, young_interval  # lesson 13
from greenlab.course.checks.precision import amp_step, fp16_flush_fractions, loss_scaler  # lesson 01
from greenlab.course.checks.scaling import (  # lesson 08
    energy_per_device_hour, ring_all_reduce, scale_out_costs, watts_per_device)
from greenlab.course.checks.search import (
    grad_norm_proxy,
    pareto_indices,
    regularized_evolution,
    separable_conv_flops,
)
from greenlab.course.checks.statement import stakeholder_statement  # lessons 05 and 09

__all__ = [
    "Check", "PASSED", "FAILED", "NOT_ATTEMPTED", "is_placeholder", "check_close", "check_function",
    "check_gradients_match", "number_or_none",
    "joules_per_gflop", "energy_window", "scale_out_costs", "amp_step", "accumulate_gradients",
    "scaled_lr_with_warmup", "separable_conv_flops", "pareto_indices", "co2e_grams", "best_start_hour",
    "tensor_sparsity", "break_even", "most_uncertain", "capstone_submission", "zero_bytes_per_rank",
    "lora_trainable_params", "quiz_answer",
    "counter_joules", "integrate_power", "ring_all_reduce", "energy_per_device_hour", "watts_per_device", "loss_scaler",
    "fp16_flush_fractions", "batchnorm_fix", "noise_scale_from_norms", "batch_then_lr_schedule",
    "fine_grained_prune", "channel_prune", "linear_quantize", "distillation_loss", "fake_quantize",
    "regularized_evolution", "grad_norm_proxy",
    "causal_attention", "checkpoint_blocks", "zero1_step",
    "activation_bytes_per_layer", "lora_linear", "kv_decode_step", "int8_per_channel", "kv_cache_bytes",
    "schedule_jobs", "easy_backfill", "promote", "early_stopping", "prefetch_loader", "one_cycle",
    "stakeholder_statement",
    "fedavg_aggregate", "round_bytes", "young_interval", "daly_interval", "idle_alert",
]
