"""Instructor -> learner notebook generation (greenlab.course): markers, outputs, determinism."""

import json

import nbformat
import pytest

from greenlab.course import build, headless, notebook_format as fmt


def _saved_by_jupyter(cells):
    """A notebook dict as Jupyter saves it: random ids, counts, outputs, extra metadata."""
    out = []
    for i, c in enumerate(cells):
        c = dict(c)
        c["id"] = f"random{i}abc"
        if c["cell_type"] == "code":
            c.setdefault("execution_count", i + 7)
            c.setdefault("outputs", [{"output_type": "stream", "name": "stdout", "text": ["noise\n"]}])
        out.append(c)
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "greenlab (venv)", "language": "python", "name": "gl-venv"},
            "language_info": {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"},
            "widgets": {"state": {}},
        },
        "nbformat": 4,
        "nbformat_minor": 4,
    }


def _code(src, **kw):
    return {"cell_type": "code", "metadata": kw.pop("metadata", {}), "source": src, **kw}


def _md(src, **kw):
    return {"cell_type": "markdown", "metadata": kw.pop("metadata", {}), "source": src}


def _sources(nb):
    return [c["source"] for c in nb["cells"]]


def test_solution_block_replaced_by_learner_part_and_uncommented():
    src = (
        "def joules_per_gflop(j, f):\n"
        "    # BEGIN SOLUTION\n"
        "    return j / (f / 1e9)\n"
        "    # LEARNER:\n"
        "    # return None  # replace with your formula\n"
        "    #\n"
        "    # # a comment for the learner\n"
        "    # END SOLUTION\n"
        "print('after')"
    )
    assert fmt.strip_solutions(src) == (
        "def joules_per_gflop(j, f):\n"
        "    return None  # replace with your formula\n"
        "\n"
        "    # a comment for the learner\n"
        "print('after')"
    )


def test_solution_block_without_learner_part_gets_default_stub_at_its_indentation():
    src = "x = 1\n# BEGIN SOLUTION\ny = x + 1\nz = y * 2\n# END SOLUTION\nprint(x)"
    assert fmt.strip_solutions(src) == f"x = 1\n{fmt.DEFAULT_STUB}\nprint(x)"
    nested = "for i in range(2):\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION"
    assert fmt.strip_solutions(nested) == f"for i in range(2):\n    {fmt.DEFAULT_STUB}"


def test_several_solution_blocks_in_one_cell():
    src = ("# BEGIN SOLUTION\na = 1\n# LEARNER:\n# a = None\n# END SOLUTION\n"
           "b = 2\n# BEGIN SOLUTION\nc = 3\n# END SOLUTION")
    assert fmt.strip_solutions(src) == f"a = None\nb = 2\n{fmt.DEFAULT_STUB}"


@pytest.mark.parametrize(
    "src, message",
    [
        ("# BEGIN SOLUTION\nx = 1", "never closed"),
        ("x = 1\n# END SOLUTION", "without"),
        ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION", "inside another"),
        ("# LEARNER:\n# END SOLUTION", "must be inside"),
        ("# BEGIN SOLUTION\nx = 1\n# LEARNER:\nx = None\n# END SOLUTION", "commented out"),
    ],
)
def test_broken_solution_markers_raise_clear_errors(src, message):
    with pytest.raises(fmt.LessonError, match=message):
        fmt.strip_solutions(src, "demo.ipynb cell 3")


def test_instructor_notes_stripped_from_markdown_and_unbalanced_notes_rejected():
    text = ("Intro.\n\n<!-- BEGIN INSTRUCTOR -->\nSecret tip.\n<!-- END INSTRUCTOR -->\n\n"
            "More. <!-- BEGIN INSTRUCTOR -->inline<!-- END INSTRUCTOR -->end")
    assert fmt.strip_instructor_notes(text) == "Intro.\n\nMore. end"
    with pytest.raises(fmt.LessonError, match="unbalanced"):
        fmt.strip_instructor_notes("a <!-- BEGIN INSTRUCTOR --> b")


def test_learner_notebook_drops_instructor_only_cells_and_empty_note_cells():
    nb = _saved_by_jupyter([
        _md("# Title"),
        _md("<!-- BEGIN INSTRUCTOR -->only for you<!-- END INSTRUCTOR -->"),
        _code("answer = 42", metadata={"tags": ["instructor-only"]}),
        _code("print(1)"),
    ])
    learner = fmt.learner_notebook(nb, "05_demo")
    assert _sources(learner) == ["# Title", "print(1)"]
    # learner cells keep the id of the instructor cell they come from
    assert [c["id"] for c in learner["cells"]] == ["05_demo-000", "05_demo-003"]


