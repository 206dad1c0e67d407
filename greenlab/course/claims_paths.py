"""The claims rule for paths: a lesson that names a file of the project (a cited table, a README,
a recorded run) names one that exists, so a table that moves breaks the check instead of leaving a
learner a dead pointer.

A path in a lesson's markdown or fixed code text is read as written from the checkout's root:
``greenlab/cited_tables/cpu_tdp.csv`` (the package's cited tables) or ``data/reference_runs/...``
(the checkout's data folder); ``cited_tables/...`` alone is the package's folder. Only paths with
a file name and extension (``.csv``, ``.md``, ``.json``) are checked, and a folder named with a
trailing slash (``greenlab/cited_tables/``) must exist too. ``python -m greenlab.course check``
runs this rule beside the others.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from greenlab.base.paths import package_folder, repo_root
from greenlab.course.claims_equivalence import readable_texts

# a project path: the data folder, the package's cited tables, or a file under either
PATH_RE = re.compile(r"(?<![\w/.-])((?:greenlab/)?cited_tables/[\w./-]*|data/[\w./-]*)")


def missing_path(text: str) -> str | None:
    """The first project path ``text`` names that does not exist, or None."""
    for match in PATH_RE.finditer(text):
        path = match.group(1).rstrip(".")
        is_file = bool(re.search(r"\.(?:csv|md|json)$", path))
        if not is_file and not path.endswith("/"):
            continue
        if not _resolve(path).exists():
            return path
    return None


def notebook_path_problems(nb: dict[str, Any], where: str = "notebook") -> list[str]:
    """One text per markdown cell or fixed code text of ``nb`` that names a project file or folder
    that does not exist."""
    problems = []
    for index, fixed in readable_texts(nb):
        path = missing_path(fixed)
        if path:
            problems.append(f"{where}: cell {index}: \"{path}\" does not exist in this checkout; the cited "
                            "tables are in greenlab/cited_tables/ (greenlab.base.paths.tables_dir()), "
                            "recorded runs in data/reference_runs/")
    return problems


def _resolve(path: str) -> Path:
    if path.startswith("greenlab/"):
        return package_folder().parent / path
    if path.startswith("cited_tables/"):
        return package_folder() / path
    return repo_root() / path
