"""Wilson intervals against published values (Newcombe 1998, Table I, method 3)."""

import pytest

from consensus_eval.analysis.intervals import proportion, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # Newcombe (1998) Stat Med 17:857-872, Table I, "score method without continuity correction"
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_newcombe(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=5e-5)
    assert hi == pytest.approx(high, abs=5e-5)


def test_all_and_none() -> None:
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0


def test_proportion_empty_and_bad() -> None:
    p = proportion(0, 0)
    assert p.value is None and p.low is None
    assert proportion(3, 4).value == 0.75
    with pytest.raises(ValueError):
        wilson(5, 4)


def test_cluster_variance_is_statsmodels_cluster_robust_variance_of_a_mean() -> None:
    """For 0/1 outcomes in clusters, the ratio's linearised variance is the cluster-robust variance of the
    mean that statsmodels' OLS on a constant gives (an independent implementation)."""
    import numpy as np
    import statsmodels.api as sm

    from consensus_eval.analysis.intervals import cluster_variance

    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(12), rng.integers(3, 40, size=12))
    p_group = rng.uniform(0.4, 0.95, size=12)
    y = (rng.uniform(size=groups.size) < p_group[groups]).astype(float)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    num = [y[groups == g].sum() for g in range(12)]
    den = [float((groups == g).sum()) for g in range(12)]
    assert cluster_variance(num, den) == pytest.approx(float(fit.bse[0]) ** 2, rel=1e-9)
    # one unit a cluster: p(1-p)/(n-1)
    ys = [1.0] * 7 + [0.0] * 3
    assert cluster_variance(ys, [1.0] * 10) == pytest.approx(0.7 * 0.3 / 9)
    assert cluster_variance([3.0], [4.0]) == 0.0  # one cluster: no variance estimate


def test_effective_n_and_the_size_to_tell_70_from_90() -> None:
    from consensus_eval.analysis.intervals import effective_n, needed_to_separate, wilson, wilson_p

    # twice the binomial variance halves the sample; never more than the distinct units; no gain below deff 1
    assert effective_n(0.5, 100, 2 * 0.25 / 100) == pytest.approx(50)
    assert effective_n(0.5, 100, 0.25 / 100 / 4, units=80) == 80
    assert effective_n(1.0, 50, 0.0, units=30) == 30
    # wilson_p on an integer n is wilson
    assert wilson_p(0.7, 10) == pytest.approx(wilson(7, 10))
    assert wilson_p(0.0, 12) == pytest.approx(wilson(0, 12))
    n = needed_to_separate()
    assert wilson_p(0.7, n)[1] < 0.9 and wilson_p(0.9, n)[0] > 0.7
    assert not (wilson_p(0.7, n - 1)[1] < 0.9 and wilson_p(0.9, n - 1)[0] > 0.7)
    assert n == 21
