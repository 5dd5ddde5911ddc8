"""Systems side by side: which system writes better records, by how much, and whether the difference is
more than noise.

A case may name the ``system`` that wrote its record (a scribe model, a prompt version) and the
``source`` conversation it was written from (:class:`~consensus_eval.domain.cases.Case`). When the same
conversation is written up by several systems the design is *paired*: each system's record of one
conversation is compared with another's record of the same conversation, which removes the
conversation's own difficulty from the comparison. Without ``source``, cases of different systems
with the same conversation text are paired.

What :func:`leaderboard` computes, per key (a dimension id, or ``total``), from the panel's consensus
scores:

- per system, the mean score with a 95% t interval for the cluster design: the cases of one source
  conversation form a cluster, the variance is the linearised (cluster-robust) one of a ratio mean
  (:func:`~consensus_eval.analysis.intervals.cluster_variance`) and the quantile Student's t with (clusters
  - 1) degrees of freedom; below :data:`MIN_SOURCES` conversations its coverage drops on skewed scores
  (docs/validity.md, "Coverage") and the report says so;
- per pair of systems, the difference of means ``a - b`` with a 95% t interval and a two-sided p value:
  on the conversations both systems wrote up when they share at least 2 (paired), else on all their
  cases (unpaired). The test is named in ``test``: up to :data:`EXACT_PAIRS` pairs the exact sign-flip
  permutation test of the mean difference (every sign pattern, scipy's ``permutation_test``), above it
  the paired t test; unpaired, the exact permutation test of the difference of means while the
  relabellings number at most :data:`EXACT_SPLITS`, else Welch's t test. Differences that are all the
  same (a deterministic judge) get the exact test's p in closed form (``2^(1-n)`` paired), never 0. The
  p values of all pairs of one key are Holm-adjusted (a family of comparisons per key); ``verdict``
  names the better system when the adjusted p is below 0.05 and at least :data:`MIN_PAIRS` pairs (or
  cases on each side) stand behind it. The intervals are not adjusted: an interval that excludes 0
  beside "no difference" is the Holm adjustment (or the exact test) at work, and the table says so;
- per pair on paired conversations, how often each system's total beat the other's (win / tie / loss;
  a tie is a difference within ``tie_margin`` points);
- per system, the judges' interval alpha on its cases alone (``alpha_by_system``): the run's alpha
  pools every system's cases, and a pooled alpha can hide a system the judges disagree on.

These figures rest on the panel's scores; they say how the judges rank the systems, not how clinicians
would: the validity section (:mod:`consensus_eval.analysis.validity`) says how far the panel can be trusted.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from itertools import combinations
from typing import Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import UnknownName
from consensus_eval.analysis.agreement import judge_value, matrix, panel_value
from consensus_eval.analysis.alpha import Alpha, krippendorff_alpha
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.intervals import cluster_variance, scipy_stats
from consensus_eval.domain.cases import Case

#: the system name of a case that names none, when others do
UNNAMED = "(unnamed)"
#: the significance level of a verdict (after Holm's adjustment)
ALPHA_LEVEL = 0.05
#: the fewest pairs (paired) or cases on each side (unpaired) behind a verdict: below 6 pairs no sign pattern
#: of the exact test reaches p < 0.05 (its smallest p is 2^(1-n)), so no verdict is possible
MIN_PAIRS = 6
#: up to this many pairs a paired difference is tested exactly (all 2^n sign patterns: 4,096 at 12)
EXACT_PAIRS = 12
#: up to this many relabellings of the two groups an unpaired difference is tested exactly (C(n_a + n_b, n_a))
EXACT_SPLITS = 20_000
#: below this many source conversations a system's t interval covers less than 0.93 of the time on skewed
#: scores (0.91 at 10 for totals with a long tail of poor records: docs/validity.md, "Coverage"): the report warns
MIN_SOURCES = 20
#: a spread of differences this small against their size counts as none (all differences the same, up to
#: the rounding of the means they are made of)
_SAME = 1e-9

#: the test behind a difference's p value: ``sign_flip`` (exact, paired), ``paired_t``, ``permutation``
#: (exact, unpaired), ``welch_t``
Test = Literal["sign_flip", "paired_t", "permutation", "welch_t"]


class Estimate(BaseModel):
    """A mean with its 95% interval: ``value`` over ``n`` cases, ``low``/``high`` its bounds (None when
    fewer than 2 cases or 2 source conversations: no interval)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0


class SystemScores(BaseModel):
    """One system: ``n_cases`` cases, ``n_sources`` distinct source conversations, and per key (dimension
    ids, ``total``) the mean panel score with its cluster-bootstrap interval (``means``)."""

    system: str
    n_cases: int
    n_sources: int
    means: dict[str, Estimate]


