"""A side panel that keeps the live energy meter in view while Run All scrolls the notebook on.

JupyterLab's right-hand side panel, through ``sidecar`` (the Jupyter widgets project's side-panel
output widget), shows a second view of the running meter: the same widget, so both views show the
same figures, and the inline one stays in the cell as the record. One panel per kernel; each new
meter replaces the one before. Where ``sidecar`` is not installed, or ``GREENLAB_SIDE_PANEL=0``,
nothing happens and the meter is inline only (front ends without JupyterLab's shell, such as VS
Code, show the inline view)."""

from __future__ import annotations

import importlib.util
import os

TITLE = "greenlab: energy"
_panel = None  # the kernel's one Sidecar, kept so that its panel stays open


def available() -> bool:
    """True when the side panel can be used: ``sidecar`` installed and not switched off."""
    if os.environ.get("GREENLAB_SIDE_PANEL", "").strip() == "0":
        return False
    return importlib.util.find_spec("sidecar") is not None


def show(widget) -> bool:
    """Show ``widget`` (an ipywidgets widget) in the side panel, replacing what it showed.
    Returns whether it did."""
    global _panel
    if not available():
        return False
    from IPython.display import display
    from sidecar import Sidecar

    if _panel is None:
        _panel = Sidecar(title=TITLE, anchor="right")
    _panel.clear_output()
    with _panel:
        display(widget)
    return True
