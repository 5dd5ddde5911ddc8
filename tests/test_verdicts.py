"""Verdicts that need evidence (docs/validity.md): the leaderboard's and `compare`'s p values, intervals and
verdicts at the sizes users have. Each test is checked against an independent computation: the exact tests
by enumerating every sign pattern or relabelling here, the t tests against scipy, the cluster interval
against statsmodels' cluster-robust OLS."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.systems import (
    EXACT_PAIRS,
    MIN_PAIRS,
    cluster_mean,
    leaderboard,
    paired_test,
    unpaired_test,
)
from consensus_eval.cli import app
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.output.report.i18n import messages
from consensus_eval.output.report.trust import leaderboard_block
from tests.conftest import ROOT


def _board(totals: dict[str, list[float]], *, paired: bool = True) -> tuple[list[Case], list[CaseConsensus]]:
    """Cases of each system (its totals in order); paired: the i-th case of every system shares source i."""
    cases, cons = [], []
    for system, values in totals.items():
        for i, total in enumerate(values):
            cid = f"{system}-{i}"
            cases.append(Case(id=cid, conversation=f"医生：你好 {i if paired else cid}", record=f"主诉：{cid}",
                              system=system, source=f"c{i}" if paired else None))
            cons.append(CaseConsensus(case_id=cid, status="ok", scores={"accuracy": total}, stars={}, total=total,
                                      star_total=None, n_judges=1, judges={}, judge_totals={}, spread=None, flags=[]))
    return cases, cons


def _sign_flip_p(d: np.ndarray) -> float:
    """The exact two-sided sign-flip p value by enumeration: the share of sign patterns whose mean is at
    least as far from 0 as the observed one."""
    observed = abs(d.mean())
    means = [abs((np.array(signs) * d).mean()) for signs in itertools.product((1, -1), repeat=d.size)]
    return float(sum(m >= observed - 1e-12 for m in means)) / len(means)


def _relabel_p(xa: np.ndarray, xb: np.ndarray) -> float:
    """The exact two-sided permutation p value of mean(a) - mean(b) by enumerating every relabelling, as
    twice the smaller one-sided share (scipy's definition), capped at 1."""
    pooled = np.concatenate([xa, xb])
    observed = xa.mean() - xb.mean()
    stats_ = []
    for idx in itertools.combinations(range(pooled.size), xa.size):
        mask = np.zeros(pooled.size, bool)
        mask[list(idx)] = True
        stats_.append(pooled[mask].mean() - pooled[~mask].mean())
    s = np.array(stats_)
    return float(min(1.0, 2 * min((s >= observed - 1e-12).mean(), (s <= observed + 1e-12).mean())))


def test_identical_differences_from_two_conversations_give_no_verdict() -> None:
    cases, cons = _board({"a": [90.0, 80.0], "b": [87.0, 77.0]})
    lb = leaderboard(cases, cons, ["accuracy"], [])
    assert lb is not None
    d = lb.difference("a", "b")
    assert d.paired and d.n == 2 and d.diff == pytest.approx(3.0)
    assert d.p == pytest.approx(0.5) and d.p == pytest.approx(_sign_flip_p(np.array([3.0, 3.0])))
    assert d.low is None and d.high is None          # no shift is rejected: no interval, never [3, 3]
    assert d.verdict == "none" and d.few and d.test == "sign_flip"
    block = leaderboard_block(lb, _rubric(), messages("en"))
    row = block.tables[1].rows[0]
    assert "no verdict" in row[3] and row[-1] == "exact sign-flip" and row[2] == "0.500"


def _rubric() -> Rubric:
    return load_rubric("medical_record")


def test_identical_differences_of_many_conversations_get_the_exact_p_not_zero() -> None:
    n = 20
    cases, cons = _board({"a": [80.0 + i for i in range(n)], "b": [77.0 + i for i in range(n)]})
    lb = leaderboard(cases, cons, ["accuracy"], [])
    assert lb is not None
    d = lb.difference("a", "b")
    assert d.p is not None and d.p == pytest.approx(2.0 ** (1 - n)) and d.p > 0     # the exact test, closed form
    assert (d.low, d.high) == pytest.approx((3.0, 3.0)) and d.verdict == "a" and not d.few
    # all differences 0: p 1, no verdict
    cases, cons = _board({"a": [80.0] * 8, "b": [80.0] * 8})
    d0 = leaderboard(cases, cons, ["accuracy"], []).difference("a", "b")  # type: ignore[union-attr]
    assert d0.p == 1.0 and d0.verdict == "none"


@pytest.mark.parametrize("n", [3, 5, 6, 9, EXACT_PAIRS])
def test_small_paired_samples_use_the_exact_sign_flip_test(n: int) -> None:
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(2.0, 3.0, n), 1)
    p, low, high, test = paired_test(d)
    assert test == "sign_flip" and p == pytest.approx(_sign_flip_p(d))
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ci.low, ci.high))
    if n < MIN_PAIRS:
        assert p >= 2.0 ** (1 - n) >= 0.0625      # no sign pattern can reach 0.05


