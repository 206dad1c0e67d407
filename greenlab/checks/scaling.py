"""Lesson 01 (the cost-benefit of scaling out): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import FAILED, PASSED, Check, _short, check_function


def scale_out_costs(fn: Any) -> Check:
    """Check a learner's ``fn(single_device_hours, n_devices, scaling_efficiency,
    watts_per_device, price_per_device_hour) -> (wall_hours, energy_kwh, cost_usd)``.

    Expected values come from ``greenlab.scaling.cost_benefit``; a price of None must give
    a cost of None. The prices in the cases are test inputs, not prices of any offer.
    """
    from greenlab import scaling

    gpu_name = scaling.gpus()[0].name  # any catalogue GPU: watts are given, so its TDP is unused
    inputs = [
        (10.0, 1, 1.0, 300.0, 2.0),
        (40.0, 8, 0.8, 400.0, 3.0),
        (12.0, 4, 0.5, 250.0, 1.5),
        (100.0, 16, 0.9, 700.0, 0.0),
    ]
    cases = []
    for hours, n, eff, watts, price in inputs:
        r = scaling.cost_benefit(gpu_name, n, hours, eff, watts_per_device=watts,
                                 price_per_device_hour=price)
        cases.append(((hours, n, eff, watts, price), (r.wall_hours, r.energy_kwh, r.cost_usd)))

    def hint(args, expected, got):
        try:
            wall, kwh, cost = (float(v) for v in got)
        except (TypeError, ValueError):
            return "return three numbers: (wall_hours, energy_kwh, cost_usd)."
        hours, n, eff, watts, price = args
        if math.isclose(wall, hours / n, rel_tol=1e-6) and eff != 1.0:
            return "wall time is single_device_hours / (n_devices x scaling_efficiency)."
        if math.isclose(kwh, watts * hours / 1000, rel_tol=1e-6) and eff != 1.0:
            return ("energy follows device-hours (n x wall hours), which grow when efficiency "
                    "is below 1; you used the ideal single-device hours.")
        if math.isclose(kwh, expected[1] * 1000, rel_tol=1e-6):
            return "energy is asked in kWh: W x h / 1000."
        if math.isclose(cost, price * wall, rel_tol=1e-6) and n != 1:
            return "you pay for every device: cost = price x n x wall hours (device-hours)."
        return None

    check = check_function(fn, cases, rtol=1e-6, atol=1e-9, name="scale_out_costs", hint=hint)
    if not check.passed:
        return check
    try:
        no_price = fn(10.0, 2, 0.9, 300.0, None)
        cost_ok = no_price[2] is None
    except Exception as exc:  # the learner's code failed: report it, never raise
        return Check("scale_out_costs", FAILED, f"with price None it raised {type(exc).__name__}: {exc}",
                     ["without a price the cost is unknown: return None for it."])
    if not cost_ok:
        return Check("scale_out_costs", FAILED,
                     f"with price None the cost should be None (unknown), got {_short(no_price[2])}.")
    return Check("scale_out_costs", PASSED,
                 f"all {len(cases) + 1} scenarios give the wall hours, kWh and cost of "
                 "greenlab.scaling.cost_benefit.")
