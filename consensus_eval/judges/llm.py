"""LLM judges: litellm (any provider) + instructor (typed replies), with our own retry policy.

Every HTTP attempt, first ask or re-ask, goes through :meth:`LLMJudge._send`, which the instructor
client wraps:

- it waits for the judge's pacing (:mod:`consensus_eval.judges.pacing`: a slot under the in-flight
  limit ``concurrency``, then its turn under ``rpm`` and ``tpm``), so re-asks and retries are paced
  too, and tells the pacing how the attempt ended (latency, tokens, a 429: ``concurrency: auto``
  adapts to them); a backoff sleep holds no slot;
- it enforces a hard timeout (``timeout_s``) per attempt (``asyncio.timeout``; the limiter's wait
  is not part of it) and gives litellm the same ``timeout``;
- it classifies every failure by its real cause (:func:`classify`: the exception chain, not
  litellm's class or status alone, which call a refused connection a 500) into an
  :data:`~consensus_eval.domain.judgment.ErrorKind`, and retries only what another attempt can
  cure: ``rate_limit``, ``server_error``, ``timeout``, ``connection`` (exponential backoff with full
  jitter, honouring ``Retry-After``: :func:`consensus_eval.judges.retry.retrying`, the loop the batch
  API's requests go through too); anything else fails the attempt at once;
- a failure no call of this judge can get past (``authentication``, ``connection_refused``,
  ``not_found``, ``local``) stops the judge: its later calls fail at once with that kind, without a
  request (``bad_request`` and ``invalid_reply`` are the call's own and do not);
- it counts attempts, tokens and cost of every attempt into the current call's :class:`_Usage`.

instructor itself only re-asks (``max_reasks``) when a reply fails validation against the
rubric's response model; a reply that still fails is recorded as ``failed`` (``invalid_reply``).
instructor is never given ``timeout``: it would read it as a deadline for the whole re-ask loop
(``stop_after_delay``) and end a call whose first attempts were slow (a hang cut by the timeout, a
429 backoff) before its re-asks, as "failed validation after 1 attempt". litellm's own retries are
off (``num_retries=0``): they differ from one provider to another, so this module owns the retries.

Importing this module changes no global state (no environment variable, no logger level, no
library setting): the command line does that (:func:`consensus_eval.cli`), and a host application
decides for itself (``consensus_eval.quiet_libraries()`` does what the CLI does). Nothing inside
litellm, instructor, the openai SDK or aiohttp is patched: what they do per call is their cost.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import aiohttp
import httpx
import instructor
import litellm
import litellm.exceptions
import openai
import pydantic
from instructor.core import (
    AsyncValidationError,
    IncompleteOutputException,
    InstructorRetryException,
    ResponseParsingError,
    ValidationError as InstructorValidationError,
)
from instructor.processing import handle_response_model, process_response

from consensus_eval._errors import format_validation_error
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig
from consensus_eval.domain.grounding import reask_prompt, ungrounded_quotes
from consensus_eval.domain.judgment import CallOutcome, ErrorKind, Judgment, quotes_of
from consensus_eval.domain.kinds.base import Reply
from consensus_eval.domain.replies import MAX_CACHED_MODELS, CaseReply, case_response_model, response_model
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.judges.pacing import Pacing, PacingReport
from consensus_eval.judges.per_case import CaseCalls, CaseOutcome
from consensus_eval.judges.quiet import litellm_imported
from consensus_eval.judges.retry import Backoff, Failed, HTTPFailure, retrying

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

litellm_imported(litellm)  # made quiet now if the command line asked before litellm was imported (quiet_libraries)

MODES = {
    "tools": instructor.Mode.TOOLS,
    "json": instructor.Mode.JSON,
    "json_schema": instructor.Mode.JSON_SCHEMA,
    "md_json": instructor.Mode.MD_JSON,
}

#: failures no call of the judge can get past: the judge stops (its later calls are not attempted)
STOPS_THE_JUDGE: frozenset[ErrorKind] = frozenset({"authentication", "connection_refused", "not_found", "local"})
#: what instructor re-asks on (its own list, ``instructor.v2.core.retry``): a reply that did not parse or validate
_INVALID_REPLY = (pydantic.ValidationError, json.JSONDecodeError, AsyncValidationError, ResponseParsingError,
                  InstructorValidationError)
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0

T = TypeVar("T")


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
#: set while a ``call: per_case`` judge makes a whole-case request (:meth:`LLMJudge._ask_case`)
_whole_case: contextvars.ContextVar[bool] = contextvars.ContextVar("consensus_eval_whole_case", default=False)


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
        #: the judge's pacing: in-flight limit, rpm, tpm (made on first use, inside the event loop)
        self._pacing: Pacing | None = None
        self._models: dict[type[Reply], type[Reply]] = {}
        #: set by the first failure in :data:`STOPS_THE_JUDGE`: every later call fails with it, unsent
        self.stopped: HTTPFailure | None = None
        #: the wait between attempts (:func:`consensus_eval.judges.retry.retrying`)
        self.backoff = Backoff(BACKOFF_BASE_S, BACKOFF_MAX_S)
        register_prices(config)
        from consensus_eval.judges import secrets  # (imported here: the module's imports are the packaging's)

        secrets.register(config.api_key())  # scrubbed from every text of every judge, this one's and the others'
        if config.reask_ungrounded:  # a re-ask changes what is asked and what is kept: other requests
            self.version = f"{self.version}+reask-ungrounded"
        #: ``call: per_case``: the whole-case requests in flight, shared by the dimension calls of a case
        self.per_case = CaseCalls(rubric, self._ask_case) if config.call == "per_case" else None
        #: dimension calls that one request answers (the runner starts this many workers per request slot)
        self.calls_per_request = len(rubric.dimensions) if self.per_case is not None else 1

    @property
    def whole_case(self) -> bool:
        """Whether the judge asks every dimension of a case in one request (``call: per_case``): its
        calls are planned with the whole-case prompt (:func:`~consensus_eval.domain.prompts.render_case`)."""
        return self.per_case is not None

    def expect(self, calls: Sequence[tuple[str, int, str]]) -> None:
        """The runner's list of the dimension calls it is about to make, ``(case id, run, dimension)``:
        a whole-case request's tokens and cost are shared by these (``call: per_case``; else nothing)."""
        if self.per_case is not None:
            self.per_case.expect(calls)

    async def _ask_case(self, case: Case, messages: list[dict[str, str]], run: int) -> CallOutcome:
        """The whole-case request of ``call: per_case`` (every dimension, one reply; a :class:`CaseOutcome`
        when ok): the same path as a dimension call (pacing, retries, re-asks, failures), with the
        combined response model (:func:`~consensus_eval.domain.judgment.case_response_model`)."""
        token = _whole_case.set(True)
        try:
            return await self.judge(case, self.rubric.dimensions[0], messages, run)
        finally:
            _whole_case.reset(token)

    def _case_outcome(self, reply: CaseReply) -> CaseOutcome:
        """A validated whole-case reply -> the request's ok outcome with every dimension's judgment."""
        outcome = self._outcome(_current.get(), status="ok")
        return CaseOutcome(**outcome.model_dump(),
                           judgments={d.id: self._scrub_judgment(reply.part(d).to_judgment(d))
                                      for d in self.rubric.dimensions})

    # ---------------------------------------------------------------- one judgment

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        """One judgment. ``run`` is sent as the request's ``seed``: the runs of an important case are
        distinct requests (not one reply served again by a provider-side cache) and, where the
        provider honours seeds, reproducible. Providers without ``seed`` have it dropped.

        A failed call's ``error_kind`` is the cause of its last failure; ``invalid_reply`` only when
        the re-asks ran out.

        ``call: per_case``: the call takes its slice of the case's one request (:mod:`.per_case`)."""
        if self.per_case is not None and not _whole_case.get():
            return await self.per_case.take(case, dimension, messages, run)
        usage = _Usage()
        if self.stopped is not None:
            return self._outcome(usage, status="failed", error_kind=self.stopped.kind, error=str(self.stopped))
        token = _current.set(usage)
        try:
            # no `timeout` here: instructor would take it as a deadline for all re-asks (_send sets it per attempt)
            params = {k: v for k, v in self._params().items() if k != "timeout"}
            reply, _raw = await self._client.chat.completions.create_with_completion(
                model=self.config.model,
                response_model=self._response_model(dimension.id, case),
                # the rendered {"role", "content"} messages are OpenAI chat messages
                messages=cast("list[ChatCompletionMessageParam]", [dict(m) for m in messages]),
                max_retries=self.config.max_reasks,
                seed=run,
                **params,
            )
            return await self._accept(case, dimension, messages, reply, run, params)
        except InstructorRetryException as e:
            cause = e.__cause__
            if isinstance(cause, HTTPFailure):  # an attempt (first ask or re-ask) failed for good
                where = f" (on re-ask {e.n_attempts - 1} of {self.config.max_reasks})" if e.n_attempts > 1 else ""
                return self._outcome(usage, status="failed", error_kind=cause.kind, error=f"{cause}{where}")
            if isinstance(cause, _INVALID_REPLY) or (cause is None and e.failed_attempts):
                return self._outcome(usage, status="failed", error_kind="invalid_reply",
                                     error=f"invalid reply, failed validation after {e.n_attempts} attempt(s): "
                                           f"{_last_line(e)}")
            return self._local(usage, cause or e)
        except HTTPFailure as e:
            return self._outcome(usage, status="failed", error_kind=e.kind, error=str(e))
        except IncompleteOutputException as e:  # finish_reason "length": the reply was cut off
            return self._outcome(usage, status="failed", error_kind="invalid_reply",
                                 error=f"invalid reply, cut off at max_tokens ({self.config.max_tokens}): "
                                       f"{_first_line(str(e), self.scrub)}")
        except Exception as e:  # noqa: BLE001 - anything else was raised here (a bug, a missing module): local
            return self._local(usage, e)
        finally:
            _current.reset(token)

    async def _accept(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                      reply: Reply | CaseReply,
                      run: int, params: dict[str, Any]) -> CallOutcome:
        """A validated reply -> the call's ``ok`` outcome: the judgment, the ungrounded re-ask when the run
        asks for it, the usage of every attempt. One path for a live reply and a batch reply."""
        if isinstance(reply, CaseReply):  # call: per_case, the whole case's reply
            return self._case_outcome(reply)
        judgment = reply.to_judgment(dimension)
        if self.config.reask_ungrounded:
            judgment = await self._reask_ungrounded(case, dimension, messages, judgment, run, params)
        return self._outcome(_current.get(), status="ok", judgment=judgment)

    async def judge_completion(self, case: Case, dimension: Dimension, messages: list[dict[str, str]], run: int,
                               completion: dict[str, Any]) -> CallOutcome:
        """The outcome of a reply that came another way than :meth:`judge` (a provider batch: the chat
        completion body the provider answered this call's request with), validated exactly as a live
        reply is: instructor's own parsing for the judge's mode (``process_response``), then the same
        :meth:`_accept`. Its tokens and cost are counted at the batch price (``batch_cost_factor``).

        A reply that fails validation (or was cut off at ``max_tokens``) is asked again live
        (:meth:`judge`, with its re-asks); the outcome then counts both (attempts, tokens, cost)."""
        usage = _Usage()
        token = _current.set(usage)
        try:
            usage.attempts = 1
            try:
                resp = litellm.ModelResponse(**completion)
                self._count(usage, resp, cost_factor=self.config.batch_cost_factor)
                reply = process_response(resp, response_model=self._response_model(dimension.id, case), stream=False,
                                         mode=self._client.mode, provider=self._client.provider)
            except (*_INVALID_REPLY, IncompleteOutputException, TypeError, KeyError, AttributeError) as e:
                live = await self.judge(case, dimension, messages, run)
                return _merged(live, usage, f"batch reply invalid, asked live: {_exc_line(e, self.scrub)[:300]}")
            params = {k: v for k, v in self._params().items() if k != "timeout"}
            return await self._accept(case, dimension, messages, reply, run, params)
        except Exception as e:  # noqa: BLE001 - a bug here must not lose the batch's other replies
            return self._local(usage, e)
        finally:
            _current.reset(token)

    async def _reask_ungrounded(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                                judgment: Judgment, run: int, params: dict[str, Any]) -> Judgment:
        """``ungrounded: reask``: when evidence of a valid reply is not found in the case
        (:func:`~consensus_eval.domain.grounding.ungrounded_quotes`), ask once more in the same
        conversation (the reply, then :func:`~consensus_eval.domain.grounding.reask_prompt`) and keep
        the second reply if it is valid, else the first. Attempts, tokens and cost of both count (the
        call's one :class:`_Usage`); the stored raw reply is the one kept."""
        evidence = quotes_of(judgment)
        missing = ungrounded_quotes(case.record, self.rubric.conversation_text(case), evidence)
        if not missing:
            return judgment
        usage = _current.get()
        first_raw = usage.raw
        asked = [*messages, {"role": "assistant", "content": first_raw or judgment.model_dump_json()},
                 {"role": "user", "content": reask_prompt(missing)}]
        try:
            reply, _raw = await self._client.chat.completions.create_with_completion(
                model=self.config.model, response_model=self._response_model(dimension.id, case),
                messages=cast("list[ChatCompletionMessageParam]", asked),
                max_retries=self.config.max_reasks, seed=run, **params)
        except Exception as e:  # noqa: BLE001 - the second reply failed: the first, valid one stands
            usage.raw = first_raw
            usage.last_error = f"re-ask for exact quotes failed, first reply kept: {_exc_line(e, self.scrub)}"
            return judgment
        return reply.to_judgment(dimension)

    def _local(self, usage: _Usage, error: BaseException) -> CallOutcome:
        """A call that failed on this machine (not at the provider): no call of this judge will do better."""
        failure = self._stop(HTTPFailure("local", f"local error, not retried: {_exc_line(error, self.scrub)}"))
        return self._outcome(usage, status="failed", error_kind=failure.kind, error=str(failure))

    def _stop(self, failure: HTTPFailure) -> HTTPFailure:
        """Remember the first failure that stops the judge; its later calls fail with it, unsent."""
        if self.stopped is None:
            self.stopped = HTTPFailure(failure.kind, f"not attempted: judge stopped after {failure}")
        return failure

    def _response_model(self, dimension_id: str, case: Case | None = None) -> type[Reply]:
        """The dimension's response model (``call: per_case``: the whole case's, whatever the dimension),
        prepared for instructor once per judge (and per set of criterion ids, for a ``criteria`` dimension
        whose criteria come from the ``case``: bounded like the models themselves).

        instructor wraps a plain model in a new ``ResponseSchema`` subclass on every call, and its
        schema cache is keyed by class, so each call rebuilt the class and its JSON schema. Given
        the already-wrapped class (``instructor.response_schema``, public: what instructor itself does to a
        plain pydantic model), instructor keeps it (and the cached schema) as is.
        """
        criteria = case.criteria if case is not None else None
        plain: type[Reply] = (case_response_model(self.rubric, criteria) if self.per_case is not None
                                   else response_model(self.rubric, dimension_id, criteria))
        model = self._models.get(plain)
        if model is None:
            model = self._models[plain] = instructor.response_schema(plain)
            while len(self._models) > MAX_CACHED_MODELS:
                self._models.pop(next(iter(self._models)))
        return model

    async def check(self) -> tuple[bool, str]:
        """One tiny call (a few output tokens) to check model id, endpoint and key. Never raises.
        A failure says its kind: ``"connection refused, not retried: ... [connection_refused]"``."""
        usage = _Usage()
        token = _current.set(usage)
        start = time.monotonic()
        try:
            params = {**self._params(), "max_tokens": 5}
            await self._send(model=self.config.model, messages=[{"role": "user", "content": "Reply with OK."}],
                             **params)
            return True, f"ok in {time.monotonic() - start:.2f}s ({usage.attempts} attempt(s))"
        except HTTPFailure as e:
            return False, self.scrub(f"{e} [{e.kind}]")
        except Exception as e:  # noqa: BLE001 - _send raises HTTPFailure only; anything else is ours
            return False, self.scrub(f"local error: {_exc_line(e, self.scrub)} [local]")
        finally:
            _current.reset(token)

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Prompt tokens of the messages alone for this judge's model (litellm's counter; offline).
        What a call sends is :meth:`count_request_tokens` (the response schema instructor adds too)."""
        return int(litellm.token_counter(model=self.config.model, messages=messages))

    def request(self, messages: list[dict[str, str]], dimension_id: str, case: Case | None = None) -> dict[str, Any]:
        """What instructor sends for this call besides the sampling settings: ``messages`` (with the
        schema JSON/MD_JSON modes write into them), ``tools`` (TOOLS) or ``response_format``, built by
        instructor's own public ``handle_response_model`` in this judge's mode. Nothing is sent."""
        _, kwargs = handle_response_model(self._response_model(dimension_id, case), mode=self._client.mode,
                                          provider=self._client.provider, messages=[dict(m) for m in messages])
        return {k: v for k, v in kwargs.items() if k in ("messages", "tools", "tool_choice", "response_format")}

    def count_request_tokens(self, messages: list[dict[str, str]], dimension_id: str,
                             case: Case | None = None) -> int:
        """Prompt tokens of the request as sent (:meth:`request`: messages plus the tool or schema
        instructor adds), with litellm's counter for this model (``litellm.token_counter``)."""
        return self.count_request(self.request(messages, dimension_id, case))

    def count_request(self, request: dict[str, Any]) -> int:
        """Prompt tokens of a request body (:func:`request_tokens` with this judge's model)."""
        return request_tokens(self.config.model, request)

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

    def connection(self) -> dict[str, Any]:
        """Where and as whom litellm reaches the provider: ``api_base`` when set, and ``api_key`` (the key
        from the environment variable the config names; ``"none"`` for a keyless local server)."""
        c = self.config
        conn: dict[str, Any] = {}
        if c.api_base:
            conn["api_base"] = c.api_base
        key = c.api_key()
        if key:
            conn["api_key"] = key
        elif c.api_base:
            conn["api_key"] = "none"  # local OpenAI-compatible servers want some key
        return conn

    def _params(self) -> dict[str, Any]:
        """What litellm is given besides model and messages (``timeout`` included: see :meth:`judge`)."""
        c = self.config
        params: dict[str, Any] = {
            "temperature": c.temperature, "max_tokens": c.max_tokens, "num_retries": 0,
            "timeout": c.timeout_s, "drop_params": True,
        }
        params.update(self.connection())
        if c.extra_body:
            params["extra_body"] = c.extra_body
        if c.cache_markers:
            # litellm's documented injection (cache_control on the system message, which carries the
            # rubric, and the schema in JSON modes; Anthropic's tools come before it and are cached with it)
            params["cache_control_injection_points"] = CACHE_POINTS
        return params

    def _outcome(self, usage: _Usage, **kw: Any) -> CallOutcome:
        if "error" in kw:
            kw["error"] = self.scrub(kw["error"])
        if kw.get("judgment") is not None:
            kw["judgment"] = self._scrub_judgment(kw["judgment"])
        return CallOutcome(
            model=self.config.model, raw=self.scrub(usage.raw) if usage.raw else None,
            attempts=usage.attempts, prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens, completion_tokens=usage.completion_tokens,
            reasoning_tokens=usage.reasoning_tokens, cost=usage.cost, **kw,
        )

    def scrub(self, text: str) -> str:
        """Remove the API key from any text that leaves the judge (errors, raw replies, batch notes): whole, and
        its masked, URL-encoded and JSON-escaped forms (:func:`consensus_eval.judges.secrets.scrub`)."""
        from consensus_eval.judges.secrets import scrub

        return scrub(text, self.config.api_key())

    def _scrub_judgment(self, judgment: Judgment) -> Judgment:
        """The judgment with the key scrubbed from its evidence, reasons and comment (a reply may quote it)."""
        dumped = judgment.model_dump_json()
        cleaned = self.scrub(dumped)
        return judgment if cleaned == dumped else type(judgment).model_validate_json(cleaned)

    def _endpoint(self) -> str:
        c = self.config
        return c.api_base or f"{c.model.split('/', 1)[0] if '/' in c.model else 'openai'}'s default endpoint"

    # ---------------------------------------------------------------- one HTTP attempt (+ retries)

    async def _send(self, **kwargs: Any) -> Any:
        """litellm.acompletion behind the rate limit, the hard timeout and the retry policy.

        Raises :class:`HTTPFailure` (with the cause's kind) only; instructor passes it on as the
        ``__cause__`` of its ``InstructorRetryException``, whichever ask it came from."""
        usage = _current.get()
        c = self.config
        kwargs["timeout"] = c.timeout_s

        async def attempt(_n: int) -> Any:
            if self.stopped is not None:  # another call found the judge dead while this one waited
                raise HTTPFailure(self.stopped.kind, str(self.stopped)) from None
            pacing = self.pacing
            # the pacing's wait is not part of the attempt's hard timeout
            ticket = await pacing.acquire(self._estimate_tokens(kwargs) if c.tpm is not None else 0)
            if self.stopped is not None:  # the judge stopped while this attempt waited for its turn
                pacing.release(ticket)
                raise HTTPFailure(self.stopped.kind, str(self.stopped)) from None
            try:
                usage.attempts += 1  # counted once the request may go out (the pacing's wait is not one)
                async with asyncio.timeout(c.timeout_s):
                    resp = await litellm.acompletion(**kwargs)
            except Exception as e:  # noqa: BLE001 - every failure is classified; only RETRYABLE ones are retried
                failed = self.failure(e, timeout_s=c.timeout_s)
                pacing.release(ticket, rate_limited=failed.kind == "rate_limit")  # a backoff holds no slot
                usage.last_error = str(failed)
                raise failed from None
            except BaseException:  # cancelled: the slot goes back
                pacing.release(ticket)
                raise
            pacing.release(ticket, tokens=_total_tokens(resp))
            self._count(usage, resp)
            return resp

        try:
            return await retrying(attempt, retries=c.max_retries, backoff=self.backoff)
        except HTTPFailure as failure:
            if failure.kind in STOPS_THE_JUDGE:
                self._stop(failure)
            raise

    async def with_retries(self, what: str, request: Callable[[], Awaitable[T]]) -> T:
        """A request to this judge's provider outside a judgment (the batch API's: files, batches) under
        the judge's retry policy: transient failures are retried (up to ``max_retries`` more attempts,
        the judge's backoff, Retry-After); any other, or the last, raises :class:`HTTPFailure` saying
        ``what`` was being done, secrets scrubbed.

        Args:
            what: what the request does, for the error (``"uploading the batch file"``).
            request: makes one attempt (called again for each retry).
        """
        async def attempt(_n: int) -> T:
            try:
                return await request()
            except Exception as e:  # noqa: BLE001 - every failure is classified; only RETRYABLE ones are retried
                raise self.failure(e) from None

        return await retrying(attempt, retries=self.config.max_retries, backoff=self.backoff, what=what)

    def failure(self, error: BaseException, *, timeout_s: float | None = None) -> Failed:
        """An attempt's error classified (:func:`classify`) against this judge's endpoint, its key scrubbed.

        Args:
            error: what the attempt raised.
            timeout_s: the hard per-attempt limit it ran under, if any (named when it was hit).
        """
        kind, head, detail = classify(error, self.scrub, timeout_s=timeout_s, endpoint=self._endpoint())
        return Failed(kind, head, detail, error)

    @property
    def pacing(self) -> Pacing:
        """This judge's pacing (one per judge, shared by all its calls)."""
        if self._pacing is None:
            c = self.config
            self._pacing = Pacing(rpm=c.rpm, tpm=c.tpm, concurrency=c.concurrency, max_concurrency=c.max_concurrency)
        return self._pacing

    def pacing_report(self) -> PacingReport | None:
        """What limited this judge's requests so far (None before its first request)."""
        return self._pacing.report() if self._pacing is not None and self._pacing.requests else None

    def _estimate_tokens(self, kwargs: dict[str, Any]) -> int:
        """The prompt tokens of an attempt, as charged to ``tpm`` before it is sent (messages as sent,
        re-asks included; instructor's tool schema is not counted: the reply's usage corrects it)."""
        try:
            return int(litellm.token_counter(model=self.config.model, messages=kwargs.get("messages") or []))
        except Exception:  # noqa: BLE001 - a model litellm cannot count: about 4 characters a token
            return sum(len(str(m.get("content") or "")) for m in kwargs.get("messages") or []) // 4 + 1

    def _count(self, usage: _Usage, resp: Any, cost_factor: float = 1.0) -> None:
        u = getattr(resp, "usage", None)
        if u is not None:
            usage.prompt_tokens += token_count(u.prompt_tokens)
            usage.completion_tokens += token_count(u.completion_tokens)
            usage.cached_tokens += cached_tokens(u)
            cdetails = getattr(u, "completion_tokens_details", None)
            usage.reasoning_tokens += token_count(getattr(cdetails, "reasoning_tokens", 0)) if cdetails else 0
        cost = self._cost(resp)
        usage.cost = None if cost is None or usage.cost is None else usage.cost + cost * cost_factor
        usage.raw = _raw_text(resp)

    def _cost(self, resp: Any) -> float | None:
        """Cost of one response: the config's prices if given, else litellm's price map, else None."""
        c = self.config
        u = getattr(resp, "usage", None)
        if c.config_prices is not None:
            if u is None:
                return None
            price_in, price_out = c.config_prices
            cached = min(cached_tokens(u), token_count(u.prompt_tokens))
            price_cached = c.cached_input_price if c.cached_input_price is not None else price_in
            return (token_count(u.prompt_tokens) - cached) * price_in + cached * price_cached \
                + token_count(u.completion_tokens) * price_out
        try:
            cost = float(litellm.completion_cost(completion_response=resp, model=c.model))
        except Exception:  # noqa: BLE001 - unknown model: cost unknown, not zero
            return None
        return cost if cost >= 0 and math.isfinite(cost) else None   # from negative counts: unknown, not a refund


