"""The live meter's second view in JupyterLab's side panel (greenlab/widgets/side.py)."""

import pytest

from greenlab.widgets import side


def test_switched_off_or_without_sidecar_nothing_is_shown(monkeypatch):
    monkeypatch.setenv("GREENLAB_SIDE_PANEL", "0")
    assert not side.available()
    assert side.show(object()) is False


def test_one_panel_per_kernel_each_meter_replacing_the_last(monkeypatch):
    pytest.importorskip("sidecar")
    ipywidgets = pytest.importorskip("ipywidgets")
    monkeypatch.delenv("GREENLAB_SIDE_PANEL", raising=False)
    monkeypatch.setattr(side, "_panel", None)
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda w: shown.append(w))
    first, second = ipywidgets.HTML("a"), ipywidgets.HTML("b")
    assert side.show(first) and side.show(second)
    panel = side._panel
    assert panel is not None and panel.title == side.TITLE and panel.anchor == "right"
    assert side.show(first) and side._panel is panel  # the same panel, not a new one per meter
    assert shown == [first, second, first]
