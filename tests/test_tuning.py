"""Successive halving on Optuna: the promotion rule agrees with Optuna's own, a rule made into a
pruner prunes the same trials as Optuna's SuccessiveHalvingPruner, and the full sweep and the
pruned one see the same candidates."""

import math
import random
import warnings
from types import SimpleNamespace

import pytest

from greenlab.energy import Measurement
from greenlab.energy.provenance import how_measured
from greenlab.techniques import tuning


def test_promote_keeps_the_top_fraction_with_ties_and_at_least_one():
    assert tuning.promote([0.5, 0.9, 0.7, 0.6, 0.8, 0.1, 0.3, 0.2, 0.4], 3) == [1, 2, 4]
    assert tuning.promote([0.2, 0.4], 3) == [1]
    assert tuning.promote([0.8, 0.6, 0.6, 0.1, 0.0, 0.2], 3) == [0, 1, 2]
    assert tuning.promote([], 3) == []
    # a diverged trial (NaN) is the worst, never a blocker and never promoted
    assert tuning.promote([float("nan"), 0.5, 0.9], 2) == [2]
    assert tuning.promote([float("nan"), 0.5, 0.9, 0.7], 2) == [2, 3]
    assert tuning.promote([float("nan"), float("nan")], 2) == []
    with pytest.raises(ValueError, match="score"):
        tuning.promote([float("inf"), 0.5], 2)
    with pytest.raises(TypeError, match="score"):
        tuning.promote(["0.5", 0.7], 2)
    with pytest.raises(ValueError, match="eta"):
        tuning.promote([0.1], 1)


def test_promote_agrees_with_optunas_promotion_test_on_random_scores():
    from optuna.pruners._successive_halving import _is_trial_promotable_to_next_rung
    from optuna.study import StudyDirection

    rng = random.Random(0)
    for _ in range(300):
        n, eta = rng.randint(1, 12), rng.randint(2, 5)
        scores = [round(rng.random(), 1) for _ in range(n)]  # rounding makes ties
        kept = set(tuning.promote(scores, eta))
        for i, s in enumerate(scores):
            assert (i in kept) == _is_trial_promotable_to_next_rung(s, list(scores), eta, StudyDirection.MAXIMIZE)


def test_rungs_are_geometric_below_the_budget():
    assert tuning.rungs(10, 3, 90) == [10, 30]
    assert tuning.rungs(5, 2, 41) == [5, 10, 20, 40]
    with pytest.raises(ValueError, match="min_steps"):
        tuning.rungs(0, 3, 90)


@pytest.fixture(scope="module")
def small():
    import torch

    from greenlab.training import data as gl_data, models
    from greenlab.training.loop import TrainConfig

    warnings.simplefilter("ignore")
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: one thread is fastest, and immune to a busy machine
    ds = gl_data.load("fashion-mnist", n_train=320, n_test=64, verbose=False)
    yield ds, (lambda: models.build("mlp")), TrainConfig(batch_size=32)
    torch.set_num_threads(before)


def test_a_rule_pruner_with_promote_prunes_exactly_what_optunas_pruner_prunes(small):
    ds, model_fn, cfg = small
    kw = dict(n_trials=6, max_steps=36, min_steps=4, eta=3, seed=1)
    asha = tuning.sweep(ds, model_fn, cfg, method="asha", **kw)
    rule = tuning.sweep(ds, model_fn, cfg, method="rule", rule=tuning.promote, **kw)
    full = tuning.sweep(ds, model_fn, cfg, method="full", **kw)
    assert [t.lr for t in asha.trials] == [t.lr for t in rule.trials] == [t.lr for t in full.trials]
    assert [(t.state, t.steps) for t in asha.trials] == [(t.state, t.steps) for t in rule.trials]
    assert asha.pruned >= 1 and full.pruned == 0
    assert all(t.steps == 36 for t in full.trials) and asha.steps < full.steps
    assert all(t.steps in (4, 12, 36) for t in asha.trials)
    assert all(t.joules > 0 for t in asha.trials)
    # each trial keeps its run's energy window, so the sweep says how its energy was obtained
    assert all(math.isclose(t.energy.joules, t.joules) and t.energy.estimated == t.estimated for t in full.trials)
    assert how_measured(full) == how_measured([t.energy for t in full.trials])
    # a rule that keeps everyone prunes nothing
    keep_all = tuning.sweep(ds, model_fn, cfg, method="rule", rule=lambda s, e: range(len(s)), **kw)
    assert keep_all.pruned == 0