#: where litellm puts the prompt-cache marker (``cache_control_injection_points``, its documented
#: parameter): the system message, the last message every call of a dimension shares
CACHE_POINTS: list[dict[str, str]] = [{"location": "message", "role": "system"}]


def cached_tokens(usage: Any) -> int:
    """Prompt tokens the provider served from its cache, from a litellm usage object.

    litellm normalises every provider's figure to ``prompt_tokens_details.cached_tokens``: OpenAI's
    own field, DeepSeek's ``prompt_cache_hit_tokens``, Anthropic's ``cache_read_input_tokens`` (cache
    writes, ``cache_creation_input_tokens``, are not hits)."""
    details = getattr(usage, "prompt_tokens_details", None)
    n = getattr(details, "cached_tokens", None) if details is not None else None
    if n is None:  # a provider litellm did not normalise: its own field names
        n = getattr(usage, "prompt_cache_hit_tokens", None) or getattr(usage, "cache_read_input_tokens", None)
    return token_count(n)


def token_count(value: Any) -> int:
    """A token count a provider reported, as kept: a whole number of 0 or more. A negative count, a fraction, text
    or nothing counts 0 (a provider's negative counts would make negative costs); docs/judges.md."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0
    return int(value) if value == int(value) else 0


def request_tokens(model: str, request: dict[str, Any]) -> int:
    """Prompt tokens of a chat request body (``messages`` and ``tools``, plus a ``response_format``
    schema counted as text) with litellm's counter for ``model``: the estimate of what a call sends."""
    n = int(litellm.token_counter(model=model, messages=request.get("messages", []), tools=request.get("tools")))
    fmt = request.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        n += int(litellm.token_counter(model=model, text=json.dumps(fmt.get("json_schema"), ensure_ascii=False)))
    return n


