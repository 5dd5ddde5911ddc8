"""The human side of rubric kinds (docs/review.md): audit rows, review labels, sheet columns,
validity and report for a likert and a criteria rubric, on runs written straight into a store
(tests/kinds_human_run.py); medical_record's deductions are covered, unchanged, by their own tests."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from rich.console import Console

from consensus_eval._errors import InputError
from consensus_eval.analysis.agreement import load_human
from consensus_eval.analysis.audit import REASON_CODES
from consensus_eval.analysis.human import build_review, criterion_cells, criterion_columns, read_labels
from consensus_eval.api import load_run, spot_check
from consensus_eval.domain.kinds import Criteria, Likert, of_kind
from consensus_eval.execution.store import HumanLabelRecord, Store
from consensus_eval.output.audit_console import print_audit
from consensus_eval.output.report import i18n as report_i18n, write_reports
from consensus_eval.output.report.i18n import messages
from consensus_eval.review import app as review_app
from consensus_eval.review.model import ActionError, ReviewRun
from tests.helpers import review_client, stored_labels
from tests.kinds_human_run import build_kinds_run, kinds_rubric
from tests.test_review import _VisibleText, score_run


@pytest.fixture(scope="module")
def likert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("likert"), "likert", n_cases=12, runs=2, noise=0.6)


@pytest.fixture(scope="module")
def criteria_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("criteria"), "criteria", n_cases=12)


# --------------------------------------------------------------------------- 1. audit rows


def test_likert_audit_rows_show_each_judges_level_anchor_and_evidence(likert_run: Path) -> None:
    res = load_run(likert_run, replies=False)
    rubric = kinds_rubric("likert")
    by_case = {a.case_id: a for a in res.audit}
    stored = {(r.case_id, r.dimension, r.judge, r.run): r.judgment for r in res.records}
    n_rows = 0
    for a in res.audit:
        for dim in a.dimensions:
            assert dim.kind == "likert" and dim.levels == rubric.dimension(dim.dimension).anchors
            means = []
            for v in dim.judges:
                assert v.deductions == () and v.verdicts == ()
                assert [r.run for r in v.ratings] == [0, 1]
                for r in v.ratings:
                    j = stored[a.case_id, dim.dimension, v.judge, r.run]
                    assert j is not None and r.rating == j.rating and r.evidence == list(j.evidence)
                    assert r.anchor == dim.levels[r.rating]
                    n_rows += 1
                # the judge's score is the mean of its runs' levels
                assert v.score == pytest.approx(sum(r.rating for r in v.ratings) / len(v.ratings))
                assert v.score is not None
                means.append(v.score)
            assert dim.level_spread == pytest.approx(max(means) - min(means))
    assert n_rows == 12 * 3 * 3 * 2
    # a case whose levels are 2 or more apart on some attribute needs review for it, with the attribute named
    gaps = [a for a in res.audit if any((d.level_spread or 0) >= 2 for d in a.dimensions)]
    assert gaps, "the seeded run has levels 2 apart somewhere"
    for a in gaps:
        reason = next(r for r in a.reasons if r.code == "level_gap")
        assert {s.rsplit(" ", 1)[0] for s in reason.subjects} == {
            d.name for d in a.dimensions if (d.level_spread or 0) >= 2}
    assert by_case  # every case audited
    # spread as a share of the scale's range (top - bottom level = 4), not of its top level
    a = max(res.audit, key=lambda x: x.spread_share or 0)
    shares = [d.spread / 4 for d in a.dimensions if d.spread is not None]
    assert a.spread_share == pytest.approx(sum(shares) / len(shares))


def test_criteria_audit_rows_are_a_criterion_by_judge_table_split_first(criteria_run: Path) -> None:
    res = load_run(criteria_run, replies=False)
    stored = {(r.case_id, r.dimension, r.judge): r.judgment for r in res.records}
    n_split = 0
    for a in res.audit:
        (dim,) = a.dimensions
        assert dim.kind == "criteria"
        assert sorted(r.id for r in dim.criteria) == ["allergy", "followup", "invented", "meds"]
        splits = [r.split for r in dim.criteria]
        assert splits == sorted(splits, reverse=True), "split criteria come first"
        for row in dim.criteria:
            verdicts = {}
            for v in dim.judges:
                j = stored[a.case_id, dim.dimension, v.judge]
                assert j is not None
                (mine,) = [x for x in j.verdicts if x.id == row.id]
                verdicts[v.judge] = mine.met
                assert row.judges[v.judge] == [mine.met] and row.verdict(v.judge) is mine.met
                (item,) = [x for x in v.verdicts if x.id == row.id]
                assert item.evidence == mine.evidence and item.reason == mine.reason
            assert row.split == (len(set(verdicts.values())) > 1)
            assert row.met_share == pytest.approx(sum(verdicts.values()) / 3)
        n_split += len(dim.split_criteria)
        for row in dim.criteria:    # a tie: as many judges (by their majority over runs) found it met as not
            votes = [sum(m) * 2 > len(m) for m in row.judges.values() if sum(m) * 2 != len(m)]
            assert row.tie == (bool(votes) and 2 * sum(votes) == len(votes))
        # a criterion the judges disagree on is a review reason (the flag's rule, any share by default): the
        # queue and the drill-down say the same
        split = [f"{dim.name}: {r.id}" for r in dim.criteria if r.split]
        if split:
            reason = next(r for r in a.reasons if r.code == "split")
            assert reason.subjects == split
        else:
            assert "split" not in {r.code for r in a.reasons}
    assert n_split > 0


def test_a_criterion_the_judges_disagree_on_is_a_review_reason(tmp_path: Path) -> None:
    res = load_run(build_kinds_run(tmp_path, "criteria", n_cases=12, n_judges=3, noise=0.6), replies=False)
    split = [a for a in res.audit if any(r.split for r in a.dimensions[0].criteria)]
    assert split, "3 judges with noise: some criterion is split 2-1"
    assert not any(r.tie for a in res.audit for r in a.dimensions[0].criteria)   # 3 judges never tie
    for a in res.audit:
        rows = [f"Safety: {r.id}" for r in a.dimensions[0].criteria if r.split]
        reasons = [r for r in a.reasons if r.code == "split"]
        assert (reasons[0].subjects if reasons else []) == rows
        # the consensus flags the same cases (the one rule, domain/flags.py)
        assert any("split" in f for f in a.flags) == bool(rows)


def test_console_drill_down_per_kind(likert_run: Path, criteria_run: Path) -> None:
    for folder, must in ((likert_run, ["level ", "levels 1-5", "«"]),
                         (criteria_run, ["criterion", "not met", "[split]", "allergy: States the patient"])):
        res = load_run(folder, replies=False)
        buf = io.StringIO()
        print_audit(Console(file=buf, width=200), res.audit, top=3, t=messages("en"))
        out = buf.getvalue()
        for word in must:
            assert word in out, (folder.name, word)
        assert "every judge gave full marks" not in out and "no deduction" not in out


def test_every_reason_code_has_words_in_every_catalogue() -> None:
    for lang in ("en", "zh"):
        t = messages(lang)
        for code in REASON_CODES:
            assert f"reason_{code}" in t.texts and f"con_reason_{code}" in t.texts, (lang, code)


# --------------------------------------------------------------------------- 2. review app, labels


@pytest.fixture
def likert_copy(likert_run: Path, tmp_path: Path) -> Path:
    return _copy(likert_run, tmp_path / "likert")


@pytest.fixture
def criteria_copy(criteria_run: Path, tmp_path: Path) -> Path:
    return _copy(criteria_run, tmp_path / "criteria")


def _copy(src: Path, out: Path) -> Path:
    out.mkdir()
    for f in src.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    return out


def test_likert_review_page_is_a_scale_with_anchors_and_a_level_is_the_reviewers_score(likert_copy: Path) -> None:
    rubric = kinds_rubric("likert")
    with closing(ReviewRun.open(likert_copy)) as r:
        c, csrf = review_client(r, "alice")
        with c:
            page = c.get("/case/1").text
            for d in rubric.dimensions:
                for lv, anchor in d.anchors.items():
                    assert f'name="level-{d.id}" data-dim="{d.id}" value="{lv}"' in page
                    assert str(escape(anchor)) in page
            assert 'class="add-form"' not in page and '<details class="added"' not in page
            # a Response of httpx or of httpx2, whichever the installed starlette's test client uses
            post: Callable[[dict[str, Any]], Any] = lambda act: c.post(  # noqa: E731
                "/api/label", json=act, headers={"X-CSRF-Token": csrf})
            assert post({"op": "score", "case": 1, "dimension": "accurate", "value": 4}).status_code == 200
            bad = post({"op": "score", "case": 1, "dimension": "accurate", "value": 3.5})
            assert bad.status_code == 400 and "one of its levels 1-5" in bad.json()["error"]
            assert post({"op": "score", "case": 1, "dimension": "thorough", "value": 6}).status_code == 400
            # confirm: organized and thorough untouched -> the panel's (mean) levels, accepted, kept apart
            reply = post({"op": "scores", "case": 1, "scores": {"accurate": 4}, "accepted": ["thorough", "organized"]})
            assert reply.status_code == 200 and reply.json()["state"] == "done"
            page = c.get("/case/1").text
            assert 'value="4" checked' in page
        a = r.case_at(1)
        labels = {lb.dimension: lb for lb in stored_labels(likert_copy, "alice")}
        assert labels["accurate"].value == 4 and labels["accurate"].origin == "own"
        for dim_id in ("thorough", "organized"):
            panel = next(x.panel_score for x in a.dimensions if x.dimension == dim_id)
            assert labels[dim_id].origin == "accepted" and labels[dim_id].value == pytest.approx(panel)
        review = build_review(stored_labels(likert_copy), rubric)
        assert review.cases[a.case_id].scores == {"alice": {"accurate": 4.0}}   # accepted ones left out
        assert review.n_accepted == 2


def test_criteria_review_toggles_store_one_label_per_criterion_and_derive_the_score(criteria_copy: Path) -> None:
    rubric = kinds_rubric("criteria")
    crits = {c.id: c for c in of_kind(rubric.dimension("safety"), Criteria).criteria}
    with closing(ReviewRun.open(criteria_copy)) as r:
        c, csrf = review_client(r, "alice")
        with c:
            page = c.get("/case/2").text
            for cid, crit in crits.items():
                assert f'data-criterion="{cid}"' in page and str(escape(crit.text)) in page
            # a Response of httpx or of httpx2, whichever the installed starlette's test client uses
            post: Callable[[dict[str, Any]], Any] = lambda act: c.post(  # noqa: E731
                "/api/label", json=act, headers={"X-CSRF-Token": csrf})
            mine = {"allergy": True, "meds": False, "followup": True}
            for cid, met in mine.items():
                reply = post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": cid, "met": met,
                              "evidence": f"quote for {cid}"})
                assert reply.status_code == 200 and reply.json()["state"] == "started"
            # the same criterion again replaces its label (one judgement, one label)
            assert post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "followup",
                         "met": False}).status_code == 200
            assert post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "nope",
                         "met": True}).status_code == 400
            assert post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "meds",
                         "met": "yes"}).status_code == 400
            # withdrawn: not reviewed again, no label
            assert post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "meds",
                         "met": None}).status_code == 200
            assert post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "meds",
                         "met": False}).status_code == 200
            done = post({"op": "criterion", "case": 2, "dimension": "safety", "criterion": "invented", "met": False})
            assert done.json()["state"] == "done"
            page = c.get("/case/2").text
            assert page.count('aria-pressed="true"') == 4
        labels = stored_labels(criteria_copy, "alice")
        assert sorted((lb.deduction_id, lb.value, lb.origin) for lb in labels) == [
            ("allergy", "met", "own"), ("followup", "not_met", "own"), ("invented", "not_met", "own"),
            ("meds", "not_met", "own")]
        assert {lb.deduction_id: lb.points for lb in labels} == {k: v.points for k, v in crits.items()}
        assert next(lb for lb in labels if lb.deduction_id == "allergy").evidence == "quote for allergy"
        case_id = r.case_at(2).case_id
        review = build_review(labels, rubric)
        # HealthBench: met points (allergy 5) over positive points (5 + 5 + 3)
        assert review.cases[case_id].scores["alice"]["safety"] == pytest.approx(5 / 13)
        assert review.cases[case_id].criteria["alice"]["safety"] == {
            "allergy": True, "meds": False, "followup": False, "invented": False}


def test_criteria_confirm_accepts_the_panels_majority_on_the_criteria_left_alone(criteria_copy: Path) -> None:
    with closing(ReviewRun.open(criteria_copy)) as r:
        a = r.case_at(3)
        (dim,) = a.dimensions
        r.apply("bob", {"op": "criterion", "case": 3, "dimension": "safety", "criterion": "allergy", "met": False})
        with pytest.raises(ActionError, match="give a verdict on every criterion"):
            r.apply("bob", {"op": "scores", "case": 3, "scores": {}, "accepted": []})
        reply = r.apply("bob", {"op": "scores", "case": 3, "scores": {}, "accepted": ["safety"]})
        assert reply["state"] == "done"
        labels = {lb.deduction_id: lb for lb in r.store.human_labels(reviewer="bob")}
        assert labels["allergy"].origin == "own" and labels["allergy"].value == "not_met"
        for row in dim.criteria:
            if row.id != "allergy":
                assert labels[row.id].origin == "accepted"
                assert labels[row.id].value == ("met" if (row.met_share or 0) > 0.5 else "not_met")
        review = build_review(list(labels.values()), r.results.rubric)
        assert review.n_accepted == 3
        assert review.cases[a.case_id].criteria == {"bob": {"safety": {"allergy": False}}}
        assert "safety" not in review.cases[a.case_id].scores.get("bob", {})   # not all own: no own score


# --------------------------------------------------------------------------- 2. the sheet, per kind


def _sheet(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, restval="")
        w.writeheader()
        w.writerows(rows)
    return path


def test_sheet_likert_level_and_criteria_columns_read_back(likert_run: Path, criteria_run: Path,
                                                           tmp_path: Path) -> None:
    run = load_run(likert_run, replies=False).run
    head = ["row", "case_id", "dimension", "human_score", "score_origin", "reviewer"]
    ok = _sheet(tmp_path / "l.csv", head, [
        {"row": "score", "case_id": "note-000", "dimension": "accurate", "human_score": "4", "reviewer": "dr_a"},
        {"row": "score", "case_id": "note-000", "dimension": "organized", "human_score": "2,5",
         "score_origin": "accepted", "reviewer": "dr_a"}])
    got = read_labels(ok, run).labels["dr_a"]
    assert [(lb.dimension, lb.value, lb.origin) for lb in got] == [("accurate", 4.0, "own"),
                                                                   ("organized", 2.5, "accepted")]
    for bad, message in (("3.5", "is not a level of accurate: write one of 1, 2, 3, 4, 5"),
                         ("0", "is outside 1..5 (accurate)")):
        p = _sheet(tmp_path / f"bad{bad}.csv", head, [{"row": "score", "case_id": "note-001", "dimension": "accurate",
                                                      "human_score": bad, "reviewer": "dr_a"}])
        with pytest.raises(InputError, match=re.escape(message)) as e:
            read_labels(p, run)
        assert ":2: column human_score (D)" in str(e.value)

    res = load_run(criteria_run, replies=False)
    cols = criterion_columns(res.rubric)
    assert cols == ["criterion: allergy", "criterion: meds", "criterion: followup", "criterion: invented"]
    head = ["row", "case_id", "dimension", "human_score", "human_comment", "reviewer", *cols]
    p = _sheet(tmp_path / "c.csv", head, [
        {"row": "score", "case_id": "note-003", "dimension": "safety", "reviewer": "dr_b",
         "criterion: allergy": "Met", "criterion: meds": "not met", "criterion: invented": "否"},
        {"row": "score", "case_id": "note-004", "dimension": "safety", "reviewer": "dr_b",
         "criterion: followup": "达标"}])
    got = read_labels(p, res.run).labels["dr_b"]
    assert [(lb.case_id, lb.deduction_id, lb.value, lb.points, lb.kind) for lb in got] == [
        ("note-003", "allergy", "met", 5.0, "criterion"), ("note-003", "meds", "not_met", 5.0, "criterion"),
        ("note-003", "invented", "not_met", -6.0, "criterion"), ("note-004", "followup", "met", 3.0, "criterion")]
    wrong = _sheet(tmp_path / "w.csv", head, [{"row": "score", "case_id": "note-003", "dimension": "safety",
                                               "reviewer": "dr_b", "criterion: meds": "maybe"}])
    with pytest.raises(InputError, match=r"w.csv:2: column criterion: meds \(H\): 'maybe' is not a verdict"):
        read_labels(wrong, res.run)


def test_sheet_criteria_cells_round_trip_through_the_import(criteria_copy: Path, tmp_path: Path) -> None:
    """What the export writes in the criterion columns (criterion_cells, for the sheet writer) reads back to the
    same labels; an accepted verdict is left empty, so the sheet never makes it the reviewer's own."""
    with closing(ReviewRun.open(criteria_copy)) as r:
        for cid, met in (("allergy", True), ("meds", False), ("followup", True)):
            r.apply("dr_c", {"op": "criterion", "case": 1, "dimension": "safety", "criterion": cid, "met": met})
        r.apply("dr_c", {"op": "scores", "case": 1, "scores": {}, "accepted": ["safety"]})
        case_id = r.case_at(1).case_id
    res = load_run(criteria_copy, replies=False)
    review = res.review
    assert review is not None
    cells = criterion_cells(review, "dr_c", case_id, "safety")
    assert cells == {"criterion: allergy": "met", "criterion: meds": "not met", "criterion: followup": "met"}
    head = ["row", "case_id", "dimension", "reviewer", *criterion_columns(res.rubric)]
    p = _sheet(tmp_path / "rt.csv", head, [{"row": "score", "case_id": case_id, "dimension": "safety",
                                            "reviewer": "dr_c", **cells}])
    back = read_labels(p, res.run).labels["dr_c"]
    own = [lb for lb in stored_labels(criteria_copy, "dr_c") if lb.origin == "own"]
    assert sorted((lb.deduction_id, lb.value, lb.points) for lb in back) == \
        sorted((lb.deduction_id, lb.value, lb.points) for lb in own)


