"""Lesson 05 (efficient architecture search): its exercise checkers, exposed as ``gl.check.<name>``."""

from __future__ import annotations

import math
from typing import Any

from greenlab.checks.core import (
    Check,
    _not_a_function,
    _sorted_indices,
    check_function,
    is_placeholder,
)

# Lesson 05 (architecture search) checkers: separable_conv_flops, pareto_indices.


def separable_conv_flops(fn: Any) -> Check:
    """Check a learner's ``fn(c_in, c_out, kernel_size, height, width) -> (standard, separable)``:
    forward FLOPs of one k x k convolution layer, stride 1, 'same' padding (the output is
    height x width), no bias, counted like PyTorch's FlopCounterMode (2 FLOPs per multiply-add).
    Standard: 2 c_in c_out k^2 H W. Depthwise-separable (depthwise k x k, then pointwise 1 x 1):
    2 c_in k^2 H W + 2 c_in c_out H W."""
    inputs = [(1, 1, 1, 1, 1), (3, 8, 3, 4, 4), (16, 32, 3, 14, 14), (8, 8, 5, 7, 7), (32, 64, 1, 2, 3)]
    cases = [((ci, co, k, h, w), (2 * ci * co * k * k * h * w, 2 * ci * k * k * h * w + 2 * ci * co * h * w))
             for ci, co, k, h, w in inputs]

    def as_pair(c_in, c_out, kernel_size, height, width):
        got = fn(c_in, c_out, kernel_size, height, width)
        if is_placeholder(got):
            return got
        return tuple(float(v) for v in got)

    def hint(args, expected, got):
        ci, co, k, h, w = args
        if not isinstance(got, tuple) or len(got) != 2:
            return "return two numbers: (standard_flops, separable_flops)."
        if math.isclose(got[0], expected[0] / 2) or math.isclose(got[1], expected[1] / 2):
            return "count 2 FLOPs per multiply-add (one multiply, one add), as FlopCounterMode does."
        if math.isclose(got[1], 2 * co * k * k * h * w + 2 * ci * co * h * w) and ci != co:
            return "the depthwise part has one k x k filter per INPUT channel: 2 c_in k^2 H W."
        if math.isclose(got[1], 2 * ci * k * k * h * w) or math.isclose(got[1], 2 * ci * co * h * w):
            return "a separable layer is both parts: the depthwise k x k and the pointwise 1 x 1."
        return None

    as_pair.__name__ = "separable_conv_flops"
    verdict = _not_a_function(fn, "separable_conv_flops")
    if verdict is not None:
        return verdict
    return check_function(as_pair, cases, rtol=1e-9, atol=0.0, name="separable_conv_flops", hint=hint)


def pareto_indices(fn: Any) -> Check:
    """Check a learner's ``fn(points) -> indices`` of the Pareto front of ``points``, a list of
    (accuracy, joules) pairs where higher accuracy and lower joules are better. A point is on the
    front when no other point is at least as good on both and strictly better on one (equal
    points all stay). Any order of the returned indices is accepted."""
    from greenlab.search import pareto_front

    inputs = [
        [(0.9, 10.0)],
        [(0.8, 5.0), (0.9, 10.0), (0.7, 8.0)],
        [(0.5, 1.0), (0.6, 2.0), (0.7, 3.0), (0.65, 4.0), (0.7, 5.0)],
        [(0.8, 4.0), (0.8, 4.0), (0.6, 6.0)],
        [(0.9, 2.0), (0.5, 1.0), (0.95, 9.0), (0.9, 3.0), (0.4, 1.0)],
    ]
    cases = []
    for pts in inputs:
        dicts = [{"i": i, "accuracy": a, "joules": j} for i, (a, j) in enumerate(pts)]
        cases.append(((pts,), sorted(p["i"] for p in pareto_front(dicts))))

    def as_sorted_indices(points):
        return _sorted_indices(fn(points))

    def hint(args, expected, got):
        (pts,) = args
        if not isinstance(got, list):
            return None
        best = max(range(len(pts)), key=lambda i: pts[i][0])
        if got == [best] and len(expected) > 1:
            return "the front holds every trade-off, not only the most accurate point."
        if len(got) > len(expected) and set(expected) <= set(got):
            return "drop the dominated points: another point is at least as accurate AND uses no more joules."
        if len(got) < len(expected) and set(got) <= set(expected):
            return ("a point is dominated only by one that is at least as good on both and strictly "
                    "better on one; equal points do not dominate each other.")
        return "fewer joules is better: check the direction of each objective."

    as_sorted_indices.__name__ = "pareto_indices"
    verdict = _not_a_function(fn, "pareto_indices")
    if verdict is not None:
        return verdict
    return check_function(as_sorted_indices, cases, name="pareto_indices", hint=hint)
