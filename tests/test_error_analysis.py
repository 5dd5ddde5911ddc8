"""Error analysis against clinicians (docs/qc-loop.md): per judge and for the panel, per deduction type (or likert
rating), the misses and false alarms the clinicians' labels imply, with the quotes, on the spot check's tuning part
only; in reliability.json, the report (zh and en) and the console.

Run on the bundled example with its offline panel; the clinicians' labels are made here (a sheet imported through
the command line), and every expected count is read independently from judgments.jsonl and from those labels."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval.cli import app
from tests.helpers import spot_parts

ROOT = Path(__file__).resolve().parents[1]
SHEET = ["row", "case_id", "dimension", "human_score", "deduction_id", "human_verdict", "human_comment", "type",
         "evidence"]


def _cli(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert res.exit_code == code, res.output
    return res.output


def _judgments(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]


def _deduction_ids(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """(call, deduction, its id ``{request_hash}#d{i}``) for every deduction of every call in judgments.jsonl."""
    return [(j, d, f"{j['request_hash']}#d{i}") for j in rows for i, d in enumerate(j["deductions"])]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundled example scored by the offline panel; a spot check of 10 (5 tuning, 5 held out); a clinician
    scores every spot-check case, disagrees with every colloquial deduction of the rules judge (agrees with the
    others) and adds a value_error on the first tuning case, and on a held-out case adds a drug_missing and
    disagrees with everything: none of that may show."""
    tmp = tmp_path_factory.mktemp("errors")
    run = tmp / "run"
    _cli("score", str(ROOT / "examples" / "cases.jsonl"), "--config", str(ROOT / "configs" / "offline.yaml"),
         "--out", str(run))
    _cli("audit", str(run), "--spot-check", "10", "--seed", "1")
    parts = spot_parts(run)
    tuning = sorted(c for c, p in parts.items() if p == "tuning")
    held = sorted(c for c, p in parts.items() if p == "heldout")
    rows = _judgments(run)
    sheet: list[dict[str, str]] = []
    for cid in sorted(parts):
        for dim in ("accuracy", "completeness", "standardization"):
            top = {"accuracy": 40, "completeness": 35, "standardization": 25}[dim]
            sheet.append({"row": "score", "case_id": cid, "dimension": dim, "human_score": str(top - 3)})
    for j, d, did in _deduction_ids(rows):
        if j["judge"] != "rules" or j["case_id"] not in parts:
            continue
        no = j["case_id"] in held or d["type_id"] == "colloquial"
        sheet.append({"row": "deduction", "case_id": j["case_id"], "dimension": j["dimension"], "deduction_id": did,
                      "human_verdict": "disagree" if no else "agree",
                      "human_comment": "口语化可以接受" if no else ""})
    sheet.append({"row": "added", "case_id": tuning[0], "dimension": "accuracy", "type": "value_error",
                  "evidence": "空腹血糖9.0mmol/L", "human_comment": "对话中为8.0"})
    sheet.append({"row": "added", "case_id": held[0], "dimension": "accuracy", "type": "drug_missing",
                  "evidence": "held-out quote", "human_comment": "held-out comment"})
    path = tmp / "labels.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SHEET)
        w.writeheader()
        w.writerows(sheet)
    _cli("human", "import", str(path), "--run", str(run), "--reviewer", "dr_li")
    return {"run": run, "tuning": tuning, "held": held, "rows": rows}


def test_per_type_misses_and_false_alarms_on_the_tuning_part_with_the_quotes(labelled: dict[str, Any]) -> None:
    run, tuning, rows = labelled["run"], labelled["tuning"], labelled["rows"]
    errors = json.loads((run / "reliability.json").read_text(encoding="utf-8"))["errors"]
    assert errors["part"] == "tuning" and errors["cases"] == len(tuning) == 5
    # false alarms: every colloquial deduction of the rules judge on the tuning part, counted from judgments.jsonl
    colloquial = [(j, d) for j, d, _ in _deduction_ids(rows)
                  if j["judge"] == "rules" and j["case_id"] in tuning and d["type_id"] == "colloquial"]
    distinct = {(j["request_hash"], i) for j in rows for i, d in enumerate(j["deductions"])
                if j["judge"] == "rules" and j["case_id"] in tuning and d["type_id"] == "colloquial"}
    assert colloquial, "the example must give the rules judge colloquial deductions on the tuning part"
    items = {(i["dimension"], i["item"]): i for i in errors["raters"]["rules"]["items"]}
    fa = items[("standardization", "colloquial")]
    assert (fa["misses"], fa["false_alarms"]) == (0, len(distinct))
    assert len(distinct) == len(colloquial)
    assert fa["points"] == pytest.approx(sum(d["points"] for _, d in colloquial))
    quotes = {d["evidence"] for _, d in colloquial}
    assert fa["cases"] and all(c["evidence"] in quotes and c["comment"] == "口语化可以接受" and c["judge"] == "rules"
                               and c["reason"] for c in fa["cases"])
    # the panel counts a quote once per case, whoever of its judges gave it
    panel = {(i["dimension"], i["item"]): i for i in errors["raters"]["panel"]["items"]}
    assert panel[("standardization", "colloquial")]["false_alarms"] == len(
        {(j["case_id"], d["evidence"]) for j, d in colloquial})
    # the miss: every judge without a value_error on that case, and the panel
    has_value_error = Counter(j["judge"] for j, d, _ in _deduction_ids(rows)
                              if j["case_id"] == tuning[0] and j["dimension"] == "accuracy"
                              and d["type_id"] == "value_error")
    for rater, got in errors["raters"].items():
        miss = {(i["dimension"], i["item"]): i for i in got["items"]}.get(("accuracy", "value_error"))
        if rater != "panel" and has_value_error[rater]:
            assert miss is None or miss["misses"] == 0
            continue
        assert miss is not None and miss["misses"] == 1, rater
        assert miss["cases"][0] | {"points": 0} == {"case_id": tuning[0], "kind": "miss", "points": 0, "judge": None,
                                                    "evidence": "空腹血糖9.0mmol/L", "reason": None,
                                                    "comment": "对话中为8.0"}
    # the agreed deductions are no error; nothing of the held-out part shows
    text = json.dumps(errors, ensure_ascii=False)
    assert "held-out" not in text and "drug_missing" not in text
    shown = {c["case_id"] for r in errors["raters"].values() for i in r["items"] for c in i["cases"]}
    assert shown and shown <= set(tuning)
    # ranked by the points moved
    for r in errors["raters"].values():
        assert [i["points"] for i in r["items"]] == sorted((i["points"] for i in r["items"]), reverse=True)


def test_bias_and_mae_by_the_clinicians_score_band(labelled: dict[str, Any]) -> None:
    run, tuning = labelled["run"], labelled["tuning"]
    rel = json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    cons = {json.loads(x)["case_id"]: json.loads(x)
            for x in (run / "consensus.jsonl").read_text(encoding="utf-8").splitlines()}
    bands = rel["errors"]["raters"]["panel"]["bands"]["accuracy"]
    assert [b["band"] for b in bands] == ["low", "mid", "high"]
    high = bands[2]                                      # every clinician's accuracy is 37 of 40: the top third
    diffs = [cons[c]["scores"]["accuracy"] - 37 for c in tuning]
    assert high["n"] == 5 and bands[0]["n"] == bands[1]["n"] == 0 and bands[0]["bias"] is None
    assert high["bias"] == pytest.approx(sum(diffs) / 5) and high["mae"] == pytest.approx(sum(map(abs, diffs)) / 5)


def test_the_section_in_the_report_both_languages_and_the_console(labelled: dict[str, Any]) -> None:
    run = labelled["run"]
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "## 评审对照临床医生的错误分析" in md and "口语化可以接受" in md and "空腹血糖9.0mmol/L" in md
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "评审对照临床医生的错误分析" in html
    out = _cli("reliability", str(run), "--lang", "en")
    assert "What the judges get wrong against the clinicians" in out and "tuning part (5 case(s)" in out
    assert "false alarm" in out and "value_error" in out
    _cli("report", str(run), "--lang", "en")
    assert "## What the judges get wrong against the clinicians" in (run / "report.en.md").read_text(encoding="utf-8")


def test_the_error_sheet_is_the_analysis_row_by_row(labelled: dict[str, Any], tmp_path: Path) -> None:
    run = labelled["run"]
    sheet = tmp_path / "errors.csv"
    _cli("reliability", str(run), "--export-errors", str(sheet))
    raw = sheet.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")                               # a BOM: Excel shows the Chinese
    rows = list(csv.DictReader(raw.decode("utf-8-sig").splitlines()))
    errors = json.loads((run / "reliability.json").read_text(encoding="utf-8"))["errors"]
    want = [(rater, i["item"], c["case_id"], c["kind"], c["evidence"], c["comment"] or "")
            for rater, r in errors["raters"].items() for i in r["items"] for c in i["cases"]]
    assert [(r["rater"], r["item"], r["case_id"], r["error"], r["quote"], r["clinician_comment"]) for r in rows] == want
    assert {r["part"] for r in rows} == {"tuning"}
    miss = next(r for r in rows if r["rater"] == "panel" and r["item"] == "value_error")
    assert (miss["misses"], miss["false_alarms"], miss["points"], miss["quote"]) == ("1", "0", "2", "空腹血糖9.0mmol/L")


def test_a_run_without_labels_has_no_error_analysis(tmp_path: Path) -> None:
    run, cases = tmp_path / "run", tmp_path / "cases.jsonl"
    lines = (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _cli("score", str(cases), "--config", str(ROOT / "configs" / "offline.yaml"), "--out", str(run))
    assert "errors" not in json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    out = _cli("reliability", str(run), "--export-errors", str(tmp_path / "e.csv"), code=2)
    assert "no clinician's label" in out and not (tmp_path / "e.csv").exists()
    assert "错误分析" not in (run / "report.md").read_text(encoding="utf-8")


def _spot_labelled(tmp: Path, example: str, config: str, fill: Any) -> tuple[Path, list[str]]:
    """``example`` scored by ``config``, a spot check of 6 (3 tuning), each spot-check case's score rows filled by
    ``fill(case, dimension) -> dict of sheet cells`` and imported; the run and its tuning cases."""
    run = tmp / "run"
    _cli("score", str(ROOT / "examples" / example / "cases.jsonl"), "--config", str(ROOT / "configs" / config),
         "--out", str(run))
    _cli("audit", str(run), "--spot-check", "6", "--seed", "1", "--export", str(tmp / "spot.csv"))
    with (tmp / "spot.csv").open(encoding="utf-8-sig") as f:
        rows = [r for r in csv.DictReader(f) if r["row"] == "score"]
    cases = {json.loads(x)["id"]: json.loads(x)
             for x in (ROOT / "examples" / example / "cases.jsonl").read_text(encoding="utf-8").splitlines()}
    sheet = [{"row": "score", "case_id": r["case_id"], "dimension": r["dimension"],
              **fill(cases[r["case_id"]], r["dimension"])} for r in rows]
    with (tmp / "labels.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sorted({k for s in sheet for k in s}))
        w.writeheader()
        w.writerows(sheet)
    _cli("human", "import", str(tmp / "labels.csv"), "--run", str(run), "--reviewer", "dr")
    parts = spot_parts(run)
    return run, sorted(c for c, p in parts.items() if p == "tuning")


def test_likert_ratings_above_the_clinicians_are_misses_below_false_alarms(tmp_path: Path) -> None:
    run, tuning = _spot_labelled(tmp_path, "pdqi9", "pdqi9.offline.yaml", lambda c, d: {"human_score": "3"})
    errors = json.loads((run / "reliability.json").read_text(encoding="utf-8"))["errors"]
    cons = [json.loads(x) for x in (run / "consensus.jsonl").read_text(encoding="utf-8").splitlines()]
    for judge in ("strict", "lenient", "misses", "over_calls"):
        want: Counter[tuple[str, str]] = Counter()
        for c in cons:
            if c["case_id"] in tuning:
                for dim, s in c["judges"][judge].items():
                    if s["mean"] is not None and s["mean"] != 3:
                        want[(dim, "miss" if s["mean"] > 3 else "false_alarm")] += 1
        got = Counter({(i["dimension"], k): i[n] for i in errors["raters"][judge]["items"]
                       for k, n in (("miss", "misses"), ("false_alarm", "false_alarms")) if i[n]})
        assert got == want and want, judge


def test_criteria_verdicts_against_the_clinicians(tmp_path: Path) -> None:
    def fill(case: dict[str, Any], dim: str) -> dict[str, str]:
        return {f"criterion: {c['id']}": "met" if i % 2 == 0 else "not met"
                for i, c in enumerate(case.get("criteria") or [])}

    run, tuning = _spot_labelled(tmp_path, "criteria", "criteria.offline.yaml", fill)
    errors = json.loads((run / "reliability.json").read_text(encoding="utf-8"))["errors"]
    cases = {json.loads(x)["id"]: json.loads(x)
             for x in (ROOT / "examples" / "criteria" / "cases.jsonl").read_text(encoding="utf-8").splitlines()}
    for judge in ("strict", "lenient", "misses", "over_calls"):
        want: Counter[tuple[str, str]] = Counter()
        for j in _judgments(run):
            if j["judge"] != judge or j["case_id"] not in tuning or j["run"] != 0:
                continue
            crits = {c["id"]: (i, c["points"]) for i, c in enumerate(cases[j["case_id"]].get("criteria") or [])}
            for v in j.get("verdicts") or []:
                i, points = crits[v["id"]]
                fault, judged = (i % 2 == 0) != (points > 0), v["met"] != (points > 0)
                if fault != judged:
                    want[(v["id"], "miss" if fault else "false_alarm")] += 1
        got = Counter({(i["item"], k): i[n] for i in errors["raters"][judge]["items"]
                       for k, n in (("miss", "misses"), ("false_alarm", "false_alarms")) if i[n]})
        assert got == want and want, judge
