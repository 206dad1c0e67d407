"""``greenlab measure [--region R] [--pue P] [--json] [--attribution A] -- CMD ...``: energy's ``time``.

Runs CMD with inherited stdin/stdout/stderr inside one measurement window and reports the
duration, energy per component (with source, estimate flag and uncertainty) and CO2e. The
report goes to stderr (like ``time``); ``--json`` prints JSON on stdout instead. Returns the
command's exit code (128 + N when signal N ended it), 127 if it cannot be found, 126 if it
cannot be executed, 2 for usage errors. Like ``time``, it passes SIGINT, SIGTERM and SIGHUP on
to the command and waits for it to end (it never kills the command itself), then reports the
energy of what ran.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import warnings

from greenlab.base.units import joules_to_kwh, plain_number
from greenlab.energy import windows
from greenlab.energy.measure import ShortWindowWarning

USAGE = ("usage: greenlab measure [--region R] [--pue P] [--json] [--attribution process|machine] "
         "-- COMMAND [ARGS...]")


def measure_main(args) -> int:
    """Entry point used by ``greenlab.cli``; ``args`` has cmd, region, pue, json and (optionally)
    attribution: "process" (the default: the command and its children) or "machine"."""
    cmd = list(getattr(args, "cmd", None) or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print(f"greenlab measure: no command given\n{USAGE}", file=sys.stderr)
        return 2
    attribution = getattr(args, "attribution", None) or "process"
    if attribution not in ("process", "machine"):
        print(f"greenlab measure: --attribution must be 'process' or 'machine', got {attribution!r}\n{USAGE}",
              file=sys.stderr)
        return 2
    region = getattr(args, "region", "WORLD") or "WORLD"
    pue = getattr(args, "pue", None)
    co2e_g, carbon_problem = _carbon_function(region, pue)
    if carbon_problem and carbon_problem.startswith("invalid"):
        print(f"greenlab measure: {carbon_problem}", file=sys.stderr)
        return 2

    with warnings.catch_warnings():  # the report lists window warnings itself
        warnings.simplefilter("ignore", ShortWindowWarning)
        # the command's GPU use cannot be seen from here: every visible GPU is counted
        window = windows.measure("command", sync=False, gpus="all", attribution=attribution).start()
        try:
            proc = subprocess.Popen(cmd)
        except OSError as exc:
            window.stop()
            code, problem = _start_failure(exc)
            print(f"greenlab measure: {problem}: {cmd[0]}", file=sys.stderr)
            return code
        except BaseException:
            window.stop()
            raise
        try:
            code, received = _wait_forwarding_signals(proc)
        finally:
            result = window.stop()
    if received:
        names = ", ".join(signal.Signals(n).name for n in received)
        result.warnings.append(f"greenlab measure received {names} and passed it on to the command; "
                               "the energy is that of the part that ran")
    co2e = co2e_g(result.joules) if co2e_g is not None else None
    if getattr(args, "json", False):
        report = {"command": cmd, "exit_code": code, "region": region, "pue": pue,
                  "co2e_g": co2e, "co2e_note": carbon_problem, **result.to_dict()}
        print(json.dumps(report, indent=2))
    else:
        print(_table(cmd, code, result, region, pue, co2e, carbon_problem), file=sys.stderr)
    return code


def _start_failure(exc: OSError) -> tuple:
    """(exit code, message) for a command that could not be started, as a shell would say it."""
    if isinstance(exc, FileNotFoundError):
        return 127, "command not found"
    if exc.errno == errno.ENOEXEC:
        return 126, "cannot execute (not a program; a script needs a '#!' first line)"
    if isinstance(exc, PermissionError):
        return 126, "permission denied"
    return 126, f"cannot execute ({exc.strerror or exc})"


def _wait_forwarding_signals(proc) -> tuple:
    """Wait for ``proc`` like ``time`` does, passing SIGINT, SIGTERM and SIGHUP on to it; the
    command decides how to end (it is never killed from here). Returns (exit code, signals
    received): the command's code, or 128 + N when a signal N ended it."""
    received = []
    forwarded = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())

    def forward(signum, frame):
        received.append(signum)
        if signum == signal.SIGINT and _terminal_sent_it_to_the_group():
            return  # Ctrl-C at the terminal already reached the command (same process group)
        try:
            proc.send_signal(signum)
        except OSError:  # it has just ended
            pass

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in forwarded:
            previous[signum] = signal.signal(signum, forward)
    try:
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:  # only when no handler could be installed
                proc.send_signal(signal.SIGINT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return (128 - code if code < 0 else code), received


def _terminal_sent_it_to_the_group() -> bool:
    """True when this process group is in the foreground of a terminal (so a SIGINT came from
    Ctrl-C and went to every process in the group, the command included)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.isatty():
                return os.tcgetpgrp(stream.fileno()) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            continue
    return False


def _carbon_function(region: str, pue):
    """(function joules -> g CO2e, problem text). Checks region and PUE before the run."""
    try:
        from greenlab.impact.carbon import co2e_g  # lazy: its ImportError is reported, not raised
    except ImportError as exc:
        return None, f"CO2e unavailable: greenlab.impact.carbon could not be imported ({exc})"
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
    lines.append(f"  total      {plain_number(result.joules, 4)} J = {plain_number(joules_to_kwh(result.joules))} kWh"
                 f"{' (includes estimates)' if result.estimated else ''}")
    if co2e is not None:
        pue_text = "default" if pue is None else f"{pue:g}"
        lines.append(f"  CO2e       {plain_number(co2e)} g (region {region}, PUE {pue_text})")
    else:
        lines.append(f"  CO2e       {carbon_problem}")
    lines.append(f"  counted    {_whose(result.components.values())}")
    for problem in result.problems:
        lines.append(f"  INCOMPLETE: {problem}")
    for text in result.warnings:
        lines.append(f"  warning: {text}")
    return "\n".join(lines)


_WHOSE = {"process": "greenlab and the command's processes only",
          "device": "the whole GPU, every process on it included",
          "machine": "the whole machine, other programs running meanwhile included"}


def _whose(components) -> str:
    """Whose energy each component holds, e.g. ``cpu: greenlab and the command's processes``."""
    parts = [f"{c.component}: {_WHOSE.get(c.attribution, 'the whole machine')}" for c in components]
    return "; ".join(parts) or "nothing"
