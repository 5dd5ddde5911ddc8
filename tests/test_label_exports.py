"""Exports that hold everything, and reports that say whose score they show (docs/review.md):
``audit --export --reviewer NAME`` holds every case that reviewer labelled or was assigned, whatever ``--top``
is; the blind spot-check sheet carries each case's record and conversation; a blind score revised after the
reveal is kept beside it (``revised_score``) and never replaces it, whether it comes back from a sheet or the
app; an added deduction keeps its evidence and comment apart; the reports (zh and en) say whether a human score
is the adjudicator's reference, one reviewer's own or a mean, and show each revision."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.cli import app
from consensus_eval.output.report.i18n import messages
from consensus_eval.review.model import ReviewRun
from tests.helpers import stored_labels
from tests.test_report import payloads
from tests.test_review import score_run

SCORES = {"accuracy": 30, "completeness": 30, "standardization": 20}


def _cli(*args: object, code: int = 0) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert res.exit_code == code, res.output
    return res.output


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def _write(rows: list[dict[str, str]], path: Path) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return score_run(tmp_path_factory.mktemp("label_exports"))


@pytest.fixture
def run_dir(scored: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    for f in scored.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    return out


@pytest.fixture
def review(run_dir: Path) -> Iterator[ReviewRun]:
    with closing(ReviewRun.open(run_dir)) as r:
        yield r


def test_a_reviewers_sheet_holds_every_case_they_labelled_or_were_assigned_whatever_top(run_dir: Path,
                                                                                        tmp_path: Path) -> None:
    api.add_reviewer(run_dir, "王医生")
    api.add_reviewer(run_dir, "李医生")
    with closing(ReviewRun.open(run_dir)) as r:
        ranks = [a.rank for a in r.queue.cases]
        labelled = [r.case_at(k).case_id for k in ranks[-9:]]          # the 9 lowest of the queue
        for k in ranks[-9:]:
            r.apply("王医生", {"op": "scores", "case": k, "scores": SCORES})
        r.apply("李医生", {"op": "comment", "case": ranks[0], "comment": "李的"})
    api.assign(run_dir, 1, queue=True)
    assigned = set(api.assigned_cases(run_dir, "王医生"))
    assert assigned
    sheet = tmp_path / "wang.csv"
    _cli("audit", run_dir, "--top", "1", "--export", sheet, "--reviewer", "王医生")
    got = {r["case_id"] for r in _rows(sheet)}
    first = {r.case_id for r in load_queue(run_dir)[:1]}
    assert got == set(labelled) | assigned | first                     # --top limits only the rest
    filled = {r["case_id"] for r in _rows(sheet) if r["human_score"]}
    assert filled == set(labelled)                                    # every label of theirs is in it
    _cli("audit", run_dir, "--top", "1", "--export", tmp_path / "any.csv")
    assert {r["case_id"] for r in _rows(tmp_path / "any.csv")} == first   # without --reviewer: the top only


def json_text(text: str) -> str:
    """``text`` as the report's embedded JSON writes it."""
    import json

    return json.dumps(text, ensure_ascii=False)[1:-1]


def load_queue(run_dir: Path) -> list[CaseAudit]:
    return list(api.load_run(run_dir, n_boot=0).audit)


def test_the_blind_sheet_carries_the_record_and_the_conversation(run_dir: Path, tmp_path: Path) -> None:
    sample = api.spot_check(run_dir, 3, seed=5).sample
    sheet = tmp_path / "blind.csv"
    _cli("audit", run_dir, "--spot-check", "3", "--seed", "5", "--export", sheet)
    rows = _rows(sheet)
    res = api.load_run(run_dir, n_boot=0)
    cases = {c.id: c for c in res.cases}
    for r in sample:
        mine = [x for x in rows if x["case_id"] == r.case_id]
        assert mine[0]["record"] == cases[r.case_id].record.replace("\r\n", "\n")
        assert mine[0]["conversation"] == res.rubric.conversation_text(cases[r.case_id])
        assert all(not x["record"] and not x["conversation"] for x in mine[1:])       # once per case
        assert {x["panel_score"] for x in mine} == {""}                                # still blind


def test_a_blind_score_changed_on_a_sheet_with_the_judges_is_a_revision(run_dir: Path, tmp_path: Path) -> None:
    case_id = api.spot_check(run_dir, 1, seed=3).sample[0].case_id
    blind = tmp_path / "blind.csv"
    _cli("audit", run_dir, "--spot-check", "1", "--seed", "3", "--export", blind, "--reviewer", "li")
    rows = _rows(blind)
    for x in rows:
        x["human_score"] = str(SCORES[x["dimension"]])
    _cli("human", "import", _write(rows, tmp_path / "blind-filled.csv"), "--run", run_dir, "--bootstrap", "0")
    assert {lb.phase for lb in stored_labels(run_dir, "li")} == {"blind"}
    # the scores are in: li's next sheet shows the judges, and a score changed on it is a revision
    opened = tmp_path / "open.csv"
    _cli("audit", run_dir, "--top", "0", "--export", opened, "--reviewer", "li")
    rows = [x for x in _rows(opened) if x["case_id"] == case_id and x["row"] == "score"]
    assert all(x["panel_score"] for x in rows) and {x["human_score"] for x in rows} == {"30", "20"}
    acc = next(x for x in rows if x["dimension"] == "accuracy")
    acc["human_score"] = "25"
    _cli("human", "import", _write(rows, tmp_path / "open-filled.csv"), "--run", run_dir, "--bootstrap", "0")
    lb = next(x for x in stored_labels(run_dir, "li") if x.dimension == "accuracy")
    assert (lb.value, lb.phase, lb.revision) == (30.0, "blind", 25.0)
    # the sheet shows both, and reads back the same (nothing new stored)
    again = tmp_path / "again.csv"
    _cli("audit", run_dir, "--top", "0", "--export", again, "--reviewer", "li")
    acc = next(x for x in _rows(again) if x["case_id"] == case_id and x["dimension"] == "accuracy")
    assert (acc["human_score"], acc["revised_score"]) == ("30", "25")
    with closing(ReviewRun.open(run_dir)) as r:
        n = len(r.store.label_events())
    _cli("human", "import", again, "--run", run_dir, "--bootstrap", "0")
    with closing(ReviewRun.open(run_dir)) as r:
        assert len(r.store.label_events()) == n
    # validity reads the blind score
    res = api.load_run(run_dir, n_boot=0)
    cr = res.review.case(case_id) if res.review else None
    assert cr is not None and cr.scores["li"]["accuracy"] == 30 and cr.revisions == {"li": {"accuracy": 25.0}}


