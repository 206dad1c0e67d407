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

import ast
import warnings

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from greenlab.energy.measure import ShortWindowWarning
from greenlab.energy.windows import measure
from greenlab.course.energy_cell import (
    METER_USAGE,
    USAGE,
    one_line,
    parse_options as _parse,
    readout,
)



def load_ipython_extension(ipython) -> None:
    """Called by ``%load_ext greenlab``: registers the magics."""
    ipython.register_magics(EnergyMagics)


def unload_ipython_extension(ipython) -> None:
    """Called by ``%unload_ext greenlab``: turns the per-cell meter off."""
    magics = ipython.magics_manager.registry.get("EnergyMagics")
    if magics is not None:
        magics.meter_off()


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
