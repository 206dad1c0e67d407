"""What a verdict refuses: windows too short to read (a sum of windows over workers included), arms
measured cold, "as good" without a margin, energy to a target a run never reached, accuracy compared
against a baseline at chance, and a lesson's sentence that names a moved table or a drifted constant.
Each test plants the fault and sees it refused."""

import json
import warnings

import pytest

from fakes import SlopeSource
from greenlab import experiments
from greenlab.course import claims
from greenlab.course.claims_equivalence import equivalence_word, notebook_equivalence_problems
from greenlab.energy import measure
from greenlab.energy.measure import Measurement, ShortWindowWarning
from greenlab.experiments import (NOT_MEASURABLE, TargetNotReached, above_chance, accuracy_verdict,
                                  equivalence, measure_arms, paired, short_flags, target_ratio, to_target,
                                  train_each, warm_up, window_short)
from greenlab.training import data, models
from greenlab.training.loop import TrainConfig


@pytest.fixture(autouse=True)
def results_in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("GREENLAB_RESULTS_DIR", str(tmp_path / "results"))


class SlowCounter(SlopeSource):
    """A meter whose counter updates once a second: every quick window is short for it."""

    update_period_s = 1.0


def short_measurement(label="w"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortWindowWarning)
        with measure(label, sources=[SlowCounter()]) as window:
            pass
    return window.result


# --- 1. a verdict refuses what its windows cannot carry ---------------------------------------------

def test_a_short_window_is_recorded_on_its_measurement_and_survives_a_round_trip():
    with pytest.warns(ShortWindowWarning):
        with measure("tiny", sources=[SlowCounter()]) as window:
            pass
    m = window.result
    assert m.short and m.reliable_from_s == pytest.approx(10.0)
    assert Measurement.from_dict(m.to_dict()).short
    with measure("long enough", sources=[SlopeSource()]) as window:  # update period 0: never short
        pass
    assert not window.result.short


