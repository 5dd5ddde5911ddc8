"""The library patches in consensus_eval.judges._speedups change CPU, never what is sent or recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
from typing import Annotated, TypedDict

import httpx
import pytest
import respx
from openai._utils import PropertyInfo

import consensus_eval.judges.llm  # noqa: F401 - installs the patches
from consensus_eval.judges import _speedups
from tests.fakellm import chat_response, make_reply
from tests.test_llm_panel import URL_A, _body, _judge, _one_call


@contextlib.contextmanager
def _unpatched(monkeypatch: pytest.MonkeyPatch):
    """The libraries as shipped: the openai transform, instructor's check and litellm's logging."""
    from instructor.v2.core import patch as ipatch
    from instructor.v2.validation import async_validators as av
    from openai.resources.chat.completions import completions as cc

    transform, reject = cc.async_maybe_transform._original, av.reject_async_validators._original
    with monkeypatch.context() as m:
        m.setattr(cc, "async_maybe_transform", transform)
        m.setattr(av, "reject_async_validators", reject)
        m.setattr(ipatch, "reject_async_validators", reject)
        m.setattr(_speedups, "_LITELLM_INTERNAL", None)
        m.setattr(_speedups, "_is_litellm_setup", lambda func, args: False)  # litellm's worker thread
        m.setattr(_speedups, "_WRITE_BYTES", None)  # aiohttp's own task scheduling
        yield


def _capture(rubric, mode: str) -> tuple[list[bytes], list[dict], object]:
    reply = make_reply("accuracy", random.Random(3), n=2)
    sent: list[bytes] = []
    headers: list[dict] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        headers.append({k: v for k, v in request.headers.items() if k.lower() not in {"x-stainless-retry-count"}})
        return httpx.Response(200, json=chat_response(_body(request), reply))

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=answer)
        out = _one_call(rubric, _judge(rubric, mode=mode, input_cost_per_token=1e-6, output_cost_per_token=2e-6))
    return sent, headers, out


def test_the_patches_are_installed():
    from instructor.v2.validation import async_validators as av
    from openai.resources.chat.completions import completions as cc

    assert getattr(cc.async_maybe_transform, "_plain_json_skip", False)
    assert getattr(av.reject_async_validators, "_skips_vetted", False)
    assert _speedups._LITELLM_INTERNAL is not None
    from litellm.litellm_core_utils.litellm_logging import Logging

    assert getattr(Logging._response_cost_calculator, "_skips_when_priced_by_us", False)
    assert _speedups._litellm_main is not None and _speedups._WRITE_BYTES is not None


@pytest.mark.parametrize("mode", ["tools", "json", "md_json", "json_schema"])
def test_same_bytes_on_the_wire_and_same_outcome_with_and_without(rubric, api_keys, monkeypatch, mode):
    fast_bytes, fast_headers, fast = _capture(rubric, mode)
    with _unpatched(monkeypatch):
        slow_bytes, slow_headers, slow = _capture(rubric, mode)
    assert fast_bytes == slow_bytes and len(fast_bytes) == 1
    assert json.loads(fast_bytes[0])["messages"]  # a real body, not two empty ones
    assert fast_headers == slow_headers
    assert fast.status == slow.status == "ok"
    assert fast.model_dump() == slow.model_dump()


def test_plain_json_check():
    from openai import NOT_GIVEN

    assert _speedups.is_plain_json({"a": [1, 2.5, "x", None, True, {"b": []}]})
    assert not _speedups.is_plain_json({"a": (1, 2)})  # the SDK turns tuples into lists
    assert not _speedups.is_plain_json({"a": NOT_GIVEN})  # the SDK drops omitted values
    assert not _speedups.is_plain_json({1: "x"})
    assert not _speedups.is_plain_json({"a": {1, 2}})
    deep: object = "x"
    for _ in range(100):
        deep = [deep]
    assert not _speedups.is_plain_json(deep)  # too deep: leave it to the SDK


def test_non_plain_bodies_still_go_through_the_sdk_transform():
    from openai import NOT_GIVEN
    from openai.resources.chat.completions import completions as cc
    from openai.types.chat import completion_create_params as ccp

    body = {"model": "m", "messages": ({"role": "user", "content": "hi"},), "seed": NOT_GIVEN, "n": 1}
    fast = asyncio.run(cc.async_maybe_transform(body, ccp.CompletionCreateParamsNonStreaming))
    slow = asyncio.run(cc.async_maybe_transform._original(body, ccp.CompletionCreateParamsNonStreaming))
    assert fast == slow == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 1}
    plain = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": NOT_GIVEN}
    assert asyncio.run(cc.async_maybe_transform(plain, ccp.CompletionCreateParamsNonStreaming)) == \
        asyncio.run(cc.async_maybe_transform._original(plain, ccp.CompletionCreateParamsNonStreaming))


class _Inner(TypedDict, total=False):
    card_id: Annotated[str, PropertyInfo(alias="cardID")]


class _Outer(TypedDict, total=False):
    items: list[_Inner]
    name: str


class _Plain(TypedDict, total=False):
    items: list[dict[str, str]]
    name: str


def test_a_request_type_with_an_alias_would_not_be_skipped():
    assert not _speedups._transform_is_identity(_Outer)
    assert _speedups._transform_is_identity(_Plain)

    from openai.types.chat import completion_create_params as ccp

    assert _speedups._transform_is_identity(ccp.CompletionCreateParamsNonStreaming)


def test_unvetted_classes_still_get_instructors_async_validator_check():
    import pydantic
    from instructor.v2.validation import async_validators as av

    class WithAsync(pydantic.BaseModel):
        x: int

        @pydantic.field_validator("x")
        @classmethod
        def check(cls, v: int) -> int:
            return v

    av.reject_async_validators(WithAsync)  # a plain model passes, vetted or not
    from instructor.v2.validation.async_validators import async_field_validator

    class Bad(pydantic.BaseModel):
        x: int

        @async_field_validator("x")
        async def check(self, v: int) -> None:
            return None

    _speedups.mark_vetted(WithAsync)  # vetting one class does not vet another

    with pytest.raises(Exception, match="(?i)async"):
        av.reject_async_validators(Bad)


def test_a_registered_litellm_callback_disables_the_logging_skip(monkeypatch):
    import litellm

    with _speedups.quiet_litellm_logging():
        assert _speedups._LITELLM_INTERNAL.get() is True
    monkeypatch.setattr(litellm, "success_callback", [lambda *a, **k: None])
    with _speedups.quiet_litellm_logging():
        assert _speedups._LITELLM_INTERNAL.get() is False


# --------------------------------------------------------------------------- when requests leave


@pytest.mark.parametrize("model, api_base, expected", [
    ("openai/gpt-4o-mini", None, True),
    ("openai/fake", "http://127.0.0.1:8000/v1", True),
    ("hosted_vllm/qwen", "http://127.0.0.1:8000/v1", True),
    ("deepseek/deepseek-reasoner", None, True),
    ("dashscope/qwen-max", None, True),
    ("azure/my-deployment", "https://x.openai.azure.com", False),  # may fetch an Azure AD token
    ("vertex_ai/gemini-1.5-pro", None, False),  # may refresh Google credentials
    ("bedrock/anthropic.claude-3", None, False),  # boto3 credential look-ups
    ("no-such-provider-model-xyz", None, False),
    (None, None, False),
])
def test_inline_set_up_only_for_providers_whose_set_up_does_no_io(model, api_base, expected):
    assert _speedups.inline_safe(model, api_base) is expected


def _setup_threads(rubric, monkeypatch, model: str, api_base: str) -> tuple[int, set[int]]:
    """(the event loop's thread, the threads litellm.completion ran in) for one judge call."""
    import threading

    import litellm.main

    from consensus_eval.domain.config import JudgeConfig
    from consensus_eval.judges.llm import LLMJudge

    threads: set[int] = set()
    original = litellm.main.completion

    def completion(*args, **kwargs):
        threads.add(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(litellm.main, "completion", completion)
    judge = LLMJudge(JudgeConfig(name="j", model=model, api_base=api_base, api_key_env="JUDGE_A_KEY"), rubric)
    reply = make_reply("accuracy", random.Random(3), n=1)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions").mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), reply)))
        out = _one_call(rubric, judge)
    assert out.status == "ok", out.error
    return threading.get_ident(), threads  # asyncio.run runs the loop in this thread


def test_litellm_builds_the_request_in_the_loops_thread_for_an_inline_safe_provider(rubric, api_keys, monkeypatch):
    loop_thread, threads = _setup_threads(rubric, monkeypatch, "openai/fake", "http://judge-a.test/v1")
    assert threads == {loop_thread}


def test_other_providers_keep_litellms_worker_thread(rubric, api_keys, monkeypatch):
    monkeypatch.setattr(_speedups, "INLINE_SAFE_PROVIDERS", frozenset())
    loop_thread, threads = _setup_threads(rubric, monkeypatch, "openai/fake", "http://judge-a.test/v1")
    assert len(threads) == 1 and loop_thread not in threads


def test_only_litellms_set_up_runs_in_place():
    import threading

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        with _speedups.prompt_requests(True):
            other = await loop.run_in_executor(None, threading.get_ident)  # not litellm's: a worker thread
        assert _speedups._INLINE.get() is False  # restored on leaving
        return threading.get_ident(), other

    here, other = asyncio.run(main())
    assert here != other


def test_a_failing_set_up_reaches_the_caller_as_it_would_from_the_thread(rubric, api_keys, monkeypatch):
    import litellm.main

    def completion(*args, **kwargs):
        raise ValueError("bad parameter")

    monkeypatch.setattr(litellm.main, "completion", completion)
    with respx.mock(using="httpx", assert_all_called=False):
        out = _one_call(rubric, _judge(rubric, max_retries=0))
    assert out.status == "failed" and "bad parameter" in out.error


async def _ordered(eager: bool, monkeypatch) -> list[str]:
    order: list[str] = []

    async def body_writer() -> None:  # stands in for aiohttp's ClientRequest.write_bytes
        order.append("body written")

    monkeypatch.setattr(_speedups, "_WRITE_BYTES", body_writer.__code__ if eager else None)
    loop = asyncio.get_running_loop()
    _speedups._eager_body_writes(loop)
    loop.call_soon(order.append, "reply of another call processed")  # already waiting to run
    task = asyncio.create_task(body_writer())
    await task
    loop.set_task_factory(None)
    return order


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="aiohttp starts the writer eagerly itself on 3.12+")
def test_the_body_writer_runs_before_callbacks_already_waiting(monkeypatch):
    assert asyncio.run(_ordered(True, monkeypatch)) == ["body written", "reply of another call processed"]
    # as aiohttp schedules it on 3.11 without the patch: after everything already queued
    assert asyncio.run(_ordered(False, monkeypatch)) == ["reply of another call processed", "body written"]


def test_the_body_writer_patch_leaves_a_loop_with_its_own_task_factory_alone(monkeypatch):
    async def main() -> object:
        loop = asyncio.get_running_loop()

        def mine(loop, coro, **kw):
            return asyncio.Task(coro, loop=loop, **kw)

        loop.set_task_factory(mine)
        _speedups._eager_body_writes(loop)
        return loop.get_task_factory() is mine

    assert asyncio.run(main())


def test_aiohttps_body_writer_is_where_the_patch_expects_it():
    from aiohttp.client_reqrep import ClientRequest

    assert _speedups._WRITE_BYTES is ClientRequest.write_bytes.__code__


@pytest.mark.parametrize("config_prices, litellm_prices", [(True, False), (False, True)])
def test_litellm_prices_responses_only_when_the_config_does_not(rubric, api_keys, monkeypatch, config_prices,
                                                                 litellm_prices):
    from litellm.litellm_core_utils.litellm_logging import Logging

    from consensus_eval.domain.config import JudgeConfig
    from consensus_eval.judges.llm import LLMJudge

    priced: list[object] = []
    current = Logging._response_cost_calculator

    def spy(self, *args, **kwargs):
        priced.append(current(self, *args, **kwargs))
        return priced[-1]

    monkeypatch.setattr(Logging, "_response_cost_calculator", spy)
    prices = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6} if config_prices else {}
    cfg = JudgeConfig(name="j", model="openai/gpt-4o-mini", api_base="http://judge-a.test/v1",
                      api_key_env="JUDGE_A_KEY", **prices)
    reply = make_reply("accuracy", random.Random(3), n=1)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(URL_A).mock(side_effect=lambda r: httpx.Response(200, json=chat_response(_body(r), reply)))
        out = _one_call(rubric, LLMJudge(cfg, rubric))
    assert out.status == "ok" and out.cost is not None and out.cost > 0
    assert len(priced) == 1
    assert (isinstance(priced[0], float) and priced[0] > 0) is litellm_prices
    if config_prices:
        assert priced[0] is None
        assert out.cost == pytest.approx(out.prompt_tokens * 1e-6 + out.completion_tokens * 2e-6)
