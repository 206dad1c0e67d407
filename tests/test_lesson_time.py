"""The lessons' generated time line: reading from the learner copy's words, running time from the
recorded results (or "not yet measured"), exercises as a labelled estimate, stale records detected."""

import json
from pathlib import Path

import pytest

from greenlab.course import build, lesson_time, reading
from greenlab.course.notebook_format import SOLUTION_BEGIN, code, md, notebook

REPO = Path(__file__).resolve().parent.parent


def _lesson(tmp_path, exercises=2, words=300, marker=True):
    cells = [md("# 07 — Example\n\n" + ("**Time:** <!-- lesson-time -->\n\n" if marker else "")
                + " ".join(["word"] * words) + ".")]
    cells.append(code("import greenlab as gl"))
    for i in range(exercises):
        cells.append(code(f"def f{i}(x):\n    {SOLUTION_BEGIN}\n    return x\n    # LEARNER:\n"
                          "    # return None\n    # END SOLUTION"))
    path = tmp_path / "instructor" / "07_example.ipynb"
    notebook(cells, path)
    return path


def _times(path, seconds=150.0, sha=None):
    nb = json.loads(path.read_text())
    return {"cpu": "Test CPU 9000", "cpu_bf16": True, "cpu_capability": "", "mode": "CI quick mode",
            "lessons": {"07_example": {"seconds": seconds, "load_before": 1.0, "load_after": 2.0,
                                       "code_sha256": lesson_time.code_fingerprint(nb) if sha is None else sha}}}


def _filled(path, times):
    raw = json.loads(path.read_text())
    from greenlab.course.notebook_format import learner_notebook
    return lesson_time.with_lesson_time(learner_notebook(raw, "07_example"), raw, "07_example", times)


def _line(nb):
    text = next(t for t in ("".join(c["source"]) for c in nb["cells"]) if lesson_time.MARKER in t)
    start = text.index(lesson_time.MARKER) + len(lesson_time.MARKER)
    return text[start:text.index(lesson_time.END_MARKER)]


def test_marker_filled_with_reading_exercises_and_a_missing_running_time(tmp_path):
    nb = _filled(_lesson(tmp_path, exercises=3), {"lessons": {}})
    line = _line(nb)
    words = reading.notebook_reading(nb, "07_example").words
    # the stated count is what reading.py counts on the filled learner copy, the line included
    assert f"({words:,} words at {reading.WORDS_PER_MINUTE} words a minute)" in line
    assert words > 300
    assert lesson_time.NOT_MEASURED in line
    assert f"3 exercise cells × {lesson_time.EXERCISE_MINUTES} min, an estimate" in line


def test_a_recorded_time_names_cpu_bf16_mode_and_load(tmp_path):
    path = _lesson(tmp_path)
    line = _line(_filled(path, _times(path, seconds=150.0)))
    assert "2 min running in CI quick mode, measured on Test CPU 9000 (native bf16, load 1.0 to 2.0)" in line
    assert lesson_time.NOT_MEASURED not in line and "earlier version" not in line


def test_stale_record_is_detected_and_said(tmp_path):
    path = _lesson(tmp_path)
    times = _times(path, sha="0" * 64)
    assert "measured on an earlier version of this lesson's code" in _line(_filled(path, times))
    nb = json.loads(path.read_text())
    assert lesson_time.stale_lessons({"07_example": nb}, times) == ["07_example"]
    assert lesson_time.stale_lessons({"07_example": nb}, _times(path)) == []


def test_no_marker_leaves_the_notebook_alone(tmp_path):
    path = _lesson(tmp_path, marker=False)
    raw = json.loads(path.read_text())
    from greenlab.course.notebook_format import learner_notebook
    learner = learner_notebook(raw, "07_example")
    assert lesson_time.with_lesson_time(learner, raw, "07_example", {"lessons": {}}) == learner


