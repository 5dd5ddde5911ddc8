"""Judge quality: per judge, the share of deductions not grounded and the claimed-vs-derived
mismatch rate, each with its Wilson interval, on a run built by hand (figures counted by hand)."""

from __future__ import annotations

import math

import pytest

from consensus_eval.analysis.derived import derive_all, drop_ungrounded, ground_all
from consensus_eval.analysis.judge_quality import judge_quality
from consensus_eval.analysis.reliability import ReliabilityReport
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.store import CallRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun
from tests.helpers import as_stored, present

RECORD = "主诉：口渴、多饮3年。\n现病史：空腹血糖7.9mmol/L，口服二甲双胍500mg。\n既往史：高血压5年。"
CONVERSATION = "医生：哪里不舒服？\n患者：口渴，喝水多。"


def _wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson 1927, written out independently of analysis.intervals."""
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _d(evidence: str, typ: str = "value_error", cat: str = "numbers", pts: float = 2) -> Deduction:
    return Deduction(category=cat, type=typ, points=pts, evidence=evidence)


def _rec(h: str, judge: str, run: int, judgment: Judgment | None, dim: str = "accuracy") -> StoredCall:
    record = CallRecord(status="ok" if judgment else "failed", judgment=judgment, request_hash=h, case_id="c1",
                        dimension=dim, judge=judge, run=run, error=None if judgment else "boom")
    return as_stored([record])[0]


def _run(rubric: Rubric, mode: str = "flag") -> StoredRun:
    config = EvalConfig.model_validate({"ungrounded": mode, "runs": 3, "judges": [
        {"name": "llm", "model": "openai/x", "api_base": "http://x.test/v1"}, {"name": "rules", "kind": "rules"}]})
    case = Case(id="c1", record=RECORD, conversation=CONVERSATION)
    records = [
        # llm run 0: exact, normalised, not found; claims 34 (derived 40-6 = 34: no mismatch)
        _rec("a", "llm", 0, Judgment(dimension="accuracy", deductions=[
            _d("空腹血糖7.9mmol/L"), _d("二甲双胍 500mg"), _d("青霉素皮试阳性")], claimed_score=34, claimed_stars=4)),
        # llm run 1: fuzzy, empty, an invented fixed penalty; claims 40 (derived 40-4-10 = 26: mismatch)
        _rec("b", "llm", 1, Judgment(dimension="accuracy", deductions=[_d("空腹的血糖7.9mmol/L"), _d("")],
                                     fixed_penalties=[PenaltyHit(id="diabetes_in_past_history",
                                                                 evidence="既往史：糖尿病10年")],
                                     claimed_score=40, claimed_stars=5)),
        # llm run 2: failed, not counted
        _rec("c", "llm", 2, None),
        # rules: two exact quotes, no claim
        _rec("r", "rules", 0, Judgment(dimension="standardization", deductions=[
            _d("口渴", "colloquial", "terminology", 1), _d("喝水多", "colloquial", "terminology", 1)]),
             dim="standardization"),
    ]
    grounding = ground_all(rubric, [case], records)
    scores = derive_all(rubric, records)
    judged = drop_ungrounded(rubric, records, grounding, scores) if mode == "drop" else {}
    return StoredRun(rubric=rubric, config=config, cases=[case], invalid_lines=[], records=records, scores=scores,
                     planned=len(records), missing={}, grounding=grounding, judged_scores=judged)


def test_grounding_shares_per_judge(rubric: Rubric) -> None:
    q = judge_quality(_run(rubric))
    assert list(q) == ["llm", "rules"]
    llm = q["llm"]
    assert llm.ok_runs == 2 and llm.deductions == 6
    assert llm.by_kind == {"exact": 1, "normalised": 1, "fuzzy": 1, "not_found": 2, "empty": 1}
    assert (llm.ungrounded.k, llm.ungrounded.n) == (3, 6) and llm.ungrounded.value == pytest.approx(0.5)
    low, high = _wilson(3, 6)
    assert llm.ungrounded.low == pytest.approx(low) and llm.ungrounded.high == pytest.approx(high)
    assert (round(low, 4), round(high, 4)) == (0.1876, 0.8124)  # Wilson interval of 3/6 at 95%
    rules = q["rules"]
    assert rules.by_kind["exact"] == 2 and rules.deductions == 2
    assert (rules.ungrounded.k, rules.ungrounded.n, rules.ungrounded.value) == (0, 2, 0.0)
    assert rules.ungrounded.low == 0.0 and rules.ungrounded.high == pytest.approx(_wilson(0, 2)[1])


def test_claim_mismatch_rate_per_judge(rubric: Rubric) -> None:
    q = judge_quality(_run(rubric))
    llm = q["llm"]
    assert llm.claimed_runs == 2 and (llm.claim_mismatch.k, llm.claim_mismatch.n) == (1, 2)
    low, high = _wilson(1, 2)
    assert llm.claim_mismatch.low == pytest.approx(low) and llm.claim_mismatch.high == pytest.approx(high)
    # a judge that never claims has no rate, not 0
    rules = q["rules"]
    assert rules.claimed_runs == 0 and rules.claim_mismatch.n == 0 and rules.claim_mismatch.value is None


def test_drop_compares_the_claim_with_every_deduction_the_judge_gave(rubric: Rubric) -> None:
    run = _run(rubric, "drop")
    # run 0 lost its invented quote: 36 now, but the claim (34) was about all three: still no mismatch
    assert run.scores["a"].score == 36 and present(run.score_as_judged("a")).score == 34
    q = judge_quality(run)
    assert (q["llm"].claim_mismatch.k, q["llm"].claim_mismatch.n) == (1, 2)
    assert q["llm"].by_kind == judge_quality(_run(rubric))["llm"].by_kind


def test_judge_quality_is_part_of_reliability_json(rubric: Rubric) -> None:
    report = ReliabilityReport(judges=["llm", "rules"], n_cases=1, across_judges={},
                               judge_quality=judge_quality(_run(rubric)))
    data = report.to_json()
    assert data["judge_quality"]["llm"]["ungrounded"]["k"] == 3
    back = ReliabilityReport.model_validate(data)
    assert back.judge_quality["llm"].by_kind["fuzzy"] == 1
    # a reliability.json written before judge quality existed still reads
    del data["judge_quality"]
    assert ReliabilityReport.model_validate(data).judge_quality == {}
