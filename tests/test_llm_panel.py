"""The LLM judge panel end to end, with every provider call mocked at the HTTP layer (respx)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from consensus_eval import api as evaluate
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig, Mode
from consensus_eval.domain.judgment import CallOutcome
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.store import Store
from consensus_eval.judges.llm import LLMJudge
from consensus_eval.judges.retry import retry_after_s
from tests.conftest import EXAMPLES, FAKE_KEY, PANEL, write_config
from tests.fakellm import case_of, chat_response, dimension_of, make_reply

URL_A = "http://judge-a.test/v1/chat/completions"
URL_B = "http://judge-b.test/v1/chat/completions"
URL_DS = "https://api.deepseek.com/beta/chat/completions"


def _body(request: httpx.Request) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.content)
    return body


def honest_judge(seed: int) -> Callable[[httpx.Request], httpx.Response]:
    """A side effect answering every request with a valid, reproducible judgment."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = _body(request)
        dim, case = dimension_of(body), case_of(body)
        rng = random.Random(f"{seed}-{case}-{dim}")
        return httpx.Response(200, json=chat_response(body, make_reply(dim, rng)))

    return answer


def _cases(tmp_path: Path, n: int, important: bool = False) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    lines = [line for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()][:n]
    out = []
    for line in lines:
        d = json.loads(line)
        d["important"] = important
        out.append(json.dumps(d, ensure_ascii=False))
    p = tmp_path / "cases.jsonl"
    p.write_text("\n".join(out) + "\n", encoding="utf-8")
    return p


def _judge(rubric: Rubric, mode: Mode = "tools", **kw: Any) -> LLMJudge:
    cfg = LLMJudgeConfig(name="j", model="openai/fake", api_base="http://judge-a.test/v1", api_key_env="JUDGE_A_KEY",
                      mode=mode, **kw)
    return LLMJudge(cfg, rubric)


def _one_call(rubric: Rubric, judge: LLMJudge, dim: str = "accuracy") -> CallOutcome:
    case = Case(id="c1", conversation="医生：血糖多少？\n患者：空腹9.6。", record="主诉：多饮3年")
    d = rubric.dimension(dim)
    return asyncio.run(judge.judge(case, d, render(rubric, d, case)))


# --------------------------------------------------------------------------- modes and re-asks


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_each_mode_returns_a_typed_judgment(rubric: Rubric, api_keys: str, mode: Mode) -> None:
    reply = make_reply("accuracy", random.Random(1), n=2)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), reply)))
        out = _one_call(rubric, _judge(rubric, mode=mode, input_cost_per_token=1e-6, output_cost_per_token=2e-6))
    assert out.status == "ok", out.error
    assert route.call_count == 1 and out.attempts == 1
    assert out.judgment is not None
    assert [d.type for d in out.judgment.deductions] == [d["type"] for d in reply["deductions"]]
    assert out.prompt_tokens == 1000 and out.completion_tokens == 200
    assert out.cost == pytest.approx(1000 * 1e-6 + 200 * 2e-6)
    body = _body(route.calls[0].request)
    assert ("tools" in body) == (mode == "tools")


def test_malformed_json_then_valid_is_one_reask(rubric: Rubric, api_keys: str) -> None:
    good = make_reply("accuracy", random.Random(2), n=1)
    replies: Iterator[dict[str, Any] | str] = iter(['{"deductions": [', good])
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), next(replies))))
        out = _one_call(rubric, _judge(rubric, mode="json", input_cost_per_token=1e-6, output_cost_per_token=0))
    assert out.status == "ok" and route.call_count == 2 and out.attempts == 2
    # the re-ask tells the model what was wrong, after its bad reply
    second = _body(route.calls[1].request)["messages"]
    assert len(second) > len(_body(route.calls[0].request)["messages"])
    # tokens and cost cover both attempts
    assert out.prompt_tokens == 2000 and out.cost == pytest.approx(2000 * 1e-6)


