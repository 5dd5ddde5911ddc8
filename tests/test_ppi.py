"""PPI++ mean estimation: exact agreement with ppi-python, and coverage of the 95% interval in
simulations where the truth is known (unbiased, biased and heteroscedastic judges)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from consensus_eval.analysis.ppi import human_mean, panel_mean, ppi_difference, ppi_mean, ppi_mean_batch

SIMS = 1000
N_UNLABELLED = 2000
N_LABELLED = 100


def _example(seed: int, n: int = 200, big_n: int = 5000, bias: float = 0.0, noise: float = 1.0,
             binary: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ppi-python's test style: Y and a prediction Yhat = Y + bias + noise, n labelled, N unlabelled."""
    rng = np.random.default_rng(seed)
    if binary:  # a classifier's probability of a binary outcome, as in ppi-python's examples
        y = rng.binomial(1, 0.3, n + big_n).astype(float)
        yhat = np.clip(0.25 + 0.5 * y + rng.normal(0, 0.2 * noise, n + big_n), 0, 1)
    else:
        y = rng.normal(0, 1, n + big_n)
        yhat = y + bias + rng.normal(0, noise, n + big_n)
    return y[:n], yhat[:n], yhat[n:]


EXAMPLES = {
    "good": _example(0),
    "biased": _example(1, bias=-0.5),
    "noisy": _example(2, noise=3.0),
    "small": _example(3, n=30, big_n=300, noise=0.5),
    "binary": _example(4, binary=True),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_matches_ppi_py(name: str, lam: float | None) -> None:
    ppi_py = pytest.importorskip("ppi_py")
    y, yhat, yhat_u = EXAMPLES[name]
    ours = ppi_mean(y, yhat, yhat_u, lam=lam, interval="z")
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert ours.low == pytest.approx(float(np.ravel(low)[0]), abs=1e-9)
    assert ours.high == pytest.approx(float(np.ravel(high)[0]), abs=1e-9)
    assert (ours.n, ours.N, ours.method) == (y.size, yhat_u.size, "ppi")
    if lam is None:
        # the lam we report is the one ppi_py tuned: fixing it reproduces the tuned interval
        assert ours.lam is not None and 0 <= ours.lam <= 1
        fixed = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=ours.lam)
        assert float(np.ravel(fixed[0])[0]) == pytest.approx(float(np.ravel(low)[0]), abs=1e-12)
    else:
        assert ours.lam == lam


def test_other_level_matches_ppi_py() -> None:
    ppi_py = pytest.importorskip("ppi_py")
    y, yhat, yhat_u = EXAMPLES["noisy"]
    ours = ppi_mean(y, yhat, yhat_u, level=0.9, interval="z")
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.1)
    assert (ours.low, ours.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)


@pytest.mark.parametrize("lam", [None, 1.0])
def test_unlabelled_including_labelled_is_ppi_py_on_the_rest(lam: float | None) -> None:
    """The tool passes the panel's scores of ALL cases; that must equal ppi_py on the disjoint rest."""
    ppi_py = pytest.importorskip("ppi_py")
    y, yhat, rest = EXAMPLES["biased"]
    all_cases = np.concatenate([rest[:1000], yhat, rest[1000:]])  # the labelled ones somewhere inside
    ours = ppi_mean(y, yhat, all_cases, lam=lam, unlabelled_includes_labelled=True, interval="z")
    low, high = ppi_py.ppi_mean_ci(y, yhat, rest, alpha=0.05, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, rest, lam=lam)
    assert rest.size == ours.N
    assert (ours.estimate, ours.low, ours.high) == pytest.approx(
        (float(np.ravel(point)[0]), float(low[0]), float(high[0])), abs=1e-9)
    with pytest.raises(ValueError):
        ppi_mean(y, yhat, yhat[:10], unlabelled_includes_labelled=True)


