"""Lesson 06 (compression): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, check_function, drawn_inputs, graded, is_placeholder, number_or_none)
from greenlab.techniques import compress


@graded
def tensor_sparsity(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(tensor) -> fraction (0..1) of entries that are exactly zero``."""
    import torch

    cases = [
        (torch.tensor([0.0, 1.0, 0.0, 2.0]), 0.5),
        (torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0]]), 5 / 6),
        (torch.tensor([1.0, -1.0, 0.5]), 0.0),
        (torch.zeros(2, 2, 3), 1.0),
        (torch.tensor([[1e-8, 0.0], [-0.0, 4.0]]), 0.5),
    ]
    for shape, zeros in drawn_inputs(seed, "tensor_sparsity", _draw_sparse):
        t = torch.arange(1, math.prod(shape) + 1, dtype=torch.float32)
        t[torch.tensor(zeros, dtype=torch.long)] = 0.0
        cases.append((t.reshape(shape), len(zeros) / math.prod(shape)))

    def hint(args, expected, got):
        (t,) = args
        value = number_or_none(got)
        if value is None:
            return None
        if math.isclose(value, 1.0 - expected, abs_tol=1e-9):
            return "that is the share of non-zero entries (density); sparsity is the share of zeros."
        if math.isclose(value, expected * t.numel(), abs_tol=1e-9) and t.numel() > 1:
            return "that is the count of zeros; divide by the number of entries (t.numel())."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="tensor_sparsity", hint=hint)


@graded
def break_even(fn: Any) -> Check:
    """Check a learner's ``fn(compression_joules, joules_before, joules_after) -> inferences``:
    the smallest whole number n with n x (before - after) >= compression_joules; ``math.inf``
    when the compressed model saves nothing per inference; 0 when compressing cost nothing."""
    # Where the cost is a whole number of savings, the savings are exact in binary: with 0.3 - 0.1 =
    # 0.19999999999999998, a loop that counts up until n x saving >= cost (or -(-cost // saving))
    # stops at 6, not 5, and a right answer failed; int(cost / saving) + 1 still gives one too many.
    cases = [
        ((100.0, 0.5, 0.25), 400),
        ((10.0, 0.3, 0.0), 34),
        ((1.0, 0.625, 0.125), 2),
        ((50.0, 0.2, 0.2), math.inf),
        ((50.0, 0.2, 0.4), math.inf),
        ((0.0, 0.2, 0.1), 0),
    ]

    def hint(args, expected, got):
        joules, before, after = args
        value = number_or_none(got)
        if value is None:
            return None
        saving = before - after
        if saving > 0 and math.isfinite(value):
            exact = joules / saving
            if math.isclose(value, exact, rel_tol=1e-9) and exact != expected:
                return "a count of inferences is a whole number: round up (math.ceil)."
            if math.isclose(value, math.floor(exact), rel_tol=1e-9):
                return "round up, not down: after floor(n) inferences the cost is not yet paid back."
        if before > 0 and math.isclose(value, joules / before, rel_tol=1e-9):
            return "divide by the saving per inference (before - after), not by the energy before."
        if saving <= 0 and joules > 0:
            return "when the compressed model saves nothing per inference it never pays back: return math.inf."
        return None

    # exact match (counts are whole numbers); rtol=0 also keeps a finite answer from matching math.inf
    return check_function(fn, cases, rtol=0.0, atol=0.0, name="break_even", hint=hint)


# --- implementation exercises: the learner writes the technique ------------------------------