def test_unknown_deduction_type_is_rejected_and_reasked(rubric: Rubric, api_keys: str) -> None:
    bad = make_reply("accuracy", random.Random(3), n=1)
    bad["deductions"][0]["type"] = "made_up_type"
    good = make_reply("accuracy", random.Random(3), n=1)
    replies = iter([bad, good])
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), next(replies))))
        out = _one_call(rubric, _judge(rubric))
    assert out.status == "ok" and route.call_count == 2
    assert "made_up_type" in json.dumps(_body(route.calls[1].request), ensure_ascii=False)
    assert out.judgment is not None
    assert out.judgment.deductions[0].type == good["deductions"][0]["type"]


def test_points_outside_a_range_type_are_rejected(rubric: Rubric, api_keys: str) -> None:
    bad = {"deductions": [{"category": "chief_complaint", "type": "cc_nonstandard", "points": 5,
                           "evidence": "x", "reason": "y"}],
           "fixed_penalties": [], "score": 30, "stars": 4, "comment": ""}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), bad)))
        out = _one_call(rubric, _judge(rubric, max_reasks=1), dim="completeness")
    assert out.status == "failed" and out.judgment is None
    assert route.call_count == 2  # one call + one re-ask, then given up
    assert out.error_kind == "invalid_reply" and out.attempts == 2
    assert out.error is not None
    assert out.error.startswith("invalid reply, failed validation after 2 attempt(s): ")
    assert "cc_nonstandard" in out.error
    assert out.raw and '"points": 5' in out.raw


# --------------------------------------------------------------------------- re-asks under the retry policy


def _scripted(steps: list[str | int], seen: list[int]) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
    """A side effect playing ``steps`` in order, then valid replies: "hang" (sleeps far past the
    timeout), an int (that HTTP status), "bad" (a reply that fails validation), "good". ``seen``
    gets the number of messages of every request as it arrives (respx records a call only once
    answered: not one cut by the timeout)."""
    good = make_reply("accuracy", random.Random(8), n=1)
    script = iter(steps)

    async def answer(r: httpx.Request) -> httpx.Response:
        seen.append(len(_body(r)["messages"]))
        step = next(script, "good")
        if step == "hang":
            await asyncio.sleep(30)
        if isinstance(step, int):
            return httpx.Response(step, json={"error": {"message": f"status {step}"}})
        return httpx.Response(200, json=chat_response(_body(r), '{"deductions": [' if step == "bad" else good))

    return answer


def test_a_reask_after_a_slow_first_ask_is_still_made(rubric: Rubric, api_keys: str) -> None:
    """The root cause of a "reply failed validation after 1 attempt(s)": given `timeout`,
    instructor also stops re-asking once that many seconds have passed since the call began
    (tenacity's stop_after_delay). A first ask that hung until the hard timeout and was retried has
    used that time up, so its invalid reply was never re-asked. instructor no longer sees `timeout`."""
    seen: list[int] = []
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=_scripted(["hang", "bad"], seen))
        out = _one_call(rubric, _judge(rubric, mode="json", timeout_s=0.3, max_reasks=2))
    assert out.status == "ok", out.error
    assert len(seen) == out.attempts == 3  # hang (cut, retried), invalid reply, re-ask
    assert seen[0] == seen[1] < seen[2]


def test_hangs_and_5xx_during_a_reask_are_retried_like_a_first_ask(rubric: Rubric, api_keys: str) -> None:
    seen: list[int] = []
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=_scripted(["bad", "hang", 503, 429, "bad", 502, "hang"], seen))
        out = _one_call(rubric, _judge(rubric, mode="json", timeout_s=0.3, max_retries=4, max_reasks=2))
    assert out.status == "ok", out.error
    assert len(seen) == out.attempts == 8  # ask; re-ask 1 (3 retries); re-ask 2 (2 retries)
    assert seen[0] < seen[1] == seen[2] == seen[3] == seen[4] < seen[5] == seen[6] == seen[7]


