"""Parity of the two models of a stored judgment: the validated pydantic models a judge returns
(:class:`~consensus_eval.domain.judgment.Judgment` and its items, :class:`~consensus_eval.execution.store.CallRecord`)
and the slotted dataclasses a store hands back (:mod:`consensus_eval.domain.stored`,
:class:`~consensus_eval.execution.store.StoredCall`). They are two models on purpose (bench/README.md, "Plain read
models": the dataclasses rebuild a large run in a fraction of the time and memory); these tests keep them equal, so a
field added to one and not the other fails here: the same field names in the same order, the same types (a list is a
tuple of the read model's items), the same defaults, and the same dumps for any values."""

from __future__ import annotations

import dataclasses
import json
import random
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from consensus_eval._errors import UsageError
from consensus_eval.analysis.audit import JudgeView
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.grounding import Grounding, Span
from consensus_eval.domain.judgment import CallOutcome, CriterionVerdict, Deduction, Judgment, PenaltyHit
from consensus_eval.domain.stored import (
    StoredDeduction,
    StoredJudgment,
    StoredPenalty,
    StoredVerdict,
    from_judgment,
    stored_judgment,
)
from consensus_eval.execution.store import CallRecord, Store, StoredCall

#: each validated model and its read model
PAIRS: list[tuple[type[BaseModel], type[Any]]] = [
    (Deduction, StoredDeduction), (PenaltyHit, StoredPenalty), (CriterionVerdict, StoredVerdict),
    (Judgment, StoredJudgment), (CallRecord, StoredCall)]
_READ_MODEL = dict(PAIRS)


def _as_read_type(tp: Any) -> Any:
    """A validated model's field type as its read model spells it: ``list[X]`` is ``tuple[X', ...]``, each model
    its read model, unions and literals member by member."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _READ_MODEL:
        return _READ_MODEL[tp]
    if origin is list:
        return tuple[_as_read_type(args[0]), ...]  # type: ignore[misc]
    if origin in (typing.Union, __import__("types").UnionType):
        return typing.Union[tuple(_as_read_type(a) for a in args)]  # noqa: UP007 - built from a tuple of types
    return tp


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    hints = typing.get_type_hints(model)
    return {name: _as_read_type(hints[name]) for name in model.model_fields}


@pytest.mark.parametrize(("model", "read"), PAIRS, ids=[m.__name__ for m, _ in PAIRS])
def test_both_models_have_the_same_fields_types_and_defaults(model: type[BaseModel], read: type[Any]) -> None:
    read_hints = typing.get_type_hints(read)
    read_fields = {f.name: read_hints[f.name] for f in dataclasses.fields(read)}
    want = _fields(model)
    if read is StoredCall:   # a call's columns in the table's order: the same fields, ordered as read
        assert set(read_fields) == set(want)
    else:
        assert list(read_fields) == list(want)
    assert read_fields == {name: want[name] for name in read_fields}
    for f in dataclasses.fields(read):
        default = model.model_fields[f.name].get_default(call_default_factory=True)
        if f.default is dataclasses.MISSING:
            assert model.model_fields[f.name].is_required(), f.name
        else:
            assert (tuple(default) if isinstance(default, list) else default) == f.default, f.name


def test_the_read_models_are_slotted_and_frozen() -> None:
    for _, read in PAIRS:
        params = read.__dataclass_params__
        assert params.frozen and "__slots__" in read.__dict__, read.__name__


_TEXTS = ["", "空腹血糖7.9", "a \"quote\"\n", "\u0000\ud7ff", "🙂", " trailing "]


def _text(rng: random.Random) -> str:
    return rng.choice(_TEXTS) + rng.choice(_TEXTS)


def _float(rng: random.Random) -> float:
    return rng.choice([0.0, -0.0, 0.5, 2.0, 1e-9, 37.5, rng.uniform(-1e6, 1e6), float(rng.randrange(40))])


def _judgment(rng: random.Random) -> Judgment:
    """A judgment with every field drawn, the kinds' fields mixed freely (the models do not tie them to a kind)."""
    n = rng.randrange

    def some(make: Any) -> list[Any]:
        return [make() for _ in range(n(4))]

    return Judgment(
        dimension=rng.choice(["accuracy", "clarity", "items", "案"]),
        deductions=some(lambda: Deduction(category=_text(rng), type=_text(rng), points=_float(rng),
                                          evidence=_text(rng), reason=_text(rng))),
        fixed_penalties=some(lambda: PenaltyHit(id=_text(rng), evidence=_text(rng), reason=_text(rng))),
        claimed_score=rng.choice([None, _float(rng)]), claimed_stars=rng.choice([None, 1, 5]), comment=_text(rng),
        rating=rng.choice([None, 0, 3, -2]), evidence=some(lambda: _text(rng)),
        verdicts=some(lambda: CriterionVerdict(id=_text(rng), met=rng.random() < 0.5, evidence=_text(rng),
                                               reason=_text(rng))))


