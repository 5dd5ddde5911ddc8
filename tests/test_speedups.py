"""The library patches in consensus_eval.judges._speedups change CPU, never what is sent or recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
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