def _run_cases(label: str, fn: Any, cases: list, judge) -> Check:
    """Call ``fn(*args)`` on each case's inputs (copies) and let ``judge(args, got)`` return None
    (right) or a sentence naming the mistake; placeholders count as not attempted."""
    import copy

    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    failures, placeholders = [], 0
    for args in cases:
        try:
            got = fn(*copy.deepcopy(args))
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"case {len(failures) + 1}: raised {type(exc).__name__}: {exc}")
            continue
        if is_placeholder(got):
            placeholders += 1
            failures.append("returned None")
            continue
        try:
            problem = judge(args, got)
        except Exception as exc:  # an answer of an odd shape is a wrong answer
            problem = f"could not read the answer ({type(exc).__name__}: {exc})"
        if problem:
            failures.append(problem)
    if placeholders == len(cases):
        return Check(label, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of {len(cases)} test inputs wrong.", failures)
    return Check(label, PASSED, f"all {len(cases)} test inputs give the expected result.")


@graded(reference=("greenlab.techniques.compress:fine_grained_prune",))
def fine_grained_prune(fn: Any) -> Check:
    """Check a learner's ``fn(weight, sparsity) -> (pruned, mask)``: exactly
    ``round(sparsity * numel)`` entries zeroed, those of smallest |w| (ties may go either way),
    ``pruned == weight * mask``, the input left untouched, and the mask keeps the pattern when
    reapplied after an optimizer step."""
    import torch

    w5 = torch.tensor([[0.9, -0.1, 0.4, -0.8, 0.2], [-0.3, 0.7, -0.05, 0.6, -0.5],
                       [0.15, -0.95, 0.35, 0.01, -0.65], [0.45, 0.25, -0.75, 0.55, -0.02],
                       [-0.85, 0.3, 0.12, -0.4, 1.0]])
    ties = torch.tensor([[0.5, -0.5, 0.5, 2.0], [-0.5, 1.0, 0.5, -3.0]])
    # 0.75 x 25 = 18.75 and 0.65 x 25 = 16.25: int() (18), ceil (17) and round (19, 16) part ways there
    cases = [(w5, 0.6), (w5, 0.2), (ties, 0.5), (torch.tensor([[-2.0, 1.0, -0.5, 3.0]]), 0.5),
             (w5, 0.0), (w5, 0.75), (w5, 0.65)]

    def judge(args, got):
        weight, sparsity = args
        pruned, mask = got
        pruned, mask = torch.as_tensor(pruned), torch.as_tensor(mask)
        if tuple(mask.shape) != tuple(weight.shape) or tuple(pruned.shape) != tuple(weight.shape):
            return "pruned and mask must have the weight's shape. Hint: prune the tensor, do not flatten the answer."
        keep = mask.bool()
        k = round(sparsity * weight.numel())
        zeroed = int((~keep).sum())
        if not torch.equal(pruned, weight * keep):
            if torch.equal(pruned, weight * ~keep):
                return "pruned keeps the smallest weights. Hint: the mask is True (1) where a weight STAYS."
            return "pruned is not weight * mask. Hint: multiply the weight by the mask."
        if zeroed != k:
            return (f"sparsity {sparsity} of {weight.numel()} entries zeroes exactly {k}, yours zeroes {zeroed}. "
                    "Hint: with a threshold (>, >= or a quantile), ties and interpolation zero too many or too "
                    "few; pick exactly k entries, e.g. with torch.topk or argsort of |w|.")
        if k and int(keep.sum()):
            if float(weight[~keep].abs().max()) > float(weight[keep].abs().min()):
                if float(weight[~keep].max()) <= float(weight[keep].min()):
                    return "you pruned the most negative weights. Hint: rank by magnitude, |w| (torch.abs)."
                return "a pruned weight is larger in magnitude than a kept one. Hint: prune the k smallest |w|."
        step = torch.full_like(weight, 1000.0)  # an optimizer step that moves every weight
        if not torch.equal(((pruned + step) * mask) == 0, ~keep):
            return "the mask does not restore the zeros after an optimizer step. Hint: return a 0/1 or bool mask."
        return None

    def guarded(weight, sparsity):
        original = weight.clone()
        got = fn(weight, sparsity)
        if not is_placeholder(got) and not torch.equal(weight, original):
            raise ValueError("your function changed the weight passed in (in place). Hint: work on a "
                             "copy (weight * mask, or weight.clone()), the caller keeps its tensor")
        return got

    guarded.__name__ = "fine_grained_prune"
    verdict = _not_a_function(fn, "fine_grained_prune")
    return verdict or _run_cases("fine_grained_prune", guarded, cases, judge)


@graded(reference=("greenlab.techniques.compress:channel_prune",))
def channel_prune(fn: Any) -> Check:
    """Check a learner's ``fn(conv, next_layer, keep) -> (new_conv, new_next, kept)``: the
    ``keep`` filters of largest L1 norm are kept (sorted indices), with their biases; the next
    layer reads only those channels; on them both layers give the original outputs."""
    import torch
    import torch.nn as nn

    def layers(in_ch=2, mid=4, out=3, bias=True, linear=False):
        torch.manual_seed(0)
        conv = nn.Conv2d(in_ch, mid, 3, padding=1, bias=bias)
        with torch.no_grad():
            # L1 ranks the filters 1 > 3 > 0 > 2, L2 ranks them 0 > 3 > 1 > 2 (one large entry vs many)
            conv.weight.copy_(torch.zeros_like(conv.weight))
            conv.weight[0].view(-1)[0] = 2.0
            conv.weight[1].fill_(0.2)  # L1 = 0.2 * 18 = 3.6, L2 = 0.85
            conv.weight[2].view(-1)[:2] = torch.tensor([0.3, -0.3])
            conv.weight[3].view(-1)[:6] = torch.tensor([0.5, -0.5, 0.5, -0.5, 0.5, 0.5])  # L1 3, L2 1.22
        nxt = nn.Linear(mid, out) if linear else nn.Conv2d(mid, out, 3, padding=1)
        return conv, nxt

    cases = [(*layers(), 2), (*layers(bias=False), 3), (*layers(linear=True), 2), (*layers(), 1)]
    expected_kept = {1: [1], 2: [1, 3], 3: [0, 1, 3]}
    x = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(1))

    def judge(args, got):
        conv, nxt, keep = args
        new_conv, new_next, kept = got
        kept = sorted(int(i) for i in torch.as_tensor(kept).flatten().tolist())
        want = expected_kept[keep]
        if kept != want:
            l2 = torch.argsort(conv.weight.flatten(1).norm(dim=1), descending=True)[:keep].sort().values.tolist()
            if kept == l2:
                return f"kept {kept}, expected {want}. Hint: rank filters by the L1 norm (sum of |w|), not L2."
            smallest = torch.argsort(conv.weight.abs().flatten(1).sum(1))[:keep].sort().values.tolist()
            if kept == smallest:
                return f"kept {kept}, expected {want}. Hint: keep the filters with the LARGEST L1 norm."
            return (f"kept {kept}, expected {want}. Hint: one norm per output filter: "
                    "conv.weight.abs().sum(dim=(1, 2, 3)).")
        if not isinstance(new_conv, nn.Conv2d) or new_conv.weight.shape[0] != keep:
            return f"new_conv must be an nn.Conv2d with {keep} output channels."
        with torch.no_grad():
            out = conv(x)
            mine = new_conv(x)
            if mine.shape != out[:, want].shape or not torch.allclose(mine, out[:, want], atol=1e-6):
                if conv.bias is not None and new_conv.bias is not None and new_conv.bias.shape[0] != keep:
                    return "new_conv's bias must be sliced like its filters (bias[kept])."
                return ("new_conv's output differs from conv's on the kept channels. "
                        "Hint: slice weight[kept] (and bias[kept]).")
            inputs = new_next.in_features if isinstance(new_next, nn.Linear) else new_next.weight.shape[1]
            if inputs != keep:
                return (f"the next layer reads {inputs} channels, expected {keep}. Hint: slice the NEXT layer's "
                        "input dimension, weight[:, kept]; its outputs stay.")
            masked = out.clone()
            masked[:, [i for i in range(out.shape[1]) if i not in want]] = 0
            if isinstance(nxt, nn.Linear):
                ref, yours = nxt(masked.mean(dim=(2, 3))), new_next(mine.mean(dim=(2, 3)))
            else:
                ref, yours = nxt(masked), new_next(mine)
            if ref.shape != yours.shape or not torch.allclose(ref, yours, atol=1e-5):
                return ("the next layer's output differs from the original's with the pruned channels at zero. "
                        "Hint: keep its bias and its output channels; slice weight[:, kept] in the same order.")
        return None

    return _run_cases("channel_prune", fn, cases, judge)


