"""How comparison figures are written: table cells and the note on intervals clipped at 0."""

from __future__ import annotations



CLIPPED_NOTE = ("* a low end shown as 0 is clipped: the interval (mean +- 95% half-width) reached "
                "below zero, which energy and time cannot; it says the runs spread widely (more "
                "repeats narrow it), not that 0 is a possible value")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x, digits=4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(mean, interval, clipped: bool = False) -> str:
    """"mean (low–high)"; a low end clipped at 0 is marked "0*" (see CLIPPED_NOTE)."""
    if mean is None:
        return "-"
    if interval is None:
        return f"{mean:.4g}"
    low = "0*" if clipped else f"{interval[0]:.3g}"
    return f"{mean:.4g} ({low}–{interval[1]:.3g})"
