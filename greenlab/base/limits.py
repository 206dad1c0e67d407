"""Bounds on sizes, one check per kind of count, each with the reason a larger value cannot be
meant: counts done one after another (optimizer steps, evaluations, repeats) by the time a run
may take, counts held at once (a batch's samples, prefetched batches) by this machine's memory,
processes started at once by the system's process limit, seconds by the time a run may take.

Each check returns the value as a plain int or float, or raises a ValueError (an
``ArgumentTypeError`` for the wrong type) that names the argument, the value, the bound and why.
"""

from __future__ import annotations

import os

from greenlab.base.units import format_bytes
from greenlab.base.validation import _fmt, _show, describe_range, integer, number

RUN_LIMIT_S = 7 * 86_400  # the longest run accepted: a week (a limit the library sets, not a measurement)
# An assumed floor, not a measurement: one step (or evaluation, micro-batch, repeat) calls several PyTorch
# operators from Python (forward, loss, backward, update); the bound takes the whole to last a microsecond.
STEP_FLOOR_S = 1e-6
SAMPLE_FLOOR_BYTES = 4  # a sample holds at least one float32 value
# The longest one call of a measurement helper may take (a limit the library sets, not a measurement): such a
# helper repeats a small operation (a checkpoint write, a read) until its energy window spans enough counter
# updates, which takes about a second; a count or a minimum that keeps a lesson cell busy for longer than this
# is a mistake to be told about, not a measurement to wait for.
MEASURE_LIMIT_S = 20.0


def max_steps() -> int:
    """The most things done one after another that :func:`steps` accepts: ``RUN_LIMIT_S`` at
    ``STEP_FLOOR_S`` each."""
    return int(RUN_LIMIT_S / STEP_FLOOR_S)


def steps(name: str, value, *, low: int = 1, what: str = "steps", allow_none: bool = False):
    """A count of things done one after another (optimizer steps, evaluations, repeats) as int:
    an integer >= ``low`` that a run finishes within ``RUN_LIMIT_S`` at ``STEP_FLOOR_S`` each.
    A larger count is refused with the time it would need at that floor."""
    out = integer(name, value, low=low, allow_none=allow_none)
    high = max_steps()
    if out is not None and out > high:
        raise ValueError(
            f"{name} must be an integer in [{low}, {_fmt(high)}] ({what}), got {_fmt(out)}: at a floor of "
            f"{STEP_FLOOR_S * 1e6:g} µs each, {_fmt(out)} {what} take at least {_days(out * STEP_FLOOR_S)} to "
            f"reach, longer than the {_days(RUN_LIMIT_S)} a run may take")
    return out


def check_time(name: str, count: int, seconds_each: float, what: str, limit_s: float = RUN_LIMIT_S,
               limit_why: str = "a run may take") -> None:
    """Refuse ``count`` things of ``seconds_each`` each (a measured time, e.g. the first one's)
    when together they would take longer than ``limit_s`` (``RUN_LIMIT_S``: what ``limit_why``),
    naming ``name`` and the time."""
    if count * seconds_each > limit_s:
        raise ValueError(f"{name}={_fmt(count)} {what}, at the {seconds_each * 1e3:.3g} ms the first one took, "
                         f"would take {_days(count * seconds_each)}, longer than the {_days(limit_s)} {limit_why}")


def measure_time(name: str, count: int, seconds_each: float, what: str) -> None:
    """:func:`check_time` for a measurement helper: ``count`` repeats of ``seconds_each`` must
    fit in ``MEASURE_LIMIT_S``."""
    check_time(name, count, seconds_each, what, MEASURE_LIMIT_S,
               "one measurement may take (repeats beyond a few seconds add nothing to it)")