def test_batch_equals_single() -> None:
    y, yhat, yhat_u = EXAMPLES["good"]
    est, low, high, lam = ppi_mean_batch(y[None, :], yhat[None, :], yhat_u[None, :])
    one = ppi_mean(y, yhat, yhat_u)
    assert (float(est[0]), float(low[0]), float(high[0]), float(lam[0])) == pytest.approx(
        (one.estimate, one.low, one.high, one.lam), abs=1e-12)


def test_lam_zero_is_the_classical_interval() -> None:
    y, yhat, yhat_u = EXAMPLES["noisy"]
    zero = ppi_mean(y, yhat, yhat_u, lam=0.0, interval="z")
    half = 1.959963984540054 * y.std() / np.sqrt(y.size)  # normal interval, ddof 0 (ppi_py's classical_mean_ci)
    assert (zero.estimate, zero.low, zero.high) == pytest.approx((y.mean(), y.mean() - half, y.mean() + half))
    # the small-sample interval at lam 0 is the clinicians-only t interval, exactly (like with like)
    t_zero, human = ppi_mean(y, yhat, yhat_u, lam=0.0), human_mean(y)
    assert (t_zero.estimate, t_zero.low, t_zero.high) == pytest.approx((human.estimate, human.low, human.high))


def test_human_and_panel_means() -> None:
    y, _, yhat_u = EXAMPLES["small"]
    h = human_mean(y)
    lo, hi = stats.t.interval(0.95, y.size - 1, loc=y.mean(), scale=stats.sem(y))
    assert (h.estimate, h.low, h.high, h.n, h.N, h.method) == pytest.approx((y.mean(), lo, hi, 30, 0, "human"))
    p = panel_mean(yhat_u)
    lo, hi = stats.t.interval(0.95, yhat_u.size - 1, loc=yhat_u.mean(), scale=stats.sem(yhat_u))
    assert (p.estimate, p.low, p.high, p.n, p.N, p.method) == pytest.approx((yhat_u.mean(), lo, hi, 0, 300, "panel"))
    assert p.width is not None and h.width is not None and p.width < h.width
    assert human_mean([]).estimate is None and human_mean([3.0]).low is None and human_mean([3.0]).estimate == 3.0
    assert panel_mean([]).N == 0


