"""Carbon-aware scheduling: when to run a job so that its electricity is cleanest.

A grid's carbon intensity (grams CO2 per kWh) changes hour by hour as the mix of
generators changes (more wind at night, more gas at the evening peak, ...). A job
that can wait may start in the hours with the lowest intensity. For a job that
draws constant power for ``hours_needed`` hours, its emissions are

    grams = energy [kWh] x mean intensity over its window [g/kWh]

so the best start hour is the one whose contiguous window has the lowest mean.

**Average versus marginal intensity.** The profiles here are *average*
intensities: emissions of all generation in an hour divided by all electricity
in that hour. They answer "what share of the grid's emissions is my
electricity?". The *marginal* intensity answers a different question: "which
generator ramps up because I switched on?" (often gas, even when the average is
low). Marginal figures are modelled, not metered, and usually need a commercial
data source; moving load from a high-average to a low-average hour is a good
first step, but the true saving is the difference in *marginal* intensity,
which can be smaller or larger. Say which one you used.

Shipped profiles live in ``cited_tables/hourly_intensity_<name>.csv`` (source, date and
method in the file header and in ``cited_tables/README.md``); ``load_profile`` also reads
a learner's CSV, and ``from_values`` takes a plain list (e.g. 24 numbers).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from greenlab.impact import carbon
from greenlab.base.units import JOULES_PER_KWH
from greenlab.base.tables import DataTableError

PROFILE_PREFIX = "hourly_intensity_"
VALUE_COLUMNS = ("g_co2_per_kwh", "g_co2e_per_kwh", "intensity")


@dataclass(frozen=True)
class Profile:
    """Hourly grid intensity: ``g_per_kwh[i]`` is the intensity of hour ``i`` (grams CO2 or
    CO2e per kWh, see ``unit``). ``start`` names hour 0 (e.g. '2023-03-14T00:00Z')."""

    name: str
    g_per_kwh: tuple[float, ...]
    unit: str = "gCO2/kWh"
    start: str = ""
    kind: str = "average"
    source: str = "supplied by the user"
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.g_per_kwh)

    @property
    def mean(self) -> float:
        """Mean intensity over all hours (same unit as the profile)."""
        return sum(self.g_per_kwh) / len(self.g_per_kwh)

    def describe(self) -> str:
        """One line: name, hours, range, kind and source."""
        lo, hi = min(self.g_per_kwh), max(self.g_per_kwh)
        when = f" from {self.start}" if self.start else ""
        return (f"{self.name}: {len(self)} hourly values{when}, {lo:.4g}-{hi:.4g} {self.unit} "
                f"(mean {self.mean:.4g}; {self.kind} intensity). Source: {self.source}")


@dataclass(frozen=True)
class Window:
    """A contiguous run of hours: starts at ``start_hour`` and covers ``hours`` (indices)."""

    start_hour: int
    hours: tuple[int, ...]
    mean_g_per_kwh: float

    @property
    def end_hour(self) -> int:
        """The hour index just after the window (modulo the profile length when wrapped)."""
        return self.hours[-1] + 1


@dataclass(frozen=True)
class Schedule:
    """Outcome of :func:`best_window`: the best window, the reference ("now") window and
    the saving in intensity between them."""

    profile: Profile
    hours_needed: int
    wrap: bool
    best: Window
    reference: Window

    @property
    def saving_g_per_kwh(self) -> float:
        """Reference mean minus best mean (>= 0), in the profile's unit."""
        return self.reference.mean_g_per_kwh - self.best.mean_g_per_kwh

    @property
    def saving_fraction(self) -> float:
        """Saving as a fraction of the reference window's mean (0 when the reference is 0)."""
        if self.reference.mean_g_per_kwh == 0:
            return 0.0
        return self.saving_g_per_kwh / self.reference.mean_g_per_kwh

    def grams(self, joules: float, pue: float | None = None) -> dict:
        """Emissions (grams) of a job using ``joules`` spread evenly over its window:
        ``{"best": g, "reference": g, "saved": g}``; ``pue`` as in ``carbon.co2e_g``."""
        joules = _non_negative(joules, "joules")
        factor = carbon._check_pue(pue)
        kwh = joules / JOULES_PER_KWH
        best = kwh * self.best.mean_g_per_kwh * factor
        ref = kwh * self.reference.mean_g_per_kwh * factor
        return {"best": best, "reference": ref, "saved": ref - best}

    def summary(self) -> str:
        """One readable paragraph with both windows and the saving."""
        unit = self.profile.unit
        return (f"{self.hours_needed} h job on '{self.profile.name}': best start hour "
                f"{self.best.start_hour} (mean {self.best.mean_g_per_kwh:.4g} {unit}) versus start hour "
                f"{self.reference.start_hour} (mean {self.reference.mean_g_per_kwh:.4g} {unit}): "
                f"{self.saving_fraction:.0%} lower {self.profile.kind} intensity"
                f"{' (windows may wrap past midnight)' if self.wrap else ''}.")