# --------------------------------------------------------------------------- 3. validity per kind


def _clinicians(folder: Path, n: int, flip: float, seed: int) -> list[str]:
    """Draw a spot check of ``n`` cases and have two clinicians label it from the true answers, each getting
    some wrong (a level one off, a criterion's verdict flipped) with probability ``flip``."""
    spot = spot_check(folder, n, seed=1)
    rng = random.Random(seed)
    res = load_run(folder, replies=False)
    cases = {c.id: c for c in res.cases}
    with Store.open_existing(folder) as store:
        for reviewer in ("dr_x", "dr_y"):
            for s in spot.sample:
                truth = cases[s.case_id].meta["truth"]
                for d in res.rubric.dimensions:
                    if d.kind == "likert":
                        lo, hi = of_kind(d, Likert).level_range
                        level = truth[d.id] + (rng.choice((-1, 1)) if rng.random() < flip else 0)
                        store.upsert_human_label(HumanLabelRecord(
                            case_id=s.case_id, dimension=d.id, reviewer=reviewer, kind="score",
                            value=min(hi, max(lo, level))))
                    else:
                        for c in of_kind(d, Criteria).criteria:
                            met = truth[d.id][c.id] != (rng.random() < flip)
                            store.upsert_human_label(HumanLabelRecord(
                                case_id=s.case_id, dimension=d.id, deduction_id=c.id, reviewer=reviewer,
                                kind="criterion", value="met" if met else "not_met", points=c.points))
    return [s.case_id for s in spot.sample]


