"""Lesson 00 checker: gl.check.energy_window judges a learner's measurement window."""

import time

import pytest

import greenlab as gl
from greenlab.course import checks
from greenlab.course.checks import FAILED, NOT_ATTEMPTED, PASSED
from greenlab.energy import ComponentEnergy, Measurement
from greenlab.energy.sources import EnergySource


class SteppedCounter(EnergySource):
    """A fake counter: +2 J per read, updating every 50 ms (so short windows warn)."""

    name = "fake-counter"
    update_period_s = 0.05

    def __init__(self):
        super().__init__("cpu")
        self.value = 0.0

    def read_joules(self):
        self.value += 2.0
        return self.value


def _measurement(joules=3.0, seconds=0.5, source="estimate", warnings=(), components=True):
    comps = {"cpu": ComponentEnergy("cpu", source, joules, seconds, joules / seconds,
                                    source == "estimate", 0.5)} if components else {}
    return Measurement("work", seconds, comps, warnings=list(warnings))


def test_placeholder_is_not_attempted():
    assert gl.check.energy_window(None).status == NOT_ATTEMPTED


def test_good_window_passes_and_names_its_source():
    result = gl.check.energy_window(_measurement(), min_seconds=0.2)
    assert result.status == PASSED
    assert "cpu estimate (estimate)" in result.message


def test_real_window_from_a_counter_passes_when_long_enough():
    with gl.measure("long", sources=[SteppedCounter()]) as window:
        time.sleep(0.52)  # longer than 10 of the fake counter's 50 ms update periods
    assert window.result.joules == 2.0 and not window.result.warnings
    assert gl.check.energy_window(window.result, min_seconds=0.05).passed


def test_real_short_window_fails_with_advice():
    with pytest.warns(gl.energy.ShortWindowWarning):
        with gl.measure("tiny", sources=[SteppedCounter()]) as window:
            pass
    result = gl.check.energy_window(window.result)
    assert result.status == FAILED
    assert any("repeat the work" in d for d in result.details)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"components": False}, "no energy components"),
    ({"source": ""}, "without a source label"),
    ({"joules": 0.0}, "more than 0 J"),
    ({"joules": float("nan")}, "more than 0 J"),
])
def test_broken_windows_fail(kwargs, fragment):
    result = gl.check.energy_window(_measurement(**kwargs))
    assert result.status == FAILED
    assert any(fragment in d for d in result.details)


def test_too_short_for_min_seconds_fails():
    result = gl.check.energy_window(_measurement(seconds=0.05), min_seconds=0.25)
    assert result.status == FAILED and "at least 0.25 s" in result.details[0]


def test_wrong_type_fails_without_raising():
    result = gl.check.energy_window(12.5)
    assert result.status == FAILED and "Measurement" in result.message


def test_window_object_instead_of_result_fails_helpfully():
    with gl.measure("w", sources=[SteppedCounter()]) as window:
        time.sleep(0.06)
    result = gl.check.energy_window(window)  # the EnergyWindow, not its .result
    assert result.status == FAILED and "window.result" in result.details[0]


def test_bad_min_seconds_is_a_value_error():
    with pytest.raises(ValueError, match="min_seconds"):
        gl.check.energy_window(_measurement(), min_seconds=-1)


def test_incomplete_window_fails_naming_what_was_lost():
    m = _measurement()
    m.problems.append("gpu:0: nvml-counter failed at window end (lost); its energy is missing")
    result = gl.check.energy_window(m)
    assert result.status == FAILED
    assert any("incomplete" in d and "gpu:0" in d for d in result.details)


# --- counter_joules: two reads of a wrapping RAPL-style counter ---

def _counter_right(before_uj, after_uj, max_range_uj):
    delta = after_uj - before_uj
    if delta < 0:
        delta += max_range_uj
    return delta * 1e-6