def test_a_reask_that_runs_out_of_retries_fails_with_its_own_kind(rubric: Rubric, api_keys: str) -> None:
    seen: list[int] = []
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=_scripted(["bad", "hang", 503, "hang"], seen))
        out = _one_call(rubric, _judge(rubric, mode="json", timeout_s=0.3, max_retries=2, max_reasks=2))
    assert out.status == "failed" and len(seen) == out.attempts == 4
    assert out.error_kind == "timeout"  # the last failure's kind; `invalid_reply` only when the re-asks run out
    assert out.error is not None
    assert out.error.startswith("timeout, gave up after 3 attempt(s): ") and out.error.endswith("(on re-ask 1 of 2)")


def test_a_bad_request_on_a_reask_is_a_bad_request(rubric: Rubric, api_keys: str) -> None:
    """A re-ask makes the prompt longer: one over the context window fails as bad_request, at once."""
    seen: list[int] = []
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=_scripted(["bad", 400], seen))
        out = _one_call(rubric, _judge(rubric, mode="json"))
    assert out.status == "failed" and len(seen) == out.attempts == 2
    assert out.error is not None
    assert out.error_kind == "bad_request" and out.error.startswith("bad request (400), not retried: ")


# --------------------------------------------------------------------------- HTTP failures


def test_429_with_retry_after_is_honoured(rubric: Rubric, api_keys: str) -> None:
    reply = make_reply("accuracy", random.Random(4))
    responses = iter([httpx.Response(429, headers={"Retry-After": "0.15"}, json={"error": {"message": "slow down"}})])

    def answer(r: httpx.Request) -> httpx.Response:
        return next(responses, None) or httpx.Response(200, json=chat_response(_body(r), reply))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(side_effect=answer)
        start = time.monotonic()
        out = _one_call(rubric, _judge(rubric))
        waited = route.calls[1].request, time.monotonic() - start
    assert out.status == "ok" and out.attempts == 2 and route.call_count == 2
    assert waited[1] >= 0.15  # the backoff alone would have been <= 0.01 s


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried(rubric: Rubric, api_keys: str, status: int) -> None:
    reply = make_reply("accuracy", random.Random(5))
    responses = iter([httpx.Response(status, json={"error": {"message": "boom"}})] * 2)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(
            side_effect=lambda r: next(responses, None) or httpx.Response(200, json=chat_response(_body(r), reply)))
        out = _one_call(rubric, _judge(rubric))
    assert out.status == "ok" and out.attempts == 3 and route.call_count == 3


def test_transport_timeout_is_retried(rubric: Rubric, api_keys: str) -> None:
    reply = make_reply("accuracy", random.Random(6))
    state = {"n": 0}

    def answer(r: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            raise httpx.ReadTimeout("read timed out", request=r)
        return httpx.Response(200, json=chat_response(_body(r), reply))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=answer)
        out = _one_call(rubric, _judge(rubric))
    assert out.status == "ok" and out.attempts == 2


def test_hard_timeout_cuts_a_hanging_call(rubric: Rubric, api_keys: str) -> None:
    reply = make_reply("accuracy", random.Random(7))
    state = {"n": 0}

    async def answer(r: httpx.Request) -> httpx.Response:
        state["n"] += 1
        if state["n"] == 1:
            await asyncio.sleep(60)  # hangs far past timeout_s
        return httpx.Response(200, json=chat_response(_body(r), reply))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=answer)
        start = time.monotonic()
        out = _one_call(rubric, _judge(rubric, timeout_s=0.3))
    assert out.status == "ok" and out.attempts == 2
    # the hang was cut, not waited out (a bound on the 60 s hang, not a deadline: load slows the 0.3 s timeout by
    # seconds, never by a minute)
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(rubric: Rubric, api_keys: str, status: int) -> None:
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(return_value=httpx.Response(status, json={"error": {"message": "no"}}))
        out = _one_call(rubric, _judge(rubric))
    assert out.status == "failed" and route.call_count == 1 and out.attempts == 1
    assert out.error is not None
    assert "not retried" in out.error and str(status) in out.error
    assert out.error_kind == {400: "bad_request", 401: "authentication", 404: "not_found"}[status]