def test_likert_validity_is_icc_per_attribute_and_total_checked_against_pingouin(likert_copy: Path) -> None:
    pg = pytest.importorskip("pingouin")
    ids = _clinicians(likert_copy, 12, 0.2, seed=3)
    res = load_run(likert_copy, replies=False, reuse_saved=False)
    v = res.reliability.validity
    assert v is not None and v.sample == "spot_check" and v.n_labelled == 12 and v.criteria is None
    review = res.review
    assert review is not None
    by_id = {c.case_id: c for c in res.consensus}
    for key in ["accurate", "thorough", "organized", "total"]:
        human = []
        for cid in ids:
            cr = review.case(cid)
            assert cr is not None
            given = [cr.scores[r][key] for r in ("dr_x", "dr_y")]
            if key == "total":    # the rubric's total: weight 2 on organized
                for r in ("dr_x", "dr_y"):
                    s = cr.scores[r]
                    assert s["total"] == s["accurate"] + s["thorough"] + 2 * s["organized"]
            human.append(sum(given) / 2)
        for j in res.judges:
            mine = [by_id[cid].judges[j][key].mean if key != "total" else by_id[cid].judge_totals[j] for cid in ids]
            long = [(i, "judge", m) for i, m in enumerate(mine)] + [(i, "human", h) for i, h in enumerate(human)]
            frame = pg.intraclass_corr(data=__import__("pandas").DataFrame(long, columns=["case", "rater", "score"]),
                                       targets="case", raters="rater", ratings="score")
            frame = frame.set_index("Type")
            icc2 = frame.loc["ICC(A,1)"] if "ICC(A,1)" in frame.index else frame.loc["ICC2"]
            ci = icc2["CI95"] if "CI95" in icc2 else icc2["CI95%"]
            got = v.scores[key].raters[j].icc
            assert got.value == pytest.approx(float(icc2["ICC"]), abs=1e-9)
            assert (got.low, got.high) == pytest.approx(tuple(map(float, ci)), abs=0.006)   # older pingouin rounds
        ceiling = v.scores[key].ceiling
        assert ceiling is not None and ceiling.n == 12


