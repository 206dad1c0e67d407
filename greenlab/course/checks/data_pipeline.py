"""Lesson 07 (the data pipeline): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _sorted_indices, check_function, drawn_inputs, graded, is_placeholder,
    exception_text, variant_hint)
from greenlab.techniques.stopping import should_stop


@graded(reference=("greenlab.techniques.active:most_uncertain",))
def most_uncertain(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(probs, k) -> indices`` of the ``k`` samples the model is least sure
    of: the lowest top-class probability. ``probs`` is a float tensor (N, classes) whose rows sum
    to 1; any order of the returned indices is accepted (list, tuple or tensor of ints)."""
    import torch

    cases = [
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 1), [1]),
        ((torch.tensor([[0.9, 0.1], [0.5, 0.5], [0.6, 0.4], [0.99, 0.01]]), 2), [1, 2]),
        ((torch.tensor([[0.4, 0.3, 0.3], [0.8, 0.1, 0.1], [0.34, 0.33, 0.33], [0.5, 0.45, 0.05]]), 2), [0, 2]),
        ((torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.2, 0.6], [0.05, 0.9, 0.05]]), 3), [0, 1, 2]),
        ((torch.tensor([[0.7, 0.3], [0.55, 0.45]]), 0), []),
    ]
    for probs, k in drawn_inputs(seed, "most_uncertain", _draw_probs):
        top = torch.tensor(probs).max(dim=1).values
        cases.append(((torch.tensor(probs), k), sorted(top.argsort()[:k].tolist())))

    def as_sorted_indices(probs, k):
        return _sorted_indices(fn(probs, k))

    def hint(args, expected, got):
        probs, k = args
        most_sure = sorted(probs.max(dim=1).values.argsort(descending=True)[:k].tolist())
        if k and got == most_sure and got != expected:
            return "those are the samples the model is most sure of; pick the lowest top-class probability."
        if isinstance(got, list) and len(got) != k:
            return f"return exactly k = {k} indices."
        return None

    as_sorted_indices.__name__ = "most_uncertain"
    if is_placeholder(fn):
        return Check("most_uncertain", NOT_ATTEMPTED, "the function is not defined yet.")
    return check_function(as_sorted_indices, cases, name="most_uncertain", hint=hint)