def test_persistent_5xx_gives_up_after_max_retries(rubric: Rubric, api_keys: str) -> None:
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(return_value=httpx.Response(503, json={"error": {"message": "down"}}))
        out = _one_call(rubric, _judge(rubric, max_retries=2))
    assert out.status == "failed" and route.call_count == 3 and out.attempts == 3
    assert out.error_kind == "server_error"
    assert out.error is not None
    assert out.error.startswith("server error (503), gave up after 3 attempt(s): ")


def test_retry_after_parsing() -> None:
    class E(Exception):
        def __init__(self, headers: dict[str, str]) -> None:
            self.response = httpx.Response(429, headers=headers)

    assert retry_after_s(E({"Retry-After": "2"})) == 2
    assert retry_after_s(E({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(E({})) is None
    assert retry_after_s(E({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0  # in the past


# --------------------------------------------------------------------------- the panel, end to end


def _mock_panel(mock: respx.MockRouter,
                seeds: tuple[int, int, int] = (1, 2, 3)) -> tuple[respx.Route, respx.Route, respx.Route]:
    return (mock.post(URL_A).mock(side_effect=honest_judge(seeds[0])),
            mock.post(URL_B).mock(side_effect=honest_judge(seeds[1])),
            mock.post(URL_DS).mock(side_effect=honest_judge(seeds[2])))


def test_panel_end_to_end_and_resume(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 4)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    out = tmp_path / "out"
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        routes = _mock_panel(mock)
        prep = evaluate.prepare(cases, cfg)
        progress = evaluate.run(prep, out).progress
    assert progress is not None
    # 4 cases x 3 dimensions x 3 LLM judges, plus the rules judge once per case and dimension
    assert [r.call_count for r in routes] == [12, 12, 12]
    assert progress.done == 48 and progress.failed == 0
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 48 and {r["judge"] for r in rows} == {"judge-a", "judge-b", "deepseek", "rules"}
    assert all(r["status"] == "ok" for r in rows)
    # the panel score of a case is the mean of the judges' re-derived scores
    csv_lines = (out / "consensus.csv").read_text(encoding="utf-8").splitlines()
    header = csv_lines[0].split(",")
    first = dict(zip(header, csv_lines[1].split(","), strict=False))  # a naive split: only the first columns are read
    acc = [r["score"] for r in rows if r["case_id"] == first["case_id"] and r["dimension"] == "accuracy"]
    assert float(first["accuracy"]) == pytest.approx(sum(acc) / 4, abs=1e-4)
    assert first["n_judges"] == "4"
    # deepseek is priced by litellm's bundled map: cost recorded from usage
    ds = [r for r in rows if r["judge"] == "deepseek"]
    assert all(r["cost"] and r["cost"] > 0 for r in ds)

    # a second run resumes: zero calls
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        routes = _mock_panel(mock)
        progress = evaluate.run(evaluate.prepare(cases, cfg), out).progress
    assert progress is not None
    assert [r.call_count for r in routes] == [0, 0, 0] and progress.done == 0 and progress.skipped == 48


def test_swapping_one_model_reruns_only_that_judge(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 2)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        _mock_panel(mock)
        evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out")
    cfg.write_text(cfg.read_text().replace("model: openai/fake-a", "model: openai/fake-a2"))
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        routes = _mock_panel(mock)
        evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out")
    assert [r.call_count for r in routes] == [6, 0, 0]
    models = {json.loads(x)["model"] for x in (tmp_path / "out" / "judgments.jsonl").read_text().splitlines()}
    assert "openai/fake-a2" in models and "openai/fake-a" not in models


def test_editing_the_rubric_or_prompt_changes_every_hash(tmp_path: Path, api_keys: str, rubric: Rubric) -> None:
    from consensus_eval.execution.plan import request_hash

    judge = _judge(rubric)
    case = Case(id="c", conversation="医生：你好", record="主诉：多饮3年")
    d = rubric.dimension("accuracy")
    msgs = render(rubric, d, case)
    h = request_hash(judge, rubric, msgs, 0, "accuracy")
    assert request_hash(judge, rubric, msgs, 1, "accuracy") != h  # run index
    edited = [*msgs[:1], {"role": "user", "content": msgs[1]["content"] + " "}]
    assert request_hash(judge, rubric, edited, 0, "accuracy") != h  # prompt
    data = rubric.model_dump()
    data["dimensions"][0]["categories"][0]["types"][0]["points"] = 3
    other = type(rubric).model_validate(data)
    assert request_hash(judge, other, msgs, 0, "accuracy") != h  # rubric
    tuned = LLMJudge(judge.config.model_copy(update={"concurrency": 99, "rpm": 5}), rubric)
    assert request_hash(tuned, rubric, msgs, 0, "accuracy") == h  # throughput settings do not matter


def test_persistent_failure_is_recorded_and_excluded(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 2)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(
            return_value=httpx.Response(200, json=chat_response({"tools": [{"function": {"name": "X"}}]}, "not json")))
        mock.post(URL_B).mock(side_effect=honest_judge(2))
        mock.post(URL_DS).mock(side_effect=honest_judge(3))
        progress = evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out").progress
    assert progress is not None
    assert progress.failed == 6
    rows = [json.loads(x) for x in (tmp_path / "out" / "judgments.jsonl").read_text().splitlines()]
    failed = [r for r in rows if r["status"] == "failed"]
    assert {r["judge"] for r in failed} == {"judge-a"} and all(r["score"] is None and r["error"] for r in failed)
    with Store(tmp_path / "out" / "results.sqlite") as store:  # a reply that never validates: that call's failure
        assert {(r.error_kind, r.attempts) for r in store.calls() if r.status == "failed"} == {("invalid_reply", 3)}
    cons = [json.loads(x) for x in (tmp_path / "out" / "consensus.jsonl").read_text().splitlines()]
    for c in cons:
        assert "judge-a" not in c["judge_totals"] and c["n_judges"] == 3
        scores = [c["judges"][j]["accuracy"]["mean"] for j in ("judge-b", "deepseek", "rules")]
        assert c["scores"]["accuracy"] == pytest.approx(sum(scores) / 3)


def test_failed_calls_are_retried_on_the_next_run(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 1)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(return_value=httpx.Response(401, json={"error": {"message": "bad key"}}))
        mock.post(URL_B).mock(side_effect=honest_judge(2))
        mock.post(URL_DS).mock(side_effect=honest_judge(3))
        first = evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out").progress
        assert first is not None and first.failed == 3
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        routes = _mock_panel(mock)
        progress = evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out").progress
    assert progress is not None
    assert [r.call_count for r in routes] == [3, 0, 0] and progress.failed == 0


def test_interrupted_run_resumes_without_repeating_a_stored_call(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 4)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    prep = evaluate.prepare(cases, cfg)
    seen: list[str] = []

    def counting(seed: int) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
        inner = honest_judge(seed)

        async def answer(r: httpx.Request) -> httpx.Response:
            b = _body(r)
            seen.append(f"{r.url.host}|{case_of(b)}|{dimension_of(b)}")
            await asyncio.sleep(0.002)  # a reply takes a while, as over a network: the run can be cut mid-way
            return inner(r)

        return answer

    async def interrupted() -> int:
        from consensus_eval.execution.execute import execute

        with Store(tmp_path / "out" / "results.sqlite") as store:
            store.set_plan(c.planned for c in prep.calls)
            task = asyncio.create_task(execute(prep.calls, prep.judges, prep.rubric, store))
            while len(store.done_hashes()) < 15:
                await asyncio.sleep(0.005)
            task.cancel()  # as Ctrl-C does
            with pytest.raises(asyncio.CancelledError):
                await task
            return len(store.done_hashes())

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=counting(1))
        mock.post(URL_B).mock(side_effect=counting(2))
        mock.post(URL_DS).mock(side_effect=counting(3))
        stored = asyncio.run(interrupted())
        with Store(tmp_path / "out" / "results.sqlite") as store:
            hosts = {"judge-a": "judge-a.test", "judge-b": "judge-b.test", "deepseek": "api.deepseek.com"}
            stored_keys = {f"{hosts[r.judge]}|{r.case_id}|{r.dimension}" for r in store.calls() if r.status == "ok"
                           and r.judge in hosts}
        n_first = len(seen)
        assert 15 <= stored < 48
        progress = evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out").progress
    assert progress is not None
    assert progress.skipped == stored and progress.done == 48 - stored
    second = seen[n_first:]
    assert not stored_keys & set(second)  # no stored judgment was asked for again
    assert len(second) == len(set(second)) == 36 - len(stored_keys)  # each missing one asked once
    with Store(tmp_path / "out" / "results.sqlite") as store:
        assert len(store.done_hashes()) == 48


# --------------------------------------------------------------------------- limits and secrets


def test_concurrency_and_rpm_limits_are_respected(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 6)
    judges = """\
  - name: judge-a
    model: openai/fake-a
    api_base: http://judge-a.test/v1
    api_key_env: JUDGE_A_KEY
    concurrency: 3
    input_cost_per_token: 0
    output_cost_per_token: 0
  - name: judge-b
    model: openai/fake-b
    api_base: http://judge-b.test/v1
    api_key_env: JUDGE_B_KEY
    concurrency: 8
    rpm: 600
    input_cost_per_token: 0
    output_cost_per_token: 0
"""
    cfg = write_config(tmp_path / "c.yaml", judges)
    in_flight = {"judge-a.test": 0, "judge-b.test": 0}
    peak = dict(in_flight)
    starts: list[float] = []

    def slow(seed: int) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
        inner = honest_judge(seed)

        async def answer(r: httpx.Request) -> httpx.Response:
            host = r.url.host
            in_flight[host] += 1
            peak[host] = max(peak[host], in_flight[host])
            if host == "judge-b.test":
                starts.append(time.monotonic())
            await asyncio.sleep(0.05)
            in_flight[host] -= 1
            return inner(r)

        return answer

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=slow(1))
        mock.post(URL_B).mock(side_effect=slow(2))
        # warm litellm up first: its first call spends ~0.5 s setting up after the rate limiter let it
        # through, which would bunch the first requests together at the server
        evaluate.run(evaluate.prepare(_cases(tmp_path / "warm", 1), cfg), tmp_path / "warm-out")
        starts.clear()
        peak.update({"judge-a.test": 0, "judge-b.test": 0})
        evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out")
    assert peak["judge-a.test"] == 3  # 18 calls, never more than 3 at once
    # rpm 600 = 10 per second: 18 calls need at least ~0.8 s after the first 10
    assert len(starts) == 18
    # (0.9 s, not 1 s: a request reaches the server a few ms after the limiter let it through)
    in_first_second = sum(1 for s in starts if s - starts[0] < 0.9)
    assert in_first_second <= 10, [round(s - starts[0], 2) for s in starts]
    assert starts[-1] - starts[0] >= 0.9


def test_waiting_for_the_rate_limiter_is_not_part_of_the_timeout(rubric: Rubric, api_keys: str) -> None:
    """rpm 60 lets one request a second through; a call waiting its turn has not timed out (before,
    the hard timeout also covered the limiter's wait: such a call counted a failed attempt that never
    reached the server, and slept a backoff)."""
    reply = make_reply("accuracy", random.Random(9))
    judge = _judge(rubric, rpm=60, timeout_s=0.5)
    d = rubric.dimension("accuracy")
    cases = [Case(id=f"c{i}", conversation="医生：你好", record="主诉：多饮3年") for i in range(3)]

    async def three() -> list[CallOutcome]:
        return await asyncio.gather(*(judge.judge(c, d, render(rubric, d, c)) for c in cases))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), reply)))
        start = time.monotonic()
        outs = asyncio.run(three())
    assert [o.status for o in outs] == ["ok"] * 3 and [o.attempts for o in outs] == [1, 1, 1]
    assert route.call_count == 3 and time.monotonic() - start >= 1.9  # the limiter did make them wait


