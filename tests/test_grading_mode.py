"""Grading mode runs what a grade needs and no more: the cells (``greenlab.course.needed_cells``,
used by the nbgrader preprocessor ``SkipExperiments``) and, inside the cells that run, no warm-up
runs and no epoch timing; ``import greenlab`` itself loads no PyTorch (nbgrader's process imports
the course's preprocessor from it). No test here times anything: which cells run, and which calls
are made, is what counts."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenlab.course import nbgrader as nbgrader_export
from greenlab.course.needed_cells import ALWAYS_BOUND, names, needed

ROOT = Path(__file__).resolve().parents[1]


def _kept(*sources, required=(0,)):
    return sorted(needed(list(sources), required))


# --- which cells a grade needs ---------------------------------------------------------------------

def test_only_the_last_binding_before_a_reader_runs():
    # data is loaded three times; the answer reads the last one only
    assert _kept("import greenlab as gl", "data = load(1)", "data = load(2)", "fig, ax = draw(data)",
                 "data = load(3)", "def f():\n    return data", required=(0, 5)) == [0, 4, 5]


def test_a_cell_that_binds_a_name_before_reading_it_needs_no_earlier_cell():
    # a figure cell makes its own fig and ax: an earlier figure is not needed for it
    assert _kept("setup()", "fig, ax = plt.subplots()\nax.bar(x, y)", "x, y = 1, 2",
                 "fig, ax = plt.subplots()\nax.plot(x, y)\nanswer = 1", required=(0, 3)) == [0, 2, 3]


def test_a_cell_that_changes_a_name_runs_with_the_one_that_bound_it():
    cells = ["setup()", "runs = {}", "runs['fp32'] = train()", "history = []", "history.append(train())",
             "total = 0", "total += 1", "plot(runs)", "statement(runs, history, total)"]
    assert _kept(*cells, required=(0, 8)) == [0, 1, 2, 3, 4, 5, 6, 8]


def test_a_loop_variable_or_a_functions_own_names_are_not_reads():
    seen = names("for r in runs:\n    print(r)\n"
                 "def f(a, *rest, k=default):\n    b = a + 1\n    return helper(b, rest, k)\n"
                 "g = lambda z: z * scale\nsquares = [i * i for i in range(3)]")
    assert seen.reads == {"runs", "print", "default", "helper", "scale", "range"}
    assert seen.binds == {"f", "g", "squares"}


def test_a_method_called_for_its_effect_changes_its_name_but_not_a_modules():
    seen = names("import torch\nmodel.load_state_dict(state)\ntorch.manual_seed(0)\nlabel = model.name()")
    assert "model" in seen.changes and "torch" not in seen.changes - seen.binds
    assert names("plt.show()", modules={"plt"}).changes == set()


def test_a_function_reads_what_its_body_reads_so_its_caller_pulls_it_in():
    cells = ["setup()", "data = load()", "def make():\n    return build(data.shape)", "model = make()",
             "def answer():\n    return model"]
    assert _kept(*cells, required=(0, 4)) == [0, 1, 2, 3, 4]


def test_a_cell_magic_runs_when_a_later_cell_needs_a_name_no_readable_cell_binds():
    cells = ["import greenlab as gl", "n = 3", "unused = 1", "%load_ext greenlab",
             "%%energy\nfor _ in range(n):\n    gl.work()", "print(_energy.joules)"]
    magic = names(cells[4])
    assert magic.opaque and {"gl", "n", "range"} <= magic.reads
    assert _kept(*cells, required=(0, 5)) == [0, 1, 3, 4, 5]
    assert _kept(*cells[:5], "x = 1", required=(0, 5)) == [0, 5]  # nobody reads what the magic bound


def test_a_learner_answer_that_reads_a_lesson_name_keeps_the_cell_that_binds_it():
    lesson = ["import greenlab as gl", "data = load()", "curve = train(data)", "def answer(x):\n    return x"]
    assert _kept(*lesson, required=(0, 3)) == [0, 3]
    assert _kept(*lesson[:3], "def answer(x):\n    return x * len(data)", required=(0, 3)) == [0, 1, 3]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    course = tmp_path_factory.mktemp("grading-mode")
    return {path.name[:2]: nbgrader_export.load(path)
            for path in nbgrader_export.export(course, quiz_points=1, seed=1)}


def _plan(nb):
    import nbformat

    from greenlab.course.nbgrader_preprocessor import plan

    node = nbformat.reads(json.dumps(nb), as_version=4)
    code = [c for c in node.cells if c.cell_type == "code"]
    return code, plan(code)


def _skipped(nb):
    code, grading = _plan(nb)
    return code, set(range(len(code))) - grading.run


def test_every_lesson_runs_its_tests_and_answers_shows_its_statements_and_leaves_most_experiments_out(exported):
    pytest.importorskip("nbgrader", reason="the preprocessor needs nbgrader: pip install -e '.[test]'")
    left_out, optional, shown = 0, 0, 0
    for lesson, nb in exported.items():
        code, grading = _plan(nb)
        for i, cell in enumerate(code):
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") and meta.get("grade"):  # hand-graded: left as written, run only when needed
                assert i in grading.run | grading.kept, f"lesson {lesson} drops {cell.id}, a hand-graded answer"
                after = code[i + 1] if i + 1 < len(code) else None
                if after is not None and not after.metadata.get("nbgrader"):
                    assert i + 1 in grading.shown, f"lesson {lesson} runs {after.id} again instead of showing it"
            elif i == 0 or meta.get("solution") or meta.get("grade"):
                assert i in grading.run, f"lesson {lesson} does not run {cell.id}, which a grade needs"
            else:
                optional += 1
        assert not grading.run & (grading.shown | grading.kept)
        left_out += len(grading.left_out(len(code)))
        shown += len(grading.shown)
        # every cell a running cell reads from runs: the names it reads are bound by a running cell before
        # it, by a name it binds itself, or are the kernel's own
        bound = set()
        for cell in (c for i, c in enumerate(code) if i in grading.run):
            seen = names(cell.source)
            if not seen.opaque:
                missing = seen.reads - bound - ALWAYS_BOUND
                assert not missing, f"lesson {lesson} {cell.id} reads {sorted(missing)} that no running cell binds"
            bound |= seen.changes
    assert left_out > optional / 2  # the lessons' own cells, experiments mostly, are mostly left out
    assert shown > 0  # the statements (and the predictions) above: each shown as the learner ran it


def test_an_answer_that_reads_an_experiment_keeps_that_experiment(exported):
    pytest.importorskip("nbgrader", reason="the preprocessor needs nbgrader: pip install -e '.[test]'")
    lesson = next(iter(exported))
    nb = json.loads(json.dumps(exported[lesson]))
    code, before = _skipped(nb)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    last = max(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("solution"))
    # a cell before the last answer that grading mode left out, and a name it binds that no cell between
    # them binds or changes again
    later = lambda i: set().union(*(names(code[j].source).changes for j in range(i + 1, last + 1)))
    victim, name = next((i, n) for i in sorted(before, reverse=True) if i < last
                        for n in sorted(names(code[i].source).binds - later(i)))
    cells[last]["source"] = "".join(cells[last]["source"]) + f"\nprint({name})\n"
    assert victim not in _skipped(nb)[1]


# --- grading mode in the library -------------------------------------------------------------------

def test_grading_mode_runs_no_warm_up_and_times_no_epoch(monkeypatch):
    from greenlab.experiments import arms, sizing

    calls = []
    monkeypatch.setenv("GREENLAB_GRADING", "1")
    arms.warm_up({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2)
    assert calls == [] and arms.warm_rounds(2) == 0

    @dataclasses.dataclass
    class Config:
        epochs: int = 2
        label: str = ""

    def train(*_args, **_kwargs):
        raise AssertionError("grading mode timed an epoch")

    assert sizing.epochs_to_fill(lambda: None, None, Config(), train_fn=train) == 2
    monkeypatch.setenv("GREENLAB_GRADING", "0")
    arms.warm_up({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=2)
    assert calls == ["a", "b", "a", "b"] and arms.warm_rounds(2) == 2


def test_importing_greenlab_or_the_grading_preprocessor_loads_no_torch():
    # nbgrader's process imports the preprocessor (and the export with it) for every submission it grades
    code = ("import sys, greenlab as gl\n"
            "import greenlab.course.needed_cells, greenlab.course.class_grading, greenlab.course.nbgrader\n"
            "try:\n    import greenlab.course.nbgrader_preprocessor\nexcept ImportError:  # no nbgrader\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch loaded'\n"
            "assert callable(gl.setup) and gl.check.stakeholder_statement and 'torch' not in sys.modules\n"
            "assert gl.check.fine_grained_prune and 'torch' in sys.modules  # what a checker uses, on first use\n"
            "assert {'setup', 'budget', 'check', 'train'} <= set(dir(gl))\n"
            "print(gl.energy.__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "greenlab.energy"
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        import greenlab

        greenlab.not_a_name