# ---------------------------------------------------------------------- what a failure was


_WORDS: dict[ErrorKind, str] = {
    "rate_limit": "rate limited", "server_error": "server error", "timeout": "timeout",
    "connection": "connection dropped", "connection_refused": "connection refused",
    "authentication": "authentication failed", "not_found": "not found", "bad_request": "bad request",
    "invalid_reply": "invalid reply", "local": "local error", "record_too_long": "record too long",
}


def classify(error: BaseException, scrub: Callable[[str], str] = str, *, timeout_s: float | None = None,
             endpoint: str = "the endpoint") -> tuple[ErrorKind, str, str]:
    """``(kind, head, detail)`` of a failed attempt: its :data:`ErrorKind` by the real cause, the kind
    in words (with the HTTP status when the server sent one: ``"authentication failed (401)"``) and
    one line on what happened (secrets scrubbed, then cut).

    The exception chain (``__cause__``/``__context__``) is read, not only the outer exception:
    litellm turns a refused connection into ``InternalServerError`` (500), and an exception raised
    inside it (``No module named 'mcp'``, a TypeError) into ``APIConnectionError``. In order:

    1. our hard timeout (a bare ``TimeoutError``) → ``timeout``;
    2. refused, DNS or TLS failure when connecting (``ConnectionRefusedError``, ``socket.gaierror``,
       ``ssl.SSLError``, aiohttp's ``ClientConnector*Error``) → ``connection_refused``;
    3. an HTTP status the server sent (``httpx.HTTPStatusError``, the openai SDK's status errors,
       aiohttp's ``ClientResponseError``): 401/402/403 → ``authentication``, 404 → ``not_found``,
       408/504 → ``timeout``, 429 → ``rate_limit``, other 4xx → ``bad_request`` (a context window
       exceeded included), 5xx or an unreadable 2xx reply → ``server_error``;
    4. a timeout anywhere in the chain (ours, the transport's, the provider's) → ``timeout``;
    5. any other failure to connect → ``connection_refused``; a connection that broke during the
       request (disconnected, reset, a truncated body) → ``connection``;
    6. litellm's catch-all ``APIConnectionError`` with none of the above under it, or an exception
       that is not litellm's at all → ``local`` (raised on this machine);
    7. otherwise litellm's class and status code.
    """
    chain = _chain(error)
    if isinstance(error, TimeoutError):
        limit = f"{timeout_s:g} s" if timeout_s is not None else "the time limit"
        return "timeout", _WORDS["timeout"], f"no reply within {limit} (hard per-attempt limit)"

    connecting = any(isinstance(x, (aiohttp.ClientConnectorError, httpx.ConnectError)) for x in chain)
    for x in chain:
        what = None
        if isinstance(x, (aiohttp.ClientSSLError, ssl.SSLCertVerificationError)) or (
                isinstance(x, ssl.SSLError) and connecting):
            what = "TLS failed"
        elif isinstance(x, (socket.gaierror, aiohttp.ClientConnectorDNSError)):
            what = "DNS lookup failed"
        elif isinstance(x, ConnectionRefusedError):
            what = "refused"
        if what:
            root = _deepest(chain, (ssl.SSLError, socket.gaierror, ConnectionRefusedError)) or x
            return ("connection_refused", _WORDS["connection_refused"],
                    f"cannot reach {endpoint} ({what}: {_exc_line(root, scrub)})")

    status = _http_status(chain)
    if status is not None:
        kind = status_kind(status)
        words = _WORDS[kind]
        if status < 400:
            head = f"{words} (unreadable reply, HTTP {status})"
        elif isinstance(error, litellm.exceptions.ContextWindowExceededError):
            head = f"{words} ({status}, context window exceeded)"
        else:
            head = f"{words} ({status})"
        return kind, head, _describe(error, scrub)

    if any(isinstance(x, (TimeoutError, httpx.TimeoutException, openai.APITimeoutError)) for x in chain):
        return "timeout", _WORDS["timeout"], _describe(error, scrub)

    if connecting:
        root = _deepest(chain, (OSError,)) or error
        return ("connection_refused", _WORDS["connection_refused"],
                f"cannot reach {endpoint} ({_exc_line(root, scrub)})")
    dropped = _deepest(chain, (aiohttp.ClientError, httpx.TransportError, ConnectionError))
    if dropped is not None:
        return "connection", _WORDS["connection"], _exc_line(dropped, scrub)

    if isinstance(error, litellm.exceptions.APIConnectionError) or not isinstance(error, openai.OpenAIError):
        root = chain[-1]
        where = (f" (raised inside litellm, which reported it as {type(error).__name__})"
                 if root is not error and isinstance(error, openai.OpenAIError) else "")
        return "local", _WORDS["local"], _exc_line(root, scrub) + where

    kind = status_kind(getattr(error, "status_code", None))
    if isinstance(error, (litellm.exceptions.AuthenticationError, litellm.exceptions.PermissionDeniedError)):
        kind = "authentication"
    elif isinstance(error, litellm.exceptions.NotFoundError):
        kind = "not_found"
    elif isinstance(error, (litellm.exceptions.BadRequestError, litellm.exceptions.UnprocessableEntityError)):
        kind = "bad_request"
    elif isinstance(error, litellm.exceptions.RateLimitError):
        kind = "rate_limit"
    status = getattr(error, "status_code", None)
    unreadable = kind == "server_error" and isinstance(status, int) and status < 400  # a 200 litellm could not read
    return kind, _WORDS[kind] + (f" (unreadable reply, HTTP {status})" if unreadable else ""), _describe(error, scrub)


