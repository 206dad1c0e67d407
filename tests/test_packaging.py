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


def _make_extras() -> list[str]:
    """The extras ``make lab`` and ``make test`` install (the Makefile's MAKE_EXTRAS)."""
    (line,) = [l for l in (ROOT / "Makefile").read_text().splitlines() if l.startswith("MAKE_EXTRAS :=")]
    return line.split(":=", 1)[1].strip().split(",")


def _pyproject_requirements() -> dict[str, Requirement]:
    """The core and every extra make installs: what a conda user and CI get."""
    project = _pyproject()["project"]
    reqs = list(project["dependencies"])
    for extra in _make_extras():
        reqs += project["optional-dependencies"][extra]
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


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """A wheel built from the sources (lessons and recorded runs inside it, by setup.py), installed
    without dependencies into a fresh virtual environment that sees this environment's packages
    (torch and the rest) after its own: no download. Returns (venv folder, wheel)."""
    import os
    import shutil
    import subprocess
    import sys
    import sysconfig

    tmp_path = tmp_path_factory.mktemp("wheel")
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "greenlab", src / "greenlab", ignore=ignore)
    shutil.copytree(ROOT / "lessons", src / "lessons", ignore=ignore)
    shutil.copytree(ROOT / "data" / "reference_runs", src / "data" / "reference_runs", ignore=ignore)
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pip must not see the checkout
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp_path / "dist"),
                          str(src)], check=True, capture_output=True, timeout=300, env=clean)
    (wheel,) = (tmp_path / "dist").glob("greenlab_course-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(pip + ["--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300, env=clean)
    # torch and the other dependencies from this environment, appended after the venv's own packages
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv, wheel


def _away_env(home: Path) -> dict:
    """The environment of a learner far from the checkout: its own HOME and XDG cache, quick mode, offline."""
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "XDG_CACHE_HOME") and not k.startswith("GREENLAB_")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "xdg-cache"), GREENLAB_QUICK="1", GREENLAB_DOWNLOAD="0",
               MPLBACKEND="Agg", OMP_WAIT_POLICY="PASSIVE")
    return env


def test_a_wheel_runs_doctor_and_converts_carbon_outside_the_checkout(wheel_venv, tmp_path):
    """Run the installed wheel from a folder far from the checkout."""
    import subprocess

    from greenlab.impact import carbon

    venv, _ = wheel_venv
    python = venv / "bin" / "python"
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = _away_env(tmp_path / "home")
    env.update(GREENLAB_RESULTS_DIR=str(away / "results"))

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


# the two shortest lessons in quick mode (README's table), run from the wheel
WHEEL_LESSONS = ("02_gradient_accumulation", "05_carbon")


