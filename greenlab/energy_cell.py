"""The ``%%energy`` / ``%energy_meter`` options and readouts, in plain Python: the IPython magics
and the headless lesson runner (no IPython) parse a cell's first line and report its window the
same way."""

from __future__ import annotations

import argparse
import shlex

from greenlab.energy.measure import component_text
from greenlab.units import format_energy

USAGE = "%%energy [--region CODE] [--pue P] [--label TEXT] [--attribution process|machine]"
METER_USAGE = "%energy_meter on|off [--region CODE] [--pue P]"

_WHOSE = {"process": "this process and its children", "device": "the whole GPU",
          "machine": "the whole machine"}


def readout(result, region: str = "WORLD", pue: float | None = None) -> str:
    """The ``%%energy`` report for a Measurement: several lines, like ``%%time``."""
    co2e = _co2e_text(result.joules, region, pue)
    lines = [f"energy: {format_energy(result.joules)} in {result.seconds:.3g} s "
             f"(mean {result.watts:.3g} W); {co2e}"]
    for c in result.components.values():
        kind = "a model" if c.estimated else "measured"
        whose = f", {_WHOSE[c.attribution]}" if c.attribution in _WHOSE else ""
        lines.append(f"  {c.component:<7} {format_energy(c.joules):>9}  {c.source} "
                     f"({kind}{whose}) +-{c.rel_uncertainty:.0%}")
    for problem in result.problems:
        lines.append(f"  INCOMPLETE: {problem}")
    for text in result.warnings:
        lines.append(f"  warning: {text}")
    return "\n".join(lines)


def one_line(result, region: str = "WORLD", pue: float | None = None) -> str:
    """The per-cell meter line for a Measurement."""
    line = (f"[energy] {format_energy(result.joules)} in {result.seconds:.3g} s "
            f"(mean {result.watts:.3g} W), {_co2e_text(result.joules, region, pue)}; "
            f"{component_text(result.components.values()) or 'no components'}")
    if result.problems:
        line += f"; INCOMPLETE: {'; '.join(result.problems)}"
    if any("shorter than" in w for w in result.warnings):
        line += "; too short to trust"
    return line


def parse_options(line: str, cell: bool):
    """The options of a ``%%energy`` line (``cell=True``: region, pue, label, attribution) or an
    ``%energy_meter`` line (switch, region, pue). ValueError with the usage for bad options, a
    bad region or PUE, before any cell runs."""
    parser = argparse.ArgumentParser(prog="%%energy" if cell else "%energy_meter",
                                     usage=USAGE if cell else METER_USAGE, add_help=False)
    if not cell:
        parser.add_argument("switch", choices=("on", "off"))
    parser.add_argument("--region", default="WORLD")
    parser.add_argument("--pue", type=float, default=None)
    if cell:
        parser.add_argument("--label", default="cell")
        parser.add_argument("--attribution", choices=("process", "machine"), default="process")
    try:
        opts = parser.parse_args(shlex.split(line))
    except SystemExit:
        raise ValueError(f"usage: {USAGE if cell else METER_USAGE}") from None
    from greenlab.carbon import co2e_g

    co2e_g(0.0, region=opts.region, pue=opts.pue)  # a bad region or PUE fails before the cell runs
    return opts


def _co2e_text(joules: float, region: str, pue) -> str:
    from greenlab.carbon import co2e_g, format_mass

    grams = co2e_g(max(joules, 0.0), region=region, pue=pue)
    pue_text = "" if pue is None else f", PUE {pue:g}"
    return f"{format_mass(grams)} CO2e ({region}{pue_text})"
