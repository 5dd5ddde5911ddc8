"""The review queue (docs/review.md): a score that neither runs nor dimensions inflate, "needs
review" with its reasons, claimed-vs-derived mismatches that no longer flag a case, the single-judge
risk ranking and its title, the drill-down (runs grouped, repeats collapsed, a repeated fixed penalty
applied once), anchors, and the console at 2,000 cases.

Runs are built in memory (:func:`make_run`: records -> derived scores -> :class:`StoredRun`), so no
store is written except for the command-line tests; every expected figure is worked out in the comments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from consensus_eval.analysis import audit as audit_mod, consensus
from consensus_eval.analysis.derived import derive_all, ground_all
from consensus_eval.analysis.results import analyze
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.execution.store import CallRecord
from consensus_eval.execution.stored_run import StoredRun
from consensus_eval.output.audit_console import print_audit
from consensus_eval.output.console import print_summary
from tests.helpers import as_stored, write_store

RUBRIC = load_rubric("medical_record")
PANEL3 = ["judge-a", "judge-b", "judge-c"]
RECORD = "主诉：口干3年。\n现病史：空腹7.9，二甲双胍500mg。\n既往史：糖尿病3年。"
PEN = PenaltyHit(id="diabetes_in_past_history", evidence="既往史：糖尿病3年")

Outcome = Judgment | list[Judgment] | str


def _d(category: str, type_: str, points: float, evidence: str = "") -> Deduction:
    return Deduction(category=category, type=type_, points=points, evidence=evidence)


def make_run(panel: Mapping[tuple[str, str, str], Outcome], judges: list[str], case_ids: list[str], *,
             rubric: Rubric = RUBRIC, runs: dict[str, int] | None = None, ground: bool = False,
             record: str = RECORD, **config: object) -> StoredRun:
    """A finished run in memory. ``panel[(case, judge, dimension)]``: one Judgment (the same in every
    run), a list (one per run) or ``"failed"``; not listed: full marks. ``runs``: runs per case (1)."""
    cfg = EvalConfig.model_validate({"judges": [{"name": j, "model": f"openai/{j}"} for j in judges], **config})
    cases = [Case(id=c, conversation=[Turn(role="patient", text="口干")], record=record) for c in case_ids]
    records = []
    for c in case_ids:
        for j in judges:
            for d in rubric.dimensions:
                for r in range((runs or {}).get(c, 1)):
                    out = panel.get((c, j, d.id), Judgment(dimension=d.id))
                    common: dict[str, Any] = dict(request_hash=f"{c}|{j}|{d.id}|{r}", case_id=c, dimension=d.id,
                                                  judge=j, run=r)
                    if out == "failed":
                        records.append(CallRecord(status="failed", error="timeout", **common))
                        continue
                    judgment = out[r] if isinstance(out, list) else out
                    assert isinstance(judgment, Judgment)
                    records.append(CallRecord(status="ok", judgment=judgment, **common))
    stored = as_stored(records)
    return StoredRun(rubric=rubric, config=cfg, cases=cases, invalid_lines=[], records=stored,
                     scores=derive_all(rubric, stored), planned=len(stored), missing={},
                     grounding=ground_all(rubric, cases, stored) if ground else {})


def audits_of(run: StoredRun) -> list[audit_mod.CaseAudit]:
    return audit_mod.audit(run, consensus.of_run(run))


def by_id(audits: list[audit_mod.CaseAudit]) -> dict[str, audit_mod.CaseAudit]:
    return {a.case_id: a for a in audits}


# --------------------------------------------------------------------------- invariance


# judge-a: 33 on accuracy (7 off: value_error 2 + drug_name_error 3 + dose_error 2), 4★, and claims 40;
# judge-b and judge-c: 40 (5★). Spread share 7/40 on accuracy, 0 elsewhere; star gap 1 on accuracy;
# a's 3 deductions are singletons (3 of 3): 100 x 0.175/3 + 10 x 1/3 + 10 x 1 = 19.1666...
DISPUTED = Judgment(dimension="accuracy", claimed_score=40, deductions=[
    _d("numbers", "value_error", 2, "空腹7.9"), _d("drugs", "drug_name_error", 3, "二甲双胍"),
    _d("drugs", "dose_error", 2, "500mg")])


def test_the_same_case_with_1_run_or_3_identical_runs_scores_the_same() -> None:
    panel = {(c, "judge-a", "accuracy"): DISPUTED for c in ("once", "thrice")}
    audits = audits_of(make_run(panel, PANEL3, ["once", "thrice"], runs={"thrice": 3}))
    once, thrice = by_id(audits)["once"], by_id(audits)["thrice"]
    assert once.disagreement == pytest.approx(100 * 0.175 / 3 + 10 / 3 + 10)
    for part in ("disagreement", "spread_share", "star_gap_mean", "singleton_share", "risk", "lost_share",
                 "penalty_share", "spread", "star_gaps", "singletons"):
        assert getattr(thrice, part) == pytest.approx(getattr(once, part)), part
    # the mismatches triple (one per run) but count in no score; the tie keeps the run's order
    assert (once.mismatches, thrice.mismatches) == (1, 3)
    assert [a.case_id for a in audits] == ["once", "thrice"]
    assert [r.code for r in once.reasons] == [r.code for r in thrice.reasons] == []


def _rubric_of(n: int) -> Rubric:
    """Seed 000's accuracy dimension, ``n`` times: dimension ``acc{i}``, its ids suffixed ``_{i}``."""
    acc = RUBRIC.dimension("accuracy").model_dump()
    dims = []
    for i in range(1, n + 1):
        cats = [{**c, "id": f"{c['id']}_{i}", "types": [{**t, "id": f"{t['id']}_{i}"} for t in c["types"]]}
                for c in acc["categories"]]
        pens = [{**p, "id": f"{p['id']}_{i}"} for p in acc["fixed_penalties"]]
        dims.append({**acc, "id": f"acc{i}", "categories": cats, "fixed_penalties": pens})
    return Rubric.model_validate({"id": f"acc{n}", "name": f"accuracy x{n}", "dimensions": dims})


