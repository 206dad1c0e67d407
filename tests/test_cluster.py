"""The cluster simulator (SimPy) and its policies: exact schedules on small traces, GPU-seconds
conserved, and bad policies or jobs refused."""

import math

import pytest

from greenlab.techniques import cluster
from greenlab.techniques.cluster import Job


def job(name, arrival, gpus, duration, estimate=None, user="u", priority=0):
    return Job(name, user, arrival, gpus, duration, duration if estimate is None else estimate, priority)


def starts(result):
    return {r.job.name: r.start_s for r in result.records}


def test_fcfs_waits_behind_the_first_job_that_does_not_fit():
    trace = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10)]
    result = cluster.simulate(trace, 4, cluster.fcfs)
    assert starts(result) == {"a": 0, "b": 100, "c": 150}
    assert result.makespan_s == 160 and result.busy_gpu_s == 2 * 100 + 4 * 50 + 1 * 10


def test_easy_backfilling_runs_a_short_job_in_the_gap_without_delaying_the_head():
    trace = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10, estimate=20)]
    result = cluster.simulate(trace, 4, cluster.easy_backfill)
    assert starts(result) == {"a": 0, "b": 100, "c": 2}
    # a job whose estimate runs past the reservation and needs more than the spare GPUs waits
    late = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10, estimate=500)]
    assert starts(cluster.simulate(late, 4, cluster.easy_backfill))["c"] == 150


def test_priority_and_fair_share_choose_who_goes_first():
    trace = [job("run", 0, 4, 100, user="x"), job("low", 1, 4, 10, user="x"),
             job("high", 2, 4, 10, user="y", priority=1)]
    assert starts(cluster.simulate(trace, 4, cluster.priority))["high"] == 100
    assert starts(cluster.simulate(trace, 4, cluster.fcfs))["high"] == 110
    # fair share: user x has used 400 GPU-seconds, y none, so y's job goes first
    trace = [job("run", 0, 4, 100, user="x"), job("x2", 1, 4, 10, user="x"), job("y1", 2, 4, 10, user="y")]
    assert starts(cluster.simulate(trace, 4, cluster.fair_share)) == {"run": 0, "y1": 100, "x2": 110}


def test_gpu_seconds_are_conserved_and_idle_energy_is_idle_seconds_times_watts():
    trace = cluster.synthetic_trace(40, 8, seed=1)
    for name, result in cluster.compare_policies(trace, 8, idle_watts=50.0, idle_watts_source="test").items():
        assert len(result.records) == 40 and not result.unfinished, name
        assert result.busy_gpu_s == pytest.approx(sum(j.gpus * j.duration_s for j in trace))
        assert result.idle_gpu_s == pytest.approx(8 * (result.makespan_s - result.start_s) - result.busy_gpu_s)
        assert result.idle_joules == pytest.approx(result.idle_gpu_s * 50.0)
        assert all(r.start_s >= r.job.arrival_s and r.end_s - r.start_s == pytest.approx(r.job.duration_s)
                   for r in result.records)
        assert all(0 <= busy <= 8 for _, busy in result.timeline)
    assert cluster.simulate(trace, 8).idle_joules is None  # no idle figure, no energy


def test_backfilling_waits_less_and_idles_less_than_fcfs_on_the_lesson_trace():
    trace = cluster.synthetic_trace(60, 8, seed=0, mean_interarrival_s=500.0)
    fcfs, easy = cluster.simulate(trace, 8, cluster.fcfs), cluster.simulate(trace, 8, cluster.easy_backfill)
    assert easy.mean_wait_s < fcfs.mean_wait_s and easy.idle_gpu_s < fcfs.idle_gpu_s


