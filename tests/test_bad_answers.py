"""What the fuzzer found once it covered the checkers, the vendor energy sources, the course tools
and the rest of gl.*: each bad input here was accepted (a check passed, a window was complete, a
command exited 0) or crashed with an unrelated traceback, and is now refused naming the problem."""

import json
import math
import time

import pytest
import torch

import greenlab as gl
from greenlab.base import limits
from greenlab.course import build, class_grading, guide, nbgrader
from greenlab.course.checks import core
from greenlab.energy import measure, rapl, sources
from greenlab.techniques import cluster, preemption, roofline, storage

from fakes import FakeGpu, FakePynvml

pytestmark = pytest.mark.filterwarnings("ignore::greenlab.energy.ShortWindowWarning")  # windows of a few reads


class EqualsAnything:
    """An answer whose == says True to whatever it is compared with."""

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class BadMessage(Exception):
    def __str__(self):
        raise RuntimeError("no printable message")


def bad_message(*args, **kwargs):
    raise BadMessage()


# --- the checkers -----------------------------------------------------------------------------


def test_an_answer_that_equals_anything_does_not_pass():
    verdict = gl.check.schedule_jobs(lambda values, jobs: EqualsAnything())
    assert verdict.status == core.FAILED, verdict.text()


@pytest.mark.parametrize("checker", [gl.check.amp_step, gl.check.break_even, gl.check.integrate_power])
def test_an_exception_whose_message_breaks_fails_the_check_instead_of_crashing(checker):
    verdict = checker(bad_message)
    assert verdict.status == core.FAILED and "BadMessage" in verdict.text(), verdict.text()


def test_a_loader_whose_exception_breaks_does_not_pass():
    verdict = gl.check.prefetch_loader(bad_message)
    assert verdict.status == core.FAILED, verdict.text()


def test_a_fake_quantizer_that_writes_nan_into_its_input_does_not_pass():
    def damaging(weight, bits):
        weight.data.fill_(math.nan)
        return weight

    verdict = gl.check.fake_quantize(damaging)
    assert verdict.status == core.FAILED and "NaN" in verdict.text(), verdict.text()


class FakeComponent:
    source, estimated = "rapl", False


def window(**kw):
    import types

    fields = dict(joules=5.0, seconds=2.0, components={"cpu": FakeComponent()}, warnings=[], problems=[])
    return types.SimpleNamespace(**{**fields, **kw})


@pytest.mark.parametrize("seconds", [math.nan, "2", math.inf])
def test_a_window_of_nan_or_text_seconds_does_not_pass(seconds):
    verdict = gl.check.energy_window(window(seconds=seconds))
    assert verdict.status == core.FAILED, verdict.text()


class FakeRun:
    def __init__(self, **kw):
        self.joules, self.joules_to_target, self.seconds_to_target = 5.0, 4.0, 2.0
        self.best_accuracy, self.status, self.estimated = 0.9, "reached target", False
        self.__dict__.update(kw)


@pytest.mark.parametrize("joules_to_target", [math.nan, -1.0, math.inf])
def test_a_capstone_run_with_an_impossible_energy_does_not_pass(tmp_path, joules_to_target):
    board = gl.Leaderboard(tmp_path / "board.json")
    board.add("mine", joules=5.0, seconds=2.0, accuracy=0.9, co2e_g=0.1)
    config = gl.TrainConfig(target_accuracy=0.8, stop_at_target=True)
    assert gl.check.capstone_submission(config, FakeRun(), board, 0.8).passed  # the same run, possible figures
    verdict = gl.check.capstone_submission(config, FakeRun(joules_to_target=joules_to_target), board, 0.8)
    assert verdict.status == core.FAILED and "joules_to_target" in verdict.text(), verdict.text()


@pytest.mark.parametrize("name, value", [("rtol", True), ("rtol", math.inf), ("atol", math.nan), ("atol", "0")])
def test_a_tolerance_that_would_pass_anything_is_refused_by_name(name, value):
    with pytest.raises(ValueError, match=f"^{name} must be a finite number"):
        gl.check.check_close("x", 1e9, 1.0, **{name: value})


@pytest.mark.parametrize("seed", ["x", 1.5, -1, [1]])
def test_a_bad_seed_is_refused_by_name(seed):
    with pytest.raises(ValueError, match="^seed must be an integer >= 0"):
        gl.check.co2e_grams(lambda joules, region: math.nan, seed=seed)


# --- the vendor energy sources ------------------------------------------------------------------

RANGE = 262_143_328_850


