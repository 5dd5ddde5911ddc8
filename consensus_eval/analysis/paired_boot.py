"""A paired bootstrap over cases for the change in agreement with clinicians between two versions.

Two versions of a judge (a prompt changed, a model switched) scored the same held-out cases, which clinicians
labelled once. Each figure of agreement (ICC(A,1), MAE, bias of the scores; Cohen's kappa and macro-F1 of the
item verdicts) is computed for both versions on the same resample of the cases, and the change ``B - A`` of each
resample makes the draws; the interval is their expanded percentile interval (:func:`expanded_tail`: the plain
percentile interval covers about 88% at 10 cases). Resampling the cases (not the items, not the
versions apart) keeps what a case shares between the two versions and between its items.

Everything is vectorised over the resamples (each draw a vector of case multiplicities): :func:`icc_a1_batch`,
:func:`verdict_batch`; :func:`icc_a1_batch` at multiplicities of 1 is :func:`~consensus_eval.analysis.validity.icc_a1`
and :func:`verdict_batch` is scikit-learn's ``cohen_kappa_score`` and ``f1_score(average="macro")`` with the
multiplicities as ``sample_weight`` (tests/test_heldout.py checks both against them, and pingouin's ICC2).

Whether the interval holds its 95% at the sizes users have (10 to 40 held-out cases) is measured by simulation
(bench/heldout_coverage_sim.py); :data:`MIN_CASES` is the smallest number of cases from which each figure's interval
is shown (below it, the change is shown without an interval, and the reason).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from consensus_eval.analysis.intervals import scipy_stats

#: the figures of a comparison: of the scores (per dimension and total) and of the item verdicts
SCORE_FIGURES = ("icc", "mae", "bias")
ITEM_FIGURES = ("kappa", "f1")
#: the fewest held-out cases from which a figure's paired bootstrap interval covers about 95% in simulation
#: (bench/heldout_coverage_sim.py; docs/qc-loop.md, "How sure"); below it no interval is shown
MIN_CASES: dict[str, int] = {"icc": 10, "mae": 10, "bias": 10, "kappa": 10, "f1": 10}
#: resamples of the paired bootstrap
N_BOOT = 2000


def icc_a1_batch(rater: np.ndarray, human: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """ICC(A,1) of two raters (``rater``, ``human``: shape (..., n)) over the last axis, with each case counted
    ``weights`` times (shape (..., n) or None: once); NaN where it is undefined (fewer than 2 cases, no variance).
    The two-way mean squares of :func:`~consensus_eval.analysis.validity.two_way_mean_squares` on the cases
    repeated by their weights, k = 2."""
    w = np.ones_like(rater, dtype=float) if weights is None else np.asarray(weights, dtype=float)
    n = w.sum(axis=-1)
    rows = (rater + human) / 2
    grand = (w * rows).sum(axis=-1) / np.where(n > 0, n, 1)
    col_r = (w * rater).sum(axis=-1) / np.where(n > 0, n, 1)
    col_h = (w * human).sum(axis=-1) / np.where(n > 0, n, 1)
    g = grand[..., None]
    ssr = 2 * (w * (rows - g) ** 2).sum(axis=-1)
    ssc = n * ((col_r - grand) ** 2 + (col_h - grand) ** 2)
    res_r = rater - rows - col_r[..., None] + g
    res_h = human - rows - col_h[..., None] + g
    sse = (w * (res_r ** 2 + res_h ** 2)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        msr, msc, mse = ssr / (n - 1), ssc, sse / (n - 1)
        denom = msr + mse + 2 * (msc - mse) / n
        icc = (msr - mse) / denom
    return np.where((n >= 2) & (denom > 0) & np.isfinite(denom), icc, np.nan)


def verdict_batch(rater: np.ndarray, reference: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cohen's kappa and macro-F1 of yes / no verdicts (``rater``, ``reference``: booleans, one per item) with each
    item counted ``weights`` times (shape (draws, items)); NaN where kappa is undefined (one label throughout on
    both sides). Macro-F1 averages the F1 of the labels that occur on either side (scikit-learn's), 0 for a label
    never predicted rightly."""
    r, t = rater.astype(float), reference.astype(float)
    tp = weights @ (r * t)
    fp = weights @ (r * (1 - t))
    fn = weights @ ((1 - r) * t)
    tn = weights @ ((1 - r) * (1 - t))
    n = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (tp + tn) / n
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n ** 2
        kappa = np.where(pe < 1, (po - pe) / (1 - pe), np.nan)
        f_yes = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
        f_no = np.where(2 * tn + fp + fn > 0, 2 * tn / (2 * tn + fp + fn), 0.0)
    has_yes = (tp + fp + fn) > 0
    has_no = (tn + fp + fn) > 0
    labels = has_yes.astype(float) + has_no.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(labels > 0, (f_yes * has_yes + f_no * has_no) / labels, np.nan)
    return np.where(n > 0, kappa, np.nan), np.where(n > 0, f1, np.nan)


