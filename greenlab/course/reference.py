"""Recorded GPU reference runs (``gl.reference``).

A lesson run on a laptop measures a CPU; the "what it means on a real GPU"
section shows runs recorded on a named GPU instead. Each run is one JSON file in
``data/reference_runs/`` named ``<gpu-slug>_<YYYY-MM-DD>_<experiment>.json`` with
its provenance (GPU, driver, CUDA, torch, date, command) and results; the schema
is described in ``data/reference_runs/README.md``. When no run was recorded the
lesson says so plainly: figures are never invented.

    gl.reference.show("mixed_precision")      # prints a table labelled with GPU and date
    runs = gl.reference.load("mixed_precision")

The folder is ``reference_runs`` in the data folder (``data/`` beside the
package, or ``GREENLAB_DATA_DIR``), overridden by the ``GREENLAB_REFERENCE_DIR``
environment variable or a ``folder=`` argument.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenlab.base.paths import data_dir, lessons_dir

SCHEMA_VERSION = 1
ENV_VAR = "GREENLAB_REFERENCE_DIR"
REQUIRED_FIELDS = {
    "schema_version": int,
    "experiment": str,
    "date": str,
    "gpu": str,
    "driver": str,
    "cuda": str,
    "torch": str,
    "command": str,
    "results": list,
}
OPTIONAL_FIELDS = {
    "gpu_count": int,
    "energy_source": str,
    "greenlab": str,
    "python": str,
    "units": dict,
    "notes": str,
}
ENERGY_SOURCES = ("nvml-counter", "nvml-power", "rapl", "estimate")
_FILE_RE = re.compile(r"^(?P<gpu>[a-z0-9]+(?:-[a-z0-9]+)*)_(?P<date>\d{4}-\d{2}-\d{2})_"
                      r"(?P<experiment>[a-z0-9][a-z0-9_-]*)\.json$")
_EXPERIMENT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_READ_CALL_RE = re.compile(r"""reference\.(?:show|load|table)\(\s*["']([a-z0-9][a-z0-9_-]*)["']""")


class ReferenceRunError(ValueError):
    """A reference-run file is malformed; the message names the file and the problem."""


@dataclass
class ReferenceRun:
    """One recorded run: provenance plus ``results`` (a list of rows, each a dict with a ``label``)."""

    experiment: str
    date: str
    gpu: str
    driver: str
    cuda: str
    torch: str
    command: str
    results: list[dict[str, Any]]
    gpu_count: int = 1
    energy_source: str | None = None
    greenlab: str | None = None
    python: str | None = None
    units: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    path: Path | None = None

    @property
    def heading(self) -> str:
        """One line naming the GPU, the software and the date of the run."""
        gpus = f"{self.gpu_count} x {self.gpu}" if self.gpu_count != 1 else self.gpu
        return (
            f"Recorded GPU run: {gpus} (driver {self.driver}, CUDA {self.cuda}, "
            f"torch {self.torch}), {self.date}"
        )

    def columns(self) -> list[str]:
        """Result columns in first-seen order, ``label`` first."""
        cols: list[str] = []
        for row in self.results:
            for key in row:
                if key not in cols:
                    cols.append(key)
        cols.remove("label")
        return ["label"] + cols

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this run (as stored on disk)."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for key in list(REQUIRED_FIELDS)[1:] + list(OPTIONAL_FIELDS):
            value = getattr(self, key)
            if value not in (None, "", {}):
                out[key] = value
        return out


@dataclass
class ReferenceTable:
    """What :func:`table` returns: text via ``str()``, an HTML table in notebooks."""

    experiment: str
    runs: list[ReferenceRun]

    def text(self) -> str:
        """Plain-text rendering, one block per recorded run."""
        if not self.runs:
            return missing_message(self.experiment)
        blocks = []
        for run in self.runs:
            cols = run.columns()
            header = [_header(c, run.units) for c in cols]
            rows = [[_fmt(row.get(c)) for c in cols] for row in run.results]
            widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(cols))]
            lines = [run.heading, f"Command: {run.command}"]
            if run.energy_source:
                lines.append(f"Energy source: {run.energy_source}")
            if run.notes:
                lines.append(f"Notes: {run.notes}")
            lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
            lines.append("  ".join("-" * w for w in widths))
            for r in rows:
                lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        if not self.runs:
            return f"<p><em>{html.escape(missing_message(self.experiment))}</em></p>"
        parts = []
        for run in self.runs:
            cols = run.columns()
            head = "".join(f"<th>{html.escape(_header(c, run.units))}</th>" for c in cols)
            body = "".join(
                "<tr>" + "".join(f"<td>{html.escape(_fmt(row.get(c)))}</td>" for c in cols) + "</tr>"
                for row in run.results
            )
            meta = f"Command: <code>{html.escape(run.command)}</code>"
            if run.energy_source:
                meta += f"; energy source: {html.escape(run.energy_source)}"
            if run.notes:
                meta += f"<br>{html.escape(run.notes)}"
            parts.append(
                f"<p><strong>{html.escape(run.heading)}</strong><br>{meta}</p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            )
        return "".join(parts)


def reference_dir(folder: str | os.PathLike | None = None) -> Path:
    """The folder holding reference runs: ``folder``, else ``$GREENLAB_REFERENCE_DIR``,
    else ``reference_runs`` in the data folder (``$GREENLAB_DATA_DIR`` or ``<repo>/data``)."""
    if folder is not None:
        return Path(folder)
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)

    return data_dir() / "reference_runs"