def test_handing_out_gpus_one_at_a_time_deadlocks_and_holds_gpus_idle():
    trace = [job("run", 0, 2, 100), job("a", 1, 2, 10), job("b", 2, 2, 10)]
    result = cluster.simulate(trace, 2, gang=False)
    assert result.deadlocks == 1 and len(result.records) == 3
    gang = cluster.simulate(trace, 2)
    assert gang.deadlocks == 0 and gang.held_idle_gpu_s == 0
    slow = [job("run", 0, 1, 100), job("wide", 1, 2, 10)]
    held = cluster.simulate(slow, 2, gang=False)
    assert held.held_idle_gpu_s == pytest.approx(99.0)  # "wide" held the free GPU from t=1 to t=100


def test_a_policy_that_asks_for_the_impossible_is_refused():
    trace = [job("a", 0, 2, 10), job("b", 0, 2, 10)]
    with pytest.raises(cluster.PolicyError, match="twice"):
        cluster.simulate(trace, 4, lambda s: list(s.queue[:1]) * 2)
    with pytest.raises(cluster.PolicyError, match="GPUs"):
        cluster.simulate(trace, 2, lambda s: list(s.queue))
    stuck = cluster.simulate(trace, 4, lambda s: [])
    assert len(stuck.unfinished) == 2 and not stuck.records


@pytest.mark.parametrize("kwargs, match", [
    ({"jobs": [job("a", 0, 5, 10)], "n_gpus": 4}, "n_gpus"),
    ({"jobs": [job("a", 0, 1, 10, estimate=5)], "n_gpus": 4}, "estimate_s"),
    ({"jobs": [], "n_gpus": 0}, "n_gpus"),
    ({"jobs": [], "n_gpus": 4, "idle_watts": -1}, "idle_watts"),
])
def test_bad_input_is_refused_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cluster.simulate(**kwargs)


def test_the_synthetic_trace_is_seeded_and_follows_its_stated_shape():
    a, b = cluster.synthetic_trace(30, 4, seed=2), cluster.synthetic_trace(30, 4, seed=2)
    assert a == b and a != cluster.synthetic_trace(30, 4, seed=3)
    assert all(1 <= j.gpus <= 4 and j.duration_s <= j.estimate_s <= 3 * j.duration_s + 1e-6 for j in a)
    assert [j.arrival_s for j in a] == sorted(j.arrival_s for j in a)
    with pytest.raises(ValueError, match="n_jobs"):
        cluster.synthetic_trace(0)


def test_a_recorded_figure_is_read_from_the_newest_run_that_has_it(tmp_path):
    import json

    from greenlab.course import reference

    def record(date, watts):
        row = {"label": "idle power", "watts": watts}
        data = {"schema_version": 1, "experiment": "sharing_a_cluster", "date": date, "gpu": "NVIDIA H200",
                "driver": "1", "cuda": "12", "torch": "2", "command": "suite", "results": [row]}
        (tmp_path / f"nvidia-h200_{date}_sharing_a_cluster.json").write_text(json.dumps(data))

    assert reference.value("sharing_a_cluster", "idle power", "watts", folder=tmp_path) == (None, None)
    record("2026-01-01", 70.0)
    record("2026-02-01", None)  # a later run without the figure does not hide the earlier one
    watts, run = reference.value("sharing_a_cluster", "idle power", "watts", folder=tmp_path)
    assert watts == 70.0 and run.date == "2026-01-01"


# --- impossible inputs are refused, never turned into numbers -------------------------------------

@pytest.mark.parametrize("field,value", [("arrival_s", float("nan")), ("arrival_s", float("inf")),
                                         ("duration_s", float("nan")), ("duration_s", float("inf")),
                                         ("estimate_s", float("inf")), ("estimate_s", float("nan")),
                                         ("gpus", 1.5), ("gpus", True), ("gpus", 0), ("priority", 0.5)])
def test_a_job_no_cluster_could_run_is_refused_by_name(field, value):
    args = dict(name="j", user="u", arrival_s=0.0, gpus=1, duration_s=10.0, estimate_s=20.0, priority=0)
    args[field] = value
    with pytest.raises(ValueError, match=field):
        cluster.Job(**args)


