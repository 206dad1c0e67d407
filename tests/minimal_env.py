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
# a hidden package that a required dependency cannot be installed without stays visible to that
# dependency (and to itself) only: Optuna needs tqdm, so a machine with Optuna has tqdm
REQUIRED_BY = {"tqdm": ("optuna", "tqdm")}

_SITECUSTOMIZE = '''\
import importlib.machinery as _m
import sys

HIDDEN = {hidden!r}
REQUIRED_BY = {required!r}


def _importer():
    """The top-level package of the module whose import statement is being served."""
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("importlib", "_frozen_importlib")) and module != __name__:
            return module.partition(".")[0]
        frame = frame.f_back
    return ""


class _Hide:
    """PathFinder, except that hidden top-level packages are not found (but by REQUIRED_BY's)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HIDDEN and _importer() not in REQUIRED_BY.get(top, ()):
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


def hidden_env(folder: Path, hidden=HIDDEN, required_by=None) -> dict:
    """Environment variables for a subprocess in which ``hidden`` packages cannot be imported
    (``folder`` receives the sitecustomize.py); the repository root is on PYTHONPATH."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(hidden=tuple(hidden),
                              required=dict(REQUIRED_BY if required_by is None else required_by)),
        encoding="utf-8")
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(ROOT)] + rest)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


PYTHON = sys.executable
