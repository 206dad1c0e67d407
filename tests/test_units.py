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
