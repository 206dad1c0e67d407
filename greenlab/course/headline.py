"""A lesson's headline as data: ``gl.headline(...)`` in the cell that computes a lesson's main
verdict returns one record (what the technique saves, the factor with its 95% interval, whether it is
detectable, the repeats, how the energy was obtained, whether this CPU runs bf16 natively) and, when
``GREENLAB_HEADLINE_FILE`` names a file, appends it there as one JSON line. ``python -m
greenlab.course results`` (``greenlab.course.results``) sets that variable for each lesson it runs and
builds the course's results table from the records.

The factor reads "how many times less": ``Paired`` from ``greenlab.experiments.verdicts`` with the
baseline as its *variant* (e.g. ``comparison.paired("naive", "green")``, naive / green), so 5 means the
technique needs a fifth. None records a headline without a factor (and ``reached`` or ``note`` says why).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from greenlab.energy.provenance import how_measured
from greenlab.session import hardware
from greenlab.session.config import device

HEADLINE_FILE_ENV = "GREENLAB_HEADLINE_FILE"  # where records go (JSON lines); unset: nowhere
HEADLINE_LESSON_ENV = "GREENLAB_HEADLINE_LESSON"  # the lesson the results runner is running
FIELDS = ("lesson", "technique", "saves", "factor", "low", "high", "detectable", "repeats", "reached",
          "energy_source", "estimated", "cpu_bf16", "device", "note")


def headline(lesson: str | None, technique: str, saves: str, factor, source=None, reached: str = "",
             note: str = "") -> dict:
    """Record a lesson's headline and return the record (a dict with FIELDS).

    ``lesson``: its number ("09"; None reads GREENLAB_HEADLINE_LESSON). ``technique``: what is compared
    ("the green recipe against a tutorial's defaults"); ``saves``: what it saves ("energy to the
    validation target, search included"). ``factor``: a ``Paired`` verdict of baseline / technique
    (ratio kind), or None where there is no factor. ``source``: a result with energy (a comparison, a
    run) whose provenance ``how_measured`` states. ``reached``/``note``: free text (how many repeats
    reached a target, why there is no factor)."""
    for name, value in (("technique", technique), ("saves", saves), ("reached", reached), ("note", note)):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be text, got {value!r}")
    for name, value in (("technique", technique), ("saves", saves)):  # the table's two columns that say what
        if not value.strip():
            raise ValueError(f"{name} must say what the headline compares or saves, got {value!r}")
    if lesson is not None:
        from greenlab.course.quiz import lessons  # lazy: the course's lessons, by their quiz files

        numbers = sorted({name[:2] for name in lessons()})
        if not (isinstance(lesson, str) and re.fullmatch(r"\d\d", lesson) and lesson in numbers):
            raise ValueError(f"lesson must be one of the course's lesson numbers ({', '.join(numbers)}; or None: "
                             f"the lesson being run), got {lesson!r}")
    lesson = lesson if lesson is not None else os.environ.get(HEADLINE_LESSON_ENV, "")
    record = {"lesson": lesson, "technique": technique, "saves": saves, "factor": None, "low": None,
              "high": None, "detectable": None, "repeats": None, "reached": reached, "energy_source": "",
              "estimated": None, "cpu_bf16": _cpu_bf16(), "device": _device(), "note": note}
    if factor is not None:
        if getattr(factor, "kind", None) != "ratio":
            raise ValueError("factor must be a ratio verdict (gl.experiments.paired on energy or time), or None")
        record.update(factor=_number(factor.estimate), low=_number(factor.low), high=_number(factor.high),
                      detectable=factor.detectable, repeats=factor.n)
    if source is not None:
        record["energy_source"] = how_measured(source, short=True)
        record["estimated"] = bool(getattr(source, "estimated", False))
    path = os.environ.get(HEADLINE_FILE_ENV, "").strip()
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
    return record


def read_headlines(path) -> list[dict]:
    """The records in ``path`` (JSON lines), in order; [] when it does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


# --- helpers ---------------------------------------------------------------------------

def _number(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _cpu_bf16():
    try:
        return bool(hardware.precision_support("bf16", "cpu").native)
    except Exception:  # noqa: BLE001 - a record must not fail because a probe did
        return None


def _device():
    return device()