def test_a_wheel_copies_its_lessons_runs_two_and_caches_data_in_the_users_cache(wheel_venv, tmp_path):
    """From an empty folder: ``greenlab lab`` copies the lessons shipped in the wheel, two of them run
    headless in quick mode (their GPU sections read the recorded runs shipped beside them), and a
    dataset download lands in $XDG_CACHE_HOME/greenlab, nothing of it in the installed package."""
    import subprocess

    import fake_mirror

    venv, wheel = wheel_venv
    python = venv / "bin" / "python"
    env = _away_env(tmp_path / "home")
    away = tmp_path / "empty"
    away.mkdir()

    copied = subprocess.run([str(venv / "bin" / "greenlab"), "lab", "--copy-only"], cwd=away, env=env,
                            capture_output=True, text=True, timeout=300)
    assert copied.returncode == 0, copied.stderr
    shipped = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in (away / "my-lessons").glob("*.ipynb")) == shipped

    cache = tmp_path / "home" / "xdg-cache" / "greenlab"
    data_lines = []
    for stem in WHEEL_LESSONS:
        run = subprocess.run([str(python), "-m", "greenlab.course", "run", str(away / "my-lessons" / f"{stem}.ipynb")],
                             cwd=away, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{stem}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        data_lines += [line for line in run.stdout.splitlines() if line.startswith("greenlab.data:")]
    # offline, each dataset line names the cache it looked in: the user's, not the package's
    assert data_lines and all(str(cache) in line and str(venv) not in line for line in data_lines), data_lines
    installed = venv / "lib"
    # a download, from a local mirror, through the installed package's default cache
    resources, _ = fake_mirror.fashion_mnist_archives(tmp_path / "mirror")
    with fake_mirror.serve(tmp_path / "mirror") as (url, hits):
        code = ("import torchvision, greenlab as gl\n"
                f"cls = torchvision.datasets.FashionMNIST; cls.mirrors = [{url!r}]; cls.resources = {resources!r}\n"
                "ds = gl.data.load('fashion-mnist', n_train=40, n_test=20, download=True)\n"
                "print('SOURCE', ds.source)")
        done = subprocess.run([str(python), "-c", code], cwd=away, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "SOURCE torchvision" in done.stdout and len(hits) == 4
    assert sorted(p.name for p in (cache / "FashionMNIST" / "raw").glob("*.gz")) == sorted(r[0] for r in resources)
    assert not [p for p in installed.rglob("*") if "FashionMNIST" in p.name or p.name == "cache"]
    assert not (away / "data").exists()


# --- a distribution name of its own, a lean core, extras named for their use -------------------------

CORE = {"torch", "torchvision", "numpy", "matplotlib", "ipywidgets", "nvidia-ml-py", "psutil", "tqdm",
        "zeus-apple-silicon"}
# packages the core must not pull in: a Jupyter server, the test and grading tools, the lesson extras
NOT_CORE = {"jupyterlab", "sidecar", "nbconvert", "nbval", "pytest", "nbgrader", "bitsandbytes", "torchao", "simpy",
            "optuna",
            "playwright", "hypothesis", "nbformat", "pyyaml", "pytest-timeout", "amdsmi"}
OPTIONAL_IMPORTS = ("jupyterlab", "sidecar", "optuna", "simpy", "bitsandbytes", "torchao", "nbgrader", "nbval",
                    "nbconvert")


def test_the_distribution_has_its_own_name_and_imports_as_greenlab():
    """PyPI's 'greenlab' is an unrelated project (`gl.setup()` fails with AttributeError there)."""
    project = _pyproject()["project"]
    assert project["name"] == "greenlab-course"
    assert _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"] == ["greenlab*"]
    from greenlab.base import optional

    assert optional.DISTRIBUTION == project["name"]


def test_the_core_is_lean_and_admits_colabs_preinstalled_versions():
    core = {Requirement(r).name.lower(): Requirement(r) for r in _pyproject()["project"]["dependencies"]}
    assert set(core) == CORE and not set(core) & NOT_CORE
    # Colab's runtime (Python 3.13): a first cell that installs the core changes none of them
    for name, version in {"torch": "2.11.0", "torchvision": "0.26.0", "ipywidgets": "7.7.1"}.items():
        assert core[name].specifier.contains(Version(version)), f"{name} {version} is outside {core[name].specifier}"
    assert _pyproject()["project"]["requires-python"] and Version("3.13") in \
        __import__("packaging.specifiers").specifiers.SpecifierSet(_pyproject()["project"]["requires-python"])


def test_every_optional_package_has_an_extra_named_for_its_use_and_make_installs_them_all():
    from greenlab.base import optional

    extras = _pyproject()["project"]["optional-dependencies"]
    assert {"lab", "lowbit", "scheduling", "lessons", "test", "grading", "amd"} <= set(extras)
    assert extras["lessons"] == ["greenlab-course[lowbit,scheduling]"]  # every lesson's extras in one name
    for package, extra in optional.EXTRAS.items():
        names = {Requirement(r).name.lower() for r in extras[extra]}
        assert package in names, f"optional.EXTRAS says {package} comes with [{extra}], pyproject says {names}"
        assert optional.install_hint(package) == f"pip install 'greenlab-course[{extra}]'"
    # amd only where ROCm is (the Makefile's EXTRAS); lessons is lowbit and scheduling
    assert set(_make_extras()) == set(extras) - {"amd", "lessons"}
    assert "$(MAKE_EXTRAS)" in (ROOT / "Makefile").read_text()


def test_the_repository_address_is_written_once_and_the_readme_installs_from_it():
    url = _pyproject()["project"]["urls"]["Repository"]
    assert url.startswith("https://github.com/")
    readme = (ROOT / "README.md").read_text()
    assert f'pip install "greenlab-course @ git+{url}"' in readme
    assert "pip install greenlab\n" not in readme and "pip install greenlab " not in readme


def _optional_imports(path: Path) -> list[tuple[str, int, bool]]:
    """(package, line, at module level) for each import of an optional package in ``path``."""
    import ast

    tree = ast.parse(path.read_text())
    found = []
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for name in names:
            if name.split(".")[0] in OPTIONAL_IMPORTS:
                found.append((name.split(".")[0], node.lineno, id(node) not in inside))
    return found


def test_every_import_of_an_optional_package_is_lazy_and_guarded():
    """No module imports an extra's package when it is imported; a function that does asks first
    (optional.require / missing, or the side panel's available()), so a lean install says which
    extra to install instead of a bare ModuleNotFoundError."""
    problems = []
    for path in sorted((ROOT / "greenlab").rglob("*.py")):
        text = path.read_text()
        for package, line, top in _optional_imports(path):
            where = f"{path.relative_to(ROOT)}:{line} imports {package}"
            if top:
                problems.append(f"{where} at module level")
            elif not re.search(rf"""(require|missing)\(\s*["']{package}[."']|available\(\)""", text):
                problems.append(f"{where} without asking optional.require/missing first")
    assert problems == []


def test_the_guard_scan_finds_an_unguarded_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import optuna\n\ndef f():\n    from simpy import Environment\n")
    assert _optional_imports(bad) == [("optuna", 1, True), ("simpy", 4, False)]


def test_without_the_extras_the_library_imports_and_names_the_extra_to_install(tmp_path):
    """Every greenlab module imports with the extras' packages hidden (but the nbgrader plug-in, which
    says which extra it needs), and the tuning and cluster entry points say how to install theirs."""
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from minimal_env import hidden_env

    code = r'''
import importlib, pkgutil, greenlab
from greenlab.base.optional import LibraryMissing
failed = []
for m in pkgutil.walk_packages(greenlab.__path__, "greenlab."):
    if m.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(m.name)
    except LibraryMissing as exc:
        print("MISSING", m.name, exc)
    except Exception as exc:
        failed.append(f"{m.name}: {exc!r}")
print("FAILED", failed)
for call in ("greenlab.tuning.sweep(None, None, None)", "greenlab.cluster.simulate([], 1)"):
    try:
        eval(call)
    except LibraryMissing as exc:
        print("CALL", exc)
'''
    env = hidden_env(tmp_path, hidden=OPTIONAL_IMPORTS, required_by={})
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "FAILED []" in out
    assert "MISSING greenlab.course.nbgrader_preprocessor the nbgrader export needs nbgrader" in out
    assert "pip install 'greenlab-course[grading]'" in out
    assert ("CALL early-stopped tuning needs optuna: optuna is not installed; "
            "pip install 'greenlab-course[scheduling]'") in out
    assert "CALL the cluster simulation needs simpy" in out
