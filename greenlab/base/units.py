"""Unit conversions for energy (J, Wh, kWh) and mass (g, kg), and readable figures (energy, bytes). Inputs must be finite real numbers
(negative values are allowed: differences convert too); anything else raises a ValueError or
TypeError naming the argument.

1 Wh = 3600 J and 1 kWh = 3.6e6 J by definition of the watt-hour; 1 kg = 1000 g.
"""

from __future__ import annotations

import math

from greenlab.base.validation import flag as _flag
from greenlab.base.validation import integer as _integer
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


def format_energy(joules: float, small_units: bool = False) -> str:
    """Energy for people: "512 J", "3.6 kJ", "1.2 MJ", "0.0123 J" (three significant figures,
    never an exponent). ``small_units``: below 1 J write mJ and µJ ("2.13 mJ"), for tables read
    by people who know them; a statement for a general reader keeps J."""
    joules = _number("joules", joules)
    small_units = _flag("small_units", small_units)  # a truthy string chose a unit ladder silently
    ladder = _ENERGY_UNITS + (_SMALL_ENERGY_UNITS if small_units else ())
    return format_scaled(joules, ladder)


BYTES_UNITS = ((2.0 ** 30, "GiB"), (2.0 ** 20, "MiB"), (2.0 ** 10, "KiB"), (1.0, "B"))


def format_bytes(nbytes: float, unit: str | None = None, figures: int = 3) -> str:
    """Bytes for people, in binary units (1 KiB = 1024 B, 1 MiB = 2**20 B, 1 GiB = 2**30 B), the
    one unit family the course uses for memory and payloads: "1.5 MiB", "512 B". ``unit``
    ("B", "KiB", "MiB" or "GiB") fixes the unit, for a column of a table."""
    nbytes = _number("nbytes", nbytes, low=0)  # a size: no memory or payload holds fewer than 0 bytes
    figures = _integer("figures", figures, low=1, high=15)
    if unit is None:
        return format_scaled(nbytes, BYTES_UNITS, figures)
    scales = {name: scale for scale, name in BYTES_UNITS}
    if not isinstance(unit, str) or unit not in scales:
        raise ValueError(f"unit must be one of {sorted(scales)}, got {unit!r}")
    return f"{plain_number(nbytes / scales[unit], figures)} {unit}"


def format_scaled(value: float, units, figures: int = 3) -> str:
    """``value`` in the largest of ``units`` ((scale, name) pairs, largest first) in which it
    reads at least 1 once rounded, else in the last: ``format_scaled(4560, ((1e3, "kg"), (1, "g")))``
    gives "4.56 kg", and 999.7 g gives "1 kg", not "1e+03 g". Zero reads in the unit of scale 1
    when there is one ("0 J", not "0 µJ")."""
    value = _number("value", value)
    figures = _integer("figures", figures, low=1, high=15)
    units = tuple(units)
    if not units:
        raise ValueError("units must hold at least one (scale, name) pair, e.g. ((1e3, 'kJ'), (1, 'J'))")
    if value == 0:
        return f"0 {next((name for scale, name in units if scale == 1), units[-1][1])}"
    for scale, name in units:
        if abs(_round_figures(value / scale, figures)) >= 1:
            return f"{plain_number(value / scale, figures)} {name}"
    scale, name = units[-1]
    return f"{plain_number(value / scale, figures)} {name}"


def plain_number(value: float, figures: int = 3) -> str:
    """``value`` rounded to ``figures`` significant figures and written out, never with an
    exponent, thousands separated, trailing zeros dropped: "0.0000123", "3.6", "12,300". A value
    that is not finite reads as Python writes it ("nan", "inf"): a summary shows it, never fails."""
    figures = _integer("figures", figures, low=1, high=15)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    value = _number("value", value)
    rounded = _round_figures(value, figures)
    if rounded == 0:
        return "0"
    if not math.isfinite(rounded):  # the largest floats round up past the largest float
        return f"{value:.{figures}g}"
    decimals = max(0, figures - 1 - math.floor(math.log10(abs(rounded))))
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


# --- helpers ------------------------------------------------------------------------------------

_ENERGY_UNITS = ((1e6, "MJ"), (1e3, "kJ"), (1.0, "J"))
_SMALL_ENERGY_UNITS = ((1e-3, "mJ"), (1e-6, "µJ"))


def _round_figures(value: float, figures: int) -> float:
    return float(f"{value:.{figures - 1}e}")
