"""Open a lesson and go: what the build adds to every learner copy for Colab, Binder and a JupyterHub.

Each learner copy ``lessons/NN_slug.ipynb`` starts with a markdown cell of two launch badges (Colab,
Binder) and, just before its first code cell, a cell that installs the course's library where it is
missing, so a learner who opens one notebook from the repository page can run it top to bottom::

    python -m greenlab.course build     # writes them (greenlab.course.build calls with_launch_cells)

The install cell is plain Python (no ``%pip`` line, so tools that parse lesson code still can): where
``import greenlab`` finds this course (it has ``greenlab.setup``) it does nothing, no network, no output,
as under nbval, CI and ``make lab``; where greenlab is missing, or is PyPI's unrelated ``greenlab``
project, it removes that one, installs ``greenlab-course`` from the repository with pip (quiet) and
prints one line. ``GREENLAB_INSTALL`` set in the kernel's environment installs something else
(a wheel, a fork) instead. Lessons that use an extra (``LESSON_EXTRAS``) install it too.

The repository's address is written once, in ``pyproject.toml``'s ``[project.urls] Repository``;
everything here is generated from it (``repository_url()``).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from greenlab.base.optional import EXTRAS
from greenlab.base.paths import repo_root

DISTRIBUTION = "greenlab-course"
BRANCH = "main"
LESSONS_FOLDER = "lessons"  # where the learner copies are, relative to the repository's root
# the extras a lesson uses beyond the lean core (pyproject.toml's optional-dependencies)
LESSON_EXTRAS = {"12": ("lowbit",),  # 8-bit optimizer states (bitsandbytes), int8 weights (torchao)
                 "14": ("scheduling",)}  # the cluster simulation (simpy), early-stopped tuning (optuna)
# Google Colab's runtime the install cell is written for: its Python and the versions of the packages
# it preinstalls that the course uses (pyproject.toml's ranges admit each, so installing changes none)
COLAB_RUNTIME = {"Python": "3.13", "torch": "2.11", "torchvision": "0.26", "ipywidgets": "7.7.1",
                 "ipykernel": "6.17", "IPython": "7.34", "torchao": "0.10"}
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
LAUNCH_MARK = "<!-- greenlab: launch -->"
INSTALL_MARK = "# greenlab: install where missing"


def repository_url(root: str | os.PathLike | None = None) -> str:
    """The repository's address: ``[project.urls] Repository`` of ``pyproject.toml`` in a checkout
    (``root``, else the one beside the package), else the installed distribution's metadata."""
    import tomllib

    pyproject = Path(root if root is not None else repo_root()) / "pyproject.toml"
    if pyproject.is_file():
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["urls"]["Repository"]
    from importlib import metadata

    for entry in metadata.metadata(DISTRIBUTION).get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository":
            return url.strip()
    raise LookupError(f"{DISTRIBUTION} names no Repository URL")


def github_path(url: str | None = None) -> str:
    """``owner/name`` of a GitHub address (``https://github.com/owner/name``)."""
    url = repository_url() if url is None else url
    prefix = "https://github.com/"
    if not url.startswith(prefix):
        raise ValueError(f"the repository must be on GitHub for Colab and Binder links, got {url!r}")
    return url[len(prefix):].removesuffix(".git").strip("/")


def colab_url(stem: str, url: str | None = None) -> str:
    """Colab's address that opens the learner copy ``<stem>.ipynb`` straight from the repository."""
    return f"https://colab.research.google.com/github/{github_path(url)}/blob/{BRANCH}/{LESSONS_FOLDER}/{stem}.ipynb"


def binder_url(stem: str | None = None, url: str | None = None) -> str:
    """mybinder.org's address that builds the repository (``binder/``) and opens ``<stem>.ipynb`` in
    JupyterLab (the lessons folder when ``stem`` is None)."""
    target = f"{LESSONS_FOLDER}/{stem}.ipynb" if stem else LESSONS_FOLDER
    return f"https://mybinder.org/v2/gh/{github_path(url)}/{BRANCH}?urlpath=lab/tree/{target}"


def badges(stem: str | None = None, url: str | None = None) -> str:
    """The two launch badges (markdown) for one lesson, or for the lessons folder."""
    colab = f"[![Open in Colab]({COLAB_BADGE})]({colab_url(stem, url)})" if stem else ""
    binder = f"[![Launch on Binder]({BINDER_BADGE})]({binder_url(stem, url)})"
    return " ".join(b for b in (colab, binder) if b)


