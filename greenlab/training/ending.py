"""How a run ends: the energy window closed, the result packed and appended to the results log,
and a Ctrl-C kept on the run instead of losing it (``Interrupted`` before the last step)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import warnings

from greenlab.base.interrupts import Interrupted, interrupted_run
from greenlab.training.result import RunResult
from greenlab.energy.measure import ComponentEnergy, Measurement
from greenlab.base import results

def interrupted_error(result, run, save) -> Interrupted:
    """The one-line ``Interrupted`` for ``run`` (a ``greenlab.training.loop.TrainingRun``) stopped by a Ctrl-C
    before its last step: it carries ``result`` and says where that was kept (``save``: the results log too)."""
    where = ("the results log and gl.last_interrupted()" if save and "not saved" not in result.message
             else "gl.last_interrupted() (not in the results log)")
    return interrupted_run("greenlab.train", result, run.total_steps, where)


def finish(run, window, flop_count, params, peak, save, results_path) -> RunResult:
    """Close the window of ``run`` (a ``greenlab.training.loop.TrainingRun`` past its last step), pack the
    result and append it to the log. A Ctrl-C in any of these steps (a real SIGINT is held back until
    they are done; a KeyboardInterrupt raised inside them is caught) leaves the run returned, marked
    interrupted, and says in which step."""
    stages = []
    with _held_sigint() as pending:
        try:
            run.end_cpu_s = time.process_time()
            peak.sample()
        except KeyboardInterrupt:
            stages.append("the window's end read")
        try:
            energy = window.stop()
        except KeyboardInterrupt:
            if "the window's end read" not in stages:
                stages.append("the window's end read")
            energy = _energy_from_meter(run, window)
        result = None
        for _ in range(3):  # packing is plain arithmetic: an interrupt there is retried
            try:
                result = run.result(energy, flop_count, params, peak)
                break
            except KeyboardInterrupt:
                if "the result packing" not in stages:
                    stages.append("the result packing")
        if result is None:
            raise KeyboardInterrupt
        late = not run.interrupted_in_loop  # an interrupt before the last step says so itself
        if late and (pending or stages):
            _mark_interrupted_after_last_step(result, stages)
        if save:
            try:
                _save_result(result, results_path)
            except KeyboardInterrupt:
                if late:
                    _mark_interrupted_after_last_step(result, ["the results-log append"])
                result.message += "; the run was not saved to the results log"
        if late and pending and not stages:  # a SIGINT held during the append
            _mark_interrupted_after_last_step(result, [])
    return result


def _mark_interrupted_after_last_step(result, stages):
    if result.status == "interrupted" and "after the last step" in result.message:
        return
    where = " and ".join(stages) if stages else "the end of the run (held until the run was saved)"
    note = (f"Ctrl-C after the last step, during {where}: the training had finished "
            f"(status would have been {result.status!r})")
    if result.status == "interrupted":  # interrupted during the final evaluation already
        note = f"Ctrl-C after the last step, during {where}"
    result.status = "interrupted"
    result.message = f"{result.message}; {note}" if result.message else note


def _energy_from_meter(run, window):
    """A Measurement from the run's own meter, for a window whose end read was interrupted."""
    seconds = time.perf_counter() - run.start_s
    problems = ["the energy window's end read was interrupted (Ctrl-C); the figures are read "
                "again from the run's meter, which started just after the window"]
    components = {}
    meter = run.meter
    for s, j0 in zip(meter.sources, meter.start):
        try:
            joules = s.read_joules() - j0
        except Exception as exc:  # noqa: BLE001 - a failed read leaves the component out
            problems.append(f"{s.component}: {getattr(s, 'name', '?')} failed at the re-read ({exc}); "
                            "its energy is missing from this total")
            continue
        components[s.component] = ComponentEnergy(
            s.component, getattr(s, "name", "?"), joules, seconds, joules / seconds if seconds > 0 else 0.0,
            bool(getattr(s, "estimated", False)), float(getattr(s, "rel_uncertainty", 0.0)),
            getattr(s, "note", ""), getattr(s, "model", ""), getattr(s, "attribution", ""))
    return Measurement(getattr(window, "label", "train"), seconds, components, None, [], [], problems)


@contextlib.contextmanager
def _held_sigint():
    """Hold a Ctrl-C (SIGINT) back until the block is done; yields a list that gets an entry
    per SIGINT received. Outside the main thread (no handler can be set) nothing is held."""
    pending = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    except (ValueError, OSError, TypeError):
        yield pending
        return
    try:
        yield pending
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _save_result(result, path):
    """Append the run to the results log; a log that cannot be written keeps the run (returned
    as it is), warns, and names the path in the result's message."""
    try:
        results.append(result.to_dict(), path=path)
    except (OSError, ValueError, TypeError) as exc:
        problem = f"the run was not saved to the results log: {exc}"
        result.message = f"{result.message}; {problem}" if result.message else problem
        warnings.warn(problem, RuntimeWarning, stacklevel=3)
