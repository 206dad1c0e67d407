"""The energy of moving data through the internet, from a cited kWh-per-gigabyte figure
(lesson 14: federated rounds, and an input sent to a data centre).

    figure = network.energy_per_byte()          # the cited figure, with source, year and scope
    network.transfer_joules(3_136_000)         # joules to send 3.1 MB with it (an estimate)

The figure is an average over a whole network (``greenlab/cited_tables/network_energy.csv``,
source and year on every row): arithmetic on a published average, never a measurement of this
machine's network card.
"""

from __future__ import annotations

from dataclasses import dataclass

from greenlab.base import tables, validation
from greenlab.base.paths import tables_dir
from greenlab.base.units import JOULES_PER_KWH

TABLE = "network_energy.csv"
DEFAULT_KEY = "fixed_line_2015"
BYTES_PER_GB = 1e9  # the figure's gigabyte is 10^9 bytes
_COLUMNS = ("key", "name", "kwh_per_gb", "year", "scope", "source")


@dataclass(frozen=True)
class NetworkFigure:
    """A published electricity intensity of data transmission: ``kwh_per_gb`` (kWh per 10^9
    bytes) for ``year``, over the network parts named in ``scope``, from ``source``."""

    key: str
    name: str
    kwh_per_gb: float
    year: int
    scope: str
    source: str

    @property
    def joules_per_byte(self) -> float:
        """The figure in joules per byte."""
        return self.kwh_per_gb * JOULES_PER_KWH / BYTES_PER_GB

    def cite(self) -> str:
        """One line: the figure, its year and its source (published, not measured here)."""
        return (f"{self.kwh_per_gb:g} kWh/GB ({self.joules_per_byte * 1e6:.0f} µJ per byte), {self.name}, "
                f"{self.year}; published: {self.source}")


def figures() -> list[NetworkFigure]:
    """Every row of the cited table."""
    path = tables_dir() / TABLE
    out = []
    for row in tables.read_table(path, _COLUMNS):
        out.append(NetworkFigure(key=row["key"], name=row["name"],
                                 kwh_per_gb=tables.number(row, "kwh_per_gb", path, low=0.0),
                                 year=tables.integer(row, "year", path), scope=row["scope"],
                                 source=row["source"]))
    return out


def energy_per_byte(key: str = DEFAULT_KEY) -> NetworkFigure:
    """The cited figure named ``key`` (default: Aslan et al. 2018's fixed-line figure for 2015)."""
    found = {f.key: f for f in figures()}
    if not isinstance(key, str) or key not in found:
        raise ValueError(f"key must be one of {sorted(found)}, got {key!r}")
    return found[key]


def transfer_joules(nbytes: float, figure: NetworkFigure | None = None) -> float:
    """Joules to move ``nbytes`` bytes through the network at ``figure``'s average intensity
    (default: ``energy_per_byte()``): an estimate from a published average."""
    nbytes = validation.number("nbytes", nbytes, low=0)
    figure = energy_per_byte() if figure is None else figure
    if not isinstance(figure, NetworkFigure):
        raise TypeError(f"figure must be a NetworkFigure (network.energy_per_byte()), got {type(figure).__name__}")
    return nbytes * figure.joules_per_byte
