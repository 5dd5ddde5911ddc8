"""Labels that cannot be rewritten (consensus_eval.execution.labels): every label action is an event of an append-only
history and the labels are derived from it; blind scores are frozen at reveal (a later change is a revision, never
the value validity reads); the store enforces the team's roles and the blind spot check whatever channel writes;
a repeated action id stores nothing; a write that names a stale version is a conflict. The schema-6 store kept as a
fixture (tests/data/stores/schema6, built by the code of that schema) upgrades with every label as its first event,
and its validity and human-agreement figures are the same before (its labels read as schema 6 read them) and after
the upgrade."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest

from consensus_eval import api
from consensus_eval.analysis.derived import read_run
from consensus_eval.analysis.results import Results, analyze
from consensus_eval.execution.labels import Change, fold, slot_of
from consensus_eval.execution.store import HumanLabelRecord, LabelConflict, LabelRefused, SpotCheckRecord, Store
from tests.conftest import ROOT

FROZEN = ("score", "criterion")
SCHEMA6 = ROOT / "tests" / "data" / "stores" / "schema6"


def _figures(res: Results) -> dict[str, object]:
    """The validity and human-agreement figures of ``res``, as JSON."""
    rel = res.reliability
    assert rel.validity is not None and rel.human is not None
    out = {"validity": rel.validity.model_dump(mode="json"), "human": rel.human.model_dump(mode="json")}
    back: dict[str, object] = json.loads(json.dumps(out, sort_keys=True))
    return back


def _schema6_labels(db: Path) -> list[HumanLabelRecord]:
    """The labels of a schema-6 store read as that version read them: its ``human_labels`` rows, in the order they
    were written (``labelled_at``, then ``rowid``)."""
    cols = ["case_id", "dimension", "deduction_id", "reviewer", "kind", "value", "points", "comment", "labelled_at",
            "source", "origin", "evidence"]
    with closing(sqlite3.connect(db)) as con:
        rows = con.execute(f"SELECT {', '.join(cols)} FROM human_labels ORDER BY labelled_at, rowid").fetchall()
    return [HumanLabelRecord.model_validate(dict(zip(cols, r, strict=True))) for r in rows]


def test_the_schema_6_store_upgrades_every_label_as_its_first_event_with_the_same_figures(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(SCHEMA6 / "results.sqlite", run / "results.sqlite")
    old = _schema6_labels(run / "results.sqlite")
    assert len(old) == 83 and {lb.origin for lb in old} == {"own", "accepted", "reference"}
    before = (run / "results.sqlite").read_bytes()
    with Store.open_existing(run, read_only=True) as store:   # an upgraded copy in memory: the file left as it is
        stored, spot = read_run(store, replies=False), store.spot_checks()
        assert store.human_labels() == [lb.model_copy(update={"phase": p, "version": 1}) for lb, p in
                                        zip(old, [_phase(lb, spot) for lb in old], strict=True)]
    assert (run / "results.sqlite").read_bytes() == before
    expected = _figures(analyze(stored, labels=old, n_boot=0, spot_checks=spot))      # as schema 6 computed them
    assert expected["validity"]["n_labelled"] == 9                       # type: ignore[index]
    assert _figures(api.load_run(run, n_boot=0, reuse_saved=False)) == expected
    with Store.open_existing(run) as store:                # writable: upgraded in place
        events = store.label_events()
        labels = store.human_labels()
    assert [(e.reviewer, e.kind, e.case_id, e.dimension, e.deduction_id, e.value, e.origin, e.source, e.at)
            for e in events] == [(lb.reviewer, lb.kind, lb.case_id, lb.dimension, lb.deduction_id, lb.value,
                                  lb.origin, lb.source, lb.labelled_at) for lb in old]   # each its first event
    assert {e.op for e in events} == {"set"} and len(labels) == len(old)
    assert {lb.phase for lb in labels if lb.origin == "reference"} == {"adjudication"}
    assert _figures(api.load_run(run, n_boot=0, reuse_saved=False)) == expected


def _phase(lb: HumanLabelRecord, spot: Sequence[SpotCheckRecord]) -> str:
    """The phase the migration gives a schema-6 label: a reference in adjudication; an own score of a spot-check
    case blind; the rest revealed."""
    if lb.origin == "reference":
        return "adjudication"
    return "blind" if lb.case_id in {r.case_id for r in spot} and lb.origin == "own" and lb.kind in FROZEN \
        else "revealed"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "results.sqlite")
    s.replace_spot_checks([SpotCheckRecord(case_id="s1", position=0, probability=0.5)])
    return s


def _score(reviewer: str, case: str, dim: str, value: float | None, origin: str = "own") -> HumanLabelRecord:
    return HumanLabelRecord.model_validate({"case_id": case, "dimension": dim, "reviewer": reviewer, "kind": "score",
                                            "value": value, "origin": origin})


def test_blind_scores_are_frozen_at_reveal_and_later_changes_are_revisions(store: Store) -> None:
    store.write_labels([Change(_score("li", "s1", "acc", 30))], source="review")
    store.write_labels([Change(_score("li", "s1", "acc", 28))], source="review")     # still blind: replaces
    assert [(lb.value, lb.phase, lb.revision) for lb in store.human_labels()] == [(28.0, "blind", None)]
    assert store.reveal("li", ["s1", "q1"], source="review") == ["s1"]       # q1: not in the spot check
    assert store.reveal("li", ["s1"], source="review") == []                  # once
    store.write_labels([Change(_score("li", "s1", "acc", 35))], source="review")
    (lb,) = store.human_labels()
    assert (lb.value, lb.phase, lb.revision, lb.version) == (28.0, "blind", 35.0, 3)
    store.write_labels([Change(_score("li", "s1", "acc", None), clear=True)], source="review")   # revision withdrawn
    (lb,) = store.human_labels()
    assert (lb.value, lb.revision) == (28.0, None)
    assert [(e.op, e.phase) for e in store.label_events()] == [
        ("set", "blind"), ("set", "blind"), ("reveal", "revealed"), ("set", "revealed"), ("clear", "revealed")]
    # another reviewer's case is not revealed by li's
    store.write_labels([Change(_score("wang", "s1", "acc", 20))], source="review")
    assert next(lb for lb in store.human_labels() if lb.reviewer == "wang").phase == "blind"


def test_the_panels_score_cannot_be_accepted_on_a_spot_check_case_through_the_store(store: Store) -> None:
    with pytest.raises(LabelRefused, match="spot check") as e:
        store.write_labels([Change(_score("li", "s1", "acc", 30, "accepted"))], source="api")
    assert e.value.code == "accepted_blind"
    store.write_labels([Change(_score("li", "q1", "acc", 30, "accepted"))], source="api")     # a queue case: fine
    assert store.label_events(case_id="s1") == []


def test_roles_are_enforced_by_the_store(store: Store) -> None:
    store.write_labels([Change(_score("chen", "q1", "acc", 30, "reference"))], source="api")   # no team: anyone
    store.put_reviewer("li", "reviewer", "k1")
    store.put_reviewer("chen", "adjudicator", "k2")
    for label, code in ((_score("chen", "q1", "acc", 31), "adjudicator_own"),
                        (_score("li", "q1", "acc", 31, "reference"), "reference_not_adjudicator"),
                        (HumanLabelRecord(case_id="q1", dimension="acc", deduction_id="h#d0", reviewer="chen",
                                          kind="verdict", value="agree"), "adjudicator_own")):
        with pytest.raises(LabelRefused) as e:
            store.write_labels([Change(label)], source="api")
        assert e.value.code == code
    store.write_labels([Change(_score("chen", "q1", "acc", 32, "reference"))], source="api")
    assert [(lb.reviewer, lb.value, lb.phase) for lb in store.human_labels()] == [("chen", 32.0, "adjudication")]


def test_a_repeated_action_id_and_an_unchanged_label_store_nothing(store: Store) -> None:
    label = HumanLabelRecord(case_id="q1", dimension="acc", deduction_id="added:acc:1", reviewer="li",
                             kind="added_deduction", value="drug", points=2, evidence="二甲双胍", comment="漏")
    assert store.write_labels([Change(label)], source="review", action_id="a-1").applied
    assert not store.write_labels([Change(label)], source="review", action_id="a-1").applied
    assert store.write_labels([Change(label)], source="review", action_id="a-2").applied    # the same content
    assert len(store.label_events()) == 1
    assert store.write_labels([Change(label)], source="review", action_id="a-1", actor="wang").applied  # another's id
    with pytest.raises(LabelRefused):
        store.write_labels([Change(label)], source="review", action_id="x" * 101)


def test_a_stale_version_is_a_conflict_with_the_stored_label(store: Store) -> None:
    sl = slot_of("li", "q1", "score", "acc", None)
    w = store.write_labels([Change(_score("li", "q1", "acc", 30))], source="review", expect={sl: 0})
    assert w.versions == {sl: 1}
    store.write_labels([Change(_score("li", "q1", "acc", 31))], source="review", expect={sl: 1})   # tab A
    with pytest.raises(LabelConflict) as e:                                                       # tab B, stale
        store.write_labels([Change(_score("li", "q1", "acc", 25))], source="review", expect={sl: 1})
    assert e.value.version == 2 and e.value.sent == 1 and [lb.value for lb in e.value.stored] == [31.0]
    assert [lb.value for lb in store.human_labels()] == [31.0]
    # a verdict and the comment on the same deduction are one field: one version
    v = HumanLabelRecord(case_id="q1", dimension="acc", deduction_id="h#d0", reviewer="li", kind="verdict",
                         value="agree")
    store.write_labels([Change(v)], source="review")
    c = v.model_copy(update={"kind": "comment", "value": None, "comment": "why"})
    store.write_labels([Change(c), Change(v, clear=True)], source="review")
    assert c.slot == v.slot
    with pytest.raises(LabelConflict):
        store.write_labels([Change(v)], source="review", expect={v.slot: 1})


def test_a_reimported_sheet_writes_only_what_changed(store: Store) -> None:
    sheet = [_score("li", "q1", "acc", 30), _score("li", "q1", "comp", 20)]
    assert store.replace_human_labels("li", "a.csv", sheet) == 2
    assert store.replace_human_labels("li", "a.csv", sheet) == 2
    assert len(store.label_events()) == 2                                     # the same sheet again: no event
    store.replace_human_labels("li", "a.csv", [_score("li", "q1", "acc", 31)])   # comp cleared, acc changed
    assert [(e.op, e.dimension, e.value) for e in store.label_events()[2:]] == [("clear", "comp", None),
                                                                                 ("set", "acc", 31.0)]
    assert {(lb.dimension, lb.value, lb.source) for lb in store.human_labels()} == {("acc", 31.0, "a.csv")}


def test_fold_keeps_the_order_labels_were_last_written(store: Store) -> None:
    for dim, v in (("a", 1), ("b", 2), ("a", 3)):
        store.write_labels([Change(_score("li", "q1", dim, v))], source="api")
    assert [(lb.dimension, lb.value, lb.version) for lb in fold(store.label_events())] == [("b", 2.0, 1),
                                                                                            ("a", 3.0, 2)]
