"""Human labels (docs/review.md, 'Human review'): the adjudication sheet out and back in whatever Excel did to it,
kept in the store (schema 3) across every rebuild, and what the labels say about the judges.

The hand-built panel (tests/test_audit.py: 3 judges x 4 cases with known deductions) gives figures
computed by hand; the 16 examples scored by the offline rules judge give the CLI loop.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from typer.testing import CliRunner

from consensus_eval import InputError, load_run
from consensus_eval.analysis.derived import read_run
from consensus_eval.analysis.human import parse_verdict, read_labels
from consensus_eval.analysis.intervals import wilson
from consensus_eval.api import import_human
from consensus_eval.cli import app
from consensus_eval.execution.store import HumanLabelRecord, Store
from consensus_eval.output.files import write_adjudication_csv
from tests.test_audit import build_panel_store

EXAMPLES = Path(__file__).parent.parent / "examples" / "cases.jsonl"


def _cli(*args: str | Path) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.output


def _cli_error(*args: str | Path) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    return " ".join(res.output.split())


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 16 examples scored by the rules judge, with ids 001..016 (Excel turns them into 1..16)."""
    d = tmp_path_factory.mktemp("scored")
    lines = []
    for i, line in enumerate(EXAMPLES.read_text(encoding="utf-8").splitlines(), 1):
        case = json.loads(line)
        case["id"] = f"{i:03d}"
        lines.append(json.dumps(case, ensure_ascii=False))
    (d / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _cli("score", d / "cases.jsonl", "--out", d / "run")
    return d


@pytest.fixture
def run(scored: Path, tmp_path: Path) -> Path:
    shutil.copytree(scored / "run", tmp_path / "run")
    shutil.copy(scored / "cases.jsonl", tmp_path / "cases.jsonl")
    return tmp_path / "run"


def _export(run: Path, sheet: Path) -> list[dict[str, str]]:
    _cli("audit", run, "--top", "4", "--export", sheet)
    raw = sheet.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


def _fill(rows: list[dict[str, str]], reviewer: str = "", verdicts: tuple[str, ...] = ("同意", "Disagree", "不确定"),
          bump: float = 0.0) -> tuple[list[dict[str, str]], dict[tuple[str, str], float], dict[str, str]]:
    """Fill every score row (panel score - 1 + bump) and every deduction row (verdicts in turn)."""
    scores: dict[tuple[str, str], float] = {}
    given: dict[str, str] = {}
    k = 0
    for r in rows:
        r["reviewer"] = reviewer
        if r["row"] == "score":
            value = max(0.0, float(r["panel_score"]) - 1 + bump)
            r["human_score"] = f"{value:g}"
            scores[(r["case_id"], r["dimension"])] = value
        else:
            word = verdicts[k % len(verdicts)]
            k += 1
            r["human_verdict"] = word
            r["human_comment"] = f"看过 {k}"
            given[r["deduction_id"]] = str(parse_verdict(word))
    return rows, scores, given


def _write(rows: list[dict[str, str]], path: Path, *, encoding: str = "utf-8-sig", delimiter: str = ",",
           newline: str = "\r\n", excel_ids: bool = False, decimal_comma: bool = False,
           trailing: bool = False) -> Path:
    """The sheet as Excel would save it: encoding, delimiter, CRLF, ids as numbers, empty trailing
    rows and columns."""
    buf = io.StringIO()
    header = list(rows[0]) + ([""] * 2 if trailing else [])
    w = csv.writer(buf, delimiter=delimiter, lineterminator=newline)
    w.writerow(header)
    for r in rows:
        cells = []
        for key in rows[0]:
            v = r[key]
            if excel_ids and key == "case_id":
                v = str(int(v))
            if decimal_comma and key in ("human_score", "panel_score") and v:
                v = v.replace(".", ",")
            cells.append(v)
        w.writerow(cells + ([""] * 2 if trailing else []))
    if trailing:
        w.writerow([""] * len(header))
        w.writerow([""] * len(header))
    path.write_bytes(buf.getvalue().encode(encoding))
    return path


def _stored(run: Path) -> list[HumanLabelRecord]:
    with Store.open_existing(run, read_only=True) as store:
        return store.human_labels()


# --------------------------------------------------------------------------- the round trip


@pytest.mark.parametrize("variant", ["as-exported", "gbk", "gb18030-semicolon-decimal-comma", "excel-ids-trailing",
                                     "utf16-tab-sorted"])
def test_the_sheet_round_trips_whatever_excel_did(run: Path, tmp_path: Path, variant: str) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    assert {r["row"] for r in rows} == {"score", "deduction"}
    assert all(r["human_score"] == r["human_verdict"] == r["human_comment"] == "" for r in rows)
    score_rows = [r for r in rows if r["row"] == "score"]
    assert all(r["panel_score"] and r["score: rules"] for r in score_rows)   # the panel and each judge, beside
    assert len(score_rows) == 4 * 3                                            # --top 4 cases x 3 dimensions
    words = ("同意", "Disagree", "不确定") if variant != "gbk" else ("AGREE", "不同意", "Unsure")
    rows, scores, verdicts = _fill(rows, reviewer="" if variant != "gbk" else "李医生", verdicts=words)
    options: dict[str, dict[str, Any]] = {
        "as-exported": {},
        "gbk": {"encoding": "gbk"},
        "gb18030-semicolon-decimal-comma": {"encoding": "gb18030", "delimiter": ";", "decimal_comma": True},
        "excel-ids-trailing": {"excel_ids": True, "trailing": True},
        "utf16-tab-sorted": {"encoding": "utf-16", "delimiter": "\t"},   # Excel's "Unicode text"
    }
    kwargs = options[variant]
    if variant == "utf16-tab-sorted":                      # the reviewer sorted the rows: each row stands alone
        rows = sorted(rows, key=lambda r: (r["row"], r["dimension"], r["case_id"]), reverse=True)
    sheet = _write(rows, tmp_path / "filled.csv", **kwargs)
    if variant == "excel-ids-trailing":
        assert ",1," in sheet.read_text(encoding="utf-8-sig") or ",4," in sheet.read_text(encoding="utf-8-sig")
    out = _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    reviewer = "李医生" if variant == "gbk" else "human"
    assert f"for reviewer {reviewer}" in out
    labels = _stored(run)
    assert {lb.reviewer for lb in labels} == {reviewer}
    assert {(lb.case_id, lb.dimension): lb.value for lb in labels if lb.kind == "score"} == pytest.approx(scores)
    assert {lb.deduction_id: lb.value for lb in labels if lb.kind == "verdict"} == verdicts
    assert all(lb.comment and lb.comment.startswith("看过") for lb in labels if lb.kind == "verdict")
    assert {lb.source for lb in labels} == {str(sheet.resolve())}
    # reliability.json and the reports are rebuilt with the human section
    rel = json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    assert rel["human"]["n_cases"] == 4 and rel["human"]["reviewers"] == [reviewer]
    assert rel["human"]["small_sample"] is True and "fewer than 30" in rel["human"]["warning"]
    # the panel scored every dimension 1 point above the human: bias +1 on each, +3 on the total
    assert rel["human"]["panel"]["accuracy"]["bias"] == pytest.approx(1.0)
    assert rel["human"]["panel"]["total"]["bias"] == pytest.approx(3.0)


def test_a_reimport_replaces_never_duplicates(run: Path, tmp_path: Path) -> None:
    rows, _, _ = _fill(_export(run, tmp_path / "sheet.csv"), reviewer="li")
    sheet = _write(rows, tmp_path / "filled.csv")
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    first = _stored(run)
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    again = _stored(run)
    assert len(again) == len(first) and sorted(lb.key for lb in again) == sorted(lb.key for lb in first)
    # the reviewer changes one score and clears one verdict: the store follows the sheet
    i = next(i for i, r in enumerate(rows) if r["row"] == "score")
    j = next(i for i, r in enumerate(rows) if r["row"] == "deduction")
    rows[i]["human_score"] = "0"
    cleared = rows[j]["deduction_id"]
    rows[j]["human_verdict"] = rows[j]["human_comment"] = ""
    _write(rows, sheet)
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    now = _stored(run)
    assert len(now) == len(first) - 1 and cleared not in {lb.deduction_id for lb in now}
    assert [lb.value for lb in now if lb.kind == "score" and lb.case_id == rows[i]["case_id"]
            and lb.dimension == rows[i]["dimension"]] == [0.0]


def test_two_reviewers_and_their_alpha_against_the_krippendorff_package(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    li, li_scores, _ = _fill([dict(r) for r in rows], reviewer="li", verdicts=("agree", "disagree"))
    wang, wang_scores, _ = _fill([dict(r) for r in rows], reviewer="wang", verdicts=("agree", "agree", "unsure"))
    for n, r in enumerate(r for r in wang if r["row"] == "score"):   # wang differs on some dimensions
        if n % 3 == 0:
            r["human_score"] = str(float(r["human_score"]) - n % 5)
            wang_scores[(r["case_id"], r["dimension"])] = float(r["human_score"])
    _cli("human", "import", _write(li, tmp_path / "li.csv"), "--run", run, "--bootstrap", "0")
    _cli("report", run, "--human", _write(wang, tmp_path / "wang.csv", encoding="gbk"))
    labels = _stored(run)
    assert {lb.reviewer for lb in labels} == {"li", "wang"}
    results = load_run(run, n_boot=0)
    h = results.reliability.human
    assert h is not None and h.reviewers == ["li", "wang"]
    for dim in ("accuracy", "completeness", "standardization"):
        keys = sorted(k for k in li_scores if k[1] == dim)
        data = np.array([[li_scores[k] for k in keys], [wang_scores[k] for k in keys]])
        assert h.inter_reviewer[dim].value == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    # per case, each reviewer's score and their mean beside the panel's
    review = results.review
    assert review is not None
    case_id, dim = next(iter(li_scores))
    case = review.case(case_id)
    assert case is not None
    assert case.scores["li"][dim] == li_scores[(case_id, dim)]
    assert case.scores["wang"][dim] == wang_scores[(case_id, dim)]
    assert case.human[dim] == pytest.approx((li_scores[(case_id, dim)] + wang_scores[(case_id, dim)]) / 2)
    assert case.panel[dim] == next(c.scores[dim] for c in results.consensus if c.case_id == case_id)
    # verdicts on deductions both judged, agree/disagree only: nominal alpha against the package
    li_v = {lb.deduction_id: lb.value for lb in labels if lb.kind == "verdict" and lb.reviewer == "li"}
    wang_v = {lb.deduction_id: lb.value for lb in labels if lb.kind == "verdict" and lb.reviewer == "wang"}
    shared = [d for d in li_v if d in wang_v and "unsure" not in (li_v[d], wang_v[d])]
    assert len(shared) >= 2 and h.inter_reviewer_verdicts is not None and h.inter_reviewer_verdicts.value is not None
    code = {"agree": 1, "disagree": 0}
    data = np.array([[code[str(li_v[d])] for d in shared], [code[str(wang_v[d])] for d in shared]], float)
    assert h.inter_reviewer_verdicts.value == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    # the report shows the human section
    assert '<section id="human">' in (run / "report.html").read_text(encoding="utf-8")


def test_labels_survive_score_resume_and_report(run: Path, tmp_path: Path) -> None:
    rows, _, _ = _fill(_export(run, tmp_path / "sheet.csv"), reviewer="li")
    _cli("human", "import", _write(rows, tmp_path / "filled.csv"), "--run", run, "--bootstrap", "0")
    before = sorted(lb.model_dump_json() for lb in _stored(run))
    assert before
    out = _cli("score", run.parent / "cases.jsonl", "--out", run, "--lang", "en")  # a no-op resume rebuilds all
    assert "48 resumed" in out
    assert sorted(lb.model_dump_json() for lb in _stored(run)) == before
    rel = json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    assert rel["human"]["n_cases"] == 4                                  # rebuilt from the store, not lost
    _cli("report", run)
    _cli("reliability", run, "--bootstrap", "0")
    assert sorted(lb.model_dump_json() for lb in _stored(run)) == before
    assert '<section id="human">' in (run / "report.html").read_text(encoding="utf-8")
    # a sheet exported for that reviewer comes back filled in, and reads back to the same labels
    filled = tmp_path / "again.csv"
    _cli("audit", run, "--top", "4", "--export", filled, "--reviewer", "li")
    again = list(csv.DictReader(io.StringIO(filled.read_text(encoding="utf-8-sig"))))
    theirs = {r["case_id"] for r in rows}           # then --top's 4 cases more, of those li has not labelled
    assert len({r["case_id"] for r in again} - theirs) == 4 and not any(
        r["human_score"] or r["human_verdict"] for r in again if r["case_id"] not in theirs)
    again = [r for r in again if r["case_id"] in theirs]
    assert [r["human_score"] for r in again] == [r["human_score"] for r in rows]
    assert [r["human_verdict"] for r in again if r["row"] == "deduction"] == [
        {"同意": "agree", "Disagree": "disagree", "不确定": "unsure"}[r["human_verdict"]]
        for r in rows if r["row"] == "deduction"]


def test_the_wide_human_file_is_stored_the_same_way(run: Path, tmp_path: Path) -> None:
    wide = tmp_path / "h.csv"
    wide.write_text("case_id,accuracy,completeness,standardization,categories\n001,38,33,24,\n002,30,35,20,数值准确性\n",
                    encoding="gbk")
    out = _cli("audit", run, "--human", wide, "--reviewer", "zhang")
    assert "for reviewer zhang: 2 categories, 6 score" in " ".join(out.split())
    _cli("reliability", run, "--human", wide, "--bootstrap", "0", "--reviewer", "zhang")   # again: replaced
    labels = _stored(run)
    assert sorted((lb.case_id, lb.dimension, lb.value) for lb in labels if lb.kind == "score") == [
        ("001", "accuracy", 38), ("001", "completeness", 33), ("001", "standardization", 24),
        ("002", "accuracy", 30), ("002", "completeness", 35), ("002", "standardization", 20)]
    # an empty categories cell: the reviewer would deduct in no category (stored, as an empty list)
    assert sorted((lb.value for lb in labels if lb.kind == "categories"), key=str) == ["", "numbers"]
    assert {lb.reviewer for lb in labels} == {"zhang"}
    _cli("report", run)
    h = load_run(run, n_boot=0).reliability.human
    assert h is not None and h.n_cases == 2 and h.category_jaccard_cases == 2


# --------------------------------------------------------------------------- bad sheets


@pytest.mark.parametrize(("edit", "expect"), [
    (lambda r: r.update(case_id="999"), ["column case_id (C)", "'999' is not a case of this run"]),
    (lambda r: r.update(human_score="41"), ["column human_score", "41 is outside 0..40"]),
    (lambda r: r.update(human_score="abc"), ["column human_score", "not a number: 'abc'"]),
    (lambda r: r.update(human_verdict="agree"), ["column human_verdict", "on a score row"]),
])
def test_a_bad_score_row_names_file_line_and_column(run: Path, tmp_path: Path, edit: Callable[[dict[str, str]], None],
                                                    expect: list[str]) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    assert rows[0]["row"] == "score" and rows[0]["dimension"] == "accuracy"
    rows[0]["human_score"] = "30"
    edit(rows[0])
    sheet = _write(rows, tmp_path / "bad.csv")
    msg = _cli_error("human", "import", sheet, "--run", run)
    for part in [f"{sheet}:2:", *expect]:
        assert part in msg, msg
    assert _stored(run) == []                                  # nothing stored


@pytest.mark.parametrize(("edit", "expect"), [
    (lambda r: r.update(human_verdict="maybe"), ["column human_verdict", "'maybe' is not a verdict", "同意"]),
    (lambda r: r.update(deduction_id="nope#d0", human_verdict="agree"),
     ["column deduction_id", "'nope#d0' is not a deduction of this run"]),
    (lambda r: r.update(human_score="3", human_verdict=""), ["column human_score", "on a deduction row"]),
])
def test_a_bad_deduction_row_names_file_line_and_column(run: Path, tmp_path: Path,
                                                        edit: Callable[[dict[str, str]], None],
                                                        expect: list[str]) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    i = next(i for i, r in enumerate(rows) if r["row"] == "deduction")
    edit(rows[i])
    sheet = _write(rows, tmp_path / "bad.csv", encoding="gbk", delimiter=";")
    msg = _cli_error("human", "import", sheet, "--run", run)
    for part in [f"{sheet}:{i + 2}:", *expect]:
        assert part in msg, msg


def test_parse_verdict() -> None:
    assert [parse_verdict(w) for w in ("Agree", " 同意 ", "DISAGREE", "不同意", "Not  sure", "不确定", "x")] == [
        "agree", "agree", "disagree", "disagree", "unsure", "unsure", None]


# --------------------------------------------------------------------------- the store


def test_only_a_score_can_be_accepted() -> None:
    with pytest.raises(ValueError, match="only a score"):
        HumanLabelRecord(case_id="001", dimension="accuracy", deduction_id="x#d0", reviewer="li", kind="verdict",
                         value="agree", origin="accepted")


def test_upsert_one_label_per_key_and_delete(run: Path) -> None:
    with Store.open_existing(run) as store:
        base: dict[str, Any] = {"case_id": "001", "dimension": "accuracy", "deduction_id": "x#d0", "reviewer": "li",
                                "kind": "verdict"}
        store.upsert_human_label(HumanLabelRecord(**base, value="agree", source="review"))
        store.upsert_human_label(HumanLabelRecord(**base, value="disagree", comment="no", source="review"))
        store.upsert_human_label(HumanLabelRecord(**{**base, "reviewer": "wang"}, value="agree", source="review"))
        labels = store.human_labels()
        assert [(lb.reviewer, lb.value, lb.comment) for lb in labels] == [
            ("li", "disagree", "no"), ("wang", "agree", None)]
        assert all(lb.labelled_at > 0 for lb in labels)
        assert store.delete_human_label(reviewer="li", kind="verdict", case_id="001", dimension="accuracy",
                                        deduction_id="x#d0")
        assert [lb.reviewer for lb in store.human_labels()] == ["wang"]
        with pytest.raises(ValueError, match="reviewer"):
            store.replace_human_labels("li", "f.csv", [HumanLabelRecord(**{**base, "reviewer": "wang"}, value="agree")])


def test_two_connections_write_at_the_same_time(run: Path) -> None:
    """A reviewer clicking (one upsert each) while a scoring run records calls on another connection:
    every write lands (WAL + busy timeout + BEGIN IMMEDIATE), none fails on a lock."""
    from consensus_eval.execution.store import CallRecord

    errors: list[Exception] = []
    start = threading.Barrier(2)

    def reviewer() -> None:
        try:
            with Store.open_existing(run) as store:
                start.wait()
                for i in range(150):
                    store.upsert_human_label(HumanLabelRecord(case_id="001", dimension="accuracy", reviewer="li",
                                                              kind="comment", deduction_id=f"x#d{i}",
                                                              comment=f"c{i}", source="review"))
        except Exception as e:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(e)
            start.abort()       # the other thread, at the barrier or coming to it, stops too (BrokenBarrierError)

    def scorer() -> None:
        try:
            with Store.open_existing(run) as store:
                start.wait()
                for i in range(150):
                    store.record(CallRecord(request_hash=f"extra{i}", case_id="001", dimension="accuracy",
                                            judge="rules", run=9, status="failed", error="x"))
                    if i % 25 == 0:
                        store.replace_human_labels("wang", "sheet.csv", [HumanLabelRecord(
                            case_id="002", dimension="accuracy", reviewer="wang", kind="score", value=float(i))])
        except Exception as e:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(e)
            start.abort()       # the other thread, at the barrier or coming to it, stops too (BrokenBarrierError)

    threads = [threading.Thread(target=reviewer), threading.Thread(target=scorer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    labels = _stored(run)
    assert len([lb for lb in labels if lb.reviewer == "li"]) == 150
    assert [lb.value for lb in labels if lb.reviewer == "wang"] == [125.0]
    with Store.open_existing(run, read_only=True) as store:
        assert len([r for r in store.calls(planned_only=False) if r.request_hash.startswith("extra")]) == 150


# --------------------------------------------------------------------------- what the labels say, by hand


def test_precision_and_agreement_on_a_hand_built_panel(tmp_path: Path) -> None:
    """c1 accuracy: each judge 1 deduction (#d0) + 1 fixed penalty (#p0); c2 accuracy: judge-a 4
    deductions, judge-b 1, judge-c 1. Verdicts by hand: judge-a 3 agree, 1 disagree, 1 unsure;
    judge-b 1 agree, 1 disagree; judge-c none decided (1 unsure)."""
    run = build_panel_store(tmp_path / "run")
    a, b, c = "c2|judge-a|accuracy|0", "c2|judge-b|accuracy|0", "c2|judge-c|accuracy|0"
    rows = [("c2", f"{a}#d0", "agree"), ("c2", f"{a}#d1", "同意"), ("c2", f"{a}#d2", "不同意"),
            ("c2", f"{a}#d3", "unsure"), ("c1", "c1|judge-a|accuracy|0#p0", "Agree"),
            ("c2", f"{b}#d0", "agree"), ("c1", "c1|judge-b|accuracy|0#d0", "disagree"),
            ("c2", f"{c}#d0", "不确定")]
    sheet = tmp_path / "v.csv"
    sheet.write_text("row,case_id,deduction_id,human_verdict,reviewer\n"
                     + "".join(f"deduction,{cid},{did},{v},li\n" for cid, did, v in rows), encoding="utf-8")
    done = import_human(run, sheet, n_boot=200)
    assert done.by_reviewer == {"li": {"verdict": 8}} and done.format == "sheet"
    h = done.results.reliability.human
    assert h is not None and h.n_verdicts == 8 and h.n_cases == 0
    pa, pb, pc = h.precision["judge-a"], h.precision["judge-b"], h.precision["judge-c"]
    assert (pa.agree, pa.disagree, pa.unsure, pa.precision.value) == (3, 1, 1, 0.75)
    assert (pa.precision.low, pa.precision.high) == pytest.approx(wilson(3, 4))
    assert (pb.agree, pb.disagree, pb.precision.value, pb.precision.n) == (1, 1, 0.5, 2)
    assert (pc.unsure, pc.precision.n, pc.precision.value) == (1, 0, None)
    # scores: the human gives c1..c3 totals; judge totals (test_audit): a 88/90/99, b 95/97/98, c 95/98/100
    scores = tmp_path / "s.csv"
    scores.write_text("case_id,accuracy,completeness,standardization\n"
                      "c1,30,35,25\nc2,33,35,25\nc3,40,35,23\n", encoding="utf-8")
    done = import_human(run, scores, reviewer="wang", n_boot=200)
    h = done.results.reliability.human
    assert h is not None and h.n_cases == 3 and h.reviewers == ["li", "wang"] and h.small_sample
    tot = h.judges["judge-a"]["total"]
    # judge-a's totals 88, 90, 99 against the human's 90, 93, 98: MAE (2 + 3 + 1) / 3, bias -4/3
    assert tot.n == 3 and tot.mae == pytest.approx(2.0) and tot.bias == pytest.approx(-4 / 3)
    assert tot.mae_ci is not None and tot.mae_ci[0] <= 2.0 <= tot.mae_ci[1]
    assert tot.bias_ci is not None and -3 <= tot.bias_ci[0] <= -4 / 3 <= tot.bias_ci[1] <= 1
    assert h.inter_reviewer == {}                              # li gave verdicts only: nothing to compare
    assert set(h.alpha_with_human) == {"accuracy", "completeness", "standardization", "total"}


def test_read_labels_refuses_a_deduction_of_another_case(tmp_path: Path) -> None:
    run = build_panel_store(tmp_path / "run")
    sheet = tmp_path / "v.csv"
    sheet.write_text("case_id,deduction_id,human_verdict\nc1,c2|judge-b|accuracy|0#d0,agree\n", encoding="utf-8")
    with Store.open_existing(run, read_only=True) as store:
        stored = read_run(store)
    with pytest.raises(InputError, match=r"v.csv:2: column case_id \(A\): 'c1', but the deduction .* is of case 'c2'"):
        read_labels(sheet, stored)


def test_write_adjudication_csv_neutralises_and_has_a_column_per_judge(tmp_path: Path) -> None:
    run = build_panel_store(tmp_path / "run")
    res = load_run(run, n_boot=0)
    path = write_adjudication_csv(tmp_path / "s.csv", res.audit, judges=res.judges)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    assert [k for k in rows[0] if k.startswith("score: ")] == ["score: judge-a", "score: judge-b", "score: judge-c"]
    c4 = [r for r in rows if r["case_id"] == "c4" and r["row"] == "score"]
    assert {r["score: judge-b"] for r in c4} == {"failed"}


def test_threads_sharing_one_store_write_one_transaction_at_a_time(run: Path) -> None:
    """A web app may hand one Store to several request threads: their transactions never interleave."""
    errors: list[Exception] = []
    with Store.open_existing(run) as store:
        def click(reviewer: str) -> None:
            try:
                for i in range(100):
                    store.upsert_human_label(HumanLabelRecord(case_id="001", dimension="accuracy", reviewer=reviewer,
                                                              kind="verdict", deduction_id=f"x#d{i}", value="agree"))
                    if i % 20 == 0:
                        store.replace_human_labels(reviewer, "s.csv", [HumanLabelRecord(
                            case_id="002", dimension="accuracy", reviewer=reviewer, kind="score", value=float(i))])
            except Exception as e:  # noqa: BLE001 - reported below, in the test's thread
                errors.append(e)

        threads = [threading.Thread(target=click, args=(f"r{k}",)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        labels = store.human_labels()
    assert sorted({(lb.reviewer, lb.kind): 0 for lb in labels}) == sorted(
        (f"r{k}", kind) for k in range(4) for kind in ("score", "verdict"))
    assert len(labels) == 4 * 101


def test_the_human_section_follows_the_store_not_a_saved_file(run: Path, tmp_path: Path) -> None:
    rows, _, _ = _fill(_export(run, tmp_path / "sheet.csv"), reviewer="li")
    _cli("human", "import", _write(rows, tmp_path / "filled.csv"), "--run", run, "--bootstrap", "0")
    assert load_run(run).reliability.human is not None
    with Store.open_existing(run) as store:              # every label deleted (e.g. by the review app)
        for lb in store.human_labels():
            store.delete_human_label(reviewer=lb.reviewer, kind=lb.kind, case_id=lb.case_id,
                                     dimension=lb.dimension, deduction_id=lb.deduction_id)
    assert "human" in json.loads((run / "reliability.json").read_text(encoding="utf-8"))   # stale file
    assert load_run(run).reliability.human is None


def test_deduction_ids_are_the_audits(run: Path, tmp_path: Path) -> None:
    """The reader's ids (built without the audit's models) are exactly the audit's AuditDeduction ids."""
    from consensus_eval.analysis.human import deduction_dimensions

    for folder in (run, build_panel_store(tmp_path / "panel")):
        res = load_run(folder, n_boot=0)
        audited = {d.id: d.dimension for a in res.audit for dim in a.dimensions for jv in dim.judges
                   for d in jv.deductions}
        assert audited and deduction_dimensions(res.run) == audited


def test_a_label_must_fit_its_kind() -> None:
    from pydantic import ValidationError

    assert HumanLabelRecord(case_id="1", dimension="accuracy", reviewer="li", kind="score", value="32.5").value == 32.5
    # without a value: the key of a label to delete (what the review app builds)
    assert HumanLabelRecord(case_id="1", dimension="accuracy", reviewer="li", kind="score").value is None
    bads: list[dict[str, Any]] = [{"kind": "score", "value": "abc", "dimension": "accuracy"},
                                  {"kind": "verdict", "value": "maybe", "deduction_id": "x#d0"}]
    for bad in bads:
        with pytest.raises(ValidationError):
            HumanLabelRecord(case_id="1", reviewer="li", **bad)


def test_an_excel_workbook_is_refused_with_what_to_do(run: Path, tmp_path: Path) -> None:
    book = tmp_path / "sheet.xlsx"
    book.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    msg = _cli_error("human", "import", book, "--run", run)
    assert f"{book}: an Excel workbook, not a CSV file" in msg and "CSV UTF-8" in msg


def test_a_sheet_without_case_ids_or_with_an_ambiguous_reviewer(run: Path, tmp_path: Path) -> None:
    sheet = tmp_path / "s.csv"
    sheet.write_text("\n\nrow,dimension,human_score\nscore,accuracy,30\n", encoding="utf-8")
    assert f"{sheet}:3: no column named case_id" in _cli_error("human", "import", sheet, "--run", run)
    sheet.write_text("case_id,dimension,human_score,reviewer\n001,accuracy,30,li\n002,accuracy,31,wang\n"
                     "003,accuracy,32,\n", encoding="utf-8")
    msg = _cli_error("human", "import", sheet, "--run", run)
    assert f"{sheet}:4: column reviewer (D): empty, and the sheet names several reviewers (li, wang)" in msg
    _cli("human", "import", sheet, "--run", run, "--reviewer", "zhao", "--bootstrap", "0")
    assert sorted((lb.reviewer, lb.case_id) for lb in _stored(run)) == [("li", "001"), ("wang", "002"), ("zhao", "003")]


def test_a_deduction_the_judges_missed_added_as_a_row(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    case_id = rows[0]["case_id"]
    added = {**dict.fromkeys(rows[0], ""), "row": "added", "case_id": case_id, "dimension": "accuracy",
             "type": "药名错误", "points": "", "human_comment": "二甲双胍写成了格列美脲", "reviewer": "li"}
    penalty = {**added, "type": "", "type_id": "diabetes_in_past_history", "human_comment": ""}
    blank = {**added, "type": "", "human_comment": ""}                     # an empty template row: skipped
    sheet = _write([*rows, added, penalty, blank], tmp_path / "filled.csv", encoding="gbk")
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    labels = [lb for lb in _stored(run) if lb.kind == "added_deduction"]
    assert [(lb.case_id, lb.dimension, lb.value, lb.points, lb.deduction_id, lb.comment) for lb in labels] == [
        (case_id, "accuracy", "drug_name_error", 3.0, "added:accuracy:drug_name_error", "二甲双胍写成了格列美脲"),
        (case_id, "accuracy", "diabetes_in_past_history", 10.0, "added:accuracy:diabetes_in_past_history", None)]
    h = load_run(run, n_boot=0).reliability.human
    assert h is not None and h.n_added_deductions == 2
    # exported for li: the added rows come back (type names from the rubric) and read back the same
    again = tmp_path / "again.csv"
    _cli("audit", run, "--top", "4", "--export", again, "--reviewer", "li")
    back = [r for r in csv.DictReader(io.StringIO(again.read_text(encoding="utf-8-sig"))) if r["row"] == "added"]
    assert [(r["type"], r["type_id"], r["points"]) for r in back] == [
        ("药名错误", "drug_name_error", "3"), ("糖尿病写入既往史", "diabetes_in_past_history", "10")]
    _cli("human", "import", again, "--run", run, "--bootstrap", "0")
    assert sorted(lb.key for lb in _stored(run) if lb.kind == "added_deduction") == sorted(lb.key for lb in labels)
    # a type the rubric does not have, points out of the type's range: named
    bad = _write([*rows, {**added, "type": "不存在"}], tmp_path / "bad.csv")
    assert "column type (M): '不存在' is not a deduction type or fixed penalty of accuracy" in _cli_error(
        "human", "import", bad, "--run", run)
    bad = _write([*rows, {**added, "points": "9"}], tmp_path / "bad.csv")
    msg = _cli_error("human", "import", bad, "--run", run)
    assert "column points (N): 9 is outside 3..3 for drug_name_error" in msg


# --------------------------------------------------------------------------- provenance: one judgement, one label


def test_a_fixed_penalty_listed_twice_in_a_run_is_one_row_and_one_verdict(tmp_path: Path) -> None:
    from consensus_eval.domain.judgment import Judgment
    from tests.test_audit import PANEL, PENALTY, _d

    panel = dict(PANEL)
    panel[("c1", "judge-a", "accuracy")] = Judgment(
        dimension="accuracy", deductions=[_d("numbers", "value_error", 2, "空腹7.9")],
        fixed_penalties=[PENALTY, PENALTY])
    run = build_panel_store(tmp_path / "run", panel)
    res = load_run(run, n_boot=0)
    path = write_adjudication_csv(tmp_path / "s.csv", res.audit, judges=res.judges)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    ids = [r["deduction_id"] for r in rows if r["case_id"] == "c1" and r["judge"] == "judge-a"]
    assert ids == ["c1|judge-a|accuracy|0#d0", "c1|judge-a|accuracy|0#p0"]      # #p1, the copy, has no row
    # an older sheet (or a hand-made one) with a verdict on each copy: one judgement, one label, counted once
    sheet = tmp_path / "v.csv"
    sheet.write_text("row,case_id,deduction_id,human_verdict,reviewer\n"
                     "deduction,c1,c1|judge-a|accuracy|0#p0,agree,li\n"
                     "deduction,c1,c1|judge-a|accuracy|0#p1,agree,li\n", encoding="utf-8")
    done = import_human(run, sheet, n_boot=0)
    assert done.by_reviewer == {"li": {"verdict": 1}}
    h = done.results.reliability.human
    assert h is not None and h.n_verdicts == 1 and h.precision["judge-a"].agree == 1
    # copies with different verdicts are one judgement said two ways: refused, naming both lines
    sheet.write_text("row,case_id,deduction_id,human_verdict,reviewer\n"
                     "deduction,c1,c1|judge-a|accuracy|0#p0,agree,li\n"
                     "deduction,c1,c1|judge-a|accuracy|0#p1,disagree,li\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"v.csv:3: the same verdict .* already on line 2, with another value"):
        import_human(run, sheet, n_boot=0)
    # the review page's line carries one id per run; a verdict on it stores one label
    item = next(it for dim in res.audit[[a.case_id for a in res.audit].index("c1")].dimensions
                if dim.dimension == "accuracy" for jv in dim.judges if jv.judge == "judge-a"
                for g in jv.drill_down() for it in g.items if it.deduction.kind == "penalty")
    assert item.ids == ["c1|judge-a|accuracy|0#p0", "c1|judge-a|accuracy|0#p1"]
    assert item.label_ids == ["c1|judge-a|accuracy|0#p0"] and item.applied_once


def test_added_deductions_are_listed_with_evidence_and_the_judges_that_missed_them(tmp_path: Path) -> None:
    run = build_panel_store(tmp_path / "run")
    sheet = tmp_path / "a.csv"
    # c2 accuracy: judge-a and judge-b took drug_name_error, judge-c did not; dose_error: a and c took it
    sheet.write_text("row,case_id,dimension,type_id,points,evidence,human_verdict,human_comment,reviewer\n"
                     "added,c2,accuracy,drug_name_error,3,二甲双胍,,药名写错,li\n"
                     "added,c2,accuracy,diabetes_in_past_history,,既往史：糖尿病3年,,'=HYPERLINK(1),li\n",
                     encoding="utf-8")
    h = import_human(run, sheet, n_boot=0).results.reliability.human
    assert h is not None and h.n_added_deductions == 2
    assert [(x.type_id, x.type, x.category, x.points, x.evidence, x.comment, x.reviewer, x.missed_by)
            for x in h.added] == [
        ("drug_name_error", "药名错误", "药物信息准确性", 3.0, "二甲双胍", "药名写错", "li", ["judge-c"]),
        ("diabetes_in_past_history", "糖尿病写入既往史", "fixed_penalty", 10.0, "既往史：糖尿病3年", "=HYPERLINK(1)",
         "li", ["judge-a", "judge-b", "judge-c"])]
    assert h.missed == {"judge-a": 1, "judge-b": 1, "judge-c": 2}


def test_the_export_guard_comes_off_every_text_cell_so_a_round_trip_changes_nothing(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    score_row = next(r for r in rows if r["row"] == "score")
    ded_row = next(r for r in rows if r["row"] == "deduction")
    score_row.update(human_score="30", human_comment="=1+1 是公式吗", reviewer="li")
    ded_row.update(human_verdict="agree", human_comment="-3 分偏重", reviewer="li")
    sheet = _write(rows, tmp_path / "filled.csv")
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    for _ in range(2):                         # export the reviewer's labels and import them again, twice
        again = tmp_path / "again.csv"
        _cli("audit", run, "--top", "4", "--export", again, "--reviewer", "li")
        raw = again.read_text(encoding="utf-8-sig")
        assert "'=1+1 是公式吗" in raw and "'-3 分偏重" in raw               # guarded in the file
        _cli("human", "import", again, "--run", run, "--bootstrap", "0")
    comments = sorted(lb.comment for lb in _stored(run) if lb.comment)
    assert comments == ["-3 分偏重", "=1+1 是公式吗"]


def test_the_sheet_says_whose_score_it_is_own_accepted_or_none(run: Path, tmp_path: Path) -> None:
    rows = _export(run, tmp_path / "sheet.csv")
    scores = [r for r in rows if r["row"] == "score"][:3]
    scores[0].update(human_score="30", reviewer="li")                                  # own (no origin)
    scores[1].update(human_score="采纳", reviewer="li")                                 # accepts the panel's
    scores[2].update(human_score=scores[2]["panel_score"], score_origin="accepted", reviewer="li")
    sheet = _write(rows, tmp_path / "filled.csv")
    _cli("human", "import", sheet, "--run", run, "--bootstrap", "0")
    got = {(lb.case_id, lb.dimension): (lb.value, lb.origin) for lb in _stored(run) if lb.kind == "score"}
    assert got == {(scores[0]["case_id"], scores[0]["dimension"]): (30.0, "own"),
                   (scores[1]["case_id"], scores[1]["dimension"]): (float(scores[1]["panel_score"]), "accepted"),
                   (scores[2]["case_id"], scores[2]["dimension"]): (float(scores[2]["panel_score"]), "accepted")}
    again = tmp_path / "again.csv"
    _cli("audit", run, "--top", "4", "--export", again, "--reviewer", "li")
    back = [r for r in csv.DictReader(io.StringIO(again.read_text(encoding="utf-8-sig"))) if r["row"] == "score"]
    assert [r["score_origin"] for r in back[:4]] == ["own", "accepted", "accepted", ""]
    bad = _write([{**scores[0], "score_origin": "maybe"}], tmp_path / "bad.csv")
    assert "column score_origin" in _cli_error("human", "import", bad, "--run", run)
    h = load_run(run, n_boot=0).reliability.human
    assert h is not None and h.n_accepted == 2 and h.n_cases == 1


def test_a_sheet_exported_for_a_reviewer_comes_back_as_theirs(run: Path, tmp_path: Path) -> None:
    sheet = tmp_path / "zhang.csv"
    _cli("audit", run, "--top", "2", "--export", sheet, "--reviewer", "dr_zhang")
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    assert {r["reviewer"] for r in rows} == {"dr_zhang"}          # named on every row, before any label
    next(r for r in rows if r["row"] == "score")["human_score"] = "30"
    _cli("human", "import", _write(rows, tmp_path / "filled.csv"), "--run", run, "--bootstrap", "0")
    assert [(lb.reviewer, lb.value) for lb in _stored(run)] == [("dr_zhang", 30.0)]


def test_a_semicolon_wide_file_with_decimal_commas_imports_like_the_sheet(run: Path, tmp_path: Path) -> None:
    """Excel in a European locale writes ';' and decimal commas; in GBK on Chinese Windows. The wide file is
    read by the same reader as the sheet (it once read commas only: "no column named case_id")."""
    wide = tmp_path / "wide.csv"
    wide.write_bytes("case_id;accuracy;completeness;standardization\r\n001;30,5;35;24,5\r\n".encode("gbk"))
    _cli("human", "import", wide, "--run", run, "--reviewer", "zhang", "--bootstrap", "0")
    got = {lb.dimension: lb.value for lb in _stored(run) if lb.kind == "score"}
    assert got == {"accuracy": 30.5, "completeness": 35.0, "standardization": 24.5}