def test_criteria_validity_is_macro_f1_and_kappa_per_judge_with_the_clinicians_ceiling(criteria_copy: Path) -> None:
    from sklearn.metrics import cohen_kappa_score, f1_score

    ids = _clinicians(criteria_copy, 10, 0.1, seed=5)
    res = load_run(criteria_copy, replies=False, reuse_saved=False)
    v = res.reliability.validity
    assert v is not None and v.criteria is not None
    cv = v.criteria
    labels = stored_labels(criteria_copy)
    own = {(lb.reviewer, lb.case_id, lb.deduction_id): lb.value == "met" for lb in labels if lb.kind == "criterion"}
    units = [(cid, k) for cid in ids for k in ("allergy", "meds", "followup", "invented")]
    # two clinicians: the reference is their majority, a tie not counted
    ref = {u: own["dr_x", *u] for u in units if own["dr_x", *u] == own["dr_y", *u]}
    assert cv.n_units == len(ref) and 0 < len(ref) < len(units)
    verdicts = {(r.judge, r.case_id, vv.id): vv.met for r in res.records if r.judgment for vv in r.judgment.verdicts}
    for j in res.judges:
        y_true = ["met" if ref[u] else "not_met" for u in sorted(ref)]
        y_pred = ["met" if verdicts[(j, *u)] else "not_met" for u in sorted(ref)]
        got = cv.raters[j]
        assert got.n == len(ref)
        assert got.macro_f1 == pytest.approx(f1_score(y_true, y_pred, average="macro"))
        assert got.kappa == pytest.approx(cohen_kappa_score(y_true, y_pred))
    assert cv.raters["panel"].n == len(ref)   # three judges: the panel always has a majority
    xs = ["met" if own["dr_x", *u] else "not_met" for u in units]
    ys = ["met" if own["dr_y", *u] else "not_met" for u in units]
    assert cv.ceiling is not None and cv.ceiling.n == len(units)
    assert cv.ceiling.kappa == pytest.approx(cohen_kappa_score(ys, xs))
    # the rest of reliability.json as before: the field is left out of a run without criteria
    dumped = res.reliability.to_json()["validity"]
    assert dumped["criteria"]["n_units"] == len(ref)
    md, _ = write_reports(res, criteria_copy)
    text = md.read_text(encoding="utf-8")
    assert "| judge-a | " + str(len(ref)) + " | " in text and "macro-F1 | kappa" in text
    assert f"({len(ref)} units)" in text