def test_paired_on_short_windows_says_not_measurable_instead_of_a_figure():
    runs_a = [short_measurement() for _ in range(3)]
    runs_b = [short_measurement() for _ in range(3)]
    p = paired([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "joules", "a", "b", short=short_flags(runs_a, runs_b, "joules"))
    assert not p.measurable and p.detectable is None and p.short_windows == 3
    assert NOT_MEASURABLE in p.sentence() and "%" not in p.sentence()
    assert p.plain() == NOT_MEASURABLE and p.short() == NOT_MEASURABLE
    # the same figures without the fault give a figure, and time is never refused
    assert paired([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "joules").detectable
    assert paired([1.0, 1.1, 1.2], [2.0, 2.1, 2.2], "seconds",
                  short=short_flags(runs_a, runs_b, "seconds")).measurable


def test_energy_to_target_is_short_when_the_span_to_the_target_is():
    class Run:
        energy = Measurement("run", 20.0, {}, reliable_from_s=1.0)
        seconds_to_target = 0.5

    assert not window_short(Run(), "joules") and window_short(Run(), "joules_to_target")


def test_a_comparison_of_short_runs_prints_no_energy_figure():
    ds = data.load("synthetic", n_train=120, n_test=60, verbose=False)
    variants = {"a": TrainConfig(batch_size=60, epochs=1), "b": TrainConfig(batch_size=40, epochs=1)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortWindowWarning)
        cmp = experiments.compare(variants, lambda: models.build("mlp", input_shape=(1, 28, 28), hidden=(8,)),
                                  ds, repeats=3, sources=[SlowCounter()], show_progress=False)
    assert not cmp.paired("b").measurable
    assert NOT_MEASURABLE in cmp.verdict("b")
    summary = cmp.stakeholder_summary()
    assert NOT_MEASURABLE in summary and " J, a " not in summary and "lower" not in summary
    table = str(cmp)
    assert NOT_MEASURABLE in table and "too short*" in table


# --- 2. every arm warms up ------------------------------------------------------------------------

def test_an_expensive_first_call_does_not_make_the_first_arm_look_costlier():
    calls = []

    def arm(name):
        def run(_repeat=0):
            first = not calls
            calls.append(name)
            return 100.0 if first else 1.0  # the process's one-off cost lands on whoever runs first
        return run

    out = measure_arms({"small": arm("small"), "large": arm("large")}, repeats=3)
    assert out == {"small": [1.0, 1.0, 1.0], "large": [1.0, 1.0, 1.0]}
    assert calls[:2] == ["small", "large"]  # both warmed before either was measured
    with pytest.raises(ValueError):
        warm_up({"a": lambda: None}, rounds=0)


def test_train_each_and_compare_warm_every_arm_first(monkeypatch):
    ds = data.load("synthetic", n_train=120, n_test=60, verbose=False)
    seen = []

    def fake_train(model, data_, cfg, **kwargs):
        seen.append((cfg.label, cfg.max_steps))
        return cfg.label

    out = train_each({"small": lambda: models.build("mlp", input_shape=(1, 28, 28), hidden=(4,)),
                      "large": lambda: models.build("mlp", input_shape=(1, 28, 28), hidden=(32,))},
                     ds, TrainConfig(epochs=1), train_fn=fake_train)
    assert out == {"small": "small", "large": "large"}
    warmups = [s for s in seen if s[1] == experiments.WARMUP_STEPS]
    assert len(warmups) == 2 and seen.index(warmups[1]) < seen.index(("small", None))
    # compare with warmup=0 still runs a short warm-up of every variant before measuring
    inits = []

    def recording():
        inits.append(1)
        return models.build("mlp", input_shape=(1, 28, 28), hidden=(8,))

    cmp = experiments.compare({"a": TrainConfig(batch_size=60), "b": TrainConfig(batch_size=40)}, recording, ds,
                              repeats=1, warmup=0, sources=[SlopeSource()], show_progress=False)
    assert len(inits) == 4 and cmp.repeats == 1


# --- 3. "as good" needs an equivalence margin --------------------------------------------------------

def test_equivalence_needs_the_90_percent_interval_inside_the_margin():
    tight = equivalence([0.80, 0.81, 0.805], [0.80, 0.805, 0.80], "final_accuracy", 0.01, "bf16", "fp32")
    assert tight.equivalent and tight.words() == "equivalent within ±1 point"
    wide = equivalence([0.70, 0.81, 0.90], [0.80, 0.805, 0.80], "final_accuracy", 0.01, "bf16", "fp32")
    assert not wide.equivalent and wide.words() == "not shown equivalent within ±1 point"
    few = equivalence([0.80], [0.80], "final_accuracy", 0.01)
    assert not few.equivalent and "too few" in few.sentence()
    # no difference detected is not equivalence: a paired test that cannot tell is not "as good"
    assert paired([0.70, 0.81, 0.90], [0.80, 0.805, 0.80], "final_accuracy").detectable is False


def test_the_check_refuses_equivalence_words_in_fixed_text_and_passes_the_verdict():
    planted = {"cells": [
        {"cell_type": "markdown", "source": "Here bf16 reaches the same accuracy."},
        {"cell_type": "code", "source": 'print(f"bf16 is as good as fp32 ({acc:.1%})")'},
        {"cell_type": "code", "source": 'print("no worse than fp32")'},
    ]}
    problems = notebook_equivalence_problems(planted, "planted")
    assert [p.split(":")[1].strip() for p in problems] == ["cell 0", "cell 1", "cell 2"]
    assert claims.notebook_claim_problems(planted, "planted")[-3:] == problems  # hooked into the check
    fine = {"cells": [
        {"cell_type": "markdown", "source": 'An "as good" claim needs a margin; train to reach the same accuracy, '
                                            "and a saving counts only if it reaches the same accuracy."},
        {"cell_type": "code", "source": 'print(f"bf16: {cmp.equivalence(\'bf16\').words()}")'},
        {"cell_type": "code", "source": "# the same accuracy in a comment is not shown\nx = 1"},
    ]}
    assert notebook_equivalence_problems(fine, "fine") == []
    assert equivalence_word("matched fp32 accuracy (Micikevicius et al. 2018)") is None
    assert equivalence_word("our model matched fp32 accuracy") is not None
    assert equivalence_word("Its accuracy is close to fp32's.") is not None


# --- 4. energy to a target exists only for the repeats that reached it --------------------------------

class _Run:
    def __init__(self, joules_to_target, target=0.85):
        self.joules_to_target = joules_to_target
        self.seconds_to_target = None if joules_to_target is None else 30.0
        self.config = {"target_accuracy": target}
        self.energy = Measurement("run", 60.0, {}, reliable_from_s=0.1)


def test_energy_to_target_counts_the_repeats_that_reached_it_and_refuses_a_ratio_otherwise():
    green = [_Run(100.0), _Run(None), _Run(110.0)]
    naive = [_Run(200.0), _Run(210.0), _Run(190.0)]
    t = to_target(green, name="green")
    assert (t.reached, t.repeats, t.mean) == (2, 3, 105.0)
    assert t.sentence().startswith("green: 2 of 3 repeats reached 85%")
    with pytest.raises(TargetNotReached, match="green: 2 of 3 repeats reached 85%"):
        target_ratio(green, naive, variant="green", baseline="naive")
    ok = target_ratio([_Run(100.0), _Run(105.0), _Run(110.0)], naive, variant="green", baseline="naive")
    assert ok.detectable and ok.estimate < 1
    assert "no energy to target" in to_target([_Run(None)], name="x").sentence()


# --- 5. a baseline at chance compares no accuracy ------------------------------------------------------

def test_a_baseline_at_chance_compares_no_accuracy():
    at_chance = accuracy_verdict([0.11, 0.12, 0.13], [0.098, 0.12, 0.133], classes=10)
    assert not at_chance.comparable and "not clearly above chance" in at_chance.sentence()
    assert "equivalent" not in at_chance.sentence()
    clear = accuracy_verdict([0.80, 0.81, 0.805], [0.80, 0.805, 0.80], classes=10)
    assert clear.comparable and "equivalent within ±1 point" in clear.sentence()
    assert not above_chance([0.14], classes=10).clear and above_chance([0.16], classes=10).clear


def test_a_run_records_its_classes_so_a_comparison_can_find_chance():
    ds = data.load("synthetic", n_train=120, n_test=60, verbose=False)
    cmp = experiments.compare({"a": TrainConfig(batch_size=60), "b": TrainConfig(batch_size=40)},
                              lambda: models.build("mlp", input_shape=(1, 28, 28), hidden=(8,)), ds,
                              repeats=1, sources=[SlopeSource()], show_progress=False)
    assert cmp.runs["a"][0].num_classes == ds.num_classes
    assert cmp.accuracy_verdict("b").chance.classes == ds.num_classes
    json.dumps(cmp.runs["a"][0].to_dict())


# --- sizing: how much work fills a readable window ------------------------------------------------------

def test_work_is_sized_to_a_window_the_meter_can_read():
    assert experiments.min_window_seconds([SlowCounter()]) == pytest.approx(10.0)
    assert experiments.min_window_seconds([SlopeSource()]) == 0.0
    assert experiments.repeats_to_fill(0.01, min_seconds=0.1) == 30  # 3 x 0.1 s of 10 ms pieces
    assert experiments.repeats_to_fill(1.0, min_seconds=0.1) == 1
    assert experiments.repeats_to_fill(0.01, min_seconds=0.0) == 1

    class Epoch:
        seconds = 0.02

    cfg = TrainConfig(epochs=2)
    calls = []
    needed = experiments.epochs_to_fill(lambda: None, None, cfg, sources=[SlopeSource()],
                                        train_fn=lambda *a, **k: calls.append(a[2]) or Epoch())
    assert needed == 2 and len(calls) == 2 and calls[0].epochs == 1  # nothing to fill: the config's own epochs
    assert experiments.epochs_to_fill(lambda: None, None, cfg, sources=[SlowCounter()],
                                      train_fn=lambda *a, **k: Epoch()) == 1000  # capped at max_epochs


def test_sizing_a_run_says_what_it_is_timing(capsys):
    """The two timing epochs (one discarded) print a line each: a cell sizing a long run is never silent."""
    from greenlab import experiments
    from greenlab.training.config import TrainConfig

    class Epoch:
        seconds = 10.0

    experiments.epochs_to_fill(lambda: None, None, TrainConfig(epochs=2, label="fp32"),
                               train_fn=lambda *a, **k: Epoch())
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ... ")[0] for line in out] == [
        "greenlab.epochs_to_fill [1/2] fp32: a warm-up epoch (discarded)",
        "greenlab.epochs_to_fill [2/2] fp32: timing one epoch"]


# --- sentences about the library: a path a lesson names exists -------------------------------------------

def test_a_lesson_pointing_at_a_moved_table_is_caught():
    from greenlab.course.claims_paths import missing_path, notebook_path_problems

    drifted = {"cells": [
        {"cell_type": "markdown", "source": "The intensities are in `data/carbon_intensity.csv`."},
        {"cell_type": "code", "source": 'print("see greenlab/cited_tables/no_such_table.csv")'},
    ]}
    problems = notebook_path_problems(drifted, "drifted")
    assert [p.split(":")[1].strip() for p in problems] == ["cell 0", "cell 1"]
    assert claims.notebook_claim_problems(drifted, "drifted")[-2:] == problems  # hooked into the check
    assert missing_path("the table `greenlab/cited_tables/carbon_intensity.csv`, folder `greenlab/cited_tables/`, "
                        "runs in data/reference_runs/ and data/README.md.") is None


def test_a_carbon_statement_of_a_short_window_gives_no_figure():
    from greenlab.impact.report import carbon_statement

    short = carbon_statement(short_measurement("tiny"))
    assert "not measurable at this size" in short.markdown and "CO2e +-" not in short.markdown
    assert short.values["short"]
    with measure("long enough", sources=[SlopeSource()]) as window:
        pass
    whole = carbon_statement(window.result)
    assert "not measurable" not in whole.markdown and "CO2e +-" in whole.markdown


def test_a_break_even_on_short_windows_is_not_stated():
    from greenlab.techniques.compress.payback import break_even_interval

    fine = break_even_interval(100.0, [2.0, 2.1, 2.05], [1.0, 1.05, 1.0], what="prediction")
    assert fine.detectable and "repaid after" in fine.sentence()
    short = break_even_interval(100.0, [2.0, 2.1, 2.05], [1.0, 1.05, 1.0], what="prediction",
                                short=[False, True, False])
    assert not short.detectable and NOT_MEASURABLE in short.sentence() and "repaid" not in short.sentence()


# --- a sum of windows (DDP's workers, several GPUs) is short when any part is ------------------------------

def _rank_window(rank, seconds):
    """One worker's own window of ``seconds`` whose sources read reliably from 0.1 s."""
    from greenlab.energy.distributed import rank_record
    from greenlab.energy.measure import ComponentEnergy

    cpu = ComponentEnergy("cpu", "estimate", 5.0, seconds, 5.0 / seconds, True, 0.5)
    return rank_record(Measurement("train", seconds, {"cpu": cpu}, reliable_from_s=0.1), [],
                       rank=rank, node=f"node{rank}")


def test_a_sum_of_windows_is_short_when_any_part_is():
    from greenlab.energy.distributed import reduce_records

    long_enough = reduce_records([_rank_window(0, 2.0), _rank_window(1, 1.5)], "train")
    assert not long_enough.short and long_enough.reliable_from_s == 0.1
    # the longest window (2 s) is long enough; rank 1's 50 ms is not, so neither is the sum
    summed = reduce_records([_rank_window(0, 2.0), _rank_window(1, 0.05)], "train")
    assert summed.seconds == 2.0 and summed.short and summed.short_ranks == [1]
    assert summed.to_dict()["short"] and any("not measurable" in w for w in summed.warnings)


def test_a_ddp_result_on_a_short_worker_window_states_no_energy_figure():
    from greenlab.energy.distributed import reduce_records
    from greenlab.techniques import ddp

    def run(nprocs, seconds_of_last_worker):
        windows = [_rank_window(r, 2.0) for r in range(nprocs - 1)] + [_rank_window(nprocs - 1, seconds_of_last_worker)]
        return ddp.DDPResult(
            nprocs=nprocs, backend="gloo", device="cpu", threads_per_worker=1, per_worker_batch=64,
            global_batch=64 * nprocs, accum_steps=1, epochs=1, lr=0.02, steps=10, per_rank_steps=[10] * nprocs,
            per_rank_samples=[640] * nprocs, samples=640 * nprocs, train_seconds=2.0,
            samples_per_second=320.0 * nprocs, final_accuracy=0.8, final_loss=0.5, loss_history=[0.5],
            dataset={}, model={}, wall_seconds=7.0, train_energy=reduce_records(windows, "train").to_dict())

    one, two, two_short = run(1, 2.0), run(2, 2.0), run(2, 0.05)
    assert not two.train_energy_short and "J training" in two.summary()
    assert NOT_MEASURABLE not in ddp.scaling_report([one, two]).text()
    assert "summed over every worker, was" in ddp.stakeholder_summary(one, two)
    assert two_short.train_energy_short
    assert NOT_MEASURABLE in two_short.summary() and "J training" not in two_short.summary()
    table = ddp.scaling_report([one, two_short]).text()
    assert table.count(NOT_MEASURABLE) >= 2 and ddp.scaling_report([one, two_short]).rows[1]["short"]
    paragraph = ddp.stakeholder_summary(one, two_short)
    assert NOT_MEASURABLE in paragraph and "summed over every worker, was" not in paragraph


# --- sentences about the library: a constant a lesson states is the library's --------------------------------

def test_a_lesson_stating_a_drifted_constant_is_caught(monkeypatch):
    import importlib

    from greenlab.course.claims_constants import drifted_constant, notebook_constant_problems
    from greenlab.course.notebook_format import _read_json, lessons_dir

    lesson = _read_json(lessons_dir() / "instructor" / "00_measuring_energy.ipynb")
    assert notebook_constant_problems(lesson, "00") == []
    # the library changes its short-window rule; lesson 00's sentences about it have not
    monkeypatch.setattr(importlib.import_module("greenlab.energy.measure"), "SHORT_WINDOW_PERIODS", 20)
    drifted = notebook_constant_problems(lesson, "00")
    assert drifted and all("SHORT_WINDOW_PERIODS as 10, but the library holds 20" in p for p in drifted)
    assert any(p in claims.notebook_claim_problems(lesson, "00") for p in drifted)  # hooked into the check
    monkeypatch.undo()
    assert drifted_constant("a window shorter than twelve of its counter's update periods")
    assert drifted_constant("a baseline must sit 7 points above chance")
    assert drifted_constant("the baseline clears chance by more than five points") is None
    assert drifted_constant("shorter than ten update periods (a figure printed from the library)") is None
