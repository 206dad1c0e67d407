"""Lesson 01 checker: amp_step (an fp16 autocast + GradScaler training step)."""

import pytest
import torch
import torch.nn.functional as F

from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED


def right(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def no_scaler(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def no_autocast(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def no_update(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    return loss


def plain_optimizer_step(model, optimizer, scaler, x, y):
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()
    scaler.update()
    return loss


def no_zero_grad(model, optimizer, scaler, x, y):
    with torch.autocast(x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def test_a_correct_step_passes():
    result = checks.amp_step(right)
    assert result.passed, result.text()


def test_placeholder_is_not_attempted():
    assert checks.amp_step(None).status == NOT_ATTEMPTED
    assert checks.amp_step(lambda *a: None).status == NOT_ATTEMPTED


def test_missing_loss_scaling_fails_on_tiny_gradients():
    result = checks.amp_step(no_scaler)
    assert result.status == FAILED
    assert any("tiny case" in d and "underflowed" in d for d in result.details), result.text()
    assert not any(d.startswith("ordinary case") for d in result.details)


def test_missing_autocast_fails():
    result = checks.amp_step(no_autocast)
    assert result.status == FAILED
    assert all("float32" in d and "autocast" in d for d in result.details), result.text()


def test_missing_update_keeps_the_scale_and_fails():
    result = checks.amp_step(no_update)
    assert result.status == FAILED
    assert [d for d in result.details if d.startswith("overflow case")], result.text()
    assert any("scaler.update()" in d for d in result.details)


def test_plain_optimizer_step_fails():
    result = checks.amp_step(plain_optimizer_step)
    assert result.status == FAILED
    assert any(d.startswith("ordinary case") for d in result.details), result.text()
    assert any(d.startswith("overflow case") for d in result.details), result.text()


def test_forgetting_zero_grad_fails_on_the_second_step():
    result = checks.amp_step(no_zero_grad)
    assert result.status == FAILED
    assert any("zero_grad" in d for d in result.details), result.text()


def test_an_exception_is_reported_not_raised():
    def broken(model, optimizer, scaler, x, y):
        raise RuntimeError("boom")

    result = checks.amp_step(broken)
    assert result.status == FAILED
    assert any("RuntimeError: boom" in d for d in result.details)
    assert checks.amp_step(42).status == FAILED


# --- fp16_flush_fractions ---

def _flush_right(grads, scale):
    v = grads.double() * scale
    nz = v != 0
    if not nz.any():
        return 0.0, 0.0
    h = v.to(torch.float16)
    smallest_normal = 2.0 ** -14
    return ((h == 0) & nz).sum().item() / nz.sum().item(), \
        ((h != 0) & (h.abs() < smallest_normal)).sum().item() / nz.sum().item()


def _flush_normal_threshold(grads, scale):
    v = grads * scale
    nz = v != 0
    n = max(1, int(nz.sum()))
    return float(((v.abs() < torch.finfo(torch.float16).tiny) & nz).sum()) / n, 0.0


def _flush_counts_zeros(grads, scale):
    v = grads * scale
    return float((v.half() == 0).sum()) / v.numel(), _flush_right(grads, scale)[1]


def _flush_ignores_scale(grads, scale):
    return _flush_right(grads, 1.0)


def _flush_bf16(grads, scale):
    v = grads * scale
    nz = v != 0
    n = max(1, int(nz.sum()))
    return float(((v.bfloat16() == 0) & nz).sum()) / n, 0.0


def test_fp16_flush_fractions_passes_a_correct_answer():
    result = checks.fp16_flush_fractions(_flush_right)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, hint", [
    (_flush_normal_threshold, "subnormals down to 6e-8"),
    (_flush_counts_zeros, "non-zero gradients only"),
    (_flush_ignores_scale, "multiply the gradients by scale"),
    (_flush_bf16, "that is bfloat16"),
])
def test_fp16_flush_fractions_names_each_mistake(wrong, hint):
    result = checks.fp16_flush_fractions(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


# --- loss_scaler: checked step by step against torch.amp.GradScaler ---

class _Scaler:
    def __init__(self, init_scale, growth_factor, backoff_factor, growth_interval,
                 skip=True, unscale=True, backoff=True, reset=True, grow=True):
        self.scale, self.good = init_scale, 0
        self.growth, self.backoff, self.interval = growth_factor, backoff_factor, growth_interval
        self.flags = dict(skip=skip, unscale=unscale, backoff=backoff, reset=reset, grow=grow)

    def scale_loss(self, loss):
        return loss * self.scale

    def step(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if self.flags["unscale"]:
            for g in grads:
                g.div_(self.scale)
        finite = all(bool(torch.isfinite(g).all()) for g in grads)
        if finite or not self.flags["skip"]:
            optimizer.step()
        if not finite:
            if self.flags["backoff"]:
                self.scale *= self.backoff
            if self.flags["reset"]:
                self.good = 0
            return False
        self.good += 1
        if self.flags["grow"] and self.good >= self.interval:
            self.scale *= self.growth
            self.good = 0
        return True


def test_loss_scaler_passes_a_correct_scaler():
    result = checks.loss_scaler(_Scaler)
    assert result.passed, result.text()


@pytest.mark.parametrize("flag, hint", [
    ("skip", "skip optimizer.step()"),
    ("unscale", "divide every gradient by the scale"),
    ("backoff", "multiply it by backoff_factor"),
    ("reset", "start the count again after an overflow"),
    ("grow", "multiply it by growth_factor"),
])
def test_loss_scaler_names_each_mistake(flag, hint):
    result = checks.loss_scaler(lambda **kw: _Scaler(**kw, **{flag: False}))
    assert result.status == FAILED
    assert hint in result.message, result.text()


def test_loss_scaler_placeholders_are_not_attempted():
    assert checks.loss_scaler(None).status == NOT_ATTEMPTED
    assert checks.loss_scaler(lambda **kw: None).status == NOT_ATTEMPTED

    class Untouched:  # the lesson's template, as a learner first finds it
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
            self.scale = None

        def scale_loss(self, loss):
            return None

        def step(self, optimizer):
            return None

    assert checks.loss_scaler(Untouched).status == NOT_ATTEMPTED


def test_loss_scaler_must_say_whether_it_stepped():
    class Silent(_Scaler):  # right weights and scale, but step() returns nothing
        def step(self, optimizer):
            super().step(optimizer)

    result = checks.loss_scaler(Silent)
    assert result.status == FAILED and "must return True when the optimizer stepped" in result.message
