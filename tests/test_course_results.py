"""Tests for the course's results table (greenlab.course.results, greenlab.course.headline): fake
lessons written here, never the real ones."""

import csv
import json

import nbformat
import pytest

from greenlab.course import headline as headline_mod
from greenlab.course import results
from greenlab.experiments.verdicts import paired

HEADLINE_CELL = """
import greenlab as gl
factor = gl.experiments.paired([10.0, 12.0, 11.0], [2.0, 2.5, 2.1], "joules", "naive", "green")
gl.headline(None, "a fake technique", "energy to a fake target", factor, reached="3/3 both")
"""


def _lesson(folder, name, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    path = folder / name
    nbformat.write(nb, path)
    return path


def test_headline_writes_a_record_only_where_the_variable_names_a_file(tmp_path, monkeypatch):
    factor = paired([10.0, 12.0, 11.0], [2.0, 2.5, 2.1], "joules", "naive", "green")
    monkeypatch.delenv(headline_mod.HEADLINE_FILE_ENV, raising=False)
    record = headline_mod.headline("09", "t", "s", factor)
    assert record["factor"] == pytest.approx(factor.estimate) and record["detectable"] is True
    assert record["repeats"] == 3 and record["low"] < record["factor"] < record["high"]
    target = tmp_path / "h.jsonl"
    monkeypatch.setenv(headline_mod.HEADLINE_FILE_ENV, str(target))
    headline_mod.headline("09", "t", "s", None, note="no factor: a recipe missed the target")
    (only,) = headline_mod.read_headlines(target)
    assert only["factor"] is None and only["note"].startswith("no factor")
    with pytest.raises(ValueError, match="ratio"):
        headline_mod.headline("09", "t", "s", paired([0.5, 0.6, 0.7], [0.4, 0.5, 0.6], "final_accuracy"))


def test_results_collects_headlines_and_says_which_lessons_have_none(tmp_path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    with_headline = _lesson(lessons, "01_fake.ipynb", HEADLINE_CELL)
    without = _lesson(lessons, "02_plain.ipynb", "x = sum(range(1000))")
    failing = _lesson(lessons, "03_broken.ipynb", "raise RuntimeError('a fake failure')")
    out = results.run_results([with_headline, without, failing], quick=True, echo=False)
    by_lesson = {x.lesson: x for x in out.lessons}
    assert by_lesson["01_fake"].status == "passed" and len(by_lesson["01_fake"].headlines) == 1
    assert by_lesson["01_fake"].headlines[0]["lesson"] == "01"  # from the runner's variable
    assert by_lesson["02_plain"].status == "passed" and not by_lesson["02_plain"].headlines
    assert by_lesson["03_broken"].status.startswith("failed") and "fake failure" in by_lesson["03_broken"].status
    rows = {r["lesson"]: r for r in out.rows()}
    assert rows["01_fake"]["factor"] == f"{paired([10.0, 12.0, 11.0], [2.0, 2.5, 2.1], 'joules').estimate:.3g}x"
    assert rows["01_fake"]["detectable"] == "yes" and rows["01_fake"]["repeats"] == "3"
    assert rows["02_plain"]["technique"] == "no headline recorded"
    assert all(x.seconds > 0 for x in out.lessons) and out.total_seconds > 0

    paths = out.write(tmp_path / "out")
    md = paths["md"].read_text()
    assert "a fake technique" in md and "no headline recorded" in md and "Total:" in md
    with open(paths["csv"], newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["lesson"] for r in table] == ["01_fake", "02_plain", "03_broken"]
    assert list(table[0]) == list(results.COLUMNS)
    saved = json.loads(paths["json"].read_text())
    assert saved["lessons"][0]["headlines"][0]["technique"] == "a fake technique"


def test_results_subcommand_is_wired_and_exits_1_when_a_lesson_fails(tmp_path):
    from greenlab.course.build import main

    lesson = _lesson(tmp_path, "05_broken.ipynb", "assert False, 'fails on purpose'")
    assert main(["results", "--quick", "--out", str(tmp_path / "out"), str(lesson)]) == 1
    assert (tmp_path / "out" / "results.md").exists()


def test_results_refuses_a_file_that_is_no_notebook_naming_it_before_any_run(tmp_path, capsys):
    from greenlab.course.build import main

    damaged = tmp_path / "05_damaged.ipynb"
    damaged.write_text("{not json")
    assert main(["results", "--quick", "--out", str(tmp_path / "out"), str(damaged)]) == 2
    assert f"notebook {str(damaged)!r} cannot be run: {damaged}: not valid notebook JSON" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.md").exists()


def test_results_time_each_lessons_longest_silence_and_name_cells_over_the_limit(tmp_path, monkeypatch):
    """One results run is also the course's silence check: every lesson's longest silent stretch is
    in the table, and a cell silent past the limit is named in the markdown under it."""
    monkeypatch.setattr(results, "SILENCE_LIMIT_S", 0.6)
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    silent = _lesson(lessons, "01_silent.ipynb", "import time\ntime.sleep(1.5)")
    chatty = _lesson(lessons, "02_chatty.ipynb", "for _ in range(5):\n    print('step', flush=True)")
    out = results.run_results([silent, chatty], quick=True, echo=False)
    by_lesson = {x.lesson: x for x in out.lessons}
    assert by_lesson["01_silent"].longest_silence_s >= 1.4
    assert [where for where, _ in by_lesson["01_silent"].silent_cells] == ["01_silent.ipynb cell 0 (code cell 1)"]
    assert by_lesson["02_chatty"].silent_cells == []
    assert by_lesson["02_chatty"].longest_silence_s < by_lesson["01_silent"].longest_silence_s
    md = out.markdown()
    assert "01_silent.ipynb cell 0" in md and "02_chatty.ipynb cell" not in md
    assert {r["lesson"]: r for r in out.rows()}["01_silent"]["longest_silence_s"] != ""


def test_a_lesson_whose_process_dies_at_exit_after_every_cell_ran_says_so_and_counts_as_run(tmp_path):
    """A native thread torn down at exit can abort the process after the last cell: the lesson's
    figures stand (status says what happened); a cell that fails is still a failure."""
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    dies = _lesson(lessons, "01_dies.ipynb", "import atexit, os, sys\n"
                   "atexit.register(lambda: (sys.stderr.write('terminate called without an active exception\\n'), "
                   "sys.stderr.flush(), os._exit(134)))")
    broken = _lesson(lessons, "02_broken.ipynb", "raise RuntimeError('a fake failure')")
    out = results.run_results([dies, broken], quick=True, echo=False)
    by_lesson = {x.lesson: x for x in out.lessons}
    assert by_lesson["01_dies"].status.startswith(results.PASSED_THEN_EXIT)
    assert "exit code 134" in by_lesson["01_dies"].status and "terminate called" in by_lesson["01_dies"].status
    assert results.passed(by_lesson["01_dies"].status) and not results.passed(by_lesson["02_broken"].status)
