"""Set-up files agree with each other, so a conda user, a pip user and CI get the same course."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pyproject_requirements() -> dict[str, Requirement]:
    project = _pyproject()["project"]
    reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["test"])
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def _environment_requirements() -> dict[str, Requirement]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_lists) == 1, "environment.yml needs exactly one pip: list"
    lines = [line for line in pip_lists[0] if not line.startswith("-e")]
    return {Requirement(r).name.lower(): Requirement(r) for r in lines}


def test_environment_yml_asks_for_what_pyproject_asks_for():
    py, env = _pyproject_requirements(), _environment_requirements()
    assert set(env) == set(py), f"only in environment.yml: {set(env) - set(py)}; only in pyproject: {set(py) - set(env)}"
    for name, req in py.items():
        assert env[name].specifier == req.specifier, f"{name}: {env[name].specifier} != {req.specifier}"


def test_environment_yml_uses_python_311_and_installs_the_package():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip


def test_constraints_pin_torch_exactly_and_sit_inside_the_ranges():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = re.split(r"==", line)
            pins[name.lower()] = version
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name, req in _pyproject_requirements().items():
        if name in pins:
            assert req.specifier.contains(Version(pins[name])), f"{name}=={pins[name]} is outside {req.specifier}"


def test_make_and_ci_use_the_constraints_and_the_readme_command():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


def test_console_script_points_at_the_cli():
    assert _pyproject()["project"]["scripts"]["greenlab"] == "greenlab.cli:main"
