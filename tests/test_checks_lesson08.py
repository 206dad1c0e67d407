"""Tests for the lesson-08 checker gl.check.scale_out_costs."""

import pytest
import torch

import greenlab as gl
from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED


def good(hours, n, eff, watts, price):
    wall = hours / (n * eff)
    kwh = watts * n * wall / 1000
    return wall, kwh, None if price is None else price * n * wall


def test_right_answer_passes():
    result = checks.scale_out_costs(good)
    assert result.passed, result.text()


def test_placeholder_is_not_attempted():
    assert checks.scale_out_costs(None).status == checks.NOT_ATTEMPTED
    assert checks.scale_out_costs(lambda *a: None).status == checks.NOT_ATTEMPTED


def test_ignoring_efficiency_fails_with_a_hint():
    def no_eff(hours, n, eff, watts, price):
        wall = hours / n
        return wall, watts * n * wall / 1000, price * n * wall

    result = checks.scale_out_costs(no_eff)
    assert result.status == checks.FAILED
    assert any("scaling_efficiency" in d for d in result.details)


def test_ideal_energy_fails_with_a_hint():
    def ideal_energy(hours, n, eff, watts, price):
        wall = hours / (n * eff)
        return wall, watts * hours / 1000, price * n * wall

    result = checks.scale_out_costs(ideal_energy)
    assert result.status == checks.FAILED
    assert any("device-hours" in d for d in result.details)


def test_watt_hours_instead_of_kwh_fails():
    def wh(hours, n, eff, watts, price):
        wall = hours / (n * eff)
        return wall, watts * n * wall, price * n * wall

    result = checks.scale_out_costs(wh)
    assert result.status == checks.FAILED
    assert any("kWh" in d for d in result.details)


def test_cost_for_one_device_only_fails():
    def one_device_cost(hours, n, eff, watts, price):
        wall = hours / (n * eff)
        return wall, watts * n * wall / 1000, price * wall

    result = checks.scale_out_costs(one_device_cost)
    assert result.status == checks.FAILED
    assert any("every device" in d for d in result.details)


def test_missing_price_must_give_unknown_cost():
    def zero_cost(hours, n, eff, watts, price):
        wall, kwh, _ = good(hours, n, eff, watts, price)
        return wall, kwh, (price or 0.0) * n * wall

    def crashes(hours, n, eff, watts, price):
        wall, kwh, _ = good(hours, n, eff, watts, 0.0)
        return wall, kwh, price * n * wall

    assert checks.scale_out_costs(zero_cost).status == checks.FAILED
    failed = checks.scale_out_costs(crashes)
    assert failed.status == checks.FAILED and "TypeError" in failed.message


def test_learner_exception_is_reported_not_raised():
    def boom(*args):
        raise ZeroDivisionError("oops")

    result = checks.scale_out_costs(boom)
    assert result.status == checks.FAILED
    assert any("ZeroDivisionError" in d for d in result.details)


# --- ring_all_reduce: simulated in one process ---

def _ring_right(tensors):
    """Ring all-reduce written with explicit send buffers (not the library's loop)."""
    n = len(tensors)
    bufs = [list(t.clone().chunk(n)) if n > 1 else [t.clone()] for t in tensors]
    sent = [0] * n
    for s in range(n - 1):  # reduce-scatter
        msgs = [bufs[r][(r - s) % n].clone() for r in range(n)]
        for r in range(n):
            bufs[(r + 1) % n][(r - s) % n] += msgs[r]
            sent[r] += msgs[r].numel() * 4
    for s in range(n - 1):  # all-gather
        msgs = [bufs[r][(r + 1 - s) % n].clone() for r in range(n)]
        for r in range(n):
            bufs[(r + 1) % n][(r + 1 - s) % n] = msgs[r]
            sent[r] += msgs[r].numel() * 4
    return [torch.cat(b) for b in bufs], sent


def _naive(tensors):
    total = torch.stack(tensors).sum(0)
    n = len(tensors)
    return [total.clone() for _ in tensors], [(n - 1) * t.numel() * 4 for t in tensors]


def _elements(tensors):
    out, sent = _ring_right(tensors)
    return out, [b / 4 for b in sent]


