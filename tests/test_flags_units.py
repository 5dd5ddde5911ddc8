"""Flags in the rubric's units (docs/rubrics.md): the spread limit is a share of the total's range unless the
config gives points, likert ratings are compared in levels, and a criteria dimension is flagged by the share
of its criteria the judges disagree on, which three judges can reach. On the bundled criteria and PDQI-9
rubrics, with the default consensus settings, a case whose judges cover the whole scale is flagged and needs
review, and the queue never says "no case needs review" beside a case the drill-down calls split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval import load_run
from consensus_eval.cli import app
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.flags import spread_limit
from consensus_eval.domain.judgment import CriterionVerdict, Judgment
from consensus_eval.domain.kinds.criteria import split_criteria, splits_needed
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.domain.scoring import derive
from consensus_eval.execution.store import CallRecord
from tests.conftest import ROOT
from tests.helpers import write_store

JUDGES = ("judge-a", "judge-b", "judge-c")


def test_the_spread_limit_is_in_the_rubrics_units() -> None:
    default = ConsensusConfig()
    assert spread_limit(load_rubric("medical_record"), default) == 10.0          # 10% of 0-100, as before
    assert spread_limit(load_rubric("pdqi9"), default) == pytest.approx(3.6)     # 10% of 9-45
    assert spread_limit(load_rubric("criteria"), default) == pytest.approx(0.1)  # 10% of 0-1
    assert spread_limit(load_rubric("pdqi9"), ConsensusConfig(flag_spread=6)) == 6   # points, when given
    assert spread_limit(load_rubric("pdqi9"), ConsensusConfig(flag_spread_share=0.25)) == pytest.approx(9.0)


def test_three_judges_can_split_on_a_criterion_and_the_share_counts() -> None:
    assert split_criteria({"a": [True, True, False], "b": [True, True, True], "c": [False]}) == ["a"]
    assert splits_needed(10, ConsensusConfig()) == 1                              # any, by default
    assert splits_needed(10, ConsensusConfig(flag_split_share=0.2)) == 2
    assert splits_needed(3, ConsensusConfig(flag_split_share=0.5)) == 2


def _one_case_run(folder: Path, rubric: Rubric, case: Case, judgments: dict[str, Judgment]) -> Path:
    config = EvalConfig.model_validate({"rubric": rubric.id, "judges": [{"name": j, "model": f"openai/{j}"}
                                                                        for j in JUDGES]})
    records = []
    for j, judgment in judgments.items():
        dim = rubric.dimension(judgment.dimension)
        judgment.claimed_score = derive(dim, judgment, case.criteria).score
        records.append(CallRecord(status="ok", judgment=judgment, raw=judgment.model_dump_json(),
                                  request_hash=f"{case.id}|{j}|{dim.id}", case_id=case.id, dimension=dim.id, judge=j,
                                  run=0, model=f"openai/{j}"))
    return write_store(folder, rubric, config, [case], records)


def _criteria_case() -> Case:
    row = json.loads((ROOT / "examples" / "criteria" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[0])
    return Case.model_validate(row)


def _queue_headline(folder: Path) -> str:
    res = CliRunner().invoke(app, ["audit", str(folder), "--lang", "en"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.output


def test_a_criteria_case_whose_judges_cover_the_scale_is_flagged(tmp_path: Path) -> None:
    rubric = load_rubric("criteria")
    case = _criteria_case()
    assert case.criteria is not None
    positive = [c.id for c in case.criteria if c.points > 0]
    negative = [c.id for c in case.criteria if c.points < 0]
    dim = rubric.dimensions[0].id

    def verdicts(met_positive: list[bool]) -> Judgment:
        return Judgment(dimension=dim, verdicts=[
            *(CriterionVerdict(id=k, met=m, evidence="", reason="r") for k, m in zip(positive, met_positive,
                                                                                     strict=True)),
            *(CriterionVerdict(id=k, met=False, evidence="", reason="r") for k in negative)])

    n = len(positive)
    run = _one_case_run(tmp_path / "run", rubric, case, {
        "judge-a": verdicts([True] * n), "judge-b": verdicts([False] * n),
        "judge-c": verdicts([i % 2 == 0 for i in range(n)])})
    res = load_run(run, n_boot=0)
    (cons,) = res.consensus
    scores = sorted(cons.judge_totals.values())
    assert scores[0] == 0.0 and scores[-1] == 1.0                    # the whole 0-1 scale
    codes = {f.code for f in cons.flag_codes}
    assert codes == {"spread", "split"}
    split = next(f for f in cons.flag_codes if f.code == "split")
    assert split.value == n                                           # 3 judges: 2-1 on every positive criterion
    (a,) = res.audit
    assert a.needs_review and {r.code for r in a.reasons} >= {"spread", "split"}
    assert len(a.dimensions[0].split_criteria) == n
    out = _queue_headline(run)
    assert "no case needs review" not in out and "1 case needs review" in out
    # judges that agree: no flag, and the drill-down calls nothing split
    calm = _one_case_run(tmp_path / "calm", rubric, case, {j: verdicts([True] * n) for j in JUDGES})
    (c2,) = load_run(calm, n_boot=0).consensus
    assert c2.flag_codes == []
    assert "no case needs review" in _queue_headline(calm)


def test_a_pdqi9_case_whose_judges_cover_the_scale_is_flagged(tmp_path: Path) -> None:
    rubric = load_rubric("pdqi9")
    row = json.loads((ROOT / "examples" / "pdqi9" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[0])
    case = Case.model_validate(row)
    folder = tmp_path / "run"
    config = EvalConfig.model_validate({"rubric": "pdqi9", "judges": [{"name": j, "model": f"openai/{j}"}
                                                                      for j in JUDGES]})
    records = []
    for j, level in zip(JUDGES, (1, 5, 3), strict=True):
        for d in rubric.dimensions:
            judgment = Judgment(dimension=d.id, rating=level, evidence=[], comment="c")
            judgment.claimed_score = float(level)
            records.append(CallRecord(status="ok", judgment=judgment, raw=judgment.model_dump_json(),
                                      request_hash=f"{j}|{d.id}", case_id=case.id, dimension=d.id, judge=j, run=0,
                                      model=f"openai/{j}"))
    write_store(folder, rubric, config, [case], records)
    (cons,) = load_run(folder, n_boot=0).consensus
    spread = next(f for f in cons.flag_codes if f.code == "spread")
    assert spread.value == 36 and spread.limit == pytest.approx(3.6)
    assert {f.dimension for f in cons.flag_codes if f.code == "level_gap"} == {d.id for d in rubric.dimensions}
    assert "1 case needs review" in _queue_headline(folder)