def test_simulate_never_answers_nan_or_inf():
    jobs = cluster.synthetic_trace(n_jobs=20, n_gpus=4, seed=1)
    r = cluster.simulate(jobs, 4, idle_watts=60.0)
    assert all(math.isfinite(x) for x in (r.mean_wait_s, r.utilisation, r.idle_gpu_s, r.idle_joules))
    for bad in (float("nan"), float("inf"), -1.0, True):
        with pytest.raises(ValueError, match="idle_watts"):
            cluster.simulate(jobs, 4, idle_watts=bad)
    with pytest.raises(TypeError, match="Job"):
        cluster.simulate([object()], 4)


@pytest.mark.parametrize("kw,match", [({"gpu_choices": (0, 1), "gpu_weights": (0.5, 0.5)}, "gpu_choices"),
                                      ({"gpu_choices": (1.5, 2), "gpu_weights": (0.5, 0.5)}, "gpu_choices"),
                                      ({"gpu_weights": (float("nan"), 1, 1, 1)}, "gpu_weights"),
                                      ({"gpu_weights": (0, 0, 0, 0)}, "gpu_weights"),
                                      ({"user_weights": (-1, 1, 1)}, "user_weights"),
                                      ({"duration_sigma": float("inf")}, "duration_sigma"),
                                      ({"max_overestimate": float("nan")}, "max_overestimate"),
                                      ({"high_priority_share": float("nan")}, "high_priority_share")])
def test_synthetic_trace_refuses_impossible_distributions(kw, match):
    with pytest.raises(ValueError, match=match):
        cluster.synthetic_trace(n_jobs=5, **kw)


@pytest.mark.parametrize("q", [-50, 150, float("nan"), "95"])
def test_a_wait_percentile_outside_0_to_100_is_refused(q):
    r = cluster.simulate(cluster.synthetic_trace(n_jobs=10, n_gpus=4), 4)
    with pytest.raises(ValueError, match="percentile"):
        r.wait_percentile_s(q)


def test_a_fixed_window_integrates_the_busy_gpus_of_the_timeline():
    trace = [job("a", 0, 2, 100), job("b", 1, 4, 50), job("c", 2, 1, 10)]
    result = cluster.simulate(trace, 4, cluster.fcfs)  # a on 2 GPUs 0-100, b on 4 100-150, c on 1 150-160
    w = result.window(50, 120)
    assert w.busy_gpu_s == pytest.approx(2 * 50 + 4 * 20) and w.idle_gpu_s == pytest.approx(4 * 70 - 180)
    assert result.window(0, 160).busy_gpu_s == pytest.approx(result.busy_gpu_s)
    assert result.window(0, 160).idle_gpu_s == pytest.approx(result.idle_gpu_s)
    assert result.window(155, 300).busy_gpu_s == pytest.approx(5)  # after the makespan: all idle
    with pytest.raises(ValueError, match="after"):
        result.window(10, 10)


def test_policies_compared_over_the_same_steady_window_exclude_the_drain():
    # The idle GPU-hours to the end of a finite trace differ between policies by the drain after
    # the last arrival; over one fixed window before it, every policy is powered for the same hours.
    trace = cluster.synthetic_trace(80, 8, seed=0, mean_interarrival_s=500.0)
    start, end = cluster.steady_window(trace)
    first, last = trace[0].arrival_s, trace[-1].arrival_s
    assert start == pytest.approx(first + 0.1 * (last - first)) and end == last
    results = cluster.compare_policies(trace, 8, {"FCFS": cluster.fcfs, "EASY": cluster.easy_backfill})
    windows = {n: r.window(start, end) for n, r in results.items()}
    assert {w.seconds for w in windows.values()} == {end - start}
    for n, r in results.items():
        drain = r.window(end, r.makespan_s) if r.makespan_s > end else None
        whole = r.window(r.start_s, r.makespan_s)
        assert whole.idle_gpu_s == pytest.approx(r.idle_gpu_s)
        assert drain is None or r.idle_gpu_s > windows[n].idle_gpu_s
    with pytest.raises(ValueError, match="skip_fraction"):
        cluster.steady_window(trace, 1.0)
