"""The held-out hand-written calibration set (docs/calibration.md): its size and spread over the rubric, every
planted span where it says it is, the suite file round trip, and the loader's refusals."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from consensus_eval._errors import InputError
from consensus_eval.domain.calibration.handwritten import (
    HANDWRITTEN_PATH,
    OPERATOR,
    build_suite,
    handwritten_suite,
)
from consensus_eval.domain.calibration.suite import PlantedError, SuiteCase, check_expectation, dumps_suite, load_suite
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.rubric import Rubric, load_rubric


@pytest.fixture(scope="module")
def suite() -> list[SuiteCase]:
    return handwritten_suite(load_rubric("medical_record"))


def _raw_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load(HANDWRITTEN_PATH.read_text(encoding="utf-8"))["cases"]
    return cases


def test_size_and_spread_over_the_rubric(suite: list[SuiteCase], rubric: Rubric) -> None:
    errors = [e for c in suite for e in c.expected]
    assert len(errors) >= 44
    assert sum(c.clean for c in suite) >= 16
    assert len({e.type for e in errors}) >= 15
    assert {e.dimension for e in errors} == {d.id for d in rubric.dimensions}
    assert all(len(c.expected) <= 2 for c in suite)
    assert all(e.operator == OPERATOR for e in errors)


def test_ids_unique_and_shapes_as_briefed(suite: list[SuiteCase], rubric: Rubric) -> None:
    ids = [c.case.id for c in suite]
    assert len(ids) == len(set(ids))
    labels = set(rubric.roles.values())
    for c in suite:
        assert isinstance(c.case.conversation, list)
        assert 8 <= len(c.case.conversation) <= 25, c.case.id
        assert 150 <= len(c.case.record) <= 500, c.case.id
        assert {rubric.roles[t.role] for t in c.case.conversation} <= labels
    # different patients, not one template: no two conversations or records are the same
    assert len({c.case.conversation_as_text(rubric.roles) for c in suite}) == len(suite)
    assert len({c.case.record for c in suite}) == len(suite)
    # several heading styles
    firsts = {c.case.record.split("主诉")[0] for c in suite}
    assert {"", "【", "**", "1. "} <= firsts


def test_every_case_passes_check_expectation_and_spans_are_their_slices(
    suite: list[SuiteCase], rubric: Rubric
) -> None:
    for c in suite:
        assert check_expectation(c.case, c.expected, rubric) == [], c.case.id
        conversation = c.case.conversation_as_text(rubric.roles)
        for e in c.expected:
            for s in e.spans:
                text = c.case.record if s.source == "record" else conversation
                assert s.end > s.start
                assert text[s.start:s.end] == s.text
                assert text.count(s.text) == 1


def test_points_and_categories_come_from_the_rubric(suite: list[SuiteCase], rubric: Rubric) -> None:
    for c in suite:
        for e in c.expected:
            dim = rubric.dimension(e.dimension, Deductions)
            if e.penalty:
                assert e.category == e.type and e.points == dim.penalties_by_id[e.type].points
            else:
                cat, dtype = dim.find_type(e.type)
                assert e.category == cat.id and e.points == dtype.low


def test_an_omission_points_at_the_conversation(suite: list[SuiteCase]) -> None:
    by_type: dict[str, list[PlantedError]] = collections.defaultdict(list)
    for c in suite:
        for e in c.expected:
            by_type[e.type].append(e)
    for t in ("drug_missing", "ph_hypertension_missing", "fh_absent", "pi_treatment_missing"):
        assert by_type[t], t
        assert all(any(s.source == "conversation" for s in e.spans) for e in by_type[t])
    assert any(e.penalty for e in by_type["diabetes_in_past_history"])


def test_round_trip_through_the_suite_file(suite: list[SuiteCase], rubric: Rubric, tmp_path: Path) -> None:
    path = tmp_path / "handwritten.jsonl"
    path.write_text(dumps_suite(suite), encoding="utf-8")
    loaded = load_suite(path, rubric)
    assert [c.case.id for c in loaded] == [c.case.id for c in suite]
    assert [c.expected for c in loaded] == [c.expected for c in suite]
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["expected"]


def test_cached_copies_are_independent(rubric: Rubric) -> None:
    a = handwritten_suite(rubric)
    a[0].expected.clear()
    assert handwritten_suite(rubric)[0].expected


def _one_case(**change: Any) -> dict[str, Any]:
    case = dict(next(c for c in _raw_cases() if c["errors"]))
    case.update(change)
    return case


def test_a_quote_occurring_twice_is_refused_with_the_case_id(rubric: Rubric) -> None:
    twice = "糖尿病"
    case = dict(next(c for c in _raw_cases() if c["record"].count(twice) == 2))
    case["errors"] = [{"type": "fact_error", "quote": twice, "why": "duplicated"}]
    with pytest.raises(InputError) as err:
        build_suite([case], rubric)
    assert case["id"] in str(err.value) and repr(twice) in str(err.value) and "occurs 2 times" in str(err.value)


def test_missing_quote_unknown_type_and_speaker_are_refused(rubric: Rubric) -> None:
    with pytest.raises(InputError, match=r"hw-x: errors\[0\].*not exactly once"):
        build_suite([_one_case(id="hw-x", errors=[{"type": "fact_error", "quote": "不在病历里的话",
                                                   "why": "x"}])], rubric)
    with pytest.raises(InputError, match=r"hw-y: errors\[0\]: type 'no_such_type'"):
        build_suite([_one_case(id="hw-y", errors=[{"type": "no_such_type", "quote": "主诉", "why": "x"}])], rubric)
    with pytest.raises(InputError, match=r"hw-z: errors\[0\]: give a quote"):
        build_suite([_one_case(id="hw-z", errors=[{"type": "fact_error", "why": "x"}])], rubric)
    with pytest.raises(InputError, match="hw-w: a conversation line without a known speaker"):
        build_suite([_one_case(id="hw-w", conversation="护士：您好\n患者：好")], rubric)
    first = _one_case()
    with pytest.raises(InputError, match="duplicate case id"):
        build_suite([first, first], rubric)
