"""Validity of a judge against a clinician: how close its scores and verdicts are to the reference.

- :func:`icc_a1`: the intraclass correlation ICC(A,1) (absolute agreement, single rater) with its
  F-based 95% interval;
- :func:`bonett_min_n`: how many cases an ICC needs for an interval of a given width (Bonett 2002), and
  :func:`cases_needed`: the same for ICC(A,1) with its rater-bias term (the raters' systematic difference);
- :func:`against_one_clinician`: a rater and a second clinician each against one clinician on the same cases
  (the ceiling on the rater's own basis);
- :func:`score_validity`: a judge's scores against the clinician's (bias, MAE, ICC, whether the sample
  is big enough), with optional inverse-probability weights for cases sampled unequally;
- :func:`verdict_validity`: a judge's labels (e.g. "taken" / "not taken") against the clinician's
  (Cohen's kappa, macro-F1, raw agreement).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import UsageError
from consensus_eval.analysis.intervals import Z95, Proportion, proportion, scipy_stats


class ICC(BaseModel):
    """The intraclass correlation ICC(A,1) of ``n`` cases each scored by the same ``k`` raters:
    McGraw & Wong's (1996) two-way random-effects, absolute-agreement, single-rater coefficient, the
    ICC(2,1) of Shrout & Fleiss (1979). It is the share of the variance of one rater's score that is
    variance between cases: 1 means every rater gives every case the same score; 0 means the scores
    say nothing about the case. Unlike a correlation it counts a rater that scores every case 2 points
    higher as disagreement.

    ``value``: the ICC (None with fewer than 2 cases or raters, or when there is no variance at all);
    ``low`` / ``high``: its interval at ``level`` by McGraw & Wong's F-based formula (the interval
    pingouin reports for ICC2; None when it cannot be computed, e.g. no residual variance). ``n``: the
    complete cases used (rows with a missing score are dropped), ``k``: the raters.
    """

    value: float | None
    low: float | None
    high: float | None
    n: int
    k: int
    level: float = 0.95


def two_way_mean_squares(x: np.ndarray) -> tuple[float, float, float]:
    """(MSR, MSC, MSE) of the two-way ANOVA without replication of an n x k table (n, k >= 2): rows (cases),
    columns (raters) and residual (case x rater interaction confounded with error; summed directly, not as
    the total less the other two, so it is never a rounding error below 0). The one place they are
    computed: ICC(A,1) here and the G-study of single runs (:mod:`consensus_eval.analysis.gstudy`)."""
    n, k = x.shape
    grand = x.mean()
    rows, cols = x.mean(axis=1), x.mean(axis=0)
    ssr = k * float(((rows - grand) ** 2).sum())
    ssc = n * float(((cols - grand) ** 2).sum())
    sse = float(((x - rows[:, None] - cols[None, :] + grand) ** 2).sum())
    return ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))


def icc_a1(x: Sequence[Sequence[float]] | np.ndarray, level: float = 0.95) -> ICC:
    """ICC(A,1) of an (n_cases, k_raters) array of scores (:class:`ICC`).

    Rows with a missing score (NaN) are dropped first: the two-way ANOVA needs complete rows. With
    MSR, MSC and MSE the row (case), column (rater) and residual mean squares,

        ICC(A,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n)

    and the interval is McGraw & Wong's (1996, Table 7, case 2A) F-based one, with Satterthwaite's
    degrees of freedom ``v`` for the denominator. E.g. Shrout & Fleiss's (1979) Table 4 (6 cases, 4
    judges) gives 0.290 [0.019, 0.761].
    """
    a = np.asarray(x, dtype=float)
    if a.ndim != 2:
        raise UsageError(f"need an (n_cases, k_raters) array, got shape {a.shape}")
    a = a[~np.isnan(a).any(axis=1)]
    n, k = a.shape
    if n < 2 or k < 2:
        return ICC(value=None, low=None, high=None, n=n, k=k, level=level)
    msr, msc, mse = two_way_mean_squares(a)
    denom = msr + (k - 1) * mse + k * (msc - mse) / n
    if denom <= 0 or not math.isfinite(denom):
        return ICC(value=None, low=None, high=None, n=n, k=k, level=level)
    icc = (msr - mse) / denom
    low, high = _icc_a1_ci(icc, msr, msc, mse, n, k, level)
    return ICC(value=float(icc), low=low, high=high, n=n, k=k, level=level)


def _icc_a1_ci(icc: float, msr: float, msc: float, mse: float, n: int, k: int,
               level: float) -> tuple[float | None, float | None]:
    """McGraw & Wong's interval of ICC(A,1); (None, None) when a term is not finite or undefined."""
    if mse <= 0:
        return None, None
    alpha = 1 - level
    a = k * icc / (n * (1 - icc)) if icc != 1 else math.inf
    b = 1 + k * icc * (n - 1) / (n * (1 - icc)) if icc != 1 else math.inf
    if not (math.isfinite(a) and math.isfinite(b)):
        return None, None
    # Satterthwaite: v = (a MSC + b MSE)^2 / ((a MSC)^2 / (k - 1) + (b MSE)^2 / ((n - 1)(k - 1)))
    num = (a * msc + b * mse) ** 2
    den = (a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1))
    if den <= 0:
        return None, None
    v = num / den
    f_up = float(scipy_stats().f.ppf(1 - alpha / 2, n - 1, v))
    f_low = float(scipy_stats().f.ppf(1 - alpha / 2, v, n - 1))
    common = k * msc + (k * n - k - n) * mse
    d_low = f_up * common + n * msr
    d_high = common + n * f_low * msr
    if d_low == 0 or d_high == 0 or not (math.isfinite(f_up) and math.isfinite(f_low)):
        return None, None
    low = n * (msr - f_up * mse) / d_low
    high = n * (f_low * msr - mse) / d_high
    return float(low), float(high)


