"""Progress of long cells: a bar over steps, and a line per item of a longer job.

- ``bar(total, label)``: tqdm's bar (a widget in JupyterLab, text elsewhere) over the steps
  of one run, or a silent stand-in when disabled or tqdm is missing.
- ``Steps(label, total)``: a job made of a few long items (trials, runs, compilation). Each
  ``start(what)`` prints ``label [i/total] what ...`` at once, and ``done(note)`` ends that
  line with what it took, so a cell shows what it is doing while it works, and a log or a
  headless run reads as plain lines.
- ``heartbeat(label)``: a context manager for one long call that cannot report steps of its own
  (a torchrun launch, a compile, a child process being killed and resumed): while the block
  runs, a line ``label ... 10 s`` every few seconds, and ``label done in 41 s`` at the end, so no
  cell is silent for long (a call shorter than one period prints nothing). Its thread ends with
  the block, also on an error or Ctrl-C.

``GREENLAB_PROGRESS=0`` silences all three.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from greenlab.base.units import plain_number

HEARTBEAT_SECONDS = 5.0  # a line at least this often while a long call runs (the course's limit is 10 s of silence)


def enabled() -> bool:
    """False when ``GREENLAB_PROGRESS`` is 0/false/no/off."""
    return os.environ.get("GREENLAB_PROGRESS", "").strip().lower() not in ("0", "false", "no", "off")


def bar(total: int, label: str, unit: str = "step", show: bool = True, initial: int = 0):
    """A tqdm bar (to stderr, cleared when closed) over ``total`` ``unit``s; with ``show``
    False, ``GREENLAB_PROGRESS=0`` or no tqdm, a stand-in with the same methods that prints
    nothing."""
    if show and enabled():
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            return tqdm(total=total, initial=min(initial, total), desc=label, unit=unit,
                        leave=False, file=sys.stderr)
    return NoBar()


class NoBar:
    """The part of tqdm's interface greenlab uses, doing nothing."""

    n = 0

    def update(self, n=1):
        self.n += n

    def set_postfix(self, *args, **kwargs):
        pass

    def set_postfix_str(self, *args, **kwargs):
        pass

    def close(self):
        pass


class Steps:
    """A line per item of a job of ``total`` items: ``start(what)`` then ``done(note)``.

    ``show`` False (or ``GREENLAB_PROGRESS=0``) prints nothing; ``out`` is where the lines go
    (stdout, so a notebook shows them in the cell's output)."""

    def __init__(self, label: str, total: int, unit: str = "item", show: bool = True, out=None):
        self.label, self.total, self.unit = label, int(total), unit
        self.show = bool(show) and enabled()
        self.out = out
        self.i = 0
        self._open = False
        self._t0 = 0.0

    def start(self, what: str) -> None:
        """Announce item ``i+1``: ``label [i/total] what ...`` (the line stays open)."""
        self._end_line()
        self.i += 1
        self._t0 = time.perf_counter()
        count = f" [{self.i}/{self.total}]" if self.total > 1 else ""
        self._write(f"{self.label}{count} {what} ...")
        self._open = True

    def done(self, note: str = "") -> None:
        """End the open line with ``note`` (default: the seconds it took)."""
        if not self._open:
            return
        note = note or f"{plain_number(time.perf_counter() - self._t0)} s"
        self._write(f" {note}\n")
        self._open = False

    @contextlib.contextmanager
    def ticking(self, every_s: float | None = None):
        """While the ``with`` block runs, add the open item's elapsed seconds to its line every
        ``every_s`` seconds (`` 5 s… 10 s…``), so one long item (a compile) is never silent; the
        line stays open for ``done``. Without an open line, or with progress off, it prints nothing.
        ``every_s`` defaults to ``HEARTBEAT_SECONDS``."""
        every_s = HEARTBEAT_SECONDS if every_s is None else every_s
        if every_s <= 0:
            raise ValueError(f"every_s must be > 0 seconds, got {every_s!r}")
        stop = threading.Event()

        def tick():
            while not stop.wait(every_s):
                if self._open:
                    self._write(f" {plain_number(round(time.perf_counter() - self._t0))} s…")

        thread = threading.Thread(target=tick, name=f"greenlab-ticking {self.label}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def close(self) -> None:
        """End a line left open (an item that failed or was interrupted)."""
        if self._open:
            self._write(" stopped\n")
            self._open = False

    def _end_line(self):
        if self._open:
            self._write("\n")
            self._open = False

    def _write(self, text: str) -> None:
        if not self.show:
            return
        out = self.out if self.out is not None else sys.stdout
        out.write(text)
        out.flush()


@contextlib.contextmanager
def heartbeat(label: str, every_s: float | None = None, show: bool = True, out=None):
    """Print ``label ... N s`` every ``every_s`` seconds while the ``with`` block runs and, once a
    line was printed, ``label done in N s`` (or ``label stopped after N s`` when it raised) at the
    end; a block shorter than ``every_s`` prints nothing. The printing thread is joined before the
    block's exception, if any, goes on. ``every_s`` defaults to ``HEARTBEAT_SECONDS``."""
    every_s = HEARTBEAT_SECONDS if every_s is None else every_s
    if every_s <= 0:
        raise ValueError(f"every_s must be > 0 seconds, got {every_s!r}")
    show = bool(show) and enabled()
    stream = out if out is not None else sys.stdout
    t0 = time.perf_counter()
    stop = threading.Event()
    beats = []

    def write(text):
        if show:
            stream.write(text)
            stream.flush()

    def beat():
        while not stop.wait(every_s):
            beats.append(1)
            write(f"{label} ... {plain_number(round(time.perf_counter() - t0))} s\n")

    thread = threading.Thread(target=beat, name=f"greenlab-heartbeat {label}", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join()
        if beats:
            seconds = plain_number(round(time.perf_counter() - t0, 1))
            write(f"{label} done in {seconds} s\n" if ok else f"{label} stopped after {seconds} s\n")