class Difference(BaseModel):
    """System ``a`` minus system ``b`` on one key, in points (positive: ``a`` scored higher).

    ``paired``: computed on the ``n`` source conversations both wrote up; else on their ``n`` cases in
    all. ``low``/``high``: 95% t interval of the difference, not adjusted for the other pairs (None when
    it cannot be computed, or when every difference is the same and too few pairs stand behind it to
    exclude any other value); ``p``: two-sided p value of the test named in ``test`` (module docstring);
    ``p_holm``: Holm-adjusted over the pairs of systems for this key; ``verdict``: ``a`` or ``b`` (the
    better one, when ``p_holm`` < 0.05 with at least :data:`MIN_PAIRS` pairs, or cases on each side) or
    ``none`` (no difference shown); ``few``: fewer than :data:`MIN_PAIRS` pairs (or cases on a side), so
    no verdict whatever ``p``. ``wins``/``ties``/``losses``: on paired conversations, how often ``a``'s
    score beat, tied (within the tie margin) or lost to ``b``'s.
    """

    a: str
    b: str
    key: str
    paired: bool
    n: int
    diff: float | None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    p_holm: float | None = None
    test: Test | None = None
    few: bool = False
    verdict: Literal["a", "b", "none"] = "none"
    wins: int = 0
    ties: int = 0
    losses: int = 0


class Leaderboard(BaseModel):
    """The systems ranked by their mean total (best first), their pairwise differences and each system's
    own inter-judge alpha (module docstring). ``design``: ``paired`` (every pair shares conversations),
    ``unpaired`` or ``mixed``; ``keys``: the dimension ids and ``total``; ``tie_margin``: points within
    which two totals tie; ``min_sources``: :data:`MIN_SOURCES` (a system with fewer source conversations
    has an interval that may cover less than 95%)."""

    systems: list[SystemScores]
    differences: list[Difference]
    keys: list[str]
    design: Literal["paired", "unpaired", "mixed"]
    alpha_by_system: dict[str, Alpha] = {}
    tie_margin: float = 0.5
    min_sources: int = MIN_SOURCES

    def system(self, name: str) -> SystemScores:
        return next(s for s in self.systems if s.system == name)

    def difference(self, a: str, b: str, key: str = "total") -> Difference:
        """The difference ``a - b`` on ``key`` (either order is found; the sign follows ``a``)."""
        for d in self.differences:
            if d.key == key and (d.a, d.b) == (a, b):
                return d
            if d.key == key and (d.a, d.b) == (b, a):
                flip = {"a": "b", "b": "a", "none": "none"}[d.verdict]
                return d.model_copy(update={
                    "a": a, "b": b, "diff": None if d.diff is None else -d.diff,
                    "low": None if d.high is None else -d.high, "high": None if d.low is None else -d.low,
                    "verdict": flip, "wins": d.losses, "losses": d.wins})
        raise UnknownName((a, b, key))


def source_key(case: Case) -> str:
    """What pairs cases of different systems: the case's ``source``, else a hash of its conversation."""
    if case.source is not None:
        return "source:" + case.source
    conv = json.dumps(case.content["conversation"], ensure_ascii=False, sort_keys=True)
    return "text:" + hashlib.sha256(conv.encode()).hexdigest()[:16]


def systems_of(cases: Sequence[Case]) -> list[str]:
    """The systems the cases name, in order of first appearance (a case naming none is :data:`UNNAMED`
    when others do); empty when no case names one."""
    if not any(c.system for c in cases):
        return []
    return list(dict.fromkeys(c.system or UNNAMED for c in cases))


