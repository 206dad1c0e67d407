"""``greenlab measure [--region R] [--pue P] [--json] -- CMD ...``: energy's ``time``.

Runs CMD with inherited stdin/stdout/stderr inside one measurement window and reports the
duration, energy per component (with source, estimate flag and uncertainty) and CO2e. The
report goes to stderr (like ``time``); ``--json`` prints JSON on stdout instead. Returns the
command's exit code, 127 if it cannot be found, 2 for usage errors.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import warnings

from greenlab.units import joules_to_kwh

USAGE = "usage: greenlab measure [--region R] [--pue P] [--json] -- COMMAND [ARGS...]"


def measure_main(args) -> int:
    """Entry point used by ``greenlab.cli``; ``args`` has cmd, region, pue and json."""
    from greenlab.energy.measure import ShortWindowWarning, measure

    cmd = list(getattr(args, "cmd", None) or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(f"greenlab measure: no command given\n{USAGE}", file=sys.stderr)
        return 2
    region = getattr(args, "region", "WORLD") or "WORLD"
    pue = getattr(args, "pue", None)
    co2e_g, carbon_problem = _carbon_function(region, pue)
    if carbon_problem and carbon_problem.startswith("invalid"):
        print(f"greenlab measure: {carbon_problem}", file=sys.stderr)
        return 2

    with warnings.catch_warnings():  # the report lists window warnings itself
        warnings.simplefilter("ignore", ShortWindowWarning)
        window = measure("command", sync=False).start()
        try:
            code = subprocess.call(cmd)
        except (FileNotFoundError, PermissionError) as exc:
            window.stop()
            problem = "command not found" if isinstance(exc, FileNotFoundError) \
                else "permission denied"
            print(f"greenlab measure: {problem}: {cmd[0]}", file=sys.stderr)
            return 127 if isinstance(exc, FileNotFoundError) else 126
        except BaseException:
            window.stop()
            raise
        result = window.stop()
    co2e = co2e_g(result.joules) if co2e_g is not None else None
    if getattr(args, "json", False):
        report = {"command": cmd, "exit_code": code, "region": region, "pue": pue,
                  "co2e_g": co2e, "co2e_note": carbon_problem, **result.to_dict()}
        print(json.dumps(report, indent=2))
    else:
        print(_table(cmd, code, result, region, pue, co2e, carbon_problem), file=sys.stderr)
    return code


def _carbon_function(region: str, pue):
    """(function joules -> g CO2e, problem text). Checks region and PUE before the run."""
    try:
        from greenlab.carbon import co2e_g
    except ImportError as exc:
        return None, f"CO2e unavailable: greenlab.carbon could not be imported ({exc})"
    try:
        co2e_g(0.0, region=region, pue=pue)
    except ValueError as exc:
        return None, f"invalid --region/--pue: {exc}"
    return (lambda joules: co2e_g(joules, region=region, pue=pue)), ""


def _table(cmd, code, result, region, pue, co2e, carbon_problem) -> str:
    lines = [
        f"greenlab measure: {shlex.join(cmd)}",
        f"  exit code  {code}",
        f"  duration   {result.seconds:.3f} s",
        f"  {'component':<10} {'source':<13} {'joules':>10} {'watts':>8}  "
        f"{'estimated':<9} uncertainty",
    ]
    for c in result.components.values():
        lines.append(f"  {c.component:<10} {c.source:<13} {c.joules:>10.4g} {c.watts:>8.3g}  "
                     f"{'yes' if c.estimated else 'no':<9} +-{c.rel_uncertainty:.0%}")
        if c.note:
            lines.append(f"    note: {c.note}")
        if c.model:
            lines.append(f"    model: {c.model}")
    lines.append(f"  total      {result.joules:.4g} J = {joules_to_kwh(result.joules):.3g} kWh"
                 f"{' (includes estimates)' if result.estimated else ''}")
    if co2e is not None:
        pue_text = "default" if pue is None else f"{pue:g}"
        lines.append(f"  CO2e       {co2e:.3g} g (region {region}, PUE {pue_text})")
    else:
        lines.append(f"  CO2e       {carbon_problem}")
    lines.append("  energy is machine-wide: other processes running meanwhile are included")
    for text in result.warnings:
        lines.append(f"  warning: {text}")
    return "\n".join(lines)
