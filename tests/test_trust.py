"""Systems, random spot checks, validity against clinicians, the decision study and `compare`, end to end:
each figure is checked against an independent computation (scipy's t tests, pingouin's Holm, the
estimators on the arrays the run should have used), and the CLI against its exit codes."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from consensus_eval import load_run
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.gstudy import g_study
from consensus_eval.analysis.ppi import ppi_mean
from consensus_eval.analysis.spotcheck import allocate, band, draw
from consensus_eval.analysis.systems import leaderboard
from consensus_eval.analysis.validity import icc_a1
from consensus_eval.api import spot_check
from consensus_eval.cli import app
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.judgment import Deduction, Judgment
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.labels import LabelEvent, insert_events
from consensus_eval.execution.store import HumanLabelRecord, LabelOrigin, Store
from tests.conftest import ROOT
from tests.test_audit import DIMS, JUDGES, RECORD, build_panel_store

TWO_SYSTEMS = ROOT / "examples" / "cases_two_systems.jsonl"


def _cli(*args: object, code: int = 0) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    return res.output


def _total(c: CaseConsensus) -> float:
    assert c.total is not None
    return c.total


def _synthetic_panel(n_sources: int = 30, seed: int = 3) -> tuple[dict[tuple[str, str, str], Judgment], list[Case]]:
    """3 judges x 2 systems x n_sources conversations: system b's records lose ~3 more points on accuracy;
    judge-c is harsher by one value_error (2 points) on every case."""
    rng = random.Random(seed)
    panel: dict[tuple[str, str, str], Judgment] = {}
    cases = []
    for i in range(n_sources):
        base = rng.randint(0, 3)
        for system, extra in (("a", 0), ("b", rng.choice((1, 2, 2)))):
            cid = f"s{i:02d}-{system}"
            cases.append(Case(id=cid, conversation=[Turn(role="patient", text=f"患者{i}：口干")],
                              record=RECORD.format(i=f"{i}{system}"), system=f"scribe-{system}", source=f"c{i}"))
            for j in JUDGES:
                k = base + extra + (1 if j == "judge-c" else 0) + rng.choice((0, 0, 1))
                panel[(cid, j, "accuracy")] = Judgment(dimension="accuracy", deductions=[
                    Deduction(category="numbers", type="value_error", points=2, evidence="空腹7.9")] * min(k, 5))
                if i % 3 == 0:        # some records also leave out the family history: totals spread over bands
                    panel[(cid, j, "completeness")] = Judgment(dimension="completeness", deductions=[
                        Deduction(category="family_history", type="fh_absent", points=4, evidence="")])
    return panel, cases


@pytest.fixture
def two_systems(tmp_path: Path) -> Path:
    panel, cases = _synthetic_panel()
    return build_panel_store(tmp_path / "run", panel, cases)


# --------------------------------------------------------------------------- systems


def test_the_leaderboard_against_scipy_and_pingouin(two_systems: Path) -> None:
    pg = pytest.importorskip("pingouin")
    res = load_run(two_systems, n_boot=500)
    lb = res.leaderboard
    assert lb is not None and lb.design == "paired" and [s.system for s in lb.systems] == ["scribe-a", "scribe-b"]
    tot = {c.case_id: c.total for c in res.consensus}
    a = np.array([tot[f"s{i:02d}-a"] for i in range(30)])
    b = np.array([tot[f"s{i:02d}-b"] for i in range(30)])
    assert lb.system("scribe-a").means["total"].value == pytest.approx(a.mean())
    est = lb.system("scribe-b").means["total"]
    assert est.low is not None and est.high is not None and est.low < b.mean() < est.high
    d = lb.difference("scribe-a", "scribe-b")
    test = stats.ttest_rel(a, b)
    ci = test.confidence_interval(0.95)
    assert d.paired and d.n == 30
    assert (d.diff, d.low, d.high, d.p) == pytest.approx(((a - b).mean(), ci.low, ci.high, test.pvalue))
    assert d.verdict == "a" and d.wins == int(((a - b) > 0.5).sum()) and d.wins + d.ties + d.losses == 30
    flipped = lb.difference("scribe-b", "scribe-a")
    assert d.diff is not None
    assert flipped.diff == pytest.approx(-d.diff) and flipped.verdict == "b" and flipped.losses == d.wins
    # Holm over the pairs of a key: 2 systems, 1 pair per key; with a third system, 3 pairs
    family = [x for x in lb.differences if x.key == "accuracy"]
    assert [x.p_holm for x in family] == pytest.approx(list(pg.multicomp([x.p for x in family], method="holm")[1]))
    # the judges' alpha on each system's cases alone
    assert set(lb.alpha_by_system) == {"scribe-a", "scribe-b"}


def test_holm_and_welch_with_three_unpaired_systems() -> None:
    pg = pytest.importorskip("pingouin")
    rng = np.random.default_rng(1)
    from consensus_eval.analysis.consensus import CaseConsensus

    cases, cons = [], []
    for s, mu, n in (("x", 90, 12), ("y", 88, 15), ("z", 89.5, 9)):
        for i in range(n):
            cid = f"{s}{i}"
            total = float(np.clip(rng.normal(mu, 2), 0, 100))
            cases.append(Case(id=cid, conversation=f"医生：你好 {cid}", record=f"主诉：{cid}", system=s))
            cons.append(CaseConsensus(case_id=cid, status="ok", scores={"accuracy": total}, stars={}, total=total,
                                      star_total=None, n_judges=1, judges={}, judge_totals={}, spread=None, flags=[]))
    lb = leaderboard(cases, cons, ["accuracy"], [])
    assert lb is not None and lb.design == "unpaired"
    tot = {c.case_id: _total(c) for c in cons}
    for d in (x for x in lb.differences if x.key == "total"):
        xa = [tot[c.id] for c in cases if c.system == d.a]
        xb = [tot[c.id] for c in cases if c.system == d.b]
        w = stats.ttest_ind(xa, xb, equal_var=False)
        ci = w.confidence_interval(0.95)
        assert not d.paired and (d.diff, d.low, d.high, d.p) == pytest.approx(
            (np.mean(xa) - np.mean(xb), ci.low, ci.high, w.pvalue))
    family = [x for x in lb.differences if x.key == "total"]
    assert [x.p_holm for x in family] == pytest.approx(list(pg.multicomp([x.p for x in family], method="holm")[1]))


def test_the_system_never_reaches_the_judge(rubric: Rubric) -> None:
    plain = Case(id="1", conversation="医生：你好", record="主诉：口干")
    named = plain.model_copy(update={"system": "scribe-secret", "source": "conv-secret", "meta": {"x": "meta-secret"}})
    assert named.content == plain.content                    # what request hashes are made of
    for dim in rubric.dimensions:
        assert render(rubric, dim, named) == render(rubric, dim, plain)


def test_the_main_job_on_two_systems_prints_a_leaderboard(tmp_path: Path) -> None:
    out = _cli("score", TWO_SYSTEMS, "--out", tmp_path / "run")
    assert "系统排行榜" in out and "scribe-a" in out and "scribe-a 更好" in out
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "## 系统排行榜" in md and "| 1 | scribe-a | 16 |" in md
    en = _cli("report", tmp_path / "run", "--lang", "en")          # English beside the rubric's Chinese
    assert "wrote" in en
    md = (tmp_path / "run" / "report.en.md").read_text(encoding="utf-8")
    assert "## Systems leaderboard" in md and "scribe-a better" in md
    html = (tmp_path / "run" / "report.en.html").read_text(encoding="utf-8")
    assert 'id="leaderboard"' in html and 'id="leaderboard-differences"' in html
    board = json.loads((tmp_path / "run" / "leaderboard.json").read_text(encoding="utf-8"))
    assert [s["system"] for s in board["systems"]] == ["scribe-a", "scribe-b"] and board["design"] == "paired"


# --------------------------------------------------------------------------- spot checks


def test_allocation_and_bands() -> None:
    assert allocate([10, 30, 60], 10) == [1, 3, 6]
    assert allocate([1, 1, 98], 3) == [1, 1, 1]
    assert allocate([5, 5], 20) == [5, 5]
    assert [band(x) for x in (None, 12, 60, 69.9, 70, 89.99, 90, 100)] == [
        "no score", "<60", "60-69", "60-69", "70-79", "80-89", "90-100", "90-100"]


def test_a_stratified_draw_records_each_cases_inclusion_probability(two_systems: Path) -> None:
    res = load_run(two_systems, n_boot=0)
    sample = draw(res.cases, res.consensus, 10, seed=5, stratify="system")
    assert len(sample) == 10 and len({r.case_id for r in sample}) == 10
    assert {r.stratum for r in sample} == {"system=scribe-a", "system=scribe-b"}
    assert all(r.probability == pytest.approx(5 / 30) for r in sample)
    again = draw(res.cases, res.consensus, 10, seed=5, stratify="system")
    assert [r.case_id for r in again] == [r.case_id for r in sample]           # the same seed, the same cases
    other = draw(res.cases, res.consensus, 10, seed=6, stratify="system")
    assert [r.case_id for r in other] != [r.case_id for r in sample]


def test_spot_check_cli_stores_the_draw_and_refuses_a_redraw_after_labels(two_systems: Path, tmp_path: Path) -> None:
    out = _cli("audit", two_systems, "--spot-check", "8", "--seed", "2", "--export", tmp_path / "spot.csv")
    assert "8 case(s) drawn at random (seed 2) now" in out and "inclusion probability 0.133" in out
    with Store.open_existing(two_systems, read_only=True) as store:
        sample = store.spot_checks()
    assert len(sample) == 8 and all(r.probability == pytest.approx(8 / 60) for r in sample)
    # the blind sheet: score rows only, no panel or judge score, marked as spot-check rows
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO((tmp_path / "spot.csv").read_text(encoding="utf-8-sig"))))
    assert {r["row"] for r in rows} == {"score"} and {r["sample"] for r in rows} == {"spot_check"}
    assert {r["panel_score"] for r in rows} == {""} and all(r[f"score: {j}"] == "" for r in rows for j in JUDGES)
    # the same draw again: found, not redrawn; another one: refused without --redraw
    assert "earlier (the same draw)" in _cli("audit", two_systems, "--spot-check", "8", "--seed", "2")
    msg = _cli("audit", two_systems, "--spot-check", "8", "--seed", "3", code=2)
    assert "already drawn" in msg and "--redraw" in msg
    # once a case of it has a reviewer's score, a redraw is refused even with --redraw
    with Store.open_existing(two_systems) as store:
        store.upsert_human_label(HumanLabelRecord(case_id=sample[0].case_id, dimension="accuracy", reviewer="li",
                                                  kind="score", value=30, source="test"))
    msg = _cli("audit", two_systems, "--spot-check", "8", "--seed", "3", "--redraw", code=2)
    assert "1 of its cases already have a reviewer's score" in " ".join(msg.split())
    # once the reviewer has scored every dimension, the case's sheet rows show the judges again
    with Store.open_existing(two_systems) as store:
        for d in DIMS[1:]:
            store.upsert_human_label(HumanLabelRecord(case_id=sample[0].case_id, dimension=d, reviewer="li",
                                                      kind="score", value=20, source="test"))
    _cli("audit", two_systems, "--spot-check", "8", "--seed", "2", "--export", tmp_path / "li.csv", "--reviewer", "li")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "li.csv").read_text(encoding="utf-8-sig"))))
    seen = [r for r in rows if r["case_id"] == sample[0].case_id]
    assert any(r["row"] == "deduction" for r in seen) and all(r["panel_score"] for r in seen if r["row"] == "score")
    assert all(r["panel_score"] == "" for r in rows if r["case_id"] == sample[1].case_id)


# --------------------------------------------------------------------------- validity on the spot check


def _label(store: Store, case_id: str, reviewer: str, scores: Mapping[str, float | None],
           origin: LabelOrigin = "own") -> None:
    for d, v in scores.items():
        store.upsert_human_label(HumanLabelRecord(case_id=case_id, dimension=d, reviewer=reviewer, kind="score",
                                                  value=v, origin=origin, source="test"))


def test_validity_is_measured_on_the_spot_check_only_against_the_estimators(two_systems: Path) -> None:
    done = spot_check(two_systems, 24, seed=1, stratify="system")
    sample = [r.case_id for r in done.sample]
    res = load_run(two_systems, n_boot=0)
    by_id = {c.case_id: c for c in res.consensus}
    rng = np.random.default_rng(0)
    truth = {cid: _total(by_id[cid]) - 2 + rng.normal(0, 1.5) for cid in sample}     # clinicians: 2 points harsher
    queue_case = next(c.case_id for c in res.consensus if c.case_id not in sample)
    with Store.open_existing(two_systems) as store:
        for cid in sample[:-2]:
            _label(store, cid, "li", {"accuracy": truth[cid] - 60, "completeness": 35, "standardization": 25})
        for cid in sample[:10]:                                      # a second clinician on 10 of them
            _label(store, cid, "wang", {"accuracy": truth[cid] - 60 + 1, "completeness": 35, "standardization": 25})
        # a queue case is not part of the random sample
        _label(store, queue_case, "li", {"accuracy": 0, "completeness": 0, "standardization": 0})
    # an accepted score is no clinician's judgement: one on a spot-check case, as a store from before schema 8 may
    # hold (the store refuses one now: the case is blind), written as the migration writes the old labels
    with closing(sqlite3.connect(two_systems / "results.sqlite")) as con, con:
        insert_events(con, [LabelEvent(reviewer="li", case_id=sample[-1], dimension=d, kind="score", op="set",
                                       value=by_id[sample[-1]].scores[d], origin="accepted", source="test", at=1.0)
                            for d in DIMS])
    res = load_run(two_systems, n_boot=0)
    v = res.reliability.validity
    assert v is not None and v.sample == "spot_check" and v.n_drawn == 24 and v.n_labelled == 22
    assert v.n_accepted_only == 1 and not v.weighted          # 12 of 30 per system: equal probabilities
    used = sample[:-2]
    human = {cid: (truth[cid] - 60 + 35 + 25 + (truth[cid] - 60 + 1 + 35 + 25 if cid in sample[:10] else
                                                  truth[cid] - 60 + 35 + 25)) / 2 for cid in used}
    panel = [_total(by_id[cid]) for cid in used]
    expect = icc_a1(np.column_stack([panel, [human[c] for c in used]]))
    got = v.scores["total"].raters["panel"]
    assert got.n == 22 and got.icc.value == pytest.approx(expect.value)
    assert got.bias == pytest.approx(np.mean(np.array(panel) - [human[c] for c in used]))
    assert got.bias is not None
    assert got.bias > 1                                       # the panel is kinder than the clinicians
    ceiling = v.scores["total"].ceiling
    pairs = [[truth[c] - 60 + 60, truth[c] - 60 + 61] for c in sample[:10]]
    assert ceiling is not None and ceiling.n == 10 and ceiling.value == pytest.approx(icc_a1(pairs).value)
    # the judges on the ceiling's basis: each against the first clinician, on the cases two scored
    first = [p[0] for p in pairs]
    for name in (*JUDGES, "panel"):
        mine = [(_total(by_id[c]) if name == "panel" else by_id[c].judge_totals[name]) for c in sample[:10]]
        want_icc = icc_a1(np.column_stack([mine, first]))
        assert v.scores["total"].same_basis[name].value == pytest.approx(want_icc.value)
    # PPI per system: the panel on all 30 cases of the system, corrected by its spot-checked ones
    ppi = next(p for p in v.ppi if p.group == "scribe-a" and p.key == "total")
    ids_a = [c.id for c in res.cases if c.system == "scribe-a"]
    lab = [c for c in used if c in ids_a]
    want = ppi_mean([human[c] for c in lab], [_total(by_id[c]) for c in lab], [_total(by_id[c]) for c in ids_a],
                    unlabelled_includes_labelled=True)
    assert (ppi.ppi.estimate, ppi.ppi.low, ppi.ppi.high) == pytest.approx((want.estimate, want.low, want.high))
    assert ppi.panel.N == 30 and ppi.human.n == len(lab)
    assert any(x.a == "scribe-a" and x.b == "scribe-b" and x.key == "total" for x in v.ppi_differences)
    # the report says it, in both languages
    md = (_rebuild_md(two_systems, "en"))
    assert "## Validity against clinicians (random spot check)" in md and "clinician vs clinician (ceiling)" in md
    assert "prediction\\-powered" in md.lower() or "prediction-powered" in md.lower()
    zh = _rebuild_md(two_systems, "zh")
    assert "## 评审对照临床医生的效度（随机抽查）" in zh and "临床医生之间（上限）" in zh
    # calibrated readings: only when asked, beside the raw figures
    _cli("reliability", two_systems, "--bootstrap", "0")
    assert json.loads((two_systems / "reliability.json").read_text())["validity"]["calibrated"] == {}
    out = _cli("reliability", two_systems, "--calibrated", "--bootstrap", "0", "--lang", "en")
    assert "MAE, calibrated (cross-validated)" in out
    cal = json.loads((two_systems / "reliability.json").read_text())["validity"]["calibrated"]
    assert set(cal) == {*JUDGES, "panel"} and cal["panel"]["n"] == 22 and cal["panel"]["mae_cv"] is not None


def _rebuild_md(run: Path, lang: str) -> str:
    _cli("report", run, "--lang", lang)
    return (run / ("report.md" if lang == "zh" else f"report.{lang}.md")).read_text(encoding="utf-8")


def test_a_band_stratified_sample_weights_bias_and_mae(two_systems: Path) -> None:
    done = spot_check(two_systems, 7, seed=4, stratify="band")
    probs = {r.case_id: r.probability for r in done.sample}
    assert len(set(probs.values())) > 1
    res = load_run(two_systems, n_boot=0)
    by_id = {c.case_id: c for c in res.consensus}
    with Store.open_existing(two_systems) as store:
        for cid in probs:
            _label(store, cid, "li", {"accuracy": 30, "completeness": 35, "standardization": 25})
    v = load_run(two_systems, n_boot=0).reliability.validity
    assert v is not None and v.weighted and "ppi_unequal_probabilities" in v.notes
    diffs = np.array([_total(by_id[c]) - 90 for c in probs])
    w = np.array([1 / probs[c] for c in probs])
    assert v.scores["total"].raters["panel"].bias == pytest.approx(float((w * diffs).sum() / w.sum()))


def test_without_a_spot_check_there_is_no_validity_figure_and_the_report_says_how_to_get_one(two_systems: Path) -> None:
    with Store.open_existing(two_systems) as store:
        _label(store, "s00-a", "li", {"accuracy": 30, "completeness": 35, "standardization": 25})
    res = load_run(two_systems, n_boot=0)
    assert res.reliability.validity is None
    md = _rebuild_md(two_systems, "en")
    assert "No random spot check drawn" in md and "--spot-check 30" in md


# --------------------------------------------------------------------------- decision study


def test_the_decision_study_uses_the_runs_judges_and_cases(two_systems: Path) -> None:
    res = load_run(two_systems, n_boot=0)
    study = res.reliability.decision["total"]
    x = np.array([[[c.judge_totals[j]] for j in JUDGES] for c in res.consensus])
    assert not study.components.runs_separated and study.n_cases == 60
    # one run per judge: the p x j components, i.e. the phi of one judge is ICC(A,1) of the judges' totals
    one = next(r for r in study.designs if r.judges == 1)
    assert one.phi == pytest.approx(icc_a1(x[:, :, 0]).value, abs=1e-9)
    assert [r.runs for r in study.designs] == [1] * 5
    with pytest.raises(ValueError):
        g_study(x)                                            # the p x (r:j) design needs 2 runs


# --------------------------------------------------------------------------- compare


def test_compare_two_runs_and_the_ci_gate(tmp_path: Path) -> None:
    cases = [json.loads(x) for x in TWO_SYSTEMS.read_text(encoding="utf-8").splitlines()]
    a_cases = [c for c in cases if c["system"] == "scribe-a"]
    b_cases = [{**c, "id": c["source"], "system": "scribe-b"} for c in cases if c["system"] == "scribe-b"]
    for name, rows in (("a", a_cases), ("b", b_cases)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in rows),
                                                encoding="utf-8")
        _cli("score", tmp_path / f"{name}.jsonl", "--out", tmp_path / name)
    out = _cli("compare", tmp_path / "a", tmp_path / "b", "--lang", "en")
    assert "paired by case id, 16 pairs" in out
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-if", "total < -1.0"])
    assert res.exit_code == 5, res.output
    assert "fail-if: total < -1.0: the change of total" in " ".join(res.output.split())
    # no regression the other way round: B is the baseline, A the change
    out = _cli("compare", tmp_path / "b", tmp_path / "a", "--fail-if", "total < -1.0")
    assert "no condition holds" in out
    # the upper bound: fails only when the interval is sure of the regression
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--fail-if", "total.high < 0"])
    assert res.exit_code == 5
    bad = _cli("compare", tmp_path / "a", tmp_path / "b", "--fail-if", "totl < 1", code=2)
    assert "no key 'totl'" in bad
    data = json.loads(_cli("compare", tmp_path / "a", tmp_path / "b", "--json"))
    assert data["n_pairs"] == 16 and data["keys"]["total"]["diff"] < 0 and data["categories"]
    assert {c["key"] for c in data["categories"]} & {"completeness.family_history", "accuracy.numbers"}


def test_compare_one_run_split_by_system(tmp_path: Path) -> None:
    _cli("score", TWO_SYSTEMS, "--out", tmp_path / "run")
    data = json.loads(_cli("compare", tmp_path / "run", "--json"))
    assert data["mode"] == "systems" and data["a"] == "scribe-a" and data["n_pairs"] == 16
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "run"), "--systems", "scribe-a", "scribe-b",
                                   "--fail-if", "total < -1"])
    assert res.exit_code == 5
    msg = _cli("compare", tmp_path / "run", "--systems", "scribe-a", "nope", code=2)
    assert "no system 'nope'" in msg


#: ASCII words a Chinese report may show: statistics' and methods' names, formats, the tool, and "token"
REPORT_ASCII = {"Bonett", "CI", "Holm", "ICC", "Jaccard", "Krippendorff", "MAE", "PPI", "Pearson", "Spearman",
                "Welch", "Wilson", "kappa", "macro-F", "JSON", "HTML", "JavaScript", "UTC", "consensus-eval",
                "token", "json", "md", "sqlite", "metrics", "report", "results", "tcm", "text2dt", "txt",
                "calibration"}


def test_the_chinese_report_shows_no_english_word(two_systems: Path) -> None:
    """report.html in zh, with every trust section: each ASCII word is a statistic's name, a format, an id
    (rubric, dimension, category, judge, system, reviewer, folder) or a file name."""
    import re

    from tests.test_review import _VisibleText

    spot_check(two_systems, 12, seed=1)
    with Store.open_existing(two_systems) as store:
        for i, r in enumerate(store.spot_checks()):
            for reviewer in ("li", "wang"):
                _label(store, r.case_id, reviewer, {"accuracy": 28 + i % 4 + (reviewer == "wang"), "completeness": 35,
                                                    "standardization": 25})
    res = load_run(two_systems, n_boot=50)
    rubric = res.rubric
    deducting = rubric.dimensions_of(Deductions)
    ids = {rubric.id, *(d.id for d in rubric.dimensions), *(c.id for d in deducting for c in d.categories),
           *res.judges, "scribe-a", "scribe-b", "li", "wang", *re.findall(r"[A-Za-z][A-Za-z_\-]+", str(two_systems))}

    from consensus_eval import api
    from consensus_eval.output.report import write_reports

    # with a calibration beside the run: its section too (type ids are ids)
    rep = api.calibrate(ROOT / "configs" / "default.yaml", out=two_systems.parent / "cal", sample=40, seed=2)
    ids |= {t.id for d in deducting for c in d.categories for t in c.types} | set(rep.unplantable)
    ids |= {p for d in deducting for p in d.penalties_by_id} | set(rep.judges)
    (two_systems / "calibration.json").write_bytes((two_systems.parent / "cal" / "calibration.json").read_bytes())
    try:
        _, html_path = write_reports(res, two_systems, "zh")
    finally:
        (two_systems / "calibration.json").unlink()
    seen = _VisibleText()
    seen.feed(html_path.read_text(encoding="utf-8"))
    text = " ".join(seen.out)
    assert "校准：植入错误的检出" in text
    words = set(re.findall(r"[A-Za-z][A-Za-z_\-]+", text))
    assert words - REPORT_ASCII - ids == set()


def test_detection_on_real_records_beside_the_planted_errors(two_systems: Path) -> None:
    """Recall and precision on the run's own records come from the clinicians' verdicts and
    additions on the random spot check (cases as units), and the calibration section sets them beside the
    planted-error figures."""
    from consensus_eval import api
    from consensus_eval.output.report import write_reports

    done = spot_check(two_systems, 12, seed=1)
    sample = [r.case_id for r in done.sample]
    res = load_run(two_systems, n_boot=0)
    took: dict[tuple[str, str], bool] = {}
    with Store.open_existing(two_systems) as store:
        for i, cid in enumerate(sample):
            _label(store, cid, "li", {"accuracy": 30, "completeness": 35, "standardization": 25})
            acc = [r for r in res.records if r.case_id == cid and r.dimension == "accuracy" and r.run == 0
                   and r.judgment is not None]
            for r in acc:
                assert r.judgment is not None
                took[(cid, r.judge)] = bool(r.judgment.deductions)
            first = next((r for r in acc if r.judgment is not None and r.judgment.deductions), None)
            if first is not None:       # deserved on the first half of the sample, not on the second
                store.upsert_human_label(HumanLabelRecord(
                    case_id=cid, dimension="accuracy", deduction_id=f"{first.request_hash}#d0", reviewer="li",
                    kind="verdict", value="agree" if i < 6 else "disagree", source="test"))
            if i % 4 == 0:              # a miss every judge made: an added deduction
                store.upsert_human_label(HumanLabelRecord(
                    case_id=cid, dimension="standardization", deduction_id="li-1", reviewer="li",
                    kind="added_deduction", value="colloquial", points=1, evidence="x", source="test"))
    res = load_run(two_systems, n_boot=0)
    assert res.reliability.validity is not None
    dv = res.reliability.validity.deductions
    assert dv is not None
    for j in JUDGES:
        voted = [(cid, i < 6) for i, cid in enumerate(sample) if any(took.get((cid, jj)) for jj in JUDGES)]
        mine = [(cid, ref) for cid, ref in voted if took.get((cid, j))]
        deserved = [cid for cid, ref in voted if ref] + [cid for i, cid in enumerate(sample) if i % 4 == 0]
        assert (dv.precision[j].k, dv.precision[j].n) == (sum(ref for _, ref in mine), len(mine))
        upheld = sum(bool(took.get((c, j))) for c, ref in voted if ref)   # the added ones: no judge took them
        assert (dv.recall[j].k, dv.recall[j].n) == (upheld, len(deserved))
        assert dv.recall[j].clusters == len(set(deserved)) and dv.recall[j].method == "cluster"
    rep = api.calibrate(ROOT / "configs" / "default.yaml", out=two_systems.parent / "cal", sample=20, seed=2)
    (two_systems / "calibration.json").write_bytes((two_systems.parent / "cal" / "calibration.json").read_bytes())
    md_path, _ = write_reports(load_run(two_systems, n_boot=0), two_systems, "en")
    md = md_path.read_text(encoding="utf-8")
    assert "recall on your records (spot check)" in md and "deductions marked wrong (all reviews)" in md
    assert rep.judges  # the calibration's judges head the rows (here the rules judge: no verdicts of its own)
