"""Lesson 15 (federated learning and edge inference): its exercise checkers, exposed as
``gl.check.<name>``."""

from __future__ import annotations

from typing import Any

import torch

from greenlab.course.checks.core import (
    FAILED, NOT_ATTEMPTED, PASSED, Check, _not_a_function, _short, check_function, drawn, drawn_inputs, graded,
    variant_hint)
from greenlab.techniques import federated
from greenlab.techniques.federated import fedavg


@graded(reference=("greenlab.techniques.federated:fedavg",))
def fedavg_aggregate(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(states, sample_counts) -> state dict``: FedAvg's weighted average
    of every tensor (parameters and buffers), weights n_k / n, against
    ``greenlab.techniques.federated.fedavg`` on tiny state dicts; with ``seed`` (grade time),
    on three more rounds drawn from it."""
    name = "fedavg_aggregate"
    verdict = _not_a_function(fn, name)
    if verdict is not None:
        return verdict
    cases = _fedavg_cases() + _drawn_fedavg_cases(seed)
    wrong = [
        (_unweighted, "weight each client by its share of the samples, n_k / sum(n): a plain mean "
                      "lets a client with 10 images count as much as one with 1,000."),
        (_unnormalised, "divide by the total number of samples (the weights n_k / n add up to 1): "
                        "a sum weighted by n_k alone grows with the data."),
        (_per_client, "normalise by the total of the sample counts, not by the number of clients."),
        (_parameters_only, "average every entry of the state dict, buffers too (BatchNorm's running_mean "
                           "and running_var are part of the model the clients send): not only parameters."),
    ]
    failures, placeholders = [], 0
    for states, counts in cases:
        expected = fedavg(states, counts)
        call = f"{name}(states with keys {list(states[0])}, sample_counts={counts})"
        try:
            got = fn([{k: v.clone() for k, v in s.items()} for s in states], list(counts))
        except Exception as exc:  # the learner's code failed: report it, never raise
            failures.append(f"{call} raised {type(exc).__name__}: {exc}")
            continue
        if got is None or got is NotImplemented:
            placeholders += 1
            failures.append(f"{call} returned {got!r}; expected a state dict")
            continue
        problem = _state_problem(got, expected)
        if problem is None:
            continue
        advice = next((text for variant, text in wrong if _state_problem(got, variant(states, counts)) is None),
                      None)
        failures.append(f"{call}: {problem}" + (f" Hint: {advice}" if advice else ""))
    if placeholders == len(cases):
        return Check(name, NOT_ATTEMPTED, "the function still returns a placeholder (None); fill it in.")
    if failures:
        wrong_count = len(failures)
        return Check(name, FAILED, f"{wrong_count} of {len(cases)} test inputs give a wrong result.", failures)
    return Check(name, PASSED, f"all {len(cases)} test inputs give the expected result.")


@graded(reference=("greenlab.techniques.federated:round_bytes",))
def round_bytes(fn: Any, seed: int | None = None) -> Check:
    """Check a learner's ``fn(state, n_clients) -> bytes`` one FedAvg round sends: every client
    downloads the global model and uploads its own, every tensor counted as elements x bytes each."""
    def state(*tensors):
        names = ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
        return dict(zip(names, tensors))

    inputs = [
        (state(torch.zeros(4, 3), torch.zeros(4)), 5),
        (state(torch.zeros(2, 2, dtype=torch.float16), torch.zeros(2, dtype=torch.float16)), 3),
        (state(torch.zeros(8, 4), torch.zeros(8), torch.zeros(8), torch.ones(8), torch.tensor(3)), 10),
        (state(torch.zeros(3, 3, dtype=torch.float64)), 1),
        (state(torch.zeros(5)), 0),
    ] + drawn_inputs(seed, "round_bytes", _draw_state)
    cases = [(args, federated.round_bytes(*args)) for args in inputs]

    def one_way(s, n):
        return federated.payload_bytes(s) * n

    def elements(s, n):
        return 2 * n * sum(t.numel() for t in s.values())

    def float32_always(s, n):
        return 2 * n * 4 * sum(t.numel() for t in s.values())

    def parameters_only(s, n):
        return 2 * n * sum(t.numel() * t.element_size() for k, t in s.items() if k in ("weight", "bias"))

    wrong = [
        (one_way, "each client both downloads the global model and uploads its update: two transfers per client."),
        (elements, "count bytes, not elements: numel() x element_size() (4 bytes for float32)."),
        (float32_always, "read each tensor's own element size (element_size()): not every tensor is float32."),
        (parameters_only, "buffers are sent too (BatchNorm's running statistics and counter): count every "
                          "tensor of the state dict."),
    ]
    return check_function(fn, cases, name="round_bytes", hint=variant_hint(wrong))


# --- the planted mistakes, and the tiny states -------------------------------------------------

def _fedavg_cases():
    g = torch.Generator().manual_seed(14)

    def client(scale):
        return {"conv.weight": torch.randn(2, 1, 3, 3, generator=g) * scale,
                "conv.bias": torch.randn(2, generator=g),
                "norm.running_mean": torch.randn(2, generator=g),
                "norm.running_var": torch.rand(2, generator=g) + 0.5,
                "norm.num_batches_tracked": torch.tensor(int(10 * scale)),
                "head.weight": torch.randn(3, 2, generator=g)}

    return [
        ([client(1.0), client(2.0)], [30, 10]),
        ([client(1.0), client(0.5), client(3.0)], [5, 50, 45]),
        ([client(1.0), client(1.5)], [1, 1]),
        ([client(2.0)], [7]),
        ([client(1.0), client(1.0), client(4.0), client(0.1)], [100, 1, 1, 2]),
    ]


def _drawn_fedavg_cases(seed):
    rng = drawn(seed, "fedavg_aggregate")
    if rng is None:
        return []
    g = torch.Generator().manual_seed(rng.randint(0, 2 ** 31))
    out = []
    for _ in range(3):
        clients = rng.randint(2, 6)
        states = [{"conv.weight": torch.randn(2, 1, 3, 3, generator=g) * rng.uniform(0.1, 3),
                   "conv.bias": torch.randn(2, generator=g),
                   "norm.running_mean": torch.randn(2, generator=g),
                   "norm.running_var": torch.rand(2, generator=g) + 0.5,
                   "norm.num_batches_tracked": torch.tensor(rng.randint(0, 50)),
                   "head.weight": torch.randn(3, 2, generator=g)} for _ in range(clients)]
        out.append((states, [rng.randint(1, 500) for _ in range(clients)]))
    return out


def _combine(states, weights, keys=None):
    out = {}
    for key, first in states[0].items():
        if keys is not None and key not in keys:
            out[key] = first.clone()
            continue
        total = sum(w * s[key].double() for w, s in zip(weights, states))
        out[key] = total.to(first.dtype) if first.is_floating_point() else torch.round(total).to(first.dtype)
    return out


def _unweighted(states, counts):
    return _combine(states, [1 / len(states)] * len(states))


def _unnormalised(states, counts):
    return _combine(states, [float(n) for n in counts])


def _per_client(states, counts):
    return _combine(states, [n / len(states) for n in counts])


def _parameters_only(states, counts):
    total = sum(counts)
    keys = [k for k in states[0] if "running" not in k and "num_batches" not in k]
    return _combine(states, [n / total for n in counts], keys)


def _state_problem(got, expected) -> str | None:
    """None when ``got`` is the same state dict as ``expected`` (same keys, shapes, dtypes and
    values within 1e-5); otherwise one sentence saying how it differs."""
    if not isinstance(got, dict):
        return f"expected a dict of tensors (a state dict), got {type(got).__name__} {_short(got)}."
    missing = [k for k in expected if k not in got]
    if missing:
        return f"the result lacks {missing}: every key of the clients' state dicts belongs in it."
    extra = [k for k in got if k not in expected]
    if extra:
        return f"the result has keys the clients' states do not: {extra}."
    for key, want in expected.items():
        have = got[key]
        if not isinstance(have, torch.Tensor):
            return f"{key}: expected a tensor, got {type(have).__name__}."
        if tuple(have.shape) != tuple(want.shape):
            return f"{key}: shape {tuple(have.shape)}, expected {tuple(want.shape)}."
        if have.dtype != want.dtype:
            return (f"{key}: dtype {have.dtype}, expected {want.dtype} "
                    "(keep each tensor's dtype; round integer counters).")
        diff = (have.detach().double() - want.double()).abs().max().item() if want.numel() else 0.0
        if not diff <= 1e-5 * (1 + want.double().abs().max().item()):
            return f"{key}: values differ from FedAvg's by up to {diff:.3g}."
    return None


def _draw_state(rng) -> tuple:
    dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16, torch.float64])
    out, inp = rng.randint(1, 9), rng.randint(1, 9)
    shapes = {"weight": (out, inp), "bias": (out,), "running_mean": (out,), "running_var": (out,),
              "num_batches_tracked": ()}
    state = {name: torch.zeros(shape, dtype=torch.long if name == "num_batches_tracked" else dtype)
             for name, shape in list(shapes.items())[:rng.randint(1, 5)]}
    return (state, rng.randint(0, 12))
