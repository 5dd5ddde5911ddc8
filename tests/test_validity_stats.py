"""Validity statistics (judge vs clinician) against published values, hand arithmetic and pingouin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from consensus_eval.analysis.validity import (
    MIN_CASES,
    against_one_clinician,
    bonett_min_n,
    cases_needed,
    icc_a1,
    score_validity,
    two_way_mean_squares,
    verdict_validity,
    weighted_mean,
)

# Shrout & Fleiss (1979) Psychol Bull 86:420, Table 4: 6 targets (rows) rated by 4 judges (columns)
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]],
                         dtype=float)


def _random_table(seed: int, n: int, k: int) -> np.ndarray:
    """Cases with a true score, raters with a severity offset, noise: a typical ICC(A,1) setting."""
    rng = np.random.default_rng(seed)
    return (rng.normal(50, 8, (n, 1)) + rng.normal(0, 3, (1, k)) + rng.normal(0, 5, (n, k))).round(1)


def _pingouin_icc2(x: np.ndarray, rounded: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float, float]:
    pg = pytest.importorskip("pingouin")
    pd = pytest.importorskip("pandas")
    n, k = x.shape
    df = pd.DataFrame({"case": np.repeat(np.arange(n), k), "rater": np.tile(np.arange(k), n), "score": x.ravel()})
    if not rounded:  # pingouin rounds CI95 to 2 dp by default: switch that off for a full-precision comparison
        monkeypatch.delitem(pg.options, "round.column.CI95", raising=False)
        monkeypatch.setitem(pg.options, "round", None)
    res = pg.intraclass_corr(data=df, targets="case", raters="rater", ratings="score").set_index("Type")
    row = res.loc["ICC(A,1)"] if "ICC(A,1)" in res.index else res.loc["ICC2"]
    low, high = row["CI95"] if "CI95" in row else row["CI95%"]
    return float(row["ICC"]), float(low), float(high)


# ----------------------------------------------------------------------------------------------- ICC(A,1)


def test_icc_shrout_fleiss_published_value() -> None:
    icc = icc_a1(SHROUT_FLEISS)
    # published: ICC(2,1) = .29 (Shrout & Fleiss 1979, Table 4)
    assert icc.value is not None and round(icc.value, 2) == 0.29
    # the mean squares by hand: BMS = 11.24, JMS = 32.49, EMS = 1.02 (their Table 3), n = 6, k = 4:
    # (11.24 - 1.02) / (11.24 + 3 * 1.02 + 4 * (32.49 - 1.02) / 6) = 10.22 / (14.30 + 20.98) = 0.2897
    assert icc.value == pytest.approx(10.22 / 35.28, abs=1e-3)
    assert (icc.n, icc.k, icc.level) == (6, 4, 0.95)
    assert icc.low is not None and icc.high is not None and icc.low < icc.value < icc.high


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3
@pytest.mark.parametrize(("name", "table"), [
    ("shrout_fleiss", SHROUT_FLEISS),
    ("seed1_20x3", _random_table(1, 20, 3)),
    ("seed2_30x2", _random_table(2, 30, 2)),
    ("seed3_50x5", _random_table(3, 50, 5)),
])
def test_icc_matches_pingouin(name: str, table: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    ours = icc_a1(table)
    assert ours.value is not None and ours.low is not None and ours.high is not None
    value, low, high = _pingouin_icc2(table, rounded=True, monkeypatch=monkeypatch)
    assert ours.value == pytest.approx(value, abs=1e-9)
    # pingouin's default output rounds the interval to 2 dp
    assert ours.low == pytest.approx(low, abs=0.006)
    assert ours.high == pytest.approx(high, abs=0.006)
    value, low, high = _pingouin_icc2(table, rounded=False, monkeypatch=monkeypatch)
    assert ours.value == pytest.approx(value, abs=1e-9)
    if (round(low, 2), round(high, 2)) == (low, high):
        # pingouin before 0.5.5 (ci/lowest.txt: 0.5.4) rounds the interval inside intraclass_corr, whatever
        # its options say: the 2-dp comparison above is all it allows
        assert ours.low == pytest.approx(low, abs=0.006) and ours.high == pytest.approx(high, abs=0.006)
    else:
        assert (ours.low, ours.high) == pytest.approx((low, high), abs=1e-9)


def test_icc_drops_incomplete_rows_and_degenerate_tables() -> None:
    with_gap = np.vstack([SHROUT_FLEISS, [[np.nan, 3, 4, 5]]])
    assert icc_a1(with_gap) == icc_a1(SHROUT_FLEISS)
    assert icc_a1(with_gap).n == 6
    one = icc_a1([[1.0, 2.0]])
    assert one.value is None and one.low is None and one.n == 1
    flat = icc_a1(np.full((5, 3), 4.0))
    assert flat.value is None and flat.high is None
    # perfect agreement: ICC 1, no residual variance, so no F-based interval
    perfect = icc_a1(np.column_stack([np.arange(6.0), np.arange(6.0)]))
    assert perfect.value == pytest.approx(1.0) and perfect.low is None
    with pytest.raises(ValueError):
        icc_a1(np.arange(6.0))


def test_icc_penalises_a_constant_offset() -> None:
    """Absolute agreement: a rater 5 points higher on every case lowers ICC(A,1), not a correlation."""
    rng = np.random.default_rng(7)
    truth = rng.normal(50, 10, 40)
    close = icc_a1(np.column_stack([truth, truth + rng.normal(0, 2, 40)])).value
    shifted = icc_a1(np.column_stack([truth, truth + 5 + rng.normal(0, 2, 40)])).value
    assert close is not None and shifted is not None and shifted < close - 0.1


# ----------------------------------------------------------------------------------------- Bonett 2002


@pytest.mark.parametrize(("rho", "k", "half", "expected"), [
    # n = 8 z^2 (1-rho)^2 (1+(k-1)rho)^2 / (k (k-1) w^2) + 1, z^2 = 1.95996^2 = 3.84146, w = 2 * half:
    # rho .8, k 2, w .2: 8 * 3.84146 * .04 * 3.24 / (2 * .04) + 1 = 3.98282 / .08 + 1 = 50.79 -> 51
    (0.8, 2, 0.1, 51),
    # rho .7, k 2, w .2: 8 * 3.84146 * .09 * 2.89 / .08 + 1 = 7.99344 / .08 + 1 = 100.92 -> 101
    (0.7, 2, 0.1, 101),
    # rho .6, k 3, w .2: 8 * 3.84146 * .16 * 4.84 / (6 * .04) + 1 = 23.7986 / .24 + 1 = 100.16 -> 101
    (0.6, 3, 0.1, 101),
    # rho .9, k 5, w .1: 8 * 3.84146 * .01 * 21.16 / (20 * .01) + 1 = 6.50282 / .2 + 1 = 33.51 -> 34
    (0.9, 5, 0.05, 34),
])
def test_bonett_by_hand(rho: float, k: int, half: float, expected: int) -> None:
    assert bonett_min_n(rho, k, half) == expected


def test_bonett_monotone() -> None:
    # narrower intervals need more cases; a higher ICC (above ~0.5 for k=2) needs fewer; more raters fewer
    assert bonett_min_n(0.8, 2, 0.05) > bonett_min_n(0.8, 2, 0.1) > bonett_min_n(0.8, 2, 0.2)
    ns = [bonett_min_n(r, 2, 0.1) for r in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)]
    assert ns == sorted(ns, reverse=True) and len(set(ns)) == len(ns)
    assert bonett_min_n(0.8, 2, 0.1) > bonett_min_n(0.8, 3, 0.1) > bonett_min_n(0.8, 5, 0.1)
    assert bonett_min_n(0.8, 2, 0.1, level=0.99) > bonett_min_n(0.8, 2, 0.1, level=0.9)
    assert bonett_min_n(1.0, 2) == 1
    for bad in [(0.8, 1), (1.2, 2), (-1.0, 2)]:
        with pytest.raises(ValueError):
            bonett_min_n(*bad)


# ------------------------------------------------------------------------------------------ scores


def test_score_validity_bias_mae_icc() -> None:
    rater = [10.0, 12.0, None, 15.0, 9.0, 20.0, 18.0, 11.0, 14.0, 16.0, 13.0, float("nan")]
    ref = [9.0, 12.0, 5.0, 13.0, 10.0, 18.0, 18.0, 10.0, 12.0, 15.0, 14.0, 3.0]
    v = score_validity(rater, ref)
    # pairs kept: 10 (None and NaN dropped); differences 1, 0, 2, -1, 2, 0, 1, 2, 1, -1
    assert v.n == 10
    assert v.bias == pytest.approx(7 / 10)
    assert v.mae == pytest.approx(11 / 10)
    kept = [(a, b) for a, b in zip(rater, ref, strict=True) if a is not None and not math.isnan(a)]
    assert v.icc == icc_a1(np.array(kept))
    # the rater scores 0.7 higher on average: the rater-bias term asks for more cases than Bonett's formula
    assert v.icc.value is not None and v.min_n == cases_needed(np.array(kept), 0.1)
    assert v.min_n is not None and v.min_n > bonett_min_n(v.icc.value, 2, 0.1)
    assert v.small_sample is (v.n < v.min_n) and not v.unreachable
    assert not v.weighted


def test_score_validity_small_sample_flags() -> None:
    few = score_validity([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.5])
    assert few.n < MIN_CASES and few.small_sample
    rng = np.random.default_rng(3)
    truth = rng.normal(50, 10, 400)
    many = score_validity(truth + rng.normal(0, 1, 400), truth)
    assert many.icc.value is not None and many.icc.value > 0.98
    assert many.min_n is not None and many.min_n < 400 and not many.small_sample
    empty = score_validity([], [])
    assert empty.n == 0 and empty.bias is None and empty.mae is None and empty.min_n is None and empty.small_sample


def test_score_validity_weights() -> None:
    rater = np.array([10.0, 12.0, 15.0, 9.0, 20.0, 18.0])
    ref = np.array([9.0, 12.0, 13.0, 10.0, 18.0, 18.0])
    w = np.array([1.0, 4.0, 2.0, 2.0, 1.0, 4.0])  # 1 / inclusion probability
    v = score_validity(rater, ref, weights=w)
    d = rater - ref  # 1, 0, 2, -1, 2, 0
    # weighted bias: (1*1 + 4*0 + 2*2 + 2*-1 + 1*2 + 4*0) / 14 = 5 / 14; MAE: (1 + 0 + 4 + 2 + 2 + 0) / 14 = 9 / 14
    assert v.bias == pytest.approx(5 / 14) and v.mae == pytest.approx(9 / 14)
    assert v.bias == pytest.approx(np.average(d, weights=w))
    assert v.weighted
    # the ICC ignores the weights
    assert v.icc == score_validity(rater, ref).icc
    # equal weights are the plain means; a dropped pair drops its weight
    assert score_validity(rater, ref, weights=np.full(6, 3.0)).bias == pytest.approx(d.mean())
    gap = score_validity([*rater, None], [*ref, 0.0], weights=[*w, 100.0])
    assert gap.bias == pytest.approx(5 / 14)
    with pytest.raises(ValueError):
        score_validity(rater, ref, weights=[1.0, 2.0])
    with pytest.raises(ValueError):
        weighted_mean([1.0, 2.0], [-1.0, 1.0])


# ---------------------------------------------------------------------------------------- verdicts


def test_kappa_and_f1_by_hand() -> None:
    # 2 x 2 table (rater rows, clinician columns), n = 50:
    #                 ref taken  ref not
    #   rater taken       20        5      (25)
    #   rater not         10       15      (25)
    #                    (30)      (20)
    # p_o = (20 + 15) / 50 = 0.70; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.50; kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40
    # F1 = 2TP / (2TP + FP + FN): taken 40 / 55 = 8/11, not 30 / 45 = 2/3; macro = (8/11 + 2/3) / 2 = 23/33
    rater = ["taken"] * 25 + ["not"] * 25
    ref = ["taken"] * 20 + ["not"] * 5 + ["taken"] * 10 + ["not"] * 15
    v = verdict_validity(rater, ref)
    assert v.n == 50
    assert v.kappa == pytest.approx(0.40)
    assert v.macro_f1 == pytest.approx(23 / 33)
    assert v.agreement.k == 35 and v.agreement.value == pytest.approx(0.70)
    assert v.agreement.low is not None and v.agreement.low < 0.70 < (v.agreement.high or 0)


def test_kappa_undefined_and_empty() -> None:
    same = verdict_validity(["taken"] * 8, ["taken"] * 8)
    assert same.kappa is None and same.n == 8 and same.agreement.value == 1.0
    empty = verdict_validity([], [])
    assert empty.n == 0 and empty.kappa is None and empty.macro_f1 is None and empty.agreement.value is None
    # perfect agreement on two classes: kappa 1; total disagreement on a balanced table: kappa -1
    assert verdict_validity([1, 0, 1, 0], [1, 0, 1, 0]).kappa == pytest.approx(1.0)
    assert verdict_validity([1, 0, 1, 0], [0, 1, 0, 1]).kappa == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        verdict_validity([1, 0], [1])


def test_kappa_matches_sklearn_on_three_classes() -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    ref = rng.choice(["none", "minor", "major"], 120)
    rater = np.where(rng.random(120) < 0.7, ref, rng.choice(["none", "minor", "major"], 120))
    v = verdict_validity(list(rater), list(ref))
    assert v.kappa == pytest.approx(sklearn_metrics.cohen_kappa_score(ref, rater))
    assert v.macro_f1 == pytest.approx(sklearn_metrics.f1_score(ref, rater, average="macro"))


def test_isotonic_map_against_sklearn_and_its_cross_validated_error() -> None:
    from sklearn.isotonic import IsotonicRegression

    from consensus_eval.analysis.validity import isotonic_map

    rng = np.random.default_rng(7)
    raw = rng.uniform(70, 100, 200)
    clinician = 2 * raw - 110 + rng.normal(0, 2, 200)          # the judge compresses the clinicians' scale
    m = isotonic_map(list(raw), list(clinician), folds=5, seed=1)
    fit = IsotonicRegression(out_of_bounds="clip").fit(raw, clinician)
    assert m.n == 200 and m.x == pytest.approx(list(fit.X_thresholds_))
    assert m.y == pytest.approx(list(fit.y_thresholds_))
    assert [m.apply(v) for v in (60.0, 85.0, 120.0)] == pytest.approx(list(fit.predict([60.0, 85.0, 120.0])))
    assert all(b >= a for a, b in zip(m.y, m.y[1:], strict=False))          # monotone
    assert m.mae_raw == pytest.approx(float(np.abs(raw - clinician).mean()))
    assert m.mae_raw is not None
    assert m.mae_cv is not None and m.mae_cv < m.mae_raw / 3                # out-of-fold, still far better
    # a useless judge: calibration cannot invent a relation the data do not have
    noise = isotonic_map(list(rng.uniform(70, 100, 60)), list(rng.uniform(60, 100, 60)))
    assert noise.mae_cv is not None and noise.mae_cv > 5
    assert isotonic_map([90.0], [80.0]).mae_cv is None


# ------------------------------------------------------------------------------------ cases needed


def test_two_way_mean_squares_against_statsmodels_anova() -> None:
    sm = pytest.importorskip("statsmodels.formula.api")
    anova = pytest.importorskip("statsmodels.stats.anova")
    pd = pytest.importorskip("pandas")
    x = _random_table(11, 12, 3)
    df = pd.DataFrame([(i, j, x[i, j]) for i in range(12) for j in range(3)], columns=["case", "rater", "y"])
    table = anova.anova_lm(sm.ols("y ~ C(case) + C(rater)", data=df).fit())
    ms = table["mean_sq"]
    assert two_way_mean_squares(x) == pytest.approx((ms["C(case)"], ms["C(rater)"], ms["Residual"]), rel=1e-12)


def _no_bias(x: np.ndarray) -> np.ndarray:
    """``x`` with every rater's mean moved to the grand mean: no systematic difference between raters."""
    return np.asarray(x - x.mean(axis=0, keepdims=True) + x.mean())


