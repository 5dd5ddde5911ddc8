"""Reply model names: a dimension's model is ``<Id>Judgment``, the whole-case model ``CaseJudgment``; a dimension
with id ``case`` does not take the whole-case model's name (its model is ``CaseDimensionJudgment``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from consensus_eval.domain.replies import CASE_MODEL_NAME, case_response_model, response_model
from consensus_eval.domain.rubric import Rubric

KINDS = Path(__file__).parent / "data" / "kinds"


def _with_a_case_dimension(name: str) -> Rubric:
    data: dict[str, Any] = yaml.safe_load((KINDS / name).read_text(encoding="utf-8"))
    data["dimensions"][0]["id"] = "case"
    return Rubric.model_validate(data)


@pytest.mark.parametrize("name", ["radiology.yaml", "discharge5.yaml", "checklist.yaml"])
def test_a_dimension_named_case_gets_a_reply_model_name_of_its_own(name: str) -> None:
    rubric = _with_a_case_dimension(name)
    first, *rest = rubric.dimensions
    assert first.id == "case"
    part = response_model(rubric, "case")
    whole = case_response_model(rubric)
    assert whole.__name__ == CASE_MODEL_NAME == "CaseJudgment"
    assert part.__name__ == "CaseDimensionJudgment"
    for d in rest:                                   # the other dimensions keep <Id>Judgment
        assert response_model(rubric, d.id).__name__ == f"{d.id.title()}Judgment"

    # what the judge is sent: the whole-case schema names one CaseJudgment, its own title, and the case
    # dimension's part is a definition of another name whose schema is the dimension's model
    schema = whole.model_json_schema()
    assert schema["title"] == "CaseJudgment" and "CaseJudgment" not in schema["$defs"]
    ref = schema["properties"]["case"]["$ref"]
    assert ref == "#/$defs/CaseDimensionJudgment"
    assert schema["$defs"]["CaseDimensionJudgment"]["properties"] == part.model_json_schema()["properties"]
    assert json.dumps(part.model_json_schema()).count("CaseJudgment") == 0


def test_without_a_case_dimension_the_names_are_as_before() -> None:
    data: dict[str, Any] = yaml.safe_load((KINDS / "discharge5.yaml").read_text(encoding="utf-8"))
    rubric = Rubric.model_validate(data)
    assert [response_model(rubric, d.id).__name__ for d in rubric.dimensions] == [
        f"{d.id.title()}Judgment" for d in rubric.dimensions]
    assert {d.id for d in rubric.dimensions} >= {"correct", "complete"}
    assert response_model(rubric, "correct").__name__ == "CorrectJudgment"
    assert case_response_model(rubric).__name__ == "CaseJudgment"
