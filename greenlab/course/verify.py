"""A class leaderboard that cannot be forged: learners submit recipes, the instructor re-runs them.

``Leaderboard.add`` records what a learner reports, so anyone can write ``joules=0.5,
accuracy=0.99``. Here a learner submits a *recipe* (a model spec and training settings) with the
energy and accuracy it claims; the instructor re-runs every recipe in one fixed harness (the
same data, target accuracy, mode and machine, ``repeats`` times) and a row is accepted only when
the re-runs reproduce the claim: every repeat reaches the target, the claimed energy is not below
the re-runs' 95 % interval (or their lowest value, with fewer than 3 repeats), and the claimed
accuracy not above their best. The board shows the re-measured energy with its interval, the
target, the data and the mode; the instructor's reference recipes are ranked apart from the
learners'.

    verify.set_harness(folder, dataset="fashion-mnist", n_train=2000, target_accuracy=0.8)  # instructor, once
    verify.submit(folder, "bf16 + early stop", {"name": "cnn"}, {"lr": 0.05, "batch_size": 128,
                  "max_steps": 300, "precision": "bf16"}, joules=1234.0, accuracy=0.83)       # a learner
    greenlab leaderboard verify --dir folder                                                   # instructor

A learner gets an honest claim by running :func:`run_recipe` on the class harness. Files, in the
class folder: ``harness.json`` and ``submissions.json`` (written under the same lock, and in the
same shared-folder-safe way, as ``leaderboard.json``).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from greenlab.base import validation
from greenlab.base.filelock import locked
from greenlab.course.leaderboard import _write_shared, default_author, safe_text
from greenlab.experiments.stats import summarize
from greenlab.session.config import is_quick
from greenlab.training import data
from greenlab.training.config import TrainConfig
from greenlab.training.loop import train
from greenlab.training.models import MODELS, build

HARNESS_FILE = "harness.json"
SUBMISSIONS_FILE = "submissions.json"
FORMAT = "greenlab-submissions"
# the training settings a recipe may choose; everything else (data, target, seed, device) is the harness's
RECIPE_FIELDS = ("lr", "batch_size", "max_steps", "epochs", "optimizer", "momentum", "weight_decay",
                 "precision", "lr_schedule", "warmup_steps", "grad_clip", "accum_steps", "eval_every")
STATUSES = ("submitted", "verified", "refused")


@dataclass(frozen=True)
class Harness:
    """What every recipe is re-run on: the dataset (``gl.data.load`` name, sizes and seed), the
    target accuracy, the mode (quick or full, as the course's ``GREENLAB_QUICK``) and how many
    repeats (seeds 0..repeats-1)."""

    dataset: str = "synthetic"
    n_train: int = 512
    n_test: int = 128
    data_seed: int = 0
    target_accuracy: float = 0.5
    repeats: int = 3
    mode: str = "quick"

    def __post_init__(self):
        validation.choice("dataset", self.dataset, ("synthetic", "fashion-mnist", "cifar10"))
        validation.integer("n_train", self.n_train, low=1)
        validation.integer("n_test", self.n_test, low=1)
        validation.integer("data_seed", self.data_seed, low=0)
        validation.number("target_accuracy", self.target_accuracy, low=0, high=1, low_open=True)
        validation.integer("repeats", self.repeats, low=1, high=100)
        validation.choice("mode", self.mode, ("quick", "full"))

    def describe(self) -> str:
        return (f"{self.dataset}, {self.n_train} train / {self.n_test} test (seed {self.data_seed}), "
                f"target {self.target_accuracy:.1%}, {self.mode} mode, {self.repeats} repeat(s)")

    def data(self):
        return data.load(self.dataset, n_train=self.n_train, n_test=self.n_test, seed=self.data_seed, verbose=False)


def _current_mode() -> str:
    return "quick" if is_quick() else "full"


def set_harness(folder, **settings) -> Harness:
    """Fix the class harness (the instructor, once): see :class:`Harness` for the settings; the
    mode defaults to this session's (``GREENLAB_QUICK``)."""
    settings.setdefault("mode", _current_mode())
    harness = Harness(**settings)
    path = _folder(folder, create=True) / HARNESS_FILE
    with locked(path):
        _write_shared(path, (json.dumps(asdict(harness), indent=1) + "\n").encode())
    return harness


def harness(folder) -> Harness:
    """The class harness the instructor fixed in ``folder``."""
    path = _folder(folder) / HARNESS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no harness in {path.parent}: the instructor fixes one first "
                                "(greenlab.course.verify.set_harness)")
    try:
        return Harness(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not a harness: {exc}") from None


def check_recipe(model: dict, recipe: dict) -> None:
    """Refuse a recipe that is not a model spec and training settings only (by name)."""
    if not isinstance(model, dict) or model.get("name") not in MODELS:
        raise ValueError(f"model must be a gl.models.build spec naming one of {', '.join(MODELS)}, got {model!r}")
    if not isinstance(recipe, dict):
        raise validation.ArgumentTypeError(f"recipe must be a dict of training settings, got {type(recipe).__name__}")
    unknown = sorted(set(recipe) - set(RECIPE_FIELDS))
    if unknown:
        raise ValueError(f"recipe may set only {', '.join(RECIPE_FIELDS)} (the harness fixes the rest), "
                         f"got {', '.join(map(str, unknown))}")
    TrainConfig(**recipe)  # each setting's own check
    try:
        json.dumps({"model": model, "recipe": recipe}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model and recipe must hold plain JSON values: {exc}") from None


def run_recipe(harness: Harness, model: dict, recipe: dict, sources=None, data=None) -> dict:
    """Train the recipe once per repeat in ``harness`` (seed r for repeat r, on the CPU, one
    result each): per repeat, the energy to the target (None when it was not reached), the best
    accuracy and the energy's provenance; and their summaries (``gl.experiments`` statistics)."""
    import torch

    check_recipe(model, recipe)
    data = harness.data() if data is None else data
    runs = []
    for r in range(harness.repeats):
        config = TrainConfig(**recipe, target_accuracy=harness.target_accuracy, seed=r, label=f"verify repeat {r + 1}")
        torch.manual_seed(r)
        spec = dict(model)
        net = build(spec.pop("name"), **spec)
        result = train(net, data, config, device="cpu", log=False, save=False, sources=sources)
        runs.append({"joules_to_target": result.joules_to_target, "accuracy": result.best_accuracy,
                     "estimated": bool(result.estimated), "sources": dict(result.sources or {}),
                     "complete": bool(result.complete)})
    joules = summarize([r["joules_to_target"] for r in runs])
    accuracy = summarize([r["accuracy"] for r in runs])
    return {"runs": runs, "joules": joules.to_dict(), "joules_interval": joules.interval(),
            "accuracy": accuracy.to_dict(), "reached": all(r["joules_to_target"] is not None for r in runs)}


def submit(folder, name: str, model: dict, recipe: dict, *, joules: float, accuracy: float,
           author: str | None = None, reference: bool = False) -> dict:
    """Submit a recipe and what it claims (energy to the class target in joules, best accuracy);
    ``reference``: an instructor's reference recipe, ranked apart from the learners'."""
    validation.text("name", name, allow_empty=False)
    check_recipe(model, recipe)
    entry = {"name": name.strip(), "author": (author or default_author()).strip(), "model": dict(model),
             "recipe": dict(recipe), "claim": {"joules": validation.number("joules", joules, low=0),
                                               "accuracy": validation.number("accuracy", accuracy, low=0, high=1)},
             "reference": validation.flag("reference", reference), "status": "submitted",
             "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = _folder(folder, create=True) / SUBMISSIONS_FILE
    with locked(path):
        entries = _read(path)
        entry = {"id": max((e["id"] for e in entries), default=0) + 1, **entry}
        _save(path, entries + [entry])
    return entry


def verify(folder, sources=None, machine: str | None = None, report=None) -> list:
    """Re-run every submitted recipe in the class harness and accept or refuse it (see the module
    docstring); returns the entries decided now. ``report(text)`` is told of each decision."""
    fixed = harness(folder)
    if fixed.mode != _current_mode():
        raise ValueError(f"the class harness is in {fixed.mode} mode but this session is in {_current_mode()} "
                         f"mode: set GREENLAB_QUICK={int(fixed.mode == 'quick')} to re-run in the same harness")
    path = _folder(folder) / SUBMISSIONS_FILE
    with locked(path):
        pending = [e for e in _read(path) if e["status"] == "submitted"]
    machine = machine or _machine()
    data = fixed.data() if pending else None
    decided = []
    for entry in pending:
        rerun = run_recipe(fixed, entry["model"], entry["recipe"], sources=sources, data=data)
        why = _refusal(entry["claim"], rerun)
        decision = {"status": "refused" if why else "verified", "why": why, "rerun": rerun, "machine": machine,
                    "harness": asdict(fixed), "verified_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        with locked(path):
            entries = _read(path)
            for e in entries:
                if e["id"] == entry["id"]:
                    e.update(decision)
                    decided.append(e)
            _save(path, entries)
        if report is not None:
            report(f"{safe_text(entry['name'])} by {safe_text(entry['author'])}: {decision['status']}"
                   + (f" ({why})" if why else ""))
    return decided


def entries(folder) -> list:
    """Every submission, in the order submitted, with its status."""
    return _read(_folder(folder) / SUBMISSIONS_FILE)


def table(folder) -> str:
    """Verified rows ranked by re-measured energy to the target (lowest first), learners' and
    reference recipes apart, each with its interval; then what is pending or refused, and why."""
    rows = entries(folder)
    lines = []
    try:
        lines.append(f"harness: {harness(folder).describe()}")
    except FileNotFoundError:
        lines.append("harness: not fixed yet")
    for title, reference in (("learners' recipes, re-run", False), ("reference recipes, re-run", True)):
        ok = sorted((e for e in rows if e["status"] == "verified" and e.get("reference") == reference),
                    key=lambda e: (e["rerun"]["joules"]["mean"], e["id"]))
        lines.append(f"-- {title} --")
        lines.append(f"{'#':>3} {'name':<24} {'by':<12} {'energy to target J (95% interval)':<36} "
                     f"{'best acc.':>9}  machine")
        for i, e in enumerate(ok, 1):
            j = e["rerun"]["joules"]
            low_high = e["rerun"].get("joules_interval")
            spread = (f"[{low_high[0]:.4g}, {low_high[1]:.4g}]" if low_high else
                      f"(range {j['min']:.4g}..{j['max']:.4g}, n={j['n']})")
            kind = "estimate" if any(r["estimated"] for r in e["rerun"]["runs"]) else "measured"
            energy = f"{j['mean']:.4g} {spread} {kind}"
            lines.append(f"{i:>3} {safe_text(e['name'])[:24]:<24} {safe_text(e['author'])[:12]:<12} "
                         f"{energy:<36} {e['rerun']['accuracy']['max']:>9.1%}  {safe_text(e['machine'])}")
        if not ok:
            lines.append("    (none)")
    others = [e for e in rows if e["status"] != "verified"]
    if others:
        lines.append("-- not on the board --")
        for e in others:
            lines.append(f"    {safe_text(e['name'])[:24]} by {safe_text(e['author'])[:12]}: {e['status']}"
                         + (f": {safe_text(e['why'])}" if e.get("why") else ""))
    return "\n".join(lines)


def verify_main(args) -> int:
    """``greenlab leaderboard verify --dir DIR``: re-run the submitted recipes, print the board."""
    folder = args.dir or os.environ.get("GREENLAB_LEADERBOARD_DIR")
    if not folder:
        print("error: give the class folder (--dir or GREENLAB_LEADERBOARD_DIR)", file=sys.stderr)
        return 2
    try:
        verify(folder, report=lambda text: print(text, flush=True))
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(folder))
    return 0


# --- helpers ----------------------------------------------------------------------------------

def _refusal(claim: dict, rerun: dict) -> str:
    """Why the re-runs do not reproduce the claim ("" when they do)."""
    joules, accuracy = rerun["joules"], rerun["accuracy"]
    if not rerun["reached"]:
        missed = sum(r["joules_to_target"] is None for r in rerun["runs"])
        return f"{missed} of {len(rerun['runs'])} re-run(s) did not reach the target"
    interval = rerun.get("joules_interval")
    floor, how = (interval[0], "the low end of the re-runs' 95% interval") if interval else (joules["min"],
                                                                                         "the re-runs' lowest value")
    if claim["joules"] < floor * (1 - 1e-9):  # (rounding aside)
        return (f"claimed {claim['joules']:.4g} J to the target, below {how} ({floor:.4g} J; "
                f"re-run mean {joules['mean']:.4g} J)")
    if claim["accuracy"] > accuracy["max"] + 1e-9:
        return f"claimed {claim['accuracy']:.1%} accuracy, above the re-runs' best ({accuracy['max']:.1%})"
    return ""


def _folder(folder, create: bool = False) -> Path:
    if not isinstance(folder, (str, os.PathLike)):
        raise validation.ArgumentTypeError(f"folder must be a path, got {type(folder).__name__}")
    path = Path(folder).expanduser()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    elif not path.is_dir():
        raise FileNotFoundError(f"no such class folder {path}")
    return path


def _read(path: Path) -> list:
    if not path.exists():
        return []
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if payload.get("format") != FORMAT or not isinstance(payload.get("entries"), list):
            raise ValueError(f"not a {FORMAT} file")
        return payload["entries"]
    except (ValueError, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError(f"{path} is damaged: {exc}") from None


def _save(path: Path, entries: list) -> None:
    _write_shared(path, (json.dumps({"format": FORMAT, "entries": entries}, indent=1, allow_nan=False)
                         + "\n").encode())


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.lower().startswith("model name")), cpu)
    except OSError:
        pass
    return f"{platform.node()}: {cpu}"
