"""Prompt caching (README.md, 'Commands'): what is sent and counted, cache markers, cached tokens read
from each provider's usage and priced at the cache rate, the fake server's prompt cache, the
shared-prefix shares of the dry run, and the savings in the per-judge usage and the console."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from rich.console import Console

from consensus_eval import api
from consensus_eval.analysis.usage import usage_by_judge
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig, LLMJudgeConfig
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.estimate import JudgeEstimate, shared_prefix
from consensus_eval.execution.pricing import litellm_price, saving_per_cached_token
from consensus_eval.execution.store import CallRecord
from consensus_eval.judges.llm import LLMJudge, request_tokens
from consensus_eval.output.console import print_cache_summary, print_estimate
from tests.conftest import EXAMPLES, FAKE_KEY
from tests.fake_server import FakeConfig, FakeServer
from tests.fakellm import chat_response, dimension_of, make_reply
from tests.helpers import present

URL = "http://judge.test/v1/chat/completions"
URL_DS = "https://api.deepseek.com/beta/chat/completions"
URL_ANTHROPIC = "https://api.anthropic.com/v1/messages"
URL_DASHSCOPE = "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"
CASE = Case(id="c1", conversation="医生：血糖多少？\n患者：空腹9.6。", record="主诉：多饮3年")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("JUDGE_KEY", "DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(var, FAKE_KEY)
    return FAKE_KEY


def _judge(rubric: Rubric, **kw: Any) -> LLMJudge:
    settings = {"name": "j", "model": "openai/fake", "api_base": "http://judge.test/v1", "api_key_env": "JUDGE_KEY",
                **kw}
    return LLMJudge(LLMJudgeConfig(**settings), rubric)


def _examples(n: int) -> list[Case]:
    lines = [x for x in EXAMPLES.read_text(encoding="utf-8").splitlines() if x.strip()][:n]
    return [Case.model_validate({**json.loads(x), "important": False}) for x in lines]


def _answer(bodies: list[dict[str, Any]], **usage: Any) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        reply = make_reply(dimension_of(body), random.Random(len(bodies)), n=1)
        return httpx.Response(200, json=chat_response(body, reply, **usage))
    return answer


# --------------------------------------------------------------------------- counting what is sent


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_the_request_counted_is_the_request_sent(rubric: Rubric, key: str, mode: str) -> None:
    """The dry run's request is byte for byte what instructor sends, in every mode, and its token
    count is the count of the captured body with the same tokenizer."""
    judge = _judge(rubric, mode=mode, model="openai/gpt-4.1")
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        for case in _examples(2):
            for dim in rubric.dimensions:
                messages = render(rubric, dim, case)
                out = asyncio.run(judge.judge(case, dim, messages))
                assert out.status == "ok", out.error
                sent = bodies[-1]
                req = judge.request(messages, dim.id)
                for part in ("messages", "tools", "response_format"):
                    assert req.get(part) == sent.get(part)
                on_the_wire = request_tokens("openai/gpt-4.1", sent)
                assert judge.count_request_tokens(messages, dim.id) == on_the_wire
                # the old count (messages only) leaves the schema out
                assert judge.count_tokens(messages) < on_the_wire


def test_dry_run_total_is_within_2_percent_of_what_the_run_sends(rubric: Rubric, key: str, tmp_path: Path) -> None:
    """`score --dry-run` against the bodies a run actually sends (respx), counted independently on
    each captured body; JSON mode, where instructor's schema is about a quarter of the request."""
    cfg = EvalConfig.model_validate({"judges": [{
        "name": "j", "model": "openai/gpt-4.1", "api_base": "http://judge.test/v1", "api_key_env": "JUDGE_KEY",
        "mode": "json", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}]})
    prep = api.prepare(_examples(4), cfg)
    estimate = api.dry_run(prep)[0]
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        api.run(prep, tmp_path / "out")
    assert len(bodies) == estimate.calls == 12
    sent = sum(request_tokens("openai/gpt-4.1", b) for b in bodies)
    assert abs(estimate.prompt_tokens - sent) <= 0.02 * sent
    messages_only = sum(prep.judges[0].count_tokens(c.messages) for c in prep.calls)
    assert messages_only < 0.85 * sent       # what the dry run used to count


