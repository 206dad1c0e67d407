"""A local leaderboard for the capstone: who reached the target accuracy with the least energy.

    board = gl.Leaderboard()                    # results/leaderboard.json by default
    board.add_result("bf16 + early stop", run)  # a RunResult from gl.train
    print(board.table())
    board.best()                                # the entry ranked first

The board is one JSON file. Every write is crash-safe: the new content goes to a temporary file
that is flushed to disk and renamed over the old one, after the previous content has been kept
as ``<file>.bak``. A file damaged some other way (edited by hand, truncated copy) raises
``LeaderboardError`` naming the backup; ``recover()`` restores it. Each add reads, extends and
writes the file under an OS file lock (``<file>.lock``, see ``greenlab.base.filelock``), so several
processes adding at once lose no entry.

Ranking: entries that reached their target accuracy come first, ordered by the chosen metric
(default ``joules_to_target``, lowest first); the rest follow, by accuracy (highest first).
Entries are ranked only against entries whose energy was obtained the same way (the same
sources, estimate or measured; :func:`measured_as`): a laptop's CPU estimate (about a factor of 2)
and a GPU's energy counter describe different machines and different certainties, so a class
board shows one ranking per kind rather than one mixed list.

A class board: the instructor points every learner at one shared folder (a JupyterHub's shared
directory) with ``GREENLAB_LEADERBOARD_DIR=/srv/class/board`` (or ``gl.Leaderboard("/srv/class/board")``);
each entry records its author (``GREENLAB_AUTHOR``, else JupyterHub's user, else the login name),
and ``greenlab leaderboard show --dir /srv/class/board`` prints it from a shell.
``add_result`` keeps failed submissions off the board (a run interrupted, diverged or short of
its target): it returns their entry unsaved, with the reason.
"""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from greenlab.base import validation
from greenlab.base.filelock import locked
from greenlab.base.paths import results_dir
from greenlab.base.storage import atomic_write_bytes
from greenlab.impact import carbon

FORMAT = "greenlab-leaderboard"
VERSION = 1
METRICS = ("joules_to_target", "joules", "seconds", "co2e_g")
_REQUIRED = ("name", "joules", "seconds", "accuracy")
DIR_ENV = "GREENLAB_LEADERBOARD_DIR"
AUTHOR_ENV = "GREENLAB_AUTHOR"
FILE_NAME = "leaderboard.json"
SHARED_MODE = 0o664
FAILED_STATUSES = ("interrupted", "diverged")  # gl.train statuses of a run that did not finish


class LeaderboardError(ValueError):
    """The leaderboard file cannot be read as a leaderboard."""


