"""Recorded GPU reference runs (greenlab.course.reference): loading, validation, honest "none yet"."""

import html
import json
import re
from pathlib import Path

import pytest

import greenlab as gl
from greenlab.course import reference
from gpu_suite_pending import NOT_RECORDED_YET

REPO = Path(__file__).resolve().parent.parent


def _run(**overrides):
    """A schema-valid run dict; the figures are test fixtures, not measurements."""
    data = {
        "schema_version": 1,
        "experiment": "mixed_precision",
        "date": "2026-05-01",
        "gpu": "NVIDIA H200",
        "driver": "drv-1",
        "cuda": "cu-1",
        "torch": "t-1",
        "command": "python bench.py",
        "energy_source": "nvml-counter",
        "units": {"joules": "J"},
        "results": [
            {"label": "fp32", "seconds": 10.0, "joules": 2500.0, "steps": 1200},
            {"label": "bf16", "seconds": 6.5, "joules": 1400.25, "converged": True, "note": None},
        ],
    }
    data.update(overrides)
    return data


def _write(folder, data, name=None):
    name = name or f"{reference.gpu_slug(data['gpu'])}_{data['date']}_{data['experiment']}.json"
    path = Path(folder) / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_gl_reference_is_the_module():
    assert gl.reference is reference


def test_no_runs_says_so_plainly(tmp_path, capsys):
    assert reference.load("mixed_precision", tmp_path) == []
    assert reference.load("mixed_precision", tmp_path / "does-not-exist") == []
    reference.show("mixed_precision", tmp_path)
    expected = "No recorded GPU run for 'mixed_precision' yet: these figures have not been measured on a GPU."
    assert capsys.readouterr().out.strip() == expected
    assert expected in html.unescape(reference.table("mixed_precision", tmp_path)._repr_html_())


def test_load_returns_runs_of_that_experiment_oldest_first(tmp_path):
    _write(tmp_path, _run(date="2026-06-02"))
    _write(tmp_path, _run(gpu="NVIDIA A100-SXM4-80GB"))
    _write(tmp_path, _run(experiment="pruning"))
    runs = reference.load("mixed_precision", tmp_path)
    assert [(r.gpu, r.date) for r in runs] == [("NVIDIA A100-SXM4-80GB", "2026-05-01"), ("NVIDIA H200", "2026-06-02")]
    assert runs[0].path.name == "nvidia-a100-sxm4-80gb_2026-05-01_mixed_precision.json"
    assert runs[0].results[1]["joules"] == 1400.25
    assert reference.experiments(tmp_path) == ["mixed_precision", "pruning"]


def test_environment_variable_points_at_the_folder(tmp_path, monkeypatch):
    _write(tmp_path, _run())
    monkeypatch.setenv(reference.ENV_VAR, str(tmp_path))
    assert len(reference.load("mixed_precision")) == 1
    assert reference.reference_dir() == tmp_path


def test_default_folder_follows_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(reference.ENV_VAR, raising=False)
    monkeypatch.delenv("GREENLAB_DATA_DIR", raising=False)
    assert reference.reference_dir() == REPO / "data" / "reference_runs"
    monkeypatch.setenv("GREENLAB_DATA_DIR", str(tmp_path))
    assert reference.reference_dir() == tmp_path / "reference_runs"


def test_show_labels_table_with_gpu_date_and_provenance(tmp_path, capsys):
    _write(tmp_path, _run())
    reference.show("mixed_precision", tmp_path)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Recorded GPU run: NVIDIA H200 (driver drv-1, CUDA cu-1, torch t-1), 2026-05-01"
    assert lines[1] == "Command: python bench.py"
    assert lines[2] == "Energy source: nvml-counter"
    assert re.split(r"\s{2,}", lines[3]) == ["label", "seconds", "joules [J]", "steps", "converged", "note"]
    assert re.split(r"\s{2,}", lines[5]) == ["fp32", "10", "2,500", "1,200", "-", "-"]
    assert re.split(r"\s{2,}", lines[6]) == ["bf16", "6.5", "1,400", "-", "yes", "-"]
    page = reference.table("mixed_precision", tmp_path)._repr_html_()
    assert "<th>joules [J]</th>" in page and "NVIDIA H200" in page and "2026-05-01" in page


def test_multi_gpu_heading(tmp_path):
    _write(tmp_path, _run(gpu_count=4))
    assert reference.load("mixed_precision", tmp_path)[0].heading.startswith("Recorded GPU run: 4 x NVIDIA H200")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"driver": None}, "field 'driver' must be a str"),
        ({"results": []}, "at least one row"),
        ({"results": [{"seconds": 1.0}]}, r"results\[0\] needs a non-empty string 'label'"),
        ({"results": [{"label": "a", "joules": [1, 2]}]}, r"results\[0\]\['joules'\] must be a number"),
        ({"schema_version": 2}, "schema_version 2 is not supported"),
        ({"energy_source": "guess"}, "energy_source must be one of"),
        ({"gpu_count": 0}, "gpu_count must be >= 1"),
        ({"gpu": "  "}, "field 'gpu' must not be empty"),
        ({"date": "2026-02-30"}, "real date"),
        ({"units": {"joules": 1}}, r"units\['joules'\] must be a string"),
        ({"gpu_name": "x"}, r"unknown field\(s\) \['gpu_name'\]"),
        ({"schema_version": True}, "must be a int"),
    ],
)
def test_malformed_fields_give_clear_errors(tmp_path, overrides, message):
    data = _run(**overrides)
    if overrides.get("driver", "") is None:
        del data["driver"]
        message = r"missing required field\(s\) \['driver'\]"
    _write(tmp_path, data, "nvidia-h200_2026-05-01_mixed_precision.json")
    with pytest.raises(reference.ReferenceRunError, match=message):
        reference.load("mixed_precision", tmp_path)