def test_a_comparison_pairs_the_methods_by_repeat(small):
    ds, model_fn, cfg = small
    cmp = tuning.compare_sweeps(ds, model_fn, cfg, {"full": {"method": "full"}, "asha": {"method": "asha"}},
                                repeats=2, n_trials=3, max_steps=16, min_steps=4, eta=2)
    assert cmp.repeats == 2 and cmp.baseline == "full"
    verdict = cmp.paired("asha", "steps")
    assert verdict.n == 2 and verdict.estimate <= 1.0
    assert "full" in cmp.table()
    # each search is one energy window around all its trials, and its verdict refuses a short one
    assert all(r.energy is not None and r.joules == r.energy.joules for rs in cmp.results.values() for r in rs)
    fake = [tuning.SweepResult("full", [], seed=s, energy=SimpleNamespace(joules=10.0 + s, seconds=1.0, short=s == 1))
            for s in range(3)]
    fast = [tuning.SweepResult("asha", [], seed=s, energy=SimpleNamespace(joules=2.0 + s, seconds=1.0, short=False))
            for s in range(3)]
    both = tuning.TuningComparison({"full": fake, "asha": fast}, "full")
    assert both.paired("asha", "joules").short_windows == 1 and both.paired("asha", "joules").detectable is None
    assert both.paired("asha", "seconds").short_windows == 0


def test_bad_arguments_are_refused(small):
    ds, model_fn, cfg = small
    with pytest.raises(ValueError, match="method"):
        tuning.sweep(ds, model_fn, cfg, method="grid")
    with pytest.raises(ValueError, match="rule"):
        tuning.sweep(ds, model_fn, cfg, method="rule")
    with pytest.raises(ValueError, match="lr_range"):
        tuning.sweep(ds, model_fn, cfg, lr_range=(0.1, 0.01))


def test_two_processes_share_one_study_through_a_journal_file(small, tmp_path):
    ds, _, _ = small
    shared = tuning.shared_study(tmp_path / "journal.log", ds, workers=2, trials_per_worker=2,
                                 max_steps=16, min_steps=4, eta=2)
    by_worker = shared.by_worker()
    assert sorted(by_worker) == [0, 1] and all(len(v) == 2 for v in by_worker.values())
    assert sorted(t.number for t in shared.trials) == [0, 1, 2, 3]  # one numbering: one study
    assert len(set(shared.pids.values())) == 2 and set(shared.returncodes.values()) == {0}
    # the workers' energy windows came back through the journal whole
    assert all(isinstance(t.energy, Measurement) and math.isclose(t.energy.joules, t.joules) for t in shared.trials)


def test_a_dead_worker_loses_only_its_own_trial_and_is_named(small, tmp_path):
    """Worker 0 is SIGKILLed in the middle of a trial: worker 1's trials come back, worker 0 is
    named with its signal, and the trial it was running is FAIL in the journal, not RUNNING."""
    import os
    import signal
    import threading

    import optuna
    import psutil
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    from launches import wait_for

    ds, _, _ = small
    journal = tmp_path / "journal.log"
    killed = {}

    def kill_worker0_mid_trial():
        def worker0():
            return next((p for p in psutil.Process(os.getpid()).children(recursive=True)
                         if any(a.endswith("worker0.json") for a in p.cmdline())), None)

        proc = wait_for(worker0, deadline_s=180)

        def running():
            try:
                storage = JournalStorage(JournalFileBackend(str(journal)))
                trials = optuna.load_study(study_name="shared", storage=storage).get_trials(deepcopy=False)
            except Exception:  # the journal may not be there yet
                return False
            return any(t.state == optuna.trial.TrialState.RUNNING and t.user_attrs.get("pid") == proc.pid
                       for t in trials)

        if proc is not None and wait_for(running, deadline_s=180, every_s=0.02):
            os.kill(proc.pid, signal.SIGKILL)
            killed["pid"] = proc.pid

    killer = threading.Thread(target=kill_worker0_mid_trial, daemon=True)
    killer.start()
    with pytest.warns(RuntimeWarning, match="worker 0"):
        shared = tuning.shared_study(journal, ds, workers=2, trials_per_worker=2, max_steps=600, min_steps=400,
                                     eta=2)
    killer.join(timeout=60)
    assert killed.get("pid") == shared.pids[0]
    assert list(shared.failures) == [0] and "SIGKILL" in shared.failures[0] and not shared.complete
    assert shared.returncodes[1] == 0 and len(shared.by_worker()[1]) == 2  # the survivor's work is kept
    storage = JournalStorage(JournalFileBackend(str(journal)))
    states = {t.number: t.state for t in optuna.load_study(study_name="shared", storage=storage).get_trials()}
    assert optuna.trial.TrialState.RUNNING not in states.values()
    assert len(shared.failed_trials) == 1 and states[shared.failed_trials[0]] == optuna.trial.TrialState.FAIL


def test_a_failing_worker_is_named_with_its_error_not_a_warning(small, tmp_path):
    ds, _, _ = small
    with pytest.raises(RuntimeError, match=r"(?s)worker 0 \(process \d+\) exited with code 1; the end of its stderr:.*"
                                           r"models.py.*unknown model 'no-such-model'"):
        tuning.shared_study(tmp_path / "journal.log", ds, workers=2, trials_per_worker=1, model="no-such-model",
                            max_steps=4, min_steps=2, eta=2)
