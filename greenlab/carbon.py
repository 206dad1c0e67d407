"""Energy to CO2e: a cited grid-intensity table, PUE, region what-ifs, equivalents.

Carbon here is arithmetic on cited data (no network access, ever):

    grams CO2e = energy [kWh] x grid intensity [g CO2e/kWh] x PUE

The intensity table lives in ``data/carbon_intensity.csv`` (one source and
year for every row; see ``data/README.md``). Units: joules in, grams out.
"""

from __future__ import annotations

import csv
import difflib
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from greenlab.config import data_dir  # the one place that knows where data/ is
from greenlab.units import JOULES_PER_KWH


DEFAULT_PUE = 1.0
"""Power usage effectiveness used when none is given: 1.0 means the machine
itself, no facility overhead (cooling, power distribution). PUE is total
facility energy divided by IT energy, so it is >= 1 by definition. Pass a
figure from ``PUE_REFERENCES`` (or your data centre's own) to include the
building."""


@dataclass(frozen=True)
class PueReference:
    """A published PUE figure with its source and year."""

    name: str
    pue: float
    year: int
    source: str


PUE_REFERENCES: tuple[PueReference, ...] = (
    PueReference(
        name="industry average (Uptime Institute survey)",
        pue=1.58,
        year=2023,
        source="Uptime Institute Global Data Center Survey 2023; Uptime Intelligence "
        "update 'Large data centers are mostly more efficient, analysis confirms' (Nov 2023)",
    ),
    PueReference(
        name="Google data centres, fleet annual average",
        pue=1.10,
        year=2023,
        source="Google 2024 Environmental Report (average annual PUE of its data centres in 2023)",
    ),
)


@dataclass(frozen=True)
class Region:
    """One grid: ``g_per_kwh`` is grams CO2e per kWh of electricity generated."""

    code: str
    name: str
    g_per_kwh: float
    year: int
    source: str


@dataclass(frozen=True)
class Equivalent:
    """A plain-language comparison: ``value`` ``unit`` for the given grams."""

    label: str
    value: float
    unit: str
    grams_per_unit: float
    source: str

    def __str__(self) -> str:
        return f"{self.value:.3g} {self.unit} ({self.label})"


@dataclass(frozen=True)
class RegionCO2e:
    """Result row of ``compare_regions``: a region and the grams it implies."""

    region: Region
    g_co2e: float


# --- public API ---------------------------------------------------------------


def regions() -> list[Region]:
    """All regions in the intensity table, in file order."""
    return list(_load_regions(str(data_dir() / "carbon_intensity.csv")))


def intensity(region: str | Region = "WORLD") -> Region:
    """Look up a region by code or name (case-insensitive).

    Unknown names raise ValueError naming the closest codes and names.
    """
    if isinstance(region, Region):
        return region
    if not isinstance(region, str) or not region.strip():
        raise ValueError(f"region must be a code or name such as 'WORLD' or 'France', got {region!r}")
    table = regions()
    wanted = region.strip().lower()
    for row in table:
        if row.code.lower() == wanted or row.name.lower() == wanted:
            return row
    candidates = [r.code for r in table] + [r.name for r in table]
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(wanted, list(lowered), n=5, cutoff=0.5)
    hint = ", ".join(lowered[c] for c in close) if close else "none; see greenlab.carbon.regions()"
    raise ValueError(f"unknown region {region!r}; closest matches: {hint}")


def co2e_g(joules: float, region: str | Region = "WORLD", pue: float | None = None) -> float:
    """Grams CO2e for ``joules`` of IT energy in ``region``, times PUE.

    ``pue=None`` uses ``DEFAULT_PUE`` (1.0: the machine itself, no facility overhead).
    """
    joules = _non_negative(joules, "joules")
    factor = _check_pue(pue)
    grid = intensity(region)
    return joules / JOULES_PER_KWH * grid.g_per_kwh * factor


