"""Instant exercise checkers for the lessons (``gl.check``).

A checker looks at a learner's answer and returns a :class:`Check`: passed, failed (with exactly
what was wrong) or not attempted yet, and never raises for a wrong answer, an error in the
learner's code or a placeholder (``None``), so a notebook runs top to bottom with an exercise
skipped. ``core`` holds what every checker shares; each lesson's checkers live in a module of
their own, named after the lesson's topic, and are all reachable here by the exercise's name::

    gl.check.joules_per_gflop(joules_per_gflop)   # a green tick, a red cross or a grey "not attempted"
"""

from greenlab.checks.accumulation import accumulate_gradients  # lesson 03
from greenlab.checks.batching import scaled_lr_with_warmup  # lesson 04
from greenlab.checks.capstone import capstone_submission, one_cycle  # lesson 09
from greenlab.checks.carbon import best_start_hour, co2e_grams, schedule_jobs  # lesson 06
from greenlab.checks.compression import break_even, tensor_sparsity  # lesson 07
from greenlab.checks.core import (FAILED, NOT_ATTEMPTED, PASSED, Check, check_close, check_function,
                                  check_gradients_match, is_placeholder, number_or_none)
from greenlab.checks.data_pipeline import early_stopping, most_uncertain, prefetch_loader  # lesson 08
from greenlab.checks.language_models import lora_trainable_params, zero_bytes_per_rank  # lessons 10, 11
from greenlab.checks.measuring import energy_window, joules_per_gflop  # lesson 00
from greenlab.checks.precision import amp_step  # lesson 02
from greenlab.checks.scaling import scale_out_costs  # lesson 01
from greenlab.checks.search import pareto_indices, separable_conv_flops  # lesson 05
from greenlab.checks.statement import stakeholder_statement  # lessons 06 and 09

__all__ = [
    "Check", "PASSED", "FAILED", "NOT_ATTEMPTED", "is_placeholder", "check_close", "check_function",
    "check_gradients_match", "number_or_none",
    "joules_per_gflop", "energy_window", "scale_out_costs", "amp_step", "accumulate_gradients",
    "scaled_lr_with_warmup", "separable_conv_flops", "pareto_indices", "co2e_grams", "best_start_hour",
    "tensor_sparsity", "break_even", "most_uncertain", "capstone_submission", "zero_bytes_per_rank",
    "lora_trainable_params", "schedule_jobs", "early_stopping", "prefetch_loader", "one_cycle",
    "stakeholder_statement",
]