def status_kind(status: int | None) -> ErrorKind:
    """The :data:`ErrorKind` of an HTTP status a provider answered with (None: no status, a server error).

    Args:
        status: the HTTP status code, or None.
    """
    if status in (401, 402, 403):  # 402: payment required, the account cannot use the model
        return "authentication"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if status is not None and 400 <= status < 500:
        return "bad_request"
    return "server_error"  # 5xx, or a reply (2xx) that could not be read


def _chain(error: BaseException) -> list[BaseException]:
    """The error and what caused it, outermost first (``__cause__``, else ``__context__``)."""
    out: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and all(e is not x for x in out) and len(out) < 32:
        out.append(e)
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return out


def _deepest(chain: list[BaseException], types: tuple[type[BaseException], ...]) -> BaseException | None:
    """The innermost exception of ``types`` in the chain (the most specific account of the cause)."""
    return next((x for x in reversed(chain) if isinstance(x, types)), None)


def _http_status(chain: list[BaseException]) -> int | None:
    """The status of a reply the server actually sent, if any. litellm's own classes carry a
    status code even when nothing was received (a refused connection is its "500"): not read."""
    for x in chain:
        if isinstance(x, httpx.HTTPStatusError):
            return x.response.status_code
        if isinstance(x, aiohttp.ClientResponseError):
            return x.status
        if isinstance(x, openai.APIStatusError) and not type(x).__module__.startswith("litellm"):
            return x.status_code
    return None


