"""Impossible sizes and empty names are refused before any work starts, each kind by one shared
check in ``greenlab.base.validation`` whose error names the argument, the value and the bound, and
says why the bound is there: counts done one after another (steps, evaluations, repeats) by the
time a run may take, counts held at once (a batch's samples, prefetched batches) by this
machine's memory, processes started at once by the system's process limit, seconds by the time
a run may take. Then the empty strings and wrong objects that were taken for a default."""

import math

import pytest
import torch

import greenlab as gl
from greenlab.base import limits
from greenlab.cli.app import main as cli_main
from greenlab.course.leaderboard import Leaderboard
from greenlab.experiments import compare
from greenlab.techniques.ddp import launch
from greenlab.training import data as gl_data, datacache

HUGE = 10 ** 12


# --- counts done one after another: bounded by the time a run may take ---------------------------

@pytest.mark.parametrize("name", ["max_steps", "accum_steps", "eval_every", "patience", "lr_step_size",
                                  "warmup_steps"])
def test_a_step_count_no_run_could_reach_is_refused_with_the_time_it_would_take(name):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in \[\d, 604_800_000_000\].*days") as err:
        gl.TrainConfig(**{name: HUGE})
    assert "1_000_000_000_000" in str(err.value) and "a run may take" in str(err.value)


def test_the_step_bound_is_the_run_limit_at_the_floor_and_holds_exactly():
    high = limits.max_steps()
    assert high == int(limits.RUN_LIMIT_S / limits.STEP_FLOOR_S)
    assert gl.TrainConfig(max_steps=high).max_steps == high  # the bound itself is accepted
    with pytest.raises(ValueError, match="max_steps"):
        gl.TrainConfig(max_steps=high + 1)


@pytest.mark.parametrize("kw, name", [({"repeats": HUGE}, "repeats"), ({"warmup": HUGE}, "warmup")])
def test_compare_refuses_rounds_no_run_could_finish(kw, name):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer.*days"):
        compare({"a": gl.TrainConfig()}, lambda: torch.nn.Linear(2, 2), None, **kw)


def test_a_data_parallel_config_refuses_impossible_steps_and_batches():
    with pytest.raises(ValueError, match="^max_steps .*days"):
        launch.make_config(1, per_worker_batch=8, max_steps=HUGE)
    with pytest.raises(ValueError, match="^accum_steps .*days"):
        launch.make_config(1, per_worker_batch=8, accum_steps=HUGE)
    with pytest.raises(ValueError, match="^per_worker_batch .*memory"):
        launch.make_config(1, per_worker_batch=HUGE)
    with pytest.raises(ValueError, match="^global_batch .*memory"):
        launch.make_config(1, global_batch=HUGE)


# --- counts held at once: bounded by this machine's memory ---------------------------------------

@pytest.mark.parametrize("name", ["batch_size", "eval_batch_size", "prefetch_factor"])
def test_a_batch_larger_than_memory_could_hold_is_refused_with_the_memory_it_needs(name):
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in \[1, [\d_]+\].*GiB.*memory") as err:
        gl.TrainConfig(**{name: HUGE})
    assert "1_000_000_000_000" in str(err.value)


def test_the_memory_bound_is_this_machines_memory_at_the_floor_per_sample(monkeypatch):
    monkeypatch.setattr(limits, "memory_bytes", lambda available=False: 4096)  # a machine of 4 KiB
    assert gl.TrainConfig(batch_size=1024).batch_size == 1024  # 4 bytes each: exactly 4 KiB
    with pytest.raises(ValueError, match=r"batch_size must be an integer in \[1, 1024\].*4 KiB"):
        gl.TrainConfig(batch_size=1025)
    for schedule in ([(0, 8), (1, 2048)], lambda epoch: 2048):  # a batch schedule's sizes too
        with pytest.raises(ValueError, match="batch_schedule.*memory"):
            gl.TrainConfig(batch_size=8, batch_schedule=schedule).batch_size_at(1)
    monkeypatch.setattr(limits, "memory_bytes", lambda available=False: None)  # unknown: no bound to say
    assert gl.TrainConfig(batch_size=HUGE).batch_size == HUGE


def test_memory_bytes_reads_this_machine():
    total = limits.memory_bytes()
    assert total is None or 2 ** 26 < total < 2 ** 60


def test_flops_refuses_a_batch_of_inputs_that_cannot_fit_and_a_bad_device():
    model = torch.nn.Linear(4, 2)
    with pytest.raises(ValueError, match="^batch_size .*memory"):  # was a RuntimeError from the allocator
        gl.flops(model, (4,), batch_size=HUGE)
    for bad in (-1, "", "gpu"):  # were RuntimeErrors from torch that named no argument
        with pytest.raises(ValueError, match="^device"):
            gl.flops(model, (4,), device=bad)
    assert gl.flops(model, (4,), batch_size=3, device="cpu").forward > 0