def measure_seconds(name: str, value, *, low: float = 0.0, low_open: bool = False):
    """A measurement helper's minimum window length in seconds, a number in [``low``,
    ``MEASURE_LIMIT_S``] (``low_open``: > ``low``), as float."""
    out = number(name, value, low=low, low_open=low_open)
    if out > MEASURE_LIMIT_S:
        raise ValueError(f"{name} must be a number of seconds {describe_range(low, MEASURE_LIMIT_S, low_open)} "
                         f"({_days(MEASURE_LIMIT_S)} at most, the time one measurement may take), got {_show(value)}")
    return out


def memory_bytes(available: bool = False) -> int | None:
    """This machine's physical memory, bytes (``available``: what is free for new allocations now):
    psutil's reading when it is installed, else POSIX's page counts, else None (unknown)."""
    try:
        import psutil  # lazy: only a size check asks

        memory = psutil.virtual_memory()
        return int(memory.available if available else memory.total)
    except ImportError:
        pass
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES" if available else "SC_PHYS_PAGES")
        return int(os.sysconf("SC_PAGE_SIZE")) * int(pages)
    except (AttributeError, OSError, ValueError):
        return None


def held(name: str, value, *, low: int = 1, what: str = "samples", bytes_each: int = SAMPLE_FLOOR_BYTES,
         allow_none: bool = False, now: bool = False):
    """A count of things held in memory at once (a batch's samples, prefetched batches, bytes) as
    int: an integer >= ``low`` whose ``bytes_each`` bytes apiece (a floor) fit in this machine's
    memory (unchecked where that memory is unknown). A larger count is refused with the memory it
    would need. ``now``: the call allocates them at once, so the bound is the memory free now."""
    out = integer(name, value, low=low, allow_none=allow_none)
    if out is None:
        return out
    total = memory_bytes(available=now)
    high = None if total is None else total // bytes_each
    if high is not None and out > high:
        raise ValueError(
            f"{name} must be an integer in [{low}, {_fmt(high)}] ({what}), got {_fmt(out)}: at {bytes_each} "
            f"byte(s) each at the least that is {format_bytes(out * bytes_each)} at once, more than this "
            f"machine's {format_bytes(total)} of memory{' free now' if now else ''}")
    return out


PID_MAX_LIMIT = 2**22  # Linux's largest process-id limit on 64-bit systems (include/linux/threads.h)


def max_processes() -> int:
    """How many processes this system can run at once: Linux's ``/proc/sys/kernel/pid_max``,
    else the user's ``RLIMIT_NPROC`` when it is set, else ``PID_MAX_LIMIT``."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        pass
    try:
        import resource  # lazy: POSIX only

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            return int(soft)
    except (ImportError, AttributeError, OSError, ValueError):
        pass
    return PID_MAX_LIMIT


def processes(name: str, value, *, low: int = 1, allow_none: bool = False):
    """A count of processes started at once (workers) as int: an integer >= ``low`` that this
    system can run together (:func:`max_processes`)."""
    out = integer(name, value, low=low, allow_none=allow_none)
    high = max_processes()
    if out is not None and out > high:
        raise ValueError(f"{name} must be an integer in [{low}, {_fmt(high)}] (processes started at once), "
                         f"got {_fmt(out)}: more processes than this system can run together (its limit is "
                         f"{_fmt(high)})")
    return out


def duration(name: str, value, *, low: float = 0.0, low_open: bool = False, allow_none: bool = False):
    """A number of seconds in [``low``, ``RUN_LIMIT_S``] as float (the time a run may take at most)."""
    out = number(name, value, low=low, low_open=low_open, allow_none=allow_none)
    if out is not None and out > RUN_LIMIT_S:
        raise ValueError(f"{name} must be a number of seconds {describe_range(low, RUN_LIMIT_S, low_open)} "
                         f"({_days(RUN_LIMIT_S)} at most, the time a run may take), got {_show(value)}")
    return out


def _days(seconds: float) -> str:
    days = seconds / 86_400
    if days >= 1:
        return f"{days:.3g} days"
    return f"{seconds / 3600:.3g} hours" if seconds >= 3600 else f"{seconds:.3g} s"