def test_outputs_kept_only_in_checked_cells_and_counts_cleared():
    checked_output = {"output_type": "execute_result", "execution_count": 9, "metadata": {},
                      "data": {"text/plain": ["3"]}}
    nb = _saved_by_jupyter([
        _code("# NBVAL_CHECK_OUTPUT\n1 + 2", outputs=[checked_output]),
        _code("print('timing 1.234 s')"),
        _code("2 + 2", metadata={"tags": ["nbval-check-output"]}, outputs=[checked_output]),
    ])
    for result in (fmt.normalise(nb, "01_x"), fmt.learner_notebook(nb, "01_x")):
        cells = result["cells"]
        # nbval compares only cells with a count: checked cells get their position among code cells
        assert [c["execution_count"] for c in cells] == [1, None, 3]
        assert cells[0]["outputs"] == [{**checked_output, "execution_count": 1, "data": {"text/plain": "3"}}]
        assert cells[1]["outputs"] == []
        assert cells[2]["outputs"] != []


def test_normalised_metadata_is_minimal_and_valid_nbformat_45():
    nb = fmt.normalise(_saved_by_jupyter([_md("hi"), _code("x = 1")]), "01_mixed_precision")
    assert nb["metadata"] == fmt.NOTEBOOK_METADATA
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)
    assert [c["id"] for c in nb["cells"]] == ["01_mixed_precision-000", "01_mixed_precision-001"]
    nbformat.validate(nbformat.reads(fmt.dumps(nb), as_version=4))


def test_dumps_matches_jupyters_own_writer_byte_for_byte():
    nb = fmt.notebook([fmt.md("# T\n\ntext"), fmt.code("print('a')\nprint('b')", check_output=True)])
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"}]
    text = fmt.dumps(nb)
    assert nbformat.writes(nbformat.reads(text, as_version=4)) + "\n" == text


def test_build_is_deterministic_and_idempotent():
    raw = _saved_by_jupyter([_md("# A"), _code("# BEGIN SOLUTION\nx = 1\n# LEARNER:\n# x = None\n# END SOLUTION")])
    first = fmt.dumps(fmt.learner_notebook(raw, "04_a"))
    again = fmt.dumps(fmt.learner_notebook(json.loads(json.dumps(raw)), "04_a"))
    assert first == again
    # building from an already-normalised instructor copy gives the same learner copy
    normalised = json.loads(fmt.dumps(fmt.normalise(raw, "04_a")))
    assert fmt.dumps(fmt.learner_notebook(normalised, "04_a")) == first
    assert fmt.dumps(fmt.normalise(normalised, "04_a")) == fmt.dumps(fmt.normalise(raw, "04_a"))


def test_learner_cell_that_is_not_valid_python_is_rejected():
    raw = _saved_by_jupyter([_code("def f(x):\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION")])
    with pytest.raises(fmt.LessonError, match="not valid Python.*LEARNER"):
        fmt.learner_notebook(raw, "04_a")


def test_magics_do_not_count_as_invalid_python():
    raw = _saved_by_jupyter([_code("%timeit 1 + 1\n!echo hi\nx = 1")])
    assert _sources(fmt.learner_notebook(raw, "04_a")) == ["%timeit 1 + 1\n!echo hi\nx = 1"]


def test_solution_block_in_a_checked_cell_is_rejected():
    raw = _saved_by_jupyter([_code("# NBVAL_CHECK_OUTPUT\n# BEGIN SOLUTION\nprint(1)\n# END SOLUTION")])
    with pytest.raises(fmt.LessonError, match="cannot also be"):
        fmt.learner_notebook(raw, "04_a")


def test_authoring_helpers_build_a_notebook_and_write_it(tmp_path):
    path = tmp_path / "06_compression.ipynb"
    nb = fmt.notebook(
        [fmt.md("""
            # Title

            Text.
        """), fmt.code("x = 1", check_output=True), fmt.code("y = 2", tags=["instructor-only"])],
        path,
    )
    assert _sources(nb) == ["# Title\n\nText.", "# NBVAL_CHECK_OUTPUT\nx = 1", "y = 2"]
    assert nb["cells"][2]["metadata"] == {"tags": ["instructor-only"]}
    assert nb["cells"][0]["id"] == "06_compression-000"
    assert path.read_text(encoding="utf-8") == fmt.dumps(nb)
    assert fmt.write(nb, path) is False  # unchanged: not rewritten


