"""Lesson 14: scheduling jobs on a shared GPU cluster, simulated with SimPy.

A cluster of ``n_gpus`` GPUs, all powered the whole time, receives a trace of jobs (arrival,
GPUs wanted, true duration, the user's walltime estimate). A *policy* decides, each time a job
arrives or finishes, which waiting jobs start now; the simulator (a SimPy discrete-event model)
runs them and records every job's queue wait, the GPUs busy over time, and the GPU-seconds
that sat idle but powered. Their energy is ``idle GPU-seconds x idle watts``: the idle watts
come from the caller (a measured or recorded figure), never from here.

    trace = gl.cluster.synthetic_trace(n_jobs=60, n_gpus=8, seed=0)
    result = gl.cluster.simulate(trace, 8, gl.cluster.easy_backfill)
    print(result.summary())

A policy is ``policy(state) -> jobs to start`` where ``state`` is a :class:`ClusterState`. The
library's policies: :func:`fcfs`, :func:`priority`, :func:`fair_share` (all three start jobs in
their order and stop at the first that does not fit), :func:`easy_backfill` (FCFS plus EASY
backfilling, Lifka 1995: later jobs may jump ahead when they cannot delay the first waiting
job's reservation). Every policy here is *gang* scheduled: a job gets all its GPUs at once.
``simulate(..., gang=False)`` shows the alternative: GPUs are handed to waiting jobs one at a
time (as when each worker of a job is placed on its own), so jobs hold GPUs idle while they
wait for the rest, and can hold each other up for good (a deadlock, counted, then broken by
taking the holds back, as a timeout would).

Idle GPU-hours to the end of a finite trace (``idle_gpu_s``, ``utilisation``) include the drain
after the last arrival, when the cluster empties at a pace the policy sets: a policy that
finishes the trace later shows more idle hours even when, while jobs keep arriving, it idles no
more. To compare policies, or to carry a figure to a longer period, read a fixed window the same
for every policy: ``result.window(*steady_window(trace))`` (from a tenth into the arrivals, once
the empty cluster has filled, to the last arrival, before the drain).

Times are in seconds, energy in joules (kWh in the summary).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable, Sequence
from greenlab.base import limits, validation
from greenlab.base.optional import require
from greenlab.base.units import plain_number

__all__ = ["Job", "Running", "ClusterState", "JobRecord", "ClusterResult", "PolicyError", "POLICIES",
           "synthetic_trace", "simulate", "fcfs", "priority", "fair_share", "easy_backfill",
           "reservation", "compare_policies", "Window", "steady_window"]


@dataclass(frozen=True)
class Job:
    """One job: arrives at ``arrival_s``, needs ``gpus`` GPUs at once for ``duration_s`` seconds;
    ``estimate_s`` is the walltime its user asked for (a scheduler sees only this, not the true
    duration); a higher ``priority`` goes first under :func:`priority`."""

    name: str
    user: str
    arrival_s: float
    gpus: int
    duration_s: float
    estimate_s: float
    priority: int = 0

    def __post_init__(self):
        """Refuse a job no cluster could run (NaN or infinite times, fractional or boolean GPUs)
        by name, and keep its numbers as plain Python ones."""
        v = validation
        label = f"job {self.name!r}: "
        v.text("name", self.name)
        v.text(label + "user", self.user)
        checked = {"arrival_s": v.number(label + "arrival_s", self.arrival_s),  # any finite time (before 0 too)
                   "gpus": v.integer(label + "gpus", self.gpus, low=1),
                   "duration_s": v.number(label + "duration_s", self.duration_s, low=0, low_open=True),
                   "priority": v.integer(label + "priority", self.priority)}
        checked["estimate_s"] = v.number(label + "estimate_s", self.estimate_s, low=0, low_open=True)
        for key, value in checked.items():
            object.__setattr__(self, key, value)


@dataclass(frozen=True)
class Running:
    """A started job and when it started; ``end_estimate_s`` is when it will end at the latest
    by its user's estimate (the scheduler does not know the true end)."""

    job: Job
    start_s: float

    @property
    def end_estimate_s(self) -> float:
        return self.start_s + self.job.estimate_s