def _disputed_on(i: int) -> Judgment:
    return Judgment(dimension=f"acc{i}", deductions=[
        _d(f"{d.category}_{i}", f"{d.type}_{i}", d.points, d.evidence) for d in DISPUTED.deductions])


def test_more_dimensions_of_equal_disagreement_do_not_rank_higher() -> None:
    scores = {}
    for n in (1, 3):
        panel: dict[tuple[str, str, str], Outcome] = {("c", "judge-a", f"acc{i}"): _disputed_on(i)
                                                      for i in range(1, n + 1)}
        [a] = audits_of(make_run(panel, PANEL3, ["c"], rubric=_rubric_of(n)))
        scores[n] = a
    one, three = scores[1], scores[3]
    # 100 x 7/40 + 10 x 1 + 10 x 1 on every dimension: 37.5 with one dimension or three
    assert one.disagreement == pytest.approx(37.5) and three.disagreement == pytest.approx(37.5)
    assert (three.spread_share, three.star_gap_mean, three.singleton_share) == pytest.approx((0.175, 1, 1))
    # the facts kept for display do grow (3 x the star gaps, 3 x the totals spread); the score does not
    assert (one.star_gaps, three.star_gaps, one.spread, three.spread) == (1, 3, 7, 21)


# --------------------------------------------------------------------------- needs review


def test_a_claimed_vs_derived_mismatch_does_not_flag_a_case() -> None:
    # every judge gives full marks (spread 0), judge-a claims 35 on accuracy: derived 40, a mismatch
    claim = Judgment(dimension="accuracy", claimed_score=35, claimed_stars=4)
    panel: dict[tuple[str, str, str], Outcome] = {("all-100", "judge-a", "accuracy"): claim,
                                                  ("disputed", "judge-a", "accuracy"): DISPUTED}
    run = make_run(panel, PANEL3, ["all-100", "disputed"])
    cons = {c.case_id: c for c in consensus.of_run(run)}
    assert cons["all-100"].flags == [] and not cons["all-100"].flagged
    a = by_id(audits_of(run))
    top = a["all-100"]
    assert (top.total, top.spread, top.disagreement, top.needs_review, top.reasons) == (100, 0, 0, False, [])
    assert top.mismatches == 1 and top.mismatch_runs[0].claimed_score == 35   # still shown, as the judge's
    assert a["disputed"].rank == 1 and top.rank == 2


