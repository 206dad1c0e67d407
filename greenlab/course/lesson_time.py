"""A lesson's time line, generated at build time so it cannot drift from the lesson.

Each lesson's opening holds the marker line ``**Time:** <!-- lesson-time -->``; the learner copy
gets it filled (between ``<!-- lesson-time -->`` and ``<!-- /lesson-time -->``) with three parts:

- reading: the learner copy's main-line words (``greenlab.course.reading``, the filled line
  included) at ``WORDS_PER_MINUTE``;
- running: the lesson's headless run time from ``lesson_times.json`` (beside this module), written
  by ``python -m greenlab.course results --lesson-times`` from a results run, with the CPU, whether
  it has native bf16, the mode and the machine's load; "running time not yet measured" until then,
  and "measured on an earlier version" when the lesson's code has changed since (``stale_lessons``);
- exercises: the number of worked-solution blocks × ``EXERCISE_MINUTES``, labelled an estimate.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from greenlab.course.notebook_format import SOLUTION_BEGIN, _joined
from greenlab.course.reading import WORDS_PER_MINUTE, notebook_reading

MARKER = "<!-- lesson-time -->"
END_MARKER = "<!-- /lesson-time -->"
MARKER_LINE = f"**Time:** {MARKER}"
# Minutes a learner is assumed to spend on one exercise (write, check, fix): an estimate, not a
# measurement, and the generated line says so.
EXERCISE_MINUTES = 10
TIMES_FILE = Path(__file__).with_name("lesson_times.json")
NOT_MEASURED = "running time not yet measured"


def code_fingerprint(nb: dict[str, Any]) -> str:
    """SHA-256 of a notebook's code cells, in order: a measured running time belongs to this code."""
    digest = hashlib.sha256()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            digest.update(_joined(cell.get("source", "")).encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()


def exercise_count(nb: dict[str, Any]) -> int:
    """Worked-solution blocks (code cells holding ``# BEGIN SOLUTION``) of an instructor copy."""
    return sum(cell.get("cell_type") == "code" and SOLUTION_BEGIN in _joined(cell.get("source", ""))
               for cell in nb.get("cells", []))


def load_times(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The recorded running times (``{"lessons": {}}`` when none are recorded)."""
    path = Path(path) if path is not None else TIMES_FILE
    if not path.exists():
        return {"lessons": {}}
    data = json.loads(path.read_text(encoding="utf-8"))
    data.setdefault("lessons", {})
    return data


def times_from_results(results: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """The times file's content from a ``results.json`` (``greenlab.course.results``): one entry per
    lesson that passed, with its seconds, load and code fingerprint; the machine and mode once.
    Lessons that did not run or did not pass keep their ``previous`` entry, if any (a run made on
    another machine is not mixed in: a different CPU, bf16 support or mode starts afresh)."""
    machine = {"cpu": results.get("cpu", "unknown CPU"), "cpu_bf16": results.get("cpu_bf16"),
               "cpu_capability": results.get("cpu_capability", ""), "mode": results.get("mode", "")}
    lessons: dict[str, Any] = {}
    if previous and all(previous.get(k) == v for k, v in machine.items()):
        lessons.update(previous.get("lessons", {}))
    for outcome in results.get("lessons", []):
        if not str(outcome.get("status", "")).startswith("passed"):  # every cell ran (see course.results)
            continue
        lessons[outcome["lesson"]] = {"seconds": round(float(outcome["seconds"]), 1),
                                      "load_before": outcome.get("load_before"),
                                      "load_after": outcome.get("load_after"),
                                      "code_sha256": outcome.get("code_sha256") or ""}
    return {**machine, "lessons": dict(sorted(lessons.items()))}


def write_times(results_json: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the times file (default ``TIMES_FILE``) from the ``results.json`` at ``results_json``."""
    out = Path(out) if out is not None else TIMES_FILE
    results = json.loads(Path(results_json).read_text(encoding="utf-8"))
    previous = load_times(out) if out.exists() else None
    out.write_text(json.dumps(times_from_results(results, previous), indent=1) + "\n", encoding="utf-8")
    return out


def stale_lessons(instructor_nbs: dict[str, dict[str, Any]], times: dict[str, Any] | None = None) -> list[str]:
    """The lessons (stem -> instructor notebook) whose recorded running time was measured on code
    other than today's (including a record without a fingerprint)."""
    times = load_times() if times is None else times
    return sorted(stem for stem, nb in instructor_nbs.items()
                  if stem in times["lessons"] and times["lessons"][stem].get("code_sha256") != code_fingerprint(nb))


def time_text(stem: str, words: int, exercises: int, instructor_nb: dict[str, Any],
              times: dict[str, Any] | None = None) -> str:
    """The generated time line's text (what goes between the markers)."""
    times = load_times() if times is None else times
    reading_min = max(1, round(words / WORDS_PER_MINUTE))
    parts = [f"about {reading_min} min reading ({words:,} words at {WORDS_PER_MINUTE} words a minute)"]
    record = times["lessons"].get(stem)
    if record is None:
        parts.append(NOT_MEASURED)
    else:
        minutes = record["seconds"] / 60
        shown = f"{minutes:.0f} min" if minutes >= 1 else "under 1 min"
        bf16 = {True: "native bf16", False: "no native bf16"}.get(times.get("cpu_bf16"), "bf16 support unknown")
        load = record.get("load_before"), record.get("load_after")
        load_text = "load unknown" if None in load else f"load {load[0]:.1f} to {load[1]:.1f}"
        stale = record.get("code_sha256") != code_fingerprint(instructor_nb)
        parts.append(f"{shown} running in {times.get('mode') or 'an unnamed mode'}, measured on "
                     f"{times.get('cpu') or 'an unnamed CPU'} ({bf16}, {load_text}"
                     + ("; measured on an earlier version of this lesson's code" if stale else "") + ")")
    if exercises:
        parts.append(f"about {exercises * EXERCISE_MINUTES} min of exercises ({exercises} exercise "
                     f"{'cells' if exercises > 1 else 'cell'} × {EXERCISE_MINUTES} min, an estimate)")
    else:
        parts.append("no exercises")
    return "; ".join(parts)


def with_lesson_time(learner_nb: dict[str, Any], instructor_nb: dict[str, Any], stem: str,
                     times: dict[str, Any] | None = None) -> dict[str, Any]:
    """``learner_nb`` with its time marker (if any) filled; the reading count includes the filled
    line, so ``reading.py`` on the learner copy gives the number the line states."""
    if not any(c["cell_type"] == "markdown" and MARKER in _joined(c["source"]) for c in learner_nb["cells"]):
        return learner_nb
    times = load_times() if times is None else times
    exercises = exercise_count(instructor_nb)
    words = notebook_reading(learner_nb, stem).words
    for _ in range(4):  # the line's own words count; a number is one word, so this settles at once
        filled = _fill(learner_nb, time_text(stem, words, exercises, instructor_nb, times))
        counted = notebook_reading(filled, stem).words
        if counted == words:
            return filled
        words = counted
    raise RuntimeError(f"{stem}: the time line's word count did not settle")


def _fill(nb: dict[str, Any], text: str) -> dict[str, Any]:
    out = copy.deepcopy(nb)
    for cell in out["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = _joined(cell["source"])
        if MARKER in source:
            cell["source"] = source.replace(MARKER, f"{MARKER}{text}{END_MARKER}", 1)
    return out