# --- processes started at once: bounded by the system's process limit -----------------------------

def test_more_workers_than_the_system_can_run_are_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"^--workers must be an integer in \[1, [\d_]+\] \(processes"):
        launch.parse_worker_counts(str(HUGE))
    with pytest.raises(ValueError, match="^nprocs "):
        launch.make_config(HUGE, per_worker_batch=8)
    monkeypatch.setattr(limits, "max_processes", lambda: 4)
    assert launch.parse_worker_counts("1,4") == [1, 4]
    with pytest.raises(ValueError, match="limit is 4"):
        launch.parse_worker_counts("5")


def test_max_processes_reads_the_system_limit():
    assert 1 < limits.max_processes() <= limits.PID_MAX_LIMIT


# --- seconds: bounded by the time a run may take ---------------------------------------------------

def test_an_idle_reading_over_longer_than_a_run_may_take_is_refused():
    with pytest.raises(ValueError, match=r"^seconds must be a number of seconds in \[0, 604800\]"):
        gl.IdlePower({"cpu": 1.0}, seconds=HUGE)
    assert gl.IdlePower({"cpu": 1.0}, seconds=limits.RUN_LIMIT_S).seconds == limits.RUN_LIMIT_S


# --- the command line: each refused by its option's name, before any data is read ----------------

@pytest.mark.parametrize("option", ["--max-steps", "--batch-size", "--accum", "--repeats", "--warmup", "--workers"])
def test_greenlab_run_refuses_impossible_counts_before_reading_data(option, monkeypatch, capsys):
    def no_data(*args, **kwargs):
        raise AssertionError("the dataset was read before the options were checked")

    monkeypatch.setattr(gl_data, "load", no_data)
    assert cli_main(["run", "--dataset", "synthetic", f"{option}={HUGE}"]) == 2
    said = capsys.readouterr().err
    assert f"error: {option} must be an integer" in said and "1_000_000_000_000" in said, said


def test_greenlab_data_fetch_checks_its_options_before_its_names(capsys):
    assert cli_main(["data", "fetch", "--timeout=nan"]) == 2
    assert "timeout" in capsys.readouterr().err
    assert cli_main(["data", "fetch", "--dir="]) == 2
    assert "--dir must be a folder path" in capsys.readouterr().err


def test_greenlab_data_status_says_when_its_folder_is_not_there_yet(tmp_path, capsys):
    assert cli_main(["data", "status", f"--dir={tmp_path / 'nan'}"]) == 0
    assert "no such folder yet" in capsys.readouterr().out


def test_greenlab_leaderboard_show_refuses_an_empty_folder_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["leaderboard", "show", "--dir="]) == 2
    assert "--dir must be" in capsys.readouterr().err


# --- empty names and wrong objects that were taken for a default ----------------------------------

@pytest.mark.parametrize("call, name", [
    (lambda: gl.measure(""), "label"),  # names the window in every report
    (lambda: Leaderboard(""), "path"),  # was the working folder: a board per notebook folder
    (lambda: datacache.cache_root(""), "root"),
    (lambda: gl.budget(full="", quick=1), "full"),
    (lambda: gl.budget(full=[], quick=1), "full"),
    (lambda: gl.TrainConfig(batch_schedule=""), "batch_schedule"),
    (lambda: gl.doctor(nvml_module=object()), "nvml_module"),  # was read as "no GPU here"
    (lambda: gl.doctor(nvml_module=math.nan), "nvml_module"),
])
def test_an_empty_name_or_a_wrong_object_is_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_the_legitimate_values_still_work():
    assert gl.TrainConfig(seed=HUGE, grad_clip=1e12, eval_every_samples=HUGE).seed == HUGE
    assert gl.budget(full=[1, 2], quick="quick") in ([1, 2], "quick")
    assert gl.format_energy(-3.0).startswith("-3")


# --- the fuzzer's enumerated pass: nothing silent, and every value it calls legitimate is accepted ---

def test_every_gl_entry_point_and_subcommand_answers_the_standard_bad_values(tmp_path, monkeypatch):
    import importlib.util
    import sys
    from pathlib import Path

    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_inputs.py"
    spec = importlib.util.spec_from_file_location("fuzz_inputs", path)
    fuzz = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fuzz_inputs", fuzz)  # dataclasses look their module up there
    spec.loader.exec_module(fuzz)
    record, _ = fuzz.fuzz_every(tmp_path)
    cli_record, _ = fuzz.fuzz_cli()
    record.update(cli_record)
    totals, text = fuzz.summary(record, limit=400)
    assert totals["clear"] + totals["legitimate"] == sum(totals.values()), text
    marked = {(name, arg, label) for name, rows in record.items() for arg, label, outcome, _ in rows
              if outcome == "legitimate"}
    assert marked == set(fuzz.LEGITIMATE), set(fuzz.LEGITIMATE) - marked  # none refused since: none stale