def test_larger_paired_samples_use_the_paired_t_test() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(80, 5, EXACT_PAIRS + 1), rng.normal(78, 5, EXACT_PAIRS + 1)
    p, low, high, test = paired_test(a - b)
    ref = stats.ttest_rel(a, b)
    ci = ref.confidence_interval(0.95)
    assert test == "paired_t" and (p, low, high) == pytest.approx((ref.pvalue, ci.low, ci.high))


def test_unpaired_small_groups_use_the_exact_permutation_test_and_large_ones_welch() -> None:
    rng = np.random.default_rng(3)
    xa, xb = np.round(rng.normal(85, 4, 6), 1), np.round(rng.normal(80, 4, 7), 1)
    p, low, high, test = unpaired_test(xa, xb)
    ci = stats.ttest_ind(xa, xb, equal_var=False).confidence_interval(0.95)
    assert test == "permutation" and p == pytest.approx(_relabel_p(xa, xb))
    assert (low, high) == pytest.approx((ci.low, ci.high))
    xa, xb = rng.normal(85, 4, 15), rng.normal(84, 4, 16)          # C(31, 15) relabellings: Welch
    p, low, high, test = unpaired_test(xa, xb)
    ref = stats.ttest_ind(xa, xb, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert test == "welch_t" and (p, low, high) == pytest.approx((ref.pvalue, ci.low, ci.high))
    # two groups of one value each: the exact p in closed form, never 0
    p, low, high, test = unpaired_test(np.full(3, 90.0), np.full(3, 88.0))
    assert p == pytest.approx(2 / math.comb(6, 3)) == pytest.approx(_relabel_p(np.full(3, 90.0), np.full(3, 88.0)))
    assert low is None and high is None


def test_an_unpaired_verdict_needs_enough_cases_on_each_side() -> None:
    cases, cons = _board({"a": [95.0, 96.0, 94.0], "b": [70.0 + i % 5 for i in range(40)]}, paired=False)
    lb = leaderboard(cases, cons, ["accuracy"], [])
    assert lb is not None
    d = lb.difference("a", "b")
    assert not d.paired and d.p is not None and d.p < 0.05 and d.few and d.verdict == "none"


def test_a_systems_interval_is_the_cluster_t_interval_of_statsmodels() -> None:
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(5)
    # 9 conversations, one to three cases of the system each
    sizes = [1, 2, 3, 1, 1, 2, 1, 3, 1]
    groups = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.normal(80, 6, groups.size) + rng.normal(0, 4, len(sizes))[groups]
    sums = np.array([y[groups == g].sum() for g in range(len(sizes))])
    counts = np.array(sizes, dtype=float)
    est = cluster_mean(sums, counts)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    low, high = fit.conf_int(0.05)[0]
    assert est.value == pytest.approx(y.mean()) and est.n == y.size
    assert (est.low, est.high) == pytest.approx((low, high))
    # one case a conversation: the one-sample t interval
    x = rng.normal(80, 6, 10)
    one = cluster_mean(x, np.ones(10))
    ci = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    assert (one.low, one.high) == pytest.approx((ci.low, ci.high))


def test_the_table_says_the_intervals_are_unadjusted_and_warns_below_min_sources() -> None:
    cases, cons = _board({"a": [90.0, 80.0, 85.0, 70.0], "b": [87.0, 77.0, 86.0, 64.0]})
    lb = leaderboard(cases, cons, ["accuracy"], [])
    assert lb is not None
    for lang, words in (("en", ("not adjusted", "Holm")), ("zh", ("未经校正", "Holm"))):
        block = leaderboard_block(lb, _rubric(), messages(lang))
        text = " ".join(block.paragraphs)
        assert all(w in text for w in words)
        assert len(block.warnings) == 2 and ("docs/validity.md" in block.warnings[0])


def _cli(*args: object) -> tuple[int, str]:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert "Traceback" not in res.output
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def two_systems_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verdicts") / "run"
    code, _ = _cli("score", ROOT / "examples" / "cases_two_systems.jsonl", "--out", out)
    assert code == 0
    return out


@pytest.mark.parametrize("condition", ["", "   ", "total < -1,", "total < -1 or  "])
def test_an_empty_fail_if_is_an_error(condition: str, two_systems_run: Path) -> None:
    code, output = _cli("compare", two_systems_run, "--fail-if", condition)
    assert code == 2 and "empty condition" in output
    code, output = _cli("compare", two_systems_run, "--fail-if", "total < -100")
    assert code == 0 and "no condition holds" in output
