"""`export RUN --parquet DIR` (docs/scale.md): judgments and consensus as Parquet, read back with pyarrow and
checked value by value against the run's judgments.jsonl and consensus.csv, for each rubric kind."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import InputError, api
from consensus_eval.cli import app

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]
#: a run of each rubric kind, offline: deductions (the rules judge and three simulated judges), likert (PDQI-9),
#: criteria
RUNS = {
    "deductions": ("examples/cases.jsonl", "configs/offline.yaml"),
    "likert": ("examples/pdqi9/cases.jsonl", "configs/pdqi9.offline.yaml"),
    "criteria": ("examples/criteria/cases.jsonl", "configs/criteria.offline.yaml"),
}
NESTED = ("deductions", "fixed_penalties", "verdicts", "evidence")


@pytest.fixture(scope="module", params=list(RUNS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cases, config = RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param) / "run"
    api.evaluate(ROOT / cases, ROOT / config, out=out, n_boot=50)
    return out


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """A nested item of judgments.jsonl as judgments.parquet holds it: its grounding as kind and score."""
    g = item.get("grounding")
    return {**{k: v for k, v in item.items() if k not in ("grounding", "dropped")},
            "grounding": g["kind"] if g else None, "grounding_score": g["score"] if g else None,
            "dropped": item.get("dropped", False)}


def test_judgments_parquet_holds_every_field_of_judgments_jsonl(run: Path, tmp_path: Path) -> None:
    paths = api.export_parquet(run, tmp_path / "pq")
    assert [p.name for p in paths] == ["judgments.parquet", "consensus.parquet"]
    table = pq.read_table(tmp_path / "pq" / "judgments.parquet")
    lines = [json.loads(x) for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = table.to_pylist()
    assert len(rows) == len(lines) > 0
    kinds_seen = set()
    for line, row in zip(lines, rows, strict=True):
        assert set(line) <= set(table.schema.names), set(line) - set(table.schema.names)   # nothing left out
        for key, value in line.items():
            if key in NESTED:
                assert row[key] == [_item(i) for i in value], (key, line["request_hash"])
                kinds_seen |= {key} if value else set()
            else:
                assert row[key] == value, (key, line["request_hash"])
        for key in set(NESTED) - set(line):   # another kind's lists: empty, never null
            assert row[key] == []
    # each kind's own items are there, with their grounding
    assert kinds_seen & {"deductions", "verdicts", "evidence"}
    assert any(i["grounding"] for r in rows for k in NESTED for i in r[k])
    # the types are the schema's whatever the values (a rating column with no rating is int32 all the same)
    assert table.schema.field("rating").type == pa.int32() and table.schema.field("stars").type == pa.int8()
    assert table.schema.field("deductions").type.value_type.field("points").type == pa.float64()


def _cell(kind: Any, text: str) -> Any:
    if pa.types.is_list(kind):
        return text.split("; ") if text else []
    if text == "":
        return None
    if pa.types.is_floating(kind):
        return float(text)
    if pa.types.is_boolean(kind):
        return bool(int(text))
    if pa.types.is_integer(kind):
        return int(text)
    return text


def test_consensus_parquet_is_consensus_csv_typed(run: Path, tmp_path: Path) -> None:
    api.export_parquet(run, tmp_path / "pq")
    table = pq.read_table(tmp_path / "pq" / "consensus.parquet")
    with (run / "consensus.csv").open(encoding="utf-8", newline="") as f:
        sheet = list(csv.reader(f))
    assert table.schema.names == sheet[0]
    types = {f.name: f.type for f in table.schema}
    expected = [{name: _cell(types[name], cell) for name, cell in zip(sheet[0], row, strict=True)} for row in sheet[1:]]
    got = table.to_pylist()
    # the CSV rounds to 4 decimals: numbers agree to that
    for want, have in zip(expected, got, strict=True):
        for name, value in want.items():
            if isinstance(value, float):
                assert have[name] == pytest.approx(value, abs=5e-5), name
            else:
                assert have[name] == value, name
    assert len(got) == len(expected) > 0
    assert types["flagged"] == pa.bool_() and types["n_judges"] == pa.int32()


def test_export_on_the_command_line(run: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", str(run), "--parquet", str(tmp_path / "wh")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert f"wrote {tmp_path / 'wh' / 'judgments.parquet'}, {tmp_path / 'wh' / 'consensus.parquet'}" in said
    assert not list((tmp_path / "wh").glob(".*tmp"))
    # a path that is a file is refused, saying so; nothing is written
    (tmp_path / "file").write_text("x", encoding="utf-8")
    res = CliRunner().invoke(app, ["export", str(run), "--parquet", str(tmp_path / "file")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "file: is a file, not a folder; --parquet names the folder" in said


def test_without_pyarrow_export_says_which_extra_to_install(run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # import pyarrow raises ImportError
    with pytest.raises(InputError, match=r"pip install 'consensus-eval\[parquet\]'"):
        api.export_parquet(run, tmp_path / "pq")
    assert not (tmp_path / "pq").exists()
