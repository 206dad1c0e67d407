#!/usr/bin/env python
"""Download the wheels the GPU machine lacks into ``.cache/gpu-wheels/`` (git-ignored), for the suite.

    python benchmarks/gpu_wheels.py [--dest .cache/gpu-wheels] [--without bitsandbytes,torchao]

The GPU machine (Python 3.12, torch 2.11 with CUDA 13, no network) has no simpy or Optuna, which
lesson 14 and the ``sharing_a_cluster`` experiment use, and no bitsandbytes or torchao, which
lesson 12 measures when present. This downloads, for CPython 3.12 on manylinux x86-64, binary
wheels only:

- simpy and Optuna with their dependencies, at the versions ``constraints.txt`` pins, less the
  packages the machine already has (``ON_THE_MACHINE``: numpy and tqdm are installed there;
  packaging comes with matplotlib and pytest, typing_extensions and MarkupSafe with torch);
- bitsandbytes at its ``constraints.txt`` pin (0.50.2: ``torch>=2.4,<3``, kernels built for CUDA
  11.8 to 13.2, a 43 MB wheel) and torchao 0.17.0 (3.2 MB), the release its maintainers built
  against torch 2.11 (pytorch/ao issue 2919's table: 0.17.0 for torch 2.11.0 and later; 0.18,
  which ``constraints.txt`` pins for the development machine's newer torch, was built against
  2.12), each without dependencies (torch, numpy and packaging are on the machine).

The working tree travels to the device machine with its carried paths, 64 MiB in all: the
script adds the wheels to the tree's own size (tracked and untracked files git does not ignore),
prints the table and the total, and leaves out the optional wheels (bitsandbytes first) that
would not fit. Measured when this was written: simpy, Optuna and their dependencies 6.4 MB,
with bitsandbytes and torchao 52.6 MB (50.2 MiB), and the tree 4.5 MiB: 54.7 MiB, under the limit.

``benchmarks/gpu_suite.py`` installs whatever ``.cache/gpu-wheels/`` holds before its experiments
(``pip install --no-index --no-deps --target``, into its cache in its work folder, on the path of
every worker and lesson); on the device machine the folder is carried with the run tool's
``carry: [".cache/gpu-wheels"]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEST = REPO_ROOT / ".cache" / "gpu-wheels"
CARRY_LIMIT_MIB = 64.0  # the device machine's limit on the working tree that travels, carried paths included
TARGET = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
          "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_24_x86_64",
          "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
REQUIRED = ("simpy", "optuna")  # lesson 14 and the sharing_a_cluster experiment
OPTIONAL = {"bitsandbytes": None, "torchao": "0.17.0"}  # None: the constraints.txt pin; in leave-out order
ON_THE_MACHINE = ("numpy", "tqdm", "packaging", "typing_extensions", "markupsafe")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_wheels.py", description=__doc__.splitlines()[0])
    p.add_argument("--dest", default=str(DEST), help=f"folder for the wheels (default {DEST.relative_to(REPO_ROOT)})")
    p.add_argument("--without", default="", help=f"optional wheels to leave out: {', '.join(OPTIONAL)}")
    args = p.parse_args(argv)
    without = {w.strip() for w in args.without.split(",") if w.strip()}
    unknown = without - set(OPTIONAL)
    if unknown:
        p.error(f"--without takes {', '.join(OPTIONAL)}, got {sorted(unknown)}")
    dest = Path(args.dest)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    pins = _pins(REPO_ROOT / "constraints.txt")
    _pip(["-c", str(REPO_ROOT / "constraints.txt"), *REQUIRED], dest)
    for wheel in list(dest.glob("*.whl")):
        if _name(wheel) in ON_THE_MACHINE:
            print(f"left out {wheel.name}: the GPU machine has it")
            wheel.unlink()
    for name, version in OPTIONAL.items():
        if name not in without:
            _pip(["--no-deps", f"{name}=={version or pins[name]}"], dest)
    tree = tree_mib()
    for wheel in drop_what_does_not_fit(dest, tree):
        print(f"left out {wheel}: over the {CARRY_LIMIT_MIB:g} MiB limit with the rest")
    for wheel in sorted(dest.glob("*.whl")):
        print(f"{wheel.stat().st_size / 2**20:8.2f} MiB  {wheel.name}")
    total = tree + wheels_mib(dest)
    print(f"wheels {wheels_mib(dest):.1f} MiB + working tree {tree:.1f} MiB = {total:.1f} MiB "
          f"of the device's {CARRY_LIMIT_MIB:g} MiB ({'fits' if total <= CARRY_LIMIT_MIB else 'OVER'})")
    return 0 if total <= CARRY_LIMIT_MIB else 1


def drop_what_does_not_fit(folder: Path, tree: float, limit: float = CARRY_LIMIT_MIB) -> list:
    """Delete optional wheels from ``folder`` (bitsandbytes first, then torchao) until they and a
    working tree of ``tree`` MiB fit ``limit`` MiB; the names of the deleted files."""
    dropped = []
    for name in OPTIONAL:
        if tree + wheels_mib(folder) <= limit:
            break
        for wheel in Path(folder).glob("*.whl"):
            if _name(wheel) == name:
                dropped.append(wheel.name)
                wheel.unlink()
    return dropped


def wheels_mib(folder: Path) -> float:
    """Total size of the wheels in ``folder``, MiB."""
    return sum(w.stat().st_size for w in Path(folder).glob("*.whl")) / 2**20


def tree_mib(root: Path = REPO_ROOT) -> float:
    """Size of the working tree that travels (tracked and untracked files git does not ignore), MiB."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout
    files = {root / f for f in out.decode("utf-8", "replace").split("\0") if f}
    return sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def _pip(args: list, dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest), *TARGET, *args]
    print("$ " + " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)


def _name(wheel: Path) -> str:
    """The normalised distribution name of a wheel file."""
    return re.sub(r"[-_.]+", "_", wheel.name.split("-")[0]).lower()


def _pins(path: Path) -> dict:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[name.lower()] = version
    return pins


if __name__ == "__main__":
    sys.exit(main())
