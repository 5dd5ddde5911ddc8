"""Audit: ranking by disagreement, singletons, claim mismatches and the adjudication sheet.

(The review queue's invariances, the single-judge risk ranking, the drill-down, anchors and the
console at 2,000 cases: tests/test_review_queue.py.)

The hand-built store (:func:`build_panel_store`) has 3 judges x 4 cases with known deductions, so
every expected figure below is computed by hand in the comments.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest
from typer.testing import CliRunner

from consensus_eval.analysis import audit as audit_mod
from consensus_eval.api import load_run
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.execution.store import CallRecord, PlannedCall, Store
from consensus_eval.output.files import export_columns, write_adjudication_csv
from tests.helpers import write_store

JUDGES = ["judge-a", "judge-b", "judge-c"]
DIMS = ["accuracy", "completeness", "standardization"]
XSS_EVIDENCE = "二甲双胍<img src=x onerror=alert(1)>"


def _d(category: str, type_: str, points: float, evidence: str = "", reason: str = "") -> Deduction:
    return Deduction(category=category, type=type_, points=points, evidence=evidence, reason=reason)


# (case, judge, dimension) -> Judgment, or "failed". Dimensions not listed: no deduction (full marks).
PENALTY = PenaltyHit(id="diabetes_in_past_history", evidence="既往史：糖尿病3年")
PANEL: dict[tuple[str, str, str], Judgment | str] = {
    # c1, calm: every judge takes value_error (2) and the fixed penalty (10): accuracy 28, total 88.
    **{("c1", j, "accuracy"): Judgment(dimension="accuracy", deductions=[_d("numbers", "value_error", 2, "空腹7.9")],
                                       fixed_penalties=[PENALTY]) for j in JUDGES},
    # c2, big disagreement: a 40-10=30 (3*), b 37 (4*), c 38 (5*); totals 90 / 97 / 98, spread 8,
    # star gap 2; a's diagnosis_error and time_error are singletons (2 of the 6 distinct deductions);
    # score 100 x (8/40 + 0 + 0)/3 + 10 x (2 + 0 + 0)/3 + 10 x 2/6 = 50/3.
    ("c2", "judge-a", "accuracy"): Judgment(dimension="accuracy", deductions=[
        _d("drugs", "drug_name_error", 3, XSS_EVIDENCE, "药名写错"), _d("drugs", "dose_error", 2, "500mg"),
        _d("diagnosis", "diagnosis_error", 3, "1型糖尿病"), _d("timeline", "time_error", 2, "5年前")]),
    ("c2", "judge-b", "accuracy"): Judgment(dimension="accuracy", deductions=[
        _d("drugs", "drug_name_error", 3, XSS_EVIDENCE)]),
    ("c2", "judge-c", "accuracy"): Judgment(dimension="accuracy", deductions=[_d("drugs", "dose_error", 2, "500mg")]),
    # c3: a colloquial (1) claiming 25 (derived 24: a mismatch), b term_error (2): same category only;
    # totals 99 / 98 / 100, spread 2; standardization stars 5 / 4 / 5, gap 1;
    # score 100 x (2/25)/3 + 10 x 1/3 + 10 x 0 = 6 (the mismatch is the judge's, not counted).
    ("c3", "judge-a", "standardization"): Judgment(dimension="standardization", claimed_score=25, claimed_stars=5,
                                                   deductions=[_d("terminology", "colloquial", 1, "口干")]),
    ("c3", "judge-b", "standardization"): Judgment(dimension="standardization",
                                                   deductions=[_d("terminology", "term_error", 2, "血糖高")]),
    # c4: every call failed: status failed, ranked first.
    **{("c4", j, d): "failed" for j in JUDGES for d in DIMS},
}
EXPECTED_ORDER = ["c4", "c2", "c3", "c1"]


# every quote of PANEL is in the record: grounded, so no case needs review for evidence not found
RECORD = ("主诉：口干{i}年。\n现病史：1型糖尿病，5年前起病，血糖高，空腹7.9，" + XSS_EVIDENCE + " 500mg 口干。\n"
          "既往史：糖尿病3年。")


def panel_cases() -> list[Case]:
    return [Case(id=f"c{i}", conversation=[Turn(role="patient", text=f"患者{i}：口干<script>alert({i})</script>")],
                 record=RECORD.format(i=i)) for i in range(1, 5)]


def build_panel_store(folder: Path, panel: Mapping[tuple[str, str, str], Judgment | str] | None = None,
                      cases: list[Case] | None = None) -> Path:
    """Fill ``folder/results.sqlite`` with 3 judges x the cases, as a finished run would leave it."""
    panel = PANEL if panel is None else panel
    cases = panel_cases() if cases is None else cases
    rubric = load_rubric("medical_record")
    config = EvalConfig.model_validate({"judges": [{"name": j, "model": f"openai/{j}"} for j in JUDGES]})
    planned = [PlannedCall(f"{c.id}|{j}|{d}|0", c.id, d, j, 0) for c in cases for j in JUDGES for d in DIMS]
    records = [_record(p, panel.get((p.case_id, p.judge, p.dimension))) for p in planned]
    return write_store(folder, rubric, config, cases, records, planned)


def _record(p: PlannedCall, outcome: Judgment | str | None) -> CallRecord:
    common: dict[str, Any] = dict(request_hash=p.request_hash, case_id=p.case_id, dimension=p.dimension, judge=p.judge,
                  run=p.run, model=f"openai/{p.judge}", prompt_tokens=1000, completion_tokens=200,
                  cost=0.01, latency_s=1.5)
    if outcome == "failed":
        return CallRecord(status="failed", error="timeout after 120 s", **common)
    judgment = outcome if isinstance(outcome, Judgment) else Judgment(dimension=p.dimension)
    return CallRecord(status="ok", judgment=judgment, raw=judgment.model_dump_json(), **common)


@pytest.fixture
def panel_dir(tmp_path: Path) -> Path:
    return build_panel_store(tmp_path / "run")


@pytest.fixture
def audits(panel_dir: Path) -> list[audit_mod.CaseAudit]:
    return load_run(panel_dir).audit


def _by_id(audits: list[audit_mod.CaseAudit]) -> dict[str, audit_mod.CaseAudit]:
    return {a.case_id: a for a in audits}


# --------------------------------------------------------------------------- ranking


def test_ranking_order_and_ranks(audits: list[audit_mod.CaseAudit]) -> None:
    assert [a.case_id for a in audits] == EXPECTED_ORDER
    assert [a.rank for a in audits] == [1, 2, 3, 4]


def test_score_parts_by_hand(audits: list[audit_mod.CaseAudit]) -> None:
    a = _by_id(audits)
    assert (a["c2"].spread, a["c2"].star_gaps, a["c2"].singletons, a["c2"].mismatches) == (8, 2, 2, 0)
    assert a["c2"].disagreement == pytest.approx(50 / 3)
    parts = (a["c2"].spread_share, a["c2"].star_gap_mean, a["c2"].singleton_share)
    assert parts == pytest.approx((0.2 / 3, 2 / 3, 1 / 3))
    assert (a["c3"].spread, a["c3"].star_gaps, a["c3"].singletons, a["c3"].mismatches) == (2, 1, 0, 1)
    assert a["c3"].disagreement == pytest.approx(6)
    assert (a["c1"].spread, a["c1"].disagreement, a["c1"].status) == (0, 0, "ok")
    assert a["c1"].judge_totals == {j: 88 for j in JUDGES}
    assert a["c4"].status == "failed" and a["c4"].spread is None and a["c4"].disagreement == 0


def test_disagreement_and_risk_formulas() -> None:
    assert audit_mod.disagreement_score(None, None, None) == 0
    assert audit_mod.disagreement_score(0.25, 1.5, 0.5) == 25 + 15 + 5
    assert audit_mod.risk_score(None, None, None) == 0
    assert audit_mod.risk_score(0.3, 0.5, 0.25) == pytest.approx(30 + 5 + 2.5)


def test_needs_review_reasons(audits: list[audit_mod.CaseAudit]) -> None:
    a = _by_id(audits)
    assert [(r.code, r.text) for r in a["c4"].reasons] == [("failed", "no judge answered")]
    assert [(r.code, r.text) for r in a["c2"].reasons] == [("star_gap", "judges' stars differ by 2 or more: 准确性 2★")]
    assert not a["c3"].needs_review and not a["c1"].needs_review   # c3's claimed-vs-derived mismatch is the judge's
    assert [x.needs_review for x in audits] == [True, True, False, False]


def test_failed_then_inconclusive_come_first() -> None:
    def fake(cid: str, status: str, score: float, review: bool = False, risk: float = 0) -> audit_mod.CaseAudit:
        return audit_mod.CaseAudit(case_id=cid, status=status, disagreement=score, risk=risk, needs_review=review,
                                   spread=None, star_gaps=0, singletons=0, mismatches=0, total=None,
                                   judge_totals={}, flags=[], dimensions=[], mismatch_runs=[])

    cases = [fake("ok-low", "ok", 1), fake("inc", "inconclusive", 0), fake("ok-high", "ok", 50),
             fake("fail", "failed", 0), fake("ok-tie", "ok", 1), fake("review-low", "ok", 0.5, True),
             fake("incomplete", "incomplete", 0), fake("ok-tie-risky", "ok", 1, risk=9)]
    ranked = audit_mod.rank(cases)
    assert [a.case_id for a in ranked] == ["fail", "inc", "incomplete", "review-low", "ok-high", "ok-tie-risky",
                                           "ok-low", "ok-tie"]
    assert [a.rank for a in ranked] == list(range(1, 9))
    # a panel of one ranks by risk, then by disagreement
    by_risk = audit_mod.rank([fake("a", "ok", 50, risk=1), fake("b", "ok", 0, risk=5), fake("c", "ok", 60, risk=1)],
                             "risk")
    assert [a.case_id for a in by_risk] == ["b", "c", "a"]


# --------------------------------------------------------------------------- side by side, singletons


def test_side_by_side_uses_display_names(audits: list[audit_mod.CaseAudit]) -> None:
    acc = _by_id(audits)["c2"].dimensions[0]
    assert (acc.dimension, acc.name, acc.star_gap) == ("accuracy", "准确性", 2)
    views = {v.judge: v for v in acc.judges}
    assert [(v.score, v.stars) for v in acc.judges] == [(30, 3), (37, 4), (38, 5)]
    first = views["judge-a"].deductions[0]
    assert (first.category, first.type, first.points, first.evidence) == ("药物信息准确性", "药名错误", 3, XSS_EVIDENCE)


def test_singletons_and_matches(audits: list[audit_mod.CaseAudit]) -> None:
    c2 = _by_id(audits)["c2"]
    singles = c2.singleton_deductions()
    assert sorted((s.judge, s.type_id) for s in singles) == [("judge-a", "diagnosis_error"), ("judge-a", "time_error")]
    views = {v.judge: v for v in c2.dimensions[0].judges}
    match = {d.type_id: (d.match, d.matched_by) for d in views["judge-a"].deductions}
    assert match["drug_name_error"] == ("type", ("judge-b",))
    assert match["dose_error"] == ("type", ("judge-c",))
    assert [(d.match, d.matched_by) for d in views["judge-c"].deductions] == [("type", ("judge-a",))]


def test_category_only_match(audits: list[audit_mod.CaseAudit]) -> None:
    std = _by_id(audits)["c3"].dimensions[2]
    views = {v.judge: v for v in std.judges}
    assert [(d.match, d.matched_by) for d in views["judge-a"].deductions] == [("category", ("judge-b",))]
    assert [(d.match, d.matched_by) for d in views["judge-b"].deductions] == [("category", ("judge-a",))]
    assert _by_id(audits)["c3"].singleton_deductions() == []


def test_fixed_penalties_are_listed_and_matched(audits: list[audit_mod.CaseAudit]) -> None:
    acc = _by_id(audits)["c1"].dimensions[0]
    for v in acc.judges:
        pen = [d for d in v.deductions if d.kind == "penalty"]
        expected = [("糖尿病写入既往史", 10, "fixed penalty", "type")]
        assert [(p.type, p.points, p.category, p.match) for p in pen] == expected


def test_failed_calls_show_errors(audits: list[audit_mod.CaseAudit]) -> None:
    c4 = _by_id(audits)["c4"]
    for dim in c4.dimensions:
        for v in dim.judges:
            assert (v.runs_ok, v.runs_failed, v.score, v.errors) == (0, 1, None, ("timeout after 120 s",))


def test_single_judge_has_no_peer(tmp_path: Path) -> None:
    solo = {("c1", "judge-a", "accuracy"): Judgment(dimension="accuracy", deductions=[_d("numbers", "value_error", 2)])}
    folder = build_panel_store(tmp_path / "solo", solo)
    # judge-b and judge-c fail everything on c1: judge-a's deduction has nobody to compare with
    with Store(folder / "results.sqlite") as store:
        for j in ("judge-b", "judge-c"):
            for d in DIMS:
                p = PlannedCall(f"c1|{j}|{d}|0", "c1", d, j, 0)
                store._db.execute("DELETE FROM calls WHERE request_hash = ?", (p.request_hash,))
                store.record(_record(p, "failed"))
    a = _by_id(load_run(folder).audit)["c1"]
    ded = a.dimensions[0].judges[0].deductions[0]
    assert (ded.match, ded.singleton, a.singletons) == ("no_peer", False, 0)


# --------------------------------------------------------------------------- mismatches


def test_mismatch_listing(audits: list[audit_mod.CaseAudit]) -> None:
    c3 = _by_id(audits)["c3"]
    assert [dataclasses.asdict(m) for m in c3.mismatch_runs] == [{
        "judge": "judge-a", "run": 0, "dimension": "standardization", "dimension_name": "规范性",
        "claimed_score": 25, "claimed_stars": 5, "derived_score": 24, "derived_stars": 5}]
    assert all(not a.mismatch_runs for a in audits if a.case_id != "c3")


# --------------------------------------------------------------------------- adjudication sheet


def test_export_csv_columns_bom_and_rows(audits: list[audit_mod.CaseAudit], tmp_path: Path) -> None:
    path = write_adjudication_csv(tmp_path / "sheet.csv", audits)
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    rows = list(csv.DictReader(raw.decode("utf-8-sig").splitlines()))
    assert list(rows[0]) == export_columns(JUDGES)
    assert {"human_verdict", "human_score", "human_comment", "reviewer", "deduction_id"} <= set(rows[0])
    assert all(r[c] == "" for r in rows for c in ("human_verdict", "human_score", "human_comment", "reviewer"))
    # c2: one score row per dimension (3) + accuracy's deductions: a 4 + b 1 + c 1 = 6 deduction rows
    c2 = [r for r in rows if r["case_id"] == "c2"]
    assert len(c2) == 9 and {r["rank"] for r in c2} == {"2"}
    assert [(r["dimension"], r["panel_score"], r["score: judge-a"], r["score: judge-b"]) for r in c2
            if r["row"] == "score"][:1] == [("accuracy", "35", "30", "37")]  # mean of 30, 37, 38
    a_rows = [r for r in c2 if r["judge"] == "judge-a" and r["dimension"] == "accuracy"]
    assert [r["type"] for r in a_rows] == ["药名错误", "剂量错误", "诊断错误", "时间错误"]
    assert [r["match"] for r in a_rows] == ["type", "type", "none", "none"]
    assert a_rows[0]["evidence"] == XSS_EVIDENCE and a_rows[0]["matched_by"] == "judge-b"
    assert [r["deduction_id"] for r in a_rows] == [f"c2|judge-a|accuracy|0#d{i}" for i in range(4)]
    # failed judges: "failed" in their score column, no deduction row
    c4 = [r for r in rows if r["case_id"] == "c4"]
    assert len(c4) == 3 and {r["row"] for r in c4} == {"score"}
    assert {r[f"score: {j}"] for r in c4 for j in JUDGES} == {"failed"}
    mism = [r for r in rows if r["claim_mismatch"]]
    assert {(r["case_id"], r["judge"], r["claim_mismatch"]) for r in mism} == {
        ("c3", "judge-a", "run 1: claimed 25/5★, derived 24/5★")}
    assert rows[0]["case_id"] == "c4"


# --------------------------------------------------------------------------- command line


def test_cli_audit_prints_ranking_and_exports(panel_dir: Path, tmp_path: Path) -> None:
    from consensus_eval.cli import app

    sheet = tmp_path / "adjudicate.csv"
    res = CliRunner().invoke(app, ["audit", str(panel_dir), "--top", "2", "--export", str(sheet), "--lang", "en"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.index("c4") < out.index("c2")
    assert "药名错误" in out and "诊断错误" in out and "singleton" in out
    assert XSS_EVIDENCE in out                      # printed as text, not interpreted as markup
    rows = list(csv.DictReader(sheet.read_text(encoding="utf-8-sig").splitlines()))
    assert {r["case_id"] for r in rows} == {"c4", "c2"}  # --top limits the sheet too


def test_cli_audit_shows_mismatches(panel_dir: Path) -> None:
    from consensus_eval.cli import app

    res = CliRunner().invoke(app, ["audit", str(panel_dir), "--top", "0", "--lang", "en"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "claimed 25" in res.output and "derived 24" in res.output


def test_cli_audit_without_store(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    res = CliRunner().invoke(app, ["audit", str(tmp_path)])
    assert res.exit_code == 2 and "no store here" in res.output


def test_audit_never_calls_a_judge(panel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import consensus_eval.judges as judges

    def boom(*a: Any, **k: Any) -> NoReturn:
        raise AssertionError("audit must not build or call a judge")

    monkeypatch.setattr(judges, "build_judge", boom)
    assert [a.case_id for a in load_run(panel_dir).audit] == EXPECTED_ORDER


def test_the_audit_console_in_chinese(tmp_path: Path) -> None:
    """`audit --lang zh` prints the queue, its legend, the totals and the drill-down in Chinese (the
    audit console was once English only); English stays the default."""
    from typer.testing import CliRunner

    from consensus_eval.cli import app
    from tests.conftest import ROOT

    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["score", str(ROOT / "examples" / "cases.jsonl"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    zh = CliRunner().invoke(app, ["audit", str(out), "--top", "2", "--lang", "zh"])
    assert zh.exit_code == 0, zh.output
    text = " ".join(zh.output.split())
    for words in ("个病例需要复核（共 16 例）", "风险最高的病例", "需要复核的原因", "失败和无结论的病例在前",
                  "评审质量", "需要复核：", "满分 40"):
        assert words in text, words
    en = CliRunner().invoke(app, ["audit", str(out), "--top", "2", "--lang", "en"])
    # without --lang, the rubric's language (medical_record: Chinese), one language for the whole run
    default = CliRunner().invoke(app, ["audit", str(out), "--top", "2"])
    assert default.exit_code == 0 and "个病例需要复核" in default.output and "need review" not in default.output
    assert "need review (of 16)" in " ".join(en.output.split()) and "Highest-risk cases" in en.output