def _exc_line(e: BaseException, scrub: Callable[[str], str]) -> str:
    return f"{type(e).__name__}: {_first_line(str(e), scrub)}" if str(e) else type(e).__name__


def _first_line(text: str, scrub: Callable[[str], str]) -> str:
    """The first line, scrubbed before it is cut (cutting first could leave half a key)."""
    text = scrub(text).strip()
    return text.splitlines()[0][:300] if text else ""


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


def _describe(e: BaseException, scrub: Callable[[str], str]) -> str:
    """One line on a failed attempt: the error's class, status and first line, secrets scrubbed first
    (truncating first could cut a key in two and leave its start unscrubbed)."""
    status = getattr(e, "status_code", None)
    msg = _first_line(str(e), scrub) or type(e).__name__
    return f"{type(e).__name__}" + (f" {status}" if status else "") + f": {msg}"


def _total_tokens(resp: Any) -> int:
    """Prompt + completion tokens a reply reports (0 when it reports none)."""
    u = getattr(resp, "usage", None)
    if u is None:
        return 0
    return int(getattr(u, "prompt_tokens", 0) or 0) + int(getattr(u, "completion_tokens", 0) or 0)


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


def _merged(live: CallOutcome, first: _Usage, note: str) -> CallOutcome:
    """A live call's outcome that follows an invalid batch reply: attempts, tokens and cost of both."""
    def add(a: int | None, b: int) -> int:
        return (a or 0) + b
    cost = None if live.cost is None or first.cost is None else live.cost + first.cost
    update: dict[str, Any] = {
        "attempts": live.attempts + first.attempts, "prompt_tokens": add(live.prompt_tokens, first.prompt_tokens),
        "cached_tokens": add(live.cached_tokens, first.cached_tokens),
        "completion_tokens": add(live.completion_tokens, first.completion_tokens),
        "reasoning_tokens": add(live.reasoning_tokens, first.reasoning_tokens), "cost": cost}
    if live.status == "failed":
        update["error"] = f"{live.error} ({note})"
    return live.model_copy(update=update)


def _last_line(e: InstructorRetryException) -> str:
    """What was wrong with the last reply: its validation errors, one ``field: message`` each."""
    attempts = getattr(e, "failed_attempts", None) or []
    last = attempts[-1].exception if attempts else e.__cause__
    if isinstance(last, pydantic.ValidationError):
        return format_validation_error(last).strip().replace("\n  ", "; ")[:800]
    text = str(last or e).strip().splitlines()
    return " ".join(t.strip() for t in text[:6])[:800] if text else type(e).__name__