def test_review_reasons_follow_the_config() -> None:
    # judge-a: 40 - 8 (4 value errors, the numbers cap) - 3 (drug name) - 10 (the penalty) = 19 (2★), the
    # others 40 (5★): totals spread 21 > 10, star gap 3 >= 2
    far = Judgment(dimension="accuracy", fixed_penalties=[PEN], deductions=[
        *[_d("numbers", "value_error", 2, "空腹7.9")] * 4, _d("drugs", "drug_name_error", 3, "二甲双胍")])
    run = make_run({("far", "judge-a", "accuracy"): far}, PANEL3, ["far", "calm"])
    a = by_id(audits_of(run))
    assert [(r.code, r.text) for r in a["far"].reasons] == [
        ("spread", "the judges' totals are 21 points apart (more than 10)"),
        ("star_gap", "judges' stars differ by 2 or more: 准确性 3★")]
    assert a["far"].needs_review and not a["calm"].needs_review
    # the same facts for a renderer's own words
    spread, gap = a["far"].reasons
    assert (spread.value, spread.limit, gap.subjects, gap.limit) == (21, 10, ["准确性 3★"], 2)
    loose = by_id(audits_of(make_run({("far", "judge-a", "accuracy"): far}, PANEL3, ["far", "calm"],
                                     consensus={"flag_spread": 25, "flag_star_gap": 4})))
    assert loose["far"].reasons == [] and loose["far"].disagreement == a["far"].disagreement


def test_failed_and_inconclusive_cases_need_review_first() -> None:
    panel: dict[tuple[str, str, str], Outcome] = {
        **{("dead", j, d.id): "failed" for j in PANEL3 for d in RUBRIC.dimensions},
        **{("thin", j, d.id): "failed" for j in PANEL3[1:] for d in RUBRIC.dimensions},
        ("disputed", "judge-a", "accuracy"): DISPUTED}
    audits = audits_of(make_run(panel, PANEL3, ["disputed", "thin", "dead"], consensus={"min_judges": 2}))
    assert [(a.case_id, [r.code for r in a.reasons]) for a in audits] == [
        ("dead", ["failed"]), ("thin", ["inconclusive"]), ("disputed", [])]
    assert by_id(audits)["thin"].reasons[0].text == "too few judges answered for a panel verdict (1 answered, quorum 2)"


def test_evidence_not_found_flags_a_case_unless_the_policy_says_otherwise() -> None:
    invented = Judgment(dimension="accuracy", deductions=[_d("numbers", "value_error", 2, "空腹血糖12.3mmol/L")])
    found = Judgment(dimension="accuracy", deductions=[_d("numbers", "value_error", 2, "空腹7.9")])
    panel: dict[tuple[str, str, str], Outcome] = {("made-up", j, "accuracy"): invented for j in PANEL3}
    panel.update({("quoted", j, "accuracy"): found for j in PANEL3})
    a = by_id(audits_of(make_run(panel, PANEL3, ["quoted", "made-up"], ground=True)))
    # the three judges quote the same invented text: 3 distinct deductions (one per judge), all not found
    assert [(r.code, r.text) for r in a["made-up"].reasons] == [
        ("ungrounded", "3 deductions quote evidence not found in the case")]
    assert a["made-up"].ungrounded_share == 1 and a["quoted"].ungrounded_share == 0
    assert a["made-up"].risk == pytest.approx(100 * (2 / 40) / 3 + 10 * 1)   # lost 2/40 on accuracy; no penalty
    assert not a["quoted"].needs_review and a["made-up"].rank == 1
    kept = by_id(audits_of(make_run(panel, PANEL3, ["quoted", "made-up"], ground=True, ungrounded="keep")))
    assert kept["made-up"].reasons == [] and kept["made-up"].ungrounded == 3


