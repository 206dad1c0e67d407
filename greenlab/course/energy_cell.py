"""The ``%%energy`` / ``%energy_meter`` options and readouts, in plain Python: the IPython magics
and the headless lesson runner (no IPython) parse a cell's first line and report its window the
same way."""

from __future__ import annotations

import argparse
import shlex

from greenlab.base.units import format_energy, plain_number
from greenlab.base.validation import instance
from greenlab.energy.measure import Measurement, component_text
from greenlab.impact.carbon import co2e_g, format_mass

USAGE = "%%energy [--region CODE] [--pue P] [--label TEXT] [--attribution process|machine]"
METER_USAGE = "%energy_meter on|off [--region CODE] [--pue P]"

_WHOSE = {"process": "this process and its children", "device": "the whole GPU",
          "machine": "the whole machine"}


def readout(result, region: str = "WORLD", pue: float | None = None) -> str:
    """The ``%%energy`` report for a Measurement: several lines, like ``%%time``."""
    _check_result(result)
    co2e = _co2e_text(result.joules, region, pue)
    lines = [f"energy: {format_energy(result.joules)} in {plain_number(result.seconds)} s "
             f"(mean {plain_number(result.watts)} W); {co2e}"]
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
    _check_result(result)
    line = (f"[energy] {format_energy(result.joules)} in {plain_number(result.seconds)} s "
            f"(mean {plain_number(result.watts)} W), {_co2e_text(result.joules, region, pue)}; "
            f"{component_text(result.components.values()) or 'no components'}")
    if result.problems:
        line += f"; INCOMPLETE: {'; '.join(result.problems)}"
    if any("shorter than" in w for w in result.warnings):
        line += "; too short to trust"
    return line


def parse_options(line: str, cell: bool):
    """The options of a ``%%energy`` line (``cell=True``: region, pue, label, attribution) or an
    ``%energy_meter`` line (switch, region, pue). A ValueError naming the problem, then the usage,
    for bad options, a bad region or PUE, before any cell runs."""
    usage = USAGE if cell else METER_USAGE
    if not isinstance(line, str):
        raise UsageError(f"the magic's arguments must be text, got {type(line).__name__}; usage: {usage}")
    parser = _Parser(usage, prog="%%energy" if cell else "%energy_meter")
    if not cell:
        parser.add_argument("switch", choices=("on", "off"))
    parser.add_argument("--region", default="WORLD")
    parser.add_argument("--pue", type=float, default=None)
    if cell:
        parser.add_argument("--label", default="cell")
        parser.add_argument("--attribution", choices=("process", "machine"), default="process")
    try:
        words = shlex.split(line)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"{exc}; usage: {usage}") from None
    try:
        opts = parser.parse_args(words)
    except SystemExit:  # pragma: no cover - error() raises first
        raise UsageError(f"usage: {usage}") from None

    try:  # a bad region or PUE fails before the cell runs
        co2e_g(0.0, region=opts.region, pue=opts.pue)
    except ValueError as exc:
        raise UsageError(f"{exc}; usage: {usage}") from None
    return opts


class UsageError(ValueError):
    """A magic's arguments that do not parse: the problem, then the usage line."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises (with the usage) instead of printing and exiting."""

    def __init__(self, usage_text: str, **kwargs):
        # argparse %-formats the usage string: the magics' own "%" must be doubled
        super().__init__(usage=usage_text.replace("%", "%%"), add_help=False, **kwargs)
        self.usage_text = usage_text

    def error(self, message):
        raise UsageError(f"{message}; usage: {self.usage_text}")


def _check_result(result) -> None:
    instance("result", result, Measurement, "a Measurement (a window's .result)")


def _co2e_text(joules: float, region: str, pue) -> str:
    grams = co2e_g(max(joules, 0.0), region=region, pue=pue)
    pue_text = "" if pue is None else f", PUE {pue:g}"
    return f"{format_mass(grams)} CO2e ({region}{pue_text})"
