"""CPU savings in the libraries under the LLM judge, each guarded and each provably a no-op on what is sent.

The judge layer (litellm + the openai SDK + instructor) spent 12.9 ms of CPU per call at first; one
Python process on a small machine then cannot keep 100 requests in flight (bench/README.md). What
is here removes per-call work whose result this project never uses or that cannot change a request.
Each patch checks the library layout it expects and switches itself off otherwise (the libraries
are pinned in pyproject.toml; with another layout everything still works, only slower), and each
has a test showing the bytes on the wire are the same with and without it.

- :func:`register_prices`: a model unknown to litellm's price map is priced by a walk over every
  name variant on every response; registering the config's prices makes it a dict hit.
- :func:`quiet_litellm_logging`: litellm's success/failure logging payload, built for callbacks
  this project does not register.
- :func:`mark_vetted` / instructor's async-validator walk of the response model on every call.
- :func:`plain_openai_requests`: the openai SDK's request "transform" walking every message
  against its TypedDicts (aliases and formats); none of the chat-completion request types has an
  alias or a format (checked at start-up), so for plain JSON it returns its input.
"""

from __future__ import annotations

import contextlib
import typing
import weakref
from collections.abc import Iterator
from typing import Any

import litellm

from consensus_eval.config import JudgeConfig

# ---------------------------------------------------------------------------- prices


def register_prices(c: JudgeConfig) -> None:
    """Tell litellm the prices of a model it does not know, when the config gives them.

    litellm prices every response itself (``_hidden_params["response_cost"]``, for its logging),
    whatever we do with it; for a model missing from its price map that lookup walks every name
    variant and capability pattern before giving up, about 1 ms of CPU per call. Registered, it is
    a dict hit. Our own accounting is unchanged: the judge still prices calls from the config.
    Models litellm already prices are left alone.
    """
    if c.model is None or c.input_cost_per_token is None or c.output_cost_per_token is None:
        return
    try:
        litellm.get_model_info(c.model)
        return  # known: keep litellm's own entry
    except Exception:  # noqa: BLE001 - unknown model
        pass
    provider = c.model.split("/", 1)[0] if "/" in c.model else "openai"
    litellm.register_model({c.model: {"input_cost_per_token": c.input_cost_per_token,
                                      "output_cost_per_token": c.output_cost_per_token,
                                      "litellm_provider": provider, "mode": "chat"}})


# ---------------------------------------------------------------------------- litellm logging

try:  # litellm's flag for its own nested calls: they skip its logging callbacks (litellm pinned)
    from litellm._internal_context import is_internal_call as _LITELLM_INTERNAL
except ImportError:  # another litellm layout: keep its logging, lose only the speed-up
    _LITELLM_INTERNAL = None
_CALLBACK_LISTS = ("callbacks", "success_callback", "failure_callback", "_async_success_callback",
                   "_async_failure_callback", "input_callback", "_async_input_callback", "service_callback")


@contextlib.contextmanager
def quiet_litellm_logging() -> Iterator[None]:
    """Skip litellm's success/failure logging inside the block when no litellm callback is set.

    After every response litellm builds a "standard logging payload" and prices the response
    again in a background task, for callbacks (Langfuse, custom loggers...) that this project
    does not register: ~0.3 ms of CPU per call, 5-6 % of the judge layer. Whenever someone does
    register one (``litellm.success_callback = [...]``), nothing is skipped. Errors are raised and
    mapped to litellm's exceptions exactly as before; our own accounting does not use any of it.
    """
    if _LITELLM_INTERNAL is None or any(getattr(litellm, n, None) for n in _CALLBACK_LISTS):
        yield
        return
    token = _LITELLM_INTERNAL.set(True)
    try:
        yield
    finally:
        _LITELLM_INTERNAL.reset(token)


# ---------------------------------------------------------------------------- instructor

#: Response model classes that passed instructor's async-validator check once.
_VETTED: weakref.WeakSet[type] = weakref.WeakSet()


def mark_vetted(*classes: type) -> None:
    """Record classes that passed instructor's checks (``prepare_response_model``) once."""
    _VETTED.update(classes)


