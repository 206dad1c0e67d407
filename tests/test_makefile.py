"""make lab: a learner's own copy of the lessons, never overwritten; works as root; LAB_ARGS."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def checkout(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in ("pyproject.toml", "constraints.txt"):  # what the install step depends on
        (tmp_path / name).write_text("")
    (tmp_path / "lessons").mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (tmp_path / "lessons" / name).write_text(f"shipped {name}")
    return tmp_path


def make(cwd, *args):
    """make in ``cwd`` with this test's Python (greenlab importable) as the venv's."""
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(["make", *args, f"PY={sys.executable}"], cwd=cwd, capture_output=True, text=True,
                          check=True, env=env).stdout


def test_my_lessons_copies_missing_lessons_and_never_overwrites(checkout):
    make(checkout, "-s", "my-lessons")
    mine = checkout / "my-lessons"
    assert sorted(p.name for p in mine.iterdir()) == ["01_a.ipynb", "02_b.ipynb"]
    (mine / "01_a.ipynb").write_text("my answers")
    (checkout / "lessons" / "03_c.ipynb").write_text("shipped later")
    out = make(checkout, "-s", "my-lessons")
    assert (mine / "01_a.ipynb").read_text() == "my answers"
    assert (mine / "03_c.ipynb").read_text() == "shipped later"
    assert "03_c.ipynb" in out and "01_a.ipynb" not in out


def test_lab_opens_my_lessons_with_lab_args_and_allow_root_only_for_root(checkout):
    line = [l for l in make(checkout, "-n", "lab", "LAB_ARGS=--port=8890").splitlines() if "jupyter lab" in l][-1]
    assert "my-lessons/" in line and line.rstrip().endswith("--port=8890")
    assert ("--allow-root" in line) == (os.geteuid() == 0)
    forced = make(checkout, "-n", "lab", "ROOT_FLAG=--allow-root")
    assert "--allow-root" in forced


def test_install_is_not_silent_and_my_lessons_is_ignored_and_untested():
    makefile = (ROOT / "Makefile").read_text()
    install = makefile.split("$(STAMP): pyproject.toml constraints.txt", 1)[1].split("\n\n", 1)[0]
    assert "--quiet" not in install and "echo" in install
    assert "/my-lessons/" in (ROOT / ".gitignore").read_text().split()
    test_line = [l for l in makefile.splitlines() if l.startswith("\t") and "pytest tests lessons" in l]
    assert test_line and "my-lessons" not in test_line[0]


def test_make_test_shows_the_slowest_tests_and_the_readme_names_it():
    makefile = (ROOT / "Makefile").read_text()
    test_line = [l for l in makefile.splitlines() if l.startswith("\t") and "pytest tests lessons" in l]
    assert test_line and "--durations=20" in test_line[0]
    assert "make test" in (ROOT / "README.md").read_text()
def test_make_test_and_make_lab_start_pytorch_the_same_way(checkout):
    lab = [l for l in make(checkout, "-n", "lab").splitlines() if "jupyter lab" in l][-1]
    test = [l for l in make(checkout, "-n", "test").splitlines() if "pytest tests lessons" in l][-1]
    for line in (lab, test):
        assert "OMP_WAIT_POLICY=PASSIVE" in line
    assert "GREENLAB_THREADS" not in test  # the tests choose threads as a learner's kernel does
    assert "GREENLAB_DOWNLOAD=0" in test  # the tests stay offline; quick mode alone downloads
    mine = [l for l in make(checkout, "-n", "lab", "OMP_WAIT_POLICY=ACTIVE").splitlines() if "jupyter lab" in l][-1]
    assert "OMP_WAIT_POLICY=ACTIVE" in mine


def test_make_test_runs_each_lesson_once_in_each_form():
    """Learner copies in a Jupyter kernel (nbval), instructor copies headless with the optional
    packages hidden (test_minimal_env): every lesson is run in both forms, none twice under nbval."""
    makefile = (ROOT / "Makefile").read_text()
    test_line = [l for l in makefile.splitlines() if l.startswith("\t") and "pytest tests lessons" in l][0]
    assert "--ignore=lessons/instructor" in test_line and "--nbval-lax" in makefile
    minimal = (ROOT / "tests" / "test_minimal_env.py").read_text()
    assert 'glob("*.ipynb")' in minimal and "test_every_lesson_runs_headless_without_the_optional_packages" in minimal
    lessons = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
    instructor = sorted(p.name for p in (ROOT / "lessons" / "instructor").glob("[0-9][0-9]_*.ipynb"))
    assert lessons == instructor and lessons


def test_the_browser_fixture_notebooks_are_not_run_as_lessons():
    """make test runs nbval over tests/ too: the notebooks the browser test opens (one trains until it
    is interrupted) must not be collected as notebook tests."""
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval-lax",
                          "-p", "no:cacheprovider", "tests/browser"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120).stdout
    assert ".ipynb" not in out and sorted(p.name for p in (ROOT / "tests" / "browser").glob("*.ipynb"))