def bonett_min_n(icc: float, k: int, half_width: float = 0.1, level: float = 0.95) -> int:
    """How many cases an ICC of about ``icc`` from ``k`` raters needs for its ``level`` interval to be
    ``2 * half_width`` wide (Bonett 2002, Stat Med 21:1331, equation 6):

        n = 8 z^2 (1 - rho)^2 (1 + (k - 1) rho)^2 / (k (k - 1) w^2) + 1,  rounded up

    with ``w = 2 * half_width`` and ``z`` the normal quantile for ``level``. It is a planning figure
    (an approximation, good for k >= 2 and n not tiny): e.g. rho = 0.8, k = 2, half width 0.1 needs 51.
    ``icc`` must lie in (-1 / (k - 1), 1].
    """
    if k < 2:
        raise UsageError(f"need k >= 2 raters, got {k}")
    if not -1 / (k - 1) < icc <= 1:
        raise UsageError(f"an ICC of {k} raters lies in (-1/(k-1), 1], got {icc}")
    if half_width <= 0 or not 0 < level < 1:
        raise UsageError(f"need half_width > 0 and 0 < level < 1, got {half_width}, {level}")
    z = Z95 if level == 0.95 else float(scipy_stats().norm.ppf(1 - (1 - level) / 2))
    w = 2 * half_width
    n = 8 * z * z * (1 - icc) ** 2 * (1 + (k - 1) * icc) ** 2 / (k * (k - 1) * w * w) + 1
    # 1e-9: a value a rounding error above an integer is that integer
    return math.ceil(n - 1e-9)


#: the most cases :func:`cases_needed` looks for (beyond it: unreachable)
MAX_CASES_NEEDED = 1_000_000


