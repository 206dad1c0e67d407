"""Lesson 01 (mixed precision): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import copy
import math
from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, check_function, graded, is_placeholder)
from greenlab.techniques import numerics


@graded
def amp_step(fn: Any) -> Check:
    """Check a learner's ``fn(model, optimizer, scaler, x, y) -> loss``: one fp16 mixed-precision
    training step (autocast to float16 on ``x.device.type``, cross-entropy loss, a scaled
    backward pass, ``scaler.step(optimizer)``, ``scaler.update()``, gradients cleared each step).

    Run on CPU against a reference step on a tiny linear model, in three cases: ordinary
    gradients (two steps, the weights must match the reference); gradients so small that fp16
    flushes them to zero unless the loss is scaled; and a loss scale so large that the scaled
    gradients overflow (the step must be skipped and the scale halved).
    """
    import torch

    label = "amp_step"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict

    failures: list[str] = []
    for case in ("ordinary", "tiny", "overflow"):
        mine, ref = _amp_case(case), _amp_case(case)
        w0 = [p.detach().clone() for p in mine["model"].parameters()]
        dtypes: list = []
        hook = mine["model"].register_forward_hook(lambda mod, inp, out: dtypes.append(out.dtype))
        try:
            for _ in range(mine["steps"]):
                got = fn(mine["model"], mine["optimizer"], mine["scaler"], mine["x"], mine["y"])
                _amp_reference_step(ref["model"], ref["optimizer"], ref["scaler"], ref["x"], ref["y"])
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{case} case: your step raised {type(exc).__name__}: {exc}")
            continue
        finally:
            hook.remove()
        params = list(mine["model"].parameters())
        unchanged = all(torch.equal(p.detach(), w) for p, w in zip(params, w0))
        if case == "ordinary" and is_placeholder(got) and unchanged and all(p.grad is None for p in params):
            return Check(label, NOT_ATTEMPTED, "the function still returns None and trains nothing; fill it in.")
        if not dtypes or any(d != torch.float16 for d in dtypes):
            seen = sorted({str(d).replace("torch.", "") for d in dtypes}) or ["no forward pass"]
            failures.append(f"{case} case: the model's output was {', '.join(seen)}; run the forward pass "
                            "inside torch.autocast(x.device.type, dtype=torch.float16).")
            continue
        problem = _amp_compare(case, mine, ref, unchanged)
        if problem:
            failures.append(f"{case} case: {problem}")
    if failures:
        return Check(label, FAILED, f"{len(failures)} of 3 cases wrong.", failures)
    return Check(label, PASSED, "your step matches the reference in all 3 cases (ordinary, tiny and "
                 "overflowing gradients).")


def _amp_case(case: str) -> dict:
    """A fresh tiny model, SGD optimizer, GradScaler("cpu") and batch for one ``amp_step`` case."""
    import torch

    torch.manual_seed(2)
    model = torch.nn.Linear(4, 3)
    x = torch.randn(8, 4)
    y = torch.randint(0, 3, (8,))
    init_scale = 1.0 if case == "ordinary" else 2.0 ** 16  # scale 1: stale gradients are not hidden
    if case == "tiny":  # a confident model: d(loss)/d(logits) is about 1e-9, below fp16's range
        with torch.no_grad():
            model.weight.zero_()
            model.bias.copy_(torch.tensor([20.0, 0.0, 0.0]))
        y = torch.zeros(8, dtype=torch.long)
    if case == "overflow":  # scaled gradients exceed fp16's largest value (65504)
        init_scale = 2.0 ** 30
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    return {"model": model, "optimizer": optimizer, "scaler": scaler, "x": x, "y": y,
            "steps": 2 if case == "ordinary" else 1, "init_scale": init_scale}


def _amp_reference_step(model, optimizer, scaler, x, y):
    """The reference fp16 mixed-precision step (as in ``greenlab.training.loop``)."""
    import torch
    import torch.nn.functional as F

    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def _amp_compare(case: str, mine: dict, ref: dict, unchanged: bool) -> str | None:
    """What is wrong with the learner's state after an ``amp_step`` case, or None."""
    import torch

    params = [p.detach() for p in mine["model"].parameters()]
    if not all(bool(torch.isfinite(p).all()) for p in params):
        return ("the weights became inf or NaN: step with scaler.step(optimizer), which unscales the "
                "gradients and skips a step whose gradients overflowed.")
    if case == "overflow":
        if not unchanged:
            return ("the weights changed although the scaled gradients overflowed; scaler.step(optimizer) "
                    "would have skipped this step.")
        if mine["scaler"].get_scale() != ref["scaler"].get_scale():
            return (f"the loss scale is {mine['scaler'].get_scale():g}, expected {ref['scaler'].get_scale():g}: "
                    "call scaler.update() after scaler.step(optimizer) so the scale backs off after an overflow.")
        return None
    if case == "tiny" and unchanged:
        return ("the weights did not change: the tiny gradients underflowed to zero in fp16. Scale the loss "
                "first: scaler.scale(loss).backward().")
    w0 = [p.detach().clone() for p in _amp_case(case)["model"].parameters()]
    refs = [p.detach() for p in ref["model"].parameters()]
    change = max(float((r - w).abs().max()) for r, w in zip(refs, w0))
    diff = max(float((p - r).abs().max()) for p, r in zip(params, refs))
    if diff > 1e-2 * change + 1e-12:
        hint = ""
        if case == "ordinary":
            hint = (" Clear the gradients at every step (optimizer.zero_grad()) and step with "
                    "scaler.step(optimizer), not optimizer.step().")
        return (f"the updated weights differ from the reference by up to {diff:.3g} "
                f"(the reference update is {change:.3g}).{hint}")
    return None