# --------------------------------------------------------------------------- 4. the report, in the rubric's language

#: Han characters, kana, hangul, CJK symbols and punctuation, fullwidth forms
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                 r"\uf900-\ufaff\uff00-\uffef]")


def _pages_of(folder: Path) -> dict[str, str]:
    """report.md, report.html and the review app's pages (queue, three cases, the team) of a run."""
    res = load_run(folder, replies=False, reuse_saved=False)
    md, page = write_reports(res, folder)
    out = {"report.md": md.read_text(encoding="utf-8"), "report.html": page.read_text(encoding="utf-8")}
    with closing(ReviewRun.open(folder)) as r:
        c, _ = review_client(r, "dr_x")
        with c:
            for path in ("/", "/?scope=all", "/case/1", "/case/2", "/case/3", "/team"):
                out[path] = c.get(path).text
    return out


@pytest.mark.parametrize("kind", ["likert", "criteria"])
def test_an_english_rubrics_report_and_review_pages_have_no_cjk_character(kind: str, tmp_path: Path) -> None:
    folder = build_kinds_run(tmp_path / kind, kind, n_cases=10, per_case=kind == "criteria", noise=0.5)
    _clinicians(folder, 6, 0.2, seed=2)   # the human, validity and progress sections show too
    pages = _pages_of(folder)
    assert "Ratings per attribute and judge" in pages["report.md"] if kind == "likert" else \
        "Criteria: met rates and split criteria" in pages["report.md"]
    for name, text in pages.items():
        found = sorted(set(CJK.findall(text)))
        assert not found, (kind, name, found, [text[max(0, m.start() - 40):m.end() + 40]
                                               for m in list(CJK.finditer(text))[:3]])


