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
- :func:`prompt_requests`: ``litellm.acompletion`` builds each request in a worker thread;
  for providers whose set-up is pure computation it is built in the event loop's thread instead,
  so a call's CPU work runs in one stretch (see the function for why that matters).
- :func:`_eager_body_writes` (Python 3.11 only): aiohttp starts each request body's writer task
  eagerly on 3.12+ but only at the next loop iteration on 3.11; it is started first in line here.

The last two are about *when* requests leave, not CPU: with many calls in flight and a fixed
latency, anything that holds requests back until the end of a burst of replies makes the next
replies land together again, and the client alternates between a busy burst and idling
(bench/README.md: 0.67 of the latency bound before them, at 4.8 ms of CPU per call).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import sys
import typing
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import litellm

from consensus_eval.domain.config import JudgeConfig

# ---------------------------------------------------------------------------- prices


def register_prices(c: JudgeConfig) -> None:
    """Tell litellm the prices of a model it does not know, when the config gives them.

    litellm prices every response itself (``_hidden_params["response_cost"]``, for its logging),
    whatever we do with it; for a model missing from its price map that lookup walks every name
    variant and capability pattern before giving up, about 1 ms of CPU per call. Registered, it is
    a dict hit. Our own accounting is unchanged: the judge still prices calls from the config.
    Models litellm already prices are left alone.
    """
    if c.model is None or c.config_prices is None:
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


_SKIP_PRICING: contextvars.ContextVar[bool] = contextvars.ContextVar("consensus_eval_skip_litellm_pricing",
                                                                      default=False)


@contextlib.contextmanager
def quiet_litellm_logging(priced_by_us: bool = False) -> Iterator[None]:
    """Skip litellm's work for callbacks inside the block when no litellm callback is set.

    After every response litellm builds a "standard logging payload" and prices the response
    again in a background task, for callbacks (Langfuse, custom loggers...) that this project
    does not register: ~0.3 ms of CPU per call, 5-6 % of the judge layer. With ``priced_by_us``
    (the judge prices its calls from the config's prices), litellm's own pricing of each response
    for ``_hidden_params["response_cost"]`` (~0.5 ms: model-info look-ups, usage walk) is skipped
    as well; that field is then None, and nothing here reads it. Whenever someone does register a
    callback (``litellm.success_callback = [...]``), nothing is skipped. Errors are raised and
    mapped to litellm's exceptions exactly as before; our own accounting does not use any of it.
    """
    if _LITELLM_INTERNAL is None or any(getattr(litellm, n, None) for n in _CALLBACK_LISTS):
        yield
        return
    token = _LITELLM_INTERNAL.set(True)
    pricing = _SKIP_PRICING.set(priced_by_us)
    try:
        yield
    finally:
        _SKIP_PRICING.reset(pricing)
        _LITELLM_INTERNAL.reset(token)


def _skip_unused_response_pricing() -> None:
    """Let litellm's per-response pricing return None inside ``quiet_litellm_logging(priced_by_us=True)``."""
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:  # another litellm layout: it keeps pricing, we lose only the speed-up
        return
    original = getattr(Logging, "_response_cost_calculator", None)
    if original is None or getattr(original, "_skips_when_priced_by_us", False):
        return

    @functools.wraps(original)
    def _response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _SKIP_PRICING.get():
            return None
        return original(self, *args, **kwargs)

    _response_cost_calculator._skips_when_priced_by_us = True  # type: ignore[attr-defined]
    _response_cost_calculator._original = original  # type: ignore[attr-defined]
    Logging._response_cost_calculator = _response_cost_calculator


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


# ---------------------------------------------------------------------------- litellm's executor hop

#: Providers whose ``litellm.completion`` set-up (with ``acompletion=True``) is pure computation:
#: it maps parameters and returns the coroutine that will do the HTTP call. Providers whose
#: set-up may block on the network (Azure AD tokens, Vertex/Google auth refresh, Bedrock and
#: SageMaker credentials, watsonx IAM) are not listed and keep litellm's worker thread.
INLINE_SAFE_PROVIDERS = frozenset({
    "openai", "custom_openai", "hosted_vllm", "deepseek", "dashscope", "openrouter", "together_ai",
    "groq", "mistral", "moonshot", "xai", "fireworks_ai", "deepinfra", "anthropic", "lm_studio",
})

_INLINE: contextvars.ContextVar[bool] = contextvars.ContextVar("consensus_eval_inline_litellm_setup", default=False)
try:
    from litellm import main as _litellm_main
except ImportError:  # pragma: no cover - litellm always has it at the pinned version
    _litellm_main = None  # type: ignore[assignment]


def inline_safe(model: str | None, api_base: str | None) -> bool:
    """True if the judge's provider builds its requests without I/O (:data:`INLINE_SAFE_PROVIDERS`)."""
    if not model or _litellm_main is None or not hasattr(_litellm_main, "completion"):
        return False
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception:  # noqa: BLE001 - a provider litellm cannot name: keep its thread
        return False
    return provider in INLINE_SAFE_PROVIDERS


