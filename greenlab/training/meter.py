"""The run's own joule meter: cumulative joules read from the run's energy sources at each
evaluation, and the check that those sources can measure at all."""

from __future__ import annotations

import math

from greenlab.base import validation

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


def _reads(source) -> bool:
    try:
        source.read_joules()
        return True
    except Exception:
        return False


def check_sources(sources) -> list:
    """``sources`` must be a non-empty list of energy sources: with none, the run's energy would
    read 0 J, which is not a measurement."""
    if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
        raise validation.ArgumentTypeError(
            f"sources must be a list of energy sources (greenlab.energy.default_sources()), got "
            f"{type(sources).__name__}")
    if not isinstance(sources, list):  # a list from default_sources() keeps its problems
        sources = list(sources)
    if not sources:
        raise ValueError("sources must hold at least one energy source (an empty list would "
                         "report 0 J); leave sources=None for what this machine offers")
    for i, s in enumerate(sources):
        if not (callable(getattr(s, "read_joules", None)) and hasattr(s, "component")):
            raise validation.ArgumentTypeError(
                f"sources[{i}] must be an energy source (with read_joules() and component), got "
                f"{type(s).__name__}")
    return sources
