"""Lesson 09 (the capstone): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.base.units import plain_number
from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, check_function, drawn_inputs, graded, is_placeholder, number_or_none)
from greenlab.course.recipes import one_cycle as reference_one_cycle
from greenlab.training.loop import TrainConfig


@graded(code=False)
def capstone_submission(config: Any, result: Any = None, board: Any = None,
                        target_accuracy: float | None = None) -> Check:
    """Check a learner's capstone attempt: ``config`` is a valid ``TrainConfig`` aimed at
    ``target_accuracy`` (fraction 0-1), ``result`` (a ``RunResult`` from ``gl.train``) reached
    it, and ``board`` (a ``gl.Leaderboard``) holds an entry with the run's energy (joules)."""
    name = "capstone_submission"
    if is_placeholder(config):
        return Check(name, NOT_ATTEMPTED, "my_recipe() still returns None: return a gl.TrainConfig.")
    if not isinstance(config, TrainConfig):
        return Check(name, FAILED, f"my_recipe() must return a gl.TrainConfig, got {type(config).__name__}.",
                     ["build one with gl.TrainConfig(precision=..., batch_size=..., ...)"])
    problems = []
    if target_accuracy is not None and config.target_accuracy != target_accuracy:
        problems.append(f"set target_accuracy={target_accuracy!r} (got {config.target_accuracy!r}), so the run "
                        "is judged on the same target as the recipes.")
    if config.target_accuracy is not None and not config.stop_at_target:
        problems.append("stop_at_target=False keeps training after the target: energy spent after it is wasted.")
    if problems:
        return Check(name, FAILED, "the recipe's config needs a change.", problems)
    if result is None:
        return Check(name, FAILED, "the config is valid, but no run was given: train it with gl.train.")
    if not hasattr(result, "joules_to_target") or not hasattr(result, "joules"):
        return Check(name, FAILED, f"result must be a RunResult from gl.train, got {type(result).__name__}.")
    reached = result.joules_to_target is not None
    figures = [("joules", result.joules)] + ([("joules_to_target", result.joules_to_target),
                                              ("seconds_to_target", result.seconds_to_target)] if reached else [])
    impossible = [f"result.{what} is {value!r}" for what, value in figures if not _energy(value)]
    if impossible:
        return Check(name, FAILED, "the run's figures are not ones a run can have (a finite number > 0): "
                     + "; ".join(impossible) + ".", ["pass the RunResult gl.train returned, unchanged."])
    if result.joules_to_target is None:
        best = (f"{result.best_accuracy:.1%}" if isinstance(result.best_accuracy, (int, float))
                and not isinstance(result.best_accuracy, bool) else "n/a")
        return Check(name, FAILED, f"the run did not reach the target (best accuracy {best}, status "
                     f"{result.status}).", ["try more epochs, a larger learning rate, or a wider model; "
                                            "patience stops a run that has stalled."])
    if board is None or not hasattr(board, "entries"):
        return Check(name, FAILED, "the run reached the target; now add it to the leaderboard "
                     "(board.add_result(name, run)) and pass the board.")
    mine = [e for e in board.entries() if math.isclose(e.get("joules", -1.0), float(result.joules), rel_tol=1e-9)]
    if not mine:
        return Check(name, FAILED, "the run reached the target, but the leaderboard has no entry with its "
                     "energy: add it with board.add_result(name, run).")
    entry = mine[-1]
    rank = next((e["rank"] for e in board.ranked() if e.get("id") == entry.get("id")), None)
    return Check(name, PASSED, f"your recipe reached the target with {plain_number(result.joules_to_target, 4)} J "
                 f"(rank {rank} of {len(board.entries())} on the leaderboard).",
                 [f"time to target {plain_number(result.seconds_to_target)} s; CO2e of the whole run "
                  f"{entry.get('co2e_g', float('nan')):.3g} g"
                  + (" (energy is an estimate)" if result.estimated else "")])


def _energy(value) -> bool:
    """True for an energy (or a time) a run can report: a finite real number > 0."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


@graded(reference=("greenlab.course.recipes:one_cycle",))
def one_cycle(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(step, total_steps, warmup_steps) -> multiplier`` against
    ``gl.recipes.one_cycle``: a linear rise to 1 over the warm-up steps ((step + 1) / warmup at
    step < warmup), then a linear fall to 0 at ``total_steps``."""
    inputs = [(0, 10, 4), (1, 10, 4), (3, 10, 4), (4, 10, 4), (7, 10, 4), (10, 10, 4), (12, 10, 4),
              (0, 5, 0), (2, 5, 0), (0, 8, 1), (5, 8, 1)]
    inputs += drawn_inputs(seed, "one_cycle", _draw_one_cycle)
    cases = [(args, reference_one_cycle(*args)) for args in inputs]

    def hint(args, expected, got):
        step, total, warm = args
        value = number_or_none(got)
        if value is None:
            return None
        if step < warm and math.isclose(value, step / warm):
            return "count the warm-up from (step + 1) / warmup_steps, so step 0 already trains (not at 0)."
        if step >= warm and math.isclose(value, max(0.0, (total - step) / total)):
            return "the fall starts after the warm-up: divide by (total_steps - warmup_steps), not total_steps."
        if step >= total and value < 0:
            return "never go below 0 past total_steps: clip the multiplier at 0."
        if step >= warm and math.isclose(value, 1.0):
            return "after the warm-up the rate falls linearly to 0 at total_steps; it does not stay at 1."
        return None

    return check_function(fn, cases, rtol=1e-9, atol=1e-12, name="one_cycle", hint=hint)


def _draw_one_cycle(rng) -> tuple:
    total = rng.randint(2, 60)
    return (rng.randint(0, total + 3), total, rng.randint(0, total // 2))
