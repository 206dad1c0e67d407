"""The energy of moving data through the internet, from a cited kWh-per-gigabyte figure
(lesson 15: federated rounds, and an input sent to a data centre).

    figure = network.energy_per_byte()          # the cited figure, with source, year and scope
    network.transfer_joules(3_136_000)         # joules to send 3.1 MB with it (an estimate)
    network.for_year(2026)                      # the cited trend extrapolated to 2026 (labelled)
    network.sensitivity(2026)                   # the figures a verdict should be read across
    network.flips(outcome_at)                   # the kWh/GB at which a verdict changes

The figure is an average over a whole network (``greenlab/cited_tables/network_energy.csv``,
source and year on every row): arithmetic on a published average, never a measurement of this
machine's network card. A dated figure is applied for its year: ``for_year`` follows the
source's own trend (a halving time, ``halving_years``, fitted over ``trend_years``) to the
year asked, and says that it is an extrapolation and how far past the data it reaches. An
average is also not the marginal energy of one more transfer (Mytton, Lundén and Malmodin
2024: a network's power barely follows its traffic), so the low end of a sensitivity range is
near zero, and ``flips`` says which figure would change a verdict.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, replace

from greenlab.base import tables, validation
from greenlab.base.paths import tables_dir
from greenlab.base.units import JOULES_PER_KWH

TABLE = "network_energy.csv"
DEFAULT_KEY = "fixed_line_2015"
BYTES_PER_GB = 1e9  # the figure's gigabyte is 10^9 bytes
_COLUMNS = ("key", "name", "kwh_per_gb", "year", "scope", "source")
_OPTIONAL = ("halving_years", "trend_years")
MARGINAL_NOTE = ("Mytton, Lundén and Malmodin (2024), Network energy use not directly proportional to data "
                 "volume, Journal of Industrial Ecology 28(4):966-980, doi:10.1111/jiec.13512: a network's "
                 "power barely changes with its traffic, so the energy one more transfer adds is far below "
                 "any kWh/GB average")


@dataclass(frozen=True)
class NetworkFigure:
    """A published electricity intensity of data transmission: ``kwh_per_gb`` (kWh per 10^9
    bytes) for ``year``, over the network parts named in ``scope``, from ``source``.
    ``halving_years``: the source's trend (None when it gives none). ``cited_year``: the year of
    the published figure this one was extrapolated from (None when this is the published one)."""

    key: str
    name: str
    kwh_per_gb: float
    year: int
    scope: str
    source: str
    halving_years: float | None = None
    trend_years: str = ""
    cited_year: int | None = None
    cited_kwh_per_gb: float | None = None
    label: str = ""

    @property
    def joules_per_byte(self) -> float:
        """The figure in joules per byte."""
        return self.kwh_per_gb * JOULES_PER_KWH / BYTES_PER_GB

    @property
    def extrapolated(self) -> bool:
        """True when the figure is the source's trend carried to another year, not its published value."""
        return self.cited_year is not None and self.cited_year != self.year

    def cite(self) -> str:
        """One line: the figure, its year and its source, and how it was extrapolated if it was."""
        head = f"{self.kwh_per_gb:.3g} kWh/GB ({_micro(self.joules_per_byte)} per byte), {self.name}, {self.year}"
        if self.label:
            head = f"{self.label}: {head}"
        if not self.extrapolated:
            return f"{head}; published: {self.source}"
        return (f"{head}; an EXTRAPOLATION, not a published figure: {self.cited_kwh_per_gb:g} kWh/GB for "
                f"{self.cited_year}, halving every {self.halving_years:g} years (the source's trend over "
                f"{self.trend_years}) carried {self.year - self.cited_year:+d} years; from: {self.source}")

    def short(self) -> str:
        """A few words for a table or a sentence: "published 2015 average" or "2015 average
        extrapolated to 2026 (the source's trend)"."""
        if self.extrapolated:
            return f"{self.cited_year} average extrapolated to {self.year} along the source's trend"
        return f"published {self.year} average"

    def at(self, kwh_per_gb: float, label: str = "") -> NetworkFigure:
        """The same figure with another intensity (for a sensitivity range or a flip search)."""
        kwh_per_gb = validation.number("kwh_per_gb", kwh_per_gb, low=0)
        return replace(self, kwh_per_gb=kwh_per_gb, label=label)


def figures() -> list[NetworkFigure]:
    """Every row of the cited table."""
    path = tables_dir() / TABLE
    out = []
    for row in tables.read_table(path, _COLUMNS, optional=_OPTIONAL):
        halving = tables.number(row, "halving_years", path, low=0.0) if row.get("halving_years") else None
        out.append(NetworkFigure(key=row["key"], name=row["name"],
                                 kwh_per_gb=tables.number(row, "kwh_per_gb", path, low=0.0),
                                 year=tables.integer(row, "year", path), scope=row["scope"],
                                 source=row["source"], halving_years=halving or None,
                                 trend_years=row.get("trend_years", "")))
    return out