@dataclass(frozen=True)
class ClusterState:
    """What a policy sees: the time, the GPUs in all and free, the waiting jobs in arrival order,
    the running jobs, and each user's GPU-seconds used so far (finished and running work)."""

    now_s: float
    total_gpus: int
    free_gpus: int
    queue: tuple
    running: tuple
    usage_gpu_s: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        queue = ", ".join(f"{j.name} {j.gpus} GPU est {j.estimate_s:g} s" for j in self.queue) or "empty"
        running = ", ".join(f"{r.job.gpus} GPU until {r.end_estimate_s:g} s" for r in self.running) or "none"
        return (f"state(t={self.now_s:g} s, {self.free_gpus} of {self.total_gpus} GPUs free; waiting: {queue}; "
                f"running (estimated ends): {running})")


class PolicyError(ValueError):
    """A policy asked for something impossible (a job not waiting, twice, or more GPUs than free)."""


Policy = Callable[[ClusterState], Sequence[Job]]


# --- policies ------------------------------------------------------------------------------------

def fcfs(state: ClusterState) -> list:
    """First come, first served: start waiting jobs in arrival order while the next one fits."""
    return _in_order(state.queue, state.free_gpus)


def priority(state: ClusterState) -> list:
    """Highest ``priority`` first (arrival order among equals), stopping at the first that does not fit."""
    return _in_order(sorted(state.queue, key=lambda j: -j.priority), state.free_gpus)


def fair_share(state: ClusterState) -> list:
    """The user who has used the fewest GPU-seconds so far goes first (arrival order within a
    user), stopping at the first job that does not fit. Usage is updated as jobs start."""
    usage = dict(state.usage_gpu_s)
    waiting, free, started = list(state.queue), state.free_gpus, []
    while waiting:
        job = min(waiting, key=lambda j: (usage.get(j.user, 0.0), waiting.index(j)))
        if job.gpus > free:
            break
        started.append(job)
        waiting.remove(job)
        free -= job.gpus
        usage[job.user] = usage.get(job.user, 0.0) + job.gpus * job.estimate_s
    return started


def reservation(state: ClusterState, head: Job, started: Sequence[Job] = ()) -> tuple:
    """When ``head`` can start at the earliest by the running jobs' estimated ends (``started``:
    jobs starting now, which count as running), and how many GPUs will be spare then:
    ``(shadow_time_s, extra_gpus)``."""
    ends = sorted([(r.end_estimate_s, r.job.gpus) for r in state.running]
                  + [(state.now_s + j.estimate_s, j.gpus) for j in started])
    free = state.free_gpus - sum(j.gpus for j in started)
    if head.gpus <= free:
        return state.now_s, free - head.gpus
    for end_s, gpus in ends:
        free += gpus
        if free >= head.gpus:
            return end_s, free - head.gpus
    raise PolicyError(f"job {head.name} needs {head.gpus} GPUs, more than the cluster's {state.total_gpus}")


def easy_backfill(state: ClusterState) -> list:
    """FCFS with EASY backfilling: start jobs in arrival order while they fit; the first that
    does not fit gets a reservation (:func:`reservation`); a later job may start now if it fits
    in the free GPUs and either ends (by its estimate) before the reservation or uses only GPUs
    the reserved job will not need (the spare ones, which it then takes)."""
    started = _in_order(state.queue, state.free_gpus)
    rest = list(state.queue)[len(started):]
    if not rest:
        return started
    shadow_s, extra = reservation(state, rest[0], started)
    free = state.free_gpus - sum(j.gpus for j in started)
    for job in rest[1:]:
        if job.gpus > free:
            continue
        if state.now_s + job.estimate_s <= shadow_s:
            started.append(job)
            free -= job.gpus
        elif job.gpus <= extra:
            started.append(job)
            free -= job.gpus
            extra -= job.gpus
    return started


POLICIES = {"FCFS": fcfs, "priority": priority, "fair share": fair_share, "EASY backfilling": easy_backfill}


