"""Prediction-powered inference (PPI++) of a mean score: a few clinician labels plus the panel's scores
on every case give an interval for the mean clinician score that is narrower than the labels alone,
and honest even when the panel is biased.

PPI++ (Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient prediction-powered inference",
arXiv:2311.01453), for the mean of Y with ``n`` labelled cases (clinician score ``y``, panel score
``yhat``) and ``N`` unlabelled cases (panel score only):

    theta = lam * mean(yhat_unlabelled) + mean(y - lam * yhat_labelled)

The second term corrects ("rectifies") the panel's bias as measured on the labelled cases, so theta is
unbiased for any ``lam``; ``lam`` only moves the variance. ``lam = 0`` is the clinician-only mean,
``lam = 1`` plain PPI. The interval is the normal one,

    theta +- z * sqrt(var(y - lam * yhat_labelled) / n + lam^2 * var(yhat_unlabelled) / N)

with population (ddof 0) variances, and the power-tuned ``lam`` (the default) is

    lam = cov(y, yhat_labelled) / ((1 + n / N) * var(yhat_labelled ++ yhat_unlabelled)),  clipped to [0, 1]

(cov with ddof 0 over the labelled cases, var with ddof 1 over all panel scores pooled), exactly as
``ppi_py.ppi_mean_ci`` and ``ppi_py.ppi_mean_pointestimate`` (ppi-python 0.2) compute them for one
dimension without weights: :func:`ppi_mean` matches them to rounding error.

Which cases are "unlabelled": as in ppi_py, ``yhat_unlabelled`` are the panel's scores on the cases the
clinician did NOT label (a set disjoint from the labelled one, drawn from the same population). In
the tool the panel scores every case, the labelled ones too; pass those scores with
``unlabelled_includes_labelled=True`` and the labelled cases' share is taken out (their sum and sum of
squares are subtracted), which gives exactly ppi_py's result on the disjoint rest. Passing the
overlapping set as if it were disjoint would count the labelled cases twice: the estimate stays
unbiased but the interval ignores the correlation between the two terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval.analysis.intervals import Z95, scipy_stats

FloatArray = Sequence[float] | np.ndarray


class MeanEstimate(BaseModel):
    """An estimate of a mean score with its interval at ``level``.

    ``method``: ``"ppi"``: the PPI++ estimate of the mean clinician score from ``n`` labelled cases and
    the panel's scores on ``N`` unlabelled cases (:func:`ppi_mean`); ``"human"``: the plain mean of the
    ``n`` clinician scores (:func:`human_mean`, ``N`` = 0); ``"panel"``: the plain mean of the panel's
    scores on ``N`` cases (:func:`panel_mean`, ``n`` = 0): it estimates the mean PANEL score, so its
    narrow interval says nothing about the panel's bias against the clinician.

    ``estimate``: the mean; ``low`` / ``high``: its interval (None when it cannot be computed: fewer
    than 2 cases). ``lam``: the weight PPI++ gave the panel's scores (0 = clinician only, 1 = plain PPI;
    None for the other methods). ``N``: for ``"ppi"``, the unlabelled cases actually used (with
    ``unlabelled_includes_labelled`` the passed count minus ``n``).
    """

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    N: int
    method: Literal["ppi", "panel", "human"]
    lam: float | None = None
    level: float = 0.95

    @property
    def width(self) -> float | None:
        """``high - low`` (None without an interval)."""
        return None if self.low is None or self.high is None else self.high - self.low


class DifferenceEstimate(BaseModel):
    """The difference ``a - b`` of two systems' mean scores (``estimate``) with its interval
    ``[low, high]`` at ``level``, from the two :class:`MeanEstimate` ``a`` and ``b``. The two
    estimates are taken as independent (their variances add): right for two separate samples of
    cases; on the same cases with positively correlated errors the interval is conservative (too wide).
    """

    estimate: float | None
    low: float | None
    high: float | None
    a: MeanEstimate
    b: MeanEstimate
    level: float = 0.95


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return Z95 if level == 0.95 else float(scipy_stats().norm.ppf(1 - (1 - level) / 2))


def ppi_mean_batch(y: np.ndarray, yhat_labelled: np.ndarray, yhat_unlabelled: np.ndarray, level: float = 0.95,
                   lam: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ of many independent problems at once, for simulations: the last axis holds the cases
    (``y`` and ``yhat_labelled`` of shape (..., n), ``yhat_unlabelled`` (..., N), the leading axes
    broadcast). Returns ``(estimate, low, high, lam)`` arrays of the leading shape. Same formulas as
    :func:`ppi_mean` (disjoint labelled and unlabelled cases; needs n >= 2, N >= 1)."""
    y = np.asarray(y, dtype=float)
    yh = np.asarray(yhat_labelled, dtype=float)
    yu = np.asarray(yhat_unlabelled, dtype=float)
    n, big_n = y.shape[-1], yu.shape[-1]
    if yh.shape[-1] != n:
        raise ValueError(f"{n} labels for {yh.shape[-1]} panel scores of the labelled cases")
    if n < 2 or big_n < 1:
        raise ValueError(f"need n >= 2 labelled and N >= 1 unlabelled cases, got n={n}, N={big_n}")
    mean_u = yu.mean(axis=-1)
    var_u = yu.var(axis=-1)
    lam_arr = _tuned_lam(y, yh, mean_u, var_u, big_n) if lam is None else np.broadcast_to(
        np.asarray(lam, dtype=float), mean_u.shape)
    return _ppi(y, yh, mean_u, var_u, big_n, lam_arr, _z(level))