def cases_needed(x: Sequence[Sequence[float]] | np.ndarray, half_width: float = 0.1,
                 level: float = 0.95) -> int | None:
    """How many cases ICC(A,1) of the (n_cases, k_raters) scores ``x`` needs for its ``level`` interval to
    be at most ``2 * half_width`` wide, its rater-bias term included; None when no number of cases gets
    there (up to :data:`MAX_CASES_NEEDED`).

    The variance components of ``x`` (cases ``s_r = (MSR - MSE) / k``, raters ``s_c = (MSC - MSE) / n``,
    error ``s_e = MSE``, each at least 0) give the mean squares expected with ``m`` cases (``k s_r + s_e``,
    ``m s_c + s_e``, ``s_e``); the answer is the smallest ``m`` whose McGraw & Wong interval at those mean
    squares is narrow enough. Without a rater bias (``s_c = 0``) this is Bonett's (2002) planning figure
    (:func:`bonett_min_n`: the same 218 cases for 0.5 with 2 raters). With one, the interval stops
    narrowing: the raters' difference is estimated from ``k - 1`` degrees of freedom whatever the number of
    cases, so with 2 raters a bias of a few percent of the variance makes a +-0.1 interval unreachable (a
    rater without the bias would reach it). ValueError when ``x`` has no interval to plan from
    (fewer than 2 complete rows or 2 raters, or no residual variance)."""
    a = np.asarray(x, dtype=float)
    a = a[~np.isnan(a).any(axis=1)] if a.ndim == 2 else a
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 2:
        raise UsageError(f"need an (n_cases >= 2, k_raters >= 2) array, got shape {a.shape}")
    n, k = a.shape
    msr, msc, mse = two_way_mean_squares(a)
    if mse <= 0:
        raise UsageError("no residual variance: the ICC has no interval to plan from")
    s_r, s_c, s_e = max(0.0, (msr - mse) / k), max(0.0, (msc - mse) / n), mse
    icc = s_r / (s_r + s_c + s_e)

    def narrow(m: int) -> bool:
        low, high = _icc_a1_ci(icc, k * s_r + s_e, m * s_c + s_e, s_e, m, k, level)
        return low is not None and high is not None and high - low <= 2 * half_width

    hi = 3
    while not narrow(hi):
        if hi >= MAX_CASES_NEEDED:
            return None
        hi = min(2 * hi, MAX_CASES_NEEDED)
    lo = 2
    while hi - lo > 1:            # the width shrinks as cases are added: the smallest m that is narrow enough
        mid = (lo + hi) // 2
        if narrow(mid):
            hi = mid
        else:
            lo = mid
    return hi


def against_one_clinician(rater: Sequence[float | None] | np.ndarray, first: Sequence[float | None] | np.ndarray,
                          second: Sequence[float | None] | np.ndarray) -> tuple[ICC, ICC]:
    """``(rater vs first, second vs first)``: ICC(A,1) of a rater against one clinician's scores, and of a
    second clinician against the same clinician, on the same cases (a case missing any of the three is
    left out). The second is the ceiling on the rater's own basis: a rater exactly as good as one clinician
    is above it half the time (the rater and the second clinician are exchangeable), whereas against the
    mean of two clinicians, a less noisy reference than one, it would be above it most of the time."""
    cols = [np.array([np.nan if v is None else v for v in c], dtype=float) for c in (rater, first, second)]
    if not cols[0].shape == cols[1].shape == cols[2].shape:
        raise UsageError(f"{cols[0].size} rater scores, {cols[1].size} and {cols[2].size} clinicians' scores")
    r, f, s = (c[~np.isnan(np.column_stack(cols)).any(axis=1)] for c in cols)
    return icc_a1(np.column_stack([r, f])), icc_a1(np.column_stack([s, f]))


