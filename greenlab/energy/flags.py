"""An energy result's flags, read from the one ``Measurement`` that carries them.

A result type that holds its energy figure as ``self.energy`` (a ``Measurement``) takes
``MeasuredFlags`` as a base: ``estimated``, ``complete``, ``problems`` and ``sources`` then come
from that measurement, never from copies that could disagree with it. A result pooled from
several windows (one per round of an interleaved comparison) takes ``PooledFlags`` and reads
the same four flags from each window's ``Measurement``.
"""

from __future__ import annotations

FLAG_NAMES = ("estimated", "complete", "problems", "sources")


class MeasuredFlags:
    """``estimated`` / ``complete`` / ``problems`` / ``sources`` of ``self.energy``. A result
    whose energy was not measured (``energy`` None) is not complete and says so."""

    @property
    def estimated(self) -> bool:
        """True when any component's energy is a model's estimate, not a reading."""
        return self.energy is not None and self.energy.estimated

    @property
    def complete(self) -> bool:
        """False when a component was lost on the way (``problems`` says which and why)."""
        return self.energy is not None and self.energy.complete

    @property
    def problems(self) -> list:
        """One text per lost or doubtful figure; empty when the energy is complete."""
        if self.energy is None:
            return ["energy was not measured"]
        return list(self.energy.problems)

    @property
    def sources(self) -> dict:
        """Component -> the source its figure came from (``nvml-counter``, ``rapl``, ``estimate`` ...)."""
        return {} if self.energy is None else dict(self.energy.sources)

    @property
    def short(self) -> bool:
        """True when the energy window was shorter than its sources read reliably
        (``Measurement.short``): verdicts then say "not measurable at this size"."""
        return self.energy is not None and self.energy.short

    def flags(self) -> dict:
        """The four flags as plain data, under the keys ``to_dict()`` has always used."""
        return {"estimated": self.estimated, "complete": self.complete,
                "problems": self.problems, "sources": self.sources}


class PooledFlags:
    """The same four flags for a result pooled from several windows, read from the windows' own
    ``Measurement``s (``self.measurements()``: (label, Measurement) pairs, e.g. "int8 round 2"):
    estimated when any window is, complete when every window is, each problem under its
    window's label, and the sources of all windows together."""

    def measurements(self) -> list:
        """(label, Measurement) for every window the result was pooled from."""
        raise NotImplementedError

    @property
    def estimated(self) -> bool:
        """True when any window's energy is a model's estimate, not a reading."""
        return any(m.estimated for _, m in self.measurements())

    @property
    def complete(self) -> bool:
        """False when any window lost a component (``problems`` says which window and why)."""
        return not self.problems

    @property
    def problems(self) -> list:
        """"label: problem" for every lost or doubtful figure of every window."""
        return [f"{label}: {p}" for label, m in self.measurements() for p in m.problems]

    @property
    def sources(self) -> dict:
        """Component -> the source its figures came from, over all windows."""
        out = {}
        for _, m in self.measurements():
            out.update(m.sources)
        return out

    def flags(self) -> dict:
        """The four flags as plain data, under the same keys as ``MeasuredFlags.flags``."""
        return {"estimated": self.estimated, "complete": self.complete,
                "problems": self.problems, "sources": self.sources}
