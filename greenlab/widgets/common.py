"""Helpers shared by the widgets: display-mode choice and cheap matplotlib rendering."""

from __future__ import annotations

import io
import os

DISPLAY_MODES = ("auto", "widget", "text")


def resolve_display(display: str = "auto") -> str:
    """Return ``"widget"`` or ``"text"`` for a ``display`` switch.

    ``"auto"`` picks ``"widget"`` only inside an IPython kernel (a notebook front end
    can attach to it) and ``"text"`` in plain Python or a terminal IPython. The
    environment variable ``GREENLAB_DISPLAY=text|widget`` overrides ``"auto"``.
    """
    if display not in DISPLAY_MODES:
        raise ValueError(f"display must be one of {', '.join(DISPLAY_MODES)}; got {display!r}")
    if display != "auto":
        return display
    forced = os.environ.get("GREENLAB_DISPLAY", "").strip().lower()
    if forced in ("widget", "text"):
        return forced
    return "widget" if in_kernel_with_frontend() else "text"


def in_kernel_with_frontend() -> bool:
    """True inside an IPython kernel (Jupyter, VS Code, Colab); False in plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def figure_png(fig, dpi: int = 72) -> bytes:
    """Render a matplotlib figure to PNG bytes (Agg, no pyplot state touched)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def new_figure(width_in: float = 6.0, height_in: float = 2.4, layout: str | None = "constrained"):
    """A matplotlib Figure on the Agg canvas, outside pyplot (thread-safe to draw).

    ``layout=None`` keeps fixed margins, which draws several times faster (live plots).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout=layout)
    FigureCanvasAgg(fig)
    return fig


def html_escape(text) -> str:
    """Escape text for an ipywidgets.HTML value."""
    import html

    return html.escape(str(text))