def weighted_mean(values: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray | None = None) -> float:
    """The mean of ``values``, or with ``weights`` w_i the weighted mean sum(w_i x_i) / sum(w_i).

    With w_i = 1 / pi_i, the inverse of the probability that case i was sampled for labelling, this is
    the Horvitz-Thompson estimate of the population mean in its ratio (Hajek) form: cases that were
    less likely to be labelled stand for more of the population. Weights must be >= 0 with a
    positive sum; ``values`` must not be empty.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise UsageError("no values")
    if weights is None:
        return float(x.mean())
    w = np.asarray(weights, dtype=float)
    if w.shape != x.shape:
        raise UsageError(f"{w.size} weights for {x.size} values")
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise UsageError("weights must be finite, >= 0 and not all 0")
    return float((w * x).sum() / w.sum())


class ScoreValidity(BaseModel):
    """A rater's scores (a judge, or the panel) against a reference's (the clinician), in score points.

    ``n``: cases where both have a score. ``bias``: mean of (rater - reference): positive means the
    rater scores higher than the clinician. ``mae``: mean absolute difference. With ``weighted`` true,
    both are inverse-probability weighted means (cases less likely to have been sampled for labelling
    count for more), estimating the bias and MAE over all cases rather than over the labelled ones.
    ``icc``: ICC(A,1) of the two columns (:class:`ICC`), always unweighted: it describes the labelled
    sample. ``min_n``: the cases an ICC of the observed size, with the observed systematic difference
    between rater and reference, needs for a 95% interval of +-0.1 (:func:`cases_needed`; None when the
    ICC has no interval, or when no number of cases gets there: then ``unreachable``). ``small_sample``:
    fewer than 10 cases, fewer than ``min_n``, or ``unreachable``: read the ICC as an indication.
    """

    n: int
    bias: float | None
    mae: float | None
    icc: ICC
    min_n: int | None
    small_sample: bool
    weighted: bool = False
    unreachable: bool = False


#: below this many paired cases a validity figure is always flagged as a small sample
MIN_CASES = 10


def score_validity(rater: Sequence[float | None] | np.ndarray, reference: Sequence[float | None] | np.ndarray,
                   weights: Sequence[float] | np.ndarray | None = None) -> ScoreValidity:
    """Compare paired scores (:class:`ScoreValidity`); pairs where either side is missing (None or
    NaN) are dropped, with their weight. ``weights``: optional inverse-probability weights, one per
    pair, for the bias and MAE only (:func:`weighted_mean`); the ICC stays unweighted."""
    a = np.array([np.nan if v is None else v for v in rater], dtype=float)
    b = np.array([np.nan if v is None else v for v in reference], dtype=float)
    if a.shape != b.shape:
        raise UsageError(f"{a.size} rater scores for {b.size} reference scores")
    w = None if weights is None else np.asarray(weights, dtype=float)
    if w is not None and w.shape != a.shape:
        raise UsageError(f"{w.size} weights for {a.size} pairs")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if w is not None:
        w = w[keep]
    n = int(a.size)
    icc = icc_a1(np.column_stack([a, b]))
    if n == 0:
        return ScoreValidity(n=0, bias=None, mae=None, icc=icc, min_n=None, small_sample=True,
                             weighted=weights is not None)
    diff = a - b
    min_n, unreachable = None, False
    if icc.value is not None and icc.low is not None:
        min_n = cases_needed(np.column_stack([a, b]), 0.1)
        unreachable = min_n is None
    return ScoreValidity(n=n, bias=weighted_mean(diff, w), mae=weighted_mean(np.abs(diff), w), icc=icc,
                         min_n=min_n, small_sample=n < MIN_CASES or unreachable or (min_n is not None and n < min_n),
                         weighted=weights is not None, unreachable=unreachable)


class VerdictValidity(BaseModel):
    """A rater's categorical verdicts (e.g. "taken" / "not taken") against a reference's, case by case.

    ``n``: paired verdicts. ``kappa``: Cohen's kappa, agreement beyond what the two sides' label
    frequencies give by chance (1 perfect, 0 chance level, < 0 worse than chance; None when n = 0 or
    it is undefined, e.g. both sides use one and the same label throughout). ``macro_f1``: the F1 of
    each label (reference as truth), averaged with equal weight per label (None when n = 0).
    ``agreement``: the share of verdicts that are identical, with its Wilson interval (a count of the
    sample, never weighted). ``weighted``: kappa and macro-F1 weight each pair (inverse inclusion
    probabilities: estimates for the whole run rather than the sample).
    """

    n: int
    kappa: float | None
    macro_f1: float | None
    agreement: Proportion
    weighted: bool = False


def verdict_validity(rater_labels: Sequence[Hashable], reference_labels: Sequence[Hashable],
                     weights: Sequence[float] | np.ndarray | None = None) -> VerdictValidity:
    """Compare two equal-length sequences of labels, position by position (:class:`VerdictValidity`).
    Labels are compared by their text (``str``), so ``1`` and ``"1"`` are the same label. ``weights``: one
    per pair, for kappa and macro-F1 (scikit-learn's ``sample_weight``)."""
    if len(rater_labels) != len(reference_labels):
        raise UsageError(f"{len(rater_labels)} rater labels for {len(reference_labels)} reference labels")
    n = len(rater_labels)
    if weights is not None and len(weights) != n:
        raise UsageError(f"{len(weights)} weights for {n} pairs of labels")
    if n == 0:
        return VerdictValidity(n=0, kappa=None, macro_f1=None, agreement=proportion(0, 0),
                               weighted=weights is not None)
    # labels as strings: sklearn refuses a mix of types (e.g. True and "taken")
    y_true = [str(v) for v in reference_labels]
    y_pred = [str(v) for v in rater_labels]
    w = None if weights is None else np.asarray(weights, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns before returning nan for an undefined kappa
        from sklearn.metrics import cohen_kappa_score, f1_score  # imported when used: 0.3 s

        kappa = float(cohen_kappa_score(y_true, y_pred, sample_weight=w))
        f1 = float(f1_score(y_true, y_pred, average="macro", zero_division=0.0, sample_weight=w))
    same = sum(t == p for t, p in zip(y_true, y_pred, strict=True))
    return VerdictValidity(n=n, kappa=kappa if math.isfinite(kappa) else None,
                           macro_f1=f1 if math.isfinite(f1) else None, agreement=proportion(same, n),
                           weighted=weights is not None)


class IsotonicMap(BaseModel):
    """A monotone map from a rater's score to the clinicians' scale (isotonic regression), fitted on ``n``
    paired scores; never a replacement for the raw score, a reading of it on the clinicians' scale.

    ``x`` / ``y``: the map's knots (a raw score between two knots maps by linear interpolation; outside
    them, to the nearest end). ``mae_raw``: the raw scores' mean absolute error against the clinicians;
    ``mae_cv``: the calibrated scores' error, each case predicted by a map fitted without it (``folds``-fold
    cross-validation): what the map is worth on cases it has not seen. None below ``folds`` cases."""

    n: int
    x: list[float]
    y: list[float]
    mae_raw: float | None
    mae_cv: float | None
    folds: int

    def apply(self, score: float) -> float:
        """The calibrated reading of a raw ``score``."""
        return float(np.interp(score, self.x, self.y))


def isotonic_map(rater: Sequence[float | None] | np.ndarray, reference: Sequence[float | None] | np.ndarray,
                 folds: int = 5, seed: int = 0) -> IsotonicMap:
    """Fit :class:`IsotonicMap` on the pairs where both scores are present (scikit-learn's
    IsotonicRegression, increasing, clipped outside the fitted range), with a ``folds``-fold
    cross-validated error (seeded shuffle)."""
    from sklearn.isotonic import IsotonicRegression  # imported when used

    a = np.array([np.nan if v is None else v for v in rater], dtype=float)
    b = np.array([np.nan if v is None else v for v in reference], dtype=float)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n < 2:
        return IsotonicMap(n=n, x=[], y=[], mae_raw=float(np.abs(a - b).mean()) if n else None, mae_cv=None,
                           folds=folds)
    fit = IsotonicRegression(out_of_bounds="clip").fit(a, b)
    mae_cv = None
    if n >= folds >= 2:
        order = np.random.default_rng(seed).permutation(n)
        pred = np.empty(n)
        for k in range(folds):
            test = order[k::folds]
            train = np.setdiff1d(order, test)
            pred[test] = IsotonicRegression(out_of_bounds="clip").fit(a[train], b[train]).predict(a[test])
        mae_cv = float(np.abs(pred - b).mean())
    return IsotonicMap(n=n, x=[float(v) for v in fit.X_thresholds_], y=[float(v) for v in fit.y_thresholds_],
                       mae_raw=float(np.abs(a - b).mean()), mae_cv=mae_cv, folds=folds)