# --------------------------------------------------------------------------- a panel of one


SOLO = ["solo"]


def _solo_panel() -> dict[tuple[str, str, str], Outcome]:
    return {
        # 40 - 8 (numbers cap) - 10 = 22: 2★, and a fixed penalty: lost 18/40
        ("low", "solo", "accuracy"): Judgment(dimension="accuracy", fixed_penalties=[PEN],
                                              deductions=[_d("numbers", "value_error", 2, "空腹7.9")] * 4),
        # 40 - 10 = 30 (3★): a fixed penalty only
        ("penalty", "solo", "accuracy"): Judgment(dimension="accuracy", fixed_penalties=[PEN]),
        # 40 - 3 = 37 (4★): small deductions, nothing to review
        ("minor", "solo", "accuracy"): Judgment(dimension="accuracy",
                                                deductions=[_d("drugs", "drug_name_error", 3, "二甲双胍")]),
    }


def test_a_single_judge_is_ranked_by_risk_and_titled_highest_risk() -> None:
    audits = audits_of(make_run(_solo_panel(), SOLO, ["clean", "minor", "penalty", "low"]))
    queue = audit_mod.review_queue(audits, 1)
    assert (queue.mode, queue.title, queue.score_name) == ("risk", "Highest-risk cases", "risk")
    assert queue.formula == audit_mod.RISK_FORMULA and "disputed" not in queue.title.lower()
    assert [a.case_id for a in queue.cases] == ["low", "penalty", "minor", "clean"]
    a = by_id(audits)
    # risk = 100 x mean lost share + 10 x share of runs with a fixed penalty (accuracy only has penalties)
    assert a["low"].risk == pytest.approx(100 * (18 / 40) / 3 + 10)
    assert a["penalty"].risk == pytest.approx(100 * (10 / 40) / 3 + 10)
    assert a["minor"].risk == pytest.approx(100 * (3 / 40) / 3)
    assert a["clean"].risk == 0 and all(x.disagreement == 0 for x in audits)
    assert [r.code for r in a["low"].reasons] == ["low_score", "fixed_penalty"]
    assert a["low"].reasons[0].text == "one judge only, and a low score: 准确性 2★ (2★ or fewer)"
    assert a["penalty"].reasons[0].text == "one judge only applied a fixed penalty: 糖尿病写入既往史 (准确性)"
    assert [(r.subjects, r.limit) for r in a["low"].reasons] == [
        (["准确性 2★"], 2), (["糖尿病写入既往史 (准确性)"], None)]
    assert not a["minor"].needs_review and not a["clean"].needs_review
    assert (queue.headline, queue.by_reason) == ("2 cases need review", {"low_score": 1, "fixed_penalty": 2})


def test_the_title_follows_the_panel_size() -> None:
    assert audit_mod.review_queue([], 3).title == "Most disputed cases"
    assert audit_mod.review_queue([], 2).mode == "disagreement"
    assert audit_mod.review_queue([], 1).title == "Highest-risk cases"
    assert audit_mod.review_queue([], 1).headline == "no case needs review"


def test_the_only_judge_that_answered_gets_the_single_judge_signals() -> None:
    panel = {**_solo_panel(), **{("low", j, d.id): "failed" for j in PANEL3[1:] for d in RUBRIC.dimensions}}
    panel[("low", "judge-a", "accuracy")] = panel.pop(("low", "solo", "accuracy"))
    a = by_id(audits_of(make_run(panel, PANEL3, ["low", "calm"])))
    assert a["low"].n_judges_answered == 1 and a["low"].status == "ok"
    assert [r.code for r in a["low"].reasons] == ["low_score", "fixed_penalty"]


# --------------------------------------------------------------------------- drill-down


