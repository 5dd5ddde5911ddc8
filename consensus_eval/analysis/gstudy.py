"""Generalizability theory for a panel of LLM judges: where the variance of a score comes from (G-study)
and how many judges and runs a reliable score needs (D-study).

Design ``p x (r:j)``: every case ``p`` is scored by every judge ``j``, and each judge scores each case
``n_r`` times (runs ``r``, nested within judges: run 1 of judge A has nothing to do with run 1 of judge
B). The score is modelled as

    X_pjr = mu + case_p + judge_j + run_r:j + (case x judge)_pj + residual_pr:j,e

with five random, independent effects whose variances are the *variance components*. The design must
be balanced (the same judges and runs for every case): a case with a missing score must be dropped
first (:func:`balanced_subset`).

Reference: Brennan, R. L. (2001). *Generalizability Theory*. Springer: the p x (r:j) design's sums of
squares and expected mean squares (chapter 3 and appendix) and the D-study coefficients (chapter 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import UsageError
from consensus_eval.analysis.validity import two_way_mean_squares


class VarianceComponents(BaseModel):
    """The estimated variance components of a balanced ``p x (r:j)`` G-study, in squared score points.

    - ``case`` (sigma^2_p): how much cases truly differ: the signal;
    - ``judge`` (sigma^2_j): how much judges differ in overall severity (a judge scoring every case
      lower);
    - ``run`` (sigma^2_r:j): how much a judge's runs differ in overall level (one run scoring every case
      lower than another run of the same judge);
    - ``case_judge`` (sigma^2_pj): judges ranking cases differently (judge-specific views of a case);
    - ``residual`` (sigma^2_pr:j,e): run-to-run noise on a single case, confounded with everything
      unmodelled.

    Each is the ANOVA (expected mean squares) estimate, unbiased but possibly negative by chance; a
    negative estimate is reported as 0, and ``raw`` keeps the unclamped values (same keys as the field
    names). The 0 is not substituted into the other components' equations (Brennan 2001's practice;
    Cronbach et al. 1972 also proposed carrying it through): the raw estimates stay unbiased.
    ``mean_squares``: the five mean squares (keys ``case``, ``judge``, ``run``, ``case_judge``,
    ``residual``). ``n_cases``, ``n_judges``, ``n_runs``: the design's sizes.

    ``runs_separated``: False for a one-run design (:func:`g_study_single_run`, p x j): a judge's
    case-specific view and its run-to-run noise cannot be told apart there, so ``residual`` holds both
    (s2(pj,e)), ``case_judge`` and ``run`` are 0, and a D-study cannot say what more runs would buy.
    """

    case: float
    judge: float
    run: float
    case_judge: float
    residual: float
    raw: dict[str, float]
    mean_squares: dict[str, float]
    n_cases: int
    n_judges: int
    n_runs: int
    runs_separated: bool = True


def balanced_subset(scores: Sequence[Sequence[Sequence[float | None]]] | np.ndarray) -> tuple[np.ndarray, int]:
    """``(complete, dropped)``: the cases of an (n_cases, n_judges, n_runs) array of scores (None or NaN
    where a score is missing) that have every score, and how many cases were dropped for a gap. The
    G-study's formulas hold for a balanced design only."""
    x = np.array(scores, dtype=float)
    if x.ndim != 3:
        raise UsageError(f"need an (n_cases, n_judges, n_runs) array, got shape {x.shape}")
    complete = ~np.isnan(x).any(axis=(1, 2))
    return x[complete], int((~complete).sum())