def test_edge_cases() -> None:
    empty = ppi_mean([], [], [1.0, 2.0])
    assert empty.estimate is None and empty.low is None and empty.n == 0
    alone = ppi_mean([3.0, 5.0], [2.0, 4.0], [], interval="z", min_n=2)
    # nothing unlabelled: the clinician-only mean, normal interval with the ddof-0 sd (1 here)
    assert alone.estimate == pytest.approx(4.0) and alone.lam == 0.0 and alone.N == 0
    half = 1.959963984540054 / np.sqrt(2)
    assert (alone.low, alone.high) == pytest.approx((4 - half, 4 + half))
    # below the minimum of labels: the estimate, no interval, and why
    few = ppi_mean([3.0, 5.0], [2.0, 4.0], [])
    assert few.estimate == pytest.approx(4.0) and few.few and few.low is None and few.high is None
    one = ppi_mean([3.0], [2.0], [4.0, 6.0])  # plain PPI: 5 + (3 - 2) = 6, no interval
    assert one.estimate == pytest.approx(6.0) and one.lam == 1.0 and one.low is None
    # a constant panel carries no information: lam 0, the clinician-only interval
    flat = ppi_mean([1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [5.0] * 10)
    assert flat.lam == 0.0 and flat.estimate == pytest.approx(2.0)
    with pytest.raises(ValueError):
        ppi_mean([1.0, 2.0], [1.0], [1.0])
    with pytest.raises(ValueError):
        ppi_mean([1.0, float("nan")], [1.0, 2.0], [1.0])


def test_difference() -> None:
    a = EXAMPLES["good"]
    b = _example(9, bias=-0.5)
    d = ppi_difference(a, b, interval="z")
    ea, eb = ppi_mean(*a, interval="z"), ppi_mean(*b, interval="z")
    assert d.estimate == pytest.approx((ea.estimate or 0) - (eb.estimate or 0))
    se = np.hypot((ea.width or 0) / (2 * 1.959963984540054), (eb.width or 0) / (2 * 1.959963984540054))
    assert (d.low, d.high) == pytest.approx((d.estimate - 1.959963984540054 * se, d.estimate + 1.959963984540054 * se))
    assert d.a == ea and d.b == eb
    # t: the two standard errors added, Satterthwaite's degrees of freedom (Welch's formula on the two parts)
    small_a, small_b = _example(5, n=8, big_n=60, noise=2.0), _example(6, n=6, big_n=50, bias=1.0, noise=2.0)
    dt = ppi_difference(small_a, small_b)
    ta, tb = ppi_mean(*small_a), ppi_mean(*small_b)
    assert ta.se is not None and tb.se is not None and ta.df is not None and tb.df is not None
    df = (ta.se ** 2 + tb.se ** 2) ** 2 / (ta.se ** 4 / ta.df + tb.se ** 4 / tb.df)
    half = stats.t.ppf(0.975, df) * np.hypot(ta.se, tb.se)
    assert dt.estimate is not None and (dt.low, dt.high) == pytest.approx((dt.estimate - half, dt.estimate + half))
    none = ppi_difference(([], [], [1.0]), b)
    assert none.estimate is None


# ---------------------------------------------------------------------------------------- coverage


def _simulate(judge: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """SIMS independent studies: clinician scores Y (truth: mean 70), the judge's scores of the labelled
    and of the unlabelled cases. ``judge``: "unbiased" (Y + N(0, 4)), "biased" (3 points low),
    "hetero" (noise sd proportional to Y: 0.1 Y)."""
    rng = np.random.default_rng(seed)
    total = N_LABELLED + N_UNLABELLED
    y = rng.normal(70, 10, (SIMS, total))
    if judge == "unbiased":
        yhat = y + rng.normal(0, 4, y.shape)
    elif judge == "biased":
        yhat = y - 3 + rng.normal(0, 4, y.shape)
    else:
        yhat = y + rng.normal(0, 1, y.shape) * 0.1 * np.abs(y)
    return y[:, :N_LABELLED], yhat[:, :N_LABELLED], yhat[:, N_LABELLED:], 70.0


@pytest.mark.parametrize(("judge", "seed"), [("unbiased", 101), ("biased", 102), ("hetero", 103)])
def test_coverage(judge: str, seed: int) -> None:
    y, yhat, yhat_u, truth = _simulate(judge, seed)
    est, low, high, lam = ppi_mean_batch(y, yhat, yhat_u)
    coverage = float(((low <= truth) & (truth <= high)).mean())
    assert 0.93 <= coverage <= 0.97, coverage
    assert abs(float(est.mean()) - truth) < 0.1  # unbiased, even for the biased judge
    # plain PPI (lam = 1) covers too (a looser band: it is an extra check; observed 0.931-0.960)
    _, low1, high1, _ = ppi_mean_batch(y, yhat, yhat_u, lam=1.0)
    assert 0.92 <= float(((low1 <= truth) & (truth <= high1)).mean()) <= 0.98
    if judge == "unbiased":
        # the good judge makes PPI narrower than the clinician-only t interval, on average (here by ~2x)
        human_width = 2 * stats.t.ppf(0.975, N_LABELLED - 1) * y.std(axis=1, ddof=1) / np.sqrt(N_LABELLED)
        assert human_mean(y[0]).width == pytest.approx(human_width[0])
        assert float((high - low).mean()) < 0.6 * float(human_width.mean())
        assert float(lam.mean()) > 0.8


def test_coverage_with_all_cases_passed() -> None:
    """The tool's convention (panel scores of all cases, labelled ones included) covers as well."""
    y, yhat, yhat_u, truth = _simulate("biased", 104)
    hits = 0
    for i in range(SIMS):
        e = ppi_mean(y[i], yhat[i], np.concatenate([yhat[i], yhat_u[i]]), unlabelled_includes_labelled=True)
        hits += (e.low or 0) <= truth <= (e.high or 0)
    assert 0.93 <= hits / SIMS <= 0.97
