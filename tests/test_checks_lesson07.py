"""Tests for the lesson-07 checker gl.check.most_uncertain."""

import torch

from greenlab.course import checks


def least_confident(probs, k):
    return probs.max(dim=1).values.argsort()[:k]


def highest_entropy(probs, k):
    entropy = -(probs * probs.clamp_min(1e-12).log()).sum(dim=1)
    return [int(i) for i in entropy.argsort(descending=True)[:k]]


def test_right_answers_pass_in_any_form():
    assert checks.most_uncertain(least_confident).passed
    assert checks.most_uncertain(highest_entropy).passed  # the cases agree for both measures
    assert checks.most_uncertain(lambda p, k: tuple(reversed(least_confident(p, k).tolist()))).passed


def test_most_confident_fails_with_hint():
    result = checks.most_uncertain(lambda p, k: p.max(dim=1).values.argsort(descending=True)[:k])
    assert result.status == checks.FAILED
    assert any("most sure" in d for d in result.details)


def test_wrong_count_fails():
    result = checks.most_uncertain(lambda p, k: least_confident(p, k + 1))
    assert result.status == checks.FAILED


def test_placeholders_are_not_attempted():
    assert checks.most_uncertain(None).status == checks.NOT_ATTEMPTED
    assert checks.most_uncertain(lambda p, k: None).status == checks.NOT_ATTEMPTED


def test_learner_exception_is_reported_not_raised():
    def broken(p, k):
        raise RuntimeError("oops")

    result = checks.most_uncertain(broken)
    assert result.status == checks.FAILED
    assert any("oops" in d for d in result.details)


# --- early stopping with patience and min_delta -------------------------------------------------

def counting_stop(accs, patience, min_delta):
    """A correct rule written as a scan for the last improvement."""
    if not accs:
        return False
    best_i, best = 0, accs[0]
    for i, a in enumerate(accs[1:], start=1):
        if a - best > min_delta:
            best_i, best = i, a
    return len(accs) - 1 - best_i >= patience


def hint_of(result):
    return " ".join(result.details)


def test_early_stopping_accepts_a_correct_rule_written_differently():
    result = checks.early_stopping(counting_stop)
    assert result.passed, result.text()


def test_early_stopping_without_min_delta_fails_with_its_hint():
    result = checks.early_stopping(lambda accs, p, d: counting_stop(accs, p, 0.0))
    assert result.status == checks.FAILED and "more than min_delta" in hint_of(result)


def test_early_stopping_against_the_previous_evaluation_fails_with_its_hint():
    def previous(accs, patience, min_delta):
        since = 0
        for before, now in zip(accs, accs[1:]):
            since = 0 if now - before > min_delta else since + 1
        return since >= patience

    result = checks.early_stopping(previous)
    assert result.status == checks.FAILED and "best so far, not with the one before" in hint_of(result)


def test_early_stopping_one_evaluation_late_fails_with_its_hint():
    result = checks.early_stopping(lambda accs, p, d: counting_stop(accs, p + 1, d))
    assert result.status == checks.FAILED and "not one later" in hint_of(result)


def test_early_stopping_stub_is_not_attempted():
    assert checks.early_stopping(None).status == checks.NOT_ATTEMPTED
    assert checks.early_stopping(lambda a, p, d: None).status == checks.NOT_ATTEMPTED


# --- the double-buffered loader -----------------------------------------------------------------

def generator_prefetch(batches, depth):
    """A correct loader written with a condition variable and a deque instead of a Queue."""
    import collections
    import threading

    buffer, cond = collections.deque(), threading.Condition()
    state = {"done": False, "error": None, "stop": False}

    def fill():
        try:
            for item in batches:
                with cond:
                    cond.wait_for(lambda: len(buffer) < depth or state["stop"])
                    if state["stop"]:
                        return
                    buffer.append(item)
                    cond.notify_all()
        except Exception as exc:
            state["error"] = exc
        with cond:
            state["done"] = True
            cond.notify_all()

    threading.Thread(target=fill, daemon=True).start()
    try:
        while True:
            with cond:
                cond.wait_for(lambda: buffer or state["done"])
                if buffer:
                    item = buffer.popleft()
                    cond.notify_all()
                elif state["error"] is not None:
                    raise state["error"]
                else:
                    return
            yield item
    finally:
        with cond:
            state["stop"] = True
            cond.notify_all()


def test_prefetch_accepts_a_correct_loader_written_differently():
    result = checks.prefetch_loader(generator_prefetch)
    assert result.passed, result.text()


def test_plain_pass_through_fails_with_its_hint():
    result = checks.prefetch_loader(lambda batches, depth: iter(batches))
    assert result.status == checks.FAILED and "background thread" in hint_of(result)


def test_loading_everything_ahead_fails_with_its_hint():
    def greedy(batches, depth):
        import queue
        import threading

        q = queue.Queue()  # unbounded

        def fill():
            for item in batches:
                q.put(item)
            q.put(StopIteration)

        threading.Thread(target=fill, daemon=True).start()
        while (item := q.get()) is not StopIteration:
            yield item

    result = checks.prefetch_loader(greedy)
    assert result.status == checks.FAILED and "bound the queue" in hint_of(result)


def test_swallowing_the_loader_error_fails_with_its_hint():
    def silent(batches, depth):
        def safe():
            try:
                yield from batches
            except RuntimeError:
                return
        return generator_prefetch(safe(), depth)

    result = checks.prefetch_loader(silent)
    assert result.status == checks.FAILED and "truncated epoch" in hint_of(result)


def test_dropping_the_last_batch_fails_with_its_hint():
    def short(batches, depth):
        items = list(generator_prefetch(batches, depth))
        return iter(items[:-1])

    result = checks.prefetch_loader(short)
    assert result.status == checks.FAILED and "last batch is missing" in hint_of(result)


def test_a_thread_that_outlives_an_early_stop_fails_with_its_hint():
    def leaky(batches, depth):  # right in every other way: its thread blocks on the full queue for ever
        import queue
        import threading

        ready, end = queue.Queue(maxsize=depth), object()

        def fill():
            try:
                for item in batches:
                    ready.put((item, None))
            except Exception as exc:
                ready.put((end, exc))
                return
            ready.put((end, None))

        threading.Thread(target=fill, daemon=True).start()
        while True:
            item, error = ready.get()
            if item is end:
                if error is not None:
                    raise error
                return
            yield item

    result = checks.prefetch_loader(leaky)
    assert result.status == checks.FAILED and "stops early" in result.text() and "threading.Event" in hint_of(result)


def test_prefetch_stub_is_not_attempted():
    assert checks.prefetch_loader(None).status == checks.NOT_ATTEMPTED
    assert checks.prefetch_loader(lambda b, d: None).status == checks.NOT_ATTEMPTED
