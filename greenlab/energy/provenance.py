"""How an energy figure was obtained, in words: ``how_measured(result)``.

Every result that carries energy says where it came from through its sources (``nvml-counter``,
``rapl``, ``estimate`` ...). This module turns that into one phrase for a reader, so that no
lesson or summary writes "estimated from a CPU power model" by hand and gets it wrong on a
machine where part of the figure was measured:

    >>> how_measured(run)
    "partly measured by the hardware's energy counters (GPU) and partly estimated from a CPU power
    model (uncertain by about ±12% in all)"
    >>> how_measured(run, short=True)
    'GPU measured (energy counters), CPU an estimate (power model)'

``result`` can be anything the library returns with energy in it: a ``Measurement`` (or its
dict from the results log), a result holding one as ``energy`` or ``measurement`` (a training
run, a language-model run, a pre-empted job), a result pooled from several windows
(``measurements()``), a comparison or sweep of runs (``runs``, by name or in a list), a list of
any of these, or, as a last resort, a result that keeps only its ``sources``. The uncertainty is
each window's components combined in quadrature (as ``carbon_statement`` combines them), the
largest over the windows; a result that keeps only its sources says none.
"""

from __future__ import annotations

import math

# sources that read an accumulated energy counter, and sources that integrate power readings
COUNTER_SOURCES = ("nvml-counter", "rapl", "amd-counter", "apple-soc")
POWER_SOURCES = ("nvml-power", "amd-power")


def how_measured(result, short: bool = False) -> str:
    """How ``result``'s energy was obtained, with its uncertainty (see the module's docstring).
    ``short``: a few words for a table's footnote, without the uncertainty."""
    windows, problems = _windows(result)
    if not windows:
        raise ValueError(f"{type(result).__name__} carries no energy figure to describe (no Measurement, "
                         "measurements(), runs or sources)")
    parts = [p for w in windows for p in w["parts"]]
    estimated = [p for p in parts if p["estimated"]]
    measured = [p for p in parts if not p["estimated"]]
    bands = [w["band"] for w in windows]
    band = None if any(b is None for b in bands) else max(bands)
    if short:
        words = _short(measured, estimated)
        return words + (", incomplete" if problems else "")
    if not estimated:
        words = f"measured {_readings(measured)}" + ("" if band is None else f" (±{band:.0%})")
    elif not measured:
        words = (f"estimated from a {_kinds(estimated)} power model"
                 + ("" if band is None else f" (uncertain by about ±{band:.0%})"))
    else:
        words = (f"partly measured {_readings(measured)} ({_kinds(measured)}) and partly estimated from a "
                 f"{_kinds(estimated)} power model"
                 + ("" if band is None else f" (uncertain by about ±{band:.0%} in all)"))
    if problems:
        words += ", and a lower bound, since part of the energy could not be measured"
    return words


def combined_uncertainty(figures) -> float:
    """Relative uncertainty of a sum of (joules, relative uncertainty) figures taken as independent:
    their absolute uncertainties added in quadrature, over the total (0 for a total of 0 J)."""
    figures = [(float(j), float(r)) for j, r in figures]
    joules = math.fsum(j for j, _ in figures)
    u_joules = math.sqrt(math.fsum((r * j) ** 2 for j, r in figures))
    return u_joules / joules if joules > 0 else 0.0


# --- helpers ----------------------------------------------------------------------------------


def _get(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _windows(result) -> tuple[list, list]:
    """Each energy window reachable from ``result`` as {"parts": [...], "band": relative or None},
    and the problems any of them reported."""
    if isinstance(result, (list, tuple)):
        windows, problems = [], []
        for item in result:
            w, p = _windows(item)
            windows += w
            problems += p
        return windows, problems
    components = _get(result, "components")
    if isinstance(components, dict) and _get(result, "seconds") is not None:  # a Measurement or its dict
        parts = [{"component": _get(c, "component", name), "source": _get(c, "source", "unknown"),
                  "estimated": bool(_get(c, "estimated", True)), "joules": float(_get(c, "joules", 0.0)),
                  "rel": float(_get(c, "rel_uncertainty", 0.0) or 0.0)} for name, c in components.items()]
        return (([{"parts": parts, "band": _band(parts)}] if parts else []),
                [str(p) for p in _get(result, "problems") or []])
    pooled = getattr(result, "measurements", None)
    if callable(pooled):
        return _windows([m for _, m in pooled()])
    for name in ("energy", "measurement"):
        inner = _get(result, name)
        if inner is not None and not isinstance(inner, (int, float)):
            windows, problems = _windows(inner)
            if windows:
                return windows, problems + [str(p) for p in _get(result, "problems") or [] if str(p) not in problems]
    runs = _get(result, "runs")
    if isinstance(runs, (dict, list, tuple)):
        groups = runs.values() if isinstance(runs, dict) else [runs]
        every = [r for rs in groups for r in (rs if isinstance(rs, (list, tuple)) else [rs])]
        every += [p[-1] for p in _get(result, "partial") or []]
        return _windows(every)
    sources = _get(result, "sources")
    if isinstance(sources, dict) and sources:  # only the sources are kept: no uncertainty to state
        parts = [{"component": name, "source": str(source), "estimated": _is_estimate(str(source)),
                  "joules": 0.0, "rel": None} for name, source in sources.items()]
        return [{"parts": parts, "band": None}], [str(p) for p in _get(result, "problems") or []]
    return [], []


def _is_estimate(source: str) -> bool:
    return any(name.startswith("estimate") for name in source.split("+"))


def _band(parts: list) -> float:
    """The window's relative uncertainty; a window of 0 J keeps its components' widest band."""
    if math.fsum(p["joules"] for p in parts) <= 0:
        return max(p["rel"] for p in parts)
    return combined_uncertainty([(p["joules"], p["rel"]) for p in parts])


def _kinds(parts: list) -> str:
    """'CPU', 'GPU' or 'CPU and GPU': the components named by kind (the part before any ':')."""
    return " and ".join(sorted({p["component"].split(":")[0].upper() for p in parts}))


def _reading_kinds(parts: list) -> list[str]:
    names = {n for p in parts for n in p["source"].split("+")}
    kinds = []
    if names & set(COUNTER_SOURCES) or not names & set(POWER_SOURCES):
        kinds.append("energy counters")
    if names & set(POWER_SOURCES):
        kinds.append("power readings")
    return kinds


def _readings(parts: list) -> str:
    kinds = _reading_kinds(parts)
    return ("by the hardware's " if kinds[0] == "energy counters" else "from the hardware's ") + " and ".join(kinds)


def _short(measured: list, estimated: list) -> str:
    readings = ", ".join(_reading_kinds(measured)) if measured else ""
    if not estimated:
        return f"measured ({readings})"
    if not measured:
        return f"an estimate ({_kinds(estimated)} power model)"
    return f"{_kinds(measured)} measured ({readings}), {_kinds(estimated)} an estimate (power model)"
