"""Runs -> judge -> panel: averaging, aggregates, quorum, inconclusive vs failed, flags."""

from __future__ import annotations

import pytest

from consensus_eval.analysis.consensus import build
from consensus_eval.domain.aggregate import aggregate
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.store import CallRecord, StoredCall
from tests.helpers import as_stored

DIMS = ("accuracy", "completeness", "standardization")
# one deduction of each fixed-points type used below, by dimension: (category, type, points)
ONE = {"accuracy": ("numbers", "value_error", 2.0), "completeness": ("family_history", "fh_absent", 4.0),
       "standardization": ("terminology", "colloquial", 1.0)}


def rec(case: str, judge: str, dim: str, run: int = 0, n: int = 0, ok: bool = True, claimed: float | None = None,
        penalty: bool = False) -> StoredCall:
    """A stored call: ``n`` deductions of the dimension's ONE type (or a failed call)."""
    if not ok:
        return as_stored([CallRecord(request_hash=f"{case}{judge}{dim}{run}", case_id=case, dimension=dim,
                                     judge=judge, run=run, status="failed", error="boom")])[0]
    cat, typ, pts = ONE[dim]
    j = Judgment(dimension=dim, deductions=[Deduction(category=cat, type=typ, points=pts)] * n,
                 fixed_penalties=[PenaltyHit(id="diabetes_in_past_history")] if penalty else [],
                 claimed_score=claimed)
    return as_stored([CallRecord(request_hash=f"{case}{judge}{dim}{run}", case_id=case, dimension=dim, judge=judge,
                                 run=run, status="ok", judgment=j)])[0]


def full(case: str, judge: str, n: dict[str, int] | None = None, run: int = 0) -> list[StoredCall]:
    n = n or {}
    return [rec(case, judge, d, run, n.get(d, 0)) for d in DIMS]


def test_aggregates() -> None:
    assert aggregate([30, 34, 38]) == 34
    assert aggregate([30, 31, 38], "median") == 31
    # trimmed mean (20%) of 5 values drops one at each end: mean(31, 32, 33) = 32
    assert aggregate([10, 31, 32, 33, 39], "trimmed_mean", 0.2) == 32
    assert aggregate([10, 40], "trimmed_mean", 0.2) == 25  # too few to trim
    with pytest.raises(ValueError):
        aggregate([])


def test_runs_are_averaged_then_judges(rubric: Rubric) -> None:
    records = [
        # judge a, run 0: accuracy 40 - 2x2 = 36; run 1: 40 - 1x2 = 38 -> mean 37, spread 2
        *full("c1", "a", {"accuracy": 2}, run=0), *full("c1", "a", {"accuracy": 1}, run=1),
        # judge b: accuracy 40 - 3x2 = 34; completeness 35 - 4 = 31
        *full("c1", "b", {"accuracy": 3, "completeness": 1}),
    ]
    [c] = build(rubric, records, ["a", "b"], ["c1"], ConsensusConfig())
    ja = c.judges["a"]["accuracy"]
    assert ja.runs == [36, 38] and ja.mean == 37 and ja.spread == 2 and ja.stars == 4
    assert c.scores == {"accuracy": 35.5, "completeness": 33.0, "standardization": 25.0}
    assert c.total == 93.5 and c.status == "ok" and c.n_judges == 2
    # stars of panel scores: accuracy 35.5 -> 4 (>= 32), completeness 33 -> 4 (>= 28), standardization 25 -> 5
    assert c.stars == {"accuracy": 4, "completeness": 4, "standardization": 5}
    assert c.star_total == 4 * 8 + 4 * 7 + 5 * 5
    assert c.judge_totals == {"a": 37 + 35 + 25, "b": 34 + 31 + 25} and c.spread == 7


def test_failed_runs_are_left_out_not_zero(rubric: Rubric) -> None:
    records = [*full("c1", "a", {"accuracy": 1}), rec("c1", "a", "accuracy", run=1, ok=False)]
    [c] = build(rubric, records, ["a"], ["c1"], ConsensusConfig())
    assert c.judges["a"]["accuracy"].failed_runs == 1 and c.scores["accuracy"] == 38


def test_quorum_inconclusive_and_failed(rubric: Rubric) -> None:
    records = [*full("c1", "a"), *full("c1", "b"),
               *full("c2", "a"), *(rec("c2", "b", d, ok=False) for d in DIMS),
               *(rec("c3", j, d, ok=False) for j in "ab" for d in DIMS)]
    cfg = ConsensusConfig(min_judges=2)
    c1, c2, c3 = build(rubric, records, ["a", "b"], ["c1", "c2", "c3"], cfg)
    assert c1.status == "ok" and c1.total == 100
    assert c2.status == "inconclusive" and c2.total is None and c2.scores["accuracy"] is None
    assert c3.status == "failed" and c3.n_judges == 0
    # with a quorum of one, c2 has a score from judge a alone
    _, c2b, _ = build(rubric, records, ["a", "b"], ["c1", "c2", "c3"], ConsensusConfig(min_judges=1))
    assert c2b.status == "ok" and c2b.n_judges == 1


def test_flags(rubric: Rubric) -> None:
    records = [
        *full("c1", "a"),  # 100
        # 4 x 2 = 8 (the numbers cap) -> 32; 2 x 4 = 8 but family history caps at 4 -> 31: total 88, spread 12
        *full("c1", "b", {"accuracy": 4, "completeness": 2}),
        *full("c2", "a"),
        rec("c2", "b", "accuracy", penalty=True, n=4),  # 40-8-10 = 22: 2 stars vs 5 -> gap 3
        rec("c2", "b", "completeness"), rec("c2", "b", "standardization"),
        rec("c3", "a", "accuracy", claimed=40, n=1), rec("c3", "a", "completeness"), rec("c3", "a", "standardization"),
    ]
    c1, c2, c3 = build(rubric, records, ["a", "b"], ["c1", "c2", "c3"], ConsensusConfig(flag_spread=10))
    assert c1.flags == ["totals spread 12 > 10"]
    assert "accuracy stars differ by 3" in c2.flags
    # a claimed-vs-derived mismatch is a fact about the judge, not a flag on the case
    assert c3.judges["a"]["accuracy"].claim_mismatches == 1 and c3.flags == []
    # a spread of 12 is not more than flag_spread=12: no flag
    [c1_loose, *_] = build(rubric, records, ["a", "b"], ["c1", "c2", "c3"], ConsensusConfig(flag_spread=12))
    assert not any("spread" in f for f in c1_loose.flags)
