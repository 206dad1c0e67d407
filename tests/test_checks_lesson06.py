"""Lesson 06 checkers: right answers pass, typical mistakes fail with a hint, stubs are not attempted."""

import math

from greenlab.course import checks


def right_sparsity(t):
    return float((t == 0).sum()) / t.numel()


def right_break_even(joules, before, after):
    if joules == 0:
        return 0
    saving = before - after
    if saving <= 0:
        return math.inf
    return math.ceil(joules / saving - 1e-9)


def test_tensor_sparsity_passes_right_answer():
    assert checks.tensor_sparsity(right_sparsity).passed


def test_tensor_sparsity_density_gets_hint():
    result = checks.tensor_sparsity(lambda t: float((t != 0).sum()) / t.numel())
    assert result.status == checks.FAILED
    assert any("density" in d for d in result.details)


def test_tensor_sparsity_count_gets_hint():
    result = checks.tensor_sparsity(lambda t: float((t == 0).sum()))
    assert result.status == checks.FAILED
    assert any("numel" in d for d in result.details)


def test_tensor_sparsity_near_zero_is_not_zero():
    # counting |w| < 1e-6 as zero is wrong: pruning sets exact zeros
    result = checks.tensor_sparsity(lambda t: float((t.abs() < 1e-6).sum()) / t.numel())
    assert result.status == checks.FAILED


def test_tensor_sparsity_stub_not_attempted():
    assert checks.tensor_sparsity(lambda t: None).status == checks.NOT_ATTEMPTED
    assert checks.tensor_sparsity(None).status == checks.NOT_ATTEMPTED


def test_break_even_passes_right_answer():
    result = checks.break_even(right_break_even)
    assert result.passed, result.text()


def test_break_even_agrees_with_library():
    from greenlab.techniques.compress import break_even_inferences

    assert checks.break_even.__wrapped__(break_even_inferences).passed


def test_break_even_no_rounding_gets_hint():
    def unrounded(joules, before, after):
        saving = before - after
        return joules / saving if saving > 0 else math.inf

    result = checks.break_even(unrounded)
    assert result.status == checks.FAILED
    assert any("round up" in d for d in result.details)


def test_break_even_floor_gets_hint():
    def floored(joules, before, after):
        saving = before - after
        return math.floor(joules / saving) if saving > 0 else math.inf

    result = checks.break_even(floored)
    assert result.status == checks.FAILED
    assert any("not down" in d for d in result.details)


def test_break_even_no_saving_gets_hint():
    def never_inf(joules, before, after):
        return math.ceil(joules / (before - after)) if before != after else 0

    result = checks.break_even(never_inf)
    assert result.status == checks.FAILED
    assert any("math.inf" in d for d in result.details)


def test_break_even_stub_not_attempted_and_errors_reported():
    assert checks.break_even(lambda a, b, c: None).status == checks.NOT_ATTEMPTED

    def crashes(joules, before, after):
        return joules / (before - after)  # ZeroDivisionError when before == after

    result = checks.break_even(crashes)
    assert result.status == checks.FAILED
    assert any("ZeroDivisionError" in d for d in result.details)


# --- implementation exercises: one correct answer not the library's, planted mistakes ---------

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def details(result):
    return " ".join(result.details)


def prune_by_argsort(weight, sparsity):
    k = round(sparsity * weight.numel())
    mask = torch.ones(weight.numel(), dtype=torch.bool)
    mask[torch.argsort(weight.abs().flatten(), stable=True)[:k]] = False
    mask = mask.view_as(weight)
    return weight * mask, mask


def prune_by_value(weight, sparsity):  # ranks w, not |w|
    k = round(sparsity * weight.numel())
    mask = torch.ones(weight.numel(), dtype=torch.bool)
    mask[torch.argsort(weight.flatten(), stable=True)[:k]] = False
    return weight * mask.view_as(weight), mask.view_as(weight)


def prune_by_quantile(weight, sparsity):  # a threshold: ties and interpolation break exactness
    threshold = weight.abs().flatten().quantile(sparsity)
    mask = weight.abs() > threshold
    return weight * mask, mask


