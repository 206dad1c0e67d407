"""Tests for greenlab.carbon: golden arithmetic, table integrity, errors."""

import csv
import math

import pytest

import greenlab as gl
from greenlab.impact import carbon


def _write_table(folder, rows):
    path = folder / "carbon_intensity.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["code", "name", "g_co2e_per_kwh", "year", "source"])
        writer.writerows(rows)
    return path


@pytest.fixture
def fake_table(tmp_path, monkeypatch):
    _write_table(tmp_path, [["WORLD", "World", "500", "2024", "test"], ["FRA", "France", "40", "2024", "test"]])
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path))
    return tmp_path


# --- golden arithmetic (fake table so the numbers are exact) ---------------------


def test_one_kwh_at_500_g_per_kwh_is_500_g(fake_table):
    assert carbon.co2e_g(3.6e6, "WORLD", pue=1.0) == pytest.approx(500.0)


def test_pue_multiplies(fake_table):
    assert carbon.co2e_g(3.6e6, "WORLD", pue=1.5) == pytest.approx(750.0)


def test_default_pue_is_one(fake_table):
    assert carbon.DEFAULT_PUE == 1.0
    assert carbon.co2e_g(3.6e6, "WORLD") == pytest.approx(500.0)


def test_zero_joules_is_zero_grams(fake_table):
    assert carbon.co2e_g(0.0, "FRA") == 0.0


def test_lookup_is_case_insensitive_by_code_and_name(fake_table):
    assert carbon.intensity("fra").g_per_kwh == 40.0
    assert carbon.intensity("FRANCE").code == "FRA"
    assert carbon.co2e_g(7.2e6, "france") == pytest.approx(80.0)


def test_compare_regions_keeps_order_and_scales(fake_table):
    rows = carbon.compare_regions(3.6e6, ["FRA", "WORLD"], pue=2.0)
    assert [r.region.code for r in rows] == ["FRA", "WORLD"]
    assert [r.g_co2e for r in rows] == pytest.approx([80.0, 1000.0])


def test_compare_all_regions_sorted_lowest_first(fake_table):
    rows = carbon.compare_regions(1.0)
    values = [r.g_co2e for r in rows]
    assert values == sorted(values)


# --- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("joules", [-1.0, float("nan"), float("inf"), "abc", None])
def test_bad_joules_raise(fake_table, joules):
    with pytest.raises(ValueError, match="joules"):
        carbon.co2e_g(joules, "WORLD")


@pytest.mark.parametrize("pue", [0.99, 0.0, -1.0, float("nan"), "x"])
def test_pue_below_one_raises(fake_table, pue):
    with pytest.raises(ValueError, match="pue"):
        carbon.co2e_g(1.0, "WORLD", pue=pue)


def test_unknown_region_names_close_matches():
    with pytest.raises(ValueError) as info:
        carbon.intensity("Germny")
    message = str(info.value)
    assert "Germny" in message and "Germany" in message


def test_unknown_code_names_close_matches():
    with pytest.raises(ValueError, match="USA"):
        carbon.intensity("USAA")


def test_missing_table_says_how_to_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="GREENLAB_DATA_DIR"):
        carbon.regions()


# --- the real table ---------------------------------------------------------------


def test_data_dir_is_package_relative_by_default(monkeypatch):
    monkeypatch.delenv("GREENLAB_DATA_DIR", raising=False)
    assert (carbon.data_dir() / "carbon_intensity.csv").is_file()


def test_table_integrity():
    table = carbon.regions()
    codes = [r.code for r in table]
    names = [r.name.lower() for r in table]
    assert len(table) >= 42
    assert "WORLD" in codes and "EU" in codes
    assert len(codes) - 2 >= 40  # countries besides WORLD and EU
    assert len(set(codes)) == len(codes), "duplicate codes"
    assert len(set(names)) == len(names), "duplicate names"
    years = {r.year for r in table}
    assert years == {2024}, "one consistent year"
    for r in table:
        assert r.source.strip(), r.code
        assert 1990 <= r.year <= 2030
        assert 5.0 <= r.g_per_kwh <= 1200.0, (r.code, r.g_per_kwh)


def test_world_figure_is_in_the_publicly_quoted_range():
    world = carbon.intensity("WORLD").g_per_kwh
    assert 400.0 <= world <= 500.0


def test_known_ordering_low_and_high_carbon_grids():
    assert carbon.intensity("NOR").g_per_kwh < carbon.intensity("WORLD").g_per_kwh < carbon.intensity("IND").g_per_kwh


# --- PUE references, equivalents, formatting ------------------------------------------


def test_pue_references_are_cited_and_valid():
    assert len(carbon.PUE_REFERENCES) >= 2
    for ref in carbon.PUE_REFERENCES:
        assert ref.pue >= 1.0 and ref.year >= 2015 and ref.source


def test_equivalents_are_cited_and_linear():
    one = carbon.equivalents(1000.0)
    two = carbon.equivalents(2000.0)
    assert len(one) >= 2
    for a, b in zip(one, two):
        assert a.source and "EPA" in a.source
        assert b.value == pytest.approx(2 * a.value)
        assert a.value * a.grams_per_unit == pytest.approx(1000.0)


def test_car_km_factor_matches_epa_inputs():
    km = next(e for e in carbon.equivalents(8887.0) if e.unit == "km")
    # 8,887 g is one gallon; at 22.0 mpg that is 22 miles.
    assert km.value == pytest.approx(22.0 * 1.609344)


def test_equivalents_reject_negative():
    with pytest.raises(ValueError):
        carbon.equivalents(-1.0)


@pytest.mark.parametrize(
    "grams, text",
    [(0.0, "0 g"), (12.3, "12.3 g"), (999.0, "999 g"), (4560.0, "4.56 kg"), (7.8e6, "7.8 t"), (2.5e9, "2,500 t"),
     (0.5, "500 mg"), (2e-5, "0.02 mg"), (999.7, "1 kg"), (0.9996, "1 g")],  # never an exponent ('2e-05 g')
)
def test_format_mass(grams, text):
    assert carbon.format_mass(grams) == text


def test_format_mass_rejects_negative():
    with pytest.raises(ValueError):
        carbon.format_mass(-5)


def test_package_reexports():
    assert gl.co2e_g is carbon.co2e_g
    assert gl.carbon is carbon
    assert math.isclose(gl.co2e_g(0.0), 0.0)
