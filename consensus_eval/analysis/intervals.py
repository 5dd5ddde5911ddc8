"""Confidence intervals for proportions: what a share of k out of n can be trusted to mean."""

from __future__ import annotations

import math
from typing import Any

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


def paired_difference(both: int, only_a: int, only_b: int, neither: int, z: float = Z95) -> tuple[float, float, float]:
    """``(difference, low, high)``: the difference between two proportions measured on the same items,
    ``p_a - p_b`` with ``p_a = (both + only_a) / n`` and ``p_b = (both + only_b) / n``, and its
    interval by Newcombe's square-and-add method for paired data (Newcombe 1998, Stat Med 17:2635,
    method 10: the Wilson intervals of the two proportions, combined with the phi correlation of the
    paired table, corrected towards 0 by n/2 when positive). It stays inside [-1, 1] and is honest at
    0 and n, where the Wald interval for a paired difference is not.

    E.g. 59 items both, 6 only a, 16 only b, 80 neither: -0.0621 [-0.1186, -0.0046]. ``n`` must be > 0.
    """
    n = both + only_a + only_b + neither
    if n <= 0 or min(both, only_a, only_b, neither) < 0:
        raise ValueError(f"need counts >= 0 with a positive total, got {both}, {only_a}, {only_b}, {neither}")
    ka, kb = both + only_a, both + only_b
    pa, pb = ka / n, kb / n
    la, ua = wilson(ka, n, z)
    lb, ub = wilson(kb, n, z)
    margins = ka * (n - ka) * kb * (n - kb)
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_a * only_b
        corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
        phi = corrected / math.sqrt(margins)
    d = pa - pb
    low = d - math.sqrt(max(0.0, (pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2))
    high = d + math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    return d, max(-1.0, low), min(1.0, high)


def scipy_stats() -> Any:
    """``scipy.stats`` (typed Any: scipy ships no type information), imported on first use: it takes
    0.3 s, which a command that computes no interval from it should not pay at start."""
    from scipy import stats

    return stats