def _reduce_scatter_only(tensors):
    n = len(tensors)
    bufs = [list(t.clone().chunk(n)) for t in tensors]
    for s in range(n - 1):
        msgs = [bufs[r][(r - s) % n].clone() for r in range(n)]
        for r in range(n):
            bufs[(r + 1) % n][(r - s) % n] += msgs[r]
    return [torch.cat(b) for b in bufs], [(n - 1) / n * t.numel() * 4 * 2 for t in tensors]


def _mean(tensors):
    out, sent = _ring_right(tensors)
    return [o / len(tensors) for o in out], sent


def test_ring_all_reduce_passes_a_correct_answer_and_the_librarys_own():
    assert checks.ring_all_reduce(_ring_right).passed, checks.ring_all_reduce(_ring_right).text()
    assert checks.ring_all_reduce.__wrapped__(gl.scaling.ring_all_reduce).passed


@pytest.mark.parametrize("wrong, hint", [
    (_naive, "whole tensor to every other rank"),
    (_elements, "elements, not bytes"),
    (_reduce_scatter_only, "all-gather must pass them round"),
    (_mean, "that is the mean"),
])
def test_ring_all_reduce_names_each_mistake(wrong, hint):
    result = checks.ring_all_reduce(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def test_ring_all_reduce_placeholder_is_not_attempted():
    assert checks.ring_all_reduce(None).status == NOT_ATTEMPTED
    assert checks.ring_all_reduce(lambda ts: None).status == NOT_ATTEMPTED


def test_library_ring_sends_the_formulas_bytes():
    tensors = [torch.ones(24) * r for r in range(4)]
    summed, sent = gl.scaling.ring_all_reduce(tensors)
    assert all(torch.equal(s, torch.full((24,), 6.0)) for s in summed)
    assert sent == [gl.sharding.ring_allreduce_bytes(96, 4)] * 4 == [144.0] * 4


# --- energy_per_device_hour: k of energy ~ k x device-hours ---

def _k_right(device_hours, energy):
    num = sum(x * y for x, y in zip(device_hours, energy))
    return num / sum(x ** 2 for x in device_hours)


def _k_intercept(device_hours, energy):
    if len(device_hours) < 2:
        return energy[0] / device_hours[0]
    import statistics
    return statistics.linear_regression(device_hours, energy).slope


@pytest.mark.parametrize("wrong, hint", [
    (lambda x, y: sum(b / a for a, b in zip(x, y)) / len(x), "mean of the per-run ratios"),
    (lambda x, y: sum(y) / sum(x), "total energy / total device-hours"),
    (lambda x, y: sum(a * b for a, b in zip(x, y)) / sum(b * b for b in y), "axes are swapped"),
    (_k_intercept, "has an intercept"),
])
def test_energy_per_device_hour_names_each_mistake(wrong, hint):
    result = checks.energy_per_device_hour(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def test_energy_per_device_hour_passes_a_correct_answer_and_matches_the_library():
    assert checks.energy_per_device_hour(_k_right).passed
    assert checks.energy_per_device_hour.__wrapped__(gl.scaling.fit_energy_per_device_hour).passed
    assert gl.scaling.fit_energy_per_device_hour([1.0, 2.0, 4.0], [3.0, 5.0, 13.0]) == pytest.approx(65 / 21)


# --- watts_per_device: k of one job, W per device -------------------------------------------------

@pytest.mark.parametrize("wrong, hint", [
    (lambda e, n, h: h * 1000.0 / (n * e), "hours and energy are swapped"),
    (lambda e, n, h: e * 1000.0 / h, "divide by the number of devices"),
    (lambda e, n, h: e / (n * h), "that is kW"),
    (lambda e, n, h: n * h / (e * 1000.0), "energy and device-hours are swapped"),
])
def test_watts_per_device_names_each_mistake(wrong, hint):
    result = checks.watts_per_device(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def test_watts_per_device_passes_a_correct_answer_and_matches_the_library():
    def mine(energy_kwh, n_devices, wall_hours):
        device_hours = n_devices * wall_hours
        return energy_kwh * 1000 / device_hours

    assert checks.watts_per_device(mine).passed
    assert checks.watts_per_device.__wrapped__(gl.scaling.watts_per_device).passed
    assert gl.scaling.watts_per_device(4.0, 8, 2.0) == pytest.approx(250.0)
    assert checks.watts_per_device(None).status == NOT_ATTEMPTED
    with pytest.raises(ValueError, match="n_devices"):
        gl.scaling.watts_per_device(1.0, 0, 1.0)
