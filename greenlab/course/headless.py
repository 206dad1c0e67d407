"""Running a lesson headless: ``run_notebook`` executes a lesson's code cells in order in one plain Python
namespace, without Jupyter, a kernel or ipywidgets (widgets fall back to text, figures go to matplotlib's Agg
backend), as the GPU suite does on a bare GPU machine. IPython magics run through IPython when it is
installed; without it, ``%line`` magics and ``!shell`` lines are skipped, ``%%energy`` runs its body
in one ``greenlab.measure`` window (kept as ``_energy``) and another ``%%cell`` magic's body runs as
plain Python, each with a note. A failing cell stops the run with the lesson and
cell number (:class:`LessonRunError`).

Each cell's longest silence is timed: the longest stretch with nothing written to stdout or
stderr, counting from the cell's start to its end (``LessonRun.silences``: cells silent longer
than ``max_silence_s``). The course's rule is that no cell sits silent for more than
``SILENCE_LIMIT_S`` seconds: a long call prints progress (``greenlab.base.progress``).
"""

from __future__ import annotations

import ast
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from greenlab.course.energy_cell import parse_options, readout
from greenlab.course.notebook_format import _joined, _read_json
from greenlab.energy import measure

SILENCE_LIMIT_S = 10.0


class LessonRunError(RuntimeError):
    """A lesson cell failed in a headless run; the message names the lesson, the cell and the error."""


@dataclass
class LessonRun:
    """The outcome of one headless lesson run. Times in seconds."""

    lesson: str
    cells_run: int
    seconds: float
    notes: list = field(default_factory=list)
    silences: list = field(default_factory=list)  # (cell description, longest silence in seconds), over the limit


def run_notebook(path: str | os.PathLike, quick: bool | None = True, echo: bool = True,
                 max_silence_s: float = SILENCE_LIMIT_S) -> LessonRun:
    """Execute ``path``'s code cells in order in a fresh namespace, headless.

    The working folder is the notebook's own (as under Jupyter and nbval) and
    matplotlib uses the Agg backend. ``quick=True`` sets ``GREENLAB_QUICK=1`` for the run
    (None leaves the environment as it is). ``echo`` prints a line per cell. Cells that wrote
    nothing for longer than ``max_silence_s`` are listed in ``silences``. Raises
    :class:`LessonRunError` naming the lesson and cell when a cell fails.
    """
    path = Path(path).resolve()
    nb = _read_json(path)
    lesson = path.stem
    env = {"MPLBACKEND": os.environ.get("MPLBACKEND") or "Agg"}
    if quick is not None:
        env["GREENLAB_QUICK"] = "1" if quick else "0"
    saved_env = {k: os.environ.get(k) for k in env}
    saved_cwd = os.getcwd()
    os.environ.update(env)
    os.chdir(path.parent)
    runner = _CellRunner(lesson, echo, max_silence_s)
    t0 = time.perf_counter()
    cells = 0
    try:
        for index, cell in enumerate(nb.get("cells", [])):
            if cell.get("cell_type") != "code":
                continue
            source = _joined(cell.get("source", ""))
            if not source.strip():
                continue
            cells += 1
            runner.run_cell(index, cells, source)
    finally:
        runner.close()
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return LessonRun(lesson, cells, time.perf_counter() - t0, runner.notes, runner.silences)


def run_notebooks(paths: Iterable[str | os.PathLike], quick: bool | None = True, echo: bool = True) -> list[LessonRun]:
    """:func:`run_notebook` for each path in turn; stops at the first failing lesson."""
    return [run_notebook(p, quick=quick, echo=echo) for p in paths]


