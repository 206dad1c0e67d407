#!/usr/bin/env python
"""Rehearse the GPU run on this CPU with the GPU machine's own software: its Python, its torch,
only its packages, and the wheels that travel with it.

    python benchmarks/gpu_rehearsal.py [--python PYTHON3.12] [--venv .cache/gpu-box-venv] [--out DIR]

``--python`` names the Python 3.12 to build the environment from; without it the first of PATH's
``python3.12`` and ``python3`` and ``~/.pyenv/versions/3.12*/bin/python3.12`` whose ``--version``
runs and says 3.12 is taken (a pyenv shim for an unselected version exits 127 and is passed over).

The lent GPU machine runs Python 3.12 with torch 2.11 (CUDA 13), torchvision, numpy,
nvidia-ml-py, matplotlib, pytest, psutil and tqdm, and nothing else (no IPython, ipywidgets,
bitsandbytes, torchao, simpy or Optuna, no network); ``benchmarks/gpu_wheels.py`` fills
``.cache/gpu-wheels`` with what travels beside the working tree. A library release can differ
between that stack and the development one (torchao 0.17, the release built for torch 2.11,
laid out int8 weights differently from 0.18), and a difference found on the shot costs the shot.

This builds a virtual environment with that stack (``BOX_PACKAGES``; pip needs the package index,
about 3 GB for torch's CUDA 13 libraries), fills the wheel folder when it is empty, and runs
``benchmarks/gpu_suite.py --dry-run --lessons all --wheels .cache/gpu-wheels`` in it: every
experiment at tiny sizes and every instructor lesson headless, on the CPU. It exits 1 when an
experiment or a lesson failed, naming each (the suite itself records such failures and exits 0,
as it must on the GPU). About 10 minutes on 2 cores once the environment exists.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV = REPO_ROOT / ".cache" / "gpu-box-venv"
WHEELS = REPO_ROOT / ".cache" / "gpu-wheels"
# what the GPU machine has: its torch and the torchvision built for it; the rest unpinned there too
BOX_PACKAGES = ("torch==2.11.0", "torchvision==0.26.0", "numpy", "nvidia-ml-py", "matplotlib", "pytest",
                "psutil", "tqdm")
BOX_PYTHON = (3, 12)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_rehearsal.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=None, help="a Python 3.12 interpreter (default: the first of PATH's python3.12 "
                   "and python3, then ~/.pyenv/versions/3.12*/bin/python3.12, whose --version runs and says 3.12)")
    p.add_argument("--venv", default=str(VENV), help=f"the environment (default {VENV.relative_to(REPO_ROOT)})")
    p.add_argument("--out", default=None, help="the suite's --out folder (default: a fresh one under the venv)")
    args = p.parse_args(argv)
    venv = Path(args.venv)
    python = venv / "bin" / "python"
    if not python.exists():
        if args.python and not runs_as_box_python(args.python):
            p.error(f"--python {args.python} does not run as Python {BOX_PYTHON[0]}.{BOX_PYTHON[1]} "
                    "(its --version failed or named another version)")
        base = args.python or find_python()
        if base is None:
            p.error("no Python 3.12 that runs was found (PATH, ~/.pyenv/versions/3.12*): pass --python "
                    "(the GPU machine runs 3.12)")
        _run([base, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "--quiet", *BOX_PACKAGES])
    if not any(WHEELS.glob("*.whl")):
        _run([sys.executable, str(REPO_ROOT / "benchmarks" / "gpu_wheels.py")])
    out = Path(args.out) if args.out else venv / "rehearsal"
    if out.exists():
        shutil.rmtree(out)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    _run([str(python), "benchmarks/gpu_suite.py", "--out", str(out), "--dry-run", "--lessons", "all",
          "--wheels", str(WHEELS)], env=env, check=False)
    failed = failures(out / "gpu_suite_records.json")
    for line in failed:
        print(f"FAILED on the GPU machine's stack: {line}")
    print(f"rehearsal: {len(failed)} failure(s); the bundle and the log are in {out}")
    return 1 if failed else 0


def failures(bundle_path: Path) -> list[str]:
    """'label: status' of every experiment and lesson of a suite bundle that neither finished
    nor was left out on purpose; the whole bundle when it is missing."""
    if not bundle_path.exists():
        return [f"no bundle at {bundle_path}: the suite ended before writing one"]
    bundle = json.loads(bundle_path.read_text(encoding="utf-8"))
    summary = next((r for r in bundle.get("records", []) if r.get("experiment") == "gpu_suite"), None)
    if summary is None:
        return ["the bundle has no summary record"]
    out = []
    for row in summary.get("results", []):
        status = str(row.get("status", ""))
        if "status" in row and not (status in ("ok", "passed") or status.startswith("not selected")):
            out.append(f"{row.get('label')}: {status}")
    return out


def find_python(candidates=None) -> str | None:
    """The first candidate interpreter that actually runs as Python 3.12 (``--version`` exits 0
    and names 3.12): a pyenv shim for a version that is not selected exits 127 and is passed over.
    Candidates: PATH's python3.12 and python3, then ``~/.pyenv/versions/3.12*/bin/python3.12``
    (newest first)."""
    if candidates is None:
        candidates = python_candidates()
    return next((c for c in candidates if runs_as_box_python(c)), None)


def python_candidates() -> list:
    major, minor = BOX_PYTHON
    found = [shutil.which(f"python{major}.{minor}"), shutil.which(f"python{major}")]
    pattern = os.path.expanduser(f"~/.pyenv/versions/{major}.{minor}*/bin/python{major}.{minor}")
    found += sorted(glob.glob(pattern), key=_version_key, reverse=True)
    out = []
    for c in found:
        if c and c not in out:
            out.append(c)
    return out


def runs_as_box_python(python: str) -> bool:
    """Whether ``python --version`` runs and says Python 3.12."""
    try:
        proc = subprocess.run([python, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    text = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0 and text.startswith("Python {}.{}.".format(*BOX_PYTHON))


def _version_key(path: str) -> tuple:
    version = Path(path).parent.parent.name  # ~/.pyenv/versions/<version>/bin/python3.12
    return tuple(int(x) if x.isdigit() else -1 for x in version.split("."))


def _run(cmd, env=None, check=True):
    print("$", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, check=check)


if __name__ == "__main__":
    sys.exit(main())