@graded(reference=(
    "greenlab.techniques.compress:linear_quantize",
    "greenlab.techniques.compress:dequantize",
))
def linear_quantize(fn: Any, dequantize_fn: Any = None) -> Check:
    """Check a learner's ``fn(w, bits, per_channel) -> (q, scale, zero_point)`` (signed integers,
    asymmetric, range [min(w,0), max(w,0)]) against ``gl.compress.linear_quantize`` (torch's
    observers and ``quantize_per_tensor``/``per_channel``); then, with ``dequantize_fn(q, scale,
    zero_point)``, that the round trip is within scale/2 of the weight."""
    import torch

    w = torch.tensor([[0.9, -0.1, 0.4, -0.8, 0.2], [-0.3, 0.7, -0.05, 0.6, -0.5],
                      [0.15, -0.95, 0.35, 0.01, -0.65], [2.45, 0.25, -0.75, 0.55, -0.02]])
    cases = [(w, 8, False), (w, 4, False), (w, 8, True), (w, 3, True),
             (torch.tensor([[0.2, 0.5, 1.0], [0.1, 0.3, 0.25]]), 4, False)]

    def judge(args, got):
        weight, bits, per_channel = args
        q, scale, zp = got
        rq, rs, rz = compress.linear_quantize(weight, bits, per_channel)
        q, scale, zp = (torch.as_tensor(v) for v in (q, scale, zp))
        qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        where = f"bits={bits}, per_channel={per_channel}"
        if scale.numel() != rs.numel():
            return (f"{where}: {scale.numel()} scale(s), expected {rs.numel()}. Hint: per channel means one scale "
                    "per row (output channel, dim 0): reduce over the other dimensions.")
        if not torch.allclose(scale.float().flatten(), rs.flatten(), rtol=1e-4):
            sym = weight.abs().amax(dim=tuple(range(1, weight.dim())) if per_channel else None).flatten() / qmax
            if torch.allclose(scale.float().flatten(), sym, rtol=1e-4):
                return (f"{where}: that is the symmetric scale max|w|/qmax. Hint: this quantiser is asymmetric: "
                        "scale = (max(w,0) - min(w,0)) / (qmax - qmin).")
            return f"{where}: scale {scale.flatten().tolist()} expected {rs.flatten().tolist()}."
        if not torch.equal(zp.flatten().round().int(), rz.flatten()):
            if torch.equal(-zp.flatten().round().int(), rz.flatten()):
                return f"{where}: the zero point has the wrong sign. Hint: zero_point = qmin - round(min / scale)."
            return f"{where}: zero_point {zp.flatten().tolist()} expected {rz.flatten().tolist()}."
        if q.shape != rq.shape:
            return f"{where}: q has shape {tuple(q.shape)}, expected {tuple(rq.shape)}."
        if float(q.min()) < qmin or float(q.max()) > qmax:
            return f"{where}: q leaves [{qmin}, {qmax}]. Hint: clamp after adding the zero point."
        shape = (-1,) + (1,) * (weight.dim() - 1) if per_channel else ()
        exact = weight / rs.view(shape)
        on_boundary = ((exact - exact.floor()) - 0.5).abs() < 1e-3  # float rounding may go either way there
        differ = (q.round().int() != rq) & ~(on_boundary & ((q.round().int() - rq).abs() == 1))
        if bool(differ.any()):
            return (f"{where}: {int(differ.sum())} integers differ from torch's. Hint: "
                    "round(w / scale) + zero_point with torch.round, not int() or floor.")
        if dequantize_fn is not None:
            back = torch.as_tensor(dequantize_fn(rq.clone(), rs.clone(), rz.clone())).float()
            ref_back = compress.dequantize(rq, rs, rz)
            if back.shape != ref_back.shape or not torch.allclose(back, ref_back, atol=1e-6):
                return f"{where}: dequantize is off. Hint: scale * (q - zero_point), per row when per channel."
            step = rs.view(-1, *([1] * (weight.dim() - 1))) if per_channel else rs
            if not bool(((back - weight).abs() <= step / 2 + 1e-6).all()):
                return f"{where}: the round trip is more than scale/2 away from the weight."
        return None

    verdict = _not_a_function(fn, "linear_quantize")
    if verdict is None and dequantize_fn is not None:
        verdict = _not_a_function(dequantize_fn, "dequantize")
        if verdict is not None:
            verdict = Check("linear_quantize", verdict.status, f"dequantize: {verdict.message}")
    return verdict or _run_cases("linear_quantize", fn, cases, judge)


