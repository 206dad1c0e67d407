"""Lesson 02 (mixed precision): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

from greenlab.checks.core import (
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Check,
    _not_a_function,
    is_placeholder,
)


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
    """The reference fp16 mixed-precision step (as in ``greenlab.train``)."""
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