def test_api_key_never_reaches_store_outputs_or_logs(tmp_path: Path, api_keys: str, caplog: pytest.LogCaptureFixture,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    cases = _cases(tmp_path, 2)
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route_a = mock.post(URL_A).mock(
            return_value=httpx.Response(401, json={"error": {"message": f"invalid key {FAKE_KEY}"}}))
        mock.post(URL_B).mock(side_effect=honest_judge(2))
        mock.post(URL_DS).mock(side_effect=honest_judge(3))
        evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out")
    # the key was sent to the provider (so the test is meaningful) ...
    assert route_a.calls[0].request.headers["authorization"] == f"Bearer {FAKE_KEY}"
    # ... but is nowhere in what we keep
    for f in (tmp_path / "out").iterdir():
        assert FAKE_KEY.encode() not in f.read_bytes(), f.name
    db = sqlite3.connect(tmp_path / "out" / "results.sqlite")
    dump = "\n".join(db.iterdump())
    assert FAKE_KEY not in dump and "invalid key ***" in dump
    captured = capsys.readouterr()
    assert FAKE_KEY not in captured.out + captured.err + caplog.text


def test_missing_key_fails_fast_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from consensus_eval import InputError

    monkeypatch.delenv("JUDGE_A_KEY", raising=False)
    monkeypatch.setenv("JUDGE_B_KEY", "x")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "x")
    cfg = write_config(tmp_path / "panel.yaml", PANEL)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A)
        with pytest.raises(InputError, match="JUDGE_A_KEY is not set"):
            evaluate.prepare(_cases(tmp_path, 1), cfg)
    assert route.call_count == 0