def test_without_a_rater_bias_cases_needed_is_bonetts_figure() -> None:
    for seed, rho_scale in ((1, 8.0), (2, 12.0), (3, 20.0)):
        rng = np.random.default_rng(seed)
        x = _no_bias(rng.normal(0, rho_scale, (60, 1)) + rng.normal(0, 8, (60, 2)))
        msr, msc, mse = two_way_mean_squares(x)
        assert msc == pytest.approx(0, abs=1e-9)
        planning = (msr - mse) / 2 / ((msr - mse) / 2 + mse)   # the ICC the plan is made for
        ours, bonett = cases_needed(x), bonett_min_n(planning, 2, 0.1)
        assert ours is not None and abs(ours - bonett) <= max(4, 0.1 * bonett), (ours, bonett)


def test_a_rater_bias_raises_the_cases_needed_and_can_make_it_unreachable() -> None:
    rng = np.random.default_rng(4)
    base = _no_bias(rng.normal(0, 12, (40, 1)) + rng.normal(0, 5, (40, 2)))
    slight = base + np.array([0.0, 2.5])
    strong = base + np.array([0.0, 8.0])
    n0, n1 = cases_needed(base), cases_needed(slight)
    assert n0 is not None and n1 is not None and n1 > n0
    assert cases_needed(strong) is None                     # 2 raters: the bias's 1 df keeps the interval wide
    v = score_validity(strong[:, 0], strong[:, 1])
    assert v.unreachable and v.min_n is None and v.small_sample


