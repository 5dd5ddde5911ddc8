"""Planting into the user's own records (`calibrate --bases`, docs/calibration.md): records in other heading
styles and conversations given as turns keep their form; a record where nothing can be planted is named
with the reason; a file where nothing can be planted is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval._errors import InputError
from consensus_eval.cli import app
from consensus_eval.domain.calibration.bases import heading_style, plain_headings, user_suite
from consensus_eval.domain.cases import load_cases
from consensus_eval.domain.rubric import Rubric
from tests.conftest import ROOT, write_config
from tests.helpers import present

RULES = "  - name: rules\n    kind: rules\n"


def _bracketed(record: str) -> str:
    for name in ("主诉", "现病史", "既往史", "家族史", "个人史"):
        record = record.replace(f"\n{name}：", f"\n【{name}】").removeprefix(f"{name}：")
        if record.startswith(f"{name}："):
            record = f"【{name}】" + record[len(name) + 1:]
    return record if record.startswith("【") else "【主诉】" + record.removeprefix("主诉：")


def _cases(tmp_path: Path, *, odd: bool = True) -> tuple[Path, list[dict[str, Any]]]:
    cases = [json.loads(line) for line in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    cases = cases[:4]
    cases[1]["record"] = _bracketed(cases[1]["record"])
    if odd:
        cases.append({"id": "odd", "conversation": "医生：哪里不舒服？\n患者：头晕两天。",
                      "record": "患者头晕两天，无其他不适。"})
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    return path, cases


def test_heading_styles_round_trip() -> None:
    rec = "【主诉】口干3年。\n【现病史】……\n【既往史】否认高血压。"
    assert heading_style(rec) == "bracket"
    assert plain_headings(rec, "bracket") == "主诉：口干3年。\n现病史：……\n既往史：否认高血压。"
    assert heading_style("患者口干3年。") is None


def test_planted_copies_keep_the_users_form(tmp_path: Path, rubric: Rubric) -> None:
    path, given = _cases(tmp_path)
    cases = load_cases(path).cases
    suite, planting = user_suite(cases, rubric, seed=3)
    by_id = {c.id: c for c in cases}
    # every record is a clean control exactly as given, conversation included
    clean = {sc.base: sc for sc in suite if sc.clean}
    assert set(clean) == {c.id for c in cases}
    for rid, sc in clean.items():
        assert sc.case.record == by_id[present(rid)].record and sc.case.conversation == by_id[present(rid)].conversation
    # planted copies of the bracketed record keep its headings; spans point at the planted text
    bracketed = [sc for sc in suite if sc.base == given[1]["id"] and not sc.clean]
    assert bracketed and all(sc.case.record.startswith("【主诉】") and "现病史：" not in sc.case.record
                             for sc in bracketed)
    for sc in suite:
        conv = sc.case.conversation_as_text(rubric.roles)
        for e in sc.expected:
            for s in (*e.spans, *e.also):
                assert (sc.case.record if s.source == "record" else conv)[s.start:s.end] == s.text
    # the record without headings, drugs or values: named, with the reason
    assert planting.types["odd"] == {} and "no section heading" in planting.nothing["odd"]
    assert all(planting.types[c.id] for c in cases if c.id != "odd")


def test_nothing_plantable_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"id": "odd", "conversation": "医生：哪里不舒服？\n患者：头晕两天。",
                                "record": "患者头晕两天。"}, ensure_ascii=False) + "\n", encoding="utf-8")
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    with pytest.raises(InputError, match=r"odd\.jsonl: no error could be planted into any record:\nodd: no section"):
        api.prepare_calibration(cfg, bases=path)
    with pytest.raises(InputError, match="use one of them"):
        api.prepare_calibration(cfg, "suite.jsonl", bases=path)


def test_calibrate_bases_command(tmp_path: Path) -> None:
    path, _ = _cases(tmp_path)
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--bases", str(path), "--out", str(tmp_path / "o"),
                                 "--lang", "en"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "planted into 4 of 5 record(s)" in out and "odd: nothing could be planted" in out
    saved = json.loads((tmp_path / "o" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["source"] == "bases" and saved["not_planted"].keys() == {"odd"}
    assert saved["clean"] == 5 and saved["bases"] == 4
    md = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "Planted into your own records (calibrate --bases): 4 of 5 records took errors" in md


def test_the_handwritten_suite_is_labelled_for_what_it_is(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--suite", "handwritten", "--out",
                                 str(tmp_path / "o"), "--lang", "en"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "held-out set of errors written by hand" in out and "synthetic planted errors:" not in out
    saved = json.loads((tmp_path / "o" / "calibration.json").read_text(encoding="utf-8"))
    assert saved["source"] == "handwritten" and saved["errors"] >= 40 and saved["clean"] >= 16
    assert not any("an upper bound" in line for line in saved["recommendation"])


def test_the_heldout_operator_family_is_a_builtin_suite(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    prep = api.prepare_calibration(cfg, "builtin-heldout", sample=30, seed=1)
    main = api.prepare_calibration(cfg, "builtin", sample=30, seed=1)
    assert prep.source == "builtin-heldout" and main.source == "builtin"
    planted = {sc.case.record for sc in prep.suite if not sc.clean}
    assert planted and planted != {sc.case.record for sc in main.suite if not sc.clean}