def missing_message(experiment: str) -> str:
    """The plain sentence shown when no GPU run was recorded for ``experiment``."""
    return (
        f"No recorded GPU run for '{experiment}' yet: "
        "these figures have not been measured on a GPU."
    )


def load(experiment: str, folder: str | os.PathLike | None = None) -> list[ReferenceRun]:
    """All recorded runs of ``experiment``, oldest first; an empty list when there are none.

    Raises :class:`ReferenceRunError` when a file for this experiment is malformed.
    """
    _check_experiment_name(experiment)
    runs = [
        load_file(path)
        for path in _files(reference_dir(folder))
        if _FILE_RE.match(path.name) and _FILE_RE.match(path.name)["experiment"] == experiment
    ]
    return sorted(runs, key=lambda r: (r.date, r.gpu, r.path.name if r.path else ""))


def value(experiment: str, label: str, column: str, folder: str | os.PathLike | None = None) -> tuple:
    """``(value, run)``: ``column`` of the row labelled ``label`` in the newest recorded run of
    ``experiment`` that has one (a number, not None), or ``(None, None)`` when no run has it."""
    for run in reversed(load(experiment, folder)):
        for row in run.results:
            if row.get("label") == label and row.get(column) is not None:
                return row[column], run
    return None, None


def experiments(folder: str | os.PathLike | None = None) -> list[str]:
    """Names of the experiments that have at least one recorded run (from file names)."""
    names = {m["experiment"] for p in _files(reference_dir(folder)) if (m := _FILE_RE.match(p.name))}
    return sorted(names)


def table(experiment: str, folder: str | os.PathLike | None = None) -> ReferenceTable:
    """A displayable table of the recorded runs of ``experiment`` (says so when there are none)."""
    return ReferenceTable(experiment, load(experiment, folder))


def recorded(experiment: str, label: str, column: str, folder: str | os.PathLike | None = None):
    """``(value, run)`` from the newest recorded run of ``experiment`` whose row ``label`` has a
    number in ``column``; ``None`` when no such run was recorded (a figure is never made up)."""
    for run in reversed(load(experiment, folder)):
        for row in run.results:
            value = row.get(column)
            if row.get("label") == label and isinstance(value, (int, float)) and not isinstance(value, bool):
                return value, run
    return None


def show(experiment: str, folder: str | os.PathLike | None = None) -> None:
    """Print the recorded runs of ``experiment``, labelled with GPU and date, or say there are none."""
    print(table(experiment, folder).text())