class _CellRunner:
    """Runs cells in one namespace: plain ``exec``, IPython for cells with magics when installed."""

    def __init__(self, lesson: str, echo: bool, max_silence_s: float = SILENCE_LIMIT_S):
        self.lesson, self.echo, self.max_silence_s = lesson, echo, max_silence_s
        self.silences: list[tuple[str, float]] = []
        self.ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.notes: list[str] = []
        self.shell = None
        self._display_shim = _install_display_shim()
        self.ns["display"] = _kernel_display()  # a Jupyter kernel's namespace has display() built in

    def run_cell(self, index: int, ordinal: int, source: str) -> None:
        where = f"{self.lesson}.ipynb cell {index} (code cell {ordinal})"
        if self.echo:
            print(f"--- {where}", flush=True)
        clock = _SilenceClock()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Stamped(sys.stdout, clock), _Stamped(sys.stderr, clock)
        try:
            self._run_source(source, where)
        finally:
            sys.stdout, sys.stderr = saved
            longest = clock.finish()
            if longest > self.max_silence_s:
                self.silences.append((where, longest))

    def _run_source(self, source: str, where: str) -> None:
        try:
            if _has_magic(source) and self._ipython() is not None:
                self._run_ipython(source)
            elif _cell_magic(source) == "%%energy":
                self._run_energy_cell(source, where)
            else:
                self._exec(_strip_magics(source, lambda text: self._note(where, text)), where)
        except LessonRunError:
            raise
        except (Exception, SystemExit) as exc:  # report the lesson and cell, keep the traceback
            import traceback

            traceback.print_exc()
            raise LessonRunError(f"{where} failed: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        if self.shell is not None:
            from IPython.core.interactiveshell import InteractiveShell

            InteractiveShell.clear_instance()
        if self._display_shim:
            sys.modules.pop(_TEXT_DISPLAY, None)
        try:
            import matplotlib.pyplot as plt

            plt.close("all")
        except ImportError:
            pass

    def _exec(self, source: str, where: str) -> None:
        tree = ast.parse(source, filename=where)
        if self._display_shim and _use_text_display(tree):
            self._note(where, "IPython.display replaced by printed text (IPython is not installed)")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, where, "exec"), self.ns)
        if last is not None:
            value = eval(compile(last, where, "eval"), self.ns)
            if value is not None:
                print(_text_of(value), flush=True)

    def _ipython(self):
        if self.shell is None:
            try:
                from IPython.core.interactiveshell import InteractiveShell
            except ImportError:
                return None
            InteractiveShell.clear_instance()  # a fresh shell on this lesson's namespace
            self.shell = InteractiveShell.instance(user_ns=self.ns)
        return self.shell

    def _run_energy_cell(self, source: str, where: str) -> None:
        """``%%energy`` without IPython: the body inside one ``greenlab.measure`` window, its
        Measurement kept as ``_energy`` and summarised, as the magic does."""
        first, _, body = source.lstrip().partition("\n")
        opts = parse_options(first.strip()[len("%%energy"):], cell=True)  # --region and all, as the magic
        self._note(where, "ran the %%energy cell as a greenlab.measure window, kept as _energy "
                          "(IPython is not installed)")
        window = measure(opts.label, attribution=opts.attribution).start()
        try:
            self._exec("\n" + body, where)
        finally:
            result = window.stop()
            self.ns["_energy"] = result
            print(readout(result, opts.region, opts.pue), flush=True)

    def _run_ipython(self, source: str) -> None:
        result = self.shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        if error is not None:
            raise error

    def _note(self, where: str | None, text: str) -> None:
        line = f"{where}: {text}" if where else text
        self.notes.append(line)
        print(f"[headless] {line}", flush=True)


class _SilenceClock:
    """The longest time between two writes of a cell (its start and end count as writes)."""

    def __init__(self):
        self.last = time.monotonic()
        self.longest = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def finish(self) -> float:
        self.tick()
        return self.longest


class _Stamped:
    """A text stream that tells ``clock`` when something is written to it, and is otherwise the stream."""

    def __init__(self, stream, clock: _SilenceClock):
        self._stream, self._clock = stream, clock

    def write(self, text):
        if text:
            self._clock.tick()
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _cell_magic(source: str) -> str:
    """The cell magic (``%%name``) a cell starts with, or ""."""
    first = source.lstrip().split("\n", 1)[0].strip()
    return first.split()[0] if first.startswith("%%") else ""


def _has_magic(source: str) -> bool:
    return any(line.lstrip()[:1] in ("%", "!") for line in source.split("\n"))


def _strip_magics(source: str, note) -> str:
    """Plain Python from a cell with magics: ``%%cell`` magics keep their body, ``%line``
    magics and ``!shell`` lines are blanked (line numbers kept); each change is noted."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].strip().split()[0]
        note(f"ran the cell body without the {magic} magic (IPython is not installed)")
        lines = [""] + lines[1:]
    out = []
    for line in lines:
        head = line.lstrip()[:1]
        if head in ("%", "!"):
            note(f"skipped {line.strip()!r} (IPython is not installed)")
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _text_of(value: Any) -> str:
    for method in ("_repr_markdown_",):
        text = getattr(value, method, None)
        if callable(text):
            try:
                out = text()
            except Exception:
                out = None
            if isinstance(out, str):
                return out
    return repr(value)


_TEXT_DISPLAY = "_greenlab_text_display"  # module name of the text stand-in for IPython.display


def _install_display_shim() -> bool:
    """Without IPython, register a text-only stand-in for ``IPython.display`` (display,
    Markdown, HTML, clear_output) under a private name; cells' ``from IPython.display import``
    lines are pointed at it (:func:`_use_text_display`). Returns True when it was installed.
    No fake ``IPython`` module is registered: libraries that look for IPython still find none."""
    try:
        import IPython.display  # noqa: F401

        return False
    except ImportError:
        pass
    import types

    class _Text:
        def __init__(self, data: Any = "", **_kwargs: Any):
            self.data = data

        def __repr__(self) -> str:
            return str(self.data)

    def display(*objs: Any, **_kwargs: Any) -> None:
        for obj in objs:
            print(_text_of(obj), flush=True)

    module = types.ModuleType(_TEXT_DISPLAY)
    module.display = display
    module.Markdown = type("Markdown", (_Text,), {})
    module.HTML = type("HTML", (_Text,), {})
    module.clear_output = lambda wait=False: None
    sys.modules[_TEXT_DISPLAY] = module
    return True


def _kernel_display():
    """The ``display`` an IPython kernel puts in every notebook's namespace: IPython's own where it
    is installed (text outside a front end), else the text stand-in's."""
    try:
        from IPython.display import display
    except ImportError:
        display = sys.modules[_TEXT_DISPLAY].display
    return display


def _use_text_display(tree: ast.Module) -> bool:
    """Point ``from IPython.display import ...`` at the text stand-in; True when any was."""
    changed = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "IPython.display" and not node.level:
            node.module = _TEXT_DISPLAY
            changed = True
    return changed
