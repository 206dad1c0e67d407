"""Lesson 16 (the whole bill): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

from greenlab.course.checks.core import FAILED, Check, check_function, drawn_inputs, graded, variant_hint
from greenlab.techniques import lifecycle

# (training J, J per token, tokens, J per checkpoint write, writes, idle W, idle s)
_BILL_INPUTS = [
    (20.0, 0.005, 100_000, 0.02, 3, 5.0, 600.0),
    (1000.0, 0.25, 10, 1.5, 0, 40.0, 0.0),
    (3.5, 0.0002, 2_000_000, 0.0, 7, 0.0, 3600.0),
    (0.0, 0.01, 0, 0.5, 2, 12.5, 8.0),
]


def _bill_as_tuple(bill):
    """A learner's bill (a dict by phase) as a tuple in ``PHASES`` order, or a reason it is not one."""
    if not isinstance(bill, dict):
        return f"return a dict {{phase: joules}}, got {type(bill).__name__}"
    keys = set(bill)
    if keys != set(lifecycle.PHASES):
        missing = [p for p in lifecycle.PHASES if p not in keys]
        extra = sorted(str(k) for k in keys - set(lifecycle.PHASES))
        return ("the bill's keys must be exactly " + ", ".join(repr(p) for p in lifecycle.PHASES)
                + (f"; missing {', '.join(repr(p) for p in missing)}" if missing else "")
                + (f"; not a phase: {', '.join(extra)}" if extra else ""))
    return tuple(bill[p] for p in lifecycle.PHASES)