def leaderboard(cases: Sequence[Case], cons: Sequence[CaseConsensus], dims: Sequence[str], judges: Sequence[str],
                *, tie_margin: float = 0.5) -> Leaderboard | None:
    """The leaderboard of the systems the cases name (None with fewer than 2 systems). ``cons`` is the
    consensus of ``cases`` (matched by case id); ``dims`` the rubric's dimension ids."""
    names = systems_of(cases)
    if len(names) < 2:
        return None
    keys = [*dims, "total"]
    by_id = {c.case_id: c for c in cons}
    sources = list(dict.fromkeys(source_key(c) for c in cases))
    src_index = {s: i for i, s in enumerate(sources)}
    sys_index = {s: i for i, s in enumerate(names)}
    # values[key][system, source]: the mean panel score of the system's cases of that source (NaN: none)
    values = {k: np.full((len(names), len(sources)), np.nan) for k in keys}
    sums = {k: np.zeros((len(names), len(sources))) for k in keys}
    counts = {k: np.zeros((len(names), len(sources))) for k in keys}
    n_cases = dict.fromkeys(names, 0)
    per_case: dict[str, dict[str, list[float]]] = {k: {n: [] for n in names} for k in keys}
    sys_sources: dict[str, set[int]] = {n: set() for n in names}
    for case in cases:
        name = case.system or UNNAMED
        n_cases[name] += 1
        c = by_id.get(case.id)
        si, so = sys_index[name], src_index[source_key(case)]
        sys_sources[name].add(so)
        if c is None:
            continue
        for k in keys:
            v = panel_value(c, k)
            if v is not None:
                per_case[k][name].append(v)
                sums[k][si, so] += v
                counts[k][si, so] += 1
    for k in keys:
        with np.errstate(invalid="ignore", divide="ignore"):
            values[k] = np.where(counts[k] > 0, sums[k] / np.maximum(counts[k], 1), np.nan)
    systems = []
    for name in names:
        si = sys_index[name]
        means = {k: cluster_mean(sums[k][si], counts[k][si]) for k in keys}
        systems.append(SystemScores(system=name, n_cases=n_cases[name], n_sources=len(sys_sources[name]),
                                    means=means))
    systems.sort(key=lambda s: -math.inf if s.means["total"].value is None else -s.means["total"].value)
    differences: list[Difference] = []
    paired_pairs = 0
    for a, b in combinations([s.system for s in systems], 2):
        ia, ib = sys_index[a], sys_index[b]
        for k in keys:
            differences.append(difference(a, b, k, values[k][ia], values[k][ib], tie_margin,
                                          np.array(per_case[k][a]), np.array(per_case[k][b])))
        paired_pairs += differences[-1].paired
    for k in keys:
        _holm([d for d in differences if d.key == k])
    n_pairs = len(names) * (len(names) - 1) // 2
    design: Literal["paired", "unpaired", "mixed"] = (
        "paired" if paired_pairs == n_pairs else "unpaired" if paired_pairs == 0 else "mixed")
    alphas = {}
    for name in (names if len(judges) >= 2 else []):
        mine = [by_id[c.id] for c in cases if (c.system or UNNAMED) == name and c.id in by_id]
        alphas[name] = krippendorff_alpha(matrix([[judge_value(c, j, "total") for c in mine] for j in judges]))
    return Leaderboard(systems=systems, differences=differences, keys=keys, design=design, alpha_by_system=alphas,
                       tie_margin=tie_margin)


def cluster_mean(sums: np.ndarray, counts: np.ndarray, level: float = 0.95) -> Estimate:
    """The mean over the cases of clusters (``sums[c]``: the sum of cluster ``c``'s values, ``counts[c]``
    how many it has; clusters without a case are left out) with its t interval for the cluster design:
    ``mean +- t(C - 1) * sqrt(V)``, ``V`` the linearised variance of the ratio mean
    (:func:`~consensus_eval.analysis.intervals.cluster_variance`, statsmodels' cluster-robust variance of
    a mean) over the ``C`` clusters. With one case per cluster it is the ordinary one-sample t interval.
    No interval below 2 clusters."""
    keep = counts > 0
    n = int(counts[keep].sum())
    if n == 0:
        return Estimate(value=None, n=0)
    value = float(sums[keep].sum() / n)
    c = int(keep.sum())
    if c < 2:
        return Estimate(value=value, n=n)
    se = math.sqrt(cluster_variance(sums[keep].tolist(), counts[keep].tolist()))
    if se == 0:                                   # every cluster's mean the same
        return Estimate(value=value, low=value, high=value, n=n)
    low, high = scipy_stats().t.interval(level, c - 1, loc=value, scale=se)
    return Estimate(value=value, low=float(low), high=float(high), n=n)


def _same(d: np.ndarray) -> bool:
    """Whether the values are all the same, up to the rounding of the means they are made of."""
    return float(np.ptp(d)) <= _SAME * max(1.0, float(np.abs(d).max()))


def paired_test(d: np.ndarray) -> tuple[float, float | None, float | None, Test]:
    """``(p, low, high, test)`` of the mean of paired differences ``d`` (2 or more): the exact sign-flip
    test up to :data:`EXACT_PAIRS` pairs, else the paired t test (scipy's ``ttest_1samp`` of the differences);
    the interval is the t interval (the same test's ``confidence_interval``).

    Differences that are all the same have no spread for a t test: the exact test's p in closed form,
    ``2^(1-n)`` (1 when they are 0), and the interval the test inverts to: the value itself when that p is
    below 0.05 (every other shift is rejected), else none (no shift is)."""
    n = int(d.size)
    mean = float(d.mean())
    if _same(d):
        if mean == 0:
            return 1.0, 0.0, 0.0, "sign_flip"
        p = min(1.0, 2.0 ** (1 - n))
        return (p, mean, mean, "sign_flip") if p < ALPHA_LEVEL else (p, None, None, "sign_flip")
    t = scipy_stats().ttest_1samp(d, 0.0)
    ci = t.confidence_interval(1 - ALPHA_LEVEL)
    if n <= EXACT_PAIRS:
        res = scipy_stats().permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf,
                                             vectorized=True)
        return min(1.0, float(res.pvalue)), float(ci.low), float(ci.high), "sign_flip"
    return float(t.pvalue), float(ci.low), float(ci.high), "paired_t"


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(x.mean(axis=axis) - y.mean(axis=axis))


