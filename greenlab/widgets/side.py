"""A side panel that keeps the live energy meter in view while Run All scrolls the notebook on.

JupyterLab's right-hand side panel, through ``sidecar`` (the Jupyter widgets project's side-panel
output widget), shows a second view of the running meter: the same widget, so both views show the
same figures, and the inline one stays in the cell as the record. One panel per kernel; each new
meter replaces the one before, by setting the panel's outputs (a widget state change): no
clear-output message is sent, so nothing the cell showed before is cleared in any front end.

Only JupyterLab's shell has a side panel. In Colab and VS Code (``front_end()``), where
``sidecar`` is not installed, or with ``GREENLAB_SIDE_PANEL=0``, nothing happens and the meter is
inline only."""

from __future__ import annotations

import importlib.util
import os
import sys

TITLE = "greenlab: energy"
_panel = None  # the kernel's one Sidecar, kept so that its panel stays open


def front_end(modules=None, environ=None) -> str:
    """The front end this kernel most likely serves: "colab" (``google.colab`` imported), "vscode"
    (``VSCODE_PID`` set, as VS Code sets for its kernels) or "jupyter" (JupyterLab, Notebook,
    JupyterHub, Binder)."""
    modules = sys.modules if modules is None else modules
    environ = os.environ if environ is None else environ
    if "google.colab" in modules:
        return "colab"
    if environ.get("VSCODE_PID"):
        return "vscode"
    return "jupyter"


def available() -> bool:
    """True when the side panel can be used: a Jupyter front end (not Colab or VS Code, which
    cannot show one), ``sidecar`` installed, and not switched off."""
    if os.environ.get("GREENLAB_SIDE_PANEL", "").strip() == "0":
        return False
    if front_end() != "jupyter":
        return False
    return importlib.util.find_spec("sidecar") is not None


def show(widget) -> bool:
    """Show ``widget`` (an ipywidgets widget) in the side panel, replacing what it showed.
    Returns whether it did."""
    global _panel
    if not available():
        return False
    from sidecar import Sidecar  # lazy: sidecar is an extra (lab), used only in JupyterLab

    if _panel is None:
        _panel = Sidecar(title=TITLE, anchor="right")
    _panel.outputs = (widget_output(widget),)
    return True


def widget_output(widget) -> dict:
    """The display output that shows ``widget`` (its model id, in the widget view's mime type, as
    ipywidgets 7 and 8 both display it), for an Output widget's ``outputs``."""
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/plain": repr(widget),
                     "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0,
                                                                 "model_id": widget.model_id}}}
