"""Lesson 14's checkers: a correct answer written another way passes; each typical mistake fails
with its own hint; a stub is "not attempted"."""

import pytest

from greenlab.course import checks


def details(result):
    return " ".join(result.details) + " " + result.message


# --- EASY backfilling ------------------------------------------------------------------------------

def my_backfill(state, use_estimate=True, spare_used_up=True, past_reservation=True, reservation=True):
    """EASY written as a timeline of free GPUs: reserve the head job at the first estimated end
    where enough GPUs are free, then let later jobs in if they cannot disturb it."""
    length = (lambda j: j.estimate_s) if use_estimate else (lambda j: j.duration_s)
    free, chosen, waiting = state.free_gpus, [], list(state.queue)
    while waiting and waiting[0].gpus <= free:
        free -= waiting[0].gpus
        chosen.append(waiting.pop(0))
    if not waiting:
        return chosen
    head = waiting.pop(0)
    if not reservation:
        for j in waiting:
            if j.gpus <= free:
                chosen.append(j)
                free -= j.gpus
        return chosen
    releases = [(r.start_s + length(r.job), r.job.gpus) for r in state.running]
    releases += [(state.now_s + length(j), j.gpus) for j in chosen]
    at, shadow = free, None
    for when, gpus in sorted(releases):
        at += gpus
        if at >= head.gpus:
            shadow, spare = when, at - head.gpus
            break
    for j in waiting:
        fits_before = state.now_s + length(j) <= shadow
        if j.gpus <= free and (fits_before or (past_reservation and j.gpus <= spare)):
            chosen.append(j)
            free -= j.gpus
            if not fits_before and spare_used_up:
                spare -= j.gpus
    return chosen


def test_a_correct_backfill_written_differently_passes():
    result = checks.easy_backfill(my_backfill)
    assert result.passed, result.text()
    assert "14-job trace" in result.message


@pytest.mark.parametrize("wrong, hint", [
    (dict(use_estimate=False), "knows only each job's estimate_s"),
    (dict(spare_used_up=False), "no longer spare for the next"),
    (dict(past_reservation=False), "may still start when it uses only the spare GPUs"),
    (dict(reservation=False), "give that job a reservation"),
])
def test_each_backfilling_mistake_fails_with_its_own_hint(wrong, hint):
    result = checks.easy_backfill(lambda state: my_backfill(state, **wrong))
    assert result.status == checks.FAILED and hint in details(result), result.text()


def test_plain_fcfs_is_not_backfilling():
    from greenlab.techniques import cluster

    result = checks.easy_backfill.__wrapped__(cluster.fcfs)
    assert result.status == checks.FAILED and "look further down the queue" in details(result)


def test_a_policy_that_breaks_the_simulation_fails_without_raising():
    def sometimes_twice(state):
        chosen = my_backfill(state)
        return chosen + chosen[:1] if len(state.queue) > 5 else chosen

    result = checks.easy_backfill(sometimes_twice)
    assert result.status == checks.FAILED and "simulation failed" in result.message


def test_backfill_stub_is_not_attempted():
    assert checks.easy_backfill(None).status == checks.NOT_ATTEMPTED
    assert checks.easy_backfill(lambda state: None).status == checks.NOT_ATTEMPTED


# --- successive halving's promotion rule -----------------------------------------------------------

def my_promote(scores, eta, lowest=False, rounding="down", minimum=True, ties=True, drop_bottom=False):
    """The top 1/eta by ranking positions, written with a count and a cut-off score."""
    n = len(scores)
    count = n - n // eta if drop_bottom else (n // eta if rounding == "down" else -(-n // eta))
    if minimum:
        count = max(1, count)
    if count == 0:
        return []
    ranked = sorted(scores, reverse=not lowest)
    cut = ranked[count - 1]
    if not ties:
        order = sorted(range(n), key=lambda i: scores[i], reverse=not lowest)
        return order[:count]
    return [i for i in range(n) if (scores[i] <= cut if lowest else scores[i] >= cut)]


def test_a_correct_promotion_rule_written_differently_passes_in_any_order():
    result = checks.promote(lambda s, e: list(reversed(my_promote(s, e))))
    assert result.passed, result.text()


@pytest.mark.parametrize("wrong, hint", [
    (dict(lowest=True), "keep the highest scores"),
    (dict(drop_bottom=True), "not all but the bottom 1/eta"),
    (dict(rounding="up"), "rounded down"),
    (dict(minimum=False), "keep at least one"),
    (dict(ties=False), "ties are kept"),
])
def test_each_promotion_mistake_fails_with_its_own_hint(wrong, hint):
    result = checks.promote(lambda s, e: my_promote(s, e, **wrong))
    assert result.status == checks.FAILED and hint in details(result), result.text()


def test_promote_stub_is_not_attempted():
    assert checks.promote(None).status == checks.NOT_ATTEMPTED
    assert checks.promote(lambda s, e: None).status == checks.NOT_ATTEMPTED
