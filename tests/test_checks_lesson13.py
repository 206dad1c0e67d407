"""Tests for the lesson-13 checkers: Young's and Daly's checkpoint intervals, the idle alert rule."""

import math

from greenlab.course import checks


def details(result):
    return " ".join(result.details)


# --- Young (1974) ------------------------------------------------------------------------------

def test_young_accepts_a_correct_interval_written_differently():
    result = checks.young_interval(lambda d, m: (2.0 * d * m) ** 0.5)
    assert result.passed, result.text()


def test_young_without_the_factor_two_fails_with_its_hint():
    result = checks.young_interval(lambda d, m: math.sqrt(d * m))
    assert result.status == checks.FAILED and "factor 2" in details(result)


def test_young_dividing_fails_with_its_hint():
    result = checks.young_interval(lambda d, m: math.sqrt(2 * d / m))
    assert result.status == checks.FAILED and "do not divide" in details(result)


def test_young_without_the_root_fails_with_its_hint():
    result = checks.young_interval(lambda d, m: 2 * d * m)
    assert result.status == checks.FAILED and "square root" in details(result)


def test_young_placeholder_is_not_attempted():
    assert checks.young_interval(None).status == checks.NOT_ATTEMPTED
    assert checks.young_interval(lambda d, m: None).status == checks.NOT_ATTEMPTED


# --- Daly (2006) -------------------------------------------------------------------------------

def daly_by_expansion(d, m):
    """Daly's estimate written with the ratio r = d / M."""
    if d / m >= 2:
        return m
    r = d / m
    base = math.sqrt(2 * r) * m
    return base + base * math.sqrt(r / 2) / 3 + base * r / 18 - d


def test_daly_accepts_a_correct_interval_written_differently():
    result = checks.daly_interval(daly_by_expansion)
    assert result.passed, result.text()


def test_daly_as_young_fails_with_its_hint():
    result = checks.daly_interval(lambda d, m: math.sqrt(2 * d * m))
    assert result.status == checks.FAILED and "Young's first-order" in details(result)


def test_daly_without_minus_d_fails_with_its_hint():
    result = checks.daly_interval(lambda d, m: daly_by_expansion(d, m) + (d if d < 2 * m else 0))
    assert result.status == checks.FAILED and "subtract the checkpoint cost" in details(result)


def test_daly_without_the_large_d_case_fails_with_its_hint():
    def uncapped(d, m):
        x = d / (2 * m)
        return math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d

    result = checks.daly_interval(uncapped)
    assert result.status == checks.FAILED and "tau = M" in details(result)


def test_daly_with_wrong_coefficients_fails_with_its_hint():
    def no_thirds(d, m):
        if d >= 2 * m:
            return m
        x = d / (2 * m)
        return math.sqrt(2 * d * m) * (1 + math.sqrt(x) + x) - d

    result = checks.daly_interval(no_thirds)
    assert result.status == checks.FAILED and "not sqrt(d/2M) and d/2M" in details(result)


def test_daly_learner_exception_is_reported():
    def broken(d, m):
        raise ZeroDivisionError("boom")

    result = checks.daly_interval(broken)
    assert result.status == checks.FAILED and "boom" in details(result)


# --- the idle / data-stall alert ----------------------------------------------------------------

def alert_by_index(times, values, below, for_s):
    """A correct rule that remembers where each stretch starts by index."""
    fired, start, i = [], None, 0
    while i < len(times):
        if values[i] < below:
            start = i if start is None else start
            if times[i] - times[start] >= for_s and (not fired or fired[-1] < times[start]):
                fired.append(times[i])
        else:
            start = None
        i += 1
    return fired


def test_alert_accepts_a_correct_rule_written_differently():
    result = checks.idle_alert(alert_by_index)
    assert result.passed, result.text()


def test_alert_accepts_a_tuple_answer():
    result = checks.idle_alert(lambda *a: tuple(alert_by_index(*a)))
    assert result.passed, result.text()


def test_alert_firing_at_every_sample_fails_with_its_hint():
    def every(times, values, below, for_s):
        out, since = [], None
        for t, v in zip(times, values):
            since = (t if since is None else since) if v < below else None
            if since is not None and t - since >= for_s:
                out.append(t)
        return out

    result = checks.idle_alert(every)
    assert result.status == checks.FAILED and "once per stretch" in details(result)


def test_alert_at_or_below_fails_with_its_hint():
    result = checks.idle_alert(lambda t, v, b, f: alert_by_index(t, [x - 1e-6 if x == b else x for x in v], b, f))
    assert result.status == checks.FAILED and "values < below" in details(result)


def test_alert_that_never_resets_fails_with_its_hint():
    def cumulative(times, values, below, for_s):
        out, total, last = [], 0.0, None
        for t, v in zip(times, values):
            if v < below:
                total += 0.0 if last is None else t - last
                last = t
                if not out and total >= for_s:
                    out.append(t)
        return out

    result = checks.idle_alert(cumulative)
    assert result.status == checks.FAILED and "continuous" in details(result)


def test_alert_counting_samples_fails_with_its_hint():
    def by_count(times, values, below, for_s):
        out, run = [], 0
        for t, v in zip(times, values):
            run = run + 1 if v < below else 0
            if run == int(for_s) + 1:
                out.append(t)
        return out

    result = checks.idle_alert(by_count)
    assert result.status == checks.FAILED and "in seconds" in details(result)


def test_alert_placeholder_is_not_attempted():
    assert checks.idle_alert(None).status == checks.NOT_ATTEMPTED
    assert checks.idle_alert(lambda *a: None).status == checks.NOT_ATTEMPTED
