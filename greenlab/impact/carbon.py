"""Energy to CO2e: a cited grid-intensity table, PUE, region what-ifs, equivalents.

Carbon here is arithmetic on cited data (no network access, ever):

    grams CO2e = energy [kWh] x grid intensity [g CO2e/kWh] x PUE

The intensity table is package data, ``greenlab/cited_tables/carbon_intensity.csv`` (one source
and year for every row; see the README there). Units: joules in, grams out.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass
from pathlib import Path

from greenlab.base import tables
# where the cited tables are (carbon.data_dir() as before)
from greenlab.base.paths import tables_dir as data_dir  # noqa: F401
from greenlab.base.validation import ArgumentTypeError
from greenlab.base.units import JOULES_PER_KWH, format_scaled


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
    if not isinstance(region, str):
        raise ArgumentTypeError(f"region must be a code or name such as 'WORLD', 'FRA', 'FR' or "
                                f"'France', got {region!r} ({type(region).__name__})")
    if not region.strip():
        raise ValueError(f"region must be a code or name such as 'WORLD', 'FRA', 'FR' or 'France', got {region!r}")
    table = regions()
    wanted = region.strip().lower()
    alpha3 = _alpha2_to_alpha3().get(wanted.upper()) if len(wanted) == 2 else None
    for row in table:
        if row.code.lower() == wanted or row.name.lower() == wanted:
            return row
    for row in table:
        if alpha3 is not None and row.code == alpha3:
            return row
    candidates = [r.code for r in table] + [r.name for r in table]
    lowered = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(wanted, list(lowered), n=5, cutoff=0.5)
    hint = ", ".join(lowered[c] for c in close) if close else "none; see greenlab.impact.carbon.regions()"
    raise ValueError(f"unknown region {region!r} (region must be a code or name in "
                     f"greenlab.impact.carbon.regions(), or a two-letter ISO code); closest matches: {hint}")


def check_region(region) -> None:
    """Refuse an unknown ``region`` (ValueError/TypeError naming it) before any work starts. A
    table that cannot be read is left for the point where CO2e is computed, so work that does
    not need it is not stopped by it."""
    if isinstance(region, Region):
        return
    if not isinstance(region, str) or not region.strip():
        intensity(region)  # raises, naming the argument
    try:
        regions()
    except (OSError, ValueError):
        return
    intensity(region)


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
    _check_pue(pue)
    if codes is None:
        chosen = sorted(regions(), key=lambda r: r.g_per_kwh)
    else:
        if isinstance(codes, (str, Region)) or not isinstance(codes, (list, tuple)):
            raise ArgumentTypeError(f"codes must be a list of region codes such as ['FRA', 'POL'] "
                                    f"(or None for all), got {codes!r}")
        if not codes:
            raise ValueError("codes must name at least one region (or be None for all)")
        chosen = []
        for i, code in enumerate(codes):
            try:
                chosen.append(intensity(code))
            except ValueError as exc:  # name the list entry (TypeErrors here are ValueErrors too)
                raise type(exc)(f"codes[{i}]: {exc}") from None
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
    """Readable mass: '12.3 g', '4.56 kg', '7.8 t', '0.42 mg' (three significant figures, never
    an exponent; below 1 g in milligrams)."""
    grams = _non_negative(grams, "grams")
    return format_scaled(grams, ((1e6, "t"), (1e3, "kg"), (1.0, "g"), (1e-3, "mg")))


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


def _load_regions(path: str) -> tuple[Region, ...]:
    """The intensity table, read again only when the file changes (so a repaired file is seen)."""
    file = Path(path)
    try:
        stamp = file.stat().st_mtime_ns, file.stat().st_size
    except OSError:
        stamp = None
    return _load_regions_cached(path, stamp)


@functools.lru_cache(maxsize=8)
def _load_regions_cached(path: str, stamp) -> tuple[Region, ...]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"carbon intensity table not found at {file}; set GREENLAB_DATA_DIR to the folder holding it"
        )
    rows = []
    seen = set()
    for record in tables.read_table(file, _COLUMNS):
        code = record["code"]
        if code.upper() in seen:
            raise tables.DataTableError(f"{file} line {record['_line']}: region code {code!r} appears twice")
        seen.add(code.upper())
        rows.append(
            Region(
                code=code,
                name=record["name"],
                g_per_kwh=tables.number(record, "g_co2e_per_kwh", file, low=0.0),
                year=tables.integer(record, "year", file),
                source=record["source"],
            )
        )
    return tuple(rows)


_COLUMNS = ("code", "name", "g_co2e_per_kwh", "year", "source")


def _alpha2_to_alpha3() -> dict:
    """Two-letter ISO 3166-1 codes to the three-letter codes the table uses
    (``cited_tables/iso3166_alpha2.csv``); empty when that table is missing."""
    path = data_dir() / "iso3166_alpha2.csv"
    if not path.is_file():
        return {}
    return dict(_load_alpha2(str(path)))


@functools.lru_cache(maxsize=4)
def _load_alpha2(path: str) -> tuple:
    return tuple((r["alpha2"].upper(), r["alpha3"].upper())
                 for r in tables.read_table(path, ("alpha2", "alpha3", "name", "source", "year")))


def _non_negative(value: float, name: str) -> float:
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        raise ArgumentTypeError(f"{name} must be a finite number >= 0, got {value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except (OverflowError, TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _check_pue(pue: float | None) -> float:
    if pue is None:
        return DEFAULT_PUE
    if isinstance(pue, (bool, str, bytes)) or not hasattr(pue, "__float__"):
        raise ArgumentTypeError(f"pue must be a finite number >= 1.0 (or None), got {pue!r} ({type(pue).__name__})")
    try:
        number = float(pue)
    except (OverflowError, TypeError, ValueError):
        raise ValueError(f"pue must be a finite number >= 1.0, got {pue!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 1.0:
        raise ValueError(f"pue must be a finite number >= 1.0 (PUE is total/IT energy), got {pue!r}")
    return number
