"""Tests for the lesson-01 checker gl.check.scale_out_costs."""

from greenlab import checks


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
