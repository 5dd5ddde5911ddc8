"""Krippendorff's alpha against the published example and the `krippendorff` package; CIs; agreement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from typer.testing import CliRunner

from consensus_eval.analysis.agreement import agreement, pearson, spearman
from consensus_eval.analysis.alpha import Level, alpha_with_ci, bootstrap_ci, krippendorff_alpha, load_ratings
from consensus_eval.cli import app
from tests.helpers import present

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 coders x 12 units, missing data.
EXAMPLE = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])
PUBLISHED = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


@pytest.mark.parametrize("level", list(PUBLISHED))
def test_published_example(level: Level) -> None:
    a = krippendorff_alpha(EXAMPLE, level)
    assert a.value is not None
    assert round(a.value, 3) == PUBLISHED[level]
    # units 1-10 and 11 have >= 2 ratings; unit 12 has one: 11 units, 40 - 1 pairable values
    assert a.n_units == 11 and a.n_values == 40 and a.n_raters == 4


@pytest.mark.parametrize("level", list(PUBLISHED))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_krippendorff_package_on_random_data(level: Level, seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 8, (4, 60)).astype(float)
    data[1] = np.where(rng.random(60) < 0.6, data[0], data[1])  # some agreement
    data[rng.random(data.shape) < 0.15] = NAN
    ours = krippendorff_alpha(data, level).value
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert ours == pytest.approx(theirs, abs=1e-12)


def test_float_scores_do_not_blow_up_memory() -> None:
    # 5 judges x 10,000 cases of continuous scores: the package would need ~186 GB (STACK_NOTES)
    rng = np.random.default_rng(7)
    truth = rng.normal(70, 10, 10_000)
    data = truth + rng.normal(0, 5, (5, 10_000))
    a = krippendorff_alpha(data, "interval")
    # expected: var(truth) / (var(truth) + var(noise)) = 100 / 125 = 0.8
    assert a.value == pytest.approx(0.8, abs=0.02)


def test_missing_values_are_missing_not_zeros() -> None:
    data = np.array([[10, 20, 30, NAN], [10, 20, 30, 40]])
    as_zero = np.nan_to_num(data)
    assert krippendorff_alpha(data).value == pytest.approx(1.0)
    assert present(krippendorff_alpha(as_zero).value) < 1.0
    assert krippendorff_alpha([[10, 20, 30, None], [10, 20, 30, 40]]).value == pytest.approx(1.0)


def test_undefined_alpha_says_why() -> None:
    assert krippendorff_alpha([[1, 2, 3], [NAN, NAN, NAN]]).reason == "no unit has two or more ratings"
    same = krippendorff_alpha([[3, 3, 3], [3, 3, 3]])
    assert same.value is None and same.reason is not None and "no variation" in same.reason
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(EXAMPLE, "cardinal")  # type: ignore[arg-type]  # bad input: no such level


def test_perfect_and_systematic_disagreement() -> None:
    assert krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 4]]).value == pytest.approx(1.0)
    # reversed ratings disagree more than chance
    assert present(krippendorff_alpha([[1, 2, 3, 4], [4, 3, 2, 1]]).value) < 0


def test_bootstrap_ci_is_reproducible_and_brackets_alpha() -> None:
    rng = np.random.default_rng(3)
    truth = rng.normal(30, 5, 80)
    data = truth + rng.normal(0, 2, (3, 80))
    a = alpha_with_ci(data, "interval", n_boot=500, seed=11)
    assert a.ci is not None and a.value is not None
    assert a.ci[0] < a.value < a.ci[1]
    assert bootstrap_ci(data, "interval", 500, seed=11) == a.ci
    assert bootstrap_ci(data, "interval", 500, seed=12) != a.ci


def test_vectorised_interval_bootstrap_equals_the_loop() -> None:
    """The interval bootstrap sums per-unit statistics; it must equal recomputing each resample."""
    rng = np.random.default_rng(5)
    data = rng.normal(0, 1, (3, 30)) + rng.normal(0, 1, 30)
    data[0, 3] = NAN
    n_boot, seed = 50, 99
    lo, hi = present(bootstrap_ci(data, "interval", n_boot, seed))
    picks = np.random.default_rng(seed).integers(0, 30, (n_boot, 30))
    loop = [present(krippendorff_alpha(data[:, p]).value) for p in picks]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(loop, [0.025, 0.975])), abs=1e-12)


def test_the_interval_bootstrap_s_products_run_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS splits a large product's rows between its threads, and the split changes the sums' last bits: on
    one thread the intervals are the same bits on every machine. The products of 700 units x 1,000 resamples
    (700,000 cells, over the ~460,800 where OpenBLAS threads one) see one BLAS thread, and the count is given back
    after."""
    from threadpoolctl import threadpool_info

    from consensus_eval.analysis import alpha

    def blas_threads() -> set[int]:
        return {int(lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen: list[set[int]] = []
    real = alpha._interval_from

    def spy(*args: Any) -> Any:
        seen.append(blas_threads())
        return real(*args)

    monkeypatch.setattr(alpha, "_interval_from", spy)
    before = blas_threads()
    rng = np.random.default_rng(8)
    data = rng.normal(0, 1, (3, 700)) + rng.normal(0, 2, 700)
    assert bootstrap_ci(data, "interval", 1000, seed=4) is not None
    assert seen == [{1}] and blas_threads() == before


def test_agreement_figures_by_hand() -> None:
    judge = [30, 32, 35, 20, None]
    human = [28, 32, 36, 24, 30]
    a = agreement(judge, human)
    # pairs: (30,28) (32,32) (35,36) (20,24): |d| = 2,0,1,4 -> MAE 7/4; d = 2,0,-1,-4 -> bias -3/4
    assert a.n == 4 and a.mae == pytest.approx(1.75) and a.bias == pytest.approx(-0.75)
    assert a.spearman == pytest.approx(1.0)  # same order
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(0.9486832980505138)  # scipy's value with ties
    assert pearson([1, 1, 1], [1, 2, 3]) is None


def test_spearman_is_scipys_with_ties_and_the_ranks_it_replaced() -> None:
    from scipy.stats import spearmanr

    def by_hand(x: np.ndarray) -> np.ndarray:   # the average ranks agreement.py computed before scipy's rankdata
        order = np.argsort(x, kind="mergesort")
        ranks, sx, i = np.empty(x.size), x[order], 0
        while i < x.size:
            j = i
            while j + 1 < x.size and sx[j + 1] == sx[i]:
                j += 1
            ranks[order[i:j + 1]] = (i + j) / 2 + 1
            i = j + 1
        return ranks

    rng = np.random.default_rng(7)
    for n in (3, 5, 30, 200):
        for _ in range(20):
            x, y = rng.integers(0, 6, n).astype(float), rng.integers(0, 6, n).astype(float)   # many ties
            rho = spearman(x, y)
            if rho is None:
                assert x.std() == 0 or y.std() == 0
                continue
            assert rho == pytest.approx(float(spearmanr(x, y).statistic), abs=1e-12)
            assert rho == pearson(by_hand(x), by_hand(y))                        # bit for bit: outputs unchanged


def test_reliability_cli_reproduces_the_published_example(tmp_path: Path) -> None:
    lines = ["unit,rater,value"]
    for r, row in enumerate(EXAMPLE):
        for u, v in enumerate(row):
            lines.append(f"u{u + 1},coder{r + 1},{'' if np.isnan(v) else int(v)}")
    f = tmp_path / "ratings.csv"
    f.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    for level, value in PUBLISHED.items():
        res = runner.invoke(app, ["reliability", "--ratings", str(f), "--level", level, "--bootstrap", "50", "--json"])
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert round(out["value"], 3) == value and out["raters"] == ["coder1", "coder2", "coder3", "coder4"]
    res = runner.invoke(app, ["reliability", "--ratings", str(f), "--level", "interval", "--bootstrap", "0"])
    assert "0.849" in res.output


def test_ratings_errors_name_the_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text("unit,rater,value\nu1,a,3\nu1,b,three\n")
    with pytest.raises(ValueError, match=r"r.csv:3: value: not a number: 'three'"):
        load_ratings(bad)
    bad.write_text("unit,judge,value\n")
    with pytest.raises(ValueError, match="missing column"):
        load_ratings(bad)
    bad.write_text("unit,rater,value\nu1,a,3\nu1,a,4\n")
    with pytest.raises(ValueError, match="twice"):
        load_ratings(bad)
    res = CliRunner().invoke(app, ["reliability", "--ratings", str(bad), "--level", "interval"])
    assert res.exit_code == 2 and "twice" in res.output