def g_study(x: Sequence[Sequence[Sequence[float]]] | np.ndarray) -> VarianceComponents:
    """Estimate the variance components (:class:`VarianceComponents`) of an (n_cases, n_judges,
    n_runs) array of scores with no gap (:func:`balanced_subset`), from the ANOVA mean squares and
    Brennan's (2001) expected mean squares of the p x (r:j) design:

        EMS(p)      = s2(pr:j,e) + n_r s2(pj) + n_j n_r s2(p)
        EMS(j)      = s2(pr:j,e) + n_r s2(pj) + n_p s2(r:j) + n_p n_r s2(j)
        EMS(r:j)    = s2(pr:j,e) + n_p s2(r:j)
        EMS(pj)     = s2(pr:j,e) + n_r s2(pj)
        EMS(pr:j,e) = s2(pr:j,e)

    solved for the s2 with the observed mean squares in place of their expectations. Needs at least 2
    cases, 2 judges and 2 runs (each component needs its degrees of freedom).
    """
    a = np.asarray(x, dtype=float)
    if a.ndim != 3:
        raise UsageError(f"need an (n_cases, n_judges, n_runs) array, got shape {a.shape}")
    if np.isnan(a).any():
        raise UsageError("the scores have gaps: drop incomplete cases first (balanced_subset)")
    n_p, n_j, n_r = a.shape
    if n_p < 2 or n_j < 2 or n_r < 2:
        raise UsageError(f"need >= 2 cases, judges and runs, got {n_p}, {n_j}, {n_r}")
    ms = _mean_squares(a)
    raw = _components(ms, n_p, n_j, n_r)
    c = {k: max(0.0, v) for k, v in raw.items()}
    return VarianceComponents(case=c["case"], judge=c["judge"], run=c["run"], case_judge=c["case_judge"],
                              residual=c["residual"], raw=raw, mean_squares=ms, n_cases=n_p, n_judges=n_j,
                              n_runs=n_r)