def test_times_from_results_keeps_passed_lessons_and_the_machine(tmp_path):
    results = {"cpu": "CPU A", "cpu_bf16": False, "cpu_capability": "avx2", "mode": "quick",
               "lessons": [{"lesson": "00_a", "status": "passed", "seconds": 61.26, "load_before": 1.5,
                            "load_after": 1.7, "code_sha256": "ab"},
                           {"lesson": "01_b", "status": "failed: boom", "seconds": 3.0}]}
    out = tmp_path / "times.json"
    (tmp_path / "results.json").write_text(json.dumps(results))
    lesson_time.write_times(tmp_path / "results.json", out)
    times = json.loads(out.read_text())
    assert times["cpu"] == "CPU A" and times["cpu_bf16"] is False and times["mode"] == "quick"
    assert times["lessons"] == {"00_a": {"seconds": 61.3, "load_before": 1.5, "load_after": 1.7, "code_sha256": "ab"}}
    # a later run on the same machine adds lessons; one on another machine starts afresh
    results["lessons"] = [{"lesson": "01_b", "status": "passed", "seconds": 9.0, "code_sha256": "cd"}]
    assert set(lesson_time.times_from_results(results, times)["lessons"]) == {"00_a", "01_b"}
    assert set(lesson_time.times_from_results({**results, "cpu": "CPU B"}, times)["lessons"]) == {"01_b"}


def test_build_fills_the_learner_copy_and_check_sees_a_changed_record(tmp_path, monkeypatch):
    path = _lesson(tmp_path)
    monkeypatch.setattr(lesson_time, "TIMES_FILE", tmp_path / "none.json")
    build.build(tmp_path)
    learner = json.loads((tmp_path / "07_example.ipynb").read_text())
    assert lesson_time.NOT_MEASURED in _line(learner)
    words = reading.reading(tmp_path / "07_example.ipynb").words  # the file as written, badges included
    assert f"({words:,} words at" in _line(learner)
    assert lesson_time.MARKER_LINE in "".join(json.loads(path.read_text())["cells"][0]["source"])
    assert build.check(tmp_path) == []
    times_file = tmp_path / "times.json"
    times_file.write_text(json.dumps(_times(path)))
    monkeypatch.setattr(lesson_time, "TIMES_FILE", times_file)
    problems = build.check(tmp_path)
    assert problems and "07_example.ipynb: out of sync" in problems[0]


def test_every_recorded_time_matches_todays_lesson_code():
    """A committed running time belongs to today's code; re-measure (``results --lesson-times``) after
    changing a lesson's code cells."""
    times = lesson_time.load_times()
    if not times["lessons"]:
        pytest.skip("no running time recorded yet")
    nbs = {p.stem: json.loads(p.read_text()) for p in sorted((REPO / "lessons" / "instructor").glob("[0-9][0-9]_*.ipynb"))}
    assert set(times["lessons"]) <= set(nbs)
    # stale records are allowed (the line says so); the check is that they are found
    stale = lesson_time.stale_lessons(nbs, times)
    for stem in stale:
        learner = json.loads((REPO / "lessons" / f"{stem}.ipynb").read_text())
        text = "".join("".join(c["source"]) for c in learner["cells"] if c["cell_type"] == "markdown")
        if lesson_time.MARKER in text:
            assert "earlier version" in text


def test_check_names_lessons_whose_running_time_came_from_earlier_code(tmp_path, monkeypatch, capsys):
    path = _lesson(tmp_path)
    times_file = tmp_path / "times.json"
    times_file.write_text(json.dumps(_times(path, sha="0" * 64)))
    monkeypatch.setattr(lesson_time, "TIMES_FILE", times_file)
    build.build(tmp_path)
    assert build.main(["--lessons", str(tmp_path), "check"]) == 0
    assert "running time measured on earlier code in 1 lesson(s): 07_example" in capsys.readouterr().out
    times_file.write_text(json.dumps(_times(path)))
    build.build(tmp_path)
    assert build.main(["--lessons", str(tmp_path), "check"]) == 0
    assert "earlier code" not in capsys.readouterr().out
