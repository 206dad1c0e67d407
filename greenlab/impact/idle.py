"""Idle capacity and autoscaling, as arithmetic on a stated idle power (lesson 13).

- ``idle_cost``: what an instance that sits idle for ``hours`` costs in kWh, money and CO2e;
- ``scale_to_zero``: an always-on instance against one that is switched off between jobs and
  pays a cold start for each job instead; the break-even number of starts.

Only arithmetic: the idle power is the caller's (a measurement, or a labelled estimate or
published figure), and so are the prices, which the result carries back as its assumptions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from greenlab.base.units import JOULES_PER_KWH, plain_number
from greenlab.impact import carbon

HOURS_PER_WEEK = 168.0


@dataclass(frozen=True)
class IdleCost:
    """``hours`` of idle at ``watts``: energy in kWh, its electricity cost, the instance's rent
    for those hours (None without a price), and CO2e in grams on ``region``'s grid."""

    watts: float
    hours: float
    kwh: float
    electricity_cost: float | None
    rent: float | None
    g_co2e: float
    region: str

    def summary(self) -> str:
        money = []
        if self.electricity_cost is not None:
            money.append(f"{plain_number(self.electricity_cost)} for electricity")
        if self.rent is not None:
            money.append(f"{plain_number(self.rent, 4)} in rent")
        return (f"{self.hours:g} h idle at {plain_number(self.watts)} W: {plain_number(self.kwh)} kWh, "
                f"{carbon.format_mass(self.g_co2e)} CO2e ({self.region})"
                + (f", {' and '.join(money)} (money units as given)" if money else ""))


def idle_cost(watts: float, hours: float = HOURS_PER_WEEK, price_per_kwh: float | None = None,
              rent_per_hour: float | None = None, region: str = "WORLD") -> IdleCost:
    """Energy (kWh = W x h / 1000), electricity cost, rent and CO2e of ``hours`` idle at ``watts``."""
    _non_negative("watts", watts)
    _non_negative("hours", hours)
    for name, value in (("price_per_kwh", price_per_kwh), ("rent_per_hour", rent_per_hour)):
        if value is not None:
            _non_negative(name, value)
    kwh = watts * hours / 1000.0
    return IdleCost(watts=float(watts), hours=float(hours), kwh=kwh,
                    electricity_cost=None if price_per_kwh is None else kwh * price_per_kwh,
                    rent=None if rent_per_hour is None else hours * rent_per_hour,
                    g_co2e=carbon.co2e_g(kwh * JOULES_PER_KWH, region=region), region=str(region))


@dataclass(frozen=True)
class ScaleToZero:
    """Always on against scaled to zero over ``hours``: idle kWh of the one, cold-start kWh of the
    other, the kWh saved, the starts at which they break even, and the waiting the starts add."""

    hours: float
    busy_hours: float
    starts: int
    always_on_idle_kwh: float
    cold_start_kwh: float
    saved_kwh: float
    break_even_starts: float
    added_wait_s: float

    def summary(self) -> str:
        return (f"{self.busy_hours:g} busy hours of {self.hours:g}: always on, "
                f"{plain_number(self.always_on_idle_kwh)} kWh of idle; scaled to zero, {self.starts} cold starts "
                f"cost {plain_number(self.cold_start_kwh)} kWh and add "
                f"{plain_number(self.added_wait_s / 60)} min of waiting; saved {plain_number(self.saved_kwh)} kWh "
                f"(break-even at {plain_number(self.break_even_starts)} starts)")


def scale_to_zero(busy_hours: float, idle_watts: float, starts: int, cold_start_s: float,
                  start_watts: float, hours: float = HOURS_PER_WEEK) -> ScaleToZero:
    """Idle energy an always-on instance spends in the ``hours - busy_hours`` it does no work,
    against ``starts`` cold starts of ``cold_start_s`` seconds at ``start_watts`` each when it is
    switched off between jobs (off draws nothing here: a stated simplification)."""
    _non_negative("hours", hours)
    _non_negative("busy_hours", busy_hours)
    if busy_hours > hours:
        raise ValueError(f"busy_hours must be at most hours ({hours!r}), got {busy_hours!r}")
    _non_negative("idle_watts", idle_watts)
    _non_negative("cold_start_s", cold_start_s)
    _non_negative("start_watts", start_watts)
    if isinstance(starts, bool) or not isinstance(starts, int) or starts < 0:
        raise ValueError(f"starts must be an integer >= 0, got {starts!r}")
    idle_kwh = idle_watts * (hours - busy_hours) / 1000.0
    per_start_kwh = start_watts * cold_start_s / 3600.0 / 1000.0
    cold_kwh = starts * per_start_kwh
    return ScaleToZero(hours=float(hours), busy_hours=float(busy_hours), starts=starts,
                       always_on_idle_kwh=idle_kwh, cold_start_kwh=cold_kwh, saved_kwh=idle_kwh - cold_kwh,
                       break_even_starts=idle_kwh / per_start_kwh if per_start_kwh > 0 else math.inf,
                       added_wait_s=starts * cold_start_s)


def _non_negative(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