@graded(reference=("greenlab.techniques.numerics:fp16_flush_fractions",))
def fp16_flush_fractions(fn: Any) -> Check:
    """Check a learner's ``fn(grads, scale) -> (flushed, subnormal)``: of the non-zero values in
    ``grads`` (fp32), multiplied by ``scale`` and cast to float16, the fraction that become 0
    and the fraction that land among fp16's subnormals (non-zero but below
    ``torch.finfo(torch.float16).tiny``, about 6.1e-5, where precision is lost). Expected
    values come from torch's own float16 cast."""
    import torch

    values = torch.tensor([0.0, 1e-2, 3e-5, 1e-6, 1e-7, 2e-8, 1e-9, -4e-6, -1e-10, 0.0, 5e-4, 1e-12])
    g = torch.Generator().manual_seed(3)
    drawn = torch.randn(200, generator=g) * torch.logspace(-12, -1, 200)
    inputs = [(values, 1.0), (values, 2.0 ** 16), (drawn, 1.0), (drawn, 2.0 ** 12), (torch.zeros(3), 1.0)]
    cases = [(args, _flush_reference(*args)) for args in inputs]

    def hint(args, expected, got):
        try:
            flushed, subnormal = float(got[0]), float(got[1])
        except (TypeError, ValueError, IndexError, KeyError):
            return "return two fractions: (flushed, subnormal)."
        grads, scale = args
        v = (grads * scale)
        nonzero = v != 0
        n = int(nonzero.sum())
        if n == 0:
            return "with no non-zero gradient both fractions are 0 (nothing can be lost)."
        tiny = torch.finfo(torch.float16).tiny
        if math.isclose(flushed, float(((v.abs() < tiny) & nonzero).sum()) / n, rel_tol=1e-6) and expected[1] > 0:
            return ("values below fp16's smallest normal number (6.1e-5) are not zero yet: fp16 has "
                    "subnormals down to 6e-8; cast with .half() and compare with 0.")
        if math.isclose(flushed, float(((v.half() == 0)).sum()) / v.numel(), rel_tol=1e-6):
            return "count among the non-zero gradients only: a gradient that was already 0 is not lost."
        raw = _flush_reference(grads, 1.0)
        if scale != 1.0 and math.isclose(flushed, raw[0], rel_tol=1e-6) and not math.isclose(raw[0], expected[0]):
            return "multiply the gradients by scale before the cast: that is what loss scaling does."
        bf = float(((v.bfloat16() == 0) & nonzero).sum()) / n
        if math.isclose(flushed, bf, rel_tol=1e-6) and not math.isclose(bf, expected[0]):
            return "that is bfloat16 (fp32's range); the question is about float16 (torch.float16 / .half())."
        return None

    return check_function(fn, cases, rtol=1e-6, atol=1e-9, name="fp16_flush_fractions", hint=hint)


def _flush_reference(grads, scale):
    return numerics.fp16_flush_fractions(grads, scale)


# the loss scaler's test: growth every 3 good steps, and a planted overflow (an inf in the input)
_SCALER_SETTINGS = {"init_scale": 2.0 ** 10, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3}
_SCALER_OVERFLOWS = (3, 4, 9)
_SCALER_STEPS = 12


