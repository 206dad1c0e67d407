"""Set-up files agree with each other, so a conda user, a pip user and CI get the same course."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
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
    assert set(env) == set(py), (f"only in environment.yml: {set(env) - set(py)}; "
                                 f"only in pyproject: {set(py) - set(env)}")
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


def test_package_data_lists_what_is_there():
    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["greenlab"]
    for pattern in patterns:
        assert list((ROOT / "greenlab").glob(pattern)), f"package-data lists {pattern!r}, which matches no file"
    for table in ("carbon_intensity.csv", "gpus.csv", "cpu_tdp.csv", "iso3166_alpha2.csv", "network_energy.csv"):
        assert any((ROOT / "greenlab" / "cited_tables" / table).match(p) for p in patterns), table


def test_a_wheel_runs_doctor_and_converts_carbon_outside_the_checkout(tmp_path):
    """Build a wheel from the sources, install it (no dependencies: torch comes from this
    environment) into a fresh virtual environment, and run it from a folder far from the checkout."""
    import os
    import shutil
    import subprocess
    import sys
    import sysconfig

    from greenlab.impact import carbon

    src = tmp_path / "src"
    shutil.copytree(ROOT / "greenlab", src / "greenlab", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pip must not see the checkout
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"),
                          str(src)], check=True, capture_output=True, timeout=300, env=clean)
    (wheel,) = (tmp_path / "dist").glob("greenlab-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(pip + ["--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300, env=clean)
    # torch and the other dependencies from this environment, appended after the venv's own packages
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GREENLAB_")}
    env.update(GREENLAB_QUICK="1", GREENLAB_RESULTS_DIR=str(away / "results"))

    doctor = subprocess.run([str(venv / "bin" / "greenlab"), "doctor", "--json"], cwd=away, env=env,
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)
    code = ("import json, greenlab, greenlab.base.paths as p\n"
            "print(json.dumps({'file': greenlab.__file__, 'checkout': p.in_checkout(),\n"
            "                  'g': greenlab.co2e_g(3.6e6, 'FRA'), 'tables': str(p.tables_dir())}))")
    done = subprocess.run([str(python), "-c", code], cwd=away, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(venv)) and got["checkout"] is False
    assert got["tables"].startswith(str(venv))
    assert got["g"] == pytest.approx(carbon.co2e_g(3.6e6, "FRA"))  # 1 kWh at France's intensity
