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

- per system, the mean score with a 95% percentile-bootstrap interval; the bootstrap resamples source
  conversations (a cluster bootstrap), so a system's cases of one conversation move together and the
  systems are resampled jointly;
- per pair of systems, the difference of means ``a - b`` with a 95% t interval and a two-sided p value:
  the paired t test on the conversations both systems wrote up when they share at least 2, else
  Welch's t test on all their cases. The p values of all pairs of one key are Holm-adjusted (a family of
  comparisons per key); ``verdict`` names the better system when the adjusted p is below 0.05;
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

from consensus_eval.analysis.agreement import judge_value, matrix, panel_value
from consensus_eval.analysis.alpha import DEFAULT_SEED, Alpha, krippendorff_alpha
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.intervals import cluster_ratio_draws, scipy_stats
from consensus_eval.domain.cases import Case

#: the system name of a case that names none, when others do
UNNAMED = "(unnamed)"
#: the significance level of a verdict (after Holm's adjustment)
ALPHA_LEVEL = 0.05


class Estimate(BaseModel):
    """A mean with its 95% interval: ``value`` over ``n`` cases, ``low``/``high`` its bounds (None when
    fewer than 2 cases: no interval)."""

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

    ``paired``: computed on the ``n`` source conversations both wrote up (paired t); else on their
    ``n`` cases in all (Welch). ``low``/``high``: 95% t interval of the difference; ``p``: two-sided p
    value; ``p_holm``: Holm-adjusted over the pairs of systems for this key; ``verdict``: ``a`` or ``b``
    (the better one, when ``p_holm`` < 0.05) or ``none`` (no difference shown). ``wins``/``ties``/``losses``:
    on paired conversations, how often ``a``'s score beat, tied (within the tie margin) or lost to ``b``'s.
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
    verdict: Literal["a", "b", "none"] = "none"
    wins: int = 0
    ties: int = 0
    losses: int = 0


class Leaderboard(BaseModel):
    """The systems ranked by their mean total (best first), their pairwise differences and each system's
    own inter-judge alpha (module docstring). ``design``: ``paired`` (every pair shares conversations),
    ``unpaired`` or ``mixed``; ``keys``: the dimension ids and ``total``; ``resamples``/``seed``: the
    bootstrap; ``tie_margin``: points within which two totals tie."""

    systems: list[SystemScores]
    differences: list[Difference]
    keys: list[str]
    design: Literal["paired", "unpaired", "mixed"]
    alpha_by_system: dict[str, Alpha] = {}
    resamples: int = 0
    seed: int = DEFAULT_SEED
    tie_margin: float = 0.5

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
        raise KeyError((a, b, key))


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
                *, n_boot: int = 1000, seed: int = DEFAULT_SEED, tie_margin: float = 0.5) -> Leaderboard | None:
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
    boot = _cluster_bootstrap(values, len(sources), n_boot, seed)
    systems = []
    for name in names:
        si = sys_index[name]
        means = {}
        for k in keys:
            n = int(counts[k][si].sum())
            value = float(sums[k][si].sum() / n) if n else None
            lo = hi = None
            if boot is not None and n >= 2:
                draws = boot[k][:, si]
                draws = draws[~np.isnan(draws)]
                if draws.size:
                    lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
            means[k] = Estimate(value=value, low=lo, high=hi, n=n)
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
                       resamples=n_boot if boot is not None else 0, seed=seed, tie_margin=tie_margin)


def _cluster_bootstrap(values: dict[str, np.ndarray], n_sources: int, n_boot: int,
                       seed: int) -> dict[str, np.ndarray] | None:
    """Per key, ``n_boot`` x systems means over source conversations drawn with replacement (the same
    draws for every system and key: :func:`~consensus_eval.analysis.intervals.cluster_ratio_draws` on all
    keys at once). None without resamples or sources."""
    if n_boot <= 0 or n_sources == 0:
        return None
    keys = list(values)
    n_systems = values[keys[0]].shape[0]
    num = np.vstack([np.nan_to_num(values[k]) for k in keys])            # (keys x systems) x sources
    den = np.vstack([(~np.isnan(values[k])).astype(float) for k in keys])
    draws = cluster_ratio_draws(num, den, n_boot, seed)
    return {k: draws[:, i * n_systems:(i + 1) * n_systems] for i, k in enumerate(keys)}


def difference(a: str, b: str, key: str, va: np.ndarray, vb: np.ndarray, tie_margin: float,
               xa: np.ndarray | None = None, xb: np.ndarray | None = None) -> Difference:
    """``a - b`` on ``key`` from their values per source conversation (``va[i]``, ``vb[i]``: NaN where a
    system has no case of source i): paired t on the sources both have when there are 2 or more, else
    Welch's t on their cases' values ``xa`` / ``xb`` (default: the non-missing ``va`` / ``vb``)
    (:class:`Difference`; p values not yet Holm-adjusted)."""
    both = ~np.isnan(va) & ~np.isnan(vb)
    if both.sum() >= 2:
        d = va[both] - vb[both]
        n = int(d.size)
        mean = float(d.mean())
        sd = float(d.std(ddof=1))
        if sd == 0:
            low = high = mean
            p = 1.0 if mean == 0 else 0.0
        else:
            half = float(scipy_stats().t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
            low, high = mean - half, mean + half
            p = float(2 * scipy_stats().t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
        wins = int((d > tie_margin).sum())
        losses = int((d < -tie_margin).sum())
        return Difference(a=a, b=b, key=key, paired=True, n=n, diff=mean, low=low, high=high, p=p,
                          wins=wins, ties=n - wins - losses, losses=losses)
    xa = va[~np.isnan(va)] if xa is None else np.asarray(xa, dtype=float)
    xb = vb[~np.isnan(vb)] if xb is None else np.asarray(xb, dtype=float)
    n = int(xa.size + xb.size)
    if xa.size == 0 or xb.size == 0:
        return Difference(a=a, b=b, key=key, paired=False, n=n, diff=None)
    mean = float(xa.mean() - xb.mean())
    if xa.size < 2 or xb.size < 2:
        return Difference(a=a, b=b, key=key, paired=False, n=n, diff=mean)
    va_, vb_ = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    se = math.sqrt(va_ + vb_)
    if se == 0:
        return Difference(a=a, b=b, key=key, paired=False, n=n, diff=mean, low=mean, high=mean,
                          p=1.0 if mean == 0 else 0.0)
    df = (va_ + vb_) ** 2 / (va_ ** 2 / (xa.size - 1) + vb_ ** 2 / (xb.size - 1))   # Welch-Satterthwaite
    half = float(scipy_stats().t.ppf(0.975, df)) * se
    p = float(2 * scipy_stats().t.sf(abs(mean) / se, df))
    return Difference(a=a, b=b, key=key, paired=False, n=n, diff=mean, low=mean - half, high=mean + half, p=p)


def _holm(family: Sequence[Difference]) -> None:
    """Holm's step-down adjustment of the family's p values (in place), and each verdict."""
    tested = sorted((d for d in family if d.p is not None), key=lambda d: d.p if d.p is not None else 1.0)
    m = len(tested)
    running = 0.0
    for i, d in enumerate(tested):
        assert d.p is not None
        running = max(running, min(1.0, (m - i) * d.p))
        d.p_holm = running
        if running < ALPHA_LEVEL and d.diff is not None:
            d.verdict = "a" if d.diff > 0 else "b"