# --- public API ---------------------------------------------------------------


def profiles() -> list[str]:
    """Names of the hourly profiles shipped in ``cited_tables/`` (for :func:`load_profile`)."""
    folder = carbon.data_dir()
    names = [p.stem[len(PROFILE_PREFIX):] for p in folder.glob(f"{PROFILE_PREFIX}*.csv")]
    return sorted(names)


def load_profile(name: str) -> Profile:
    """A shipped profile by name (see :func:`profiles`), or a CSV file given by path.

    A CSV has one row per hour and a value column named ``g_co2_per_kwh`` (or
    ``g_co2e_per_kwh`` / ``intensity``); an optional ``hour`` column must count
    0, 1, 2, ... with no gaps. Lines starting with ``#`` are comments; comments of
    the form ``# source: ...`` and ``# kind: ...`` are kept as metadata.
    Missing, NaN, infinite or negative values raise ValueError.
    """
    if not isinstance(name, (str, Path)) or not str(name).strip():
        raise ValueError(f"profile must be a shipped name ({', '.join(profiles()) or 'none'}) "
                         f"or a CSV path, got {name!r}")
    text = str(name).strip()
    path = Path(text).expanduser()
    if path.suffix.lower() != ".csv":
        path = carbon.data_dir() / f"{PROFILE_PREFIX}{text}.csv"
        if not path.is_file():
            raise ValueError(f"unknown profile name {text!r}; shipped profiles: "
                             f"{', '.join(profiles()) or 'none'} (or give a path to a .csv file)")
        label = text
    else:
        if not path.is_file():
            raise ValueError(f"profile CSV not found: {path}")
        label = path.stem
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataTableError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return _parse_csv(text, label, str(path))


def from_values(values: Sequence[float], name: str = "my profile", unit: str = "gCO2/kWh",
                source: str = "supplied by the user", start: str = "", kind: str = "average") -> Profile:
    """A :class:`Profile` from a list of hourly intensities (e.g. 24 numbers, hour 0 first)."""
    return Profile(name=str(name), g_per_kwh=_check_values(values), unit=unit, start=start,
                   kind=kind, source=source)


def best_window(profile, hours_needed: int, wrap: bool = False, now: int = 0) -> Schedule:
    """The start hour that minimises mean intensity over ``hours_needed`` contiguous hours.

    ``profile``: a :class:`Profile`, a shipped profile name, or a list of hourly values.
    ``wrap=True`` lets a window run past the last hour into hour 0 again, i.e. treats
    the profile as a day that repeats (use it for a 24-hour "typical day"; leave it off
    for a dated series). ``now``: the start hour to compare against (running straight
    away). Ties go to the earliest start hour. Raises ValueError for bad input.
    """
    prof = _as_profile(profile)
    n = len(prof)
    if isinstance(hours_needed, bool) or not isinstance(hours_needed, int) or not 1 <= hours_needed <= n:
        raise ValueError(f"hours_needed must be a whole number of hours from 1 to {n} "
                         f"(the profile's length), got {hours_needed!r}")
    if not isinstance(wrap, bool):
        raise ValueError(f"wrap must be True or False, got {wrap!r}")
    last_start = n - 1 if wrap else n - hours_needed
    if isinstance(now, bool) or not isinstance(now, int) or not 0 <= now <= last_start:
        raise ValueError(f"now must be a start hour from 0 to {last_start} for a {hours_needed} h job "
                         f"{'(wrapping)' if wrap else 'without wrapping'}, got {now!r}")
    windows = [_window(prof, start, hours_needed) for start in range(last_start + 1)]
    best = min(windows, key=lambda w: (w.mean_g_per_kwh, w.start_hour))
    return Schedule(profile=prof, hours_needed=hours_needed, wrap=wrap, best=best, reference=windows[now])