@graded(reference=("greenlab.techniques.stopping:should_stop",))
def early_stopping(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(accuracies, patience, min_delta) -> bool`` against
    ``gl.stopping.should_stop``: stop once ``patience`` evaluations in a row failed to beat the
    best so far by more than ``min_delta`` (the first evaluation sets the best)."""
    inputs = [
        ([0.5, 0.6, 0.7], 2, 0.0),
        ([0.5, 0.6, 0.6, 0.6], 2, 0.0),
        ([0.5, 0.6, 0.6], 2, 0.0),
        ([0.5, 0.505, 0.509, 0.508], 3, 0.01),
        ([0.5, 0.505, 0.52, 0.51], 2, 0.01),
        ([0.7, 0.6, 0.65, 0.62], 3, 0.0),
        ([0.7, 0.6, 0.65], 3, 0.0),
        ([0.4], 1, 0.0),
        ([], 1, 0.0),
        ([0.5, 0.515, 0.52, 0.525, 0.53], 3, 0.01),
    ] + drawn_inputs(seed, "early_stopping", _draw_accuracies)
    cases = [(args, should_stop(*args)) for args in inputs]

    def ignores_min_delta(accs, patience, min_delta):
        return should_stop(accs, patience, 0.0)

    def against_previous(accs, patience, min_delta):
        since = 0
        for before, now in zip(accs, accs[1:]):
            since = 0 if now > before + min_delta else since + 1
        return since >= patience

    def off_by_one(accs, patience, min_delta):
        return should_stop(accs, patience + 1, min_delta) if patience > 0 else False

    def best_moves_on_small_gains(accs, patience, min_delta):
        best, since = None, 0
        for acc in accs:
            if best is None or acc > best + min_delta:
                best, since = acc, 0
            else:
                since += 1
                best = max(best, acc)
        return since >= patience

    wrong = [
        (ignores_min_delta, "an evaluation improves only when it beats the best by more than min_delta; "
                            "a smaller rise is noise and must not reset the count."),
        (against_previous, "compare each evaluation with the best so far, not with the one before it: "
                           "a dip and a partial recovery is no improvement."),
        (off_by_one, "stop as soon as patience evaluations in a row have not improved (not one later)."),
        (best_moves_on_small_gains, "keep the best unchanged when an evaluation does not improve by more than "
                                    "min_delta; otherwise small rises creep the bar up."),
    ]
    return check_function(fn, cases, name="early_stopping", hint=variant_hint(wrong))


@graded(reference=("greenlab.techniques.prefetch:prefetch",))
def prefetch_loader(fn: Any) -> Check:
    """Check a learner's ``fn(batches, depth) -> iterator``: the same items in the same order,
    the next item loaded before it is asked for, at most ``depth`` loaded items waiting, an
    error in ``batches`` raised to the consumer, and the loading thread stopped when the
    consumer stops early (the reference is ``gl.prefetch.prefetch``)."""
    import gc
    import threading
    import time

    name = "prefetch_loader"
    if is_placeholder(fn):
        return Check(name, NOT_ATTEMPTED, "the function is not defined yet.")
    if not callable(fn):
        return Check(name, FAILED, f"expected a function, got {type(fn).__name__}.")

    class Source:
        def __init__(self, n, fail_at=None):
            self.n, self.fail_at, self.pulled = n, fail_at, 0
            self.second = threading.Event()
            self.pullers: list = []  # the threads that iterate it

        def __iter__(self):
            self.pullers.append(threading.current_thread())
            for i in range(self.n):
                if i == self.fail_at:
                    raise RuntimeError("planted loader error")
                self.pulled += 1
                if self.pulled >= 2:
                    self.second.set()
                yield ("batch", i)

    def call(source, depth):
        result = fn(source, depth)
        if is_placeholder(result):
            return None
        return iter(result)

    def run_checks(problems):
        try:
            for n, depth in ((0, 2), (1, 2), (5, 2), (7, 1)):
                it = call(Source(n), depth)
                if it is None:
                    problems.append(NOT_ATTEMPTED)
                    return
                got = list(it)
                want = [("batch", i) for i in range(n)]
                if got != want:
                    hint = ("the last batch is missing: hand over every item before stopping." if got == want[:-1]
                            else "hand over every item of batches once, in order.")
                    problems.append(f"{n} batches, depth {depth}: got {got[:8]!r}. Hint: {hint}")
                    break
            source = Source(20)
            it = call(source, 2)
            first = next(it)
            ahead = source.second.wait(timeout=2.0)
            time.sleep(0.3)
            if not ahead:
                problems.append("after the first batch was handed over, the next one was not loaded while the "
                                "consumer was busy. Hint: load in a background thread (threading.Thread) that "
                                "puts batches into a queue.Queue, so the next batch is ready when asked for.")
            elif source.pulled > 2 + 2:
                problems.append(f"with depth 2 the loader had already pulled {source.pulled} of 20 batches while "
                                "the consumer held the first. Hint: bound the queue (queue.Queue(maxsize=depth)) "
                                "so at most depth batches wait in memory.")
            if first != ("batch", 0):
                problems.append(f"the first item was {first!r}, expected ('batch', 0).")
            failing = call(Source(4, fail_at=2), 2)
            try:
                got = list(failing)
                problems.append(f"a loader that fails at its third batch gave {got!r} and no error. Hint: catch the "
                                "exception in the thread, pass it through the queue and raise it in the consumer: "
                                "a silent stop trains on a truncated epoch.")
            except RuntimeError as exc:
                if "planted" not in str(exc):
                    problems.append(f"the loader's error came back as {exc!r}, not the original one.")
            stopping = Source(50)
            early = call(stopping, 2)
            next(early)
            stopping.second.wait(timeout=2.0)  # its thread loads ahead
            close = getattr(early, "close", None)
            if callable(close):
                close()  # the consumer stops early, as a break out of a for loop does
            del early
            gc.collect()
            left = [t for t in stopping.pullers if t is not threading.current_thread()]
            for thread in left:
                thread.join(timeout=2.0)
            if any(t.is_alive() for t in left):
                problems.append("when the consumer stops early (a break, or closing the generator), your loader's "
                                "thread keeps running, blocked on the full queue for ever: a thread leaks with every "
                                "early stop, and one left inside PyTorch work when Python exits can crash the "
                                "process. Hint: let the thread's put give up once a stop flag (threading.Event) is "
                                "set (put with a timeout, in a loop), and set the flag in a finally around the loop "
                                "that yields.")
        except Exception as exc:  # the learner's code failed: report it, never raise
            problems.append(f"your function raised {exception_text(exc)}")
        finished.set()

    problems: list = []
    finished = threading.Event()
    worker = threading.Thread(target=run_checks, args=(problems,), daemon=True)
    worker.start()
    worker.join(timeout=10.0)
    if not worker.is_alive() and not finished.is_set() and not problems:
        problems.append("the checks of your loader stopped before they finished (an error the checker could not "
                        "report); run your loader on a small list to see it.")
    if worker.is_alive():
        problems.append("your loader did not finish within 10 s (it hangs). Hint: when batches ends or raises, "
                        "the thread must still put an end marker (or the error) into the queue, or the "
                        "consumer waits for ever.")
    problems = list(problems)  # a copy: a hanging worker may still append
    if NOT_ATTEMPTED in problems:
        return Check(name, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if problems:
        return Check(name, FAILED, f"{len(problems)} problem(s).", problems)
    return Check(name, PASSED, "same batches in order, loaded ahead within depth, errors reach the consumer.")


def _draw_accuracies(rng) -> tuple:
    # accuracies to 2 decimals and a min_delta that is no multiple of 0.01: no float tie decides a case
    return ([round(rng.uniform(0.3, 0.9), 2) for _ in range(rng.randint(0, 8))], rng.randint(1, 3),
            rng.choice([0.0, 0.005, 0.015]))


def _draw_probs(rng) -> tuple:
    # distinct top-class probabilities: no tie decides which k are the least sure
    n, classes = rng.randint(2, 8), rng.randint(2, 4)
    rows = []
    for top in rng.sample(range(100 // classes + 1, 100), n):
        row = [(100 - top) / 100 / (classes - 1)] * (classes - 1)
        row.insert(rng.randrange(classes), top / 100)
        rows.append(row)
    return rows, rng.randint(0, n)
