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


# --- thin wrappers: the library's reference is withheld from the learner's code while a check runs --

def _fedavg_wrapper(*args, **kwargs):
    return gl.federated.fedavg(*args, **kwargs)


def _fedavg_by_hand(states, counts):  # an honest answer, in another style than the lesson's
    total = float(sum(counts))
    out = {}
    for key in states[0]:
        mean = torch.stack([s[key].double() * (n / total) for s, n in zip(states, counts)]).sum(0)
        out[key] = mean.to(states[0][key].dtype) if states[0][key].is_floating_point() else mean.round().long()
    return out


class _LoRAAroundTheLibrary(torch.nn.Module):
    def __init__(self, base, rank, alpha):
        super().__init__()
        self.inner = gl.lora.LoRALinear(base, rank, alpha)

    def forward(self, x):
        return self.inner(x)


def _captured_young():
    from greenlab.techniques.preemption import young_interval as bound_before  # bound before the check runs

    return lambda d, m: bound_before(d, m)


THIN_WRAPPERS = [
    ("fedavg_aggregate", _fedavg_wrapper, "greenlab.techniques.federated.fedavg"),
    ("fedavg_aggregate", lambda s, c: gl.federated.fedavg(s, c), "greenlab.techniques.federated.fedavg"),
    ("fedavg_aggregate", functools.partial(lambda s, c, f: f(s, c), f=gl.federated.fedavg),
     "greenlab.techniques.federated.fedavg"),
    ("lora_linear", _LoRAAroundTheLibrary, "greenlab.techniques.lm.lora.LoRALinear"),
    ("fine_grained_prune", lambda w, s: gl.compress.fine_grained_prune(w, s),
     "greenlab.techniques.compress.fine_grained_prune"),
    ("young_interval", _captured_young(), "greenlab.techniques.preemption.young_interval"),
    ("early_stopping", lambda a, p, d: gl.stopping.should_stop(a, p, d), "greenlab.techniques.stopping.should_stop"),
    ("ring_all_reduce", lambda tensors: gl.scaling.ring_all_reduce(tensors), "greenlab.impact.scaling.ring_all_reduce"),
]


@pytest.mark.parametrize("name,answer,reference", THIN_WRAPPERS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(THIN_WRAPPERS)])
def test_a_thin_wrapper_around_the_librarys_reference_gets_no_points_and_says_why(name, answer, reference):
    verdict = getattr(gl.check, name)(answer)
    assert verdict.status == "failed" and "refused" in verdict.message, verdict.text()
    assert any(f"library's own {reference} was called from your answer" in d for d in verdict.details), verdict.details


def test_an_honest_answer_in_another_style_gets_full_points_and_the_library_is_back_after():
    assert gl.check.fedavg_aggregate(_fedavg_by_hand).passed
    assert gl.check.young_interval(lambda d, m: (2.0 * d * m) ** 0.5).passed
    gl.check.fedavg_aggregate(_fedavg_wrapper)
    # restored: the library runs again from any code, with its own signature
    state = {"w": torch.ones(2)}
    assert torch.equal(gl.federated.fedavg([state, state], [1, 3])["w"], torch.ones(2))
    assert list(inspect.signature(gl.federated.fedavg).parameters) == ["states", "sample_counts"]


def test_the_reference_is_restored_when_the_learners_code_raises_something_else():
    def explodes(states, counts):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gl.check.fedavg_aggregate(explodes)
    assert gl.federated.fedavg([{"w": torch.ones(1)}], [1])["w"].item() == 1.0


def test_an_answer_that_catches_the_refusal_is_still_refused():
    def sly(states, counts):
        try:
            return gl.federated.fedavg(states, counts)
        except Exception:
            return _fedavg_by_hand(states, counts)

    verdict = gl.check.fedavg_aggregate(sly)
    assert verdict.status == "failed" and "refused" in verdict.message


def test_every_declared_reference_names_functions_that_can_be_withheld():
    declared = {name: getattr(checks, name).reference for name in checks.__all__
                if getattr(getattr(checks, name), "reference", ())}
    assert len(declared) >= 30
    for name, references in declared.items():
        for reference in references:
            assert core._functions_named(reference), f"{name}: {reference} names no function"



def test_a_wrapper_around_a_library_module_not_yet_imported_is_refused_too():
    # gl.* loads each module on first use: a learner's wrapper may be what first imports the library's
    # reference, in the middle of the check. It is withheld all the same (the check imports it first).
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, greenlab as gl\n"
            "assert 'greenlab.techniques.active' not in sys.modules\n"
            "verdict = gl.check.most_uncertain(lambda probs, k: gl.active.most_uncertain(probs, k))\n"
            "print(verdict.status, verdict.message)\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("failed") and "refused" in done.stdout, done.stdout
