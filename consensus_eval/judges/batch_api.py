"""Provider batch APIs for LLM judges (``batch: true``): the provider-facing half.

What is sent: one JSON line per call in the provider's batch format (OpenAI's: ``custom_id``,
``method``, ``url``, ``body``), the body exactly what the live path sends (:meth:`LLMJudge.request`:
instructor's messages and tools or response format for the judge's mode, by its public
``handle_response_model``; plus the model, ``temperature``, ``max_tokens``, the run as ``seed`` and
``extra_body``). ``custom_id`` is the call's request hash. Files are uploaded and batches created,
listed, retrieved and read through litellm's public files and batches API (``acreate_file``,
``acreate_batch``, ``alist_batches``, ``aretrieve_batch``, ``afile_content``, ``acancel_batch``) with the
judge's provider, ``api_base`` and key. What is read back is a line per call: the chat completion the
provider answered with, or an error; :meth:`LLMJudge.judge_completion` validates a completion exactly as a
live reply. The orchestration (which calls, when, what is stored) is
:mod:`consensus_eval.execution.batch`.

Every request to the batch API goes through the judge's retry policy for transient failures (429, 5xx,
timeouts, dropped connections: up to ``max_retries`` more attempts, backoff with jitter, Retry-After);
another failure raises :class:`~consensus_eval.judges.retry.HTTPFailure` with its kind, secrets scrubbed
(:meth:`LLMJudge.with_retries`, the loop of the live calls too).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import litellm

from consensus_eval.domain.cases import Case
from consensus_eval.domain.textio import loads_json
from consensus_eval.judges.llm import LLMJudge, status_kind

#: OpenAI's limits per batch: requests and input file size (bytes); a judge's pending calls are split under both
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
#: the metadata field that carries our key of a batch (:attr:`BatchRecord.key`), to find it again by listing
METADATA_KEY = "consensus_eval_batch"
#: the chat endpoint a batch's lines are for
ENDPOINT = "/v1/chat/completions"
#: provider batch statuses: still running (collect later), and over (collect what it answered)
RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
OVER = frozenset({"completed", "expired", "failed", "cancelled"})

T = TypeVar("T")


def provider_model(model: str) -> str:
    """The model name the provider knows (``gpt-4.1`` of ``openai/gpt-4.1``): what a batch line's body names."""
    return model.split("/", 1)[1] if "/" in model else model


def batch_line(judge: LLMJudge, messages: list[dict[str, str]], dimension_id: str, run: int,
               custom_id: str, case: Case | None = None) -> dict[str, Any]:
    """One call as a line of the provider's batch input file (OpenAI's JSONL format), its body the
    request the live path would send (see the module's docstring); ``case``: the case asked about (its
    criteria make the response model of a ``criteria`` dimension without criteria of its own)."""
    c = judge.config
    body: dict[str, Any] = {"model": provider_model(c.model), **judge.request(messages, dimension_id, case),
                            "temperature": c.temperature, "max_tokens": c.max_tokens, "seed": run, **c.extra_body}
    return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}


def encode(line: dict[str, Any]) -> bytes:
    """A batch line as the bytes written to the input file (one JSON object, newline-terminated)."""
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def split(lines: list[tuple[str, bytes]], max_requests: int | None = None,
          max_bytes: int | None = None) -> list[list[tuple[str, bytes]]]:
    """``(custom_id, line)`` pairs cut, in order, into batches of at most ``max_requests`` lines and
    ``max_bytes`` bytes (default :data:`MAX_REQUESTS`, :data:`MAX_BYTES`; a single line over ``max_bytes`` is a
    batch of its own: the provider says no)."""
    max_requests = MAX_REQUESTS if max_requests is None else max_requests
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    out: list[list[tuple[str, bytes]]] = []
    size = 0
    for item in lines:
        if not out or len(out[-1]) >= max_requests or (out[-1] and size + len(item[1]) > max_bytes):
            out.append([])
            size = 0
        out[-1].append(item)
        size += len(item[1])
    return out


@dataclass(frozen=True)
class BatchStatus:
    """What the provider says of a batch: its ``status`` (``validating``, ``in_progress``, ``finalizing``,
    ``completed``, ``expired``, ``failed``, ``cancelling``, ``cancelled``), the files of its answers and of its
    errors (None until there are some), and the provider's errors (a batch that failed validation)."""

    batch_id: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    errors: str | None


@dataclass(frozen=True)
class LineResult:
    """One line of a batch's output or error file: the call (``custom_id``, its request hash), the
    HTTP status the provider answered it with (None when the line carries only an error), the chat
    completion body (a 200) and, else, the error in one line."""

    custom_id: str
    status_code: int | None
    body: dict[str, Any] | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code == 200 and isinstance(self.body, dict) and "choices" in self.body