def test_drill_down_groups_runs_and_collapses_repeats() -> None:
    value, dose = _d("numbers", "value_error", 2, "空腹7.9"), _d("drugs", "dose_error", 2, "500mg")
    runs = [Judgment(dimension="accuracy", deductions=[value], fixed_penalties=[PEN, PEN]),   # 40-2-10 = 28
            Judgment(dimension="accuracy", deductions=[value], fixed_penalties=[PEN]),        # 28
            Judgment(dimension="accuracy", deductions=[value, dose, value], fixed_penalties=[PEN])]  # 40-6-10 = 24
    [a] = audits_of(make_run({("c", "judge-a", "accuracy"): runs}, PANEL3, ["c"], runs={"c": 3}))
    view = a.dimensions[0].judges[0]
    assert view.score == pytest.approx((28 + 28 + 24) / 3)     # the penalty listed twice is charged once
    groups = view.drill_down()
    assert [g.label for g in groups] == ["all 3 runs", "run 3 of 3"]
    every, third = groups
    assert [(i.deduction.type_id, i.runs_label, i.applied_once, i.times_listed) for i in every.items] == [
        ("value_error", "x3 runs", False, 1), ("diabetes_in_past_history", "x3 runs", True, 2)]
    # the same deduction listed twice in one run is charged twice: its second listing is a line of its own
    assert [(i.deduction.type_id, i.runs_label) for i in third.items] == [("dose_error", ""), ("value_error", "")]
    penalty = every.items[1]
    assert len(penalty.occurrences) == 4 and len(set(penalty.ids)) == 4 and penalty.runs == [0, 1, 2]
    assert sum(len(i.occurrences) for g in groups for i in g.items) == len(view.deductions) == 9
    assert audit_mod.run_label(0, 3) == "run 1 of 3"


def test_drill_down_of_a_single_run_has_no_run_labels() -> None:
    [a] = audits_of(make_run({("c", "judge-a", "accuracy"): DISPUTED}, PANEL3, ["c"]))
    [group] = a.dimensions[0].judges[0].drill_down()
    assert group.label == "" and [i.runs_label for i in group.items] == ["", "", ""]


def test_drill_down_labels_runs_made_in_some_runs_only() -> None:
    value = _d("numbers", "value_error", 2, "空腹7.9")
    runs = [Judgment(dimension="accuracy", deductions=[value]), Judgment(dimension="accuracy"),
            Judgment(dimension="accuracy", deductions=[value])]
    [a] = audits_of(make_run({("c", "judge-a", "accuracy"): runs}, PANEL3, ["c"], runs={"c": 3}))
    [group] = a.dimensions[0].judges[0].drill_down()
    assert (group.label, group.items[0].runs_label) == ("runs 1, 3 of 3", "x2 runs")


# --------------------------------------------------------------------------- anchors

TRICKY_IDS = ["case 1", "case-1", "case_1", "病例一", "病例二", "<script>alert(1)</script>", "a/b?c=d#e",
              "A", "a", "x" * 300, "x" * 301, "ok-id", "\"quoted\" 'id'", "case-1-" + "0" * 8, "-", "--"]


def test_anchors_are_unique_safe_and_stable() -> None:
    anchors = audit_mod.case_anchors(TRICKY_IDS)
    assert list(anchors) == TRICKY_IDS
    assert len(set(anchors.values())) == len(TRICKY_IDS)
    assert all(re.fullmatch(r"case-[A-Za-z0-9_-]+", v) and len(v) <= 70 for v in anchors.values())
    assert anchors["ok-id"] == "case-ok-id" and anchors["A"] == "case-A" != anchors["a"]
    assert audit_mod.case_anchors(TRICKY_IDS) == anchors                     # stable across rebuilds
    assert anchors["case 1"] != anchors["case-1"]
    # an id that is literally another id's anchor slug still gets an anchor of its own
    clash = audit_mod.case_anchor("病例一")[len("case-"):]
    both = audit_mod.case_anchors(["病例一", clash])
    assert both["病例一"] != both[clash] and both[clash].endswith("-2")