def test_important_cases_get_distinct_runs_that_are_averaged(tmp_path: Path, api_keys: str) -> None:
    cases = _cases(tmp_path, 1, important=True)
    judges = """\
  - name: judge-a
    model: openai/fake-a
    api_base: http://judge-a.test/v1
    api_key_env: JUDGE_A_KEY
    input_cost_per_token: 0
    output_cost_per_token: 0
"""
    cfg = write_config(tmp_path / "c.yaml", judges)

    def by_seed(r: httpx.Request) -> httpx.Response:  # a stricter judgment on each later run: 0, 1, 2 deductions
        body = _body(r)
        return httpx.Response(200, json=chat_response(body, make_reply(dimension_of(body), random.Random(0),
                                                                       n=body["seed"])))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = mock.post(URL_A).mock(side_effect=by_seed)
        evaluate.run(evaluate.prepare(cases, cfg), tmp_path / "out")
    seeds = sorted(_body(c.request)["seed"] for c in route.calls)
    assert seeds == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # 3 dimensions x important_runs 3, each run its own request
    [c] = [json.loads(x) for x in (tmp_path / "out" / "consensus.jsonl").read_text().splitlines()]
    acc = c["judges"]["judge-a"]["accuracy"]
    assert len(acc["runs"]) == 3 and acc["mean"] == pytest.approx(sum(acc["runs"]) / 3)


@pytest.mark.parametrize("offset", [0, 150, 280, 290, 295, 299, 300, 310])
@pytest.mark.parametrize("source", ["provider", "local"])
def test_a_key_echoed_anywhere_in_an_error_is_scrubbed_before_the_line_is_cut(rubric: Rubric, api_keys: str,
                                                                              offset: int, source: str) -> None:
    """The failure line keeps 300 characters of the message (a provider's 401, or an error raised on this
    machine); the key is scrubbed first, so no part of it survives whichever side of the cut it straddles."""
    import openai

    from consensus_eval.judges.llm import classify

    judge = _judge(rubric)
    message = "x" * offset + f"invalid key {api_keys} given" + "y" * 400
    # openai 2.x types `response` as its httpx2.Response; the test builds an httpx one, which it reads alike
    error: Exception = (openai.AuthenticationError(message, response=httpx.Response(401, request=httpx.Request(  # type: ignore[arg-type]
        "POST", URL_A)), body=None) if source == "provider" else RuntimeError(message))
    kind, _head, line = classify(error, judge.scrub)
    assert kind == ("authentication" if source == "provider" else "local")
    assert line.startswith(type(error).__name__) and "x" * min(offset, 100) in line
    assert api_keys[:8] not in line and "sk-test" not in line
