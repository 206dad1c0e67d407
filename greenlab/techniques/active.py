"""Active learning's selection rule (lesson 07): label next the samples the model is least sure of."""

from __future__ import annotations


def most_uncertain(probs, k: int) -> list:
    """Indices of the ``k`` rows of ``probs`` (predicted class probabilities, one row per
    unlabelled sample) with the lowest top-class probability, least confident first."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= len(probs):
        raise ValueError(f"k must be a whole number from 0 to {len(probs)} (the rows of probs), got {k!r}")
    return probs.max(dim=1).values.argsort()[:k].tolist()
