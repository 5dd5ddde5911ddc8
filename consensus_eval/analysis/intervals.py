"""Confidence intervals for proportions: what a share of k out of n can be trusted to mean."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import UsageError

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
        raise UsageError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
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
        raise UsageError(f"need counts >= 0 with a positive total, got {both}, {only_a}, {only_b}, {neither}")
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


def cluster_ratio_draws(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """A cluster bootstrap of ratios of sums: ``num`` and ``den`` are keys x clusters (each cluster's
    sum of the numerator and of the denominator, e.g. errors found and errors judged in one base record);
    each of ``n_boot`` draws resamples the clusters with replacement (a multinomial count vector, made in
    blocks of about 2 million counts so memory stays bounded) and gives, per key, sum(num) / sum(den) over
    the drawn clusters. Returns ``n_boot`` x keys, NaN where a draw has a zero denominator. Units that
    share a cluster (several plants of one base record, several cases of one source conversation) move
    together, so the spread is that of the clusters, not of the units as if they were independent."""
    keys, n = num.shape
    out = np.full((n_boot, keys), np.nan)
    if n_boot <= 0 or n == 0:
        return out
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, 2_000_000 // n))
    p = np.full(n, 1.0 / n)
    for start in range(0, n_boot, block):
        m = min(block, n_boot - start)
        w = rng.multinomial(n, p, size=m).astype(float)  # m x clusters
        top, bottom = w @ num.T, w @ den.T
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + m] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)
    return out


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """The percentile interval of bootstrap draws (NaN draws left out); (None, None) without any."""
    ok = draws[~np.isnan(draws)]
    if ok.size == 0:
        return None, None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ok, [tail, 100 - tail])
    return float(low), float(high)


def cluster_variance(num: Sequence[float], den: Sequence[float]) -> float:
    """The variance of the ratio ``p = sum(num) / sum(den)`` when the units come in clusters (cluster ``c``
    contributes ``num[c]`` of ``den[c]``): the linearised (sandwich) estimator
    ``C / (C - 1) * sum_c (num_c - p * den_c)^2 / sum(den)^2`` with ``C`` clusters. With one unit a
    cluster it is ``p(1 - p) / (n - 1)``; for a mean it is what OLS on a constant with cluster-robust errors
    gives (statsmodels ``cov_type="cluster"``). 0 with fewer than two clusters."""
    total = float(sum(den))
    c = len(den)
    if c < 2 or total <= 0:
        return 0.0
    p = float(sum(num)) / total
    return c / (c - 1) * sum((y - p * m) ** 2 for y, m in zip(num, den, strict=True)) / total ** 2


def effective_n(p: float, n: int, variance: float, units: int | None = None) -> float:
    """How many independent units ``n`` correlated ones are worth for a proportion ``p``: ``n / deff`` with
    the design effect ``deff = variance / (p(1 - p) / n)`` (at least 1), capped at ``units`` (e.g. the
    distinct edits among n plants: a copy adds no information). At p = 0 or 1 the design effect cannot be
    estimated and is taken as 1 (the cap still applies) (Korn & Graubard 1998)."""
    if n <= 0:
        return 0.0
    srs = p * (1 - p) / n
    deff = max(1.0, variance / srs) if srs > 0 else 1.0
    return min(n / deff, float(units if units is not None else n))


def wilson_p(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """:func:`wilson` for a proportion ``p`` on a (possibly fractional, effective) sample size ``n > 0``."""
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(0.0, p * (1 - p)) / n + z2 / (4 * n * n))
    return (0.0 if p <= 0 else max(0.0, centre - half)), (1.0 if p >= 1 else min(1.0, centre + half))


def needed_to_separate(a: float = 0.7, b: float = 0.9, z: float = Z95) -> int:
    """The fewest independent units with which an observed share of ``a`` has a Wilson interval that
    excludes ``b`` and an observed ``b`` one that excludes ``a`` (70% and 90%: 21): below it a judge
    finding 70% of a type cannot be told from one finding 90%."""
    n = 1
    while not (wilson_p(a, n, z)[1] < b and wilson_p(b, n, z)[0] > a):
        n += 1
    return n


class Share(Proportion):
    """``k`` of ``n`` (planted errors, deductions...) and its 95% interval, counted in independent units:
    ``edits`` distinct units (distinct edits, records, items) in ``clusters`` clusters (base records, cases)
    stand behind the ``n``; ``effective_n`` is what the interval counts (the Wilson interval of ``value`` on
    it: ``method`` ``"cluster"``, made by :func:`share`). ``method`` ``"wilson"``: the plain Wilson interval
    on ``n``."""

    edits: int | None = None
    clusters: int | None = None
    effective_n: float | None = None
    method: Literal["wilson", "cluster"] = "wilson"


def share(pairs: Sequence[tuple[str, float]], units: int | None = None) -> Share:
    """The share of successes among units given as ``(cluster, success 0/1)``, its interval counted in
    clusters (module docstring); ``units``: the distinct edits or records among them (caps the effective
    size; default: all)."""
    n = len(pairs)
    k = round(sum(v for _, v in pairs))
    if n == 0:
        return Share(k=0, n=0, value=None, low=None, high=None, edits=0, clusters=0, effective_n=0.0)
    num: dict[str, float] = defaultdict(float)
    den: dict[str, float] = defaultdict(float)
    for c, v in pairs:
        num[c] += v
        den[c] += 1
    clusters = list(num)
    p = k / n
    neff = effective_n(p, n, cluster_variance([num[c] for c in clusters], [den[c] for c in clusters]),
                       units if units is not None else n)
    low, high = wilson_p(p, neff)
    return Share(k=k, n=n, value=p, low=low, high=high, edits=units if units is not None else n,
                 clusters=len(clusters), effective_n=neff, method="cluster")