def install_spec(stem: str, url: str | None = None) -> str:
    """What pip installs for lesson ``stem``: the course from its repository, with the lesson's extras."""
    extras = LESSON_EXTRAS.get(stem[:2], ())
    name = f"{DISTRIBUTION}[{','.join(extras)}]" if extras else DISTRIBUTION
    return f"{name} @ git+{repository_url() if url is None else url}"


def runtime_text() -> str:
    """The runtime the install cell is written for, in words: "Colab's runtime (Python 3.13, torch 2.11, ...)"."""
    return "Colab's runtime (" + ", ".join(f"{k} {v}" for k, v in COLAB_RUNTIME.items()) + ")"


def extra_modules(stem: str) -> list[str]:
    """The modules of the extras lesson ``stem`` uses (``LESSON_EXTRAS``, ``optional.EXTRAS``)."""
    extras = LESSON_EXTRAS.get(stem[:2], ())
    return sorted(module for module, extra in EXTRAS.items() if extra in extras)


def install_source(stem: str, url: str | None = None) -> str:
    """The install cell's code for lesson ``stem`` (see the module docstring): it installs when
    greenlab is missing, is PyPI's other project, or lacks a module of the lesson's extras."""
    spec = install_spec(stem, url)
    modules = extra_modules(stem)
    extras_check = (f"  # or this lesson's extras are missing\n        or not all(importlib.util.find_spec(m) "
                    f"for m in {modules!r})" if modules else "")
    runtime = runtime_text().split(" (", 1)
    return f'''{INSTALL_MARK} (Colab, Binder, a JupyterHub): where this course's greenlab is installed,
# as with make lab, this cell does nothing. GREENLAB_INSTALL may name another pip target.
import importlib, importlib.util, os, site, subprocess, sys

try:
    import greenlab
    _other = not hasattr(greenlab, "setup")  # PyPI's unrelated "greenlab" project has none
except ImportError:
    greenlab, _other = None, False
if (greenlab is None or _other{extras_check}):
    _pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    if _other:
        subprocess.run(_pip + ["uninstall", "--yes", "greenlab"], capture_output=True)
    _spec = (os.environ.get("GREENLAB_INSTALL")
             or {spec!r})
    _done = subprocess.run(_pip + ["install", _spec], capture_output=True, text=True)
    if _done.returncode:
        raise RuntimeError(f"pip install {{_spec!r}} failed:\\n{{_done.stderr[-3000:]}}")
    if site.getusersitepackages() not in sys.path:  # a JupyterHub's read-only Python installs per user
        sys.path.append(site.getusersitepackages())
    for _name in [m for m in sys.modules if m == "greenlab" or m.startswith("greenlab.")]:
        del sys.modules[_name]
    importlib.invalidate_caches()
    import greenlab
    print(f"greenlab {{greenlab.__version__}} installed from {{_spec}}; written for {runtime[0]}",
          "({runtime[1]}")
'''


def with_launch_cells(nb: dict[str, Any], stem: str, url: str | None = None) -> dict[str, Any]:
    """``nb`` (a learner copy) with the launch badges as its first cell and the install cell before its
    first code cell; ids ``<stem>-launch`` and ``<stem>-install``. A notebook that has them already
    is returned as it is."""
    cells = nb.get("cells", [])
    if any(c.get("id") in (f"{stem}-launch", f"{stem}-install") for c in cells):
        return nb
    url = repository_url() if url is None else url
    launch = {"cell_type": "markdown", "id": f"{stem}-launch", "metadata": {},
              "source": f"{LAUNCH_MARK}\n{badges(stem, url)}"}
    install = {"cell_type": "code", "id": f"{stem}-install", "metadata": {}, "execution_count": None,
               "outputs": [], "source": install_source(stem, url)}
    out = [launch]
    placed = False
    for cell in cells:
        if not placed and cell.get("cell_type") == "code":
            out.append(install)
            placed = True
        out.append(copy.deepcopy(cell))
    if not placed:
        out.append(install)
    return {**nb, "cells": out}


def launch_problems(path: str | os.PathLike, url: str | None = None) -> list[str]:
    """What a learner copy lacks to open from one click (empty when it is complete)."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    stem = path.stem
    cells = nb.get("cells", [])
    problems = []
    if not cells or LAUNCH_MARK not in "".join(cells[0].get("source", "")):
        problems.append(f"{path.name}: the first cell is not the launch badges")
    elif badges(stem, url) not in "".join(cells[0]["source"]):
        problems.append(f"{path.name}: the launch badges do not open this lesson from the repository")
    code = [c for c in cells if c.get("cell_type") == "code"]
    if not code or "".join(code[0].get("source", "")) != install_source(stem, url):
        problems.append(f"{path.name}: the first code cell is not the install cell")
    return problems
