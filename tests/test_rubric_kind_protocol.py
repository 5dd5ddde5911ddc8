"""A rubric kind is one class behind one protocol (consensus_eval/domain/kinds/): found by name through a registry
and an entry-point group, its fields validated by its own model, its rules its methods. The built-in kinds keep the
dumps and fingerprints their rubrics had when the kinds were one flat model (every request hash holds one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from consensus_eval import InputError, UsageError
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.flags import disagreement
from consensus_eval.domain.kinds import Criteria, Deductions, Dimension, Likert, kind_class, register_kind
from consensus_eval.domain.kinds.base import (
    RUBRIC_KIND_ENTRY_POINTS,
    Flag,
    flag_rank,
    kind_names,
    registered_kinds,
)
from consensus_eval.domain.rubric import Rubric, load_rubric
from tests.conftest import ROOT

LIKERT = {"id": "clear", "name": "Clear", "kind": "likert", "levels": {1: "no", 2: "so-so", 3: "yes"}}


@pytest.mark.parametrize(("name", "fingerprint"), [("medical_record", "bb68b80b0d94b574"),
                                                   ("pdqi9", "54c6145c06246635"), ("criteria", "a5bf774cd95f4167")])
def test_the_bundled_rubrics_keep_the_fingerprints_they_had_before_kinds_were_modules(name: str,
                                                                                       fingerprint: str) -> None:
    # computed at f1f39f0, when a dimension was one model with every kind's fields
    rubric = load_rubric(name)
    assert rubric.fingerprint == fingerprint
    assert Rubric.model_validate(rubric.model_dump()) == rubric
    assert Rubric.model_validate(json.loads(rubric.model_dump_json())).fingerprint == fingerprint


def test_a_dimension_comes_back_as_its_kinds_class_and_dumps_its_fields_after_the_common_ones() -> None:
    likert = Dimension.model_validate(LIKERT)
    assert type(likert) is Likert and likert.max == 3 and likert.low == 1 and likert.level_range == (1, 3)
    # the common fields, then the kind's own (an empty fixed_penalties, as a likert dimension always dumped)
    assert list(likert.model_dump()) == ["id", "name", "kind", "max", "star_weight", "description",
                                         "fixed_penalties", "levels"]
    assert type(Dimension.model_validate({"id": "c", "name": "C", "kind": "criteria"})) is Criteria
    medical = load_rubric("medical_record")
    assert all(type(d) is Deductions for d in medical.dimensions)
    assert "kind" not in medical.model_dump()["dimensions"][0]          # the default kind is left out
    assert medical.dimension("accuracy", Deductions).categories
    with pytest.raises(ValueError, match="'accuracy' is a deductions dimension, not a likert one"):
        medical.dimension("accuracy", Likert)
    assert load_rubric("pdqi9").dimensions_of(Likert) == load_rubric("pdqi9").dimensions


@pytest.mark.parametrize(("extra", "message"), [
    ({"categories": []}, r"a likert dimension has no categories \(categories is a field of kind: deductions\)"),
    ({"criteria": []}, r"a likert dimension has no criteria \(criteria is a field of kind: criteria\)"),
    ({"fixed_penalties": [{"id": "p", "name": "p", "points": 1}]}, "fixed penalties are for kind: deductions"),
    ({"kind": 3}, r"kind must be the name of a rubric kind \(criteria, deductions, likert.*\), got 3"),
    ({"shade": "blue"}, r"shade\n  Extra inputs are not permitted"),
])
def test_a_field_of_another_kind_is_named_with_its_kind(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Dimension.model_validate({**LIKERT, **extra})


def test_an_unknown_kind_names_the_known_ones_and_the_entry_point_group(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("id: r\nname: r\ndimensions:\n  - {id: a, name: A, kind: pairwise, max: 1}\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"dimensions\[0 a\].*unknown rubric kind 'pairwise'; known kinds: "
                                         rf"criteria, deductions, likert.*{RUBRIC_KIND_ENTRY_POINTS}"):
        load_rubric(path)


def test_a_kinds_class_names_its_kind_and_keeps_the_rubrics_own_flags() -> None:
    class Nameless(Dimension):
        kind: str = ""

    with pytest.raises(UsageError, match="needs a default naming the kind"):
        register_kind(Nameless)

    class Spreading(Dimension):
        kind: Literal["spreading"] = "spreading"
        flag_texts = {"spread": "mine"}  # noqa: RUF012 - the class attribute under test

    with pytest.raises(UsageError, match=r"redefines the rubric's own flags \['spread'\]"):
        register_kind(Spreading)
    assert "spreading" not in kind_names()


def test_the_built_in_kinds_come_first_in_their_order_and_their_flags_after_the_rubrics() -> None:
    assert registered_kinds()[:3] == [Deductions, Likert, Criteria]
    assert [kind_class(k) for k in ("deductions", "likert", "criteria")] == [Deductions, Likert, Criteria]
    assert sorted(["split", "level_gap", "star_gap", "spread"], key=flag_rank) == ["spread", "star_gap", "level_gap",
                                                                                 "split"]
    assert Flag(code="level_gap", value=2, limit=2, dimension="clear").text == "clear ratings differ by 2 levels"
    assert Flag(code="split", value=3, limit=1, dimension="c").text == "c: judges split on 3 criteria"
    assert Flag(code="spread", value=12.5, limit=10).text == "totals spread 12.5 > 10"


class _Score:
    def __init__(self, mean: float | None, criteria: dict[str, bool] | None = None) -> None:
        self.mean, self.criteria = mean, criteria or {}


def test_each_kind_says_when_judges_runs_and_reviewers_disagree() -> None:
    cfg = ConsensusConfig(flag_split_share=0.5)
    rubric = Rubric.model_validate({"id": "m", "name": "m", "dimensions": [
        {"id": "items", "name": "Items", "kind": "criteria"}, LIKERT]})
    items, clear = rubric.dimensions
    judges = {"items": [_Score(0.5, {"a": True, "b": True}), _Score(0.5, {"a": False, "b": True})],
              "clear": [_Score(1), _Score(3)]}
    # one criterion of two split (half of them: flag_split_share 0.5), ratings two levels apart; a likert dimension
    # comes after a criteria one in the rubric, its flag first all the same (kinds in the order they registered)
    assert [(f.code, f.dimension) for f in disagreement(rubric, [], {}, cfg, judges=judges)] == [
        ("level_gap", "clear"), ("split", "items")]
    assert disagreement(rubric, [], {}, ConsensusConfig(flag_split_share=0.6), judges={"items": judges["items"]}) == []
    run_cfg = EvalConfig.model_validate({"judges": [{"name": "r", "kind": "rules"}]})
    assert clear.runs_disagree([1, 3], run_cfg) and not clear.runs_disagree([1, 2], run_cfg)
    assert items.runs_disagree([0.5, 0.6], run_cfg) and not items.runs_disagree([0.5, 0.5], run_cfg)
    accuracy = load_rubric("medical_record").dimension("accuracy")
    # deductions: more than adaptive.run_spread (5) points, or stars apart (33 and 37.5: both 4 stars)
    assert not accuracy.runs_disagree([33, 37.5], run_cfg) and accuracy.runs_disagree([33, 38.5], run_cfg)
    assert accuracy.runs_disagree([31, 33], run_cfg)                 # 3 and 4 stars
    # reviewers: likert by the level gap, deductions more than 2 points, criteria more than 0.1 of its 0-1 range
    assert [d.reviewers_apart(1.5, cfg) for d in (clear, accuracy, items)] == [False, False, True]
    assert [d.reviewers_apart(2.5, cfg) for d in (clear, accuracy, items)] == [True, True, True]
    assert [d.reviewers_apart(0.05, cfg) for d in (clear, accuracy, items)] == [False, False, False]


_ENTRY_POINT_RUN = """
import json, sys
from consensus_eval.domain.rubric import Rubric
r = Rubric.model_validate({"id": "r", "name": "r", "dimensions": [{"id": "g", "name": "G", "kind": "grade"}]})
print(json.dumps({"class": type(r.dimensions[0]).__name__, "max": r.dimensions[0].max,
                  "dump": r.model_dump(mode="json")["dimensions"][0]}))
"""

_GRADE = '''
from typing import Literal
from consensus_eval.domain.kinds import Dimension, register_kind

class Grade(Dimension):
    kind: Literal["grade"] = "grade"
    max: float = 4
    letters: str = "ABCDE"

register_kind(Grade)
'''


def test_an_installed_package_adds_a_rubric_kind_through_its_entry_point(tmp_path: Path) -> None:
    """No import of the plugin anywhere: the rubric names the kind, the entry point is found, the kind's own field
    is validated by its own model without domain/rubric.py knowing it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ce_grade_kind.py").write_text(_GRADE, encoding="utf-8")
    info = site / "ce_grade_kind-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ce_grade_kind\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{RUBRIC_KIND_ENTRY_POINTS}]\ngrade = ce_grade_kind\n", encoding="utf-8")
    env = {**__import__("os").environ, "PYTHONPATH": f"{site}:{ROOT}"}
    res = subprocess.run([sys.executable, "-c", _ENTRY_POINT_RUN], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {
        "class": "Grade", "max": 4.0,
        "dump": {"id": "g", "name": "G", "kind": "grade", "max": 4.0, "star_weight": 0.0, "description": "",
                 "letters": "ABCDE"}}
