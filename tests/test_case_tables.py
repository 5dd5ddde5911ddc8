"""Cases from where hospitals keep them (README.md, 'Cases'): CSV (Excel's BOM, GBK, ';' lists, quoted
multi-line cells) and .xlsx, with the columns named in the config's ``fields``; errors name the file, the
row and the column."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval._errors import InputError
from consensus_eval.cli import app
from consensus_eval.domain.cases import CaseFields, load_cases
from tests.conftest import ROOT, write_config

FIELDS = CaseFields(id="病历号", record="病历摘要", conversation="对话", important="重点")
RULES = "  - name: rules\n    kind: rules\n"


def _examples(n: int = 3) -> list[dict[str, Any]]:
    lines = (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    out = []
    for line in lines:
        c = json.loads(line)
        conv = c["conversation"]
        if not isinstance(conv, str):
            conv = "\n".join(f"{'医生' if t['role'] == 'doctor' else '患者'}：{t['text']}" for t in conv)
        out.append({"病历号": c["id"], "对话": conv, "病历摘要": c["record"], "重点": "是", "科室": "内分泌"})
    return out


def _csv(rows: list[dict[str, Any]], delimiter: str = ",") -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), delimiter=delimiter)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


@pytest.mark.parametrize(("encoding", "delimiter"), [("utf-8-sig", ","), ("gbk", ","), ("utf-8", ";"),
                                                      ("utf-16", "\t")])
def test_a_csv_in_excels_encodings(tmp_path: Path, encoding: str, delimiter: str) -> None:
    rows = _examples()
    if encoding == "gbk":   # what GBK cannot hold Excel cannot save either: the rows as Excel would write them
        rows = [{k: v.encode("gbk", errors="replace").decode("gbk") for k, v in r.items()} for r in rows]
    p = tmp_path / "cases.csv"
    p.write_bytes(_csv(rows, delimiter).encode(encoding))
    cases = load_cases(p, fields=FIELDS).cases
    assert [c.id for c in cases] == [r["病历号"] for r in rows]
    assert cases[0].record == rows[0]["病历摘要"] and cases[0].conversation == rows[0]["对话"]  # multi-line cell
    assert cases[0].important is True and cases[0].meta == {"科室": "内分泌"}


def test_an_xlsx_sheet(tmp_path: Path) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    rows = _examples()
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(list(rows[0]))
    for i, r in enumerate(rows):
        ws.append([1001 + i, r["对话"], r["病历摘要"], "否", r["科室"]])   # a numeric id, as Excel stores it
    ws.append([None] * 5)                                                 # a blank row is skipped
    p = tmp_path / "cases.xlsx"
    wb.save(p)
    cases = load_cases(p, fields=FIELDS).cases
    assert [c.id for c in cases] == ["1001", "1002", "1003"] and cases[1].record == rows[1]["病历摘要"]
    assert not cases[0].important
    bad = tmp_path / "bad.xlsx"
    bad.write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"bad\.xlsx: not a readable \.xlsx workbook"):
        load_cases(bad, fields=FIELDS)


def test_errors_name_the_file_row_and_column(tmp_path: Path) -> None:
    rows = _examples(4)
    rows[1]["病历摘要"] = ""
    rows[3]["病历号"] = rows[2]["病历号"]
    rows[0]["重点"] = "maybe"
    p = tmp_path / "cases.csv"
    p.write_text(_csv(rows), encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_cases(p, fields=FIELDS)
    msg = str(e.value)
    assert "3 invalid line(s)" in msg, msg
    assert "column '重点' (important): 'maybe' is not yes/no" in msg
    assert "column '病历摘要' (record):" in msg and "empty" in msg
    assert "column '病历号' (id): duplicate case id" in msg
    assert f"{p}:2: column '重点'" in msg   # rows counted as lines of the file, the header line 1
    # the header without the configured columns: what it has, and how to name them
    with pytest.raises(InputError, match=r"csv:1: the header has no column '病案号' \(fields\.id\).*has: '病历号'"):
        load_cases(p, fields=CaseFields(id="病案号", record="病历摘要", conversation="对话"))
    assert len(load_cases(p, fields=CaseFields(id=" 病历号 ", record="病历摘要", conversation="对话"),
                          skip_invalid=True).cases) == 2   # 重点 unmapped: case-01 loads, to meta
    with pytest.raises(InputError, match=r"no column 'id' \(fields\.id\), 'record' \(fields\.record\)"):
        load_cases(p)


def test_score_a_csv_with_the_fields_of_the_config(tmp_path: Path) -> None:
    p = tmp_path / "cases.csv"
    p.write_bytes(_csv(_examples()).encode("utf-8-sig"))
    cfg = write_config(tmp_path / "rules.yaml", RULES, fields="{id: 病历号, record: 病历摘要, conversation: 对话}")
    r = CliRunner().invoke(app, ["score", str(p), "--config", str(cfg), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    out = [json.loads(x) for x in (tmp_path / "o" / "consensus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [c["case_id"] for c in out] == [r["病历号"] for r in _examples()]