def prune_in_place(weight, sparsity):
    pruned, mask = prune_by_argsort(weight, sparsity)
    weight.mul_(mask)
    return weight, mask


def prune_inverted_mask(weight, sparsity):
    pruned, mask = prune_by_argsort(weight, sparsity)
    return pruned, ~mask


def test_fine_grained_prune_passes_a_correct_implementation():
    assert checks.fine_grained_prune(prune_by_argsort).passed


@pytest.mark.parametrize("wrong, hint", [
    (prune_by_value, "magnitude"),
    (prune_by_quantile, "ties"),
    (prune_in_place, "in place"),
    (prune_inverted_mask, "STAYS"),
])
def test_fine_grained_prune_mistakes_get_their_own_hint(wrong, hint):
    result = checks.fine_grained_prune(wrong)
    assert result.status == checks.FAILED
    assert hint in details(result)


def test_fine_grained_prune_stub_is_not_attempted():
    assert checks.fine_grained_prune(lambda w, s: None).status == checks.NOT_ATTEMPTED


def channel_prune_by_hand(conv, next_layer, keep, norm=1, largest=True, slice_next_inputs=True, bias=True):
    scores = conv.weight.detach().flatten(1).norm(p=norm, dim=1)
    kept = torch.topk(scores, keep, largest=largest).indices.sort().values
    new_conv = copy.deepcopy(conv)
    new_conv.weight = nn.Parameter(conv.weight.detach()[kept].clone())
    if conv.bias is not None and bias:
        new_conv.bias = nn.Parameter(conv.bias.detach()[kept].clone())
    new_conv.out_channels = keep
    new_next = copy.deepcopy(next_layer)
    if slice_next_inputs:
        new_next.weight = nn.Parameter(next_layer.weight.detach()[:, kept].clone())
        if isinstance(new_next, nn.Linear):
            new_next.in_features = keep
        else:
            new_next.in_channels = keep
    return new_conv, new_next, kept


def test_channel_prune_passes_a_correct_implementation():
    assert checks.channel_prune(channel_prune_by_hand).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"norm": 2}, "not L2"),
    ({"largest": False}, "LARGEST"),
    ({"slice_next_inputs": False}, "NEXT layer"),
    ({"bias": False}, "bias"),
])
def test_channel_prune_mistakes_get_their_own_hint(kwargs, hint):
    result = checks.channel_prune(lambda c, n, k: channel_prune_by_hand(c, n, k, **kwargs))
    assert result.status == checks.FAILED
    assert hint in details(result)


def quantize_by_hand(w, bits, per_channel, symmetric=False, clamp=True, zp_sign=1, rounding=torch.round):
    qmin, qmax = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    dims = tuple(range(1, w.dim())) if per_channel else tuple(range(w.dim()))
    low = torch.clamp(w.amin(dim=dims), max=0.0)
    high = torch.clamp(w.amax(dim=dims), min=0.0)
    if symmetric:
        scale = torch.maximum(high, -low) / qmax
        zero = torch.zeros_like(scale)
    else:
        scale = (high - low) / (qmax - qmin)
        zero = torch.clamp(qmin - torch.round(low / scale), qmin, qmax)
    shape = (-1,) + (1,) * (w.dim() - 1) if per_channel else ()
    q = rounding(w / scale.view(shape)) + zp_sign * zero.view(shape)
    if clamp:
        q = torch.clamp(q, qmin, qmax)
    return q.int(), scale, (zp_sign * zero).int()


def dequantize_by_hand(q, scale, zero):
    shape = (-1,) + (1,) * (q.dim() - 1) if scale.dim() == 1 else ()
    return scale.view(shape) * (q.float() - zero.view(shape).float())


def test_linear_quantize_passes_a_correct_implementation():
    assert checks.linear_quantize(quantize_by_hand, dequantize_by_hand).passed