# --- the trace -----------------------------------------------------------------------------------

# The most jobs a trace may hold (a limit the library sets, not a measurement): the simulator's time grows
# faster than the number of jobs (each event looks through the waiting queue), and a trace is drawn to be
# replayed in a lesson cell; a larger one keeps the cell busy for minutes.
MAX_JOBS = 5_000


def check_job_count(name: str, count: int) -> None:
    """Refuse a trace of more than ``MAX_JOBS`` jobs, naming ``name``."""
    if count > MAX_JOBS:
        raise ValueError(f"{name} must be at most {MAX_JOBS:,} jobs, got {count:,}: the simulator's time grows "
                         "faster than the number of jobs (each event looks through the waiting queue), so a "
                         "larger trace keeps a cell busy for minutes; simulate fewer jobs or a shorter span")


def synthetic_trace(n_jobs: int = 60, n_gpus: int = 8, seed: int = 0, mean_interarrival_s: float = 600.0,
                    median_duration_s: float = 1800.0, duration_sigma: float = 1.0,
                    gpu_choices: Sequence[int] = (1, 2, 4, 8), gpu_weights: Sequence[float] = (0.5, 0.2, 0.2, 0.1),
                    users: Sequence[str] = ("ana", "ben", "chen"), user_weights: Sequence[float] = (0.6, 0.25, 0.15),
                    high_priority_share: float = 0.1, max_overestimate: float = 3.0) -> list:
    """A seeded job trace from stated distributions (not a published trace): arrivals a Poisson
    process (exponential gaps, mean ``mean_interarrival_s``); durations log-normal (median
    ``median_duration_s``, log-space sigma ``duration_sigma``); GPUs per job drawn from
    ``gpu_choices`` with ``gpu_weights`` (capped at ``n_gpus``); the user from ``users`` with
    ``user_weights``; ``high_priority_share`` of jobs have priority 1; each estimate is the true
    duration times a uniform factor in [1, ``max_overestimate``] (users ask for more than they use)."""
    limits.steps("n_jobs", n_jobs, what="jobs drawn one after another")
    check_job_count("n_jobs", n_jobs)
    _positive_int("n_gpus", n_gpus)
    for name, value in (("mean_interarrival_s", mean_interarrival_s), ("median_duration_s", median_duration_s)):
        _positive(name, value)
    validation.number("duration_sigma", duration_sigma, low=0)
    validation.number("max_overestimate", max_overestimate, low=1)
    validation.number("high_priority_share", high_priority_share, low=0, high=1)
    gpu_choices = [validation.integer("each of gpu_choices (GPUs per job)", g, low=1)
                   for g in validation.items("gpu_choices", gpu_choices)]
    gpu_weights = _weights("gpu_weights", gpu_weights)
    users = [validation.text("each of users", u, allow_empty=False) for u in validation.items("users", users)]
    user_weights = _weights("user_weights", user_weights)
    if len(gpu_choices) != len(gpu_weights) or not gpu_choices:
        raise ValueError("gpu_choices and gpu_weights must be non-empty and of the same length")
    if len(users) != len(user_weights) or not users:
        raise ValueError("users and user_weights must be non-empty and of the same length")
    rng = random.Random(seed)
    t, jobs = 0.0, []
    for i in range(n_jobs):
        t += rng.expovariate(1.0 / mean_interarrival_s)
        duration = median_duration_s * math.exp(rng.gauss(0.0, duration_sigma))
        gpus = min(n_gpus, rng.choices(list(gpu_choices), weights=list(gpu_weights))[0])
        user = rng.choices(list(users), weights=list(user_weights))[0]
        prio = 1 if rng.random() < high_priority_share else 0
        estimate = duration * rng.uniform(1.0, max_overestimate)
        jobs.append(Job(f"j{i:03d}", user, round(t, 3), gpus, round(duration, 3), round(estimate, 3), prio))
    return jobs


# --- the simulator -------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobRecord:
    """When a job arrived, started and ended (seconds), and so how long it waited."""

    job: Job
    start_s: float
    end_s: float

    @property
    def wait_s(self) -> float:
        return self.start_s - self.job.arrival_s