def read_lines(data: bytes) -> Iterator[LineResult]:
    """The lines of an output or error file (both have the same shape); unreadable lines are skipped."""
    for raw in data.decode("utf-8", errors="replace").splitlines():
        try:
            row = loads_json(raw)
        except ValueError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("custom_id"), str):
            continue
        resp: dict[str, Any] = row["response"] if isinstance(row.get("response"), dict) else {}
        status = resp.get("status_code") if isinstance(resp.get("status_code"), int) else None
        body = resp.get("body") if isinstance(resp.get("body"), dict) else None
        error = _error_text(row.get("error")) or (_error_text(body.get("error")) if body and status != 200 else None)
        yield LineResult(row["custom_id"], status, body, error)


def line_failure(line: LineResult) -> tuple[str, str]:
    """``(error_kind, error)`` of a line the provider did not answer with a completion."""
    kind = status_kind(line.status_code) if line.status_code is not None else "server_error"
    if line.status_code == 200:
        kind = "server_error"  # a 200 without a completion in it: unreadable
    status = f" ({line.status_code})" if line.status_code is not None else ""
    return kind, f"batch line failed{status}: {line.error or 'no completion in the reply'}"


def _error_text(error: Any) -> str | None:
    if isinstance(error, dict):
        parts = [str(error.get(k)) for k in ("code", "message") if error.get(k)]
        return ": ".join(parts)[:500] or None
    return str(error)[:500] if error else None


class BatchAPI:
    """One judge's view of its provider's files and batches API (through litellm)."""

    def __init__(self, judge: LLMJudge) -> None:
        self.judge = judge

    def _kw(self) -> dict[str, Any]:
        return {"custom_llm_provider": self.judge.config.provider, **self.judge.connection()}

    async def upload(self, data: bytes, name: str) -> str:
        """Upload a batch input file (purpose ``batch``); its file id."""
        f = await self._call("uploading the batch file", lambda: litellm.acreate_file(
            file=(name, data, "application/jsonl"), purpose="batch", **self._kw()))
        return str(f.id)

    async def create(self, input_file_id: str, key: str) -> str:
        """Create a batch of the uploaded file, ``key`` in its metadata; its batch id."""
        b = await self._call("creating the batch", lambda: litellm.acreate_batch(
            completion_window="24h", endpoint=ENDPOINT, input_file_id=input_file_id,
            metadata={METADATA_KEY: key}, **self._kw()))
        return str(b.id)

    async def find(self, key: str, *, since: float | None = None, page: int = 100,
                   max_pages: int = 1000) -> str | None:
        """The id of the batch whose metadata carries ``key``, looked up in the provider's list (newest
        first, page by page, down to batches created before ``since``, Unix seconds: the intent's time less
        a margin for clocks), or None when the provider has none."""
        after: str | None = None
        for _ in range(max_pages):
            listed = await self._call("listing batches", lambda a=after: litellm.alist_batches(  # type: ignore[misc]
                after=a, limit=page, **self._kw()))
            data = list(getattr(listed, "data", None) or [])
            for b in data:
                meta = getattr(b, "metadata", None) or {}
                if isinstance(meta, dict) and meta.get(METADATA_KEY) == key:
                    return str(b.id)
            oldest = getattr(data[-1], "created_at", None) if data else None
            if not data or not getattr(listed, "has_more", False) or (
                    since is not None and isinstance(oldest, (int, float)) and oldest < since):
                return None
            after = str(data[-1].id)
        return None

    async def retrieve(self, batch_id: str) -> BatchStatus:
        b = await self._call("retrieving the batch", lambda: litellm.aretrieve_batch(
            batch_id=batch_id, **self._kw()))
        errors = getattr(b, "errors", None)
        data = getattr(errors, "data", None) if errors is not None else None
        text = "; ".join(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}" for e in data) if data else None
        return BatchStatus(batch_id, str(b.status), getattr(b, "output_file_id", None),
                           getattr(b, "error_file_id", None), self.judge.scrub(text) if text else None)

    async def content(self, file_id: str) -> bytes:
        """The bytes of an output or error file."""
        r = await self._call("downloading batch results", lambda: litellm.afile_content(
            file_id=file_id, **self._kw()))
        return bytes(r.content)

    async def cancel(self, batch_id: str) -> None:
        await self._call("cancelling the batch", lambda: litellm.acancel_batch(batch_id=batch_id, **self._kw()))

    async def _call(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        """``fn()`` under the judge's retry policy (:meth:`LLMJudge.with_retries`)."""
        return await self.judge.with_retries(what, fn)
