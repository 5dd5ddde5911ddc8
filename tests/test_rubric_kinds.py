"""Dimension kinds in the rubric (deductions, likert, criteria): validation, dumps and re-derivation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import CriterionVerdict, Deduction, Judgment
from consensus_eval.domain.kinds import Likert
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric, load_rubric
from consensus_eval.domain.scoring import criteria_of, derive

LIKERT = {"id": "accurate", "name": "Accurate", "kind": "likert",
          "levels": {1: "not at all", 2: "slightly", 3: "moderately", 4: "very", 5: "extremely"}}
CRITERIA = {"id": "criteria", "name": "Criteria", "kind": "criteria"}


def test_a_rubric_written_before_kinds_keeps_its_fingerprint_and_dump() -> None:
    # the fingerprint of configs/rubrics/medical_record.yaml computed at 6598aa8, before kinds existed:
    # every request hash contains it, so a change here would re-run every stored call
    rubric = load_rubric("medical_record")
    assert rubric.fingerprint == "bb68b80b0d94b574"
    dumped = rubric.model_dump()
    for d in dumped["dimensions"]:
        assert not {"kind", "weight", "levels", "criteria"} & set(d)
    assert Rubric.model_validate(dumped) == rubric


def test_likert_max_is_the_top_level_and_the_score_is_the_level_picked() -> None:
    dim = Dimension.model_validate(LIKERT)
    assert isinstance(dim, Likert)
    assert dim.max == 5 and dim.low == 1 and dim.level_range == (1, 5) and dim.stars is None
    score = derive(dim, Judgment(dimension="accurate", rating=4, evidence=["BP 142/90"]))
    assert score.score == 4.0 and score.stars is None and score.categories == ()
    with pytest.raises(ValueError, match="takes a level among"):
        derive(dim, Judgment(dimension="accurate", rating=6))
    with pytest.raises(ValueError, match="takes a level among"):
        derive(dim, Judgment(dimension="accurate"))


@pytest.mark.parametrize("bad, message", [
    ({"levels": {1: "a", 2: "b", 4: "d"}}, "consecutive integers"),
    ({"levels": {1: "a"}}, "at least two"),
    ({"max": 4}, "top level 5"),
    ({"categories": [{"id": "c", "name": "c", "cap": 1, "types": [{"id": "t", "name": "t", "points": 1}]}]},
     "no categories"),
])
def test_a_likert_dimension_that_does_not_hold_together_is_refused(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Dimension.model_validate({**LIKERT, **bad})


def test_a_deductions_dimension_still_needs_categories_and_stars() -> None:
    with pytest.raises(ValidationError, match="needs categories"):
        Dimension.model_validate({"id": "a", "name": "a", "max": 10, "stars": {5: 9, 4: 8, 3: 6, 2: 4}})


def test_criteria_score_is_healthbench_met_points_over_positive_points_clipped() -> None:
    # HealthBench (Arora et al. 2025): score = sum of met criteria's points / sum of positive points, in [0, 1]
    crit = [Criterion(id="a", text="advises urgent care", points=5), Criterion(id="b", text="asks age", points=3),
            Criterion(id="c", text="recommends antibiotics", points=-2)]
    dim = Dimension.model_validate(CRITERIA)
    assert dim.max == 1

    def score(a: bool, b: bool, c: bool) -> float:
        j = Judgment(dimension="criteria", verdicts=[CriterionVerdict(id="a", met=a), CriterionVerdict(id="b", met=b),
                                                    CriterionVerdict(id="c", met=c)])
        return derive(dim, j, crit).score

    assert score(True, False, True) == pytest.approx(3 / 8)
    assert score(True, True, False) == 1.0
    assert score(False, False, True) == 0.0   # -2 / 8 clipped to 0
    result = derive(dim, Judgment(dimension="criteria", verdicts=[CriterionVerdict(id=i, met=True) for i in "abc"]),
                    crit)
    assert [(c.id, c.points, c.met) for c in result.criteria] == [("a", 5, True), ("b", 3, True), ("c", -2, True)]
    with pytest.raises(ValueError, match="not judged: c"):
        derive(dim, Judgment(dimension="criteria", verdicts=[CriterionVerdict(id=i, met=True) for i in "ab"]), crit)
    with pytest.raises(ValueError, match="no criterion 'z'"):
        derive(dim, Judgment(dimension="criteria", verdicts=[CriterionVerdict(id=i, met=True) for i in "abcz"]), crit)


def test_the_rubrics_own_criteria_come_before_the_cases() -> None:
    own = Dimension.model_validate({**CRITERIA, "criteria": [{"id": "x", "text": "x", "points": 1}]})
    case_crit = [Criterion(id="y", text="y", points=1)]
    assert [c.id for c in criteria_of(own, case_crit)] == ["x"]
    assert [c.id for c in criteria_of(Dimension.model_validate(CRITERIA), case_crit)] == ["y"]
    with pytest.raises(ValueError, match="the case gives none"):
        criteria_of(Dimension.model_validate(CRITERIA), None)


def test_a_cases_criteria_are_checked_and_enter_what_a_judge_reads() -> None:
    base = {"id": "c1", "conversation": "Q", "record": "A"}
    plain = Case.model_validate(base)
    assert "criteria" not in plain.model_dump() and "criteria" not in plain.content
    case = Case.model_validate({**base, "criteria": [{"id": "a", "text": "t", "points": 2}]})
    assert case.content["criteria"] == [{"id": "a", "text": "t", "points": 2.0, "tags": []}]
    with pytest.raises(ValidationError, match="given twice"):
        Case.model_validate({**base, "criteria": [{"id": "a", "text": "t", "points": 2}] * 2})
    with pytest.raises(ValidationError, match="positive points"):
        Case.model_validate({**base, "criteria": [{"id": "a", "text": "t", "points": -2}]})
    with pytest.raises(ValidationError, match="must not be 0"):
        Case.model_validate({**base, "criteria": [{"id": "a", "text": "t", "points": 0}]})


def test_a_deductions_judgment_dumps_as_before_kinds_and_the_total_is_weighted() -> None:
    j = Judgment(dimension="accuracy", deductions=[Deduction(category="numbers", type="value_error", points=2)])
    assert set(j.model_dump()) == {"dimension", "deductions", "fixed_penalties", "claimed_score", "claimed_stars",
                                   "comment"}
    rubric = Rubric.model_validate({"id": "r", "name": "r", "dimensions": [
        {**LIKERT, "weight": 2}, {**LIKERT, "id": "thorough", "name": "Thorough"}]})
    assert rubric.max_total == 15 and rubric.total({"accurate": 4, "thorough": 3}) == 11


def test_the_speaker_separator_follows_the_rubrics_language_unless_given() -> None:
    case = Case.model_validate({"id": "c", "record": "r", "conversation": [{"role": "doctor", "text": "Hi"}]})
    zh = load_rubric("medical_record")
    assert zh.conversation_text(case) == "医生：Hi"
    en = Rubric.model_validate({"id": "r", "name": "r", "language": "en", "roles": {"doctor": "Clinician"},
                                "dimensions": [LIKERT]})
    assert en.conversation_text(case) == "Clinician: Hi"
    own = en.model_copy(update={"speaker_separator": " - "})
    assert own.conversation_text(case) == "Clinician - Hi"
    assert "speaker_separator" not in en.model_dump() and en.fingerprint != own.fingerprint