@dataclass
class ClusterResult:
    """One simulated run. ``busy_gpu_s``: GPU-seconds running jobs; ``idle_gpu_s``: powered GPUs
    doing nothing from the first arrival to the last end (``held_idle_gpu_s`` of them allocated to
    a job still waiting for the rest of its GPUs); ``timeline``: (time_s, busy GPUs) steps."""

    policy: str
    n_gpus: int
    records: list
    unfinished: list
    start_s: float
    makespan_s: float
    busy_gpu_s: float
    held_idle_gpu_s: float
    timeline: list
    gang: bool = True
    deadlocks: int = 0
    idle_watts: float | None = None
    idle_watts_source: str = ""

    @property
    def idle_gpu_s(self) -> float:
        return self.n_gpus * (self.makespan_s - self.start_s) - self.busy_gpu_s

    @property
    def utilisation(self) -> float:
        """Busy GPU-seconds over powered GPU-seconds (0..1)."""
        span = self.n_gpus * (self.makespan_s - self.start_s)
        return self.busy_gpu_s / span if span > 0 else 0.0

    @property
    def waits_s(self) -> list:
        return [r.wait_s for r in self.records]

    @property
    def mean_wait_s(self) -> float:
        return sum(self.waits_s) / len(self.records) if self.records else float("nan")

    def wait_percentile_s(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of queue waits, nearest-rank."""
        q = validation.number("q (a percentile)", q, low=0, high=100)
        waits = sorted(self.waits_s)
        if not waits:
            return float("nan")
        return waits[min(len(waits) - 1, max(0, math.ceil(q / 100 * len(waits)) - 1))]

    @property
    def idle_joules(self) -> float | None:
        """Energy of the idle-but-powered GPUs, ``idle_gpu_s x idle_watts``; None without a figure."""
        return None if self.idle_watts is None else self.idle_gpu_s * self.idle_watts

    def busy_gpus_at(self, t_s: float) -> int:
        """GPUs running jobs at time ``t_s`` (from the timeline's steps)."""
        busy = 0
        for when, gpus in self.timeline:
            if when > t_s:
                break
            busy = gpus
        return busy

    def window(self, start_s: float, end_s: float) -> Window:
        """Busy and idle GPU-seconds between ``start_s`` and ``end_s`` (a fixed horizon, the same
        for every policy: see the module docstring), integrated from the timeline's steps."""
        start_s, end_s = validation.number("start_s", start_s), validation.number("end_s", end_s)
        if end_s <= start_s:
            raise ValueError(f"end_s must be after start_s, got {start_s} and {end_s}")
        busy, t, level = 0.0, start_s, self.busy_gpus_at(start_s)
        for when, gpus in self.timeline:
            if when <= start_s:
                continue
            if when >= end_s:
                break
            busy += level * (when - t)
            t, level = when, gpus
        busy += level * (end_s - t)
        return Window(self.policy, self.n_gpus, start_s, end_s, busy, self.idle_watts, self.idle_watts_source)

    def summary(self) -> str:
        energy = (f"{plain_number(self.idle_joules / 3.6e6)} kWh at {self.idle_watts:g} W per idle GPU "
                  f"({self.idle_watts_source or 'source not given'})" if self.idle_watts is not None
                  else "energy not given (no idle-power figure)")
        extra = f"; {len(self.unfinished)} jobs never started" if self.unfinished else ""
        extra += f"; {self.deadlocks} deadlock(s) broken" if self.deadlocks else ""
        return (f"{self.policy}: {len(self.records)} jobs on {self.n_gpus} GPUs, mean wait "
                f"{self.mean_wait_s / 3600:.2f} h (95th percentile {self.wait_percentile_s(95) / 3600:.2f} h), "
                f"utilisation {self.utilisation:.0%}, idle {self.idle_gpu_s / 3600:.1f} GPU-hours: {energy}{extra}")


@dataclass(frozen=True)
class Window:
    """A fixed stretch of a simulated run: ``busy_gpu_s`` of the ``n_gpus x seconds`` powered
    GPU-seconds between ``start_s`` and ``end_s``; ``idle_gpu_s`` the rest."""

    policy: str
    n_gpus: int
    start_s: float
    end_s: float
    busy_gpu_s: float
    idle_watts: float | None = None
    idle_watts_source: str = ""

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def idle_gpu_s(self) -> float:
        return self.n_gpus * self.seconds - self.busy_gpu_s

    @property
    def utilisation(self) -> float:
        return self.busy_gpu_s / (self.n_gpus * self.seconds)

    @property
    def idle_joules(self) -> float | None:
        return None if self.idle_watts is None else self.idle_gpu_s * self.idle_watts


def steady_window(jobs: Sequence[Job], skip_fraction: float = 0.1) -> tuple:
    """``(start_s, end_s)``: the arrival period of ``jobs`` less its first ``skip_fraction``
    (the empty cluster filling up) and everything after the last arrival (the drain)."""
    if not jobs:
        raise ValueError("jobs must hold at least one job")
    if not (isinstance(skip_fraction, (int, float)) and 0 <= skip_fraction < 1):
        raise ValueError(f"skip_fraction must be within [0, 1), got {skip_fraction!r}")
    first = min(j.arrival_s for j in jobs)
    last = max(j.arrival_s for j in jobs)
    if last <= first:
        raise ValueError("the jobs arrive at one instant: there is no arrival period to read")
    return first + skip_fraction * (last - first), last


def simulate(jobs: Sequence[Job], n_gpus: int, policy: Policy = fcfs, name: str | None = None,
             gang: bool = True, idle_watts: float | None = None, idle_watts_source: str = "") -> ClusterResult:
    """Run ``jobs`` on ``n_gpus`` GPUs under ``policy`` (SimPy events at every arrival and end).
    ``gang=False`` ignores the policy's order and hands GPUs out one at a time to the waiting jobs
    in turn (see the module docstring). ``idle_watts``: power of one idle GPU, with its source."""
    simpy = require("simpy", "the cluster simulation")  # lazy: simpy is an extra (scheduling)

    _positive_int("n_gpus", n_gpus)
    jobs = validation.items("jobs", jobs)
    check_job_count("jobs", len(jobs))
    for j in jobs:
        if not isinstance(j, Job):
            raise validation.ArgumentTypeError(f"jobs must be greenlab.cluster.Job objects, got {type(j).__name__}")
    jobs = sorted(jobs, key=lambda j: j.arrival_s)
    for j in jobs:
        if not 1 <= j.gpus <= n_gpus:
            raise ValueError(f"job {j.name} needs {j.gpus} GPUs; the cluster has n_gpus={n_gpus}")
        if not (j.duration_s > 0 and j.estimate_s >= j.duration_s):
            raise ValueError(f"job {j.name}: duration_s must be > 0 and estimate_s >= duration_s")
    validation.number("idle_watts", idle_watts, low=0, allow_none=True)
    validation.flag("gang", gang)
    if not callable(policy):
        raise TypeError(f"policy must be a function state -> jobs, got {type(policy).__name__}")
    label = name or getattr(policy, "__name__", "policy")
    env = simpy.Environment()
    sim = _Sim(env, n_gpus, policy, gang)
    for job in jobs:
        env.process(sim.arrive(job))
    env.run()
    start = jobs[0].arrival_s if jobs else 0.0
    end = max([r.end_s for r in sim.records], default=start)
    sim.account(end)
    return ClusterResult(label if gang else f"{label} (GPUs one at a time)", n_gpus,
                         sorted(sim.records, key=lambda r: r.job.arrival_s), list(sim.queue), start, end,
                         sim.busy_gpu_s, sim.held_gpu_s, sim.timeline, gang, sim.deadlocks,
                         idle_watts, idle_watts_source)


def compare_policies(jobs: Sequence[Job], n_gpus: int, policies: dict | None = None, **kwargs) -> dict:
    """``{name: ClusterResult}`` for each policy (default :data:`POLICIES`) on the same trace."""
    policies = POLICIES if policies is None else policies
    return {name: simulate(jobs, n_gpus, fn, name=name, **kwargs) for name, fn in policies.items()}


# --- helpers -------------------------------------------------------------------------------------

class _Sim:
    def __init__(self, env, n_gpus, policy, gang):
        self.env, self.n_gpus, self.policy, self.gang = env, n_gpus, policy, gang
        self.free, self.queue, self.running, self.records = n_gpus, [], [], []
        self.held: dict = {}
        self.usage: dict = {}
        self.busy_gpu_s = self.held_gpu_s = 0.0
        self.last_t = None
        self.timeline: list = []
        self.deadlocks = 0

    def account(self, now):
        if self.last_t is not None:
            busy = sum(r.job.gpus for r in self.running)
            self.busy_gpu_s += busy * (now - self.last_t)
            self.held_gpu_s += sum(self.held.values()) * (now - self.last_t)
        self.last_t = now

    def arrive(self, job):
        yield self.env.timeout(job.arrival_s - self.env.now)
        self.account(self.env.now)
        self.queue.append(job)
        self.schedule()

    def run(self, running):
        yield self.env.timeout(running.job.duration_s)
        self.account(self.env.now)
        self.running.remove(running)
        self.free += running.job.gpus
        self.records.append(JobRecord(running.job, running.start_s, self.env.now))
        self.schedule()

    def start(self, job):
        running = Running(job, self.env.now)
        self.queue.remove(job)
        self.running.append(running)
        self.env.process(self.run(running))

    def schedule(self):
        if self.gang:
            for job in self._ask_policy():
                self.free -= job.gpus
                self.start(job)
        else:
            self._one_at_a_time()
        self.timeline.append((self.env.now, sum(r.job.gpus for r in self.running)))

    def _ask_policy(self):
        now = self.env.now
        usage = dict(self.usage)
        for r in self.running:
            usage[r.job.user] = usage.get(r.job.user, 0.0) + r.job.gpus * (now - r.start_s)
        for rec in self.records:
            usage[rec.job.user] = usage.get(rec.job.user, 0.0) + rec.job.gpus * (rec.end_s - rec.start_s)
        state = ClusterState(now, self.n_gpus, self.free, tuple(self.queue), tuple(self.running), usage)
        chosen = list(self.policy(state) or [])
        seen, need = set(), 0
        for job in chosen:
            if job not in self.queue or job.name in seen:
                raise PolicyError(f"the policy started {getattr(job, 'name', job)!r}, which is not waiting "
                                  "(or was returned twice)")
            seen.add(job.name)
            need += job.gpus
        if need > self.free:
            raise PolicyError(f"the policy started jobs needing {need} GPUs with only {self.free} free")
        return chosen

    def _one_at_a_time(self):
        while True:
            handed = True
            while self.free > 0 and handed:
                handed = False
                for job in list(self.queue):
                    if self.free > 0 and self.held.get(job.name, 0) < job.gpus:
                        self.held[job.name] = self.held.get(job.name, 0) + 1
                        self.free -= 1
                        handed = True
            for job in list(self.queue):
                if self.held.get(job.name, 0) == job.gpus:
                    del self.held[job.name]
                    self.start(job)
            if self.running or not self.queue or self.free > 0:
                return
            # every GPU is held by jobs that each wait for more: a deadlock; take the holds back
            self.deadlocks += 1
            self.free += sum(self.held.values())
            self.held.clear()
            first = self.queue[0]
            self.held[first.name] = first.gpus
            self.free -= first.gpus


def _in_order(jobs, free) -> list:
    started = []
    for job in jobs:
        if job.gpus > free:
            break
        started.append(job)
        free -= job.gpus
    return started


def _weights(name, values) -> list:
    """Relative weights: finite, >= 0, not all zero."""
    out = [validation.number(f"each of {name}", w, low=0) for w in validation.items(name, values)]
    if out and not sum(out) > 0:
        raise ValueError(f"{name} must not all be zero, got {values!r}")
    return out


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
