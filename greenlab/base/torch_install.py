"""Which PyTorch build a new environment gets: the CPU build where there is no NVIDIA GPU.

``make lab`` and ``make test`` run this file with the virtualenv's Python before installing the
rest (it imports nothing from greenlab, so it runs before torch exists)::

    python greenlab/base/torch_install.py --constraints constraints.txt

On Linux x86_64 the default PyTorch wheel bundles NVIDIA's CUDA libraries (about 4 GB of a 6 GB
environment). Where no NVIDIA driver is present, this installs torch and torchvision from PyTorch's
CPU wheel index instead; where that index cannot be reached (offline, a proxy), it says so in one
line and leaves the default wheel to the install that follows. Elsewhere (macOS, Windows, ARM
Linux) the default wheels already carry no CUDA, and nothing is done. A torch already installed is
kept. The constraints' ``torch==X`` pins accept the CPU build's ``X+cpu``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"
PACKAGES = ("torch", "torchvision")


@dataclass
class Plan:
    """What to install: ``command`` (a pip command line, or None for nothing) and ``message``."""

    command: list[str] | None
    message: str


def nvidia_driver_present(driver_file: str = NVIDIA_DRIVER_FILE) -> bool:
    """True when the NVIDIA kernel driver is loaded or its ``nvidia-smi`` is on the PATH."""
    return os.path.exists(driver_file) or shutil.which("nvidia-smi") is not None


def index_reachable(url: str = CPU_INDEX, timeout_s: float = 5.0) -> bool:
    """True when PyTorch's CPU index answers within ``timeout_s`` (one small request)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/torch/", method="HEAD"), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def torch_installed(python: str) -> bool:
    """True when ``python`` can already import a torch (then it is kept)."""
    probe = subprocess.run([python, "-c", "import importlib.util, sys; "
                            "sys.exit(0 if importlib.util.find_spec('torch') else 1)"], capture_output=True)
    return probe.returncode == 0


def plan(python: str, constraints: str | None, system: str, machine: str, driver: bool,
         installed: bool, reachable) -> Plan:
    """The install decision; ``reachable`` is called (no arguments) only when the CPU index matters."""
    if installed:
        return Plan(None, "greenlab: keeping the PyTorch already installed")
    if system != "Linux" or machine not in ("x86_64", "AMD64"):
        return Plan(None, f"greenlab: the default PyTorch wheel for {system} {machine} has no CUDA; using it")
    if driver:
        return Plan(None, "greenlab: NVIDIA driver found: installing the default PyTorch wheel (with CUDA)")
    if not reachable():
        return Plan(None, "greenlab: no NVIDIA driver, but PyTorch's CPU wheel index could not be reached: "
                          "installing the default wheel (it bundles CUDA libraries, several GB)")
    command = [python, "-m", "pip", "install", *PACKAGES, "--index-url", CPU_INDEX]
    if constraints:
        command[4:4] = ["-c", constraints]
    return Plan(command, "greenlab: no NVIDIA driver: installing the CPU build of PyTorch (no CUDA libraries)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--constraints", default=None, help="pip constraints file (exact pins)")
    args = parser.parse_args(argv)
    decision = plan(sys.executable, args.constraints, platform.system(), platform.machine(),
                    nvidia_driver_present(), torch_installed(sys.executable), index_reachable)
    print(decision.message, flush=True)
    if decision.command is None:
        return 0
    if subprocess.call(decision.command) != 0:
        print("greenlab: the CPU build did not install; the default wheel follows", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
