"""Golden values for greenlab.base.units (1 kWh = 3.6 MJ, 1 Wh = 3600 J, 1 kg = 1000 g)."""

import pytest

from greenlab.base import units


def test_joules_kwh_golden():
    assert units.joules_to_kwh(3.6e6) == 1.0
    assert units.joules_to_kwh(1800.0) == pytest.approx(0.0005)
    assert units.kwh_to_joules(1.0) == 3.6e6
    assert units.kwh_to_joules(0.25) == 900_000.0


def test_joules_wh_golden():
    assert units.joules_to_wh(3600.0) == 1.0
    assert units.wh_to_joules(2.0) == 7200.0


def test_grams_kilograms_golden():
    assert units.g_to_kg(1500.0) == 1.5
    assert units.kg_to_g(0.25) == 250.0


@pytest.mark.parametrize("value", [0.0, 1e-9, 12.5, 7.3e8])
def test_round_trips(value):
    assert units.kwh_to_joules(units.joules_to_kwh(value)) == pytest.approx(value)
    assert units.wh_to_joules(units.joules_to_wh(value)) == pytest.approx(value)
    assert units.kg_to_g(units.g_to_kg(value)) == pytest.approx(value)


def test_format_energy_picks_a_readable_unit():
    from greenlab.base.units import format_energy

    assert format_energy(512) == "512 J"
    assert format_energy(3600) == "3.6 kJ"
    assert format_energy(1.2e6) == "1.2 MJ"
    assert format_energy(0.0123) == "0.0123 J"


@pytest.mark.parametrize("joules, text", [
    (0, "0 J"), (999.7, "1 kJ"), (999.4, "999 J"), (999_999.9, "1 MJ"), (1.2e-5, "0.000012 J"),
    (5e9, "5,000 MJ"), (-3600, "-3.6 kJ")])
def test_format_energy_never_writes_an_exponent_and_rounds_before_it_picks_the_unit(joules, text):
    # '.3g' wrote 999.7 J as '1e+03 J' and 1.2e-5 J as '1.2e-05 J', which a statement reader cannot read
    assert units.format_energy(joules) == text


def test_format_energy_small_units_for_tables():
    assert units.format_energy(0.00213, small_units=True) == "2.13 mJ"
    assert units.format_energy(0.000213, small_units=True) == "213 µJ"
    assert units.format_energy(1.2e-5, small_units=True) == "12 µJ"
    assert units.format_energy(0.0, small_units=True) == "0 J"
    assert units.format_energy(4.1, small_units=True) == "4.1 J"


@pytest.mark.parametrize("value, figures, text", [
    (0.0000123456, 3, "0.0000123"), (3.6, 3, "3.6"), (12_345, 3, "12,300"), (1.0, 3, "1"),
    (0.5, 1, "0.5"), (-0.00456, 2, "-0.0046"), (0.0, 3, "0"), (float("nan"), 3, "nan"), (float("-inf"), 3, "-inf")])
def test_plain_number(value, figures, text):
    assert units.plain_number(value, figures) == text


def test_format_scaled_and_its_bad_input():
    assert units.format_scaled(4560, ((1e3, "kg"), (1, "g"))) == "4.56 kg"
    assert units.format_scaled(0.5, ((1e3, "kg"), (1, "g"))) == "0.5 g"
    with pytest.raises(ValueError, match="units"):
        units.format_scaled(1.0, ())
    with pytest.raises(ValueError, match="figures"):
        units.plain_number(1.0, 0)
    with pytest.raises(TypeError, match="value"):
        units.plain_number("12")


def test_format_bytes_writes_binary_units():
    from greenlab.base.units import format_bytes

    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 2**20) == "3 MiB"
    assert format_bytes(1_000_000) == "977 KiB"  # a decimal megabyte is under one MiB
    assert format_bytes(2**30 * 1.25) == "1.25 GiB"
    assert format_bytes(2**19, unit="MiB") == "0.5 MiB"
    with pytest.raises(ValueError, match="unit"):
        format_bytes(1, unit="MB")