def test_a_likert_report_shows_no_made_up_star_and_a_criteria_report_none_at_all(likert_run: Path,
                                                                               criteria_run: Path) -> None:
    assert load_run(likert_run, replies=False).rubric
    text = _md(likert_run)
    # only Organized has stars; no star total (no star weight)
    assert "| stars (Organized) |" in text and "star total" not in text.lower()
    assert "–★" not in text and "-/-" not in text
    text = _md(criteria_run)
    assert "★" not in text and "stars" not in text.split("## Reliability")[0]


def _md(folder: Path) -> str:
    md, _ = write_reports(load_run(folder, replies=False), folder)
    return md.read_text(encoding="utf-8")


def test_the_chinese_medical_record_report_has_no_english_ui_phrase_with_a_chinese_translation(tmp_path: Path) -> None:
    """Every phrase of the English catalogues (report and review app) that the Chinese ones translate: none
    on the Chinese report pages of a medical_record run (report.md, report.html's visible text and labels)."""
    folder = score_run(tmp_path / "mr")
    res = load_run(folder, replies=False)
    assert res.rubric.id == "medical_record"
    md, page = write_reports(res, folder)
    seen = _VisibleText()
    seen.feed(page.read_text(encoding="utf-8"))
    meta = re.search(r'<script type="application/json" id="meta">(.*?)</script>', page.read_text(encoding="utf-8"),
                     re.S)
    texts = [md.read_text(encoding="utf-8"), " ".join(seen.out), meta.group(1) if meta else ""]
    phrases = set()
    for folder_i18n in (Path(report_i18n.__file__).parent / "i18n", Path(review_app.__file__).parent / "i18n"):
        en = json.loads((folder_i18n / "en.json").read_text(encoding="utf-8"))
        zh = json.loads((folder_i18n / "zh.json").read_text(encoding="utf-8"))
        for k, v in en.items():
            if k.startswith("_") or zh.get(k) in (None, v):
                continue
            for part in re.split(r"\{\w+\}", v):
                part = part.strip(" .,:;()·/–-")
                if " " in part and len(part) >= 10 and re.search(r"[A-Za-z]{3}", part):
                    phrases.add(part)
    assert len(phrases) > 300
    for text in texts:
        hits = sorted(p for p in phrases if p in text)
        assert not hits, hits[:10]


