"""Helpers shared by the widgets: display-mode choice and cheap matplotlib rendering."""

from __future__ import annotations

import io
import os

DISPLAY_MODES = ("auto", "widget", "text")


def resolve_display(display: str = "auto") -> str:
    """Return ``"widget"`` or ``"text"`` for a ``display`` switch.

    ``"auto"`` picks ``"widget"`` only inside an IPython kernel (a notebook front end
    can attach to it) and ``"text"`` in plain Python or a terminal IPython. The
    environment variable ``GREENLAB_DISPLAY=text|widget`` overrides ``"auto"``. Where
    ipywidgets is not installed the answer is always ``"text"``.
    """
    if display not in DISPLAY_MODES:
        raise ValueError(f"display must be one of {', '.join(DISPLAY_MODES)}; got {display!r}")
    if display != "auto":  # "widget" without ipywidgets installed gets the text view
        return display if (display == "text" or widgets_available()) else "text"
    forced = os.environ.get("GREENLAB_DISPLAY", "").strip().lower()
    if forced in ("widget", "text"):
        return forced if (forced == "text" or widgets_available()) else "text"
    return "widget" if (in_kernel_with_frontend() and widgets_available()) else "text"


def widgets_available() -> bool:
    """True when ipywidgets can be imported (a kernel without it gets the text views)."""
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


def widget_kit(mode: str):
    """The module the widgets build their controls from: ``ipywidgets`` when it is installed
    (its controls work without a front end too), else ``TEXT_KIT``, plain-Python stand-ins with
    the same names and ``.value`` semantics (so a widget works, and is driven from Python, where
    ipywidgets is not installed)."""
    if mode not in ("widget", "text"):
        raise ValueError(f"mode must be 'widget' or 'text', got {mode!r}")
    if widgets_available():
        import ipywidgets

        return ipywidgets
    return TEXT_KIT


class TextControl:
    """A stand-in for an ipywidgets control without a front end: keyword arguments become
    attributes, ``.value`` changes call ``observe`` callbacks with a change dict, ``click()``
    calls ``on_click`` callbacks, containers keep their ``children``."""

    def __init__(self, children=None, **kwargs):
        object.__setattr__(self, "_observers", [])
        object.__setattr__(self, "_clicks", [])
        self.children = list(children or [])
        self.disabled = False
        self.value = None
        self.description = ""
        self.classes = []
        for key in sorted(kwargs, key=lambda k: k == "value"):  # bounds first, then the value
            setattr(self, key, kwargs[key])

    def __setattr__(self, name, new):
        if name == "value" and isinstance(new, (int, float)) and not isinstance(new, bool):
            low, high = self.__dict__.get("min"), self.__dict__.get("max")
            if low is not None and new < low:  # bounded, as ipywidgets' Bounded* controls are
                new = type(new)(low)
            if high is not None and new > high:
                new = type(new)(high)
        old = self.__dict__.get(name)
        object.__setattr__(self, name, new)
        if name == "value" and old is not new and old != new:
            for callback, names in list(self._observers):
                if names in (None, "value"):
                    callback({"name": "value", "old": old, "new": new, "owner": self})

    def observe(self, callback, names=None) -> None:
        self._observers.append((callback, names))

    def on_click(self, callback) -> None:
        self._clicks.append(callback)

    def click(self) -> None:
        for callback in list(self._clicks):
            callback(self)

    def add_class(self, name: str) -> None:
        self.classes.append(name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description or ''} value={self.value!r}>"


_CONTAINERS = ("Box", "HBox", "VBox", "GridBox", "Accordion", "Tab", "Stack")


class _TextKit:
    """``ipywidgets``-like names, every one a ``TextControl`` (``Layout`` keeps its options); a
    positional argument is a container's children or a control's value, as in ipywidgets."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def make(*args, **kwargs):
            if args:
                kwargs.setdefault("children" if name in _CONTAINERS else "value", args[0])
            return TextControl(**kwargs)

        return make


TEXT_KIT = _TextKit()


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
