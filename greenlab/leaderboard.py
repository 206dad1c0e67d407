"""A local leaderboard for the capstone: who reached the target accuracy with the least energy.

    board = gl.Leaderboard()                    # results/leaderboard.json by default
    board.add_result("bf16 + early stop", run)  # a RunResult from gl.train
    print(board.table())
    board.best()                                # the entry ranked first

The board is one JSON file. Every write is crash-safe: the new content goes to a temporary file
that is flushed to disk and renamed over the old one, after the previous content has been kept
as ``<file>.bak``. A file damaged some other way (edited by hand, truncated copy) raises
``LeaderboardError`` naming the backup; ``recover()`` restores it. Each add reads, extends and
writes the file under an OS file lock (``<file>.lock``, see ``greenlab.filelock``), so several
processes adding at once lose no entry.

Ranking: entries that reached their target accuracy come first, ordered by the chosen metric
(default ``joules_to_target``, lowest first); the rest follow, by accuracy (highest first).
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path

from greenlab.filelock import locked
from greenlab.storage import atomic_write_bytes

FORMAT = "greenlab-leaderboard"
VERSION = 1
METRICS = ("joules_to_target", "joules", "seconds", "co2e_g")
_REQUIRED = ("name", "joules", "seconds", "accuracy")


class LeaderboardError(ValueError):
    """The leaderboard file cannot be read as a leaderboard."""


class Leaderboard:
    """A leaderboard stored in the JSON file ``path`` (default: ``leaderboard.json`` in
    ``greenlab.paths.results_dir()``). The file is read on every call, so several notebook
    sessions see each other's entries."""

    def __init__(self, path=None):
        if path is None:
            from greenlab.paths import results_dir

            path = results_dir() / "leaderboard.json"
        self.path = Path(path)

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    # --- adding ---
    def add(self, name: str, *, joules: float, seconds: float, accuracy: float,
            target_accuracy: float | None = None, joules_to_target: float | None = None,
            seconds_to_target: float | None = None, co2e_g: float | None = None,
            region: str = "WORLD", estimated: bool | None = None, sources: dict | None = None,
            provenance: dict | None = None, note: str = "", problems=None) -> dict:
        """Add one entry and save. Energy in joules (whole run), time in seconds, accuracy in
        [0, 1]. ``target_reached`` is ``accuracy >= target_accuracy``; without a
        ``joules_to_target`` a run that reached its target counts its whole energy.
        ``co2e_g`` (grams CO2e) is computed from ``joules`` with ``greenlab.carbon`` for
        ``region`` when not given. ``estimated``/``sources``/``provenance`` say where the energy
        figure comes from (CPU figures without RAPL are estimates). ``problems``: what the
        energy figure is missing (from ``RunResult.problems``); such an entry is marked
        incomplete, its energy a lower bound."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-empty string")
        joules = _number("joules", joules)
        seconds = _number("seconds", seconds)
        accuracy = _number("accuracy", accuracy)
        if accuracy > 1:
            raise ValueError(f"accuracy must be a fraction in [0, 1], got {accuracy!r}")
        reached = None
        if target_accuracy is not None:
            target_accuracy = _number("target_accuracy", target_accuracy)
            if not 0 < target_accuracy <= 1:
                raise ValueError(f"target_accuracy must be in (0, 1], got {target_accuracy!r}")
            reached = accuracy >= target_accuracy or joules_to_target is not None
            if reached:
                joules_to_target = joules if joules_to_target is None else joules_to_target
                seconds_to_target = seconds if seconds_to_target is None else seconds_to_target
        if joules_to_target is not None:
            joules_to_target = _number("joules_to_target", joules_to_target)
        if seconds_to_target is not None:
            seconds_to_target = _number("seconds_to_target", seconds_to_target)
        co2e_note = "given"
        if co2e_g is None:
            from greenlab import carbon

            grid = carbon.intensity(region)
            co2e_g = carbon.co2e_g(joules, grid)
            co2e_note = (f"greenlab.carbon: {grid.g_per_kwh:g} g/kWh for {grid.code} "
                         f"({grid.source}, {grid.year}), PUE {carbon.DEFAULT_PUE:g}")
        if not isinstance(region, str) or not region.strip():
            raise ValueError(f"region must be a region code such as 'WORLD' or 'FRA', got {region!r}")
        from greenlab import carbon

        carbon.check_region(region)  # an unknown region is refused even when co2e_g is given
        if estimated is not None and not isinstance(estimated, bool):
            raise ValueError(f"estimated must be True, False or None, got {estimated!r}")
        for label, value in (("sources", sources), ("provenance", provenance)):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{label} must be a dict or None, got {type(value).__name__}")
        entry = {
            "name": name.strip(),
            "joules": joules, "seconds": seconds, "accuracy": accuracy,
            "target_accuracy": target_accuracy, "target_reached": reached,
            "joules_to_target": joules_to_target, "seconds_to_target": seconds_to_target,
            "co2e_g": _number("co2e_g", co2e_g), "co2e_note": co2e_note, "region": region,
            "estimated": estimated, "sources": dict(sources or {}),
            "provenance": dict(provenance or {}), "note": str(note),
            "complete": not problems, "problems": [str(p) for p in (problems or [])],
            "added": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        try:
            json.dumps(entry, allow_nan=False)  # plain data only, before anything is written
        except (TypeError, ValueError) as exc:
            raise ValueError(f"sources/provenance must hold plain JSON data: {exc}") from None
        with locked(self.path):  # read, extend and write as one step for every process
            entries = self.entries()
            entry = {"id": max((e.get("id", 0) for e in entries), default=0) + 1, **entry}
            self._write(entries + [entry])
        return entry

    def add_result(self, name: str, result, target_accuracy: float | None = None, note: str = "") -> dict:
        """Add a ``RunResult`` from ``gl.train``: its energy, time, CO2e, accuracy, target and
        provenance (``target_accuracy`` defaults to the one in its config)."""
        config = getattr(result, "config", {}) or {}
        target = target_accuracy if target_accuracy is not None else config.get("target_accuracy")
        accuracy = result.final_accuracy if result.final_accuracy is not None else 0.0
        best = result.best_accuracy if result.best_accuracy is not None else accuracy
        return self.add(name, joules=result.joules, seconds=result.seconds, accuracy=best,
                        target_accuracy=target, joules_to_target=result.joules_to_target,
                        seconds_to_target=result.seconds_to_target, co2e_g=result.co2e_g,
                        region=getattr(result, "region", "WORLD"), estimated=result.estimated,
                        sources=result.sources, provenance=result.provenance,
                        note=note or f"status {result.status}",
                        problems=result.problems)

    # --- reading ---
    def entries(self) -> list[dict]:
        """Every entry, in the order added (empty when the file does not exist yet)."""
        if not self.path.exists():
            return []
        try:
            return _parse(self.path.read_bytes())
        except LeaderboardError as exc:
            hint = f"no usable backup at {self.backup_path}"
            if self.backup_path.exists():
                try:
                    hint = (f"the backup {self.backup_path} holds {len(_parse(self.backup_path.read_bytes()))}"
                            " entries: call .recover() to restore it")
                except LeaderboardError:
                    pass
            raise LeaderboardError(f"leaderboard {self.path} is damaged ({exc}); {hint}") from None

    def ranked(self, metric: str = "joules_to_target") -> list[dict]:
        """Entries in rank order (see the module docstring), each with a ``rank`` (1 = best)."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        reached = [e for e in self.entries() if e.get("target_reached")]
        others = [e for e in self.entries() if not e.get("target_reached")]
        reached.sort(key=lambda e: (_metric(e, metric), e["id"]))
        others.sort(key=lambda e: (-e["accuracy"], e["joules"], e["id"]))
        return [{"rank": i + 1, **e} for i, e in enumerate(reached + others)]

    def best(self, metric: str = "joules_to_target") -> dict | None:
        """The best entry that reached its target, or None when none has."""
        ranked = self.ranked(metric)
        return ranked[0] if ranked and ranked[0].get("target_reached") else None

    def table(self, metric: str = "joules_to_target", limit: int | None = None) -> str:
        """The ranking as a plain-text table (the first ``limit`` rows; None for all)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be an integer >= 0 or None, got {limit!r}")
        rows = self.ranked(metric)[:limit]
        header = (f"{'#':>3} {'name':<24} {'target':>7} {'accuracy':>9} {'energy J':>10} "
                  f"{'to target J':>12} {'time s':>8} {'CO2e g':>9}  source")
        lines = [header, "-" * len(header)]
        for e in rows:
            reached = {True: "yes", False: "no", None: "-"}[e.get("target_reached")]
            to_target = "-" if e.get("joules_to_target") is None else f"{e['joules_to_target']:.4g}"
            source = ", ".join(f"{k}={v}" for k, v in (e.get("sources") or {}).items()) or "not given"
            if e.get("estimated"):
                source += " (estimate)"
            if e.get("complete") is False:
                source += " INCOMPLETE: energy is a lower bound"
            lines.append(f"{e['rank']:>3} {e['name'][:24]:<24} {reached:>7} {e['accuracy']:>9.1%} "
                         f"{e['joules']:>10.4g} {to_target:>12} {e['seconds']:>8.3g} {e['co2e_g']:>9.3g}  {source}")
        if not rows:
            lines.append("(no entries yet)")
        return "\n".join(lines)

    # --- repair ---
    def recover(self) -> int:
        """Restore the backup over a damaged file (the damaged one is kept beside it as
        ``<file>.damaged-<UTC time>``). Returns the number of entries restored."""
        with locked(self.path):
            if not self.backup_path.exists():
                raise LeaderboardError(f"no backup at {self.backup_path} to recover from")
            data = self.backup_path.read_bytes()
            entries = _parse(data)
            if self.path.exists():
                stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                os.replace(self.path, self.path.with_name(f"{self.path.name}.damaged-{stamp}"))
            atomic_write_bytes(self.path, data)
        return len(entries)

    def _write(self, entries: list) -> None:
        if self.path.exists():
            atomic_write_bytes(self.backup_path, self.path.read_bytes())
        payload = {"format": FORMAT, "version": VERSION, "entries": entries}
        text = json.dumps(payload, indent=1, allow_nan=False) + "\n"
        atomic_write_bytes(self.path, text.encode("utf-8"))

    def __len__(self) -> int:
        return len(self.entries())

    def __repr__(self) -> str:
        return f"Leaderboard({str(self.path)!r})"


# --- helpers --------------------------------------------------------------------------------

def _parse(data: bytes) -> list[dict]:
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LeaderboardError(f"not valid JSON: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise LeaderboardError(f"not a {FORMAT} file")
    if payload.get("version") != VERSION:
        raise LeaderboardError(f"version {payload.get('version')!r} is not supported (expected {VERSION})")
    entries = payload.get("entries")
    if not isinstance(entries, list):
        raise LeaderboardError("'entries' is not a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or any(k not in e for k in _REQUIRED):
            raise LeaderboardError(f"entry {i} lacks one of {', '.join(_REQUIRED)}")
        if not all(isinstance(e[k], (int, float)) and not isinstance(e[k], bool) for k in _REQUIRED[1:]):
            raise LeaderboardError(f"entry {i} has a non-numeric joules/seconds/accuracy")
    return entries


def _number(label: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{label} must be a finite number >= 0, got {value!r}")
    return float(value)


def _metric(entry: dict, metric: str) -> float:
    value = entry.get(metric)
    if value is None and metric == "joules_to_target":
        value = entry.get("joules")
    return math.inf if value is None else float(value)