@pytest.mark.parametrize("mode", ["tools", "md_json"])
def test_counting_a_sample_exactly_gives_the_exact_totals(key: str, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Past the first SAMPLE_CASES cases, a request is counted as its messages plus its dimension's
    schema overhead: the totals and shares equal counting every request as built by instructor."""
    import consensus_eval.execution.estimate as est

    cfg = EvalConfig.model_validate({"judges": [{
        "name": "j", "model": "deepseek/deepseek-chat", "api_key_env": "DEEPSEEK_API_KEY", "mode": mode}]})
    prep = api.prepare(_examples(12), cfg)
    monkeypatch.setattr(est, "SAMPLE_CASES", 3)
    sampled = api.dry_run(prep)[0]
    monkeypatch.setattr(est, "SAMPLE_CASES", 10**6)
    exact = api.dry_run(prep)[0]
    assert abs(sampled.prompt_tokens - exact.prompt_tokens) <= 0.001 * exact.prompt_tokens
    for d, share in exact.prefix_share.items():
        assert sampled.prefix_share[d] == pytest.approx(share, abs=0.01)


# --------------------------------------------------------------------------- shared prefix


def test_shared_prefix_follows_the_providers_order() -> None:
    tool_a, tool_b = [{"function": {"name": "A"}}], [{"function": {"name": "B"}}]
    sys_msg = {"role": "system", "content": "rubric"}
    a = {"tools": tool_a, "messages": [sys_msg, {"role": "user", "content": "case one: x"}]}
    b = {"tools": tool_a, "messages": [sys_msg, {"role": "user", "content": "case two: y"}]}
    assert shared_prefix([a, b]) == {"tools": tool_a, "messages": [sys_msg, {"role": "user", "content": "case "}]}
    assert shared_prefix([a, a]) == {"tools": tool_a, "messages": a["messages"]}
    # another tool schema comes first: nothing is shared, however alike the messages
    assert shared_prefix([a, {**a, "tools": tool_b}]) == {"messages": []}
    # another role at the first difference: the messages before it only
    c = {"tools": tool_a, "messages": [sys_msg, {"role": "assistant", "content": "case one"}]}
    assert shared_prefix([a, c]) == {"tools": tool_a, "messages": [sys_msg]}


def test_dry_run_reports_the_shared_prefix_per_dimension(key: str) -> None:
    def shares(mode: str) -> JudgeEstimate:
        cfg = EvalConfig.model_validate({"judges": [{
            "name": "j", "model": "openai/gpt-4.1", "api_base": "http://judge.test/v1", "api_key_env": "JUDGE_KEY",
            "mode": mode}]})
        return api.dry_run(api.prepare(_examples(6), cfg))[0]

    tools, json_mode = shares("tools"), shares("json")
    for e in (tools, json_mode):
        assert set(e.prefix_share) == {"accuracy", "completeness", "standardization"}
        for share in e.prefix_share.values():     # instructions + rubric (+ schema) before each case
            assert share is not None and 0.4 < share < 0.95
    # TOOLS: the per-dimension tool schema comes first, so a case's dimensions share nothing
    assert tools.case_prefix_share == 0.0 and tools.all_prefix_share == 0.0
    # JSON: the schema is appended to the system message, after the generic instructions they share
    assert json_mode.case_prefix_share is not None and 0.05 < json_mode.case_prefix_share < 0.3
    # the cost with a cache: every call after a dimension's first served its shared prefix at the cache rate
    saving = 2e-6 - 5e-7                                              # gpt-4.1 in litellm's price map
    assert tools.cost is not None and tools.cached_cost is not None
    assert tools.cached_cost == pytest.approx(tools.cost - tools.cached_tokens * saving)
    calls_per_dim = tools.calls // 3
    assert 0.4 * tools.prompt_tokens * (calls_per_dim - 1) / calls_per_dim < tools.cached_tokens < tools.prompt_tokens
    out = io.StringIO()
    print_estimate(Console(file=out, width=200), [tools, json_mode])
    text = out.getvalue()
    assert "shared prompt prefix" in text and "across the dimensions" in text
    assert f"{tools.prefix_share['accuracy']:.0%}" in text


# --------------------------------------------------------------------------- cache markers


def _anthropic_reply(bodies: list[dict[str, Any]], cache_read: int = 1500) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        name = body["tools"][0]["name"]
        return httpx.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": name,
                         "input": make_reply("accuracy", random.Random(1), n=1)}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": 0}})
    return answer


def _has_marker(value: object) -> bool:
    return '"cache_control"' in json.dumps(value)


@pytest.mark.parametrize(("prompt_cache", "marked"), [("auto", True), ("on", True), ("off", False)])
def test_anthropic_gets_a_cache_marker_on_the_system_message(rubric: Rubric, key: str, prompt_cache: str,
                                                             marked: bool) -> None:
    judge = _judge(rubric, model="anthropic/claude-sonnet-4-5", api_base=None, api_key_env="ANTHROPIC_API_KEY",
                   prompt_cache=prompt_cache)
    bodies: list[dict[str, Any]] = []
    dim = rubric.dimension("accuracy")
    with respx.mock(using="httpx") as mock:
        mock.post(URL_ANTHROPIC).mock(side_effect=_anthropic_reply(bodies))
        out = asyncio.run(judge.judge(CASE, dim, render(rubric, dim, CASE)))
    assert out.status == "ok", out.error
    body = bodies[0]
    assert _has_marker(body["system"]) is marked
    assert not _has_marker(body["messages"])      # the case is not marked: it is not shared
    if marked:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    # Anthropic's cache reads are recorded as cached tokens, priced by litellm at the read rate
    assert out.cached_tokens == 1500 and out.prompt_tokens == 1600
    assert out.cost == pytest.approx(100 * 3e-6 + 1500 * 3e-7 + 50 * 1.5e-5)


def test_dashscope_gets_a_marker_and_openai_deepseek_none_by_default(rubric: Rubric, key: str) -> None:
    bodies: list[dict[str, Any]] = []
    dim = rubric.dimension("accuracy")
    messages = render(rubric, dim, CASE)
    with respx.mock(using="httpx") as mock:
        for url in (URL, URL_DS, URL_DASHSCOPE):
            mock.post(url).mock(side_effect=_answer(bodies))
        for model, base, expect in (("openai/gpt-4.1", "http://judge.test/v1", False),
                                    ("deepseek/deepseek-chat", None, False),
                                    ("dashscope/qwen-max", None, True)):
            judge = _judge(rubric, model=model, api_base=base, mode="json")
            assert asyncio.run(judge.judge(CASE, dim, messages)).status == "ok"
            assert _has_marker(bodies[-1]["messages"][0]) is expect, model
            assert not _has_marker(bodies[-1]["messages"][1:])
    assert LLMJudgeConfig(name="x", model="openai/gpt-4.1", prompt_cache="on").cache_markers
    assert not LLMJudgeConfig(name="x", model="anthropic/claude-sonnet-4-5", prompt_cache="off").cache_markers


def test_prompt_cache_does_not_change_request_hashes() -> None:
    a = LLMJudgeConfig(name="x", model="anthropic/claude-sonnet-4-5")
    assert a.identity == a.model_copy(update={"prompt_cache": "off"}).identity


# --------------------------------------------------------------------------- cached tokens and their price


def test_deepseek_and_openai_cache_hits_are_recorded(rubric: Rubric, key: str) -> None:
    dim = rubric.dimension("accuracy")
    messages = render(rubric, dim, CASE)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL_DS).mock(side_effect=_answer(bodies, prompt_tokens=3000, completion_tokens=100,
                                                   cached_tokens=2048, cache_style="deepseek"))
        mock.post(URL).mock(side_effect=_answer(bodies, prompt_tokens=3000, completion_tokens=100,
                                                cached_tokens=1920))
        ds = asyncio.run(_judge(rubric, model="deepseek/deepseek-chat", api_base=None, mode="json")
                         .judge(CASE, dim, messages))
        oa = asyncio.run(_judge(rubric, model="openai/gpt-4.1", mode="tools").judge(CASE, dim, messages))
    assert "prompt_tokens_details" not in json.dumps(chat_response({}, "x", cached_tokens=5, cache_style="deepseek"))
    assert (ds.cached_tokens, ds.prompt_tokens) == (2048, 3000)
    # litellm's price map: deepseek-chat miss 2.8e-7, hit 2.8e-8, output 4.2e-7
    assert ds.cost == pytest.approx(952 * 2.8e-7 + 2048 * 2.8e-8 + 100 * 4.2e-7)
    assert (oa.cached_tokens, oa.prompt_tokens) == (1920, 3000)
    assert oa.cost == pytest.approx(1080 * 2e-6 + 1920 * 5e-7 + 100 * 8e-6)   # gpt-4.1: cached at 0.25x


@pytest.mark.parametrize(("model", "extra", "cached_price"), [
    ("deepseek/deepseek-chat", {}, 1e-7),                               # DeepSeek's published 1/10
    ("anthropic/claude-x", {}, 1e-7),                                   # cache reads 0.1x
    ("dashscope/qwen-max", {}, 1e-7),                                   # explicit cache (markers): 10%
    ("dashscope/qwen-max", {"prompt_cache": "off"}, 2e-7),              # implicit cache: 20%
    ("hosted_vllm/local", {}, 1e-6),                                    # no published discount: full price
    ("hosted_vllm/local", {"cached_input_cost_per_token": 3e-7}, 3e-7),  # the config's own
])
def test_config_priced_judges_bill_cached_tokens_at_the_cache_rate(rubric: Rubric, key: str, model: str,
                                                                   extra: dict[str, Any], cached_price: float) -> None:
    cfg = LLMJudgeConfig(name="j", model=model, input_cost_per_token=1e-6, output_cost_per_token=2e-6, **extra)
    assert cfg.cached_input_price == pytest.approx(cached_price)
    expected = 1000 * 1e-6 + 2000 * cached_price + 100 * 2e-6
    assert LLMJudge(cfg, rubric)._cost(_Resp(3000, 2000, 100)) == pytest.approx(expected)


def test_a_config_priced_call_is_billed_at_the_cache_rate(rubric: Rubric, key: str) -> None:
    judge = _judge(rubric, model="hosted_vllm/local", mode="json", input_cost_per_token=1e-6,
                   output_cost_per_token=2e-6, cached_input_cost_per_token=1e-7)
    bodies: list[dict[str, Any]] = []
    dim = rubric.dimension("accuracy")
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies, prompt_tokens=3000, completion_tokens=100,
                                                cached_tokens=2000))
        out = asyncio.run(judge.judge(CASE, dim, render(rubric, dim, CASE)))
    assert out.status == "ok", out.error
    assert out.cached_tokens == 2000
    assert out.cost == pytest.approx(1000 * 1e-6 + 2000 * 1e-7 + 100 * 2e-6)


class _Usage:
    def __init__(self, prompt: int, cached: int, completion: int) -> None:
        self.prompt_tokens, self.completion_tokens = prompt, completion
        self.prompt_tokens_details = type("D", (), {"cached_tokens": cached})()


class _Resp:
    def __init__(self, prompt: int, cached: int, completion: int) -> None:
        self.usage = _Usage(prompt, cached, completion)


def test_saving_per_cached_token() -> None:
    ds = LLMJudgeConfig(name="d", model="deepseek/deepseek-reasoner")
    assert saving_per_cached_token(ds) == pytest.approx(2.8e-7 - 2.8e-8)   # litellm's map, read as data
    assert saving_per_cached_token(LLMJudgeConfig(name="g", model="openai/gpt-4.1")) == pytest.approx(1.5e-6)
    assert litellm_price("openai/gpt-4.1") is not None and litellm_price("anthropic/gpt-4.1") is None
    assert saving_per_cached_token(LLMJudgeConfig(name="u", model="hosted_vllm/unknown")) is None
    priced = LLMJudgeConfig(name="q", model="deepseek/x", input_cost_per_token=1e-6, output_cost_per_token=1e-6)
    assert saving_per_cached_token(priced) == pytest.approx(9e-7)
    full = LLMJudgeConfig(name="v", model="hosted_vllm/x", input_cost_per_token=1e-6, output_cost_per_token=1e-6)
    assert saving_per_cached_token(full) == 0.0


def _record(judge: str, prompt: int, cached: int, cost: float) -> CallRecord:
    return CallRecord(request_hash=f"{judge}{prompt}{cached}", case_id="c", dimension="accuracy", judge=judge,
                      run=0, status="ok", prompt_tokens=prompt, cached_tokens=cached, completion_tokens=10,
                      cost=cost)


def test_usage_sums_each_judges_calls_in_order() -> None:
    failed = CallRecord(request_hash="f", case_id="c", dimension="accuracy", judge="b", run=0, status="failed",
                        attempts=3, cost=None)
    records = [_record("b", 500, 0, 0.1), _record("a", 1000, 0, 0.2), failed, _record("b", 700, 100, 0.7)]
    usage = usage_by_judge(records)
    assert list(usage) == ["b", "a"]                             # judges in the order they first appear
    b = usage["b"]
    assert (b.ok, b.failed, b.prompt_tokens, b.cached_tokens, b.completion_tokens) == (2, 1, 1200, 100, 20)
    assert b.attempts == sum(r.attempts for r in records if r.judge == "b")
    assert b.cost == 0.0 + 0.1 + 0.0 + 0.7 and type(b.cost) is float   # an unknown cost counts 0, summed in order
    assert b.cache_hit_rate == 100 / 1200 and usage["a"].failed == 0 and usage["a"].cost == 0.2


def test_usage_gives_hit_rate_and_money_saved() -> None:
    records = [_record("a", 1000, 0, 0.1), _record("a", 1000, 640, 0.05), _record("b", 500, 0, 0.0)]
    usage = usage_by_judge(records, {"a": 2.5e-7, "b": None})
    assert usage["a"].cached_tokens == 640 and usage["a"].cache_hit_rate == pytest.approx(0.32)
    assert usage["a"].saved == pytest.approx(640 * 2.5e-7)
    assert usage["b"].cache_hit_rate == 0.0 and usage["b"].saved is None
    assert usage_by_judge(records)["a"].saved is None          # no prices given: unknown, not 0
    out = io.StringIO()
    print_cache_summary(Console(file=out, width=200), usage)
    text = out.getvalue()
    assert "32.0%" in text and f"{640 * 2.5e-7:.4f}" in text and "unknown" in text


# --------------------------------------------------------------------------- the fake server's cache


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 200, r.text
    usage: dict[str, Any] = r.json()["usage"]
    return usage


def test_fake_server_reports_the_longest_prefix_seen_like_deepseek_and_openai() -> None:
    system = {"role": "system", "content": "评分标准" * 1000}      # 4,000 characters
    def body(model: str, case: str, tools: str = "t") -> dict[str, Any]:
        return {"model": model, "tools": [{"type": "function", "function": {"name": "AccuracyJudgment",
                                                                            "description": tools}}],
                "messages": [system, {"role": "user", "content": f"【病例 {case}】" + case * 300}]}

    with FakeServer(FakeConfig(seed=1, prompt_cache=True)) as srv:
        first = _post(srv.url, body("deepseek-chat", "a"))
        assert first["prompt_cache_hit_tokens"] == 0 and "prompt_tokens_details" not in first
        again = _post(srv.url, body("deepseek-chat", "b"))
        hit = again["prompt_cache_hit_tokens"]
        # the shared system message (about 2,000 tokens at 2 characters a token), in blocks of 64
        assert hit % 64 == 0 and 1900 <= hit <= 2050
        assert again["prompt_cache_miss_tokens"] == again["prompt_tokens"] - hit
        same = _post(srv.url, body("deepseek-chat", "b"))
        assert same["prompt_cache_hit_tokens"] > hit                      # the whole request now
        assert _post(srv.url, body("deepseek-chat", "c", tools="other"))["prompt_cache_hit_tokens"] == 0
        # OpenAI: blocks of 128 from 1,024 tokens, reported as prompt_tokens_details.cached_tokens
        assert _post(srv.url, body("gpt-4.1", "a"))["prompt_tokens_details"]["cached_tokens"] == 0
        cached = _post(srv.url, body("gpt-4.1", "b"))["prompt_tokens_details"]["cached_tokens"]
        assert cached % 128 == 0 and 1024 <= cached <= 2050
        short = {"model": "gpt-4.1", "messages": [{"role": "system", "content": "x" * 1000},
                                                  {"role": "user", "content": "AccuracyJudgment y"}]}
        _post(srv.url, short)
        assert _post(srv.url, short)["prompt_tokens_details"]["cached_tokens"] == 0   # under 1,024 tokens
        assert [e["cached_tokens"] for e in srv.log][:2] == [0, hit]
    with FakeServer(FakeConfig(seed=1)) as srv:                                       # off by default
        _post(srv.url, body("deepseek-chat", "a"))
        assert _post(srv.url, body("deepseek-chat", "a"))["prompt_cache_hit_tokens"] == 0


def test_a_run_against_the_fake_server_records_hits_and_savings(key: str, tmp_path: Path) -> None:
    """One judge, one call at a time: every call after a dimension's first is served its instructions,
    rubric and schema from the cache; the summary's hit rate and saving follow from the usage."""
    with FakeServer(FakeConfig(seed=2, prompt_cache=True)) as srv:
        cfg = EvalConfig.model_validate({"judges": [{
            "name": "ds", "model": "deepseek/deepseek-chat", "api_base": srv.url, "api_key_env": "DEEPSEEK_API_KEY",
            "mode": "json", "concurrency": 1}]})
        res = api.run(api.prepare(_examples(4), cfg), tmp_path / "out")
        served = [e for e in srv.log if e["status"] == 200]
    u = res.usage["ds"]
    assert u.ok == 12 and u.cached_tokens == sum(e["cached_tokens"] for e in served) > 0
    assert u.cache_hit_rate is not None and 0.4 < u.cache_hit_rate < 0.95
    assert u.saved == pytest.approx(u.cached_tokens * (2.8e-7 - 2.8e-8))
    full_price = sum(present(r.prompt_tokens) * 2.8e-7 + present(r.completion_tokens) * 4.2e-7 for r in res.records)
    assert u.saved is not None
    assert u.cost == pytest.approx(full_price - u.saved)
    # the reports show the same hit rate and saving (report.md: the cost table's last two columns)
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    costs = next(sec for sec in md.split("\n## ") if "缓存命中率" in sec or "cache hits" in sec)
    row = next(line for line in costs.splitlines() if line.startswith("| ds |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-2:] == [f"{100 * u.cache_hit_rate:.1f}%", f"${u.saved:.4f}"]
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert f"{100 * u.cache_hit_rate:.1f}%" in html and f"${u.saved:.4f}" in html
