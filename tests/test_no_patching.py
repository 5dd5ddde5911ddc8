"""The judge layer uses the libraries under it through their public interfaces only.

Nothing inside litellm, instructor, the openai SDK, aiohttp or asyncio is replaced, before or after
a judged call; the one thing registered with litellm is a price (``litellm.register_model``, public).
"""

from __future__ import annotations

import json
import random

import httpx
import respx

from consensus_eval.domain.rubric import Rubric
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
        "openai.async_maybe_transform": vars(cc)["async_maybe_transform"],  # the name as completions binds it
        "instructor.reject_async_validators": av.reject_async_validators,
        "aiohttp.ClientRequest.write_bytes": aiohttp.client_reqrep.ClientRequest.write_bytes,
        "litellm.Logging._response_cost_calculator":
            litellm.litellm_core_utils.litellm_logging.Logging._response_cost_calculator,
    }


def test_no_library_function_is_replaced_by_a_judged_call(rubric: Rubric, api_keys: str) -> None:
    before = _library_functions()
    judge = _judge(rubric)
    reply = make_reply("accuracy", random.Random(1), n=2)
    with respx.mock(using="httpx") as mock:
        mock.post(URL_A).mock(
            side_effect=lambda r: httpx.Response(200, json=chat_response(json.loads(r.content), reply)))
        outcome = _one_call(rubric, judge)
    assert outcome.status == "ok"
    assert _library_functions() == before


def test_config_prices_are_registered_with_litellm(rubric: Rubric) -> None:
    import litellm

    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.judges.llm import LLMJudge

    LLMJudge(LLMJudgeConfig(name="p", model="openai/ce-unknown-model-x", api_base="http://x.test/v1",
                         input_cost_per_token=3e-6, output_cost_per_token=7e-6), rubric)
    info = litellm.get_model_info("openai/ce-unknown-model-x")
    assert info["input_cost_per_token"] == 3e-6 and info["output_cost_per_token"] == 7e-6


#: what the package may set on functions it made itself (as functools.wraps does)
OWN_FUNCTION_NAMES = {"__doc__", "__name__", "__qualname__"}


def test_the_package_writes_no_object_internals() -> None:
    """No module of the package writes another library's (or CPython's) internals: no ``object.__setattr__``,
    no assignment into ``__dict__``, no dunder attribute assigned (compact.py once wrote pydantic's
    ``__dict__`` and ``__pydantic_fields_set__``; models are now built with ``model_construct``)."""
    import ast
    from pathlib import Path

    import consensus_eval

    found = []
    for path in Path(consensus_eval.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "__setattr__" and \
                    isinstance(node.value, ast.Name) and node.value.id == "object":
                found.append(f"{path.name}:{node.lineno}: object.__setattr__")
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Attribute) and base.attr.startswith("__") and base.attr.endswith("__") \
                        and base.attr not in OWN_FUNCTION_NAMES:
                    found.append(f"{path.name}:{t.lineno}: assigns {base.attr}")
    assert found == []
