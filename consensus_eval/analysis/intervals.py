"""Confidence intervals for proportions: what a share of k out of n can be trusted to mean."""

from __future__ import annotations

import math

from pydantic import BaseModel

#: z for a two-sided 95% interval
Z95 = 1.959963984540054


class Proportion(BaseModel):
    """``k`` successes out of ``n`` trials: ``value = k / n`` (None when n = 0) and its Wilson score
    interval ``[low, high]`` at ``level`` (None when n = 0). The Wilson interval stays inside [0, 1] and
    is honest at 0 / n and n / n, where the normal ("Wald") interval collapses to a point."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None
    level: float = 0.95


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the proportion ``k / n`` (Wilson 1927; Newcombe 1998, method 3).

    ``wilson(0, 10) == (0.0, 0.2775...)``, ``wilson(10, 10) == (0.7225..., 1.0)``. ``n`` must be > 0.
    """
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # at 0 / n and n / n the bound is exactly 0 or 1 (not 1e-16 off, from rounding)
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def proportion(k: int, n: int) -> Proportion:
    """``k`` of ``n`` with its 95% Wilson interval (all None for n = 0)."""
    if n == 0:
        return Proportion(k=k, n=0, value=None, low=None, high=None)
    low, high = wilson(k, n)
    return Proportion(k=k, n=n, value=k / n, low=low, high=high)