@graded(reference=("greenlab.techniques.compress:distillation_loss",))
def distillation_loss(fn: Any) -> Check:
    """Check a learner's ``fn(student_logits, teacher_logits, targets, temperature, alpha)``
    against ``gl.compress.distillation_loss`` (Hinton et al., 2015), value and gradient."""
    import torch
    import torch.nn.functional as F

    s = torch.tensor([[2.0, 0.5, -1.0], [0.1, 1.5, 0.3], [-0.5, 0.2, 2.2]])
    t = torch.tensor([[3.0, 1.0, -2.0], [0.0, 2.5, 1.0], [0.5, -1.0, 1.5]])
    y = torch.tensor([0, 1, 2])
    cases = [(s, t, y, 4.0, 0.5), (s, t, y, 2.0, 0.9), (s, t, y, 1.0, 0.3), (s, t, y, 3.0, 1.0)]

    def judge(args, got):
        student, teacher, targets, temp, alpha = args
        want = float(compress.distillation_loss(student, teacher, targets, temp, alpha))
        value = float(got)
        if abs(value - want) <= 1e-5 * max(1.0, abs(want)):
            leaf = student.clone().requires_grad_(True)
            loss = fn(leaf, teacher, targets, temp, alpha)
            if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
                return "the loss carries no gradient to the student. Hint: compute it with torch ops, no .item()."
            return None
        hard = float(F.cross_entropy(student, targets))
        soft = (want - (1 - alpha) * hard) / (alpha * temp ** 2) if alpha > 0 else None
        if soft is not None and abs(value - (alpha * soft + (1 - alpha) * hard)) < 1e-5 and temp != 1:
            return f"T={temp}: expected {want:.5g}, got {value:.5g}. Hint: multiply the soft term by T^2."
        kl_rev = float(F.kl_div(F.log_softmax(teacher / temp, 1), F.log_softmax(student / temp, 1),
                                reduction="batchmean", log_target=True))
        if abs(value - (alpha * temp ** 2 * kl_rev + (1 - alpha) * hard)) < 1e-5:
            return ("the KL divergence runs the wrong way. Hint: KL(teacher || student): "
                    "F.kl_div(log_softmax(student/T), log_softmax(teacher/T), log_target=True).")
        if soft is not None and abs(value - (alpha * temp ** 2 * soft / student.shape[1] + (1 - alpha) * hard)) < 1e-5:
            return ("the soft term is averaged over classes too. "
                    "Hint: reduction='batchmean' (sum over classes, mean over the batch).")
        return (f"T={temp}, alpha={alpha}: expected {want:.5g}, got {value:.5g}. "
                "Hint: divide both logits by T before the softmax.")

    return _run_cases("distillation_loss", fn, cases, judge)


