"""The run's own joule meter: cumulative joules read from the run's energy sources at each
evaluation, and the check that those sources can measure at all."""

from __future__ import annotations

import math

from greenlab.energy.measure import check_sources as check_energy_sources


class RunMeter:
    """Cumulative joules since creation, read from the run's energy sources. A source that fails
    mid-run does not end the run: the failure is recorded in ``problems`` and every later
    reading is NaN (missing), never a smaller total presented as whole."""

    def __init__(self, sources):
        self.sources = list(sources)
        self.start = [s.read_joules() for s in self.sources]
        self.problems: list[str] = []

    def joules(self) -> float:
        if self.problems:
            return math.nan
        try:
            return sum(s.read_joules() - j0 for s, j0 in zip(self.sources, self.start))
        except Exception as exc:  # a meter fault must not lose the run
            failed = next((s for s in self.sources if not _reads(s)), None)
            name = (f"{getattr(failed, 'component', '?')} ({getattr(failed, 'name', '?')})"
                    if failed is not None else "an energy source")
            self.problems.append(f"{name} failed during the run ({type(exc).__name__}: {exc}); "
                                 "energy figures from then on are missing (NaN) and the run's "
                                 "total leaves that source out")
            return math.nan


def check_sources(sources) -> list:
    """``sources`` checked as every energy window checks them (``energy.measure.check_sources``:
    a list of energy sources), and not empty: with none, the run's energy would read 0 J, which is
    not a measurement. A list is kept as it is (one from ``default_sources()`` keeps its problems)."""
    checked = check_energy_sources(sources)
    if not checked:
        raise ValueError("sources must hold at least one energy source (an empty list would "
                         "report 0 J); leave sources=None for what this machine offers")
    return sources if isinstance(sources, list) else checked


def _reads(source) -> bool:
    try:
        source.read_joules()
        return True
    except Exception:
        return False