def lesson_experiments(lessons_folder: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """The experiment names each instructor lesson reads, from its code cells'
    ``gl.reference.show("...")`` / ``load`` / ``table`` calls: ``{"01_mixed_precision": [...]}``.

    ``benchmarks/gpu_suite.py`` must record every one of them (a test checks that it does).
    """
    folder = Path(lessons_folder) if lessons_folder is not None else lessons_dir()
    out: dict[str, list[str]] = {}
    for path in sorted((folder / "instructor").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        names: list[str] = []
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            for name in _READ_CALL_RE.findall(source):
                if name not in names:
                    names.append(name)
        out[path.stem] = names
    return out


def validate_folder(folder: str | os.PathLike | None = None) -> list[ReferenceRun]:
    """Load every ``*.json`` in the folder; raise one :class:`ReferenceRunError` listing every problem."""
    runs, problems = [], []
    for path in _files(reference_dir(folder)):
        try:
            runs.append(load_file(path))
        except ReferenceRunError as exc:
            problems.append(str(exc))
    if problems:
        raise ReferenceRunError("\n".join(problems))
    return runs


def load_file(path: str | os.PathLike) -> ReferenceRun:
    """Read and validate one reference-run file (see ``data/reference_runs/README.md``)."""
    path = Path(path)
    where = path.name
    m = _FILE_RE.match(path.name)
    if not m:
        raise ReferenceRunError(
            f"{where}: file name must be <gpu-slug>_<YYYY-MM-DD>_<experiment>.json "
            "(lower-case letters, digits and '-' in the GPU slug), e.g. nvidia-h200_2026-05-01_mixed_precision.json"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReferenceRunError(f"{where}: not valid JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ReferenceRunError(f"{where}: not UTF-8 text, so not a reference run ({exc})") from None
    except OSError as exc:
        raise ReferenceRunError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    run = from_dict(data, where)
    if m["experiment"] != run.experiment:
        raise ReferenceRunError(f"{where}: file name says experiment '{m['experiment']}' "
                                f"but the file says '{run.experiment}'")
    if m["date"] != run.date:
        raise ReferenceRunError(f"{where}: file name says date {m['date']} but the file says {run.date}")
    if m["gpu"] != gpu_slug(run.gpu):
        raise ReferenceRunError(
            f"{where}: file name says GPU '{m['gpu']}' but the file's gpu {run.gpu!r} gives slug '{gpu_slug(run.gpu)}'"
        )
    run.path = path
    return run


def from_dict(data: Any, where: str = "reference run") -> ReferenceRun:
    """Validate a parsed reference-run dict and return it as a :class:`ReferenceRun`."""
    if not isinstance(data, dict):
        raise ReferenceRunError(f"{where}: the top level must be a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED_FIELDS if k not in data]
    if missing:
        raise ReferenceRunError(f"{where}: missing required field(s) {missing}; required: {list(REQUIRED_FIELDS)}")
    unknown = sorted(set(data) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        allowed = list(REQUIRED_FIELDS) + list(OPTIONAL_FIELDS)
        raise ReferenceRunError(f"{where}: unknown field(s) {unknown}; allowed: {allowed}")
    for key, kind in {**REQUIRED_FIELDS, **OPTIONAL_FIELDS}.items():
        if key in data and (not isinstance(data[key], kind) or isinstance(data[key], bool)):
            raise ReferenceRunError(f"{where}: field '{key}' must be a {kind.__name__}, got {data[key]!r}")
    if data["schema_version"] != SCHEMA_VERSION:
        raise ReferenceRunError(f"{where}: schema_version {data['schema_version']} is not supported "
                                f"(expected {SCHEMA_VERSION})")
    for key in ("gpu", "driver", "cuda", "torch", "command"):
        if not data[key].strip():
            raise ReferenceRunError(f"{where}: field '{key}' must not be empty")
    if not _EXPERIMENT_RE.match(data["experiment"]):
        raise ReferenceRunError(f"{where}: experiment {data['experiment']!r} "
                                "must use lower-case letters, digits, '_' and '-'")
    try:
        _dt.date.fromisoformat(data["date"])
    except ValueError:
        raise ReferenceRunError(f"{where}: date {data['date']!r} must be a real date written YYYY-MM-DD") from None
    if data.get("gpu_count", 1) < 1:
        raise ReferenceRunError(f"{where}: gpu_count must be >= 1, got {data['gpu_count']}")
    if "energy_source" in data and data["energy_source"] not in ENERGY_SOURCES:
        raise ReferenceRunError(f"{where}: energy_source must be one of {list(ENERGY_SOURCES)}, "
                                f"got {data['energy_source']!r}")
    for col, unit in data.get("units", {}).items():
        if not isinstance(unit, str):
            raise ReferenceRunError(f"{where}: units['{col}'] must be a string such as 'J' or 's', got {unit!r}")
    _validate_results(data["results"], where)
    return ReferenceRun(
        experiment=data["experiment"], date=data["date"], gpu=data["gpu"], driver=data["driver"],
        cuda=data["cuda"], torch=data["torch"], command=data["command"], results=data["results"],
        gpu_count=data.get("gpu_count", 1), energy_source=data.get("energy_source"),
        greenlab=data.get("greenlab"), python=data.get("python"), units=data.get("units", {}),
        notes=data.get("notes", ""),
    )


def gpu_slug(gpu_name: str) -> str:
    """The file-name slug of a GPU name: lower case, runs of other characters become '-'."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-")


# --- helpers ----------------------------------------------------------------------------------


def _validate_results(results: list, where: str) -> None:
    if not results:
        raise ReferenceRunError(f"{where}: 'results' must hold at least one row")
    for i, row in enumerate(results):
        if not isinstance(row, dict):
            raise ReferenceRunError(f"{where}: results[{i}] must be an object, got {row!r}")
        if not isinstance(row.get("label"), str) or not row["label"]:
            raise ReferenceRunError(f"{where}: results[{i}] needs a non-empty string 'label'")
        for key, value in row.items():
            if not (value is None or isinstance(value, (str, int, float, bool))):
                raise ReferenceRunError(
                    f"{where}: results[{i}]['{key}'] must be a number, string, boolean or null, got {value!r}"
                )


def _check_experiment_name(experiment: str) -> None:
    if not isinstance(experiment, str) or not _EXPERIMENT_RE.match(experiment):
        raise ValueError(
            f"experiment must be a name of lower-case letters, digits, '_' and '-', got {experiment!r}"
        )


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())


def _header(column: str, units: dict[str, str]) -> str:
    return f"{column} [{units[column]}]" if column in units else column


def _fmt(value: Any) -> str:
    """Readable, rounded cell text; the stored file keeps full precision."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    return str(value)
