"""Plain read models of stored judgments (consensus_eval/domain/stored.py): built from the stored JSON, the same
values as the validated model, and a damaged row is an InputError naming the call."""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
from pathlib import Path

import pytest

from consensus_eval import InputError
from consensus_eval.domain.judgment import CriterionVerdict, Deduction, Judgment, PenaltyHit
from consensus_eval.domain.stored import StoredJudgment, from_judgment, stored_judgment
from consensus_eval.execution.store import CallRecord, PlannedCall, Store, StoredCall

KINDS = [
    Judgment(dimension="accuracy", deductions=[Deduction(category="numbers", type="value_error", points=2.0,
                                                         evidence="空腹血糖7.9", reason="错"),
                                               Deduction(category="numbers", type="unit", points=0.5)],
             fixed_penalties=[PenaltyHit(id="dm_in_history", evidence="既往史：糖尿病")], claimed_score=37.5,
             claimed_stars=4, comment="ok"),
    Judgment(dimension="clarity", rating=3, evidence=["a quote", "another"], comment="fine"),
    Judgment(dimension="items", verdicts=[CriterionVerdict(id="c1", met=True, evidence="x", reason="y"),
                                          CriterionVerdict(id="c2", met=False)]),
    Judgment(dimension="empty"),
]


@pytest.mark.parametrize("judgment", KINDS, ids=[j.dimension for j in KINDS])
def test_a_stored_judgment_has_the_validated_models_values(judgment: Judgment) -> None:
    got = stored_judgment(json.loads(judgment.model_dump_json()))
    assert got.to_dict() == judgment.model_dump()
    assert got.to_judgment() == judgment and got.to_judgment().model_dump_json() == judgment.model_dump_json()
    assert got == from_judgment(judgment)
    assert [d.points for d in got.deductions] == [d.points for d in judgment.deductions]
    assert type(got.deductions) is tuple and all(type(d.points) is float for d in got.deductions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.comment = "changed"  # type: ignore[misc]
    assert not hasattr(got, "__dict__")   # slotted: no per-object dict


def test_a_store_hands_back_plain_read_models_with_the_values_written(tmp_path: Path) -> None:
    records = [CallRecord(status="ok", judgment=j, raw=j.model_dump_json(), request_hash=f"h{i}", case_id="c1",
                          dimension=j.dimension, judge="j", run=0, model="m", prompt_tokens=10, cost=0.5,
                          latency_s=1.25, attempts=2) for i, j in enumerate(KINDS)]
    records.append(CallRecord(status="failed", error="boom", error_kind="timeout", request_hash="hf", case_id="c1",
                              dimension="accuracy", judge="j", run=0))
    with Store(tmp_path / "results.sqlite") as store:
        for r in records:
            store.record(r)
        got = {c.request_hash: c for c in store.calls(planned_only=False)}
        lean = {c.request_hash: c for c in store.calls(planned_only=False, replies=False)}
    for r in records:
        c = got[r.request_hash]
        assert isinstance(c, StoredCall)
        back = {f: getattr(c, f) for f in CallRecord.model_fields if f not in ("judgment", "finished_at")}
        assert back == r.model_dump(exclude={"judgment", "finished_at"})
        assert (c.judgment is None) == (r.judgment is None)
        if r.judgment is not None:
            assert isinstance(c.judgment, StoredJudgment) and c.judgment.to_judgment() == r.judgment
        assert lean[r.request_hash].raw is None and dataclasses.replace(lean[r.request_hash], raw=c.raw) == c
    # the ids every call repeats are one object each
    a, b = got["h0"], got["h1"]
    assert a.case_id is b.case_id and a.judge is b.judge and a.status is b.status


def test_a_judgment_that_does_not_read_back_is_a_damaged_store(tmp_path: Path) -> None:
    j = KINDS[0]
    with Store(tmp_path / "results.sqlite") as store:
        store.record(CallRecord(status="ok", judgment=j, request_hash="h0", case_id="c1", dimension=j.dimension,
                                judge="j", run=0))
    for bad in ('{"verdict": 1}', '{"dimension": "accuracy", "surprise": 1}', "not json",
                '{"dimension": "accuracy", "deductions": [{"category": "numbers"}]}'):
        with sqlite3.connect(tmp_path / "results.sqlite") as db:
            db.execute("UPDATE calls SET judgment = ?", (bad,))
        damaged = pytest.raises(InputError, match="damaged store: the call 'h0'")
        with Store(tmp_path / "results.sqlite") as store, damaged:
            store.calls(planned_only=False)


def test_the_calls_of_the_plan_come_in_plan_order_and_the_unstored_ones_are_listed_in_it(tmp_path: Path) -> None:
    plan = [PlannedCall(f"h{i}", f"c{i % 7}", "accuracy", "j", i % 3) for i in range(60)]
    order = list(range(60))
    random.Random(4).shuffle(order)    # stored in another order than planned; a third never stored
    with Store(tmp_path / "results.sqlite") as store:
        store.set_plan(plan)
        for i in order[:40]:
            store.record(CallRecord(status="ok", judgment=KINDS[0], request_hash=f"h{i}", case_id=f"c{i % 7}",
                                    dimension="accuracy", judge="j", run=i % 3))
        store.record(CallRecord(status="failed", error="x", request_hash="stray", case_id="c0",
                                dimension="accuracy", judge="j", run=0))     # not in the plan
        calls = store.calls()
        stored = {c.request_hash for c in calls}
        assert [c.request_hash for c in calls] == [p.request_hash for p in store.plan() if p.request_hash in stored]
        assert len(calls) == 40 and "stray" not in stored
        assert store.unstored_plan() == [(p.request_hash, p.case_id) for p in plan if p.request_hash not in stored]


def test_a_stored_judgment_is_parsed_to_what_json_loads_gives() -> None:
    """Store._to_records parses a judgment with pydantic-core's parser: the same values as json.loads (every float
    bit for bit, -0.0 and big ints included), and what it refuses goes to json.loads (its value or its error)."""
    import math
    import struct

    from consensus_eval.execution.store import _loads_judgment

    rng = random.Random(7)
    texts = ['{"a": -0.0, "b": 123456789012345678901234567890, "c": 1e400, "d": "\\ud83d\\ude00", "e": [true, null]}',
             '"\\ud800"', '{"x": "a\\u0000b\\/"}', " {} ", "NaN", "-Infinity"]
    for _ in range(20000):
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            texts += [repr(x), f"{x:.17g}", f"{x:.6e}", json.dumps({"points": x, "claimed_score": round(x, 2)})]
    for t in texts:
        want, got = json.loads(t), _loads_judgment(t)
        assert repr(got) == repr(want) and json.dumps(got) == json.dumps(want), t
    for bad in ("01", "[1,]", "{}x", '"\t"', "\ufeff{}", "[" * 5000):
        with pytest.raises((ValueError, RecursionError)) as want_err:
            json.loads(bad)
        with pytest.raises(want_err.type):
            _loads_judgment(bad)