def test_counter_joules_passes_a_correct_answer_that_is_not_the_librarys():
    result = checks.counter_joules(_counter_right)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, hint", [
    (lambda b, a, m: (a - b) / 1e6, "counter wrapped"),
    (lambda b, a, m: float(_counter_right(b, a, m) * 1e6), "microjoules"),
    (lambda b, a, m: abs(a - b) / 1e6, "abs()"),
    (lambda b, a, m: ((a - b + 2 * m) if a < b else (a - b)) / 1e6, "not twice"),
])
def test_counter_joules_names_each_mistake(wrong, hint):
    result = checks.counter_joules(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def test_counter_joules_placeholder_is_not_attempted():
    assert checks.counter_joules(lambda *a: None).status == NOT_ATTEMPTED


# --- integrate_power: trapezoid over irregular samples, gaps not bridged ---

def _power_right(times_s, watts, max_gap_s):
    joules = missing = 0.0
    for i in range(1, len(times_s)):
        dt = times_s[i] - times_s[i - 1]
        if dt > max_gap_s:
            missing += dt
        else:
            joules += dt * (watts[i] + watts[i - 1]) / 2
    return joules, missing


def _bridged(times_s, watts, max_gap_s):
    return _power_right(times_s, watts, float("inf"))[0], _power_right(times_s, watts, max_gap_s)[1]


def _left_rectangles(times_s, watts, max_gap_s):
    joules = sum(w * (t1 - t0) for t0, t1, w in zip(times_s, times_s[1:], watts) if t1 - t0 <= max_gap_s)
    return joules, _power_right(times_s, watts, max_gap_s)[1]


def _no_missing(times_s, watts, max_gap_s):
    return _power_right(times_s, watts, max_gap_s)[0], 0.0


def _stops_at_gap(times_s, watts, max_gap_s):
    joules = 0.0
    for i in range(1, len(times_s)):
        dt = times_s[i] - times_s[i - 1]
        if dt > max_gap_s:
            break
        joules += dt * (watts[i] + watts[i - 1]) / 2
    return joules, _power_right(times_s, watts, max_gap_s)[1]


def test_integrate_power_passes_a_correct_answer_that_is_not_the_librarys():
    result = checks.integrate_power(_power_right)
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, hint", [
    (_bridged, "gap was bridged"),
    (_left_rectangles, "rectangle rule"),
    (_no_missing, "missing_s is the total length"),
    (_stops_at_gap, "both sides"),
])
def test_integrate_power_names_each_mistake(wrong, hint):
    result = checks.integrate_power(wrong)
    assert result.status == FAILED
    assert any(hint in d for d in result.details), result.text()


def _power_float32(times_s, watts, max_gap_s):
    """A right answer in torch's default float32, handed back as Python floats."""
    import torch

    t, w = torch.tensor(times_s), torch.tensor(watts)
    dt = t[1:] - t[:-1]
    inside = dt <= max_gap_s
    return float(((w[1:] + w[:-1]) / 2 * dt)[inside].sum()), float(dt[~inside].sum())


def test_integrate_power_passes_a_right_float32_answer_handed_back_as_floats_and_still_names_mistakes():
    assert checks.integrate_power(_power_float32).passed, checks.integrate_power(_power_float32).text()
    for wrong in (_bridged, _left_rectangles, _stops_at_gap):  # the tolerance of float32 lets no mistake through
        assert checks.integrate_power(wrong).status == FAILED


def test_integrate_power_reference_is_torch_trapezoid_per_segment():
    from greenlab.course.checks.measuring import _power_reference

    assert _power_reference([0.0, 1.0, 2.0, 4.0], [100.0] * 4, 1.5) == pytest.approx((200.0, 2.0))
    assert checks.integrate_power(lambda *a: None).status == NOT_ATTEMPTED


def test_gap_aware_joules_passes_the_checker_and_rejects_bad_input():
    from greenlab.energy.sources import gap_aware_joules

    assert checks.integrate_power.__wrapped__(gap_aware_joules).passed
    assert gap_aware_joules([0.0, 1.0, 3.0, 4.0], [2.0, 2.0, 4.0, 4.0], 1.5) == pytest.approx((6.0, 2.0))
    with pytest.raises(ValueError):
        gap_aware_joules([0.0, 1.0], [1.0], 1.0)
    with pytest.raises(ValueError):
        gap_aware_joules([0.0, 1.0], [1.0, 1.0], 0)