def test_any_judgment_dumps_the_same_from_either_model() -> None:
    rng = random.Random(35)
    for _ in range(2000):
        j = _judgment(rng)
        stored = stored_judgment(json.loads(j.model_dump_json()))
        assert stored == from_judgment(j)
        assert json.dumps(stored.to_dict()) == json.dumps(j.model_dump())   # values, key order, -0.0 alike
        assert stored.to_judgment().model_dump_json() == j.model_dump_json()


def _outcome(rng: random.Random, i: int) -> CallRecord:
    ok = rng.random() < 0.7
    values: dict[str, Any] = {
        f: rng.choice([None, rng.randrange(10_000)]) for f in
        ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")}
    return CallRecord(
        status="ok" if ok else "failed", judgment=_judgment(rng) if ok else None, raw=rng.choice([None, _text(rng)]),
        error=None if ok else _text(rng), error_kind=None if ok else rng.choice(["timeout", "invalid_reply"]),
        model=rng.choice([None, "m"]), cost=rng.choice([None, 0.0, 1.5e-5]), attempts=rng.randrange(1, 4),
        request_hash=f"h{i}", case_id=rng.choice(["c1", "病例"]), dimension="accuracy", judge="j",
        run=rng.randrange(3), latency_s=rng.choice([None, 0.25]), finished_at=float(i), **values)


def test_any_call_reads_back_as_the_record_written(tmp_path: Path) -> None:
    """Every field of :class:`CallOutcome` and :class:`CallRecord` is a column of a stored call and comes back
    with its value (but ``finished_at``, which the store sets): the read model's record is the record written."""
    assert set(CallOutcome.model_fields) < set(CallRecord.model_fields)
    rng = random.Random(6)
    records = [_outcome(rng, i) for i in range(300)]
    with Store(tmp_path / "results.sqlite") as store:
        for r in records:
            store.record(r)
        back = {c.request_hash: c for c in store.calls(planned_only=False)}
    for r in records:
        got = back[r.request_hash].to_record()   # the store stamps when a call landed: finished_at is its own
        assert got.model_dump_json(exclude={"finished_at"}) == r.model_dump_json(exclude={"finished_at"})
        assert got.finished_at > 0


def test_a_read_model_made_slot_by_slot_is_the_one_its_init_makes() -> None:
    """slots_maker (what the store, the stored judgments, grounding and the audit's judge views are made with) makes
    the object the dataclass's own __init__ makes from the same values: equal, the same repr and hash, still frozen; a
    class it cannot make that way (not slotted, or with a __post_init__) is refused."""
    rng = random.Random(3)
    for read in [*(r for _, r in PAIRS), Span, Grounding, JudgeView]:
        make: Any = slots_maker(read)
        names = [f.name for f in dataclasses.fields(read)]
        for _ in range(20):
            values = [rng.choice([None, 0, -0.0, 2.5, "", "口渴", (), ("a",)]) for _ in names]
            made, inited = make(*values), read(**dict(zip(names, values, strict=True)))
            assert made == inited and repr(made) == repr(inited) and hash(made) == hash(inited)
            assert type(made) is read
            with pytest.raises(dataclasses.FrozenInstanceError):
                made.__setattr__(dataclasses.fields(read)[0].name, "changed")

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(slots=True, frozen=True)
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, PostInit, int):
        with pytest.raises(UsageError):
            slots_maker(cls)
