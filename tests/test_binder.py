"""binder/ follows repo2docker's conventions: CPU PyTorch, the course's runtime packages, no test tools."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
# the configuration files repo2docker reads (https://repo2docker.readthedocs.io, "Configuration files")
REPO2DOCKER_FILES = {"environment.yml", "requirements.txt", "postBuild", "runtime.txt", "apt.txt", "start",
                     "install.R", "Project.toml", "REQUIRE", "setup.py", "Pipfile", "Pipfile.lock", "default.nix",
                     "Dockerfile", "DESCRIPTION", "manifest.xml", "bindep.txt"}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _requirements(path: Path) -> tuple[list[str], dict[str, Requirement]]:
    options, reqs = [], {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            options.append(line)
        else:
            req = Requirement(line)
            reqs[req.name.lower()] = req
    return options, reqs


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_binder_holds_only_files_repo2docker_reads():
    names = {p.name for p in BINDER.iterdir()}
    assert names <= REPO2DOCKER_FILES, f"repo2docker ignores {names - REPO2DOCKER_FILES}"
    assert "requirements.txt" in names and "postBuild" in names
    assert not (ROOT / "binder" / "environment.yml").exists()  # one environment file: repo2docker picks one


def test_binder_installs_cpu_pytorch_and_the_courses_runtime_packages_without_test_tools():
    options, reqs = _requirements(BINDER / "requirements.txt")
    assert f"--extra-index-url {CPU_INDEX}" in options  # the +cpu builds outrank PyPI's CUDA ones
    assert not any(o.startswith(("-e", "--editable", "--index-url")) for o in options)
    project = _pyproject()
    wanted = {}
    for line in project["dependencies"] + project["optional-dependencies"]["lab"] \
            + project["optional-dependencies"]["lowbit"] + project["optional-dependencies"]["scheduling"]:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"sys_platform": "linux", "platform_machine": "x86_64"}):
            wanted[req.name.lower()] = req
    assert set(reqs) == set(wanted), f"only in binder: {set(reqs) - set(wanted)}; missing: {set(wanted) - set(reqs)}"
    for name, req in wanted.items():
        assert reqs[name].specifier == req.specifier, f"{name}: {reqs[name].specifier} != {req.specifier}"
    tools = {Requirement(r).name.lower() for extra in ("test", "grading")
             for r in project["optional-dependencies"][extra]}
    assert not set(reqs) & tools


def test_postbuild_installs_this_commit_plainly_and_is_executable():
    post = BINDER / "postBuild"
    text = post.read_text()
    assert text.startswith("#!/bin/bash") and os.access(post, os.X_OK)
    commands = [l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert "python -m pip install --no-deps --no-cache-dir ." in commands
    assert not any(" -e " in c or "--editable" in c for c in commands)
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"  # the Python CI tests
