"""Carbon-aware scheduling: best window arithmetic, wrap-around, validation, shipped data."""

import math

import pytest

from greenlab.impact import scheduling


def test_best_window_picks_lowest_mean_and_reports_saving():
    values = [300, 200, 100, 50, 60, 400]
    result = scheduling.best_window(values, 2, now=0)
    assert result.best.start_hour == 3
    assert result.best.hours == (3, 4)
    assert result.best.mean_g_per_kwh == pytest.approx(55.0)
    assert result.reference.mean_g_per_kwh == pytest.approx(250.0)
    assert result.saving_g_per_kwh == pytest.approx(195.0)
    assert result.saving_fraction == pytest.approx(195.0 / 250.0)


def test_wrap_lets_a_window_cross_midnight():
    values = [10, 500, 500, 500, 500, 10]
    plain = scheduling.best_window(values, 2)
    wrapped = scheduling.best_window(values, 2, wrap=True)
    assert plain.best.mean_g_per_kwh == pytest.approx(255.0)
    assert wrapped.best.start_hour == 5
    assert wrapped.best.hours == (5, 0)
    assert wrapped.best.mean_g_per_kwh == pytest.approx(10.0)


def test_ties_go_to_earliest_hour_and_full_length_window_saves_nothing():
    values = [0.1, 0.2, 0.3] * 8
    result = scheduling.best_window(values, 24, wrap=True, now=7)
    assert result.best.start_hour == 0
    assert result.saving_g_per_kwh == 0.0
    assert scheduling.best_window([5, 1, 1, 5], 1).best.start_hour == 1


def test_grams_for_a_job_follow_the_window_means():
    result = scheduling.best_window([100, 400], 1, now=1)
    grams = result.grams(3.6e6)  # 1 kWh
    assert grams == {"best": pytest.approx(100.0), "reference": pytest.approx(400.0), "saved": pytest.approx(300.0)}
    assert result.grams(3.6e6, pue=1.5)["best"] == pytest.approx(150.0)
    with pytest.raises(ValueError):
        result.grams(-1)


def test_window_means_lists_every_start():
    assert scheduling.window_means([1, 2, 3, 4], 2) == pytest.approx([1.5, 2.5, 3.5])
    assert scheduling.window_means([1, 2, 3, 4], 2, wrap=True) == pytest.approx([1.5, 2.5, 3.5, 2.5])


@pytest.mark.parametrize("values, message", [
    ([1, None, 3], "hour 1 is missing"),
    ([1, float("nan"), 3], "hour 1 is nan"),
    ([1, 2, -3], "hour 2 is negative"),
    ([1, float("inf")], "finite"),
    ([1, "x"], "not a number"),
    ([], "empty"),
])
def test_bad_values_raise(values, message):
    with pytest.raises(ValueError, match=message):
        scheduling.best_window(values, 1)


@pytest.mark.parametrize("hours", [0, 5, -1, 1.5, True])
def test_hours_needed_outside_range_raises(hours):
    with pytest.raises(ValueError, match="hours_needed must be a whole number of hours from 1 to 4"):
        scheduling.best_window([1, 2, 3, 4], hours)


def test_now_must_be_a_valid_start():
    with pytest.raises(ValueError, match="now must be a start hour from 0 to 2"):
        scheduling.best_window([1, 2, 3, 4], 2, now=3)
    assert scheduling.best_window([1, 2, 3, 4], 2, wrap=True, now=3).reference.hours == (3, 0)


def test_shipped_profile_is_a_cited_day_of_24_hours():
    assert "gb_2023-03-14" in scheduling.profiles()
    prof = scheduling.load_profile("gb_2023-03-14")
    assert len(prof) == 24
    assert prof.unit == "gCO2/kWh"
    assert prof.kind == "average"
    assert "Carbon Intensity API" in prof.source and "CC BY 4.0" in prof.source
    assert prof.start == "2023-03-14T00:00Z"
    assert all(v > 0 for v in prof.g_per_kwh)
    # hour 0 is the mean of the two half-hours 81 and 85 (see the file's columns)
    assert prof.g_per_kwh[0] == pytest.approx(83.0)
    assert prof.mean == pytest.approx(126.3125)


def test_shipped_file_hour_is_mean_of_its_half_hours():
    import csv

    from greenlab.impact import carbon

    path = carbon.data_dir() / "hourly_intensity_gb_2023-03-14.csv"
    rows = list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))
    assert [int(r["hour"]) for r in rows] == list(range(24))
    for r in rows:
        mean = (float(r["first_half_g_co2_per_kwh"]) + float(r["second_half_g_co2_per_kwh"])) / 2
        assert float(r["g_co2_per_kwh"]) == pytest.approx(mean)


def test_unknown_profile_names_the_shipped_ones():
    with pytest.raises(ValueError, match="gb_2023-03-14"):
        scheduling.load_profile("mars")


def test_learner_csv_is_read_and_validated(tmp_path):
    good = tmp_path / "mine.csv"
    good.write_text("# source: my meter\nhour,g_co2e_per_kwh\n0,100\n1,50\n2,75\n")
    prof = scheduling.load_profile(str(good))
    assert prof.g_per_kwh == (100.0, 50.0, 75.0)
    assert prof.unit == "gCO2e/kWh"
    assert prof.source == "my meter"
    assert scheduling.best_window(str(good), 1).best.start_hour == 1

    gap = tmp_path / "gap.csv"
    gap.write_text("hour,g_co2_per_kwh\n0,100\n2,50\n")
    with pytest.raises(ValueError, match="missing hour"):
        scheduling.load_profile(str(gap))

    blank = tmp_path / "blank.csv"
    blank.write_text("hour,g_co2_per_kwh\n0,100\n1,\n")
    with pytest.raises(ValueError, match="hour 1 is missing"):
        scheduling.load_profile(str(blank))

    nan = tmp_path / "nan.csv"
    nan.write_text("g_co2_per_kwh\n1\nnan\n")
    with pytest.raises(ValueError, match="nan"):
        scheduling.load_profile(str(nan))

    wrong = tmp_path / "wrong.csv"
    wrong.write_text("hour,watts\n0,1\n")
    with pytest.raises(ValueError, match="value column"):
        scheduling.load_profile(str(wrong))

    with pytest.raises(ValueError, match="not found"):
        scheduling.load_profile(str(tmp_path / "absent.csv"))


def test_summary_mentions_both_windows():
    text = scheduling.best_window([300, 100, 200], 1, now=0).summary()
    assert "best start hour 1" in text and "start hour 0" in text and "67% lower" in text
    assert math.isclose(scheduling.from_values([1, 3]).mean, 2.0)


def test_best_start_hour_checker_agrees_with_best_window():
    from greenlab.course import checks

    def right(values, hours):  # written here, not the library's: a graded answer must be the learner's own
        means = [sum(values[i:i + hours]) / hours for i in range(len(values) - hours + 1)]
        return means.index(min(means))

    assert right([5, 1, 9, 1, 1, 7], 2) == scheduling.best_window([5, 1, 9, 1, 1, 7], 2).best.start_hour == 3
    assert checks.best_start_hour(right).passed
    assert not checks.best_start_hour(lambda v, h: scheduling.best_window(list(v), h).best.start_hour).passed
    wrong = checks.best_start_hour(lambda values, hours: values.index(min(values)))
    assert wrong.status == "failed" and "whole window" in wrong.text()
    assert checks.best_start_hour(lambda values, hours: None).status == "not attempted"
