"""G-study (variance components of the p x (r:j) design) and D-study: hand arithmetic, unbiasedness in
simulation, monotone coefficients, and the cheapest design."""

from __future__ import annotations

import numpy as np
import pytest

from consensus_eval.analysis.gstudy import (
    DesignReliability,
    VarianceComponents,
    balanced_subset,
    cheapest_design,
    d_study,
    g_study,
    g_study_single_run,
)

# 2 cases x 2 judges x 2 runs: TINY[case][judge][run]
TINY = np.array([[[1.0, 3.0], [4.0, 6.0]],
                 [[3.0, 5.0], [5.0, 9.0]]])


def test_tiny_example_by_hand() -> None:
    # grand mean 36 / 8 = 4.5
    # case means 3.5, 5.5:        SS_p   = 2*2 * (1 + 1) = 8,                          df 1, MS 8
    # judge means 3, 6:           SS_j   = 2*2 * (2.25 + 2.25) = 18,                   df 1, MS 18
    # (judge, run) means 2, 4 | 4.5, 7.5 around judge means 3 | 6:
    #                             SS_r:j = 2 * (1 + 1 + 2.25 + 2.25) = 13,             df 2, MS 6.5
    # (case, judge) means 2, 5 | 4, 7: interactions 2-3.5-3+4.5 = 0, 0, 0, 0:
    #                             SS_pj  = 0,                                          df 1, MS 0
    # residuals x - m_pj - m_jr + m_j: 0, 0, .5, -.5 | 0, 0, -.5, .5:
    #                             SS_e   = 4 * .25 = 1,                                df 2, MS 0.5
    # (check: total SS = sum (x - 4.5)^2 = 40 = 8 + 18 + 13 + 0 + 1)
    # components: e = 0.5; pj = (0 - 0.5) / 2 = -0.25 (-> 0); r:j = (6.5 - 0.5) / 2 = 3;
    #             p = (8 - 0) / (2*2) = 2;  j = (18 - 6.5 - 0 + 0.5) / (2*2) = 3
    vc = g_study(TINY)
    assert vc.mean_squares == pytest.approx({"case": 8, "judge": 18, "run": 6.5, "case_judge": 0, "residual": 0.5})
    assert vc.raw == pytest.approx({"case": 2, "judge": 3, "run": 3, "case_judge": -0.25, "residual": 0.5})
    assert (vc.case, vc.judge, vc.run, vc.case_judge, vc.residual) == pytest.approx((2, 3, 3, 0, 0.5))
    assert (vc.n_cases, vc.n_judges, vc.n_runs) == (2, 2, 2)
    # D-study, 1 judge x 1 run: g = 2 / (2 + 0 + 0.5) = 0.8; phi = 2 / (2 + (3 + 0) + (3 + 0.5)) = 2 / 8.5
    row = d_study(vc, judges=[1], runs=[1])[0]
    assert (row.g, row.phi, row.calls_per_case) == pytest.approx((0.8, 2 / 8.5, 1))


TRUTH = {"case": 4.0, "judge": 1.0, "run": 0.25, "case_judge": 0.5, "residual": 1.0}


def _simulate(reps: int, n_p: int, n_j: int, n_r: int, seed: int) -> np.ndarray:
    """``reps`` independent G-studies drawn from the p x (r:j) model with the TRUTH components."""
    rng = np.random.default_rng(seed)
    sd = {k: np.sqrt(v) for k, v in TRUTH.items()}
    return (50
            + rng.normal(0, sd["case"], (reps, n_p, 1, 1))
            + rng.normal(0, sd["judge"], (reps, 1, n_j, 1))
            + rng.normal(0, sd["run"], (reps, 1, n_j, n_r))
            + rng.normal(0, sd["case_judge"], (reps, n_p, n_j, 1))
            + rng.normal(0, sd["residual"], (reps, n_p, n_j, n_r)))


def test_estimates_are_unbiased() -> None:
    reps = 400
    sims = _simulate(reps, 200, 4, 3, seed=2024)
    raw = np.array([[g_study(s).raw[k] for k in TRUTH] for s in sims])
    mean, se = raw.mean(axis=0), raw.std(axis=0, ddof=1) / np.sqrt(reps)
    for i, (name, true) in enumerate(TRUTH.items()):
        # within 4 standard errors of the truth: unbiased (the raw, unclamped estimates)
        assert abs(mean[i] - true) < 4 * se[i], (name, mean[i], true, se[i])
    # the well-determined components (many degrees of freedom) within 3% of the truth
    for name in ("case", "case_judge", "residual"):
        i = list(TRUTH).index(name)
        assert mean[i] == pytest.approx(TRUTH[name], rel=0.03), name
    # the judge component has only n_j - 1 = 3 degrees of freedom: noisy per study, right on average
    assert mean[1] == pytest.approx(1.0, rel=0.15)


def test_negative_estimate_clamped_and_raw_kept() -> None:
    rng = np.random.default_rng(5)
    noise_only = rng.normal(0, 1, (30, 3, 2))  # all components but the residual are 0
    vc = g_study(noise_only)
    assert any(v < 0 for v in vc.raw.values())
    for k, v in vc.raw.items():
        assert getattr(vc, k) == max(0.0, v)


