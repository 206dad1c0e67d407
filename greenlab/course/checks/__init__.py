"""Instant exercise checkers for the lessons (``gl.check``).

A checker looks at a learner's answer and returns a :class:`Check`: passed, failed (with exactly
what was wrong) or not attempted yet, and never raises for a wrong answer, an error in the
learner's code or a placeholder (``None``), so a notebook runs top to bottom with an exercise
skipped. ``core`` holds what every checker shares; each lesson's checkers live in a module of
their own, named after the lesson's topic, and are all reachable here by the exercise's name,
imported on first use (:data:`_MODULES`), so a grader that loads this package afresh for one
checker loads that checker's module only::

    gl.check.joules_per_gflop(joules_per_gflop)   # a green tick, a red cross or a grey "not attempted"
"""

from __future__ import annotations

import importlib

# module (under greenlab.course.checks) -> the names it gives this package
_MODULES: dict[str, str] = {
    "accumulation": "accumulate_gradients batchnorm_fix",  # lesson 02
    "batching": "batch_then_lr_schedule noise_scale_from_norms scaled_lr_with_warmup",  # lesson 03
    "capstone": "capstone_submission one_cycle",  # lesson 09
    "carbon": "best_start_hour co2e_grams schedule_jobs",  # lesson 05
    "cluster": "easy_backfill promote",  # lesson 14
    "compression": ("break_even channel_prune distillation_loss fake_quantize fine_grained_prune "  # lesson 06
                    "linear_quantize tensor_sparsity"),
    "core": ("FAILED NOT_ATTEMPTED PASSED Check check_close check_function "  # what every checker shares
             "check_gradients_match is_placeholder number_or_none"),
    "data_pipeline": "early_stopping most_uncertain prefetch_loader",  # lesson 07
    "federated": "fedavg_aggregate round_bytes",  # lesson 15
    "knowledge": "quiz_answer",  # every lesson's knowledge check, graded
    "language_models": "lora_trainable_params zero_bytes_per_rank",  # lessons 12, 11
    "lifecycle": "crossover_tokens lifecycle_bill",  # lesson 16
    "lm_serving": "int8_per_channel kv_cache_bytes kv_decode_step lora_linear",  # lesson 12
    "lm_training": "activation_bytes_per_layer causal_attention checkpoint_blocks zero1_step",  # lessons 10 and 11
    "measuring": "counter_joules energy_window integrate_power joules_per_gflop",  # lesson 00
    "operations": "daly_interval idle_alert young_interval",  # lesson 13
    "precision": "amp_step fp16_flush_fractions loss_scaler",  # lesson 01
    "scaling": "energy_per_device_hour ring_all_reduce scale_out_costs watts_per_device",  # lesson 08
    "search": "grad_norm_proxy pareto_indices regularized_evolution separable_conv_flops",  # lesson 04
    "statement": "stakeholder_statement",  # the stakeholder statements
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names.split()}

__all__ = list(_WHERE)


def __getattr__(name: str):
    """``gl.check.NAME``, imported from its module on first use and then kept here."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