class Leaderboard:
    """A leaderboard stored in the JSON file ``path``, or in ``leaderboard.json`` inside ``path``
    when it is a folder (default: ``$GREENLAB_LEADERBOARD_DIR``, else ``greenlab.base.paths.results_dir()``).
    The file is read on every call, so several notebook sessions see each other's entries."""

    def __init__(self, path=None):
        if path is None:
            path = os.environ.get(DIR_ENV) or results_dir()
        elif not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            # "" was read as the working folder: each notebook's folder silently got its own board
            raise validation.ArgumentTypeError(
                f"path must be a leaderboard file or folder (or None for ${DIR_ENV}), got {validation._show(path)}")
        path = Path(path).expanduser()  # '~/class' as every other GREENLAB_*_DIR
        self.path = path / FILE_NAME if path.is_dir() or path.suffix != ".json" else path

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    # --- adding ---
    def add(self, name: str, *, joules: float, seconds: float, accuracy: float,
            target_accuracy: float | None = None, joules_to_target: float | None = None,
            seconds_to_target: float | None = None, co2e_g: float | None = None,
            region: str = "WORLD", estimated: bool | None = None, sources: dict | None = None,
            provenance: dict | None = None, note: str = "", problems=None,
            author: str | None = None, save: bool = True) -> dict:
        """Add one entry and save. Energy in joules (whole run), time in seconds, accuracy in
        [0, 1]. ``target_reached`` is ``accuracy >= target_accuracy``; without a
        ``joules_to_target`` a run that reached its target counts its whole energy.
        ``co2e_g`` (grams CO2e) is computed from ``joules`` with ``greenlab.impact.carbon`` for
        ``region`` when not given. ``estimated``/``sources``/``provenance`` say where the energy
        figure comes from (CPU figures without RAPL are estimates). ``problems``: what the
        energy figure is missing (from ``RunResult.problems``); such an entry is marked
        incomplete, its energy a lower bound. ``author`` defaults to :func:`default_author`.
        ``save=False`` checks and returns the entry without writing it."""
        if not isinstance(save, bool):
            raise ValueError(f"save must be True or False, got {save!r}")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-empty string")
        if author is None:
            author = default_author()
        if not isinstance(author, str) or not author.strip():
            raise ValueError(f"author must be a non-empty string, got {author!r}")
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
            grid = carbon.intensity(region)
            co2e_g = carbon.co2e_g(joules, grid)
            co2e_note = (f"greenlab.carbon: {grid.g_per_kwh:g} g/kWh for {grid.code} "
                         f"({grid.source}, {grid.year}), PUE {carbon.DEFAULT_PUE:g}")
        if not isinstance(region, str) or not region.strip():
            raise ValueError(f"region must be a region code such as 'WORLD' or 'FRA', got {region!r}")

        carbon.check_region(region)  # an unknown region is refused even when co2e_g is given
        if estimated is not None and not isinstance(estimated, bool):
            raise ValueError(f"estimated must be True, False or None, got {estimated!r}")
        for label, value in (("sources", sources), ("provenance", provenance)):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{label} must be a dict or None, got {type(value).__name__}")
        entry = {
            "name": name.strip(), "author": author.strip(),
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
        if not save:
            return entry
        with locked(self.path):  # read, extend and write as one step for every process
            entries = self._entries(locked_already=True)
            entry = {"id": max((e.get("id", 0) for e in entries), default=0) + 1, **entry}
            self._write(entries + [entry])
        return entry

    def add_result(self, name: str, result, target_accuracy: float | None = None, note: str = "",
                   author: str | None = None) -> dict:
        """Add a ``RunResult`` from ``gl.train``: its energy, time, CO2e, accuracy, target and
        provenance (``target_accuracy`` defaults to the one in its config).

        A failed submission is not kept on the board: a run that was interrupted or diverged,
        or that missed the target it was given. Its entry is returned with ``saved`` False and
        ``why``, and the file is left as it was; every other entry comes back with ``saved`` True."""
        config = getattr(result, "config", {}) or {}
        target = target_accuracy if target_accuracy is not None else config.get("target_accuracy")
        accuracy = result.final_accuracy if result.final_accuracy is not None else 0.0
        best = result.best_accuracy if result.best_accuracy is not None else accuracy
        status = getattr(result, "status", "completed")
        why = ""
        if status in FAILED_STATUSES:
            why = f"the run ended {status}, so it is not a submission"
        elif target is not None and result.joules_to_target is None and best < target:
            why = (f"the run did not reach its target accuracy ({best:.1%} < {target:.1%}); "
                   "a run that reaches it is added")
        entry = self.add(name, save=not why, joules=result.joules, seconds=result.seconds, accuracy=best,
                        target_accuracy=target, joules_to_target=result.joules_to_target,
                        seconds_to_target=result.seconds_to_target, co2e_g=result.co2e_g,
                        region=getattr(result, "region", "WORLD"), estimated=result.estimated,
                        sources=result.sources, provenance=result.provenance,
                        note=note or f"status {status}",
                        problems=result.problems, author=author)
        return {**entry, "saved": not why, "why": why}

    # --- reading ---
    def entries(self) -> list[dict]:
        """Every entry, in the order added (empty when the file does not exist yet)."""
        return self._entries(locked_already=False)

    def _entries(self, locked_already: bool) -> list[dict]:
        if not self.path.exists():
            return []
        try:
            try:
                return _parse(self.path.read_bytes())
            except LeaderboardError:
                if locked_already or not self.path.exists():
                    raise
                # another user's add may be overwriting the file in place (a sticky class folder,
                # see _write): read it again once no writer holds the lock
                try:
                    with locked(self.path):
                        return _parse(self.path.read_bytes())
                except PermissionError:
                    raise LeaderboardError("unreadable while it was being written") from None
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
        """Entries in rank order (see the module docstring), each with a ``rank`` (1 = best) among
        the entries measured the same way, and ``measured_as`` naming that way; kinds follow each
        other in the order their first entry was added."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
        kinds: dict[str, list[dict]] = {}
        for e in self.entries():
            kinds.setdefault(measured_as(e), []).append(e)
        out = []
        for kind, entries in kinds.items():
            reached = sorted((e for e in entries if e.get("target_reached")),
                             key=lambda e: (_metric(e, metric), e["id"]))
            others = sorted((e for e in entries if not e.get("target_reached")),
                            key=lambda e: (-e["accuracy"], e["joules"], e["id"]))
            out += [{"rank": i + 1, "measured_as": kind, **e} for i, e in enumerate(reached + others)]
        return out

    def best(self, metric: str = "joules_to_target") -> dict | None:
        """The best entry that reached its target (of the first kind of measurement on the board),
        or None when none has."""
        ranked = self.ranked(metric)
        return ranked[0] if ranked and ranked[0].get("target_reached") else None

    def table(self, metric: str = "joules_to_target", limit: int | None = None) -> str:
        """The ranking as a plain-text table (the first ``limit`` rows of each kind of measurement;
        None for all), one section per kind when the board holds more than one."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be an integer >= 0 or None, got {limit!r}")
        ranked = self.ranked(metric)
        kinds = list(dict.fromkeys(e["measured_as"] for e in ranked))
        header = (f"{'#':>3} {'name':<24} {'target':>7} {'accuracy':>9} {'energy J':>10} "
                  f"{'to target J':>12} {'time s':>8} {'CO2e g':>9}  {'by':<12} source")
        lines = [header, "-" * len(header)]
        for kind in kinds:
            rows = [e for e in ranked if e["measured_as"] == kind][:limit]
            if len(kinds) > 1:
                lines.append(f"-- energy {safe_text(kind)}: ranked among themselves --")
            lines += [_row(e) for e in rows]
        if not ranked:
            lines.append("(no entries yet)")
        elif len(kinds) > 1:
            lines.append("Each kind is ranked on its own: an estimate and a measurement, or two kinds of "
                         "counter, are not the same yardstick.")
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
                atomic_write_bytes(self.path.with_name(f"{self.path.name}.damaged-{stamp}"), self.path.read_bytes())
            _write_shared(self.path, data)
        return len(entries)

    def _write(self, entries: list) -> None:
        if self.path.exists():
            _write_shared(self.backup_path, self.path.read_bytes())
        payload = {"format": FORMAT, "version": VERSION, "entries": entries}
        text = json.dumps(payload, indent=1, allow_nan=False) + "\n"
        _write_shared(self.path, text.encode("utf-8"))
        for path in (self.path, self.backup_path):  # a class folder: every learner reads, the group writes
            try:
                os.chmod(path, SHARED_MODE)
            except OSError:
                pass

    def _repr_html_(self) -> str:
        """The ranking as an HTML table for a notebook, every learner-typed value escaped."""
        import html

        head = ["#", "name", "target", "accuracy", "energy J", "to target J", "time s", "CO2e g", "by", "energy from"]
        rows = []
        for e in self.ranked():
            reached = {True: "yes", False: "no", None: "-"}[e.get("target_reached")]
            to_target = "-" if e.get("joules_to_target") is None else f"{e['joules_to_target']:.4g}"
            cells = [e["rank"], e["name"], reached, f"{e['accuracy']:.1%}", f"{e['joules']:.4g}", to_target,
                     f"{e['seconds']:.3g}", f"{e['co2e_g']:.3g}", e.get("author", "-"), e["measured_as"]]
            rows.append("<tr>" + "".join(f"<td>{html.escape(safe_text(c))}</td>" for c in cells) + "</tr>")
        return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
                + "".join(rows) + "</tbody></table>")

    def __len__(self) -> int:
        return len(self.entries())

    def __repr__(self) -> str:
        return f"Leaderboard({str(self.path)!r})"