def test_balanced_subset() -> None:
    x = _simulate(1, 5, 2, 2, seed=1)[0]
    x[1, 0, 1] = np.nan
    x[3, 1, 0] = np.nan
    kept, dropped = balanced_subset(x)
    assert dropped == 2 and kept.shape == (3, 2, 2)
    assert np.array_equal(kept, x[[0, 2, 4]])
    listed: list[list[list[float | None]]] = [[[1.0, None], [2.0, 3.0]], [[1.0, 2.0], [2.0, 3.0]]]
    assert balanced_subset(listed)[1] == 1
    with pytest.raises(ValueError):
        g_study(x)
    with pytest.raises(ValueError):
        g_study(np.ones((5, 1, 2)))
    with pytest.raises(ValueError):
        balanced_subset(np.ones((5, 2)))


def _truth_vc() -> VarianceComponents:
    return VarianceComponents(case=TRUTH["case"], judge=TRUTH["judge"], run=TRUTH["run"],
                              case_judge=TRUTH["case_judge"], residual=TRUTH["residual"], raw=TRUTH,
                              mean_squares={}, n_cases=200, n_judges=4, n_runs=3)


def test_d_study_monotone() -> None:
    rows = d_study(_truth_vc(), judges=range(1, 6), runs=range(1, 4))
    assert len(rows) == 15 and [(r.judges, r.runs) for r in rows[:4]] == [(1, 1), (1, 2), (1, 3), (2, 1)]
    by = {(r.judges, r.runs): r for r in rows}
    for nj in range(1, 6):
        for nr in range(1, 4):
            r = by[nj, nr]
            assert r.g is not None and r.phi is not None and 0 < r.phi <= r.g < 1
            assert r.calls_per_case == nj * nr
            if nj > 1:
                assert r.g > (by[nj - 1, nr].g or 1) and r.phi > (by[nj - 1, nr].phi or 1)
            if nr > 1:
                assert r.g > (by[nj, nr - 1].g or 1) and r.phi > (by[nj, nr - 1].phi or 1)
    # by hand: 2 judges x 1 run, g = 4 / (4 + 0.5/2 + 1/2) = 4 / 4.75; phi = 4 / (4 + 1.5/2 + 1.25/2) = 4 / 5.375
    assert (by[2, 1].g, by[2, 1].phi) == pytest.approx((4 / 4.75, 4 / 5.375))
    zero = VarianceComponents(case=0, judge=0, run=0, case_judge=0, residual=0, raw={}, mean_squares={},
                              n_cases=2, n_judges=2, n_runs=2)
    assert d_study(zero, [1], [1])[0].g is None


def test_cheapest_design() -> None:
    rows = d_study(_truth_vc(), judges=range(1, 6), runs=range(1, 4))
    # phi(nj, nr) = 4 / (4 + 1.5/nj + 1.25/(nj nr)): (1,1) .593, (1,2) .653, (2,1) .744, (1,3) .676,
    # (3,1) 4/4.9167 = .814 -> 3 calls; (2,2) .790 and (4,1) cost more or fall short
    best = cheapest_design(rows, target=0.8, use="phi")
    assert best is not None and (best.design.judges, best.design.runs) == (3, 1) and best.cost is None
    # g(nj, nr) = 4 / (4 + 0.5/nj + 1/(nj nr)): (1,2) = 4/5 = .800 and (2,1) = 4/4.75 = .842 both take 2
    # calls: the more reliable, 2 judges x 1 run, wins
    best_g = cheapest_design(rows, target=0.8, cost_per_call=0.002, use="g")
    assert best_g is not None and (best_g.design.judges, best_g.design.runs) == (2, 1)
    assert best_g.cost == pytest.approx(0.004) and best_g.use == "g" and best_g.target == 0.8
    assert cheapest_design(rows, target=0.99) is None
    assert cheapest_design([], target=0.5) is None
    assert cheapest_design([DesignReliability(judges=1, runs=1, g=None, phi=None, calls_per_case=1)]) is None


def test_one_run_per_judge_gives_the_two_way_components_and_no_design_with_more_runs() -> None:
    # Shrout & Fleiss 1979 Table 4 (6 cases x 4 judges): MS between targets 11.24, between judges 32.49,
    # residual 1.02 (their Table 3); so s2(p) = (11.24 - 1.02) / 4 = 2.555, s2(j) = (32.49 - 1.02) / 6 = 5.245
    x = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)
    vc = g_study_single_run(x)
    assert vc.mean_squares["case"] == pytest.approx(11.2417, abs=1e-3)
    assert vc.mean_squares["judge"] == pytest.approx(32.4861, abs=1e-3)
    assert vc.mean_squares["residual"] == pytest.approx(1.0194, abs=1e-3)
    assert (vc.case, vc.judge, vc.residual) == pytest.approx((2.5556, 5.2444, 1.0194), abs=1e-3)
    assert not vc.runs_separated and vc.n_runs == 1
    rows = d_study(vc, judges=range(1, 5), runs=range(1, 4))
    assert [(r.judges, r.runs) for r in rows] == [(1, 1), (2, 1), (3, 1), (4, 1)]
    # phi with one judge is ICC(A,1) of the table (Shrout & Fleiss ICC(2,1) = 0.29)
    assert rows[0].phi == pytest.approx(0.2898, abs=1e-3)