def unpaired_test(xa: np.ndarray, xb: np.ndarray) -> tuple[float, float | None, float | None, Test]:
    """``(p, low, high, test)`` of ``mean(xa) - mean(xb)`` (2 or more values each): the exact permutation
    test of the difference of means while the relabellings ``C(n_a + n_b, n_a)`` number at most
    :data:`EXACT_SPLITS`, else Welch's t test (scipy's ``ttest_ind``, ``equal_var=False``); the interval is
    Welch's t interval (the same test's ``confidence_interval``).

    Two groups each of one value throughout have no spread: the exact test's p in closed form (only the
    observed split is that extreme: ``2 / C(n_a + n_b, n_a)``, 1 when the values are equal), and the
    value itself as the interval when that p is below 0.05, else none."""
    mean = float(xa.mean() - xb.mean())
    splits = math.comb(xa.size + xb.size, xa.size)
    if _same(xa) and _same(xb):
        if mean == 0:
            return 1.0, 0.0, 0.0, "permutation"
        p = min(1.0, 2.0 / splits)
        return (p, mean, mean, "permutation") if p < ALPHA_LEVEL else (p, None, None, "permutation")
    welch = scipy_stats().ttest_ind(xa, xb, equal_var=False)
    ci = welch.confidence_interval(1 - ALPHA_LEVEL)
    if splits <= EXACT_SPLITS:
        res = scipy_stats().permutation_test((xa, xb), _mean_difference, permutation_type="independent",
                                             n_resamples=np.inf, vectorized=True)
        return min(1.0, float(res.pvalue)), float(ci.low), float(ci.high), "permutation"
    return float(welch.pvalue), float(ci.low), float(ci.high), "welch_t"


def difference(a: str, b: str, key: str, va: np.ndarray, vb: np.ndarray, tie_margin: float,
               xa: np.ndarray | None = None, xb: np.ndarray | None = None) -> Difference:
    """``a - b`` on ``key`` from their values per source conversation (``va[i]``, ``vb[i]``: NaN where a
    system has no case of source i): paired (:func:`paired_test`) on the sources both have when there are
    2 or more, else unpaired (:func:`unpaired_test`) on their cases' values ``xa`` / ``xb`` (default: the
    non-missing ``va`` / ``vb``) (:class:`Difference`; p values not yet Holm-adjusted)."""
    both = ~np.isnan(va) & ~np.isnan(vb)
    if both.sum() >= 2:
        d = va[both] - vb[both]
        n = int(d.size)
        p, low, high, test = paired_test(d)
        wins = int((d > tie_margin).sum())
        losses = int((d < -tie_margin).sum())
        return Difference(a=a, b=b, key=key, paired=True, n=n, diff=float(d.mean()), low=low, high=high, p=p,
                          test=test, few=n < MIN_PAIRS, wins=wins, ties=n - wins - losses, losses=losses)
    xa = va[~np.isnan(va)] if xa is None else np.asarray(xa, dtype=float)
    xb = vb[~np.isnan(vb)] if xb is None else np.asarray(xb, dtype=float)
    n = int(xa.size + xb.size)
    if xa.size == 0 or xb.size == 0:
        return Difference(a=a, b=b, key=key, paired=False, n=n, diff=None)
    mean = float(xa.mean() - xb.mean())
    if xa.size < 2 or xb.size < 2:
        return Difference(a=a, b=b, key=key, paired=False, n=n, diff=mean, few=True)
    p, low, high, test = unpaired_test(xa, xb)
    return Difference(a=a, b=b, key=key, paired=False, n=n, diff=mean, low=low, high=high, p=p, test=test,
                      few=min(xa.size, xb.size) < MIN_PAIRS)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (in their order)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


def _holm(family: Sequence[Difference]) -> None:
    """Holm's step-down adjustment of the family's p values (in place), and each verdict."""
    tested = [d for d in family if d.p is not None]
    for d, p in zip(tested, holm([d.p for d in tested if d.p is not None]), strict=True):
        d.p_holm = p
        if p < ALPHA_LEVEL and d.diff is not None and not d.few:
            d.verdict = "a" if d.diff > 0 else "b"