def _write_shared(path: Path, data: bytes) -> None:
    """``atomic_write_bytes``, or, where the folder refuses to let this user replace the file (a
    sticky-bit class folder: only a file's owner may rename over it), the same bytes written into
    the file in place, flushed to disk (the caller holds the lock, and ``.bak`` holds the previous
    content should this write be cut short)."""
    try:
        atomic_write_bytes(path, data)
        return
    except PermissionError as exc:
        if not path.exists():
            raise PermissionError(exc.errno, f"cannot write {path}: this user may not create files in "
                                             f"{path.parent}") from None
        refused = exc
    try:
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except PermissionError:
        raise PermissionError(refused.errno, f"cannot write {path}: another user owns it and it is not "
                                             "writable by this user's group (a class folder needs a shared "
                                             "group: chgrp the folder and chmod g+ws)") from None


def default_author() -> str:
    """Who adds an entry: ``$GREENLAB_AUTHOR``, else JupyterHub's user, else the login name."""
    for name in (os.environ.get(AUTHOR_ENV), os.environ.get("JUPYTERHUB_USER")):
        if name and name.strip():
            return name.strip()
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):  # no user name in a bare container
        return "unknown"


def measured_as(entry: dict) -> str:
    """How an entry's energy was obtained, as a label: ``"estimated (cpu=estimate)"`` or
    ``"measured (gpu0=nvml-counter)"``; entries with the same label are ranked together."""
    sources = entry.get("sources") or {}
    kinds = ", ".join(f"{k}={v}" for k, v in sorted(sources.items())) or "source not given"
    return f"{'estimated' if entry.get('estimated') else 'measured'} ({kinds})"