def test_at_the_cases_needed_simulated_intervals_are_about_that_wide() -> None:
    rng = np.random.default_rng(5)
    s_r, s_c, s_e = 100.0, 4.0, 25.0                        # components: cases, rater bias, error
    pilot = rng.normal(0, 10, (400, 1)) + np.array([0.0, 2.0]) + rng.normal(0, 5, (400, 2))
    m = cases_needed(pilot)
    assert m is not None
    widths = []
    for _ in range(300):
        x = (rng.normal(0, math.sqrt(s_r), (m, 1)) + rng.normal(0, math.sqrt(s_c), (1, 2))
             + rng.normal(0, math.sqrt(s_e), (m, 2)))
        i = icc_a1(x)
        if i.low is not None and i.high is not None:
            widths.append(i.high - i.low)
    assert 0.15 < float(np.median(widths)) < 0.3


def test_a_rater_as_good_as_one_clinician_beats_the_ceiling_half_the_time() -> None:
    """Judge, clinician 1 and clinician 2 each score the truth with the same noise, on 40 cases both
    clinicians scored: on the same basis (each against clinician 1) the judge is above the ceiling about
    half the time; against the two clinicians' mean, the old basis (a less noisy reference), most of the
    time (the issue measured 78%)."""
    rng = np.random.default_rng(6)
    same, old = 0, 0
    sims, n = 1000, 40
    for _ in range(sims):
        truth = rng.normal(80, 6, n)
        judge, c1, c2 = (truth + rng.normal(0, 4, n) for _ in range(3))
        mine, ceiling = against_one_clinician(judge, c1, c2)
        assert mine.value is not None and ceiling.value is not None
        same += mine.value > ceiling.value
        old_value = icc_a1(np.column_stack([judge, (c1 + c2) / 2])).value
        assert old_value is not None
        old += old_value > ceiling.value
    assert 0.45 <= same / sims <= 0.55, same / sims
    assert old / sims > 0.7, old / sims


def test_weighted_verdicts_equal_the_sample_with_each_pair_repeated_by_its_weight() -> None:
    rater = ["yes", "no", "yes", "yes", "no", "no", "yes", "no"]
    ref = ["yes", "no", "no", "yes", "yes", "no", "yes", "yes"]
    weights = [1, 3, 2, 1, 4, 1, 2, 1]
    w = verdict_validity(rater, ref, [float(x) for x in weights])
    repeated = verdict_validity([r for r, k in zip(rater, weights, strict=True) for _ in range(k)],
                                [r for r, k in zip(ref, weights, strict=True) for _ in range(k)])
    assert w.weighted and (w.kappa, w.macro_f1) == pytest.approx((repeated.kappa, repeated.macro_f1))
    assert w.agreement == verdict_validity(rater, ref).agreement       # a count of the sample, not weighted
    with pytest.raises(ValueError):
        verdict_validity(rater, ref, [1.0])