def compare_regions(
    joules: float, codes: list[str] | None = None, pue: float | None = None
) -> list[RegionCO2e]:
    """What-if: grams CO2e of the same energy in several regions.

    ``codes=None`` compares every region, lowest first; otherwise keeps the given order.
    """
    joules = _non_negative(joules, "joules")
    if codes is None:
        chosen = sorted(regions(), key=lambda r: r.g_per_kwh)
    else:
        chosen = [intensity(c) for c in codes]
    return [RegionCO2e(region=r, g_co2e=co2e_g(joules, r, pue)) for r in chosen]


def equivalents(g_co2e: float) -> list[Equivalent]:
    """Plain-language comparisons for ``g_co2e`` grams, each with its cited factor.

    All factors are tailpipe CO2 of a typical US gasoline passenger vehicle from
    US EPA fact sheet EPA-420-F-23-014 (June 2023): 8,887 g CO2 per gallon,
    22.0 miles per gallon, 4.6 t CO2 per year.
    """
    grams = _non_negative(g_co2e, "g_co2e")
    return [Equivalent(label=label, value=grams / per_unit, unit=unit, grams_per_unit=per_unit, source=src)
            for label, unit, per_unit, src in _EQUIVALENT_FACTORS]


def format_mass(grams: float) -> str:
    """Readable mass: '12.3 g', '4.56 kg', '7.8 t' (three significant figures)."""
    grams = _non_negative(grams, "grams")
    if grams < 1_000:
        return f"{grams:.3g} g"
    if grams < 1_000_000:
        return f"{grams / 1_000:.3g} kg"
    tonnes = grams / 1_000_000
    if tonnes < 1_000:
        return f"{tonnes:.3g} t"
    return f"{tonnes:,.0f} t"


# --- helpers ------------------------------------------------------------------

_EPA_2023 = "US EPA, 'Tailpipe Greenhouse Gas Emissions from a Typical Passenger Vehicle', EPA-420-F-23-014, June 2023"
_G_PER_GALLON = 8_887.0
_MILES_PER_GALLON = 22.0
_KM_PER_MILE = 1.609344
_LITRES_PER_GALLON = 3.785411784
_TONNES_PER_CAR_YEAR = 4.6

_EQUIVALENT_FACTORS: tuple[tuple[str, str, float, str], ...] = (
    (
        "driving a typical US gasoline passenger car",
        "km",
        _G_PER_GALLON / _MILES_PER_GALLON / _KM_PER_MILE,  # ~251 g CO2 per km
        _EPA_2023 + "; 8,887 g/gallon at 22.0 mpg",
    ),
    (
        "gasoline burned",
        "litres",
        _G_PER_GALLON / _LITRES_PER_GALLON,  # ~2,348 g CO2 per litre
        _EPA_2023 + "; 8,887 g CO2 per gallon",
    ),
    (
        "of a typical US passenger car's driving",
        "days",
        _TONNES_PER_CAR_YEAR * 1e6 / 365.0,  # ~12.6 kg CO2 per day
        _EPA_2023 + "; 4.6 t CO2 per vehicle-year",
    ),
)


@functools.lru_cache(maxsize=8)
def _load_regions(path: str) -> tuple[Region, ...]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"carbon intensity table not found at {file}; set GREENLAB_DATA_DIR to the folder holding it"
        )
    rows = []
    with file.open(newline="", encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            rows.append(
                Region(
                    code=record["code"].strip(),
                    name=record["name"].strip(),
                    g_per_kwh=float(record["g_co2e_per_kwh"]),
                    year=int(record["year"]),
                    source=record["source"].strip(),
                )
            )
    return tuple(rows)


def _non_negative(value: float, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-negative number, got {value!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _check_pue(pue: float | None) -> float:
    if pue is None:
        return DEFAULT_PUE
    try:
        number = float(pue)
    except (TypeError, ValueError):
        raise ValueError(f"pue must be a number >= 1.0, got {pue!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 1.0:
        raise ValueError(f"pue must be a finite number >= 1.0 (PUE is total/IT energy), got {pue!r}")
    return number