def g_study_single_run(x: Sequence[Sequence[float]] | np.ndarray) -> VarianceComponents:
    """The variance components of an (n_cases, n_judges) array of scores with no gap, one run per judge
    (the p x j design): EMS(p) = s2(pj,e) + n_j s2(p), EMS(j) = s2(pj,e) + n_p s2(j), EMS(pj,e) =
    s2(pj,e). ``residual`` is s2(pj,e); ``runs_separated`` is False (:class:`VarianceComponents`)."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 2:
        raise UsageError(f"need an (n_cases, n_judges) array, got shape {a.shape}")
    if np.isnan(a).any():
        raise UsageError("the scores have gaps: drop incomplete cases first")
    n_p, n_j = a.shape
    if n_p < 2 or n_j < 2:
        raise UsageError(f"need >= 2 cases and judges, got {n_p}, {n_j}")
    ms_p, ms_j, ms_e = two_way_mean_squares(a)
    raw = {"case": (ms_p - ms_e) / n_j, "judge": (ms_j - ms_e) / n_p, "run": 0.0, "case_judge": 0.0,
           "residual": ms_e}
    c = {k: max(0.0, v) for k, v in raw.items()}
    return VarianceComponents(case=c["case"], judge=c["judge"], run=0.0, case_judge=0.0, residual=c["residual"],
                              raw=raw, mean_squares={"case": ms_p, "judge": ms_j, "residual": ms_e},
                              n_cases=n_p, n_judges=n_j, n_runs=1, runs_separated=False)


def _mean_squares(a: np.ndarray) -> dict[str, float]:
    """The five mean squares of a balanced p x (r:j) array (sums of squares over degrees of freedom)."""
    n_p, n_j, n_r = a.shape
    grand = a.mean()
    m_p = a.mean(axis=(1, 2))            # case means
    m_j = a.mean(axis=(0, 2))            # judge means
    m_jr = a.mean(axis=0)                # (judge, run) means
    m_pj = a.mean(axis=2)                # (case, judge) means
    ss_p = n_j * n_r * float(((m_p - grand) ** 2).sum())
    ss_j = n_p * n_r * float(((m_j - grand) ** 2).sum())
    ss_rj = n_p * float(((m_jr - m_j[:, None]) ** 2).sum())
    ss_pj = n_r * float(((m_pj - m_p[:, None] - m_j[None, :] + grand) ** 2).sum())
    ss_e = float(((a - m_pj[:, :, None] - m_jr[None, :, :] + m_j[None, :, None]) ** 2).sum())
    return {
        "case": ss_p / (n_p - 1),
        "judge": ss_j / (n_j - 1),
        "run": ss_rj / (n_j * (n_r - 1)),
        "case_judge": ss_pj / ((n_p - 1) * (n_j - 1)),
        "residual": ss_e / ((n_p - 1) * n_j * (n_r - 1)),
    }


def _components(ms: dict[str, float], n_p: int, n_j: int, n_r: int) -> dict[str, float]:
    e = ms["residual"]
    return {
        "case": (ms["case"] - ms["case_judge"]) / (n_j * n_r),
        "judge": (ms["judge"] - ms["run"] - ms["case_judge"] + e) / (n_p * n_r),
        "run": (ms["run"] - e) / n_p,
        "case_judge": (ms["case_judge"] - e) / n_r,
        "residual": e,
    }


class DesignReliability(BaseModel):
    """How reliable a case's score is when it is the mean of ``judges`` judges x ``runs`` runs each
    (``calls_per_case`` = judges x runs model calls), from a G-study's components (D-study).

    ``g``: the generalizability coefficient E rho^2, for *relative* decisions (ranking cases):
    s2(p) / (s2(p) + s2(pj)/n_j + s2(pr:j,e)/(n_j n_r)). ``phi``: the dependability coefficient, for
    *absolute* decisions (a score against a threshold): judge and run severity count as error too,
    s2(p) / (s2(p) + (s2(j) + s2(pj))/n_j + (s2(r:j) + s2(pr:j,e))/(n_j n_r)). Both are between 0
    and 1 (phi <= g), like a reliability; None when there is no variance at all.
    """

    judges: int
    runs: int
    g: float | None
    phi: float | None
    calls_per_case: int


def d_study(vc: VarianceComponents, judges: Iterable[int] = range(1, 6),
            runs: Iterable[int] = range(1, 4)) -> list[DesignReliability]:
    """G and Phi of every design with ``judges`` x ``runs`` (:class:`DesignReliability`), judges
    varying slowest. Uses the clamped (>= 0) components. After a one-run G-study (``runs_separated``
    False) only designs of 1 run are given: what more runs would buy was not measured."""
    runs = list(runs) if vc.runs_separated else [1]
    out = []
    for nj in judges:
        for nr in runs:
            if nj < 1 or nr < 1:
                raise UsageError(f"need >= 1 judge and run, got {nj}, {nr}")
            rel_err = vc.case_judge / nj + vc.residual / (nj * nr)
            abs_err = (vc.judge + vc.case_judge) / nj + (vc.run + vc.residual) / (nj * nr)
            out.append(DesignReliability(judges=nj, runs=nr, g=_ratio(vc.case, rel_err),
                                         phi=_ratio(vc.case, abs_err), calls_per_case=nj * nr))
    return out


def _ratio(signal: float, error: float) -> float | None:
    total = signal + error
    return signal / total if total > 0 and math.isfinite(total) else None


class CheapestDesign(BaseModel):
    """The cheapest design reaching ``target`` on coefficient ``use`` (``g`` or ``phi``): ``design``,
    and its ``cost`` per case (calls per case x cost per call; None without a cost per call)."""

    design: DesignReliability
    cost: float | None
    target: float
    use: Literal["g", "phi"]


def cheapest_design(rows: Sequence[DesignReliability], target: float = 0.8, cost_per_call: float | None = None,
                    use: Literal["g", "phi"] = "phi") -> CheapestDesign | None:
    """Of the designs (rows of :func:`d_study`) whose ``use`` coefficient is >= ``target``, the one
    with the fewest calls per case; among equally many calls, the lowest cost, then the most reliable
    (e.g. 2 judges x 1 run rather than 1 judge x 2 runs, when judges differ more than runs). With one
    price per call the cost orders like the calls; it is reported for the chosen design. None when no
    design reaches the target."""
    if use not in ("g", "phi"):
        raise UsageError(f"use must be 'g' or 'phi', got {use!r}")
    ok = [r for r in rows if (v := getattr(r, use)) is not None and v >= target]
    if not ok:
        return None

    def cost(r: DesignReliability) -> float | None:
        return None if cost_per_call is None else r.calls_per_case * cost_per_call

    best = min(ok, key=lambda r: (r.calls_per_case, cost(r) or 0.0, -(getattr(r, use) or 0.0)))
    return CheapestDesign(design=best, cost=cost(best), target=target, use=use)