@graded(reference=("greenlab.techniques.lifecycle:lifecycle_bill",))
def lifecycle_bill(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(training_joules, joules_per_token, tokens, checkpoint_joules, writes,
    idle_watts, idle_seconds) -> {phase: joules}`` against ``gl.lifecycle.lifecycle_bill``: the four
    phases training, checkpoints, serving and idle, in joules."""
    inputs = _BILL_INPUTS + drawn_inputs(seed, "lifecycle_bill", _draw_bill)
    cases = [(args, tuple(lifecycle.lifecycle_bill(*args).values())) for args in inputs]

    def phases(training, checkpoints, serving, idle):
        return (training, checkpoints, serving, idle)

    wrong = [
        (lambda t, s, n, c, w, iw, i: phases(t, w * c, n * s, iw * i / 3600),
         "idle energy in joules is watts x seconds; dividing by 3,600 gives watt-hours."),
        (lambda t, s, n, c, w, iw, i: phases(t, c, n * s, iw * i),
         "every checkpoint write costs its energy: checkpoints = writes x joules per write."),
        (lambda t, s, n, c, w, iw, i: phases(t, w * c, s, iw * i),
         "serving costs joules per token for every token served: serving = tokens x joules per token."),
        (lambda t, s, n, c, w, iw, i: phases(t, w * c, n / s, iw * i),
         "multiply the tokens by the joules per token, do not divide."),
        (lambda t, s, n, c, w, iw, i: phases(t + w * c + n * s + iw * i, w * c, n * s, iw * i),
         "each phase holds its own joules: training is the training run's energy alone, not the total."),
        (lambda t, s, n, c, w, iw, i: phases(t, w * c, n * s, iw),
         "idle energy is the idle power times how long the machine waits: idle_watts x idle_seconds."),
    ]
    if fn is None or not callable(fn):
        return check_function(fn, cases, name="lifecycle_bill")
    reasons = []

    def as_tuple(*args):
        got = fn(*args)
        if got is None:
            return None
        out = _bill_as_tuple(got)
        if isinstance(out, str):
            reasons.append(out)
            return got
        return out

    as_tuple.__name__ = "lifecycle_bill"
    verdict = check_function(as_tuple, cases, rtol=1e-9, name="lifecycle_bill", hint=variant_hint(wrong))
    if reasons and verdict.status == FAILED:
        return Check(verdict.name, FAILED, verdict.message, [reasons[0], *verdict.details])
    return verdict


# (fixed a, per token a, fixed b, per token b)
_CROSSOVER_INPUTS = [
    (10.0, 0.008, 25.0, 0.004),   # a trains cheaper, b serves cheaper: they cross
    (25.0, 0.004, 10.0, 0.008),   # the same, arms swapped
    (10.0, 0.004, 25.0, 0.008),   # a is cheaper at every N: no crossing
    (10.0, 0.005, 30.0, 0.005),   # the same cost per token: parallel lines
    (40.0, 0.5, 40.0, 0.25),      # equal fixed costs: they meet at N = 0 only
    (1.0, 3.0, 4.0, 1.5),
]


@graded(reference=("greenlab.techniques.lifecycle:crossover_tokens",))
def crossover_tokens(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(fixed_a, per_token_a, fixed_b, per_token_b) -> tokens or None`` against
    ``gl.lifecycle.crossover_tokens``: the served tokens N > 0 where two lives cost the same, None where
    they never do."""
    inputs = _CROSSOVER_INPUTS + drawn_inputs(seed, "crossover_tokens", _draw_crossover)
    never = "None (no crossing at N > 0)"  # None itself reads as a placeholder to check_function

    def shown(value):
        return never if value is None else value

    cases = [(args, shown(lifecycle.crossover_tokens(*args))) for args in inputs]

    def inverted(fa, sa, fb, sb):
        return None if fa == fb else (sa - sb) / (fb - fa)

    def no_none(fa, sa, fb, sb):
        return None if sa == sb else (fb - fa) / (sa - sb)

    def no_zero(fa, sa, fb, sb):
        if sa == sb:
            return None
        n = (fb - fa) / (sa - sb)
        return n if n >= 0 else None

    def one_sided(fa, sa, fb, sb):
        return fb / sa if sa > sb else None

    wrong = [
        (inverted, "solve fixed_a + N per_token_a = fixed_b + N per_token_b for N: the difference in "
                   "fixed costs over the difference in costs per token, not the other way round."),
        (no_none, "a negative N is no crossing: where the lines meet only before any token is served "
                  "(or never), return None."),
        (no_zero, "at N = 0 nothing has been served yet: equal fixed costs meet only there, so return None."),
        (one_sided, "both lives pay their fixed cost: N = (fixed_b - fixed_a) / (per_token_a - per_token_b)."),
    ]
    wrong = [(lambda *a, f=f: shown(f(*a)), advice) for f, advice in wrong]
    if fn is None or not callable(fn) or _always_none(fn, inputs):
        return check_function(fn, cases, name="crossover_tokens")

    def answer(*args):
        return shown(fn(*args))

    answer.__name__ = "crossover_tokens"
    return check_function(answer, cases, rtol=1e-9, name="crossover_tokens", hint=variant_hint(wrong))


def _always_none(fn, inputs) -> bool:
    """True when ``fn`` returns None for every input (the exercise's placeholder), or raises."""
    try:
        return all(fn(*args) is None for args in inputs)
    except Exception:  # check_function reports the error itself
        return False


def _draw_bill(rng) -> tuple:
    return (round(rng.uniform(0.5, 5000.0), 3), round(rng.uniform(1e-5, 0.1), 6), rng.randint(0, 10**7),
            round(rng.uniform(0.0, 5.0), 4), rng.randint(0, 50), round(rng.uniform(0.0, 300.0), 2),
            round(rng.uniform(0.0, 86_400.0), 1))


def _draw_crossover(rng) -> tuple:
    # distinct costs in whole millijoules: no float tie decides whether the lines cross
    fixed = rng.sample(range(1, 100_000), 2)
    per_token = rng.sample(range(1, 1000), 2)
    return (fixed[0] / 1000, per_token[0] / 1000, fixed[1] / 1000, per_token[1] / 1000)