def _skip_vetted_async_validator_checks() -> None:
    """Let instructor skip its async-validator check for classes that already passed it.

    instructor 1.17 walks the whole response model (every class in its MRO, every field, ~250
    nodes for ours) to reject async validators, seven times per call; about a third of its CPU per
    call. The answer depends only on the class, and ours are built once per judge and dimension,
    so the check runs once (when the judge prepares the class) and is skipped for those classes
    afterwards. Every other class still gets the full check.
    """
    try:
        from instructor.v2.core import patch as _patch
        from instructor.v2.validation import async_validators as _av
    except ImportError:  # another instructor layout: keep its behaviour, lose only the speed-up
        return
    original = _av.reject_async_validators
    if getattr(original, "_skips_vetted", False):
        return

    def reject_async_validators(response_model: Any) -> None:
        if isinstance(response_model, type) and response_model in _VETTED:
            return
        original(response_model)

    reject_async_validators._skips_vetted = True  # type: ignore[attr-defined]
    reject_async_validators._original = original  # type: ignore[attr-defined]
    _av.reject_async_validators = reject_async_validators
    if getattr(_patch, "reject_async_validators", None) is original:
        _patch.reject_async_validators = reject_async_validators


# ---------------------------------------------------------------------------- openai request transform

_PLAIN_SCALARS = (str, int, float, bool, type(None))


def is_plain_json(value: object, depth: int = 0) -> bool:
    """True if ``value`` is made only of dicts with str keys, lists, str, int, float, bool and None."""
    if depth > 64:
        return False
    t = type(value)
    if t in _PLAIN_SCALARS:
        return True
    if t is dict:
        return all(type(k) is str and is_plain_json(v, depth + 1) for k, v in value.items())  # type: ignore[union-attr]
    if t is list:
        return all(is_plain_json(v, depth + 1) for v in value)  # type: ignore[union-attr]
    return False


def _transform_is_identity(root: Any) -> bool:
    """True if no type reachable from ``root`` carries an openai ``PropertyInfo`` alias or format.

    Those are the only things the SDK's transform changes in plain JSON (it also drops omitted
    values, turns iterables into lists and models into dicts, none of which plain JSON has).
    """
    from openai._utils import PropertyInfo
    from openai._utils._transform import get_type_hints as sdk_type_hints

    seen: set[int] = set()
    stack = [root]
    while stack:
        tp = stack.pop()
        if id(tp) in seen:
            continue
        seen.add(id(tp))
        for meta in getattr(tp, "__metadata__", ()):
            if isinstance(meta, PropertyInfo) and (meta.alias or meta.format or meta.format_template):
                return False
        stack.extend(typing.get_args(tp))
        if typing.is_typeddict(tp):
            stack.extend(sdk_type_hints(tp, include_extras=True).values())
    return True


def _plain_openai_requests() -> None:
    """Let the openai SDK skip its request transform for plain-JSON chat-completion bodies.

    ``chat.completions.create`` passes the whole body through ``async_maybe_transform``, which walks
    every message and the tool schema against the SDK's TypedDicts (about 100 recursive calls and
    400,000 ``typing`` look-ups per 900 calls: ~1 ms of CPU per call, a fifth of the judge layer,
    paid by bare openai as well). It renames keys that carry a ``PropertyInfo`` alias and formats
    dates and files; the chat-completion request types have neither (checked here once, against
    the installed SDK: if a future version adds one, nothing is patched). On a plain-JSON body the
    transform therefore only drops omitted (``NOT_GIVEN``/``omit``) top-level values, which this
    does too; any other body, and any other endpoint, still goes through the SDK's transform.
    """
    try:
        from openai._utils import is_given
        from openai.resources.chat.completions import completions as _cc
        from openai.types.chat import completion_create_params as _ccp
    except ImportError:
        return
    original = getattr(_cc, "async_maybe_transform", None)
    if original is None or getattr(original, "_plain_json_skip", False):
        return
    targets = tuple(getattr(_ccp, n, None) for n in ("CompletionCreateParamsNonStreaming",
                                                       "CompletionCreateParamsStreaming"))
    if any(t is None for t in targets) or not all(_transform_is_identity(t) for t in targets):
        return

    async def async_maybe_transform(data: Any, expected_type: Any) -> Any:
        if expected_type in targets and type(data) is dict:
            body = {k: v for k, v in data.items() if is_given(v)}
            if is_plain_json(body):
                return body
        return await original(data, expected_type)

    async_maybe_transform._plain_json_skip = True  # type: ignore[attr-defined]
    async_maybe_transform._original = original  # type: ignore[attr-defined]
    _cc.async_maybe_transform = async_maybe_transform


def install() -> None:
    """Install the library patches (idempotent)."""
    _skip_vetted_async_validator_checks()
    _plain_openai_requests()


__all__ = ["install", "is_plain_json", "mark_vetted", "quiet_litellm_logging", "register_prices"]
