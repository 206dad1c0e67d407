"""Rehearse the lessons as a Colab learner meets them: each learner copy opened alone, in a runtime
with Colab's preinstalled stack, its first cell installing greenlab. Not part of CI (downloads).

    python benchmarks/colab_rehearsal.py                      # every lesson; PyTorch from PyPI as on Colab
    python benchmarks/colab_rehearsal.py --only 00 03 --torch-index https://download.pytorch.org/whl/cpu

Steps: (1) a Python 3.13 venv (Colab's Python) with the versions of Colab's preinstalled packages the
course uses (``greenlab.course.hosted.COLAB_RUNTIME``: torch, torchvision, ipywidgets, ipykernel,
IPython, torchao) and, unpinned, the rest of the course's core that Colab also has (NumPy,
Matplotlib, psutil, tqdm, nvidia-ml-py); its package list is the snapshot of "Colab's stack".
(2) A wheel of this checkout, which each lesson's install cell installs (``GREENLAB_INSTALL``: the
repository address may not be published yet). (3) For each learner copy: greenlab removed (a fresh
runtime), the copy alone in an empty folder, its install cell run as a cell, then the whole copy
headless in quick mode (``python -m greenlab.course run``), then the stack compared with the
snapshot: a changed version of a Colab package is reported (lesson 12's torchao is expected:
``EXPECTED_CHANGES``) and restored for the next lesson; what was added is listed with its size, then
removed, so each lesson starts from Colab's stack alone.

Exits 1 when a lesson failed or changed a Colab package it was not expected to change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from greenlab.course import hosted  # noqa: E402

PYTHON_313 = "/root/.pyenv/versions/3.13.0/bin/python3.13"
# Colab's pip names for COLAB_RUNTIME's entries (Python is the interpreter itself)
PIP_NAMES = {"torch": "torch", "torchvision": "torchvision", "ipywidgets": "ipywidgets", "ipykernel": "ipykernel",
             "IPython": "ipython", "torchao": "torchao"}
# the rest of the course's core that Colab preinstalls too, at whatever version pip picks here
ALSO_PREINSTALLED = ["numpy", "matplotlib", "psutil", "tqdm", "nvidia-ml-py"]
# Colab packages a lesson's install cell is expected to replace, and why
EXPECTED_CHANGES: dict = {}  # none: lesson 12's int8 weights use Colab's torchao 0.10 as it is


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=PYTHON_313, help=f"Colab's Python (default {PYTHON_313})")
    parser.add_argument("--work", default=None, help="working folder (default: a new temporary one)")
    parser.add_argument("--only", nargs="*", default=None, help="lesson numbers, e.g. 00 03 (default: all)")
    parser.add_argument("--torch-index", default=None,
                        help="an extra index for torch and torchvision (e.g. PyTorch's CPU wheels, smaller "
                             "than PyPI's CUDA build that Colab has)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per lesson (default 1800)")
    args = parser.parse_args(argv)

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="colab-rehearsal-"))
    work.mkdir(parents=True, exist_ok=True)
    venv = work / "venv"
    python = venv / "bin" / "python"
    started = time.perf_counter()
    if not python.exists():
        _run([args.python, "-m", "venv", str(venv)])
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "--quiet"]
    stack = [f"{PIP_NAMES[k]}=={v}.*" if v.count(".") == 1 else f"{PIP_NAMES[k]}=={v}"
             for k, v in hosted.COLAB_RUNTIME.items() if k in PIP_NAMES]
    index = ["--extra-index-url", args.torch_index] if args.torch_index else []
    print(f"colab rehearsal: {work}; Colab's stack: {', '.join(stack)} (+ {', '.join(ALSO_PREINSTALLED)})")
    _run(pip + ["install"] + index + stack + ALSO_PREINSTALLED)
    snapshot = _freeze(python)
    base_bytes = _size(_site_packages(python))
    print(f"colab rehearsal: the stack holds {len(snapshot)} packages, {base_bytes / 1e6:.0f} MB "
          f"({time.perf_counter() - started:.0f} s to build)")

    wheel_dir = work / "wheel"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheel_dir),
          str(ROOT)], env=clean)
    (wheel,) = wheel_dir.glob("greenlab_course-*.whl")

    lessons = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
    if args.only is not None:
        lessons = [p for p in lessons if p.name[:2] in set(args.only)]
    rows, failed = [], False
    for path in lessons:
        row = _rehearse(path, python, pip, wheel, snapshot, base_bytes, work, args.timeout)
        rows.append(row)
        unexpected = {k: v for k, v in row["changed"].items() if k not in EXPECTED_CHANGES.get(path.name[:2], {})}
        failed |= row["rc"] != 0 or bool(unexpected)
        print(f"  {path.stem}: {'ok' if row['rc'] == 0 else 'FAILED'} in {row['seconds']:.0f} s; install cell: "
              f"{row['install_line'] or '(no output)'}; Colab packages changed: "
              f"{_changes(row['changed']) or 'none'}{' (unexpected)' if unexpected else ''}; added "
              f"{len(row['added'])} packages, {row['added_bytes'] / 1e6:.1f} MB")
        if row["rc"] != 0:
            print("    " + row["tail"].replace("\n", "\n    "))
        _restore(pip, index, row["changed"], snapshot, row["added"])
    (work / "rehearsal.json").write_text(json.dumps(rows, indent=1))
    print(f"colab rehearsal: {sum(r['rc'] == 0 for r in rows)}/{len(rows)} lessons ran; "
          f"{time.perf_counter() - started:.0f} s in all; details in {work / 'rehearsal.json'}")
    return 1 if failed else 0


def _rehearse(path: Path, python: Path, pip: list, wheel: Path, snapshot: dict, base_bytes: int, work: Path,
              timeout: float) -> dict:
    """One lesson in a fresh runtime: greenlab removed, its install cell, then the whole copy headless."""
    subprocess.run(pip + ["uninstall", "--yes", "greenlab-course"], capture_output=True)
    folder = work / "runs" / path.stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy2(path, folder / path.name)
    nb = json.loads(path.read_text(encoding="utf-8"))
    install = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    # the install spec with this checkout's wheel in place of the repository
    spec = hosted.install_spec(path.stem).split(" @ ", 1)[0] + f" @ {wheel.as_uri()}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GREENLAB_")}
    env.update(GREENLAB_INSTALL=spec, GREENLAB_QUICK="1", MPLBACKEND="Agg", HOME=str(folder / "home"),
               XDG_CACHE_HOME=str(work / "cache"))
    t0 = time.perf_counter()
    cell = subprocess.run([str(python), "-c", install], cwd=folder, env=env, capture_output=True, text=True)
    run = cell
    if cell.returncode == 0:
        run = subprocess.run([str(python), "-m", "greenlab.course", "run", path.name], cwd=folder, env=env,
                             capture_output=True, text=True, timeout=timeout)
    now = _freeze(python)
    changed = {k: (v, now.get(k)) for k, v in snapshot.items() if now.get(k) != v}
    added = sorted(set(now) - set(snapshot))
    return {"lesson": path.stem, "rc": run.returncode, "seconds": time.perf_counter() - t0,
            "install_line": cell.stdout.strip(), "changed": changed, "added": added,
            "added_bytes": _size(_site_packages(python)) - base_bytes,
            "tail": (run.stdout[-1500:] + run.stderr[-1500:]) if run.returncode else ""}


def _restore(pip: list, index: list, changed: dict, snapshot: dict, added=()) -> None:
    """Put Colab's stack back for the next lesson (a fresh runtime): what the lesson added removed,
    Colab's versions of what it changed reinstalled."""
    if added:
        _run(pip + ["uninstall", "--yes", *added])
    if changed:
        _run(pip + ["install"] + index + [f"{name}=={snapshot[name]}" for name in changed])


def _changes(changed: dict) -> str:
    return ", ".join(f"{k} {a} -> {b or 'removed'}" for k, (a, b) in sorted(changed.items()))


def _freeze(python: Path) -> dict:
    out = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


def _site_packages(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _run(cmd: list, env=None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"colab rehearsal: {' '.join(map(str, cmd))} failed:\n{done.stderr[-3000:]}")


if __name__ == "__main__":
    sys.exit(main())