def test_the_reports_say_whose_score_they_show_and_each_revision(run_dir: Path) -> None:
    case_id = api.spot_check(run_dir, 1, seed=3).sample[0].case_id
    api.add_reviewer(run_dir, "王医生")
    api.add_reviewer(run_dir, "李医生")
    api.add_reviewer(run_dir, "陈主任", role="adjudicator")
    with closing(ReviewRun.open(run_dir)) as r:
        rank = next(a.rank for a in r.queue.cases if a.case_id == case_id)
        r.apply("王医生", {"op": "scores", "case": rank, "scores": SCORES})
        r.apply("李医生", {"op": "scores", "case": rank, "scores": {**SCORES, "accuracy": 22}})
        r.apply("王医生", {"op": "score", "case": rank, "dimension": "accuracy", "value": 27})   # after the reveal
        r.adjudicate("陈主任", rank, {"accuracy": 26, "completeness": 30, "standardization": 20})
        other, both = [a.rank for a in r.queue.cases if a.case_id != case_id and a.needs_review][:2]
        r.apply("王医生", {"op": "scores", "case": other, "scores": SCORES})
        for name in ("王医生", "李医生"):
            r.apply(name, {"op": "scores", "case": both, "scores": SCORES})
        r.apply("王医生", {"op": "add", "case": other, "dimension": "completeness", "type": "fh_absent",
                          "evidence": "家族史：未问", "comment": "漏了家族史"})
    added = next(lb for lb in stored_labels(run_dir, "王医生") if lb.kind == "added_deduction")
    assert (added.evidence, added.comment) == ("家族史：未问", "漏了家族史")
    res = api.load_run(run_dir, n_boot=0)
    assert res.review is not None
    cr = res.review.case(case_id)
    other_id = res.audit[other - 1].case_id
    assert cr is not None and cr.whose("accuracy") == ("reference", ["陈主任"])
    both_review = res.review.case(res.audit[both - 1].case_id)
    assert both_review is not None and both_review.whose("total") == ("mean", ["王医生", "李医生"])
    assert cr.scores["王医生"]["accuracy"] == 30 and cr.revisions == {"王医生": {"accuracy": 27.0}}
    mine = res.review.case(other_id)
    assert mine is not None and mine.whose("accuracy") == ("own", ["王医生"])
    for lang in ("zh", "en"):
        t = messages(lang)
        api.rebuild(run_dir, n_boot=0, lang=lang)
        html = (run_dir / "report.html").read_text(encoding="utf-8")
        h = payloads(html)[case_id]["h"]
        assert h["w"]["accuracy"] == ["reference", ["陈主任"]]
        assert h["rv"] == {"王医生": {"accuracy": 27.0}} and h["s"]["王医生"]["accuracy"] == 30
        assert payloads(html)[other_id]["h"]["w"]["total"] == ["own", ["王医生"]]
        for key in ("human_whose_reference", "human_whose_own", "human_whose_mean", "human_revised",
                    "human_comment_line"):
            assert json_text(t(key)) in html, key                             # the page's script has its words
        md = (run_dir / "report.md").read_text(encoding="utf-8")
        assert t("md_human_vs_panel", human="80", whose=t("human_whose_own", names="王医生"), panel="") \
            .split(" · ")[0].replace("\\", "") in md.replace("\\", "")      # the case among the details: whose it is


def test_a_sheet_cannot_accept_the_panels_score_on_a_spot_check_case(run_dir: Path, tmp_path: Path) -> None:
    """Every channel refuses it: the sheet's "accept" (采纳) on a blind case stops the import, naming the file and the
    case; nothing is stored."""
    case_id = api.spot_check(run_dir, 1, seed=3).sample[0].case_id
    sheet = _write([{"row": "score", "case_id": case_id, "dimension": "accuracy", "human_score": "采纳",
                     "panel_score": "35", "reviewer": "li"}], tmp_path / "accept.csv")
    out = _cli("human", "import", sheet, "--run", run_dir, "--bootstrap", "0", code=2)
    assert str(sheet) in out and case_id in out and "spot check" in out and "nothing was stored" in out
    assert stored_labels(run_dir) == []