@pytest.mark.parametrize("quantize, dequantize, hint", [
    (lambda w, b, pc: quantize_by_hand(w, b, pc, symmetric=True), dequantize_by_hand, "symmetric"),
    (lambda w, b, pc: quantize_by_hand(w, b, pc, zp_sign=-1), dequantize_by_hand, "sign"),
    (lambda w, b, pc: quantize_by_hand(w, b, pc, rounding=torch.trunc), dequantize_by_hand, "torch.round"),
    (lambda w, b, pc: quantize_by_hand(w, b, False), dequantize_by_hand, "per row"),
    (quantize_by_hand, lambda q, s, z: dequantize_by_hand(q, s, torch.zeros_like(z)), "dequantize"),
])
def test_linear_quantize_mistakes_get_their_own_hint(quantize, dequantize, hint):
    result = checks.linear_quantize(quantize, dequantize)
    assert result.status == checks.FAILED
    assert hint in details(result)


def test_linear_quantize_without_clamping_fails_on_the_range():
    # an integer grid one past qmax: the clamp is what keeps q in range
    def unclamped(w, bits, per_channel):
        q, scale, zero = quantize_by_hand(w, bits, per_channel)
        return q + (q == q.max()).int(), scale, zero

    result = checks.linear_quantize(unclamped, dequantize_by_hand)
    assert result.status == checks.FAILED
    assert "clamp" in details(result)


def distill_by_hand(student, teacher, targets, temperature, alpha, t_squared=True, reverse=False,
                    reduction="batchmean"):
    log_p_student = torch.log_softmax(student / temperature, dim=1)
    p_teacher = torch.softmax(teacher / temperature, dim=1)
    if reverse:
        p_student = log_p_student.exp()
        kl = (p_student * (log_p_student - torch.log_softmax(teacher / temperature, dim=1))).sum(1)
    else:
        kl = (p_teacher * (torch.log(p_teacher) - log_p_student)).sum(1)
    soft = kl.mean() if reduction == "batchmean" else kl.mean() / student.shape[1]
    factor = temperature ** 2 if t_squared else 1.0
    return alpha * factor * soft + (1 - alpha) * F.cross_entropy(student, targets)


def test_distillation_loss_passes_a_correct_implementation():
    assert checks.distillation_loss(distill_by_hand).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"t_squared": False}, "T^2"),
    ({"reverse": True}, "wrong way"),
    ({"reduction": "mean"}, "batchmean"),
])
def test_distillation_loss_mistakes_get_their_own_hint(kwargs, hint):
    result = checks.distillation_loss(lambda *a: distill_by_hand(*a, **kwargs))
    assert result.status == checks.FAILED
    assert hint in details(result)


def test_distillation_loss_without_gradient_fails():
    result = checks.distillation_loss(lambda *a: torch.tensor(distill_by_hand(*a).item()))
    assert result.status == checks.FAILED
    assert "gradient" in details(result)


def fake_quant_by_hand(w, bits, straight_through=True, detach_all=False, integers=False, scaled=False):
    q, scale, zero = quantize_by_hand(w.detach(), bits, False)
    fake = dequantize_by_hand(q, scale, zero)
    if integers:
        return w + (q.float() - w).detach()
    if detach_all:
        return fake
    if scaled:
        return (w / scale) + (fake - w / scale).detach()
    if straight_through:
        return w + (fake - w).detach()
    qmin, qmax = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    return scale * (torch.clamp(torch.round(w / scale) + zero, qmin, qmax) - zero)  # round: zero gradient


def test_fake_quantize_passes_a_correct_implementation():
    assert checks.fake_quantize(fake_quant_by_hand).passed


@pytest.mark.parametrize("kwargs, hint", [
    ({"straight_through": False}, "gradient is zero"),
    ({"detach_all": True}, "no gradient"),
    ({"integers": True}, "integers"),
    ({"scaled": True}, "not 1"),
])
def test_fake_quantize_mistakes_get_their_own_hint(kwargs, hint):
    result = checks.fake_quantize(lambda w, b: fake_quant_by_hand(w, b, **kwargs))
    assert result.status == checks.FAILED
    assert hint in details(result)
