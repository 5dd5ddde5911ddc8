"""Labels follow the cases: `human copy FROM TO` brings the clinicians' labels of one run to another
run of the same cases, event by event, each naming its origin; cases whose content changed are refused by name;
verdicts go to a deduction of the same type, or are reported as not comparable; the source is never changed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval._errors import InputError
from consensus_eval.cli import app
from consensus_eval.domain.cases import load_cases
from consensus_eval.execution.labels import Change
from consensus_eval.execution.store import HeldoutLook, HumanLabelRecord, Store
from tests.conftest import ROOT

CASES = ROOT / "examples" / "cases.jsonl"
DIMS = ("accuracy", "completeness", "standardization")


def _score(out: Path, config: str = "configs/default.yaml", cases: Path = CASES) -> Path:
    api.run(api.prepare(load_cases(cases).cases, config), out, n_boot=0)
    return out


def _deduction_ids(out: Path, case_id: str, judge: str = "rules") -> list[tuple[str, str, str]]:
    """(deduction id, dimension, type) of the judge's deductions on the case."""
    res = api.load_run(out, n_boot=0, replies=False)
    return [(f"{r.request_hash}#d{i}", r.dimension, d.type) for r in res.records
            if r.case_id == case_id and r.judge == judge and r.judgment is not None
            for i, d in enumerate(r.judgment.deductions)]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run A (the rules judge) with a spot check of 8 cases, a clinician's blind scores on them (one revised after
    the reveal), verdicts on deductions, an added deduction and comments."""
    a = _score(tmp_path_factory.mktemp("copy") / "a")
    sample = api.spot_check(a, 8, seed=3).sample
    with Store.open_existing(a) as store:
        for k, r in enumerate(sample):
            store.write_labels([Change(HumanLabelRecord(case_id=r.case_id, dimension=d, reviewer="li", kind="score",
                                                        value=30.0 - k - i)) for i, d in enumerate(DIMS)],
                               source="sheet.csv")
        first = sample[0].case_id
        store.reveal("li", [first], source="review")
        store.write_labels([Change(HumanLabelRecord(case_id=first, dimension="accuracy", reviewer="li",
                                                    kind="score", value=12.0))], source="review")
        for r in sample[:4]:
            for did, dim, _ in _deduction_ids(a, r.case_id)[:2]:
                store.write_labels([Change(HumanLabelRecord(case_id=r.case_id, dimension=dim, deduction_id=did,
                                                            reviewer="li", kind="verdict", value="disagree",
                                                            comment="not in the record"))], source="review")
        store.write_labels([Change(HumanLabelRecord(case_id=first, dimension="accuracy", deduction_id="li-1",
                                                    reviewer="li", kind="added_deduction", value="value_error",
                                                    points=2, evidence="血糖 7.2", comment="the dialogue says 6.2")),
                            Change(HumanLabelRecord(case_id=first, reviewer="li", kind="comment",
                                                    comment="a hard case"))], source="review")
        store.add_heldout_looks([HeldoutLook(look_id="l1", heldout="h", version_a="v1", version_b="v2", run_a="x",
                                             run_b="y", at=1.0)])
    return a


def _label_view(labels: list[HumanLabelRecord]) -> list[tuple[object, ...]]:
    return sorted((lb.case_id, lb.kind, lb.dimension or "", lb.value, lb.revision, lb.phase, lb.comment, lb.points,
                   lb.evidence) for lb in labels if lb.kind != "verdict")


def test_the_labels_arrive_as_they_were_each_event_naming_its_origin(labelled: Path, tmp_path: Path) -> None:
    b = _score(tmp_path / "b")
    before = (labelled / "results.sqlite").read_bytes()
    with Store.open_existing(labelled, read_only=True) as store:
        events_a = store.label_events()
        labels_a = store.human_labels()
        sample_a = store.spot_checks()
    done = api.copy_labels(labelled, b, n_boot=0)
    rep = done.report
    assert (labelled / "results.sqlite").read_bytes() == before       # the source is only read
    assert rep.copied == len(events_a) and rep.already == 0 and rep.cases == 8
    assert rep.not_in_target == [] and rep.not_comparable == [] and rep.spot_check == "copied" and rep.looks == 1
    with Store.open_existing(b, read_only=True) as store:
        events_b = store.label_events()
        labels_b = store.human_labels()
        sample_b = store.spot_checks()
        assert [lk.look_id for lk in store.heldout_looks()] == ["l1"]
    # every event, in order, naming the run and the event it came from; phase, time and source kept
    assert [(e.copied_from, e.copied_seq) for e in events_b] == [(str(labelled.resolve()), e.seq) for e in events_a]
    assert [(e.op, e.kind, e.phase, e.at, e.source, e.value) for e in events_b] == [
        (e.op, e.kind, e.phase, e.at, e.source, e.value) for e in events_a]
    # the same labels: the blind score stays the one that counts, its revision beside it
    assert _label_view(labels_b) == _label_view(labels_a)
    revised = [lb for lb in labels_b if lb.revision is not None]
    assert [(lb.value, lb.revision, lb.phase) for lb in revised] == [(30.0, 12.0, "blind")]
    # the verdicts went to the same judge's deduction of the same type in B (same rules judge: the same types)
    types_a = {did: (dim, t) for r in sample_a for did, dim, t in _deduction_ids(labelled, r.case_id)}
    types_b = {did: (dim, t) for r in sample_b for did, dim, t in _deduction_ids(b, r.case_id)}
    va = sorted((lb.case_id, types_a[lb.deduction_id or ""], lb.value) for lb in labels_a if lb.kind == "verdict")
    vb = sorted((lb.case_id, types_b[lb.deduction_id or ""], lb.value) for lb in labels_b if lb.kind == "verdict")
    assert va == vb and len(va) >= 4
    assert [(r.case_id, r.part, r.probability, r.seed) for r in sample_b] == [
        (r.case_id, r.part, r.probability, r.seed) for r in sample_a]
    # the target's outputs were rebuilt with them: its validity section is measured on the copied labels
    rel = json.loads((b / "reliability.json").read_text(encoding="utf-8"))
    assert rel["validity"]["n_labelled"] == 8
    # copying again copies nothing new
    again = api.copy_labels(labelled, b, n_boot=0).report
    assert again.copied == 0 and again.already == len(events_a) and again.spot_check == "same" and again.looks == 0


def test_a_case_whose_content_changed_is_refused_by_name_and_nothing_is_copied(labelled: Path,
                                                                                tmp_path: Path) -> None:
    with Store.open_existing(labelled, read_only=True) as store:
        changed = store.spot_checks()[2].case_id
    rows = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["id"] == changed:
            row["record"] += "\n补充：患者自述症状已缓解。"
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    b = _score(tmp_path / "b", cases=cases)
    with pytest.raises(InputError) as e:
        api.copy_labels(labelled, b, n_boot=0)
    assert changed in str(e.value) and "another content" in str(e.value) and "nothing was copied" in str(e.value)
    with Store.open_existing(b, read_only=True) as store:
        assert store.label_events() == [] and store.spot_checks() == []


def test_verdicts_on_a_type_the_target_never_gives_are_not_comparable(labelled: Path, tmp_path: Path) -> None:
    """In B, the judge's call on one verdict's case and dimension gave no deduction of the verdict's type (its stored
    judgment without them): that verdict is left out and reported; the others and every score arrive."""
    b = _score(tmp_path / "b")
    with Store.open_existing(labelled, read_only=True) as store:
        verdicts = [lb for lb in store.human_labels() if lb.kind == "verdict"]
    types_a = {did: (dim, t) for lb in verdicts for did, dim, t in _deduction_ids(labelled, lb.case_id)}
    gone = (verdicts[0].case_id, *types_a[verdicts[0].deduction_id or ""])
    with closing(sqlite3.connect(b / "results.sqlite")) as con, con:
        for h, text in con.execute("SELECT request_hash, judgment FROM calls WHERE case_id = ? AND dimension = ?",
                                   gone[:2]).fetchall():
            j = json.loads(text)
            j["deductions"] = [d for d in j["deductions"] if d["type"] != gone[2]]
            con.execute("UPDATE calls SET judgment = ? WHERE request_hash = ?", (json.dumps(j), h))
    rep = api.copy_labels(labelled, b, n_boot=0).report
    lost = [v for v in verdicts if (v.case_id, *types_a[v.deduction_id or ""]) == gone]
    assert [(x.case_id, x.dimension, x.item, x.events) for x in rep.not_comparable] == [(*gone, len(lost))]
    with Store.open_existing(b, read_only=True) as store:
        scores = [lb for lb in store.human_labels() if lb.kind == "score"]
        carried = [lb for lb in store.human_labels() if lb.kind == "verdict"]
    types_b = {did: (dim, t) for lb in carried for did, dim, t in _deduction_ids(b, lb.case_id)}
    assert len(scores) == 24
    assert {(lb.case_id, *types_b[lb.deduction_id or ""]) for lb in carried} == {
        (lb.case_id, *types_a[lb.deduction_id or ""]) for lb in verdicts} - {gone}


def test_the_command_line_copies_and_says_what_it_left_out(labelled: Path, tmp_path: Path) -> None:
    b = _score(tmp_path / "b")
    shutil.rmtree(b / "report.html", ignore_errors=True)
    res = CliRunner().invoke(app, ["human", "copy", str(labelled), str(b), "--bootstrap", "0"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "copied" in res.output and "spot check: copied with its tuning / held-out split" in res.output
    assert (b / "report.html").is_file()
    res = CliRunner().invoke(app, ["human", "copy", str(labelled), str(labelled)])
    assert res.exit_code == 2 and "name two runs" in res.output