def rapl_window(tmp_path, reading):
    domain = tmp_path / "intel-rapl:0"
    domain.mkdir(parents=True)
    (domain / "name").write_text("package-0\n")
    (domain / "max_energy_range_uj").write_text(f"{RANGE}\n")
    (domain / "energy_uj").write_text("1000\n")
    source = rapl.probe_rapl(tmp_path).sources()[0]
    with measure("rapl", sources=[source], sync=False) as w:
        (domain / "energy_uj").write_text(f"{reading}\n")
    return w.result


@pytest.mark.parametrize("reading", [500, "-5", RANGE + 1, 10 ** 12])
def test_rapl_readings_no_cpu_could_give_leave_the_window_incomplete(tmp_path, reading):
    # 500: a "wrap" a millisecond after the first read (262 kJ); -5 and past the range: no counter
    # reads so; 10**12 µJ: 1 MJ in a millisecond
    plausible = rapl_window(tmp_path / "plausible", 2000)
    assert plausible.complete and plausible.joules == pytest.approx(0.001)  # a rise of 1 mJ still counts
    result = rapl_window(tmp_path / "bad", reading)
    assert not result.complete and result.problems, (reading, result.joules)


@pytest.mark.parametrize("max_range", ["0", "-1", "999"])
def test_a_rapl_range_that_cannot_hold_the_counter_is_unusable(tmp_path, max_range):
    domain = tmp_path / "intel-rapl:0"
    domain.mkdir()
    (domain / "name").write_text("package-0\n")
    (domain / "max_energy_range_uj").write_text(f"{max_range}\n")
    (domain / "energy_uj").write_text("1000\n")
    assert rapl.probe_rapl(tmp_path).status == "unusable"


@pytest.mark.parametrize("field", ["power_mw", "instant_mw"])
def test_an_nvml_power_reading_of_true_is_no_milliwatt(field):
    state = {"now": 100_000}
    kw = {"energy_mj": None, "power_mw": 100_000, field: lambda: state["now"]}
    found = sources.discover(nvml_module=FakePynvml([FakeGpu("GPU-x", **kw)]), rapl_root="/nonexistent",
                             environ={}, gpus="all")
    source = next(s for s in found.sources if s.name == "nvml-power")
    with measure("nvml", sources=[source], sync=False) as w:
        state["now"] = True
        try:
            source.poll()
        except ValueError:
            pass
    assert not w.result.complete


# --- gl.* functions the enumerated pass could not call before ----------------------------------


def test_format_bytes_refuses_a_negative_size_and_bad_figures():
    with pytest.raises(ValueError, match="^nbytes"):
        gl.format_bytes(-0.3)
    with pytest.raises(ValueError, match="^figures"):
        gl.format_bytes(10, figures=0)
    with pytest.raises(ValueError, match="^unit"):
        gl.format_bytes(10, unit=["MiB"])


def test_plain_number_writes_the_largest_float_instead_of_overflowing():
    # an AMD power reading of 1.8e308 W crashed the message that was to call it impossible
    assert gl.plain_number(1.7976931348623157e308) == "1.8e+308"


def test_headline_refuses_a_lesson_that_is_not_one():
    with pytest.raises(ValueError, match="^lesson must be one of the course's lesson numbers"):
        gl.headline("", "a", "energy", None)
    with pytest.raises(ValueError, match="^lesson"):
        gl.headline("99", "a", "energy", None)


@pytest.mark.parametrize("kw, name", [({"show_answers": "no"}, "show_answers"), ({"shuffle": 1}, "shuffle"),
                                      ({"seed": 0.5}, "seed"), ({"title": 3}, "title")])
def test_quiz_refuses_its_options_by_name(kw, name, capsys):
    with pytest.raises((ValueError, TypeError), match=f"^{name}"):
        gl.quiz("00", display="text", **kw)
    assert "Answer" not in capsys.readouterr().out  # nothing printed, the key least of all


def test_compare_refuses_a_save_flag_that_is_no_flag():
    from fakes import SlopeSource
    from greenlab.training import data, models

    x, y = torch.randn(24, 1, 4, 4), torch.arange(24) % 3
    ds = data.Dataset("tiny", x, y, x[:8].clone(), y[:8].clone(), num_classes=3, source="generated")
    with pytest.raises(ValueError, match="^save"):
        gl.compare({"a": gl.TrainConfig(batch_size=8, max_steps=1)},
                   lambda: models.build("mlp", input_shape=(1, 4, 4), hidden=(8,), num_classes=3), ds,
                   repeats=1, warmup=0, sources=[SlopeSource()], save=math.nan, show_progress=False)


# --- measurement helpers: one measurement within MEASURE_LIMIT_S -------------------------------


def test_a_checkpoint_window_longer_than_one_measurement_may_take_is_refused(tmp_path):
    net = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="^min_seconds .*20 s"):
        preemption.checkpoint_write_cost(net, torch.optim.SGD(net.parameters(), lr=0.1), tmp_path,
                                         min_seconds=limits.MEASURE_LIMIT_S + 1)