def window_means(profile, hours_needed: int, wrap: bool = False) -> list[float]:
    """Mean intensity of the window starting at each possible hour (for a plot)."""
    prof = _as_profile(profile)
    schedule = best_window(prof, hours_needed, wrap=wrap)
    last_start = len(prof) - 1 if schedule.wrap else len(prof) - hours_needed
    return [_window(prof, s, hours_needed).mean_g_per_kwh for s in range(last_start + 1)]


def schedule_jobs(profile, jobs) -> dict:
    """Plan several jobs on one machine (one job per hour) over an hourly profile.

    ``jobs``: a list of dicts ``{"name": str, "hours": int, "deadline": int, "interruptible":
    bool}``; a job must finish by ``deadline`` (it may use hours ``0 .. deadline - 1``).
    Earliest deadline first (ties: the order given), each job takes the cleanest hours still
    free before its deadline: any such hours when it is interruptible, else the free
    contiguous window with the lowest mean (ties: the earliest hour). Returns ``{name: sorted
    list of hour indices}``, or ``None`` for a job that no longer fits: a greedy plan, not
    always the cheapest possible one. Raises ValueError for a malformed job."""
    prof = _as_profile(profile)
    values, taken, plan = prof.g_per_kwh, set(), {}
    for job in sorted(_check_jobs(jobs, len(prof)), key=lambda j: j["deadline"]):  # stable sort
        free = [h for h in range(job["deadline"]) if h not in taken]
        if job["interruptible"]:
            chosen = sorted(sorted(free, key=lambda h: (values[h], h))[:job["hours"]])
        else:
            runs = [list(range(s, s + job["hours"])) for s in range(job["deadline"] - job["hours"] + 1)]
            runs = [r for r in runs if not taken.intersection(r)]
            chosen = min(runs, key=lambda r: (math.fsum(values[h] for h in r), r[0]), default=[])
        if len(chosen) < job["hours"]:
            plan[job["name"]] = None
            continue
        taken.update(chosen)
        plan[job["name"]] = chosen
    return {job["name"]: plan[job["name"]] for job in jobs}


def plan_grams(profile, plan: dict, kwh_per_hour: float) -> float:
    """Grams CO2 of a plan from :func:`schedule_jobs` (or any {name: hours}) when every job
    draws ``kwh_per_hour`` kWh in each of its hours; jobs planned as ``None`` count 0."""
    prof = _as_profile(profile)
    kwh = _non_negative(kwh_per_hour, "kwh_per_hour")
    return math.fsum(prof.g_per_kwh[h] * kwh for hours in plan.values() if hours for h in hours)


def as_soon_as_possible(profile, jobs) -> dict:
    """The carbon-blind plan to compare against: jobs in the order given, each in the first
    free hours (contiguous for a job that cannot be interrupted), deadlines ignored."""
    prof = _as_profile(profile)
    next_free, plan = 0, {}
    for job in _check_jobs(jobs, len(prof), deadlines=False):
        hours = list(range(next_free, next_free + job["hours"]))
        plan[job["name"]] = hours if hours[-1] < len(prof) else None
        next_free += job["hours"]
    return plan


# --- helpers ------------------------------------------------------------------


def _window(prof: Profile, start: int, hours_needed: int) -> Window:
    n = len(prof)
    hours = tuple((start + i) % n for i in range(hours_needed))
    mean = math.fsum(prof.g_per_kwh[h] for h in hours) / hours_needed  # exact sum: fair ties
    return Window(start_hour=start, hours=hours, mean_g_per_kwh=mean)


def _as_profile(profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, (str, Path)):
        return load_profile(profile)
    if isinstance(profile, (list, tuple)) or hasattr(profile, "__len__"):
        return from_values(list(profile))
    raise ValueError("profile must be a Profile, a shipped profile name, a CSV path or a list of "
                     f"hourly values, got {type(profile).__name__}")


