"""A Python environment with packages hidden, as on a bare GPU machine (torch, numpy,
nvidia-ml-py and matplotlib only): a ``sitecustomize`` that makes the import system find no
psutil, tqdm, pytest, torchvision, IPython, ipywidgets, bitsandbytes or torchao
(``importlib.util.find_spec`` returns None and ``import`` raises ModuleNotFoundError, exactly as
when they are not installed)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = ("psutil", "tqdm", "pytest", "torchvision", "IPython", "ipywidgets", "bitsandbytes", "torchao")

_SITECUSTOMIZE = '''\
import importlib.machinery as _m
import sys

HIDDEN = {hidden!r}


class _Hide:
    """PathFinder, except that hidden top-level packages are not found."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return _m.PathFinder.find_spec(name, path, target)

    @staticmethod
    def invalidate_caches():
        return _m.PathFinder.invalidate_caches()

    @staticmethod
    def find_distributions(*args, **kwargs):
        return _m.PathFinder.find_distributions(*args, **kwargs)


sys.meta_path[:] = [_Hide if f is _m.PathFinder else f for f in sys.meta_path]
'''


def hidden_env(folder: Path, hidden=HIDDEN) -> dict:
    """Environment variables for a subprocess in which ``hidden`` packages cannot be imported
    (``folder`` receives the sitecustomize.py); the repository root is on PYTHONPATH."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE.format(hidden=tuple(hidden)), encoding="utf-8")
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)] + rest)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


PYTHON = sys.executable
