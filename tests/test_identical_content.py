"""Every case gets its result: cases with the same content (two systems writing the same
record of one conversation) share their requests; each request is made once, and every such case reads its
judgment back. The request hashes are those of before, so a store written before schema 7 resumes: scored
again, the case it dropped gets its result without a new call."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from consensus_eval import load_run
from consensus_eval.cli import app
from consensus_eval.execution.store import SCHEMA_VERSION, Store
from tests.conftest import ROOT

TWO_SYSTEMS = ROOT / "examples" / "cases_two_systems.jsonl"
#: the conversations whose scribe-b write-up is scribe-a's text, word for word
SAME = ("case-02", "case-05", "case-09", "case-12", "case-16")


def _cases_with_identical_write_ups(folder: Path) -> Path:
    rows: list[dict[str, Any]] = [json.loads(line) for line in TWO_SYSTEMS.read_text(encoding="utf-8").splitlines()]
    record = {r["source"]: r["record"] for r in rows if r["system"] == "scribe-a"}
    for r in rows:
        if r["system"] == "scribe-b" and r["source"] in SAME:
            r["record"] = record[r["source"]]
    path = folder / "identical.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(cases: Path, out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["score", str(cases), "--out", str(out)], env={"COLUMNS": "200"})
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def _calls_table(out: Path) -> int:
    with sqlite3.connect(out / "results.sqlite") as con:
        n: int = con.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    con.close()
    return n


def test_identical_write_ups_each_get_the_judgments(tmp_path: Path) -> None:
    cases = _cases_with_identical_write_ups(tmp_path)
    rows = [json.loads(line) for line in TWO_SYSTEMS.read_text(encoding="utf-8").splitlines()]
    assert {r["source"] for r in rows if r["system"] == "scribe-a"} >= set(SAME)
    code, output = _score(cases, tmp_path / "out")
    assert code == 0, output
    res = load_run(tmp_path / "out", n_boot=0)
    assert len(res.consensus) == 32 and {c.status for c in res.consensus} == {"ok"}
    dims = [d.id for d in res.rubric.dimensions]
    per_case = {c.id: [r for r in res.records if r.case_id == c.id] for c in res.cases}
    assert all(len(recs) == len(dims) and all(r.status == "ok" for r in recs) for recs in per_case.values())
    # each shared request was made once (the rules judge: one call per case and dimension)
    assert _calls_table(tmp_path / "out") == (32 - len(SAME)) * len(dims)
    for src in SAME:
        a, b = (next(c for c in res.consensus if c.case_id == f"{src}{suffix}") for suffix in ("", "-b"))
        assert a.total == b.total and a.scores == b.scores
    lb = res.leaderboard
    assert lb is not None
    d = lb.difference("scribe-a", "scribe-b")
    assert d.paired and d.n == 16                     # every conversation paired, the identical ones too
    lines = (tmp_path / "out" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(x)["case_id"] for x in lines} == {c.id for c in res.cases}


def _as_version_6(db: Path) -> None:
    """What schema 6 wrote: the plan keyed by the request alone, a second case of the same content having
    replaced the first one's rows (the case then had no call and was reported failed)."""
    with sqlite3.connect(db) as con:
        con.executescript("""
            CREATE TABLE old_plan (request_hash TEXT PRIMARY KEY, case_id TEXT NOT NULL, dimension TEXT NOT NULL,
                                   judge TEXT NOT NULL, run INTEGER NOT NULL, position INTEGER NOT NULL);
            INSERT OR REPLACE INTO old_plan SELECT request_hash, case_id, dimension, judge, run, position
                FROM plan ORDER BY position;
            DROP TABLE plan;
            ALTER TABLE old_plan RENAME TO plan;
            UPDATE meta SET value = '6' WHERE key = 'schema_version';
            PRAGMA user_version = 0;""")
    con.close()


def test_a_schema_6_store_resumes_and_the_dropped_case_gets_its_result_without_a_call(tmp_path: Path) -> None:
    cases = _cases_with_identical_write_ups(tmp_path)
    out = tmp_path / "out"
    assert _score(cases, out)[0] == 0
    calls = _calls_table(out)
    _as_version_6(out / "results.sqlite")
    with Store.open_existing(out, read_only=True) as store:     # read through an upgraded copy: the file stays 6
        dropped = {f"{src}" for src in SAME} - {r.case_id for r in store.calls()}
    assert dropped == set(SAME)                       # as schema 6 read it: the first case of each pair lost
    old = load_run(out, n_boot=0)
    assert {c.case_id for c in old.consensus if c.status == "failed"} == set(SAME)
    code, output = _score(cases, out)                 # resume: the same request hashes, no new call
    assert code == 0, output
    assert _calls_table(out) == calls
    with Store.open_existing(out, read_only=True) as store:
        assert store.get_meta("schema_version") == SCHEMA_VERSION
    res = load_run(out, n_boot=0)
    assert {c.status for c in res.consensus} == {"ok"}


def test_a_case_without_a_verdict_exits_3(tmp_path: Path) -> None:
    """A case no judge can answer (over the rules judge's size limit) has no verdict: exit 3, even within
    --allow-failures (the corpus of bad input checks the same through its own file)."""
    rows = [json.loads(line) for line in TWO_SYSTEMS.read_text(encoding="utf-8").splitlines()][:4]
    rows[0]["record"] = "主诉：" + "口渴" * 500_001
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(app, ["score", str(path), "--out", str(tmp_path / "out"), "--allow-failures", "0.5",
                                   "--lang", "en"])
    assert res.exit_code == 3, res.output
    assert "1 case(s) without a verdict: exit 3" in res.output


def test_shards_merge_identical_write_ups_into_one_run(tmp_path: Path) -> None:
    """Cases of the same content scored by different shards each make the request; the merge keeps one call
    per request and every case reads it (a plan row per case, schema 7)."""
    cases = _cases_with_identical_write_ups(tmp_path)
    for k in (0, 1):
        res = CliRunner().invoke(app, ["score", str(cases), "--out", str(tmp_path / f"s{k}"), "--shard", f"{k}/2"])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(tmp_path / "m")])
    assert res.exit_code == 0, res.output
    merged = load_run(tmp_path / "m", n_boot=0)
    assert len(merged.consensus) == 32 and {c.status for c in merged.consensus} == {"ok"}
    assert _calls_table(tmp_path / "m") == (32 - len(SAME)) * len(merged.rubric.dimensions)
    single = tmp_path / "one"
    assert _score(cases, single)[0] == 0
    assert [c.total for c in merged.consensus] == [c.total for c in load_run(single, n_boot=0).consensus]