def _check_values(values) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"hourly values must be a list of numbers, got {type(values).__name__}")
    items = list(values)
    if not items:
        raise ValueError("hourly values are empty; give one value per hour (e.g. 24 numbers)")
    out = []
    for hour, value in enumerate(items):
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"values[{hour}]: hour {hour} is missing; every hour needs a value >= 0")
        if isinstance(value, bool):
            raise ValueError(f"values[{hour}]: hour {hour} is {value!r}, not an intensity")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"values[{hour}]: hour {hour} is {value!r}, not a number") from None
        if math.isnan(number) or math.isinf(number):
            raise ValueError(f"values[{hour}]: hour {hour} is {number}; every hour needs a finite value >= 0")
        if number < 0:
            raise ValueError(f"values[{hour}]: hour {hour} is negative ({number}); intensities are >= 0")
        out.append(number)
    return tuple(out)


def _parse_csv(text: str, label: str, where: str) -> Profile:
    meta: dict[str, str] = {}
    body = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            key, sep, value = stripped.lstrip("#").partition(":")
            if sep and key.strip().lower() in ("source", "kind", "method", "scope", "retrieved via"):
                meta[key.strip().lower()] = value.strip()
            elif "title" not in meta:
                meta["title"] = stripped.lstrip("#").strip()
            continue
        if stripped:
            body.append(line)
    if not body:
        raise ValueError(f"{where}: no data rows")
    reader = csv.DictReader(io.StringIO("\n".join(body)))
    columns = [c.strip() for c in (reader.fieldnames or [])]
    value_col = next((c for c in VALUE_COLUMNS if c in columns), None)
    if value_col is None:
        raise ValueError(f"{where}: needs a value column named one of {', '.join(VALUE_COLUMNS)}; "
                         f"found {', '.join(columns) or 'none'}")
    rows = [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in reader]
    if "hour" in columns:
        for expected, row in enumerate(rows):
            if row.get("hour", "") != str(expected):
                raise ValueError(f"{where}: hours must count 0, 1, 2, ... without gaps; row {expected + 1} "
                                 f"has hour {row.get('hour')!r} (a missing hour?)")
    values = _check_values([row.get(value_col, "") or None for row in rows])
    unit = "gCO2e/kWh" if value_col == "g_co2e_per_kwh" else "gCO2/kWh"
    start = rows[0].get("start_utc", "") if rows else ""
    notes = tuple(f"{k}: {v}" for k, v in meta.items() if k not in ("source", "kind"))
    kind = meta.get("kind", "average").split()[0].rstrip(".,;") or "average"
    return Profile(name=label, g_per_kwh=values, unit=unit, start=start, kind=kind,
                   source=meta.get("source", f"file {where} (no '# source:' line)"), notes=notes)


def _non_negative(value, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}") from None
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _check_jobs(jobs, n_hours: int, deadlines: bool = True) -> list:
    if isinstance(jobs, (str, bytes, dict)) or not hasattr(jobs, "__iter__"):
        raise ValueError(f"jobs must be a list of dicts with name, hours, deadline, interruptible; got {jobs!r}")
    out, names = [], set()
    for i, job in enumerate(jobs):
        if not isinstance(job, dict) or not {"name", "hours"} <= set(job):
            raise ValueError(f"jobs[{i}] must be a dict with name, hours, deadline and interruptible, got {job!r}")
        hours, deadline = job["hours"], job.get("deadline", n_hours)
        if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= n_hours:
            raise ValueError(f"jobs[{i}]['hours'] must be a whole number from 1 to {n_hours}, got {hours!r}")
        if deadlines and (isinstance(deadline, bool) or not isinstance(deadline, int)
                          or not 1 <= deadline <= n_hours):
            raise ValueError(f"jobs[{i}]['deadline'] must be an hour from 1 to {n_hours}, got {deadline!r}")
        if job["name"] in names:
            raise ValueError(f"jobs[{i}]['name'] {job['name']!r} is used twice; names must be unique")
        names.add(job["name"])
        out.append({"name": job["name"], "hours": hours, "deadline": deadline,
                    "interruptible": bool(job.get("interruptible", False))})
    return out
