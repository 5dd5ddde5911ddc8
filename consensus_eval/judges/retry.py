"""The retry policy of a judge's requests to its provider, one loop for every path that sends them: the
live calls (:meth:`consensus_eval.judges.llm.LLMJudge._send`) and the batch API's requests
(:class:`consensus_eval.judges.batch_api.BatchAPI`).

An attempt that fails raises :class:`Failed`: the failure classified (its
:data:`~consensus_eval.domain.judgment.ErrorKind`, the kind in words, one line of detail) with the
error it came from. :func:`retrying` tries again what another attempt can cure (:data:`RETRYABLE`), up
to ``retries`` more times, after :meth:`Backoff.delay` (the server's ``Retry-After`` when it sent one,
else exponential backoff with full jitter); anything else, or the last failure, raises
:class:`HTTPFailure` with its kind and what was tried.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from consensus_eval._errors import JudgeError
from consensus_eval.domain.judgment import ErrorKind

T = TypeVar("T")

#: failures another attempt can cure: retried with backoff (up to ``max_retries``)
RETRYABLE: frozenset[ErrorKind] = frozenset({"rate_limit", "server_error", "timeout", "connection"})


class HTTPFailure(JudgeError):
    """An attempt's failure that was not retried or ran out of retries; ``kind`` is its cause."""

    def __init__(self, kind: ErrorKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: ErrorKind = kind


class Failed(JudgeError):
    """One attempt's failure, classified: ``kind``, ``head`` (the kind in words, with the HTTP status
    when the server sent one) and ``detail`` (one line, secrets scrubbed); ``error``: what was raised
    (its ``Retry-After`` sets the wait before the next attempt)."""

    def __init__(self, kind: ErrorKind, head: str, detail: str, error: BaseException) -> None:
        super().__init__(f"{head}: {detail}")
        self.kind: ErrorKind = kind
        self.head = head
        self.detail = detail
        self.error = error


@dataclass
class Backoff:
    """How long to wait before the next attempt: ``base_s`` and ``max_s`` of the exponential backoff."""

    base_s: float
    max_s: float

    def delay(self, attempt: int, error: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0: the first): the server's Retry-After
        if it gave one (at most ``max_s``, plus up to a tenth of ``base_s`` of jitter), else exponential
        backoff with full jitter (``uniform(0, min(max_s, base_s x 2^attempt))``).

        Args:
            attempt: the failed attempt's number, from 0.
            error: what the attempt raised (read for its Retry-After).
        """
        after = retry_after_s(error)
        if after is not None:
            return min(after, self.max_s) + random.uniform(0, self.base_s / 10)
        return random.uniform(0, min(self.max_s, self.base_s * 2**attempt))


async def retrying(attempt: Callable[[int], Awaitable[T]], *, retries: int, backoff: Backoff,
                   what: str = "") -> T:
    """``attempt(n)`` (n = 0, 1, ...) until it returns, trying again after a :class:`Failed` of a
    :data:`RETRYABLE` kind, up to ``retries`` more times; no attempt's wait holds anything.

    Args:
        attempt: one try; raises :class:`Failed` when it failed (anything else it raises passes through).
        retries: how many more attempts after the first.
        backoff: the wait before each next attempt.
        what: what is being done, for the final error (``"uploading the batch file"``; empty: nothing).

    Returns:
        What the first attempt that succeeded returned.

    Raises:
        HTTPFailure: the failure was not retryable, or the attempts ran out (its message says which).
    """
    n = 0
    while True:
        try:
            return await attempt(n)
        except Failed as f:
            if f.kind in RETRYABLE and n < retries:
                await asyncio.sleep(backoff.delay(n, f.error))
                n += 1
                continue
            how = f"gave up after {n + 1} attempt(s)" if f.kind in RETRYABLE else "not retried"
            # `from None`: the provider's own error may echo the key, and whoever logs this failure
            # (instructor's retry logger does, at ERROR) would print it with its cause
            raise HTTPFailure(f.kind, f"{what + ': ' if what else ''}{f.head}, {how}: {f.detail}") from None


def retry_after_s(error: BaseException) -> float | None:
    """The server's Retry-After (seconds or HTTP date; or retry-after-ms), if the error carries one.

    Args:
        error: an attempt's error (litellm's carry the reply's headers).
    """
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
