"""Lesson 02 checker: amp_step (an fp16 autocast + GradScaler training step)."""

import torch
import torch.nn.functional as F

from greenlab import checks
from greenlab.checks import FAILED, NOT_ATTEMPTED


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