def test_new_lesson_scaffold_has_the_course_shape_and_refuses_to_overwrite(tmp_path):
    lessons = tmp_path / "lessons"
    path = build.new_lesson(3, "gradient_accumulation", "Gradient accumulation", lessons)
    assert path == lessons / "instructor" / "03_gradient_accumulation.ipynb"
    learner = json.loads((lessons / "03_gradient_accumulation.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in learner["cells"])
    for heading in ("Why it matters", "measured baseline", "One change at a time", "real GPU",
                    "Exercise", "non-technical stakeholder", "Knowledge check", "Summary", "References"):
        assert heading in text
    # after the launch badges, the title and the install cell (greenlab.course.hosted)
    assert [c["id"] for c in learner["cells"][:3]] == ["03_gradient_accumulation-launch",
                                                       "03_gradient_accumulation-000", "03_gradient_accumulation-install"]
    assert "import greenlab as gl" in "".join(learner["cells"][3]["source"])
    assert 'gl.reference.show("gradient_accumulation")' in text
    assert "BEGIN SOLUTION" not in text and "Instructor notes" not in text
    assert build.check(lessons) == []
    with pytest.raises(FileExistsError):
        build.new_lesson(3, "gradient_accumulation", "Again", lessons)


@pytest.mark.parametrize("number, slug", [(100, "x"), (1, "Bad-Slug"), (1, "")])
def test_new_lesson_rejects_bad_names(tmp_path, number, slug):
    with pytest.raises(ValueError, match="slug"):
        build.new_lesson(number, slug, "T", tmp_path)


# --- headless run (python -m greenlab.course run) ------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from minimal_env import ROOT, hidden_env  # noqa: E402


def _lesson(tmp_path, cells, name="05_demo.ipynb"):
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
                    encoding="utf-8")
    return path


def test_run_executes_code_cells_in_order_in_one_namespace(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GREENLAB_QUICK", raising=False)
    path = _lesson(tmp_path, [
        _md("# title"),
        _code("import os\nsteps = [os.environ['GREENLAB_QUICK'], os.getcwd()]"),
        _code(""),
        _code("steps.append('second')\nlen(steps) * 10"),
    ])
    cwd = os.getcwd()
    done = headless.run_notebook(path)
    out = capsys.readouterr().out
    assert (done.lesson, done.cells_run) == ("05_demo", 2)
    assert "30\n" in out  # the last expression is shown, as in a notebook
    assert "--- 05_demo.ipynb cell 3 (code cell 2)" in out
    assert os.getcwd() == cwd and "GREENLAB_QUICK" not in os.environ  # both restored


def test_run_runs_in_the_notebook_folder_in_quick_mode(tmp_path, capsys):
    path = _lesson(tmp_path, [_code("import os\nprint('quick', os.environ['GREENLAB_QUICK'], os.getcwd())")])
    headless.run_notebook(path)
    assert f"quick 1 {tmp_path}" in capsys.readouterr().out


def test_a_failing_cell_names_the_lesson_and_cell_and_stops(tmp_path, capsys):
    path = _lesson(tmp_path, [_code("x = 1"), _md("text"), _code("y = x / 0"), _code("print('never')")])
    with pytest.raises(headless.LessonRunError,
                       match=r"05_demo\.ipynb cell 2 \(code cell 2\) failed: ZeroDivisionError"):
        headless.run_notebook(path)
    assert "never" not in capsys.readouterr().out


def test_run_command_exit_codes(tmp_path, capsys):
    good = _lesson(tmp_path, [_code("print('ok')")], "01_good.ipynb")
    bad = _lesson(tmp_path, [_code("raise ValueError('boom')")], "02_bad.ipynb")
    assert build.main(["run", str(good)]) == 0
    assert build.main(["run", str(good), str(bad)]) == 1
    assert "FAILED 02_bad.ipynb cell 0 (code cell 1) failed: ValueError: boom" in capsys.readouterr().err
    assert build.main(["run", str(tmp_path / "missing.ipynb")]) == 2


def test_without_ipython_magics_are_handled_and_display_prints_text(tmp_path):
    path = _lesson(tmp_path, [
        _code("%load_ext greenlab.nonexistent\nvalue = 2"),
        _code("%%energy --label demo\nvalue = value * 21\nprint('body ran', value)"),
        _code("print('kept:', _energy.label, _energy.seconds > 0)"),
        _code("%%capture\nprint('captured body ran')"),
        _code("from IPython.display import Markdown, display\ndisplay(Markdown('**shown as text**'), value)"),
        _code("import importlib.util\nprint('IPython findable:', importlib.util.find_spec('IPython') is not None)"),
        _code("display('built in, as in a kernel')"),
    ])
    proc = subprocess.run([sys.executable, "-m", "greenlab.course", "run", str(path)], cwd=ROOT,
                          env=hidden_env(tmp_path / "site"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "skipped '%load_ext greenlab.nonexistent' (IPython is not installed)" in out
    assert "ran the %%energy cell as a greenlab.measure window, kept as _energy" in out
    assert "body ran 42" in out and "kept: demo True" in out
    assert "ran the cell body without the %%capture magic (IPython is not installed)" in out
    assert "captured body ran" in out
    assert "**shown as text**\n42" in out
    assert "IPython findable: False" in out  # no stand-in IPython package leaks to other libraries
    assert "built in, as in a kernel" in out  # display() without an import, as a notebook kernel has it
    assert "passed 05_demo: 7 code cells" in out


def test_the_headless_energy_cell_reads_its_options_as_the_magic_does(capsys):
    runner = headless._CellRunner("05_demo", echo=False)
    runner._run_energy_cell("%%energy --region FRA --pue 1.5 --label demo\nx = 1", "cell 0")
    out = capsys.readouterr().out
    assert runner.ns["_energy"].label == "demo" and runner.ns["x"] == 1
    assert "CO2e (FRA, PUE 1.5)" in out  # the magic's readout, for the region asked
    with pytest.raises(ValueError, match="usage: %%energy"):
        runner._run_energy_cell("%%energy --regoin FRA\nx = 2", "cell 1")
    with pytest.raises(ValueError):
        runner._run_energy_cell("%%energy --region NOWHERE\nx = 3", "cell 2")
    assert runner.ns["x"] == 1  # a bad option stops the cell before it runs