def test_every_audit_carries_its_anchor() -> None:
    audits = audits_of(make_run({}, PANEL3, ["病例 1", "<b>2</b>"]))
    assert {a.case_id: a.anchor for a in audits} == audit_mod.case_anchors(["病例 1", "<b>2</b>"])


# --------------------------------------------------------------------------- the console


def _big_run(n: int) -> StoredRun:
    """``n`` cases x 2 judges: judge-b takes 0 to 4 value errors off accuracy (case i: i % 5)."""
    ids = [f"big-{i:05d}" for i in range(n)]
    panel: dict[tuple[str, str, str], Outcome] = {
        (c, "judge-b", "accuracy"): Judgment(dimension="accuracy",
                                             deductions=[_d("numbers", "value_error", 2)] * (i % 5))
        for i, c in enumerate(ids)}
    return make_run(panel, ["judge-a", "judge-b"], ids)


def _printed_ids(text: str) -> set[str]:
    return set(re.findall(r"big-\d{5}", text))


def test_the_console_prints_the_top_of_the_queue_at_2000_cases(tmp_path: Path) -> None:
    res = analyze(_big_run(2000), n_boot=0)
    console = Console(record=True, width=250)
    print_summary(console, res, tmp_path)
    text = console.export_text()
    # 8 points apart on accuracy (i % 5 == 4): spread 8 <= 10, star gap 5★ vs 4★ = 1: none needs review
    assert "no case needs review (of 2000)" in text
    assert len(_printed_ids(text)) == 10
    assert "Most disputed cases, by disagreement (top 10 of 2000 cases)" in text
    assert "2000 cases: 2000 ok" in text
    assert "mean panel score over the 2000 ok case(s): 准确性 38.0/40" in text   # 40 - mean(0,1,2,3,4) x 2 / 2
    console = Console(record=True, width=250)
    print_audit(console, audit_mod.review_queue(res.audit, 2), 3)
    assert len(_printed_ids(console.export_text())) == 3


def _write_store(folder: Path, run: StoredRun) -> Path:
    return write_store(folder, run.rubric, run.config, run.cases, [r.to_record() for r in run.records])


def test_cli_audit_of_a_single_judge_says_highest_risk(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    folder = _write_store(tmp_path / "solo", make_run(_solo_panel(), SOLO, ["clean", "minor", "penalty", "low"]))
    res = CliRunner().invoke(app, ["audit", str(folder), "--top", "2", "--lang", "en"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    out = res.output
    assert "2 cases need review (of 4)" in out and "Highest-risk cases, by risk (top 2 of 4 cases)" in out
    assert "disputed" not in out.lower()
    assert "minor" not in out and "clean" not in out and "糖尿病写入既往史" in out


def test_cli_audit_top_n_and_top_0(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    folder = _write_store(tmp_path / "big", _big_run(30))
    for top, expected in (("5", 5), ("0", 30)):
        res = CliRunner().invoke(app, ["audit", str(folder), "--top", top, "--lang", "en"], env={"COLUMNS": "250"})
        assert res.exit_code == 0, res.output
        assert len(_printed_ids(res.output)) == expected, top
        assert "Most disputed cases" in res.output


def test_cli_audit_shows_judge_quality_not_a_case_flag(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    # judge-a claims 35 on accuracy where its deductions derive 40, in both cases: 2 of its 6 runs
    claim = Judgment(dimension="accuracy", claimed_score=35)
    panel: dict[tuple[str, str, str], Outcome] = {(c, "judge-a", "accuracy"): claim for c in ("c1", "c2")}
    folder = _write_store(tmp_path / "q", make_run(panel, PANEL3, ["c1", "c2"]))
    res = CliRunner().invoke(app, ["audit", str(folder), "--lang", "en"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "no case needs review (of 2)" in res.output and "Judge quality" in res.output
    row = next(line for line in res.output.splitlines() if "judge-a" in line and "claimed a score" in line)
    assert "100% [34-100%] (2 of 2 runs that claimed a score)" in row     # Wilson(2, 2) = [0.342, 1]
