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
    monkeypatch.delenv("VSCODE_PID", raising=False)
    first, second = ipywidgets.HTML("a"), ipywidgets.HTML("b")
    assert side.show(first) and side.show(second)
    panel = side._panel
    assert panel is not None and panel.title == side.TITLE and panel.anchor == "right"
    assert _shown(panel) == [second.model_id]
    assert side.show(first) and side._panel is panel  # the same panel, not a new one per meter
    assert _shown(panel) == [first.model_id]


def _shown(panel):
    return [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for o in panel.outputs]


def test_replacing_the_panel_sends_no_clear_output_that_could_wipe_the_cell(monkeypatch):
    """A clear-output message reaches the cell itself where the front end does not route it into
    the panel (Colab, VS Code): lesson 00's dataset line vanished. The panel's outputs are set as
    widget state instead, and nothing is displayed or cleared in the cell."""
    pytest.importorskip("sidecar")
    ipywidgets = pytest.importorskip("ipywidgets")
    import IPython.display

    monkeypatch.delenv("GREENLAB_SIDE_PANEL", raising=False)
    monkeypatch.delenv("VSCODE_PID", raising=False)
    monkeypatch.setattr(side, "_panel", None)
    calls = []
    monkeypatch.setattr(IPython.display, "clear_output", lambda *a, **k: calls.append("clear"))
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append("display"))
    import ipywidgets.widgets.widget_output as widget_output

    monkeypatch.setattr(widget_output, "clear_output", lambda *a, **k: calls.append("clear"), raising=False)
    assert side.show(ipywidgets.HTML("a")) and side.show(ipywidgets.HTML("b"))
    assert calls == []


@pytest.mark.parametrize("modules, environ, expected", [
    ({"google.colab": object()}, {}, "colab"), ({}, {"VSCODE_PID": "4242"}, "vscode"), ({}, {}, "jupyter"),
    ({"google.colab": object()}, {"VSCODE_PID": "1"}, "colab")])
def test_front_end_is_told_from_the_kernels_own_traces(modules, environ, expected):
    assert side.front_end(modules, environ) == expected


@pytest.mark.parametrize("where", ["colab", "vscode"])
def test_no_side_panel_where_the_front_end_cannot_show_one(monkeypatch, where):
    monkeypatch.delenv("GREENLAB_SIDE_PANEL", raising=False)
    monkeypatch.setattr(side, "_panel", None)
    if where == "colab":
        monkeypatch.setitem(__import__("sys").modules, "google.colab", object())
    else:
        monkeypatch.setenv("VSCODE_PID", "4242")
    assert not side.available()
    assert side.show(object()) is False and side._panel is None
