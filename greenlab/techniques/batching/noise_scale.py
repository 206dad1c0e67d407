"""How big a batch helps (lesson 03 (03_batch_sizing)): the "simple" gradient noise scale B_simple of
McCandlish et al. (2018), measured from gradient norms at two batch sizes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from greenlab.base import validation
from greenlab.techniques.batching.inputs import _check_positive_int, _model_device, _snapshot, _xy


@dataclass
class NoiseScale:
    """Simple gradient noise scale B_simple = S / |G|^2 (McCandlish et al., 2018, appendix A).

    ``g2``: estimate of |G|^2, the squared norm of the true gradient; ``trace_cov``: estimate of
    S = tr(Sigma), the per-sample gradient covariance's trace; both averaged over ``n_estimates``
    independent pairs of batches. ``b_simple_low``/``_high``: 16th and 84th percentiles of a
    bootstrap over the pairs (a 68% interval)."""

    b_simple: float
    g2: float
    g2_std: float
    trace_cov: float
    trace_cov_std: float
    b_simple_low: float
    b_simple_high: float
    small_batch: int
    big_batch: int
    n_estimates: int
    seconds: float

    def summary(self) -> str:
        """One line: B_simple with its 68% bootstrap interval, the batch sizes and pairs it came from, and the
        seconds it took."""
        return (f"B_simple = {self.b_simple:.1f} (68% bootstrap interval {self.b_simple_low:.1f} to "
                f"{self.b_simple_high:.1f}) from {self.n_estimates} pairs of batches of "
                f"{self.small_batch} and {self.big_batch}, measured in {self.seconds:.1f} s")


def simple_noise_scale(small_sq_norm: float, big_sq_norm: float, small_batch: int,
                       big_batch: int) -> tuple:
    """(|G|^2, tr(Sigma), B_simple) from the squared gradient norms of one batch of
    ``small_batch`` and one of ``big_batch`` samples (McCandlish et al., 2018, appendix A.1):
    E|G_B|^2 = |G|^2 + tr(Sigma)/B, solved for the two unknowns. B_simple = tr(Sigma) / |G|^2
    (samples); inf when the |G|^2 estimate is not positive."""
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    small = validation.number("small_sq_norm", small_sq_norm, low=0)
    big = validation.number("big_sq_norm", big_sq_norm, low=0)
    g2 = (big_batch * big - small_batch * small) / (big_batch - small_batch)
    trace_cov = (small - big) / (1.0 / small_batch - 1.0 / big_batch)
    return g2, trace_cov, (trace_cov / g2 if g2 > 0 else math.inf)


def gradient_sq_norms(model, data, small_batch: int = 8, big_batch: int = 128, n_pairs: int = 20,
                      loss_fn=None, seed: int = 0) -> list:
    """``n_pairs`` pairs (|G_small|^2, |G_big|^2): squared norms of the gradient of the mean loss
    on a random batch of ``small_batch`` and one of ``big_batch`` samples (drawn with replacement
    from ``data``'s training split or a pair (x, y)), at the model's current weights. The model's
    state and gradients are restored afterwards. The raw input of ``simple_noise_scale``."""
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    _check_positive_int("n_pairs", n_pairs)
    x, y = _xy(data)
    loss_fn = loss_fn or F.cross_entropy
    dev = _model_device(model)
    g = torch.Generator().manual_seed(int(seed))
    saved = _snapshot(model.state_dict())
    pairs = []
    try:
        for _ in range(n_pairs):
            small = _grad_sq_norm(model, x, y, loss_fn, small_batch, g, dev)
            big = _grad_sq_norm(model, x, y, loss_fn, big_batch, g, dev)
            pairs.append((small, big))
    finally:
        model.zero_grad(set_to_none=True)
        model.load_state_dict(saved)
    return pairs


def gradient_noise_scale(model, data, loss_fn=None, small_batch: int = 8, big_batch: int = 128,
                         n_estimates: int = 20, seed: int = 0, n_bootstrap: int = 1000) -> NoiseScale:
    """Measure the simple gradient noise scale at the model's current weights.

    For each of ``n_estimates`` pairs, gradients of the mean loss are taken on a random batch of
    ``small_batch`` and one of ``big_batch`` samples (drawn with replacement from ``data``), and
    with E|G_B|^2 = |G|^2 + S/B:
        |G|^2 ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
        S     ~ (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big)
    B_simple is the ratio of the averages (less biased than the average of ratios).
    ``data``: a greenlab Dataset (its training split) or a pair of tensors (x, y).
    ``loss_fn``: mean-reduced loss(output, y); default cross-entropy.
    The model's state (weights, buffers) and gradients are restored afterwards.
    """
    _check_positive_int("small_batch", small_batch)
    _check_positive_int("big_batch", big_batch)
    if big_batch <= small_batch:
        raise ValueError(f"big_batch ({big_batch}) must be larger than small_batch ({small_batch})")
    _check_positive_int("n_estimates", n_estimates)
    t0 = time.perf_counter()
    g2s, covs = [], []
    for small, big in gradient_sq_norms(model, data, small_batch, big_batch, n_estimates, loss_fn, seed):
        g2, cov, _ = simple_noise_scale(small, big, small_batch, big_batch)
        g2s.append(g2)
        covs.append(cov)
    seconds = time.perf_counter() - t0
    g2_t, cov_t = torch.tensor(g2s, dtype=torch.float64), torch.tensor(covs, dtype=torch.float64)
    g2, cov = float(g2_t.mean()), float(cov_t.mean())
    low, high = _bootstrap_ratio(cov_t, g2_t, n_bootstrap, seed)
    std = (lambda t: float(t.std()) if t.numel() > 1 else 0.0)
    return NoiseScale(b_simple=cov / g2 if g2 > 0 else math.inf, g2=g2, g2_std=std(g2_t), trace_cov=cov,
                      trace_cov_std=std(cov_t), b_simple_low=low, b_simple_high=high,
                      small_batch=small_batch, big_batch=big_batch, n_estimates=n_estimates,
                      seconds=seconds)


def _grad_sq_norm(model, x, y, loss_fn, batch, generator, device) -> float:
    idx = torch.randint(0, x.shape[0], (batch,), generator=generator)
    xb, yb = x[idx].to(device), y[idx].to(device)
    model.zero_grad(set_to_none=True)
    loss_fn(model(xb), yb).backward()
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += float(p.grad.detach().double().pow(2).sum())
    return total


def _bootstrap_ratio(num, den, n, seed):
    if num.numel() < 2 or n < 1:
        r = float(num.mean() / den.mean())
        return r, r
    g = torch.Generator().manual_seed(int(seed) + 1)
    idx = torch.randint(0, num.numel(), (n, num.numel()), generator=g)
    ratios = num[idx].mean(1) / den[idx].mean(1)
    q = torch.quantile(ratios, torch.tensor([0.16, 0.84], dtype=torch.float64))
    return float(q[0]), float(q[1])