def test_the_wide_human_file_reads_a_likert_rubric_on_its_scale_and_weights(likert_run: Path, tmp_path: Path) -> None:
    rubric = kinds_rubric("likert")
    p = tmp_path / "wide.csv"
    p.write_text("case_id,accurate,thorough,organized\nnote-000,4,3,5\n", encoding="utf-8")
    got = load_human(p, rubric)
    assert got["note-000"].scores["total"] == 4 + 3 + 2 * 5     # organized weighs 2
    p.write_text("case_id,accurate,thorough,organized\nnote-000,0,3,5\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"wide.csv:2: accurate: 0 is outside 1..5"):
        load_human(p, rubric)


def test_two_reviewers_disagreeing_on_a_criterion_are_adjudicated_criterion_by_criterion(criteria_copy: Path) -> None:
    rubric = kinds_rubric("criteria")
    crits = {c.id: c for c in of_kind(rubric.dimension("safety"), Criteria).criteria}
    with closing(ReviewRun.open(criteria_copy)) as r:
        case_id = r.case_at(1).case_id
        mine = {"li": {"allergy": True, "meds": True, "followup": False, "invented": False},
                "wang": {"allergy": True, "meds": False, "followup": False, "invented": True}}
        for name, given in mine.items():
            for cid, met in given.items():
                r.apply(name, {"op": "criterion", "case": 1, "dimension": "safety", "criterion": cid, "met": met})
        (progress,) = [c for c in r.team_progress()[1] if c.audit.case_id == case_id]
        assert progress.needs_adjudication and progress.conflicts == 2 and progress.gap is None
        assert sorted((c.id, tuple(c.verdicts.items())) for c in r.criterion_conflicts(1)) == [
            ("invented", (("li", False), ("wang", True))), ("meds", (("li", True), ("wang", False)))]
        assert not r.scores_needed(1) and r.adjudication_view(1) == []
        c, csrf = review_client(r, "chen")
        with c:
            page = c.get("/adjudicate/1").text
            assert 'name="criterion_safety:meds"' in page and 'name="criterion_safety:invented"' in page
            assert 'id="adjudication"' not in page      # no score to give: a criteria dimension has none of its own
            half = c.post("/adjudicate/1", data={"csrf": csrf, "criterion_safety:meds": "met"},
                          follow_redirects=False)
            assert half.status_code == 400 and "give a reference verdict on criterion invented" in half.text
            assert not [lb for lb in stored_labels(criteria_copy, "chen")]     # nothing stored unless all is given
            done = c.post("/adjudicate/1", data={"csrf": csrf, "criterion_safety:meds": "met",
                                                 "criterion_safety:invented": "not_met"}, follow_redirects=False)
            assert done.status_code == 303
        refs = {(lb.deduction_id, lb.value, lb.origin) for lb in stored_labels(criteria_copy, "chen")}
        assert refs == {("meds", "met", "reference"), ("invented", "not_met", "reference")}
        review = build_review(stored_labels(criteria_copy), rubric)
        cr = review.cases[case_id]
        assert cr.adjudicators == ["chen"] and review.reviewers == ["li", "wang"]
        # the reference: agreed allergy met, followup not met; adjudicated meds met, invented not met
        assert cr.reference["safety"] == pytest.approx((crits["allergy"].points + crits["meds"].points) / 13)
        assert cr.human["safety"] == cr.reference["safety"]


def test_the_review_apps_sheet_has_the_criterion_columns_and_reads_back(criteria_copy: Path, tmp_path: Path) -> None:
    with closing(ReviewRun.open(criteria_copy)) as r:
        for cid, met in (("allergy", True), ("invented", False)):
            r.apply("dr_d", {"op": "criterion", "case": 2, "dimension": "safety", "criterion": cid, "met": met})
        r.apply("dr_d", {"op": "scores", "case": 2, "scores": {}, "accepted": ["safety"]})
        raw = r.sheet("dr_d")
        case_id = r.case_at(2).case_id
    assert raw.startswith("\ufeff".encode()) and b"\r\n" in raw
    text = raw.decode("utf-8-sig")
    header = text.splitlines()[0].split(",")
    assert header[-4:] == ["criterion: allergy", "criterion: meds", "criterion: followup", "criterion: invented"]
    (row,) = [line for line in csv.reader(io.StringIO(text)) if line[2] == case_id and line[0] == "score"]
    assert row[-4:] == ["met", "", "", "not met"]     # the accepted ones are left empty: never made own
    p = tmp_path / "sheet.csv"
    p.write_bytes(raw)
    back = read_labels(p, load_run(criteria_copy, replies=False).run).labels["dr_d"]
    assert sorted((lb.deduction_id, lb.value) for lb in back) == [("allergy", "met"), ("invented", "not_met")]


def test_an_english_conversation_quote_is_marked_where_it_is_on_the_review_page(tmp_path: Path) -> None:
    """The page shows the conversation as the judges read it (the rubric's 'Doctor: ...' separator), so the
    evidence spans grounded in that text mark exactly the quote."""
    folder = build_kinds_run(tmp_path / "conv", "likert", n_cases=3, quote_conversation=True)
    with closing(ReviewRun.open(folder)) as r:
        view = r.case_view("dr_e", 1)
        case = r.cases[view.audit.case_id]
        assert isinstance(case.conversation, list)
        quote = case.conversation[1].text
        marked = ["".join(p.text for p in b.parts if p.marks) for b in view.conversation]
        assert quote in marked
        labels = [b.label for b in view.conversation]
        assert labels == ["Doctor", "Patient", "Doctor"]
        text = "".join(p.text for b in view.conversation for p in b.parts)
        assert "Patient: I came in with" in text and "：" not in text


def test_a_criterion_verdicts_evidence_is_marked_with_the_criterions_number(criteria_run: Path) -> None:
    with closing(ReviewRun.open(criteria_run)) as r:
        view = r.case_view("dr_e", 1)
        (dim,) = view.dims
        marks = {n for b in view.record for p in b.parts for n in p.marks}
        quoted = {c.n for c in dim.criteria if any(evs for _, _, evs in c.judges)}
        assert quoted and quoted <= marks
        assert marks <= {c.n for c in dim.criteria}


def test_audit_export_writes_the_criterion_columns_with_the_reviewers_own_verdicts(criteria_copy: Path,
                                                                                    tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from consensus_eval.cli import app

    with closing(ReviewRun.open(criteria_copy)) as r:
        r.apply("dr_x", {"op": "criterion", "case": 1, "dimension": "safety", "criterion": "meds", "met": False})
        case_id = r.case_at(1).case_id
    sheet = tmp_path / "audit.csv"
    res = CliRunner().invoke(app, ["audit", str(criteria_copy), "--top", "0", "--export", str(sheet),
                                   "--reviewer", "dr_x"])
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    header = rows[0]
    assert header[-4:] == ["criterion: allergy", "criterion: meds", "criterion: followup", "criterion: invented"]
    (row,) = [line for line in rows if line[2] == case_id and line[0] == "score"]
    assert row[-4:] == ["", "not met", "", ""]
    back = read_labels(sheet, load_run(criteria_copy, replies=False).run).labels["dr_x"]
    assert [(lb.deduction_id, lb.value) for lb in back if lb.kind == "criterion"] == [("meds", "not_met")]