@graded(reference=("greenlab.techniques.compress:fake_quantize",))
def fake_quantize(fn: Any) -> Check:
    """Check a learner's ``fn(weight, bits) -> tensor`` for quantisation-aware training: the
    forward value is the weight rounded onto the per-tensor integer grid and back (as
    ``torch.fake_quantize_per_tensor_affine`` with ``gl.compress.linear_quantize``'s scale and
    zero point) and the gradient passes straight through (d out / d weight = 1)."""
    import torch

    w = torch.tensor([[0.9, -0.1, 0.4, -0.8, 0.2], [-0.3, 0.7, -0.05, 0.6, -0.5],
                      [0.15, -0.95, 0.35, 0.01, -0.65]])
    cases = [(w, 8), (w, 4), (w, 3), (torch.tensor([0.2, 0.5, 1.0, 0.1]), 4)]

    def judge(args, got):
        weight, bits = args
        want = compress.fake_quantize(weight, bits).detach()
        q, scale, zero = compress.linear_quantize(weight, bits)
        value = torch.as_tensor(got)
        if value.shape != weight.shape:
            return f"bits={bits}: the output has shape {tuple(value.shape)}, expected {tuple(weight.shape)}."
        if not bool(torch.isfinite(value.detach().float()).all()):
            return f"bits={bits}: the output holds NaN or inf; every value of the grid is a finite number."
        exact = weight / scale
        on_boundary = ((exact - exact.floor()) - 0.5).abs() < 1e-3  # float rounding may go either way there
        diff = (value.detach().float() - want).abs()
        off = (diff > float(scale) * 1e-3 + 1e-6) & ~(on_boundary & (diff <= float(scale) * 1.001))
        if bool(off.any()):
            if torch.allclose(value.detach().float(), q.float(), atol=0.51):
                return (f"bits={bits}: those are the integers. Hint: fake quantisation returns the float value "
                        "scale * (q - zero_point), the weight as int8 inference would see it.")
            return (f"bits={bits}: {int(off.sum())} values are not the weight rounded to the {bits}-bit grid and "
                    "back. Hint: round(w / scale) + zero_point, clamped, then scale * (q - zero_point).")
        leaf = weight.clone().requires_grad_(True)
        out = fn(leaf, bits)
        if not isinstance(out, torch.Tensor) or not out.requires_grad:
            return (f"bits={bits}: the output carries no gradient. Hint: do not detach the result; the "
                    "straight-through estimator is out = w + (fake - w).detach().")
        (grad,) = torch.autograd.grad(out.sum(), leaf, allow_unused=True)
        if grad is None or bool((grad == 0).all()):
            return (f"bits={bits}: the gradient is zero. Hint: torch.round has zero gradient almost everywhere; "
                    "pass it straight through with out = w + (fake - w).detach().")
        if not torch.allclose(grad, torch.ones_like(grad)):
            return (f"bits={bits}: the gradient is not 1 (it is {float(grad.flatten()[0]):.3g}...). Hint: the "
                    "straight-through estimator passes the gradient unchanged: detach the whole rounding step.")
        return None

    return _run_cases("fake_quantize", fn, cases, judge)


def _draw_sparse(rng) -> tuple:
    shape = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 3)))
    return shape, rng.sample(range(math.prod(shape)), rng.randint(0, math.prod(shape)))