@pytest.mark.parametrize(
    "name, message",
    [
        ("nvidia-h100_2026-05-01_mixed_precision.json", "file name says GPU 'nvidia-h100'"),
        ("nvidia-h200_2026-05-02_mixed_precision.json", "file name says date 2026-05-02"),
    ],
)
def test_file_name_must_agree_with_content(tmp_path, name, message):
    _write(tmp_path, _run(), name)
    with pytest.raises(reference.ReferenceRunError, match=message):
        reference.load("mixed_precision", tmp_path)


def test_experiment_mismatch_and_bad_names_found_by_validate_folder(tmp_path):
    _write(tmp_path, _run(experiment="pruning"), "nvidia-h200_2026-05-01_mixed_precision.json")
    (tmp_path / "H200 run.json").write_text("{}")
    (tmp_path / "nvidia-h200_2026-05-01_broken.json").write_text("{not json")
    with pytest.raises(reference.ReferenceRunError) as info:
        reference.validate_folder(tmp_path)
    text = str(info.value)
    assert "H200 run.json: file name must be <gpu-slug>_<YYYY-MM-DD>_<experiment>.json" in text
    assert "broken.json: not valid JSON" in text
    assert "file name says experiment 'mixed_precision' but the file says 'pruning'" in text


def test_bad_experiment_argument_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="lower-case letters"):
        reference.load("Mixed Precision", tmp_path)


def test_round_trip_to_dict(tmp_path):
    data = _run()
    _write(tmp_path, data)
    assert reference.load("mixed_precision", tmp_path)[0].to_dict() == {**data, "gpu_count": 1}


def test_gpu_slug():
    assert reference.gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
    assert reference.gpu_slug("Tesla V100 (PCIe)") == "tesla-v100-pcie"


def test_readme_format_example_is_valid():
    readme = (REPO / "data" / "reference_runs" / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```json\n(.*?)```", readme, re.DOTALL).group(1)
    run = reference.from_dict(json.loads(example), "README example")
    assert all(v is None for row in run.results for k, v in row.items() if k != "label")


def test_recorded_runs_in_the_repository_are_valid():
    for run in reference.validate_folder(REPO / "data" / "reference_runs"):
        assert run.path is not None


# --- which experiments the lessons read, and that the GPU suite records each one ------------

def _nb(cells):
    return {"cells": [{"cell_type": t, "metadata": {}, "source": s} for t, s in cells],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_lesson_experiments_reads_show_load_and_table_calls_in_code_cells(tmp_path):
    inst = tmp_path / "instructor"
    inst.mkdir()
    (inst / "00_a.ipynb").write_text(json.dumps(_nb([
        ("markdown", 'gl.reference.show("in_markdown_only")'),
        ("code", ['gl.reference.show("first")\n', "runs = gl.reference.load('second')\n"]),
        ("code", 'gl.reference.table( "first" )\nreference.show("third-x")'),
    ])), encoding="utf-8")
    (inst / "01_b.ipynb").write_text(json.dumps(_nb([("code", "print(1)")])), encoding="utf-8")
    assert reference.lesson_experiments(tmp_path) == {"00_a": ["first", "second", "third-x"], "01_b": []}


def test_every_lesson_reads_a_run_the_gpu_suite_records_under_the_same_name():
    import sys

    sys.path.insert(0, str(REPO))
    from benchmarks import gpu_suite

    read = reference.lesson_experiments(REPO / "lessons")
    numbers = [stem[:2] for stem in read]
    assert numbers[:12] == [f"{i:02d}" for i in range(12)] and len(set(numbers)) == len(numbers), numbers
    assert all(read.values()), read  # every lesson reads at least one recorded run
    suite = gpu_suite.experiment_names()
    missing = {lesson: [n for n in names if n not in suite and n not in NOT_RECORDED_YET]
               for lesson, names in read.items()}
    assert not any(missing.values()), f"the GPU suite records none of {missing}"
    read_anywhere = {n for names in read.values() for n in names}
    for name in NOT_RECORDED_YET:  # a pending name is read by a lesson and not recorded yet
        assert name in read_anywhere, f"no lesson reads {name}: remove it from NOT_RECORDED_YET"
        assert name not in suite, f"the GPU suite records {name} now: remove it from NOT_RECORDED_YET"
    assert set(suite) == read_anywhere - set(NOT_RECORDED_YET), \
        f"suite experiments no lesson reads: {set(suite) - read_anywhere}"
    lesson_of = {**NOT_RECORDED_YET, **{n: gpu_suite.EXPERIMENTS[n][0] for n in suite}}
    for lesson, names in read.items():  # the suite names the lesson each experiment is for
        assert all(lesson_of[n] == lesson[:2] for n in names), (lesson, names)


def test_recorded_reads_the_newest_figure_or_says_none(tmp_path):
    assert reference.recorded("mixed_precision", "fp32", "joules", tmp_path) is None
    _write(tmp_path, _run())
    _write(tmp_path, _run(date="2026-06-01", results=[{"label": "fp32", "joules": 2000.0},
                                                        {"label": "bf16", "joules": None}]))
    value, run = reference.recorded("mixed_precision", "fp32", "joules", tmp_path)
    assert value == 2000.0 and run.date == "2026-06-01"
    value, run = reference.recorded("mixed_precision", "bf16", "joules", tmp_path)  # None is no figure
    assert value == 1400.25 and run.date == "2026-05-01"
    assert reference.recorded("mixed_precision", "fp32", "no such column", tmp_path) is None
