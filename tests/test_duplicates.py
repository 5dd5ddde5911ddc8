"""domain.sets.duplicates, and the four places that report duplicate ids through it (their messages)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from consensus_eval import InputError, api
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Dimension
from consensus_eval.domain.sets import duplicates


@pytest.mark.parametrize("items, expected", [
    ([], []),
    (["a", "b", "c"], []),
    (["a", "a"], ["a"]),
    (["a", "b", "b", "a", "b"], ["b", "a"]),  # in the order each is met again, each once
    ([3, 1, 2, 1, 3, 3, 2], [1, 3, 2]),
    ([(1, "x"), (1, "y"), (1, "x")], [(1, "x")]),
])
def test_duplicates(items: list[object], expected: list[object]) -> None:
    assert duplicates(items) == expected


def test_duplicates_reads_an_iterator_once() -> None:
    consumed: list[str] = []

    def gen() -> Iterator[str]:
        for x in "abcab":
            consumed.append(x)
            yield x

    assert duplicates(gen()) == ["a", "b"]
    assert consumed == list("abcab")


def _judge(name: str) -> dict[str, object]:
    return {"name": name, "model": "openai/x"}


def test_duplicate_judge_names_are_named_sorted() -> None:
    with pytest.raises(ValidationError, match=r"duplicate judge name\(s\): a, b \[type"):
        EvalConfig.model_validate({"judges": [_judge(n) for n in "bcaba"]})


def test_duplicate_case_ids_given_as_objects() -> None:
    cases = [{"id": i, "conversation": "Q", "record": "A"} for i in ("c2", "c1", "c2", "c3", "c1")]
    with pytest.raises(InputError, match=r"^duplicate case id\(s\): c1, c2$"):
        api.prepare(cases, {"judges": [_judge("a")]}, check_keys=False)


def test_a_cases_criterion_given_twice_names_the_first_repeated() -> None:
    crit = [{"id": i, "text": "t", "points": 1} for i in ("x", "y", "y", "x")]
    with pytest.raises(ValidationError, match="criterion id 'y' is given twice"):
        Case.model_validate({"id": "c", "conversation": "Q", "record": "A", "criteria": crit})


def test_a_rubrics_duplicate_criteria_are_named_sorted() -> None:
    crit = [{"id": i, "text": "t", "points": 1} for i in ("z", "y", "z", "y")]
    with pytest.raises(ValidationError, match=r"duplicate criterion id\(s\): y, z"):
        Dimension.model_validate({"id": "d", "name": "D", "max": 1, "kind": "criteria", "criteria": crit})
