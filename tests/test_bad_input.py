"""Bad input that reaches a run (the loaders' own errors are tested in test_cases/config/rubric.py).

- A record too large for a judge's context window: the provider answers 400 "context length
  exceeded"; the call is recorded as failed with that reason, not retried, and the run goes on.
- A cases file that turns bad between two runs into the same folder: without --skip-invalid the
  command stops before any call and the store and outputs stay as they were; with it, the stored
  results are kept (not asked again) and only the new valid cases are scored.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import api as evaluate
from consensus_eval.cli import app
from consensus_eval.domain.config import Mode
from consensus_eval.execution.store import Store
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import MODEL_OF, present, write_cases, write_panel

CONTEXT_CHARS = 20_000  # the fake judges' context window; normal prompts are 3-8k characters


def test_record_beyond_the_context_window_fails_that_call_with_a_clear_reason(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", 3)
    lines = cases.read_text(encoding="utf-8").splitlines()
    huge = json.loads(lines[1])
    huge["record"] = ("现病史：" + "患者自述血糖控制不佳，" * 10_000)  # ~100k characters
    lines[1] = json.dumps(huge, ensure_ascii=False)
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with FakeServer(FakeConfig(seed=3, context_limit_chars=CONTEXT_CHARS, max_lifetime_s=600)) as srv:
        cfg = write_panel(tmp_path / "panel.yaml", srv.url)
        progress = evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out").progress
        log = [e for e in srv.log if e["dim"]]

    assert progress is not None
    assert progress.done == 18 and progress.failed == 6  # the huge case's 3 dimensions x 2 judges
    with Store(tmp_path / "out" / "results.sqlite") as store:
        rows = store.calls()
    for r in rows:
        if r.case_id == huge["id"]:
            assert r.status == "failed" and r.judgment is None and r.attempts == 1
            assert r.error_kind == "bad_request", r.error
            assert r.error is not None
            assert r.error.startswith("bad request (400, context window exceeded), not retried: "
                                      "ContextWindowExceededError 400"), r.error
            assert "maximum context length" in r.error
        else:
            assert r.status == "ok", r.error
    # one request each: a context error is not worth a retry or a re-ask
    too_long = [e for e in log if e["status"] == 400]
    assert len(too_long) == 6 and {e["case"] for e in too_long} == {huge["id"]}
    assert len(log) == 18

    # the outputs are written and say so: the case has no score rather than a wrong one
    rows_out = [json.loads(x) for x in (tmp_path / "out" / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    bad = [r for r in rows_out if r["case_id"] == huge["id"]]
    assert len(bad) == 6
    assert all(r["status"] == "failed" and r["score"] is None and "context" in r["error"] for r in bad)
    cons = {json.loads(x)["case_id"]: json.loads(x) for x in
            (tmp_path / "out" / "consensus.jsonl").read_text(encoding="utf-8").splitlines()}
    assert cons[huge["id"]]["n_judges"] == 0 and cons[huge["id"]]["status"] != "ok"
    assert all(cons[c]["status"] == "ok" for c in cons if c != huge["id"])


def _snapshot(out: Path) -> dict[str, Any]:
    """What a later bad run must not change: every table of the store, and the output files."""
    con = sqlite3.connect(out / "results.sqlite")
    con.row_factory = sqlite3.Row
    try:
        tables = {t: sorted(tuple(dict(r).items()) for r in con.execute(f"SELECT * FROM {t}"))  # noqa: S608
                  for t in ("calls", "plan", "meta")}
    finally:
        con.close()
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix in (".jsonl", ".csv", ".json")}
    return {"tables": tables, "files": files}


def test_a_broken_cases_file_on_rerun_loses_nothing_already_stored(tmp_path: Path) -> None:
    good = write_cases(tmp_path / "cases.jsonl", 4)
    new_case = json.loads(write_cases(tmp_path / "more.jsonl", 5).read_text(encoding="utf-8").splitlines()[4])
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good.read_text(encoding="utf-8")
                      + '{"id": "ft-broken", "conversation": "医生：你好\n'  # cut mid-line
                      + "\n" + json.dumps(new_case, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    runner = CliRunner()

    with FakeServer(FakeConfig(seed=5, max_lifetime_s=600)) as srv:
        cfg = write_panel(tmp_path / "panel.yaml", srv.url)
        first = runner.invoke(app, ["score", str(good), "--config", str(cfg), "--out", str(out)])
        assert first.exit_code == 0, first.output
        before = _snapshot(out)
        assert len(before["tables"]["calls"]) == 24
        n_requests = len(srv.log)

        # the same folder, a file with a broken line: refused before any call, nothing touched
        refused = runner.invoke(app, ["score", str(broken), "--config", str(cfg), "--out", str(out)])
        assert refused.exit_code == 2
        assert "broken.jsonl:5: not valid JSON" in refused.output and "--skip-invalid" in refused.output
        assert len(srv.log) == n_requests
        assert _snapshot(out) == before

        # with --skip-invalid: the stored results are kept, only the new case is scored
        skipped = runner.invoke(app, ["score", str(broken), "--config", str(cfg), "--out", str(out), "--skip-invalid"])
        assert skipped.exit_code == 0, skipped.output
        assert "skipped" in skipped.output and "broken.jsonl:5" in skipped.output
        new_requests = srv.log[n_requests:]
        assert {e["case"] for e in new_requests} == {new_case["id"]} and len(new_requests) == 6

    with Store(out / "results.sqlite") as store:
        rows = {r.request_hash: r for r in store.calls()}
    old = {rec["request_hash"]: rec for rec in map(dict, before["tables"]["calls"])}
    assert len(rows) == 30 and set(old) <= set(rows)
    for h, rec in old.items():
        assert rows[h].status == "ok" and rows[h].finished_at == rec["finished_at"]
        assert present(rows[h].judgment).to_judgment().model_dump_json() == rec["judgment"]
    judged = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["case_id"] for r in judged} == {f"ft-{i:03d}" for i in range(5)}
    assert {r["judge"] for r in judged} == set(MODEL_OF) and all(r["status"] == "ok" for r in judged)


@pytest.mark.parametrize("mode", ["tools", "json"])
def test_context_error_message_names_the_limit(tmp_path: Path, mode: Mode) -> None:
    """The reason a user reads says what happened (context length), from both provider routes."""
    import asyncio

    from consensus_eval.domain.cases import Case
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.judges.llm import LLMJudge

    rubric = load_rubric("medical_record")
    case = Case(id="big", conversation="医生：你好\n患者：你好", record="主诉：" + "多饮" * 20_000)
    d = rubric.dimension("accuracy")
    with FakeServer(FakeConfig(seed=1, context_limit_chars=CONTEXT_CHARS, max_lifetime_s=600)) as srv:
        model = "openai/fake-a" if mode == "tools" else "hosted_vllm/fake-b"
        judge = LLMJudge(LLMJudgeConfig(name="j", model=model, api_base=srv.url + "/v1", mode=mode), rubric)
        out = asyncio.run(judge.judge(case, d, render(rubric, d, case)))
        assert len(srv.log) == 1
    assert out.status == "failed" and out.attempts == 1
    assert out.error is not None
    assert "ContextWindowExceededError" in out.error and "maximum context length" in out.error
