"""A graded check counts only the learner's own work: every ``gl.check`` refuses the library's
own implementation (the function or class itself, a partial or bound method of it, a subclass,
an instance), and the tolerance and cases of the checkers tell a right answer from a usual mistake."""

from __future__ import annotations

import functools
import inspect
import math

import pytest
import torch

import greenlab as gl
from greenlab.course import checks
from greenlab.course.checks import core

# every checker whose answer is code, with the library function or class that it compares against
DELEGATIONS = [
    ("fedavg_aggregate", lambda: gl.federated.fedavg),
    ("lora_linear", lambda: gl.lora.LoRALinear),
    ("accumulate_gradients", lambda: gl.accumulation.accumulate_gradients),
    ("batchnorm_fix", lambda: gl.accumulation.groupnorm_instead_of_batchnorm),
    ("fine_grained_prune", lambda: gl.compress.fine_grained_prune),
    ("channel_prune", lambda: gl.compress.channel_prune),
    ("ring_all_reduce", lambda: gl.scaling.ring_all_reduce),
    ("watts_per_device", lambda: gl.scaling.watts_per_device),
]


@pytest.mark.parametrize("name,library", DELEGATIONS, ids=[d[0] for d in DELEGATIONS])
def test_the_librarys_own_implementation_is_refused_with_the_reason(name, library):
    verdict = getattr(gl.check, name)(library())
    assert verdict.status == "failed"
    assert "refused" in verdict.message
    assert any(library().__qualname__ in d for d in verdict.details), verdict.details


def test_wrappers_subclasses_and_instances_of_library_code_are_refused():
    fedavg = gl.federated.fedavg
    assert core.library_answer(functools.partial(fedavg)) is not None
    assert core.library_answer(functools.wraps(fedavg)(lambda *a: fedavg(*a))) is not None

    class Mine(gl.lora.LoRALinear):
        pass

    assert "subclasses" in core.library_answer(Mine)
    assert "subclasses" in gl.check.lora_linear(Mine).details[0]
    layer = gl.lora.LoRALinear(torch.nn.Linear(4, 4), 2, 4)
    assert core.library_answer(layer) is not None  # a callable instance of a library class
    assert core.library_answer(layer.forward) is not None  # its bound method


def test_the_learners_own_code_and_plain_values_are_never_refused():
    def mine(states, counts):
        return gl.federated.fedavg(states, counts)  # a thin wrapper is the learner's function (not caught)

    class MyLayer(torch.nn.Module):
        pass

    assert core.library_answer(mine) is None
    assert core.library_answer(MyLayer) is None and core.library_answer(MyLayer()) is None
    assert core.library_answer(torch.sum) is None and core.library_answer(math.sqrt) is None
    assert core.library_answer(3.0) is None and core.library_answer("text") is None
    assert gl.check.stakeholder_statement("").status == "not attempted"  # a value answer, not refused


def test_every_public_checker_refuses_in_the_one_central_place():
    for name in checks.__all__:
        fn = getattr(checks, name)
        if not inspect.isfunction(fn) or fn.__module__ == core.__name__:
            continue
        assert hasattr(fn, "draws_cases") and hasattr(fn, "__wrapped__"), f"{name} is not decorated with @graded"


def test_the_library_passes_its_own_checker_when_the_refusal_is_bypassed():
    assert checks.fedavg_aggregate.__wrapped__(gl.federated.fedavg).passed


# --- tolerances fit the dtype -------------------------------------------------------------------

def test_a_float32_answer_passes_a_checker_that_asked_for_1e_9():
    verdict = gl.check.tensor_sparsity(lambda t: (t == 0).float().mean())
    assert verdict.passed, verdict.text()
    assert gl.check.tensor_sparsity(lambda t: float((t == 0).float().mean())).passed  # float() of a float32
    off = gl.check.tensor_sparsity(lambda t: float((t == 0).float().mean()) + 1e-4)
    assert off.status == "failed"


def test_dtype_rtol_reads_the_least_precise_float_in_nested_arguments():
    assert core.dtype_rtol((torch.zeros(2, dtype=torch.float64),)) == pytest.approx(8 * 2.0 ** -52)
    assert core.dtype_rtol(([torch.zeros(2), {"w": torch.zeros(1, dtype=torch.float16)}],)) == 8 * 2.0 ** -10
    assert core.dtype_rtol((3.0, "x", None)) == 0.0


def test_a_mismatch_that_prints_alike_at_six_digits_shows_more():
    problem = core._compare(0.8333333, 5 / 6, 1e-12, 0.0)
    assert problem is not None and "0.8333333" in problem and "0.8333333333" in problem


# --- cases that tell a usual mistake from the right answer --------------------------------------

def _prune(count):
    def prune(weight, sparsity):
        k = count(sparsity * weight.numel())
        order = torch.argsort(weight.abs().flatten())
        mask = torch.ones(weight.numel(), dtype=torch.bool)
        mask[order[:k]] = False
        return weight * mask.view_as(weight), mask.view_as(weight)

    return prune


def test_fine_grained_prune_tells_round_from_int_and_ceil():
    assert gl.check.fine_grained_prune(_prune(round)).passed
    assert gl.check.fine_grained_prune(_prune(int)).status == "failed"
    assert gl.check.fine_grained_prune(_prune(math.ceil)).status == "failed"


def test_ring_all_reduce_refuses_a_plain_sum_with_the_right_byte_count():
    def plain_sum(tensors):
        n = len(tensors)
        total = torch.stack(tensors).sum(0)
        return [total.clone() for _ in tensors], [2 * (n - 1) / n * total.numel() * 4] * n

    def python_sum(tensors):
        n = len(tensors)
        total = sum(tensors[1:], tensors[0])
        return [total.clone() for _ in tensors], [2 * (n - 1) / n * total.numel() * 4] * n

    for cheat in (plain_sum, python_sum):
        verdict = gl.check.ring_all_reduce(cheat)
        assert verdict.status == "failed"
        assert any("no ring ran" in d for d in verdict.details), verdict.details


def test_a_checker_of_two_functions_refuses_either_from_the_library():
    from greenlab.techniques.compress.quantization import dequantize

    def mine(weight, bits):
        return None

    verdict = gl.check.linear_quantize(mine, dequantize)
    assert verdict.status == "failed" and "refused" in verdict.message
