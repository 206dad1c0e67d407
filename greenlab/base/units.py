"""Unit conversions for energy (J, Wh, kWh) and mass (g, kg). Inputs must be finite real numbers
(negative values are allowed: differences convert too); anything else raises a ValueError or
TypeError naming the argument.

1 Wh = 3600 J and 1 kWh = 3.6e6 J by definition of the watt-hour; 1 kg = 1000 g.
"""

from __future__ import annotations

from greenlab.base.validation import number as _number

JOULES_PER_WH = 3600.0
JOULES_PER_KWH = 3.6e6
GRAMS_PER_KG = 1000.0


def joules_to_kwh(joules: float) -> float:
    """Joules -> kilowatt-hours."""
    return _number("joules", joules) / JOULES_PER_KWH


def kwh_to_joules(kwh: float) -> float:
    """Kilowatt-hours -> joules."""
    return _number("kwh", kwh) * JOULES_PER_KWH


def joules_to_wh(joules: float) -> float:
    """Joules -> watt-hours."""
    return _number("joules", joules) / JOULES_PER_WH


def wh_to_joules(wh: float) -> float:
    """Watt-hours -> joules."""
    return _number("wh", wh) * JOULES_PER_WH


def g_to_kg(grams: float) -> float:
    """Grams -> kilograms."""
    return _number("grams", grams) / GRAMS_PER_KG


def kg_to_g(kilograms: float) -> float:
    """Kilograms -> grams."""
    return _number("kilograms", kilograms) * GRAMS_PER_KG


def format_energy(joules: float) -> str:
    """Energy for people: "512 J", "3.6 kJ", "1.2 MJ" (three significant figures)."""
    joules = _number("joules", joules)
    for scale, unit in ((1e6, "MJ"), (1e3, "kJ")):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules:.3g} J"