@graded(reference=("greenlab.techniques.numerics:TorchLossScaler",))
def loss_scaler(make_scaler: Any) -> Check:
    """Check a learner's dynamic loss scaler: ``make_scaler(init_scale, growth_factor,
    backoff_factor, growth_interval)`` returns an object with a ``scale`` attribute (the current
    factor), ``scale_loss(loss)`` (the loss times the scale) and ``step(optimizer)``, which
    divides every gradient by the scale, skips the optimizer step when any gradient is inf or
    NaN, updates the scale as ``torch.amp.GradScaler`` does (times ``backoff_factor`` after an
    overflow, restarting the count of good steps; times ``growth_factor`` after
    ``growth_interval`` good steps in a row) and returns True when the optimizer stepped, False
    when the step was skipped (the lesson counts skipped steps from it). Run step by step beside
    ``GradScaler("cpu")`` on a tiny model with overflows planted at steps 3, 4 and 9. A scaler
    whose ``scale`` is still None (the untouched template) is not attempted."""
    import torch

    label = "loss_scaler"
    if is_placeholder(make_scaler):
        return Check(label, NOT_ATTEMPTED, "no scaler yet (still None).")
    if not callable(make_scaler):
        return Check(label, FAILED,
                     f"expected a class or function that makes a scaler, got {type(make_scaler).__name__}.")
    try:
        mine = make_scaler(**_SCALER_SETTINGS)
    except Exception as exc:  # the learner's code failed: report it, never raise
        return Check(label, FAILED, f"making the scaler raised {type(exc).__name__}: {exc}")
    if is_placeholder(mine):
        return Check(label, NOT_ATTEMPTED, "the scaler is not written yet (it returned None).")
    missing = [a for a in ("scale", "scale_loss", "step") if not hasattr(mine, a)]
    if missing:
        return Check(label, FAILED, f"the scaler has no {', '.join(missing)}.",
                     ["it needs a scale attribute and the methods scale_loss(loss) and step(optimizer)."])

    if is_placeholder(getattr(mine, "scale", None)):
        return Check(label, NOT_ATTEMPTED, "the scaler's scale is still None; fill in __init__.")

    ref = torch.amp.GradScaler("cpu", **_SCALER_SETTINGS)
    models, optimizers, batches = _scaler_setup()
    for step in range(_SCALER_STEPS):
        x, y = batches[step]
        try:
            before_scale = float(mine.scale)
            optimizers[1].zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(models[1](x), y)
            scaled = mine.scale_loss(loss)
            if is_placeholder(scaled):
                return Check(label, NOT_ATTEMPTED, "scale_loss still returns None; fill it in.")
            scaled.backward()
            stepped = mine.step(optimizers[1])
            got_scale = float(mine.scale)
        except Exception as exc:  # the learner's code failed: report it, never raise
            return Check(label, FAILED, f"step {step}: your scaler raised {type(exc).__name__}: {exc}")
        optimizers[0].zero_grad(set_to_none=True)
        ref_loss = torch.nn.functional.cross_entropy(models[0](x), y)
        if step == 0 and not math.isclose(float(scaled.detach()), float(ref.scale(ref_loss).detach()), rel_tol=1e-6):
            return Check(label, FAILED, f"step 0: scale_loss gave {float(scaled.detach()):.6g}, expected the loss "
                         f"times the scale ({float(ref.scale(ref_loss).detach()):.6g}).")
        ref.scale(ref_loss).backward()
        ref.step(optimizers[0])
        ref.update()
        problem = _scaler_problem(step, models, before_scale, got_scale, ref.get_scale())
        skipped = step in _SCALER_OVERFLOWS  # GradScaler skips exactly the planted overflows
        if not problem and stepped is not (not skipped):
            problem = (f"step() returned {stepped!r}; it must return True when the optimizer stepped and False "
                       f"when the step was skipped (here it was {'skipped' if skipped else 'taken'}).")
        if problem:
            return Check(label, FAILED, f"step {step}{' (overflow planted)' if step in _SCALER_OVERFLOWS else ''}: "
                         f"{problem}")
    return Check(label, PASSED, f"your scaler matches torch.amp.GradScaler at all {_SCALER_STEPS} steps "
                 f"(weights and scale), through {len(_SCALER_OVERFLOWS)} planted overflows and "
                 "the growth after good steps.")


def _scaler_setup():
    """Two identical tiny models with SGD, and the batches (inf planted at the overflow steps)."""
    import torch

    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    models = [model, copy.deepcopy(model)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    g = torch.Generator().manual_seed(6)
    batches = []
    for step in range(_SCALER_STEPS):
        x = torch.randn(8, 4, generator=g)
        if step in _SCALER_OVERFLOWS:
            x[0, 0] = float("inf")
        batches.append((x, torch.randint(0, 3, (8,), generator=g)))
    return models, optimizers, batches


def _scaler_problem(step, models, before_scale, got_scale, want_scale) -> str | None:
    import torch

    ref_w = [p.detach() for p in models[0].parameters()]
    my_w = [p.detach() for p in models[1].parameters()]
    overflow = step in _SCALER_OVERFLOWS
    if not all(bool(torch.isfinite(w).all()) for w in my_w):
        return ("the weights became inf or NaN: when any gradient is inf or NaN, skip optimizer.step() "
                "for that step.")
    diff = max(float((a - b).abs().max()) for a, b in zip(my_w, ref_w))
    if diff > 1e-5:
        return (f"the weights differ from GradScaler's by up to {diff:.3g}: divide every gradient by the "
                "scale (p.grad /= scale) before optimizer.step(), so the update uses the true gradient.")
    if math.isclose(got_scale, want_scale, rel_tol=1e-9):
        return None
    if overflow and math.isclose(got_scale, before_scale, rel_tol=1e-9):
        return (f"the scale stayed at {got_scale:g} after an overflow; multiply it by backoff_factor "
                f"(expected {want_scale:g}).")
    if got_scale > want_scale and not overflow:
        return (f"the scale grew to {got_scale:g} too early (expected {want_scale:g}): count good steps "
                "in a row, and start the count again after an overflow.")
    if got_scale < want_scale and not overflow:
        return (f"the scale is {got_scale:g}, expected {want_scale:g}: after growth_interval good steps in a "
                "row multiply it by growth_factor (and restart the count).")
    return f"the scale is {got_scale:g}, expected {want_scale:g}."