def multiplicities(n_cases: int, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` resamples of ``n_cases`` cases with replacement, as counts per case (``n_boot`` x ``n_cases``)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_cases, np.full(n_cases, 1.0 / n_cases), size=n_boot).astype(float)


class Change(BaseModel):
    """``b - a`` of one figure: the two figures on the cases as they are, and the percentile interval of the
    paired draws (None when not shown, ``why`` says why: ``few_cases`` below :data:`MIN_CASES`, ``undefined``
    when the figure is undefined on too many resamples)."""

    a: float | None
    b: float | None
    diff: float | None
    low: float | None = None
    high: float | None = None
    why: str | None = None


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def expanded_tail(n: int, level: float = 0.95) -> float:
    """The tail probability of Hesterberg's (2015) expanded percentile interval for ``n`` cases: the percentile
    bootstrap is too narrow in small samples (it has no ``n - 1`` and no t), so its tails are taken at
    ``Phi(-sqrt(n / (n - 1)) t_{n-1, 1-alpha/2})`` instead of ``alpha / 2`` (0.0086 at n = 10, 0.0203 at 40)."""
    st = scipy_stats()
    return float(st.norm.cdf(-np.sqrt(n / (n - 1)) * st.t.ppf(1 - (1 - level) / 2, n - 1)))


def _interval(draws: np.ndarray, n: int, level: float = 0.95) -> tuple[float | None, float | None]:
    ok = draws[np.isfinite(draws)]
    if ok.size < 0.9 * draws.size or ok.size == 0 or n < 2:
        return None, None
    tail = expanded_tail(n, level) * 100
    low, high = np.percentile(ok, [tail, 100 - tail])
    return float(low), float(high)


def score_changes(a: np.ndarray, b: np.ndarray, human: np.ndarray, counts: np.ndarray) -> dict[str, Change]:
    """ICC(A,1), MAE and bias (rater - clinicians) of version ``a`` and ``b`` against ``human`` on the same cases
    (complete ones: the caller drops a case missing anywhere), and their paired changes over the resamples
    ``counts`` (:func:`multiplicities`)."""
    n = len(human)
    ones = np.ones(n)
    out: dict[str, Change] = {}
    for name in SCORE_FIGURES:
        def fig(x: np.ndarray, w: np.ndarray, name: str = name) -> np.ndarray:
            if name == "icc":
                return icc_a1_batch(np.broadcast_to(x, w.shape), np.broadcast_to(human, w.shape), w)
            d = np.abs(x - human) if name == "mae" else x - human
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.asarray((w * d).sum(axis=-1) / w.sum(axis=-1))
        fa, fb = _finite(float(fig(a, ones))), _finite(float(fig(b, ones)))
        diff = fb - fa if fa is not None and fb is not None else None
        why = None
        low = high = None
        if n < MIN_CASES[name]:
            why = "few_cases"
        elif diff is not None and counts.size:
            low, high = _interval(fig(b, counts) - fig(a, counts), n)
            if low is None:
                why = "undefined"
        out[name] = Change(a=fa, b=fb, diff=diff, low=low, high=high, why=why)
    return out


def verdict_changes(a: np.ndarray, b: np.ndarray, reference: np.ndarray, case_of: np.ndarray,
                    counts: np.ndarray) -> dict[str, Change]:
    """Kappa and macro-F1 of versions ``a`` and ``b``'s yes / no verdicts on items against the clinicians'
    (``reference``), each item belonging to a case (``case_of``: its case's index in ``counts``' columns), and
    their paired changes over the resamples of the cases."""
    n_cases = counts.shape[1] if counts.size else int(case_of.max(initial=-1)) + 1
    ones = np.ones((1, len(reference)))
    ka, fa = verdict_batch(a, reference, ones)
    kb, fb = verdict_batch(b, reference, ones)
    draws = None
    if counts.size and len(reference):
        w = counts[:, case_of]
        kad, fad = verdict_batch(a, reference, w)
        kbd, fbd = verdict_batch(b, reference, w)
        draws = {"kappa": kbd - kad, "f1": fbd - fad}
    out: dict[str, Change] = {}
    for name, x, y in (("kappa", ka, kb), ("f1", fa, fb)):
        va, vb = _finite(float(x[0])), _finite(float(y[0]))
        diff = vb - va if va is not None and vb is not None else None
        low = high = None
        why = None
        if n_cases < MIN_CASES[name]:
            why = "few_cases"
        elif diff is not None and draws is not None:
            low, high = _interval(draws[name], n_cases)
            if low is None:
                why = "undefined"
        out[name] = Change(a=va, b=vb, diff=diff, low=low, high=high, why=why)
    return out