def test_checkpoint_writes_beyond_one_measurement_are_refused_after_the_first(tmp_path, monkeypatch):
    real = preemption.save_checkpoint

    def slow(*args, **kwargs):  # a disk that takes 50 ms a write
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(preemption, "save_checkpoint", slow)
    net = torch.nn.Linear(2, 2)
    started = time.perf_counter()
    with pytest.raises(ValueError, match="^writes=1000 checkpoint writes.*one measurement may take"):
        preemption.checkpoint_write_cost(net, torch.optim.SGD(net.parameters(), lr=0.1), tmp_path, writes=1000,
                                         min_seconds=0)
    assert time.perf_counter() - started < limits.MEASURE_LIMIT_S  # refused after its first write


def test_roofline_windows_beyond_one_measurement_are_refused():
    with pytest.raises(ValueError, match="^min_seconds"):
        roofline.seconds_per_call(lambda: None, "cpu", min_seconds=math.inf)
    with pytest.raises(ValueError, match="^rounds=2 windows of min_seconds=15"):
        roofline.seconds_per_call(lambda: None, "cpu", min_seconds=15, rounds=2)


def test_compare_reads_refuses_a_window_beyond_one_measurement(tmp_path):
    x, y = torch.randn(4, 1, 2, 2), torch.arange(4)
    with pytest.raises(ValueError, match="^min_window_s"):
        storage.compare_reads(x, y, tmp_path, min_window_s=limits.MEASURE_LIMIT_S + 1)


def test_a_trace_longer_than_the_simulator_replays_is_refused():
    with pytest.raises(ValueError, match="^n_jobs must be at most 5,000 jobs"):
        cluster.synthetic_trace(n_jobs=cluster.MAX_JOBS + 1)
    trace = cluster.synthetic_trace(n_jobs=10, n_gpus=4)
    with pytest.raises(ValueError, match="^jobs must be at most"):
        cluster.simulate(trace * (cluster.MAX_JOBS // 10 + 1), 4)


# --- the course tools: refused before any work, naming the option ------------------------------


def test_run_refuses_a_silence_limit_that_is_no_time(tmp_path, capsys):
    tiny = tmp_path / "tiny.ipynb"
    tiny.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    for value in ("nan", "-1", "1e12"):
        assert build.main(["run", str(tiny), f"--max-silence-s={value}"]) == 2
        assert "--max-silence-s" in capsys.readouterr().err


def test_new_refuses_a_lesson_number_of_three_digits(tmp_path):
    with pytest.raises(ValueError, match="lesson number"):
        build.new_lesson("007", "a_lesson", "A lesson", tmp_path)


def test_guide_refuses_a_path_it_cannot_write_before_writing(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    for out in (str(tmp_path / "file" / "guide.md"), str(tmp_path), ""):
        assert guide.main(["--out", out]) == 2
        assert "--out" in capsys.readouterr().err


@pytest.mark.parametrize("args, option", [(["--only", ""], "only"), (["--quiz-points", "10000000"], "quiz_points")])
def test_nbgrader_export_refuses_what_it_took_silently(tmp_path, args, option, capsys):
    assert nbgrader.main(["--out", str(tmp_path / "course"), *args]) == 2
    assert option in capsys.readouterr().err


def test_nbgrader_export_to_a_file_is_refused_naming_out(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert nbgrader.main(["--out", str(tmp_path / "file"), "--only", "00"]) == 2
    assert "--out" in capsys.readouterr().err


@pytest.mark.parametrize("extra, word", [(["lesson00", "--student", "nobody"], "nobody"), ([""], "assignment"),
                                         (["lesson00", "--jobs", str(10 ** 9)], "jobs")])
def test_grade_refuses_before_starting_nbgrader(tmp_path, extra, word, capsys):
    (tmp_path / "submitted" / "alice" / "lesson00").mkdir(parents=True)
    started = time.perf_counter()
    assert class_grading.main([str(tmp_path), *extra]) == 2
    assert word in capsys.readouterr().err
    assert time.perf_counter() - started < 5  # no autograde process was started


def test_results_refuses_its_out_folder_before_running_a_lesson(tmp_path, capsys):
    from greenlab.course import results

    (tmp_path / "file").write_text("x")
    assert results.main(["--out", str(tmp_path / "file"), str(tmp_path / "missing.ipynb")]) == 2
    assert "--out" in capsys.readouterr().err
    assert results.main(["--out", str(tmp_path / "out"), str(tmp_path / "missing.ipynb")]) == 2
    assert "no notebook at" in capsys.readouterr().err