def _tuned_lam(y: np.ndarray, yh: np.ndarray, mean_u: np.ndarray, var_u: np.ndarray, big_n: int) -> np.ndarray:
    """ppi_py's power-tuned lam for a mean (``_calc_lam_glm`` with identity Hessian, clipped to [0, 1]):
    ddof-0 covariance of (y, yhat) over the labelled cases over (1 + n/N) times the ddof-1 variance of
    the pooled panel scores (labelled and unlabelled). 0 when the panel's scores do not vary."""
    n = y.shape[-1]
    cov = ((y - y.mean(axis=-1, keepdims=True)) * (yh - yh.mean(axis=-1, keepdims=True))).mean(axis=-1)
    # pooled ddof-1 variance of yhat_labelled ++ yhat_unlabelled from the two groups' means and variances
    mean_l, var_l = yh.mean(axis=-1), yh.var(axis=-1)
    total = n + big_n
    pooled_mean = (n * mean_l + big_n * mean_u) / total
    ss = n * var_l + big_n * var_u + n * (mean_l - pooled_mean) ** 2 + big_n * (mean_u - pooled_mean) ** 2
    pooled_var = ss / (total - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = cov / ((1 + n / big_n) * pooled_var)
    lam = np.where(pooled_var > 0, lam, 0.0)
    return np.asarray(np.clip(lam, 0.0, 1.0))


def _ppi(y: np.ndarray, yh: np.ndarray, mean_u: np.ndarray, var_u: np.ndarray, big_n: int, lam: np.ndarray,
         z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = y.shape[-1]
    lam_l = lam[..., None]
    rect = y - lam_l * yh
    est = lam * mean_u + rect.mean(axis=-1)
    se = np.sqrt(rect.var(axis=-1) / n + lam * lam * var_u / big_n)
    return est, est - z * se, est + z * se, lam


def ppi_mean(y_labelled: FloatArray, yhat_labelled: FloatArray, yhat_unlabelled: FloatArray, level: float = 0.95,
             lam: float | None = None, unlabelled_includes_labelled: bool = False) -> MeanEstimate:
    """The PPI++ estimate of the mean clinician score, with its interval (:class:`MeanEstimate`,
    method ``"ppi"``; formulas in the module docstring).

    ``y_labelled`` / ``yhat_labelled``: the clinician's and the panel's scores of the ``n`` labelled
    cases, pairwise; ``yhat_unlabelled``: the panel's scores of the other cases, or, with
    ``unlabelled_includes_labelled``, of all cases (the labelled ones included once). ``lam``: None
    to power-tune it, or a fixed weight (1 = plain PPI, 0 = clinician only). With n = 0 everything is
    None; with n = 1 there is an estimate but no interval (a tuned lam falls back to 1); with no
    unlabelled case it is the clinician-only mean with its normal interval (lam 0).
    """
    y = np.asarray(y_labelled, dtype=float).ravel()
    yh = np.asarray(yhat_labelled, dtype=float).ravel()
    yu = np.asarray(yhat_unlabelled, dtype=float).ravel()
    n = int(y.size)
    if yh.size != n:
        raise ValueError(f"{n} clinician scores for {yh.size} panel scores of the labelled cases")
    if not (np.isfinite(y).all() and np.isfinite(yh).all() and np.isfinite(yu).all()):
        raise ValueError("scores must be finite numbers (drop missing cases first)")
    if unlabelled_includes_labelled:
        big_n = int(yu.size) - n
        if big_n < 0:
            raise ValueError(f"{yu.size} panel scores of all cases, fewer than the {n} labelled ones")
        # the rest's mean and (ddof 0) variance from sums around a shift (for precision): all minus labelled
        shift = float(yu.mean()) if yu.size else 0.0
        s = float((yu - shift).sum() - (yh - shift).sum())
        q = float(((yu - shift) ** 2).sum() - ((yh - shift) ** 2).sum())
        mean_u = shift + s / big_n if big_n else math.nan
        var_u = max(0.0, q / big_n - (s / big_n) ** 2) if big_n else math.nan
    else:
        big_n = int(yu.size)
        mean_u = float(yu.mean()) if big_n else math.nan
        var_u = float(yu.var()) if big_n else math.nan
    if n == 0:
        return MeanEstimate(estimate=None, low=None, high=None, n=0, N=big_n, method="ppi", lam=lam, level=level)
    if big_n == 0:  # nothing unlabelled: the clinician-only mean (lam 0) and its normal interval
        m_u, v_u, big_n_used, lam = np.asarray(0.0), np.asarray(0.0), 1, 0.0
    else:
        m_u, v_u, big_n_used = np.asarray(mean_u), np.asarray(var_u), big_n
    if n < 2:  # one label: an estimate (plain PPI unless lam is given), no variance, no interval
        lam = 1.0 if lam is None else lam
        point = float((y - lam * yh).mean() + lam * m_u)
        return MeanEstimate(estimate=point, low=None, high=None, n=n, N=big_n, method="ppi", lam=lam, level=level)
    lam_arr = _tuned_lam(y, yh, m_u, v_u, big_n_used) if lam is None else np.asarray(float(lam))
    est, low, high, lam_used = _ppi(y, yh, m_u, v_u, big_n_used, lam_arr, _z(level))
    return MeanEstimate(estimate=float(est), low=float(low), high=float(high), n=n, N=big_n, method="ppi",
                        lam=float(lam_used), level=level)


def _t_mean(x: FloatArray, level: float) -> tuple[float | None, float | None, float | None, int]:
    a = np.asarray(x, dtype=float).ravel()
    if not np.isfinite(a).all():
        raise ValueError("scores must be finite numbers (drop missing cases first)")
    if a.size == 0:
        return None, None, None, 0
    mean = float(a.mean())
    if a.size < 2:
        return mean, None, None, 1
    _z(level)
    half = float(scipy_stats().t.ppf(1 - (1 - level) / 2, a.size - 1)) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return mean, mean - half, mean + half, int(a.size)


def human_mean(y_labelled: FloatArray, level: float = 0.95) -> MeanEstimate:
    """The clinician-only estimate: the mean of the labelled cases' clinician scores with its Student-t
    interval (sample standard deviation, n - 1 degrees of freedom). Method ``"human"``; the interval
    is None below 2 cases."""
    mean, low, high, n = _t_mean(y_labelled, level)
    return MeanEstimate(estimate=mean, low=low, high=high, n=n, N=0, method="human", level=level)


def panel_mean(yhat_all: FloatArray, level: float = 0.95) -> MeanEstimate:
    """The panel-only figure: the mean of the panel's scores on all ``N`` cases with its Student-t
    interval. Method ``"panel"``. It estimates the mean panel score, not the mean clinician score:
    shown beside :func:`ppi_mean` and :func:`human_mean` to compare widths, it ignores the panel's bias."""
    mean, low, high, big_n = _t_mean(yhat_all, level)
    return MeanEstimate(estimate=mean, low=low, high=high, n=0, N=big_n, method="panel", level=level)


System = tuple[FloatArray, FloatArray, FloatArray]


def ppi_difference(a: System, b: System, level: float = 0.95, lam: float | None = None,
                   unlabelled_includes_labelled: bool = False) -> DifferenceEstimate:
    """The difference of two systems' PPI++ mean clinician scores, ``a - b``. Each system is
    ``(y_labelled, yhat_labelled, yhat_unlabelled)`` as for :func:`ppi_mean` (each with its own lam,
    tuned unless ``lam`` is given). The interval is ``d +- z sqrt(se_a^2 + se_b^2)`` with each
    ``se`` recovered from its interval: the two samples are taken as independent
    (:class:`DifferenceEstimate`)."""
    z = _z(level)
    ea = ppi_mean(*a, level=level, lam=lam, unlabelled_includes_labelled=unlabelled_includes_labelled)
    eb = ppi_mean(*b, level=level, lam=lam, unlabelled_includes_labelled=unlabelled_includes_labelled)
    if ea.estimate is None or eb.estimate is None:
        return DifferenceEstimate(estimate=None, low=None, high=None, a=ea, b=eb, level=level)
    d = ea.estimate - eb.estimate
    if ea.width is None or eb.width is None:
        return DifferenceEstimate(estimate=d, low=None, high=None, a=ea, b=eb, level=level)
    se = math.hypot(ea.width / (2 * z), eb.width / (2 * z))
    return DifferenceEstimate(estimate=d, low=d - z * se, high=d + z * se, a=ea, b=eb, level=level)