def show_main(args) -> int:
    """``greenlab leaderboard show --dir DIR``: print a (class) leaderboard; 1 when it is damaged."""
    if args.dir is not None and not args.dir:
        print("error: --dir must be the board's folder or JSON file, got ''", file=sys.stderr)
        return 2
    board = Leaderboard(args.dir)
    if args.dir is not None or os.environ.get(DIR_ENV):
        # a mistyped folder is an error, not an empty board
        folder = board.path.parent
        if not folder.is_dir():
            print(f"error: no such folder {folder}", file=sys.stderr)
            return 2
        if not board.path.exists():
            print(f"error: no leaderboard in {folder} (no {board.path.name}; nothing has been added there)",
                  file=sys.stderr)
            return 2
    try:
        print(f"{board.path}: {len(board)} entries")
        print(board.table(metric=args.metric, limit=args.limit))
    except LeaderboardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


# --- helpers --------------------------------------------------------------------------------

def safe_text(value) -> str:
    """What a learner typed (a name, an author, a source), fit to print on someone else's terminal:
    control characters (escape sequences that clear or retitle a terminal, newlines that would
    forge rows, carriage returns that overwrite one), format characters (bidirectional overrides
    that reorder what is shown) and line separators are written as visible escapes (``\\x1b``)."""
    import unicodedata

    out = []
    for ch in str(value):
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"):
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def _row(e: dict) -> str:
    reached = {True: "yes", False: "no", None: "-"}[e.get("target_reached")]
    to_target = "-" if e.get("joules_to_target") is None else f"{e['joules_to_target']:.4g}"
    source = ", ".join(f"{safe_text(k)}={safe_text(v)}" for k, v in (e.get("sources") or {}).items()) or "not given"
    if e.get("estimated"):
        source += " (estimate)"
    if e.get("complete") is False:
        source += " INCOMPLETE: energy is a lower bound"
    return (f"{e['rank']:>3} {safe_text(e['name'])[:24]:<24} {reached:>7} {e['accuracy']:>9.1%} "
            f"{e['joules']:>10.4g} {to_target:>12} {e['seconds']:>8.3g} {e['co2e_g']:>9.3g}  "
            f"{safe_text(e.get('author', '-'))[:12]:<12} {source}")


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