# --- found by the hand-made fuzzer at 80 inputs per entry point --------------------------------------

@pytest.mark.parametrize("kwargs, match", [({"lr": True}, "^lr must be a number"),  # was taken for 1.0
                                           ({"workers": HUGE}, "^workers .*processes"),
                                           ({"max_updates": HUGE}, "^max_updates .*days"),
                                           ({"batch_size": HUGE}, "^batch_size .*memory")])
def test_hogwild_refuses_impossible_arguments_before_starting_workers(kwargs, match):
    from greenlab.techniques import hogwild

    with pytest.raises(ValueError, match=match):
        hogwild.run(None, "sync", **kwargs)


def test_checkpoint_write_cost_refuses_writes_and_seconds_no_run_could_finish(tmp_path):
    from greenlab.techniques import preemption

    net = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="^writes .*days"):  # ran on until stopped
        preemption.checkpoint_write_cost(net, opt, tmp_path, writes=HUGE, min_seconds=0)
    with pytest.raises(ValueError, match="^min_seconds .*one measurement may take"):
        preemption.checkpoint_write_cost(net, opt, tmp_path, writes=1, min_seconds=1e12)
    assert list(tmp_path.iterdir()) == []


def test_an_inference_that_cost_nothing_before_compression_is_refused():
    from greenlab.techniques import compress

    with pytest.raises(ValueError, match="joules_per_inference_before must be > 0"):
        compress.break_even_inferences(10.0, 0.0, 1.0)
    assert compress.break_even_inferences(10.0, 0.3, 0.4) == math.inf  # no saving: never pays back


def test_a_model_passed_where_its_factory_goes_is_refused_naming_model_fn():
    from greenlab.techniques import lm

    model = torch.nn.Linear(2, 2)
    corpus = lm.load_corpus(max_bytes=2_000)
    cfg = lm.LMConfig(seq_len=8, batch_size=2, steps=1, eval_every=1, eval_batches=1)
    with pytest.raises(ValueError, match="^model_fn .*not a model itself"):
        lm.compare_lm({"a": cfg}, model, corpus)
    with pytest.raises(ValueError, match="^model_fn .*not a model itself"):
        compare({"a": gl.TrainConfig()}, model, None)


def test_measure_compile_names_a_model_that_is_not_a_language_model():
    from greenlab.techniques import lm
    from greenlab.techniques.lm import compiling

    corpus = lm.load_corpus(max_bytes=2_000)
    cfg = lm.LMConfig(seq_len=8, batch_size=2, steps=1, eval_every=1, eval_batches=1)
    with pytest.raises(ValueError, match="^model must be a language model"):  # was a RuntimeError deep in torch
        compiling.measure_compile(torch.nn.Linear(2, 2), corpus, cfg, steps=1, repeats=1, device="cpu")


def test_checkpoint_writes_too_many_to_finish_at_the_measured_pace_are_refused_after_the_first(tmp_path):
    from greenlab.techniques import preemption

    net = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    # under the step floor's bound, but a real write takes far longer than a microsecond
    with pytest.raises(ValueError, match=r"^writes=100_000_000_000 checkpoint writes, at the .* ms the first one "
                                         r"took, would take .* days"):
        preemption.checkpoint_write_cost(net, opt, tmp_path, writes=10 ** 11, min_seconds=0)
    assert list(tmp_path.iterdir()) == []  # its temporary folder went with it


def test_a_synthetic_trace_of_more_jobs_than_a_run_could_draw_is_refused():
    from greenlab.techniques import cluster

    with pytest.raises(ValueError, match="^n_jobs .*days"):  # drew jobs until stopped
        cluster.synthetic_trace(n_jobs=1_647_980_563_506_668, n_gpus=4)


def test_generated_images_that_do_not_fit_in_the_memory_free_now_are_refused(monkeypatch):
    free = gl_data.GENERATE_PEAK_COPIES * 4 * 3 * 8 * 8 * 100  # room for 100 images of 3 x 8 x 8
    monkeypatch.setattr(limits, "memory_bytes", lambda available=False: free if available else 10 * free)
    assert len(gl_data.generate(n_train=100, n_test=10, shape=(3, 8, 8)).train_y) == 100
    with pytest.raises(ValueError, match=r"^n_test must be an integer in \[1, 100\].*memory free now"):
        gl_data.generate(n_train=100, n_test=101, shape=(3, 8, 8))  # was allocated until the kernel killed it