def _is_litellm_setup(func: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """``litellm.acompletion``'s hand-off: ``partial(ctx.run, partial(litellm.main.completion, ...))``."""
    return (not args and isinstance(func, functools.partial) and len(func.args) == 1 and not func.keywords
            and isinstance(func.args[0], functools.partial) and func.args[0].func is _litellm_main.completion)


def _serve_inline(loop: asyncio.AbstractEventLoop) -> None:
    """Give ``loop`` a ``run_in_executor`` that runs litellm's set-up in place when asked to."""
    original = loop.run_in_executor

    def run_in_executor(executor: Any, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        if executor is None and _INLINE.get() and _is_litellm_setup(func, args):
            fut = loop.create_future()
            try:
                fut.set_result(func())
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001 - delivered to the awaiting caller, as the thread would
                fut.set_exception(e if not isinstance(e, StopIteration) else RuntimeError(repr(e)))
            return fut
        return original(executor, func, *args)

    loop.run_in_executor = run_in_executor  # type: ignore[method-assign]


# ---------------------------------------------------------------------------- aiohttp's body writer

try:
    from aiohttp.client_reqrep import ClientRequest as _AiohttpRequest

    _WRITE_BYTES: Any = _AiohttpRequest.write_bytes.__code__
except (ImportError, AttributeError):  # another aiohttp layout: requests leave as aiohttp sends them
    _WRITE_BYTES = None


def _eager_body_writes(loop: asyncio.AbstractEventLoop) -> None:
    """On Python 3.11, start aiohttp's request-body writer before anything else waiting to run.

    aiohttp writes a request's headers in the caller's step and its body in a new task. On 3.12+
    it starts that task eagerly (``eager_start=True``: the body is on the wire before the caller
    goes on); on 3.11 it can only ``create_task``, which runs at the next loop iteration, after
    every callback already queued in this one. When a burst of replies is being processed, every
    request made during the burst therefore left together at its end: the requests of one burst
    came back as the next burst, for the whole run. Here the writer task's first step is moved
    from the back of the loop's ready queue to its front, so it runs as soon as the caller's step
    ends: the order of everything else is unchanged, and the task is an ordinary task.

    Installed only on 3.11, when the loop has no task factory of its own and keeps its ready
    callbacks in a deque (asyncio's own loops; not uvloop, which would be left as it is).
    """
    if sys.version_info >= (3, 12) or _WRITE_BYTES is None or loop.get_task_factory() is not None:
        return
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, collections.deque):
        return

    def task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        if (getattr(coro, "cr_code", None) is _WRITE_BYTES and ready
                and getattr(getattr(ready[-1], "_callback", None), "__self__", None) is task):
            ready.appendleft(ready.pop())  # the task's first step, queued by Task() just now
        return task

    loop.set_task_factory(task_factory)


def _prepare_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Install the loop-level pieces once per event loop (each run has its own loop)."""
    if getattr(loop, "_consensus_eval_prepared", False):
        return
    if _litellm_main is not None:
        _serve_inline(loop)
    _eager_body_writes(loop)
    loop._consensus_eval_prepared = True  # type: ignore[attr-defined]


@contextlib.contextmanager
def prompt_requests(inline_setup: bool) -> Iterator[None]:
    """Around one ``litellm.acompletion``: its request leaves as soon as it is built.

    Prepares the running loop once (:func:`_eager_body_writes`) and, with ``inline_setup``
    (:func:`inline_safe` providers), lets litellm build the request in this thread (below).

    ``acompletion`` hands the synchronous ``completion()`` (provider lookup, parameter mapping,
    logging object: about half of litellm's CPU per call) to the default thread pool and awaits
    it. That costs a thread hand-off and GIL contention with the event loop on every call, and it
    cuts each call's CPU work in two steps with a trip through the loop between them. With many
    calls in flight, replies that land together then advance in lock-step (everyone's first step,
    then everyone's second), so their next requests leave together and the burst never spreads
    out: at 96 requests in flight and 500 ms latency the client sat idle between bursts.
    Run in place, the future is already done when awaited, so a reply is processed and the next
    request sent in one stretch. Same function, same arguments, same context (``ctx.run``); only
    the thread differs. Used only for :func:`inline_safe` providers; anything else goes to the pool.
    """
    _prepare_loop(asyncio.get_running_loop())
    if not inline_setup:
        yield
        return
    token = _INLINE.set(True)
    try:
        yield
    finally:
        _INLINE.reset(token)


def install() -> None:
    """Install the library patches (idempotent)."""
    _skip_vetted_async_validator_checks()
    _plain_openai_requests()
    _skip_unused_response_pricing()


__all__ = ["inline_safe", "prompt_requests", "install", "is_plain_json", "mark_vetted",
           "quiet_litellm_logging", "register_prices"]
