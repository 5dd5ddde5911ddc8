"""LLM judges: litellm (any provider) + instructor (typed replies), with our own retry policy.

Every HTTP attempt goes through :meth:`LLMJudge._send`, which the instructor client wraps:

- it waits for the judge's rate limiter (``rpm``), so re-asks and retries are throttled too;
- it enforces a hard timeout (``timeout_s``) per attempt (``asyncio.timeout``);
- it retries 429, 5xx, timeouts and dropped connections with exponential backoff and full jitter,
  honouring ``Retry-After``; 400, 401, 403, 404 and 422 are not retried;
- it counts attempts, tokens and cost of every attempt into the current call's :class:`_Usage`.

instructor itself only re-asks (``max_reasks``) when a reply fails validation against the
rubric's response model; a reply that still fails is recorded as ``failed`` with the reason.
litellm's own retries are off (``num_retries=0``): they differ per provider (STACK_NOTES.md).

Importing this module changes no global state (no environment variable, no logger level, no
library setting): the command line does that (:func:`consensus_eval.cli`), and a host application
decides for itself (``consensus_eval.quiet_libraries()`` does what the CLI does). Nothing inside
litellm, instructor, the openai SDK or aiohttp is patched: what they do per call is their cost.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import instructor
import litellm
import litellm.exceptions
import pydantic
from asyncio_throttle.throttler import Throttler  # where it is defined: the package root does not re-export it
from instructor.core import InstructorRetryException
from instructor.v2.core.response_model import prepare_response_model

from consensus_eval._errors import format_validation_error
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig
from consensus_eval.domain.judgment import CallOutcome, _ReplyBase, response_model
from consensus_eval.domain.rubric import Dimension, Rubric

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

MODES = {
    "tools": instructor.Mode.TOOLS,
    "json": instructor.Mode.JSON,
    "json_schema": instructor.Mode.JSON_SCHEMA,
    "md_json": instructor.Mode.MD_JSON,
}

#: HTTP failures worth another attempt; anything else (400/401/403/404/422) fails the call at once.
RETRYABLE = (
    litellm.exceptions.RateLimitError,
    litellm.exceptions.InternalServerError,
    litellm.exceptions.BadGatewayError,
    litellm.exceptions.ServiceUnavailableError,
    litellm.exceptions.Timeout,
    litellm.exceptions.APIConnectionError,
    asyncio.TimeoutError,
)
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0


@dataclass
class _Usage:
    """Counts of one judge call over all its HTTP attempts."""

    attempts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = 0.0
    raw: str | None = None
    last_error: str | None = None


_current: contextvars.ContextVar[_Usage] = contextvars.ContextVar("consensus_eval_llm_usage")


class HTTPFailure(Exception):
    """An HTTP failure that was not retried or ran out of retries."""


class LLMJudge:
    """A judge backed by any litellm model, configured entirely by an :class:`LLMJudgeConfig`."""

    deterministic = False
    reads_prompt = True
    version = "llm-2"  # bump when what is sent changes (2: the run index is sent as `seed`)

    def __init__(self, config: LLMJudgeConfig, rubric: Rubric) -> None:
        self.config = config
        self.rubric = rubric
        self.max_case_chars: int | None = config.max_case_chars
        # async_client=True: what instructor infers from a coroutine function, said so the client is typed async
        self._client = instructor.from_litellm(self._send, mode=MODES[config.mode], async_client=True)
        self._throttler: Throttler | None = None
        self._models: dict[str, type[_ReplyBase]] = {}
        self.backoff_base_s = BACKOFF_BASE_S
        self.backoff_max_s = BACKOFF_MAX_S
        register_prices(config)

    # ---------------------------------------------------------------- one judgment

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        """One judgment. ``run`` is sent as the request's ``seed``: the runs of an important case are
        distinct requests (not one reply served again by a provider-side cache) and, where the
        provider honours seeds, reproducible. Providers without ``seed`` have it dropped."""
        usage = _Usage()
        token = _current.set(usage)
        try:
            reply, _raw = await self._client.chat.completions.create_with_completion(
                model=self.config.model,
                response_model=self._response_model(dimension.id),
                # the rendered {"role", "content"} messages are OpenAI chat messages
                messages=cast("list[ChatCompletionMessageParam]", [dict(m) for m in messages]),
                max_retries=self.config.max_reasks,
                seed=run,
                **self._params(),
            )
            judgment = reply.to_judgment(dimension)
            return self._outcome(usage, status="ok", judgment=judgment)
        except InstructorRetryException as e:
            cause = e.__cause__ if isinstance(e.__cause__, HTTPFailure) else None
            reason = (str(cause) if cause
                      else f"reply failed validation after {e.n_attempts} attempt(s): {_last_line(e)}")
            return self._outcome(usage, status="failed", error=reason)
        except HTTPFailure as e:
            return self._outcome(usage, status="failed", error=str(e))
        except Exception as e:  # noqa: BLE001 - anything else is this call's failure, not the run's
            return self._outcome(usage, status="failed", error=f"{type(e).__name__}: {e}")
        finally:
            _current.reset(token)

    def _response_model(self, dimension_id: str) -> type[_ReplyBase]:
        """The dimension's response model, prepared for instructor once per judge.

        instructor wraps a plain model in a new ``ResponseSchema`` subclass on every call, and its
        schema cache is keyed by class, so each call rebuilt the class and its JSON schema. Given
        the already-wrapped class, instructor keeps it (and the cached schema) as is.
        """
        model = self._models.get(dimension_id)
        if model is None:
            plain = response_model(self.rubric, dimension_id)
            prepared = prepare_response_model(plain)  # checks both classes
            assert prepared is not None  # None only for a None model; instructor's signature does not say so
            model = self._models[dimension_id] = prepared
        return model

    async def check(self) -> tuple[bool, str]:
        """One tiny call (a few output tokens) to check model id, endpoint and key. Never raises."""
        usage = _Usage()
        token = _current.set(usage)
        start = time.monotonic()
        try:
            params = {**self._params(), "max_tokens": 5}
            await self._send(model=self.config.model, messages=[{"role": "user", "content": "Reply with OK."}],
                             **params)
            return True, f"ok in {time.monotonic() - start:.2f}s ({usage.attempts} attempt(s))"
        except HTTPFailure as e:
            return False, self._scrub(str(e))
        except Exception as e:  # noqa: BLE001
            return False, self._scrub(f"{type(e).__name__}: {e}")
        finally:
            _current.reset(token)

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Prompt tokens of the messages for this judge's model (litellm's counter; offline)."""
        return int(litellm.token_counter(model=self.config.model, messages=messages))

    def prices(self) -> tuple[float, float] | None:
        """(input, output) USD per token: the config's, else litellm's price map, else None."""
        if self.config.config_prices is not None:
            return self.config.config_prices
        try:
            info = litellm.get_model_info(self.config.model)
        except Exception:  # noqa: BLE001 - unknown model
            return None
        price_in, price_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        if price_in is None or price_out is None:
            return None
        return float(price_in), float(price_out)

    def _params(self) -> dict[str, Any]:
        c = self.config
        params: dict[str, Any] = {
            "temperature": c.temperature, "max_tokens": c.max_tokens, "num_retries": 0,
            "timeout": c.timeout_s, "drop_params": True,
        }
        if c.api_base:
            params["api_base"] = c.api_base
        key = c.api_key()
        if key:
            params["api_key"] = key
        elif c.api_base:
            params["api_key"] = "none"  # local OpenAI-compatible servers want some key
        if c.extra_body:
            params["extra_body"] = c.extra_body
        return params

    def _outcome(self, usage: _Usage, **kw: Any) -> CallOutcome:
        if "error" in kw:
            kw["error"] = self._scrub(kw["error"])
        return CallOutcome(
            model=self.config.model, raw=self._scrub(usage.raw) if usage.raw else None,
            attempts=max(usage.attempts, 1), prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens, completion_tokens=usage.completion_tokens,
            reasoning_tokens=usage.reasoning_tokens, cost=usage.cost, **kw,
        )

    def _scrub(self, text: str) -> str:
        """Remove the API key from any text that leaves this module."""
        key = self.config.api_key()
        return text.replace(key, "***") if key and len(key) >= 4 else text

    # ---------------------------------------------------------------- one HTTP attempt (+ retries)

    async def _send(self, **kwargs: Any) -> Any:
        """litellm.acompletion behind the rate limit, the hard timeout and the retry policy."""
        usage = _current.get()
        retries = self.config.max_retries
        for attempt in range(retries + 1):
            usage.attempts += 1
            try:
                async with self._limiter(), asyncio.timeout(self.config.timeout_s):
                    resp = await litellm.acompletion(**kwargs)
            except RETRYABLE as e:
                usage.last_error = _describe(e, self._scrub)
                if attempt == retries:
                    # `from None`: the provider's own error may echo the key, and whoever logs this
                    # failure (instructor's retry logger does, at ERROR) would print it with its cause
                    raise HTTPFailure(f"gave up after {attempt + 1} attempt(s): {usage.last_error}") from None
                await asyncio.sleep(self._delay(attempt, e))
                continue
            except Exception as e:  # noqa: BLE001 - 400/401/403/404/422 and anything unexpected: no retry helps
                raise HTTPFailure(f"not retried: {_describe(e, self._scrub)}") from None
            self._count(usage, resp)
            return resp
        raise AssertionError("unreachable")

    def _limiter(self) -> Any:
        if self.config.rpm is None:
            return _NoLimit()
        if self._throttler is None:
            # rpm spread over windows of about a second (k requests per 60k/rpm s): a 60 s window
            # would let the whole minute's quota go out in one burst, which providers punish with 429s.
            rpm = self.config.rpm
            k = max(1, int(rpm // 60))
            self._throttler = Throttler(rate_limit=k, period=60.0 * k / rpm)
        return self._throttler

    def _delay(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait before the next attempt: Retry-After if the server gave one, else
        exponential backoff with full jitter (``uniform(0, min(max, base x 2^attempt))``)."""
        after = retry_after_s(error)
        if after is not None:
            return min(after, self.backoff_max_s) + random.uniform(0, self.backoff_base_s / 10)
        return random.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))

    def _count(self, usage: _Usage, resp: Any) -> None:
        u = getattr(resp, "usage", None)
        if u is not None:
            usage.prompt_tokens += u.prompt_tokens or 0
            usage.completion_tokens += u.completion_tokens or 0
            details = getattr(u, "prompt_tokens_details", None)
            usage.cached_tokens += (getattr(details, "cached_tokens", 0) or 0) if details else 0
            cdetails = getattr(u, "completion_tokens_details", None)
            usage.reasoning_tokens += (getattr(cdetails, "reasoning_tokens", 0) or 0) if cdetails else 0
        cost = self._cost(resp)
        usage.cost = None if cost is None or usage.cost is None else usage.cost + cost
        usage.raw = _raw_text(resp)

    def _cost(self, resp: Any) -> float | None:
        """Cost of one response: the config's prices if given, else litellm's price map, else None."""
        c = self.config
        u = getattr(resp, "usage", None)
        if c.config_prices is not None:
            if u is None:
                return None
            price_in, price_out = c.config_prices
            return (u.prompt_tokens or 0) * price_in + (u.completion_tokens or 0) * price_out
        try:
            return float(litellm.completion_cost(completion_response=resp, model=c.model))
        except Exception:  # noqa: BLE001 - unknown model: cost unknown, not zero
            return None


def register_prices(c: LLMJudgeConfig) -> None:
    """Tell litellm (``litellm.register_model``, its public API) the prices of a model it does not
    know, when the config gives them, so litellm's own per-response pricing finds them.

    Our accounting does not depend on it (the judge prices its calls from the config); without it,
    litellm's look-up of an unknown model walks every name variant on every response. Models
    litellm already prices are left alone.
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


class _NoLimit:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def retry_after_s(error: BaseException) -> float | None:
    """The server's Retry-After (seconds or HTTP date; or retry-after-ms), if the error carries one."""
    headers = None
    resp = getattr(error, "response", None)
    if resp is not None:
        headers = getattr(resp, "headers", None)
    headers = headers or getattr(error, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms") is not None:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _describe(e: BaseException, scrub: Callable[[str], str]) -> str:
    """One line on a failed attempt: the error's class, status and first line, secrets scrubbed first
    (truncating first could cut a key in two and leave its start unscrubbed)."""
    if isinstance(e, asyncio.TimeoutError):
        return "timeout (hard per-call limit)"
    status = getattr(e, "status_code", None)
    text = scrub(str(e))
    msg = text.splitlines()[0][:300] if text else type(e).__name__
    return f"{type(e).__name__}" + (f" {status}" if status else "") + f": {msg}"


def _raw_text(resp: Any) -> str | None:
    try:
        msg = resp.choices[0].message
    except (AttributeError, IndexError):
        return None
    calls = getattr(msg, "tool_calls", None)
    if calls:
        arguments: str | None = calls[0].function.arguments
        return arguments
    return getattr(msg, "content", None)


def _last_line(e: InstructorRetryException) -> str:
    """What was wrong with the last reply: its validation errors, one ``field: message`` each."""
    attempts = getattr(e, "failed_attempts", None) or []
    last = attempts[-1].exception if attempts else e.__cause__
    if isinstance(last, pydantic.ValidationError):
        return format_validation_error(last).strip().replace("\n  ", "; ")[:800]
    text = str(last or e).strip().splitlines()
    return " ".join(t.strip() for t in text[:6])[:800] if text else type(e).__name__
