"""Summary statistics over repeats: mean, spread and a 95% Student-t interval for the mean."""

from __future__ import annotations

import dataclasses
import math

from greenlab.base import validation

# An interval needs at least this many paired repeats: with 2, Student's t has one degree of
# freedom (t = 12.7) and the interval is too wide to read, so none is printed.
MIN_REPEATS_FOR_INTERVAL = 3


@dataclasses.dataclass
class Stat:
    """Summary of one metric over repeats. ``ci95``: half-width of a 95% Student-t interval
    for the mean (None with fewer than 2 values). ``n`` counts runs that had a value."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    ci95: float | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def interval(self):
        """(low, high) of the 95% interval for the mean, clipped at 0 (these metrics are never
        negative), or None with fewer than MIN_REPEATS_FOR_INTERVAL values."""
        if self.ci95 is None or self.n < MIN_REPEATS_FOR_INTERVAL:
            return None
        return max(0.0, self.mean - self.ci95), self.mean + self.ci95

    @property
    def clipped(self) -> bool:
        """True when :meth:`interval`'s low end was raised to 0 (mean - half-width < 0)."""
        return self.interval() is not None and self.mean - self.ci95 < 0


def summarize(values) -> Stat:
    """Mean, sample standard deviation, min, max and 95% t-interval of the values; None and
    non-finite values (a run without that figure) are left out and not counted in ``n``."""
    xs = [float(v) for v in _values("values", values) if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Stat(0, None, None, None, None, None)
    mean = sum(xs) / n
    if n < 2:
        return Stat(1, mean, None, xs[0], xs[0], None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return Stat(n, mean, std, min(xs), max(xs), t_quantile_975(n - 1) * std / math.sqrt(n))


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF,
    which is integrated numerically from the density)."""
    return t_quantile(0.975, df)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t (0.5 < p < 1) with ``df`` degrees of freedom; 0.95 gives
    the half-width of a 90% interval, as an equivalence test (two one-sided tests at 5%) uses."""
    df = validation.integer("df", df, low=1, high=10**6)
    p = validation.number("p", p, low=0.5, high=1, low_open=True, high_open=True)
    lo, hi = 0.0, 20.0 if df > 1 else 700.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_from_zero(mid, df) < p - 0.5:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- helpers ----------------------------------------------------------------------------------

def _values(name: str, values) -> list:
    """A list of numbers or None (missing), else a clear error naming ``name``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise validation.ArgumentTypeError(f"{name} must be a list of numbers (None for missing), got {values!r}")
    out = list(values)
    for i, v in enumerate(out):
        if v is not None and (isinstance(v, (bool, str, bytes)) or not hasattr(v, "__float__")):
            raise validation.ArgumentTypeError(f"{name}[{i}] must be a number or None, got {v!r}")
    return out


def _t_cdf_from_zero(t: float, df: int, intervals: int = 2000) -> float:
    """P(0 <= T <= t) for Student's t, by Simpson's rule on the density."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def pdf(x):
        return c * (1 + x * x / df) ** (-(df + 1) / 2)

    h = t / intervals
    total = pdf(0.0) + pdf(t)
    for i in range(1, intervals):
        total += (4 if i % 2 else 2) * pdf(i * h)
    return total * h / 3
