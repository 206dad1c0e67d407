"""Every learner copy opens from one click: launch badges and a guarded install cell (greenlab.course.hosted)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from greenlab.course import hosted

ROOT = Path(__file__).resolve().parent.parent
LEARNER = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
URL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def test_the_address_comes_from_pyproject():
    assert hosted.repository_url(ROOT) == URL == hosted.repository_url()
    assert hosted.github_path(URL) == URL.removeprefix("https://github.com/")


@pytest.mark.parametrize("path", LEARNER, ids=lambda p: p.stem)
def test_every_learner_copy_has_its_badges_first_and_the_install_cell_first_among_code(path):
    assert hosted.launch_problems(path) == []
    cells = json.loads(path.read_text())["cells"]
    top = "".join(cells[0]["source"])
    assert f"colab.research.google.com/github/{hosted.github_path(URL)}/blob/main/lessons/{path.name}" in top
    assert f"mybinder.org/v2/gh/{hosted.github_path(URL)}/main?urlpath=lab/tree/lessons/{path.name}" in top
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    ast.parse(code[0])  # plain Python: no %pip line for the tools that parse lesson code
    assert code[1].startswith("import greenlab as gl")


def test_the_instructor_copies_have_no_install_cell():
    for path in sorted((ROOT / "lessons" / "instructor").glob("*.ipynb")):
        assert hosted.INSTALL_MARK not in path.read_text() and hosted.LAUNCH_MARK not in path.read_text()


def test_launch_problems_finds_a_copy_without_its_cells(tmp_path):
    bare = tmp_path / "00_bare.ipynb"
    bare.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "import greenlab as gl"}]}))
    assert len(hosted.launch_problems(bare)) == 2


def test_lessons_with_an_extra_install_it_and_the_others_the_core():
    assert hosted.install_spec("12_adapting_and_serving") == f"greenlab-course[lowbit] @ git+{URL}"
    assert hosted.install_spec("14_sharing_a_cluster") == f"greenlab-course[scheduling] @ git+{URL}"
    assert hosted.install_spec("01_mixed_precision") == f"greenlab-course @ git+{URL}"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for lesson, names in hosted.LESSON_EXTRAS.items():
        assert set(names) <= set(extras)
    # the lessons that call into an extra's package are the ones that install it
    users = {p.name[:2] for p in (ROOT / "lessons" / "instructor").glob("*.ipynb")
             if any(s in p.read_text() for s in ("gl.cluster.simulate", "gl.tuning.", "quantize_weights_int8",
                                                  "states=\\\"8bit\\\"", "bitsandbytes"))}
    assert users == set(hosted.LESSON_EXTRAS)


def test_the_readme_has_the_badges_and_the_install_line():
    readme = (ROOT / "README.md").read_text()
    assert hosted.badges(None) in readme
    assert hosted.colab_url("00_measuring_energy") in readme
    assert f'pip install "{hosted.install_spec("00_x")}"' in readme


def _run_cell(tmp_path, stem, fake_greenlab: str | None, environ=None, hidden=()):
    """Run lesson ``stem``'s install cell in a fresh Python whose pip is a recorder: with
    ``fake_greenlab`` (the text of a greenlab/__init__.py) first on the path, else this checkout's;
    the modules ``hidden`` are not found."""
    lib = tmp_path / "lib"
    lib.mkdir()
    if fake_greenlab is not None:
        (lib / "greenlab").mkdir()
        (lib / "greenlab" / "__init__.py").write_text(fake_greenlab)
    driver = textwrap.dedent(f'''
        import importlib.util, subprocess, sys
        from pathlib import Path
        _find = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name in {tuple(hidden)!r} else _find(name, *a)
        sys.path.insert(0, {str(lib)!r})
        if {fake_greenlab is None!r}:
            sys.path.insert(0, {str(ROOT)!r})
        calls = []

        class Done:
            returncode, stderr = 0, ""

        def run(cmd, **kwargs):
            calls.append(cmd[cmd.index("--quiet") + 1:])
            if "install" in cmd and Path({str(lib)!r}, "greenlab").is_dir():  # as pip would: this course's greenlab
                Path({str(lib)!r}, "greenlab", "__init__.py").write_text("__version__ = '9.9'\\ndef setup(): pass\\n")
            return Done()

        subprocess.run = run
        exec(compile(open(sys.argv[1]).read(), "install-cell", "exec"), {{}})
        print("CALLS", calls)
    ''')
    cell = tmp_path / "cell.py"
    cell.write_text(hosted.install_source(stem, URL))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **(environ or {})}
    return subprocess.run([sys.executable, "-c", driver, str(cell)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_where_this_greenlab_is_installed_the_cell_does_nothing(tmp_path):
    """Under nbval, CI and make lab: no pip, no network, no output."""
    done = _run_cell(tmp_path, "00_measuring_energy", None)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "CALLS []\n"


def test_pypis_other_greenlab_is_replaced_with_one_line_of_output(tmp_path):
    done = _run_cell(tmp_path, "12_adapting_and_serving", "# PyPI's unrelated project: no setup()\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == (f"CALLS [['uninstall', '--yes', 'greenlab'], "
                                            f"['install', 'greenlab-course[lowbit] @ git+{URL}']]")
    assert lines[0] == (f"greenlab 9.9 installed from greenlab-course[lowbit] @ git+{URL}; "
                        f"written for {hosted.runtime_text()}")
    assert "Python 3.13" in lines[0] and "ipywidgets 7.7.1" in lines[0]


def test_a_missing_greenlab_is_installed_from_what_greenlab_install_names(tmp_path):
    done = _run_cell(tmp_path, "00_measuring_energy", None, {"GREENLAB_INSTALL": "/wheels/greenlab_course.whl",
                                                             "PYTHONNOUSERSITE": "1"})
    # this checkout is on the path, so nothing is missing: GREENLAB_INSTALL alone installs nothing
    assert done.stdout == "CALLS []\n"
    (tmp_path / "again").mkdir()
    lib_less = _run_cell(tmp_path / "again", "00_measuring_energy", "raise ImportError('not here')\n",
                         {"GREENLAB_INSTALL": "/wheels/greenlab_course.whl"})
    assert lib_less.returncode == 0, lib_less.stderr
    assert "['install', '/wheels/greenlab_course.whl']" in lib_less.stdout


def test_a_lesson_whose_extras_are_missing_installs_them_without_touching_greenlab(tmp_path):
    """A JupyterHub where lesson 00's cell installed the core: lesson 12's cell adds its extra."""
    done = _run_cell(tmp_path, "12_adapting_and_serving", None, hidden=("torchao",))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"CALLS [['install', 'greenlab-course[lowbit] @ git+{URL}']]"
    assert hosted.extra_modules("12_adapting_and_serving") == ["bitsandbytes", "torchao"]
    assert hosted.extra_modules("14_sharing_a_cluster") == ["optuna", "simpy"]
    assert hosted.extra_modules("00_measuring_energy") == []


def test_the_install_cell_keeps_to_the_projects_line_length():
    for path in LEARNER:
        assert max(len(line) for line in hosted.install_source(path.stem).splitlines()) <= 120
