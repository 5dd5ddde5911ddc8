"""Provider batch APIs (``batch: true``): store, submit, collect, resume, kills, expiry, invalid replies.

Everything runs against the fake server's OpenAI-style files and batches endpoints on 127.0.0.1
(tests/fake_server.py, :class:`FakeBatches`), which answer each line with the chat endpoint's own reply.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import cli_command, cli_run, present, write_cases

KEY = "sk-test-BATCH-SECRET-0123456789abcdef"
N_CASES = 4
N_CALLS = N_CASES * 3  # one LLM judge, three dimensions, one run


def _config(url: str, *, batch: bool = True, **extra: Any) -> dict[str, Any]:
    judge = {"name": "gpt", "model": "openai/gpt-4.1", "api_base": f"{url}/v1", "api_key_env": "BATCH_TEST_KEY",
             "mode": "tools", "batch": batch, "batch_poll_s": 0.05, **extra}
    return {"rubric": "medical_record", "runs": 1, "important_runs": 1,
            "judges": [judge, {"name": "rules", "kind": "rules"}]}


def _write_config(path: Path, url: str, **extra: Any) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(_config(url, **extra), allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BATCH_TEST_KEY", KEY)
    return KEY


def _run(cases: Path, cfg: dict[str, Any], out: Path, *, wait: bool = False) -> Any:
    from consensus_eval import api

    prep = api.prepare(cases, cfg)
    return asyncio.run(api.run_async(prep, out, n_boot=0, wait=wait))


def _calls(out: Path, judge: str = "gpt") -> dict[str, Any]:
    from consensus_eval.execution.store import Store

    with Store.open_existing(out, read_only=True) as store:
        return {c.request_hash: c for c in store.calls() if c.judge == judge}


def _batches(out: Path) -> list[Any]:
    from consensus_eval.execution.store import Store

    with Store.open_existing(out, read_only=True) as store:
        return store.batches()


def _chat(srv: FakeServer) -> int:
    """Requests the chat endpoint answered (batch lines are logged too, with ``batch`` set)."""
    return sum("batch" not in e for e in srv.log)


def _answered(srv: FakeServer) -> Counter[str]:
    """How many times the server was asked each call (custom_id) across every batch it created."""
    return Counter(h for b in srv.batches.stats()["batches"] for h in b["custom_ids"])


# --------------------------------------------------------------------------- store and config


def test_store_keeps_batches_and_their_calls(tmp_path: Path) -> None:
    from consensus_eval.execution.store import CallRecord, Store

    with Store(tmp_path / "results.sqlite") as store:
        assert store.add_batch_intent("k1", "gpt", ["h1", "h2"]) == ["h1", "h2"]
        assert store.add_batch_intent("k2", "gpt", ["h3", "h2"]) == ["h3"]     # h2 is reserved by k1
        assert store.add_batch_intent("k3", "gpt", ["h1"]) == []               # nothing left: no batch
        assert store.add_batch_intent("k1", "gpt", ["h9"]) == []               # a key taken: no batch
        assert [b.state for b in store.batches()] == ["intent", "intent"]
        assert store.batched_hashes() == {"h1", "h2", "h3"} and store.batch_calls("k1") == ["h1", "h2"]
        store.update_batch("k1", state="submitted", batch_id="batch_1", input_file_id="file-1")
        store.update_batch("k2", state="abandoned", reason="never created")
        b1 = store.batches(active_only=True)
        assert [(b.key, b.batch_id, b.input_file_id, b.n_calls) for b in b1] == [("k1", "batch_1", "file-1", 2)]
        assert store.batched_hashes() == {"h1", "h2"}
        store.update_batch("k1", state="collected")
        assert store.batched_hashes() == set() and store.batches(judge="other") == []
        store.record(CallRecord(request_hash="h4", case_id="c", dimension="d", judge="gpt", run=0, status="ok"))
        assert store.add_batch_intent("k4", "gpt", ["h4", "h1"]) == ["h1"]     # h4 is stored ok
        with pytest.raises(ValueError, match="not batch fields: nope"):
            store.update_batch("k1", nope=1)


def test_a_store_of_schema_3_is_read_as_is_and_upgraded_in_place(tmp_path: Path) -> None:
    from consensus_eval.execution.store import SCHEMA_VERSION, Store

    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        store.set_meta("config", {})
        store.set_meta("rubric", {})
    con = sqlite3.connect(db)
    con.execute("DROP TABLE batch_calls")
    con.execute("DROP TABLE batches")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.execute("PRAGMA user_version = 0")        # as a store before schema 8: its version in meta only
    con.commit()
    con.close()
    before = db.read_bytes()
    with Store.open_existing(tmp_path, read_only=True) as store:
        assert store.batches() == [] and store.batched_hashes() == set() and store.batch_calls("x") == []
    assert db.read_bytes() == before
    with Store.open_existing(tmp_path) as store:
        assert store.get_meta("schema_version") == SCHEMA_VERSION == 11
        store.add_batch_intent("k", "gpt", ["h"])
        assert store.batched_hashes() == {"h"}


def test_config_batch_is_not_identity_and_refused_where_it_cannot_work() -> None:
    from pydantic import ValidationError

    from consensus_eval.domain.config import EvalConfig, LLMJudgeConfig

    on = LLMJudgeConfig(name="g", model="openai/gpt-4.1", batch=True, batch_cost_factor=0.5)
    assert on.identity == LLMJudgeConfig(name="g", model="openai/gpt-4.1").identity
    with pytest.raises(ValidationError, match="'deepseek' has none"):
        LLMJudgeConfig(name="d", model="deepseek/deepseek-chat", batch=True)
    with pytest.raises(ValidationError, match="per_case cannot be combined"):
        LLMJudgeConfig(name="g", model="openai/gpt-4.1", batch=True, call="per_case")
    with pytest.raises(ValidationError, match="needs a fixed plan"):
        EvalConfig.model_validate({"important_runs": "adaptive", "judges": [on.model_dump()]})
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        LLMJudgeConfig(name="g", model="openai/gpt-4.1", batch_cost_factor=2)


def test_a_batch_line_is_the_request_the_live_path_sends(rubric: Any) -> None:
    from consensus_eval.domain.cases import Case
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.judges.batch_api import MAX_BYTES, batch_line, encode, read_lines, split
    from consensus_eval.judges.llm import LLMJudge

    case = Case.model_validate(json.loads((ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8")
                                          .splitlines()[0]))
    dim = rubric.dimensions[0]
    messages = render(rubric, dim, case)
    for mode in ("tools", "json", "md_json", "json_schema"):
        judge = LLMJudge(LLMJudgeConfig(name="g", model="openai/gpt-4.1", mode=mode, max_tokens=900,
                                        extra_body={"top_p": 0.5}), rubric)
        line = batch_line(judge, messages, dim.id, 2, "h")
        assert line["custom_id"] == "h" and line["url"] == "/v1/chat/completions" and line["method"] == "POST"
        assert line["body"] == {"model": "gpt-4.1", **judge.request(messages, dim.id), "temperature": 0.0,
                                "max_tokens": 900, "seed": 2, "top_p": 0.5}
    # cut under the provider's limits, in order
    lines = [(str(i), encode({"custom_id": str(i)})) for i in range(7)]
    assert [[h for h, _ in b] for b in split(lines, max_requests=3)] == [["0", "1", "2"], ["3", "4", "5"], ["6"]]
    assert [len(b) for b in split(lines, max_bytes=2 * len(lines[0][1]))] == [2, 2, 2, 1]
    assert len(split(lines)) == 1 and MAX_BYTES == 200 * 1024 * 1024
    # both shapes of an error line are read
    got = list(read_lines(b'{"custom_id": "a", "response": null, "error": {"code": "x", "message": "boom"}}\n'
                          b'not json\n{"custom_id": "b", "response": {"status_code": 429, "body": {"error": '
                          b'{"message": "slow down"}}}}\n'))
    assert [(x.custom_id, x.status_code, x.error, x.ok) for x in got] == [
        ("a", None, "x: boom", False), ("b", 429, "slow down", False)]


# --------------------------------------------------------------------------- submit, collect, resume


def test_submit_then_collect_gives_the_live_judgments_at_half_price(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=3)) as srv:
        _run(cases, _config(srv.url, batch=False), tmp_path / "live")
        live = _calls(tmp_path / "live")
        live_chat = _chat(srv)

        first = _run(cases, _config(srv.url), tmp_path / "b")
        assert [b.n_calls for b in first.progress.batches] == [N_CALLS]
        assert _calls(tmp_path / "b") == {}
        assert {c.status for c in first.consensus} == {"incomplete"}   # never scored as if answered
        assert _chat(srv) == live_chat                                  # nothing was asked live

        second = _run(cases, _config(srv.url), tmp_path / "b")
        assert second.progress.batches == [] and second.progress.done == N_CALLS
        import litellm

        info = litellm.get_model_info("openai/gpt-4.1")
        got = _calls(tmp_path / "b")
        assert set(got) == set(live) and len(got) == N_CALLS   # the same request hashes: batch is not identity
        for h, c in got.items():
            assert c.status == "ok" and c.judgment == live[h].judgment and c.raw == live[h].raw
            assert (c.prompt_tokens, c.completion_tokens, c.cached_tokens) == (
                live[h].prompt_tokens, live[h].completion_tokens, live[h].cached_tokens)
            assert c.cost == pytest.approx(0.5 * live[h].cost)         # OpenAI's batch price
            # ... which is litellm's own batch price of gpt-4.1 (an independent source)
            assert c.cost == pytest.approx(c.prompt_tokens * info["input_cost_per_token_batches"]
                                           + c.completion_tokens * info["output_cost_per_token_batches"])
            assert c.latency_s is None and c.attempts == 1
        assert {c.status for c in second.consensus} == {"ok"}
        assert [b.state for b in _batches(tmp_path / "b")] == ["collected"]

        stats = srv.batches.stats()
        third = _run(cases, _config(srv.url), tmp_path / "b")           # nothing left: nothing asked
        assert third.progress.done == 0 and third.progress.skipped == N_CALLS + N_CASES * 3
        assert srv.batches.stats() == stats and _chat(srv) == live_chat
        # live after batch: the stored judgments are reused (batch is not part of the identity)
        again = _run(cases, _config(srv.url, batch=False), tmp_path / "b")
        assert again.progress.done == 0 and _chat(srv) == live_chat


def test_score_exits_4_while_batches_run_and_no_secret_is_written(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    env = {**os.environ, "BATCH_TEST_KEY": KEY}
    with FakeServer(FakeConfig(seed=4, batch_delay_s=None)) as srv:
        cfg = _write_config(tmp_path / "cfg.yaml", srv.url)
        cmd = ["score", str(cases), "--config", str(cfg), "--out", str(tmp_path / "o")]
        r1 = cli_run(cmd, cwd=ROOT, env=env)
        assert r1.returncode == 4, r1.stdout + r1.stderr
        batch_id = srv.batches.stats()["batches"][0]["id"]
        assert "1 provider batch(es) still running" in r1.stdout and batch_id in r1.stdout
        assert "--wait" in r1.stdout and f"{N_CALLS} calls" in r1.stdout
        statuses = {json.loads(x)["status"] for x in (tmp_path / "o" / "consensus.jsonl").read_text().splitlines()}
        assert statuses == {"incomplete"}
        # the reports say the missing calls are in a running batch, and how to collect them
        md = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
        assert f"其中 {N_CALLS} 次调用在服务商的批处理任务中尚未完成" in md      # the rubric's language is Chinese
        assert f"其中 {N_CALLS} 次调用" in (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
        r2 = cli_run(cmd, cwd=ROOT, env=env)
        assert r2.returncode == 4 and "in_progress" in r2.stdout          # still running: still 4, no new batch
        assert len(srv.batches.stats()["batches"]) == 1
        # the handler reads no request: None stands for it
        asyncio.run_coroutine_threadsafe(srv.batches._complete_all(None), srv._loop).result(30)  # type: ignore[arg-type]
        r3 = cli_run([*cmd, "--wait"], cwd=ROOT, env=env)
        assert r3.returncode == 0, r3.stdout + r3.stderr
        assert f"batch {batch_id} completed: {N_CALLS} ok, 0 failed" in r3.stdout
        assert "批处理" not in (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    for f in (tmp_path / "o").iterdir():
        assert KEY.encode() not in f.read_bytes(), f.name
    for text in (r1.stdout, r1.stderr, r2.stdout, r2.stderr, r3.stdout, r3.stderr):
        assert KEY not in text


# --------------------------------------------------------------------------- kill -9 at every step


@pytest.mark.parametrize("step", ["intent", "upload", "create", "submitted", "line", "collected"])
def test_a_kill_at_any_step_loses_no_batch_and_submits_none_twice(tmp_path: Path, key: str, step: str) -> None:
    from consensus_eval.execution.batch import KILL_ENV

    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    env = {**os.environ, "BATCH_TEST_KEY": KEY}
    with FakeServer(FakeConfig(seed=5)) as srv:
        cfg = _write_config(tmp_path / "cfg.yaml", srv.url)
        cmd = ["score", str(cases), "--config", str(cfg), "--out", str(tmp_path / "o")]
        if step in ("line", "collected"):   # a collection step: submit first (in this process: same code path)
            assert _run(cases, _config(srv.url), tmp_path / "o").progress.batches
        killed = cli_run(cmd, cwd=ROOT, env={**env, KILL_ENV: step})
        assert killed.returncode == -9, killed.stdout + killed.stderr
        done = _run(cases, _config(srv.url), tmp_path / "o", wait=True)   # resume to the end
        assert done.progress.batches == [] and {c.status for c in done.consensus} == {"ok"}
        calls = _calls(tmp_path / "o")
        assert len(calls) == N_CALLS and {c.status for c in calls.values()} == {"ok"}
        asked = _answered(srv)
        assert set(asked) == set(calls) and set(asked.values()) == {1}   # every call in exactly one batch
        created = srv.batches.stats()["batches"]
        assert len(created) == 1   # the batch created before the kill was found by its metadata, not made again
        stored = _batches(tmp_path / "o")
        assert [b.batch_id for b in stored if b.state == "collected"] == [created[0]["id"]]
        if step in ("intent", "upload"):   # never created: abandoned on resume, its calls went back
            assert [b.state for b in stored] == ["abandoned", "collected"]


@pytest.mark.slow
def test_kills_from_outside_at_random_points_lose_nothing_and_duplicate_nothing(tmp_path: Path, key: str) -> None:
    """``score --wait`` killed with SIGKILL at random moments (while it starts, submits, polls or collects),
    then run to the end: every call answered once, by one batch."""
    cases = write_cases(tmp_path / "cases.jsonl", 8)
    env = {**os.environ, "BATCH_TEST_KEY": KEY}
    rng = random.Random(16)
    with FakeServer(FakeConfig(seed=9, batch_delay_s=1.0)) as srv:
        cfg = _write_config(tmp_path / "cfg.yaml", srv.url)
        cmd = [*cli_command(), "score", str(cases), "--config", str(cfg), "--out", str(tmp_path / "o"), "--wait"]
        for _ in range(4):
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(1.0, 6.0))
            if proc.poll() is None:
                proc.kill()
            proc.wait(60)
        done = _run(cases, _config(srv.url), tmp_path / "o", wait=True)   # resume to the end
        assert done.progress.batches == []
        calls = _calls(tmp_path / "o")
        assert len(calls) == 8 * 3 and {c.status for c in calls.values()} == {"ok"}
        asked = _answered(srv)
        assert set(asked) == set(calls) and set(asked.values()) == {1}
        assert not [b for b in _batches(tmp_path / "o") if b.state in ("intent", "submitted")]


def test_dry_run_estimates_a_batch_judge_at_the_batch_price(tmp_path: Path, key: str) -> None:
    from consensus_eval import api

    cases = write_cases(tmp_path / "cases.jsonl", 2)
    live = api.dry_run(api.prepare(cases, _config("http://127.0.0.1:9", batch=False)))[0]
    batch = api.dry_run(api.prepare(cases, _config("http://127.0.0.1:9")))[0]
    assert batch.prompt_tokens == live.prompt_tokens and live.cost
    assert batch.cost == pytest.approx(0.5 * live.cost)
    assert batch.max_cost == pytest.approx(0.5 * present(live.max_cost))
    assert batch.batch_factor == 0.5 and live.batch_factor is None
    from rich.console import Console

    from consensus_eval.output.console import print_estimate

    console = Console(record=True, width=200)
    print_estimate(console, [live, batch])
    assert "costs above are at 0.5 x the live price" in console.export_text()


# --------------------------------------------------------------------------- what a provider does to a batch


def test_an_expired_batch_keeps_its_answers_and_resubmits_the_rest(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=6, batch_expire=1)) as srv:
        res = _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        assert res.progress.batches == [] and {c.status for c in res.consensus} == {"ok"}
        first, second = _batches(tmp_path / "o")
        assert first.state == "expired" and first.provider_status == "expired"
        assert first.reason == f"provider status expired: {N_CALLS // 2} of {N_CALLS} call(s) unanswered, pending again"
        assert second.state == "collected" and second.n_calls == N_CALLS // 2
        made = srv.batches.stats()["batches"]
        assert made[1]["custom_ids"] == made[0]["custom_ids"][N_CALLS // 2:]   # the answered half not asked again
        assert len(_calls(tmp_path / "o")) == N_CALLS


def test_an_invalid_batch_reply_is_asked_again_live(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=7)) as srv:
        _run(cases, _config(srv.url, batch=False), tmp_path / "live")
        live = _calls(tmp_path / "live")
        n_live = _chat(srv)
        srv.cfg.batch_p_invalid = 0.4
        res = _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        invalid = {e["case"] + "/" + e["dim"] for e in srv.log if e.get("fault") == "batch_invalid"}
        asked_live = [e for e in srv.log[n_live:] if "batch" not in e]
        assert invalid and len(asked_live) == len(invalid)            # one live ask per invalid reply
        assert {e["case"] + "/" + e["dim"] for e in asked_live} == invalid
        assert {c.status for c in res.consensus} == {"ok"}
        calls = _calls(tmp_path / "o")
        for h, c in calls.items():
            assert c.status == "ok" and c.judgment == live[h].judgment
            if f"{c.case_id}/{c.dimension}" in invalid:   # the batch reply plus the live one
                assert c.attempts == 2 and c.prompt_tokens > live[h].prompt_tokens
                assert c.cost > live[h].cost
            else:
                assert c.attempts == 1 and c.cost == pytest.approx(0.5 * live[h].cost)
    assert n_live == N_CALLS


def test_error_lines_fail_with_their_reason_and_are_resubmitted_by_the_next_score(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=8, batch_p_line_error=0.5)) as srv:
        _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        failed = {h for h, c in _calls(tmp_path / "o").items() if c.status == "failed"}
        assert failed and len(srv.batches.stats()["batches"]) == 1     # not resubmitted in the same run
        for h in failed:
            c = _calls(tmp_path / "o")[h]
            assert c.error_kind == "server_error"
            assert c.error == "batch line failed: server_error: fake server: injected line error"
        _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        second = srv.batches.stats()["batches"][1]
        assert set(second["custom_ids"]) == failed                       # exactly the failed calls, again


def test_a_batch_the_provider_fails_stores_its_calls_failed_and_the_next_score_retries(tmp_path: Path,
                                                                                      key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=10, batch_fail=1)) as srv:
        res = _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        calls = _calls(tmp_path / "o")
        assert len(calls) == N_CALLS and {c.status for c in calls.values()} == {"failed"}
        batch_id = srv.batches.stats()["batches"][0]["id"]
        assert {(c.error_kind, c.error) for c in calls.values()} == {(
            "bad_request", f"batch {batch_id} failed at the provider: invalid_request: fake server: the input "
                           "file failed validation")}
        assert len(srv.batches.stats()["batches"]) == 1              # not resubmitted in a loop
        assert [b.state for b in _batches(tmp_path / "o")] == ["failed"] and res.progress.failed == N_CALLS
        _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        assert {c.status for c in _calls(tmp_path / "o").values()} == {"ok"}
        assert [b.state for b in _batches(tmp_path / "o")] == ["failed", "collected"]


def test_calls_over_the_provider_limit_go_in_several_batches(tmp_path: Path, key: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import consensus_eval.judges.batch_api as provider

    monkeypatch.setattr(provider, "MAX_REQUESTS", 5)
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=12)) as srv:
        first = _run(cases, _config(srv.url), tmp_path / "o")
        assert [b.n_calls for b in first.progress.batches] == [5, 5, 2]
        made = srv.batches.stats()["batches"]
        assert len({m["metadata"]["consensus_eval_batch"] for m in made}) == 3    # each its own key
        _run(cases, _config(srv.url), tmp_path / "o")
        assert {c.status for c in _calls(tmp_path / "o").values()} == {"ok"} and set(_answered(srv).values()) == {1}


def test_a_batch_cancelled_at_the_provider_gives_its_calls_back(tmp_path: Path, key: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=13, batch_delay_s=None)) as srv:
        _run(cases, _config(srv.url), tmp_path / "o")
        (bid,) = srv.batches.batches
        srv.batches.batches[bid].update(status="cancelled")          # cancelled from the provider's dashboard
        again = _run(cases, _config(srv.url), tmp_path / "o")
        first, second = _batches(tmp_path / "o")
        assert first.state == "cancelled" and first.reason == (
            f"provider status cancelled: {N_CALLS} of {N_CALLS} call(s) unanswered, pending again")
        assert second.state == "submitted" and [b.key for b in again.progress.batches] == [second.key]
        # the handler reads no request: None stands for it
        asyncio.run_coroutine_threadsafe(srv.batches._complete_all(None), srv._loop).result(30)  # type: ignore[arg-type]
        _run(cases, _config(srv.url), tmp_path / "o")
        assert {c.status for c in _calls(tmp_path / "o").values()} == {"ok"}


def test_find_pages_through_the_providers_list_and_stops_at_older_batches(rubric: Any, key: str) -> None:
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.judges.batch_api import METADATA_KEY, BatchAPI
    from consensus_eval.judges.llm import LLMJudge

    with FakeServer(FakeConfig(batch_delay_s=None)) as srv:
        judge = LLMJudge(LLMJudgeConfig(name="g", model="openai/gpt-4.1", api_base=f"{srv.url}/v1",
                                        api_key_env="BATCH_TEST_KEY", batch=True), rubric)
        api = BatchAPI(judge)

        async def go() -> tuple[list[str], list[tuple[str | None, int]]]:
            ids = []
            for i in range(5):
                fid = await api.upload(b'{"custom_id": "x"}\n', f"k{i}.jsonl")
                ids.append(await api.create(fid, f"k{i}"))
            found = []
            for k, since in (("k0", None), ("k9", None), ("k0", time.time() + 60)):
                before = srv.batches.http_requests
                found.append((await api.find(k, page=2, since=since), srv.batches.http_requests - before))
            return ids, found

        ids, found = asyncio.run(go())
        # newest first, 2 a page: k0 is on the third page; a key nobody has reads every page; batches
        # older than `since` end the search on the first page
        assert found == [(ids[0], 3), (None, 3), (None, 1)]
        assert [b["metadata"][METADATA_KEY] for b in srv.batches.stats()["batches"]] == [f"k{i}" for i in range(5)]


def test_two_runs_into_one_folder_at_once_submit_each_call_once(tmp_path: Path, key: str) -> None:
    from consensus_eval import api

    cases = write_cases(tmp_path / "cases.jsonl", N_CASES)
    with FakeServer(FakeConfig(seed=14)) as srv:
        async def both() -> None:
            await asyncio.gather(*(api.run_async(api.prepare(cases, _config(srv.url)), tmp_path / "o", n_boot=0)
                                   for _ in range(2)))

        asyncio.run(both())
        assert set(_answered(srv).values()) == {1} and len(_answered(srv)) == N_CALLS
        _run(cases, _config(srv.url), tmp_path / "o", wait=True)
        assert {c.status for c in _calls(tmp_path / "o").values()} == {"ok"} and set(_answered(srv).values()) == {1}


def test_a_batch_that_cannot_be_uploaded_fails_its_calls_with_the_reason(tmp_path: Path, key: str) -> None:
    import socket

    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cases = write_cases(tmp_path / "cases.jsonl", 1)
    res = _run(cases, _config(f"http://127.0.0.1:{port}"), tmp_path / "o")
    calls = _calls(tmp_path / "o")
    assert len(calls) == 3 and res.progress.batches == [] and res.progress.failed == 3
    (c,) = {(x.error_kind, x.error) for x in calls.values()}
    assert c[0] == "connection_refused" and c[1].startswith("batch not submitted, failed uploading its file: "
                                                             "uploading the batch file: connection refused")
    assert [b.state for b in _batches(tmp_path / "o")] == ["abandoned"] and KEY not in c[1]


def test_a_config_file_asking_batch_of_a_provider_without_one_names_the_file_and_judge(tmp_path: Path) -> None:
    from consensus_eval import InputError
    from consensus_eval.domain.config import load_config

    path = tmp_path / "cfg.yaml"
    path.write_text("judges:\n  - name: ds\n    model: deepseek/deepseek-chat\n    batch: true\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_config(path)
    assert str(path) in str(e.value) and "judges[0 ds]: batch: true needs a provider" in str(e.value)


def test_cached_tokens_of_batch_replies_are_recorded_and_billed_at_the_cache_rate_of_the_batch_price(
        tmp_path: Path, key: str) -> None:
    import litellm

    info = litellm.get_model_info("openai/gpt-4.1")
    cases = write_cases(tmp_path / "cases.jsonl", 8)
    with FakeServer(FakeConfig(seed=15, prompt_cache=True)) as srv:
        _run(cases, _config(srv.url), tmp_path / "o", wait=True)
    calls = list(_calls(tmp_path / "o").values())
    assert sum(c.cached_tokens or 0 for c in calls) > 0     # the fake's OpenAI-style cache served later lines
    for c in calls:
        cached = c.cached_tokens or 0
        live_price = ((c.prompt_tokens - cached) * info["input_cost_per_token"]
                      + cached * present(info["cache_read_input_token_cost"])
                      + c.completion_tokens * info["output_cost_per_token"])
        assert c.cost == pytest.approx(0.5 * live_price)


def test_the_batch_apis_requests_go_through_the_judges_retry_policy(rubric: Any, key: str) -> None:
    """Uploading a batch file: a 503 and a 429 (Retry-After 0.2 s) are retried, with the live calls' retry
    loop (consensus_eval.judges.retry.retrying) and the judge's backoff; a 401 is not retried; the last of
    max_retries + 1 transient failures says what was being done and how many attempts were made.
    (``x-should-retry: false`` turns off the openai SDK's own retries under litellm's files API, which
    would otherwise retry each 5xx and 429 twice more inside each of these attempts.)"""
    import httpx
    import respx

    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.judges.batch_api import BatchAPI
    from consensus_eval.judges.llm import LLMJudge
    from consensus_eval.judges.retry import HTTPFailure

    base = "http://127.0.0.1:9/v1"
    judge = LLMJudge(LLMJudgeConfig(name="g", model="openai/gpt-4.1", api_base=base, api_key_env="BATCH_TEST_KEY",
                                    batch=True, max_retries=2), rubric)
    api = BatchAPI(judge)
    made = {"id": "file-1", "object": "file", "bytes": 3, "created_at": 0, "filename": "a.jsonl",
            "purpose": "batch", "status": "processed"}

    def upload(replies: list[httpx.Response]) -> tuple[str | HTTPFailure, list[float]]:
        times: list[float] = []

        def answer(request: httpx.Request) -> httpx.Response:
            times.append(time.monotonic())
            reply = replies[len(times) - 1]
            reply.headers["x-should-retry"] = "false"
            return reply

        with respx.mock(using="httpx") as mock:
            mock.post(f"{base}/files").mock(side_effect=answer)
            try:
                return asyncio.run(api.upload(b"{}\n", "a.jsonl")), times
            except HTTPFailure as e:
                return e, times

    got, times = upload([httpx.Response(503, json={"error": {"message": "busy"}}),
                         httpx.Response(429, json={"error": {"message": "slow"}}, headers={"Retry-After": "0.2"}),
                         httpx.Response(200, json=made)])
    assert got == "file-1" and len(times) == 3
    assert times[2] - times[1] >= 0.2  # the server's Retry-After, not the test's millisecond backoff
    got, times = upload([httpx.Response(401, json={"error": {"message": "no " + key}})])
    assert isinstance(got, HTTPFailure) and got.kind == "authentication" and len(times) == 1
    assert str(got).startswith("uploading the batch file: authentication failed (401), not retried: ")
    assert key not in str(got)
    got, times = upload([httpx.Response(500, json={"error": {"message": "down"}})] * 3)
    assert isinstance(got, HTTPFailure) and got.kind == "server_error" and len(times) == 3
    assert str(got).startswith("uploading the batch file: server error (500), gave up after 3 attempt(s): ")
