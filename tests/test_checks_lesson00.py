"""Lesson 00 checker: gl.check.energy_window judges a learner's measurement window."""

import time

import pytest

import greenlab as gl
from greenlab.checks import FAILED, NOT_ATTEMPTED, PASSED
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
