"""IPython magics: ``%%energy`` (like ``%%time``, for joules) and ``%energy_meter on|off``.

    %load_ext greenlab

    %%energy --region GB
    train()

prints the cell's duration, energy and mean power, each component with its source and
uncertainty, CO2e for the region, and what could not be measured (an incomplete result says
so). The readout is printed even when the cell raises or is interrupted (Ctrl-C); the cell's
exception then propagates as usual. The cell's :class:`~greenlab.energy.Measurement` is kept
as ``_energy`` in the notebook's namespace.

``%energy_meter on`` prints a one-line energy readout after every cell until
``%energy_meter off`` (IPython's ``pre_run_cell``/``post_run_cell`` events).

IPython is needed only here: ``import greenlab`` does not import this module.
"""

from __future__ import annotations

import argparse
import ast
import shlex
import warnings

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from greenlab.energy.measure import ShortWindowWarning, component_text
from greenlab.energy.windows import measure
from greenlab.units import format_energy

USAGE = "%%energy [--region CODE] [--pue P] [--label TEXT] [--attribution process|machine]"
METER_USAGE = "%energy_meter on|off [--region CODE] [--pue P]"


def load_ipython_extension(ipython) -> None:
    """Called by ``%load_ext greenlab``: registers the magics."""
    ipython.register_magics(EnergyMagics)


def unload_ipython_extension(ipython) -> None:
    """Called by ``%unload_ext greenlab``: turns the per-cell meter off."""
    magics = ipython.magics_manager.registry.get("EnergyMagics")
    if magics is not None:
        magics.meter_off()


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


@magics_class
class EnergyMagics(Magics):
    """``%%energy`` and ``%energy_meter``; see the module docstring."""

    def __init__(self, shell=None):
        super().__init__(shell)
        self._meter: dict | None = None  # region, pue and the open window while metering
        self._window = None

    @cell_magic
    def energy(self, line: str, cell: str):
        """Run the cell inside a measurement window and print its energy readout."""
        opts = _parse(line, cell=True)
        body, last = self._compile(cell)
        window = measure(opts.label, attribution=opts.attribution).start()
        try:
            exec(body, self.shell.user_global_ns, self.shell.user_ns)
            return eval(last, self.shell.user_global_ns, self.shell.user_ns) \
                if last is not None else None
        finally:  # an exception or Ctrl-C still gets its readout
            with warnings.catch_warnings():  # the readout lists a short-window warning itself
                warnings.simplefilter("ignore", ShortWindowWarning)
                result = window.stop()
            self.shell.user_ns["_energy"] = result
            print(readout(result, opts.region, opts.pue))

    @line_magic
    def energy_meter(self, line: str):
        """``%energy_meter on|off``: a one-line energy readout after every cell."""
        opts = _parse(line, cell=False)
        if opts.switch == "on":
            self.meter_off()
            self._meter = {"region": opts.region, "pue": opts.pue}
            self.shell.events.register("pre_run_cell", self._pre)
            self.shell.events.register("post_run_cell", self._post)
            print(f"energy meter on (region {opts.region}); %energy_meter off to stop")
        else:
            was_on = self._meter is not None
            self.meter_off()
            print("energy meter off" if was_on else "energy meter was not on")

    def meter_off(self) -> None:
        if self._meter is None:
            return
        for event, fn in (("pre_run_cell", self._pre), ("post_run_cell", self._post)):
            try:
                self.shell.events.unregister(event, fn)
            except ValueError:
                pass
        self._meter = None
        if self._window is not None and self._window.running:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ShortWindowWarning)
                self._window.stop()
        self._window = None

    # --- events ---
    def _pre(self, info=None) -> None:
        if self._window is not None and self._window.running:
            return  # a cell run from inside a cell: the outer window covers it
        self._window = measure("cell")
        self._window.start()

    def _post(self, result=None) -> None:
        window, self._window = self._window, None
        if window is None or not window.running or self._meter is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ShortWindowWarning)
            measurement = window.stop()
        print(one_line(measurement, self._meter["region"], self._meter["pue"]))

    # --- helpers ---
    def _compile(self, cell: str):
        """(code for all statements but a final expression, code for that expression)."""
        source = self.shell.transform_cell(cell)
        tree = ast.parse(source)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), "<energy cell>", "eval")
        return compile(tree, "<energy cell>", "exec"), last


def _parse(line: str, cell: bool):
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