def energy_per_byte(key: str = DEFAULT_KEY) -> NetworkFigure:
    """The cited figure named ``key`` (default: Aslan et al. 2018's fixed-line figure for 2015)."""
    found = {f.key: f for f in figures()}
    if not isinstance(key, str) or key not in found:
        raise ValueError(f"key must be one of {sorted(found)}, got {key!r}")
    return found[key]


def for_year(year: int | None = None, figure: NetworkFigure | None = None) -> NetworkFigure:
    """``figure`` (default ``energy_per_byte()``) carried along its source's trend to ``year``
    (default this year): kwh_per_gb x 0.5 ** ((year - figure.year) / halving_years). The result
    says it is an extrapolation (``extrapolated``, ``cite()``). A figure without a trend raises."""
    figure = energy_per_byte() if figure is None else _figure(figure)
    year = datetime.date.today().year if year is None else validation.integer("year", year, low=1990, high=2200)
    if figure.extrapolated:
        raise ValueError("figure is already an extrapolation; pass the published figure")
    if year == figure.year:
        return figure
    if not figure.halving_years:
        raise ValueError(f"{figure.key} carries no trend (halving_years), so it cannot be applied to {year}")
    value = figure.kwh_per_gb * 0.5 ** ((year - figure.year) / figure.halving_years)
    return replace(figure, kwh_per_gb=value, year=year, cited_year=figure.year,
                   cited_kwh_per_gb=figure.kwh_per_gb, label="the source's trend")


def sensitivity(year: int | None = None, figure: NetworkFigure | None = None) -> dict:
    """The figures a verdict that rests on the network should be read across, lowest first:
    ``"trend"`` (``for_year(year)``, the central value) and ``"no_improvement"`` (the published
    figure unchanged since its year: a high end). The marginal energy of a transfer lies below
    both (``MARGINAL_NOTE``) and has no cited per-byte value here; ``flips`` gives the figure at
    which a verdict changes, to read against all three."""
    figure = energy_per_byte() if figure is None else _figure(figure)
    trend = for_year(year, figure)
    high = replace(figure, label=f"no improvement since {figure.year}, a high end")
    return {"trend": trend, "no_improvement": high}


@dataclass(frozen=True)
class Flip:
    """Where an outcome changes as the network figure grows: between ``below`` (at figures
    under ``kwh_per_gb``) and ``above`` (over it)."""

    kwh_per_gb: float
    below: str
    above: str

    def sentence(self) -> str:
        return f"'{self.below}' below about {self.kwh_per_gb:.2g} kWh/GB, '{self.above}' above it"


def flips(outcome_at, figure: NetworkFigure | None = None, low_kwh_per_gb: float = 1e-6,
          high_kwh_per_gb: float = 10.0, points: int = 57) -> list[Flip]:
    """The network figures (kWh/GB, between ``low_kwh_per_gb`` and ``high_kwh_per_gb``) at which
    ``outcome_at(figure) -> str`` changes: a scan over ``points`` figures evenly spaced on a log
    scale, each change refined by bisection to 1% (two changes between
    neighbouring scan points are both found while the bisection sees the middle outcome). An empty list: no change in the range."""
    figure = energy_per_byte() if figure is None else _figure(figure)
    low = validation.number("low_kwh_per_gb", low_kwh_per_gb, low=0, low_open=True)
    high = validation.number("high_kwh_per_gb", high_kwh_per_gb, low=low, low_open=True)
    points = validation.integer("points", points, low=2, high=10_000)
    if not callable(outcome_at):
        raise TypeError("outcome_at must be a function of a NetworkFigure returning an outcome string")
    step = (math.log(high) - math.log(low)) / (points - 1)
    grid = [math.exp(math.log(low) + i * step) for i in range(points)]
    outcomes = [str(outcome_at(figure.at(v))) for v in grid]
    found = []
    for (a, oa), (b, ob) in zip(zip(grid, outcomes), zip(grid[1:], outcomes[1:])):
        found += _changes(outcome_at, figure, a, oa, b, ob)
    return found


def transfer_joules(nbytes: float, figure: NetworkFigure | None = None) -> float:
    """Joules to move ``nbytes`` bytes through the network at ``figure``'s average intensity
    (default: ``energy_per_byte()``): an estimate from a published average."""
    nbytes = validation.number("nbytes", nbytes, low=0)
    figure = energy_per_byte() if figure is None else _figure(figure)
    return nbytes * figure.joules_per_byte


def _changes(outcome_at, figure, a, oa, b, ob) -> list:
    """Every change of outcome between figures a and b (kWh/GB), bisected to 1%."""
    if oa == ob:
        return []
    if b / a <= 1.01:
        return [Flip(math.sqrt(a * b), oa, ob)]
    mid = math.sqrt(a * b)
    om = str(outcome_at(figure.at(mid)))
    return _changes(outcome_at, figure, a, oa, mid, om) + _changes(outcome_at, figure, mid, om, b, ob)


def _figure(figure) -> NetworkFigure:
    if not isinstance(figure, NetworkFigure):
        raise TypeError(f"figure must be a NetworkFigure (network.energy_per_byte()), got {type(figure).__name__}")
    return figure


def _micro(joules: float) -> str:
    return f"{joules * 1e6:.3g} µJ"
