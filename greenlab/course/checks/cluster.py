"""Lesson 14 (sharing a cluster): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

from greenlab.course.checks.core import (
    FAILED, Check, _not_a_function, _sorted_indices, check_function, drawn_inputs, graded, is_placeholder,
    variant_hint)
from greenlab.techniques import cluster, tuning


@graded(reference=("greenlab.techniques.cluster:easy_backfill",))
def easy_backfill(fn: Any) -> Check:
    """Check a learner's EASY-backfilling policy ``fn(state) -> jobs to start now`` against
    ``gl.cluster.easy_backfill`` on small cluster states, then on a whole simulated trace."""
    label = "easy_backfill"
    verdict = _not_a_function(fn, label)
    if verdict is not None:
        return verdict
    states = _states(cluster)
    cases = [((s,), _names(cluster.easy_backfill(s))) for s in states]

    def names(state):
        got = fn(state)
        return got if is_placeholder(got) else _names(got)

    def variant(policy):
        return lambda state: _names(policy(state))

    wrong = [
        (variant(_true_duration), "the scheduler knows only each job's estimate_s (what its user asked "
                                  "for), not its true duration: use estimate_s for every end time."),
        (variant(_spare_not_used_up), "spare GPUs that one backfilled job takes past the reservation are no "
                                      "longer spare for the next: subtract them."),
        (variant(_only_before_reservation), "a job that runs past the reservation may still start when it "
                                            "uses only the spare GPUs (those the reserved job will not need)."),
        (variant(cluster.fcfs), "after the first job that does not fit, look further down the queue: "
                                "later jobs may start now if they cannot delay its reservation."),
        (variant(_no_reservation), "a later job may jump ahead only if it cannot delay the first waiting "
                                   "job: give that job a reservation and respect it."),
    ]
    result = check_function(names, cases, name=label, hint=variant_hint(wrong))
    if not result.passed:
        return result
    trace = cluster.synthetic_trace(14, 4, seed=3, mean_interarrival_s=300.0, gpu_weights=(0.4, 0.3, 0.3, 0.0))
    try:
        mine = cluster.simulate(trace, 4, fn)
    except Exception as exc:  # the learner's policy broke the simulation: a wrong answer, not an error
        return Check(label, FAILED, f"the small states pass, but a 14-job simulation failed: "
                                    f"{type(exc).__name__}: {exc}")
    ref = cluster.simulate(trace, 4, cluster.easy_backfill)
    starts = [(r.job.name, round(r.start_s, 6)) for r in mine.records]
    if mine.unfinished or starts != [(r.job.name, round(r.start_s, 6)) for r in ref.records]:
        return Check(label, FAILED, "the small states pass, but on a 14-job trace your policy starts jobs at "
                                    "other times than EASY backfilling does.")
    return Check(label, result.status, f"{result.message[:-1]}, and a 14-job trace runs exactly as with "
                                       "gl.cluster.easy_backfill.")


@graded(reference=("greenlab.techniques.tuning:promote",))
def promote(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's successive-halving rule ``fn(scores, eta) -> indices kept`` against
    ``gl.tuning.promote``: the top ``max(1, n // eta)`` scores, ties with the last one kept."""
    inputs = [
        ([0.5, 0.9, 0.7, 0.6, 0.8, 0.1, 0.3, 0.2, 0.4], 3),
        ([0.2, 0.4], 3),
        ([0.1, 0.5, 0.3, 0.4, 0.2], 3),
        ([0.8, 0.6, 0.6, 0.1, 0.0, 0.2], 3),
        ([0.3, 0.1, 0.4, 0.2], 2),
        ([0.7], 4),
    ] + drawn_inputs(seed, "promote", lambda rng: ([round(rng.random(), 2) for _ in range(rng.randint(1, 12))],
                                                   rng.randint(2, 4)))
    cases = [(args, tuning.promote(*args)) for args in inputs]
    label = "promote"

    def sorted_answer(scores, eta):
        return _sorted_indices(fn(scores, eta))

    sorted_answer.__name__ = label
    if _not_a_function(fn, label) is not None:
        return _not_a_function(fn, label)

    def top(scores, count, ties=True):
        count = max(0, min(len(scores), count))
        if count == 0:
            return []
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        if not ties:
            return sorted(order[:count])
        threshold = scores[order[count - 1]]
        return [i for i, s in enumerate(scores) if s >= threshold]

    wrong = [
        (lambda s, e: sorted(sorted(range(len(s)), key=lambda i: s[i])[:max(1, len(s) // e)]),
         "higher validation accuracy is better: keep the highest scores, not the lowest."),
        (lambda s, e: top(s, len(s) - len(s) // e),
         "keep the top 1/eta of the scores (n // eta of them), not all but the bottom 1/eta."),
        (lambda s, e: top(s, -(-len(s) // e)),
         "keep n // eta scores, rounded down (Optuna's rule), not rounded up."),
        (lambda s, e: top(s, len(s) // e),
         "keep at least one: with fewer than eta scores the best one still goes on."),
        (lambda s, e: top(s, max(1, len(s) // e), ties=False),
         "a score equal to the last one kept goes on too (ties are kept, as in Optuna's pruner)."),
    ]
    return check_function(sorted_answer, cases, name=label, hint=variant_hint(wrong))


# --- the cases and the planted mistakes ------------------------------------------------------------

def _names(jobs) -> str:
    """The started jobs as one comparable string: "a, b", or "nothing"."""
    return ", ".join(sorted(j.name for j in jobs)) or "nothing"


def _states(cluster) -> list:
    def job(name, gpus, est, dur=None, arrival=0.0):
        return cluster.Job(name, "u", arrival, gpus, est if dur is None else dur, est)

    def state(free, queue, running, total=4, now=0.0):
        run = tuple(cluster.Running(job(f"r{i}", g, est, arrival=-1.0), start)
                    for i, (g, start, est) in enumerate(running))
        return cluster.ClusterState(now, total, free, tuple(queue), run, {})

    return [
        # the head does not fit; a later job would end after the reservation and there is nothing spare
        state(1, [job("head", 4, 50), job("long", 1, 200, 150)], [(3, 0.0, 100)]),
        # a later job past the reservation fits in the one spare GPU
        state(2, [job("head", 3, 50), job("spare", 1, 500, 400)], [(2, 0.0, 100)]),
        # ... but only one of two such jobs: the spare GPU is used up
        state(2, [job("head", 3, 50), job("c", 1, 500, 400), job("d", 1, 500, 400)], [(2, 0.0, 100)]),
        # short by its true duration, long by its estimate
        state(1, [job("head", 4, 50), job("b", 1, 200, 60)], [(3, 0.0, 100)]),
        # ends before the reservation: backfilled
        state(1, [job("head", 4, 50), job("short", 1, 50)], [(3, 0.0, 100)]),
        # jobs that fit start in order
        state(4, [job("a", 2, 100), job("b", 2, 100), job("c", 1, 10)], []),
        # a job started now delays the reservation; a later one fits before it
        state(3, [job("a", 2, 300), job("head", 3, 50), job("b", 1, 250)], [(1, 0.0, 100)], now=10.0),
        # an empty queue starts nothing
        state(4, [], []),
    ]


def _backfill(state, end_of, spare_used_up=True, past_reservation=True, reserve=True):
    started = cluster._in_order(state.queue, state.free_gpus)
    rest = list(state.queue)[len(started):]
    if not rest:
        return started
    free = state.free_gpus - sum(j.gpus for j in started)
    if not reserve:
        for job in rest[1:]:
            if job.gpus <= free:
                started.append(job)
                free -= job.gpus
        return started
    ends = sorted([(r.start_s + end_of(r.job), r.job.gpus) for r in state.running]
                  + [(state.now_s + end_of(j), j.gpus) for j in started])
    avail, shadow, extra = free, None, 0
    for end_s, gpus in ends:
        avail += gpus
        if avail >= rest[0].gpus:
            shadow, extra = end_s, avail - rest[0].gpus
            break
    for job in rest[1:]:
        if job.gpus > free:
            continue
        if state.now_s + end_of(job) <= shadow:
            started.append(job)
            free -= job.gpus
        elif past_reservation and job.gpus <= extra:
            started.append(job)
            free -= job.gpus
            if spare_used_up:
                extra -= job.gpus
    return started


def _true_duration(state):
    return _backfill(state, lambda j: j.duration_s)


def _spare_not_used_up(state):
    return _backfill(state, lambda j: j.estimate_s, spare_used_up=False)


def _only_before_reservation(state):
    return _backfill(state, lambda j: j.estimate_s, past_reservation=False)


def _no_reservation(state):
    return _backfill(state, lambda j: j.estimate_s, reserve=False)
