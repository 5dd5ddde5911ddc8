"""The judge layer uses the libraries under it through their public interfaces only.

Nothing inside litellm, instructor, the openai SDK, aiohttp or asyncio is replaced, before or after
a judged call; the one thing registered with litellm is a price (``litellm.register_model``, public).
"""

from __future__ import annotations

import json
import random

import httpx
import respx

from tests.fakellm import chat_response, make_reply
from tests.test_llm_panel import URL_A, _judge, _one_call


def _library_functions() -> dict[str, object]:
    import aiohttp.client_reqrep
    import instructor.v2.validation.async_validators as av
    import litellm
    import litellm.main
    from openai.resources.chat.completions import completions as cc

    return {
        "litellm.acompletion": litellm.acompletion,
        "litellm.main.acompletion": litellm.main.acompletion,
        "openai.async_maybe_transform": cc.async_maybe_transform,
        "instructor.reject_async_validators": av.reject_async_validators,
        "aiohttp.ClientRequest.write_bytes": aiohttp.client_reqrep.ClientRequest.write_bytes,
        "litellm.Logging._response_cost_calculator":
            litellm.litellm_core_utils.litellm_logging.Logging._response_cost_calculator,
    }


def test_no_library_function_is_replaced_by_a_judged_call(rubric, api_keys):
    before = _library_functions()
    judge = _judge(rubric)
    reply = make_reply("accuracy", random.Random(1), n=2)
    with respx.mock(using="httpx") as mock:
        mock.post(URL_A).mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(json.loads(r.content), reply)))
        outcome = _one_call(rubric, judge)
    assert outcome.status == "ok"
    assert _library_functions() == before


def test_config_prices_are_registered_with_litellm(rubric):
    import litellm

    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.judges.llm import LLMJudge

    LLMJudge(LLMJudgeConfig(name="p", model="openai/ce-unknown-model-x", api_base="http://x.test/v1",
                         input_cost_per_token=3e-6, output_cost_per_token=7e-6), rubric)
    info = litellm.get_model_info("openai/ce-unknown-model-x")
    assert info["input_cost_per_token"] == 3e-6 and info["output_cost_per_token"] == 7e-6
