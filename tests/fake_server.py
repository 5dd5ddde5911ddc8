"""A local OpenAI-compatible chat-completions server for benchmarks and fault-tolerance tests.

It answers ``POST <any prefix>/chat/completions`` on 127.0.0.1 in the shapes instructor expects
(tool calls, JSON content or a fenced json block: :func:`tests.fakellm.chat_response`) with valid,
varied judgments, and can be slow, rate-limited and faulty on purpose.

Determinism. The judgment in a reply is a function of the seed, the model and the request's
*base* messages (every message up to the first user message: the rubric and the case), never of
arrival order; so a re-ask after a malformed reply, a retry after a 503 and a rerun after a crash
all get the same judgment. A run index is not visible at the HTTP layer (the runs of a case send
identical requests), unless the request carries one (``seed``, ``user`` or ``metadata.run``
in the body, or an ``X-Run`` header), which then enters the hash. The fault decision for a request
is a function of the seed, the full request body and how many times the server has seen that exact
body (the attempt number), so the faults of a run are reproducible too, and from attempt
``fault_free_after`` on a request always succeeds.

Judges disagree realistically: each (case, dimension) has a hidden number of defects; each model
finds it give or take noise, shifted by the model's bias (``bias``: more deductions = stricter; by
default a bias in [-1, 1] derived from the model name; a model whose name contains ``strict`` or
``lenient`` gets +1.5 or -1.5).

Prompt-sensitive judges (test devices, never shipped as judges): a model listed in ``misses``
leaves the deduction types listed for it out of every reply unless the prompt names the type beyond the
rubric's own listing (a criteria line, a few-shot example: :func:`named_types`); a model listed in
``length_bias`` deducts less the longer the record (:func:`length_shift`). With ``defects_from="conversation"``
a record's hidden defects follow its conversation, not its case id, so a copy of a record edited without
changing its meaning (an invariance probe's variant) has the same defects as the record.

A whole-case request (``call: per_case``: its schema is ``CaseJudgment``) is answered with one part per
dimension, each the dimension's scripted or generated reply (keyed by the dimension too).

Bounded: it serves at most ``max_requests`` requests and lives at most ``max_lifetime_s`` seconds,
then stops by itself (a hang lasts at most ``hang_s``). Every request is logged (arrival and end
time, body hash, judgment key, model, case, dimension, attempt, status, fault, tokens): in memory
(``server.log``), at ``GET /_log`` and, when ``log_file`` is set, as JSON lines (flushed per line).

Prompt cache (``prompt_cache=True``): replies report cached prompt tokens as the providers do (:class:`PromptCache`: the
longest prefix of the request this model served before, in DeepSeek's blocks of 64 tokens or
OpenAI's of 128 from 1,024; DeepSeek's ``prompt_cache_hit_tokens`` for a ``deepseek`` model, OpenAI's
``prompt_tokens_details.cached_tokens`` for any other).

Use in tests (a thread with its own event loop)::

    with FakeServer(FakeConfig(seed=1, latency_ms=50, p_503=0.1)) as srv:
        api_base = srv.url + "/v1"   # judges: model openai/<name>, api_base=api_base
        ...
        srv.log                       # list of dicts

As a separate process (benchmarks)::

    python -m tests.fake_server --port 0 --latency-ms 500 --rate-limit 200 --seed 1
    # prints "READY http://127.0.0.1:PORT" on stdout once it listens

or :func:`spawn` which does that and returns ``(process, url)``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import hashlib
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TextIO

from aiohttp import web

from tests.fakellm import (
    DIMENSIONS,
    INVENTED_MARK,
    case_of,
    case_texts,
    chat_response,
    dimension_of,
    kinds_dimension,
    kinds_reply,
    make_reply,
    quote,
    record_texts,
)

FAULTS = ("p_429", "p_500", "p_503", "p_timeout", "p_drop", "p_malformed", "p_invalid")


@dataclass
class FakeConfig:
    """How the fake server behaves. Rates are probabilities per request (attempt)."""

    seed: int = 0
    #: fixed latency, or the median of the lognormal distribution (``latency_dist="lognormal"``)
    latency_ms: float = 0.0
    latency_dist: str = "fixed"  # fixed | lognormal
    latency_sigma: float = 0.5  # lognormal shape (sigma of the underlying normal)
    latency_max_ms: float = 30_000.0
    #: requests per second per model (sliding 1 s window); over it: 429 with Retry-After
    rate_limit: float | None = None
    #: a limit the client is not told (per model): at most hidden_rpm x hidden_window_s / 60 requests
    #: accepted in any sliding window of hidden_window_s s; over it: 429 at once (Retry-After: when the
    #: window frees, only if hidden_retry_after)
    hidden_rpm: float | None = None
    hidden_window_s: float = 60.0
    hidden_retry_after: int = 1
    #: a hidden limit on requests in flight (per model); over it: 429 at once, no Retry-After
    hidden_concurrency: int | None = None
    #: Retry-After of an *injected* 429 (a rate-limited 429 says when the window frees)
    retry_after_s: float = 0.05
    p_429: float = 0.0
    p_500: float = 0.0
    p_503: float = 0.0
    p_timeout: float = 0.0  # hang for ``hang_s`` (the client's timeout should cut it)
    p_drop: float = 0.0  # close the connection without a reply
    p_malformed: float = 0.0  # 200 with truncated JSON
    p_invalid: float = 0.0  # 200 with a deduction type the rubric does not have
    hang_s: float = 10.0
    #: fraction of valid replies whose claimed score and stars match the rubric's derivation
    honest_rate: float = 0.9
    #: fraction of deductions whose evidence is invented (a statement the case does not make; its
    #: reason ends with `` [invented quote]``); the others quote the case (tests.fakellm.quote)
    p_invented_quote: float = 0.2
    #: from this attempt (per identical request body) on, no fault; None: faults at every attempt
    fault_free_after: int | None = 4
    #: prompts longer than this many characters get 400 context_length_exceeded
    context_limit_chars: int | None = None
    #: per-model bias (extra deductions on average); models not listed get one from their name
    bias: dict[str, float] = field(default_factory=dict)
    max_requests: int = 200_000
    max_lifetime_s: float = 600.0
    log_file: str | None = None
    #: keep the request log in memory (the ``/_log`` endpoint and ``server.log``)
    keep_log: bool = True
    #: a provider's prompt cache: each reply reports as cached the longest prefix of its request this
    #: model has served before (see :class:`PromptCache`); off by default, since what is cached depends
    #: on the order requests arrive in (a resumed run is not served what an uninterrupted one is)
    prompt_cache: bool = False
    #: scripted replies: ``"model|case id"`` -> dimension -> the reply (a judgment dict), used instead of a
    #: generated one (the calibration tests' oracle, random and lying judges)
    replies: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: prompt-sensitive judges (test devices, never shipped): per model, the deduction types it leaves out of
    #: every reply (scripted or generated) unless the prompt names the type beyond the rubric's own listing or
    #: shows an example of it (:func:`named_types`)
    misses: dict[str, list[str]] = field(default_factory=dict)
    #: per model, a bias towards longer records: this many fewer deductions (a likert rating this many levels
    #: higher) per doubling of the record's length over ``length_ref_chars`` (:func:`length_shift`)
    length_bias: dict[str, float] = field(default_factory=dict)
    length_ref_chars: int = 400
    #: what a (case, dimension)'s hidden defects are drawn from: ``case`` (its id) or ``conversation`` (its
    #: text: a record edited without changing its meaning, under another id, keeps its defects)
    defects_from: str = "case"
    #: batch API (``/v1/files``, ``/v1/batches``; :class:`FakeBatches`): a batch completes this many
    #: seconds after it was created (looked at when it is retrieved or listed); None: only on demand
    #: (``POST /_batches/complete``)
    batch_delay_s: float | None = 0.0
    #: the first N batches created expire instead of completing, answering only the first half of their lines
    batch_expire: int = 0
    #: the first N batches created (after the expiring ones) fail validation: status ``failed``, no line answered
    batch_fail: int = 0
    #: per batch line, the chance that it goes to the error file (a 500 for that request) instead of an answer
    batch_p_line_error: float = 0.0
    #: per batch line, the chance that its answer is a reply the rubric refuses (a made-up deduction type)
    batch_p_invalid: float = 0.0
    #: lines of a batch answered at once when it completes (each with the chat endpoint's latency)
    batch_parallel: int = 256


class PromptCache:
    """A provider's prompt cache, as DeepSeek and OpenAI describe theirs.

    A request's prefix is cached in whole blocks of tokens (here a token is two characters, as the
    server counts ``prompt_tokens``): DeepSeek in blocks of 64 tokens from the first, OpenAI in blocks
    of 128 once the prefix reaches 1,024 tokens (a model whose name contains ``deepseek`` is served
    as DeepSeek, any other as OpenAI). The prefix is the request's schema (``tools`` and
    ``response_format``: a request with another schema shares nothing) then its messages in order.
    A block is cached once a reply to a request containing it has gone out (requests in flight at the
    same time do not serve each other), per model. Each block is kept as the hash of everything up to
    its end (as vLLM's prefix caching does), so a look-up costs one pass over the request.
    """

    #: (block tokens, minimum cached tokens) by provider
    STYLES: ClassVar[dict[str, tuple[int, int]]] = {"deepseek": (64, 0), "openai": (128, 1024)}

    def __init__(self) -> None:
        self._seen: dict[str, set[bytes]] = collections.defaultdict(set)

    @staticmethod
    def style(model: str) -> str:
        return "deepseek" if "deepseek" in model else "openai"

    def blocks(self, model: str, body: dict[str, Any]) -> list[bytes]:
        """The hashes of the request's prefixes that end on a block boundary, shortest first."""
        block_chars = 2 * self.STYLES[self.style(model)][0]
        h = hashlib.blake2b(json.dumps([body.get("tools"), body.get("response_format")], sort_keys=True,
                                       ensure_ascii=False).encode(), digest_size=16).digest()
        text = "".join(f"\x1d{m.get('role')}\x1d{_text(m)}" for m in body.get("messages", []))
        out = []
        for start in range(0, len(text) - block_chars + 1, block_chars):
            h = hashlib.blake2b(h + text[start:start + block_chars].encode(), digest_size=16).digest()
            out.append(h)
        return out

    def cached_tokens(self, model: str, blocks: list[bytes], prompt_tokens: int) -> int:
        """Tokens of the longest prefix of ``blocks`` served before, as the provider reports them."""
        block_tokens, minimum = self.STYLES[self.style(model)]
        seen = self._seen[model]
        n = 0
        while n < len(blocks) and blocks[n] in seen:
            n += 1
        cached = min(n * block_tokens, prompt_tokens)
        return cached if cached >= max(minimum, 1) else 0

    def add(self, model: str, blocks: list[bytes]) -> None:
        self._seen[model].update(blocks)


def _h(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


def _uniform(*parts: object) -> float:
    """A deterministic uniform [0, 1) draw from the hash of ``parts``."""
    return int(_h(*parts)[:13], 16) / 16**13


def _per_model(table: dict[str, Any], model: str) -> Any:
    """``table``'s entry for ``model``, given by its full name (``openai/x``) or its short one (``x``); None."""
    if model in table:
        return table[model]
    return table.get(model.split("/", 1)[-1])


def model_bias(cfg: FakeConfig, model: str) -> float:
    found = _per_model(cfg.bias, model)
    if found is not None:
        return float(found)
    if "strict" in model:
        return 1.5
    if "lenient" in model:
        return -1.5
    return round(_uniform("bias", model) * 2 - 1, 2)


def length_shift(cfg: FakeConfig, model: str, record: str) -> float:
    """How many fewer deductions a length-biased ``model`` gives ``record``: its ``length_bias`` times the
    number of doublings of the record's length over ``length_ref_chars`` (negative for a shorter record)."""
    per_doubling = _per_model(cfg.length_bias, model)
    if not per_doubling or not record:
        return 0.0
    return float(per_doubling) * math.log2(len(record) / cfg.length_ref_chars)


_FENCED_DATA = re.compile(r"<<<BEGIN [^>]*>>>.*?<<<END [^>]*>>>", re.S)
#: where instructor's own text starts in a system message (the JSON modes write the schema there)
_INSTRUCTOR = "As a genius expert, your task"


def named_types(body: dict[str, Any], types: list[str]) -> set[str]:
    """The deduction types of ``types`` that the request names beyond the rubric's own listing: the type id
    written anywhere in the messages outside the fenced case data and instructor's schema, other than as
    the listing writes it (``type: <id>``): a criteria line naming it, or a few-shot example of it."""
    text = "\n".join(_FENCED_DATA.sub("", _text(m)).split(_INSTRUCTOR, 1)[0] for m in body.get("messages", []))
    return {t for t in types if re.search(rf"(?<!type: )(?<![A-Za-z0-9_]){re.escape(t)}(?![A-Za-z0-9_])", text)}


def miss(cfg: FakeConfig, model: str, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """``reply`` without the deductions of the types ``model`` misses (``cfg.misses``) that the request does not
    name (:func:`named_types`); the claimed score gains back their points (up to the reply's own maximum)."""
    missed = _per_model(cfg.misses, model)
    deductions = reply.get("deductions")
    if not missed or not isinstance(deductions, list):
        return reply
    blind = set(missed) - named_types(body, list(missed))
    kept = [d for d in deductions if d.get("type") not in blind]
    if len(kept) == len(deductions):
        return reply
    back = sum(float(d.get("points", 0)) for d in deductions if d.get("type") in blind)
    return {**reply, "deductions": kept, "score": reply.get("score", 0) + back}


def base_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages up to and including the first user message (a re-ask appends after them)."""
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            return messages[: i + 1]
    return messages


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return ""


def run_marker(body: dict[str, Any], headers: Any) -> str:
    metadata = body.get("metadata")
    meta: dict[str, Any] = metadata if isinstance(metadata, dict) else {}
    for v in (body.get("seed"), body.get("user"), meta.get("run"), headers.get("X-Run")):
        if v is not None:
            return str(v)
    return ""


@functools.cache
def _rubric() -> Any:
    from consensus_eval.domain.rubric import load_rubric

    return load_rubric("medical_record")


def judgment_reply(cfg: FakeConfig, model: str, case: str, dim: str, key: str,
                   texts: tuple[str, str] = ("", "")) -> dict[str, Any]:
    """A valid reply: the (case, dimension)'s hidden defects found by ``model``, give or take.

    The claimed score and stars are the rubric's derivation of the deductions, except for a
    fraction ``1 - honest_rate`` of replies, which claim the maximum (an arithmetic slip). Evidence
    quotes ``texts`` (record, conversation) or is invented (``p_invented_quote``; :func:`tests.fakellm.quote`),
    drawn from a generator of its own so the rest of the reply does not depend on it.
    """
    hidden = _uniform(cfg.seed, "defects", texts[1] if cfg.defects_from == "conversation" else case, dim) * 3.5
    rng = random.Random(f"{cfg.seed}|{key}")
    n = round(hidden + model_bias(cfg, model) - length_shift(cfg, model, texts[0]) + rng.gauss(0, 0.6))
    reply = make_reply(dim, rng, n=max(0, min(6, n)))
    if rng.random() < cfg.honest_rate:
        from consensus_eval.domain.judgment import Deduction, Judgment
        from consensus_eval.domain.scoring import derive

        d = _rubric().dimension(dim)
        deductions = []
        for x in reply["deductions"]:
            _, typ = d.find_type(x["type"])
            deductions.append(Deduction(category=x["category"], type=x["type"],
                                        points=x["points"] if typ.is_range and typ.accepts(x["points"]) else typ.low))
        derived = derive(d, Judgment(dimension=dim, deductions=deductions))
        reply["score"], reply["stars"] = derived.score, derived.stars
    qrng = random.Random(f"{cfg.seed}|{key}|evidence")
    for x in reply["deductions"]:
        x["evidence"], invented = quote(qrng, texts[0], texts[1], cfg.p_invented_quote)
        if invented:
            x["reason"] += INVENTED_MARK
    return reply


def invalid_reply(dim: str, rng: random.Random) -> dict[str, Any]:
    reply = make_reply(dim, rng, n=1)
    reply["deductions"][0]["type"] = "made_up_type"
    return reply


class _Dropped(Exception):
    pass


class FakeServer:
    """The server; run it in a thread (``start_thread``/``with``) or in an event loop (``serve``)."""

    def __init__(self, cfg: FakeConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cfg = cfg or FakeConfig()
        self.host, self.port = host, port
        self.log: list[dict[str, Any]] = []
        self.n_requests = 0
        self.started = 0.0
        self._attempts: collections.Counter[str] = collections.Counter()
        self._windows: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._hidden: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._in_flight: collections.Counter[str] = collections.Counter()
        self.cache = PromptCache()
        self.batches = FakeBatches(self)
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._log_fh: TextIO | None = None
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        if not request.path.endswith("/chat/completions"):
            return web.json_response({"error": {"message": f"no route {request.path}"}}, status=404)
        self.n_requests += 1
        if self.n_requests >= self.cfg.max_requests:
            # stop once this last reply has gone out (stopping now would cut it off)
            asyncio.get_running_loop().call_later(0.2, self._request_stop)
            if self.n_requests > self.cfg.max_requests:
                return web.json_response({"error": {"message": "fake server: max_requests reached"}}, status=503)
        raw = await request.read()
        try:
            body = json.loads(raw)
            messages = body["messages"]
            model = str(body.get("model", ""))
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": {"message": "request body is not a chat request"}}, status=400)
        cfg = self.cfg
        body_hash = hashlib.sha256(raw).hexdigest()[:20]
        self._attempts[body_hash] += 1
        attempt = self._attempts[body_hash]
        base = base_messages(messages)
        marker = run_marker(body, request.headers)
        key = _h(cfg.seed, model, marker, *(_text(m) for m in base))[:20]
        try:
            dim = dimension_of(body)
        except ValueError:
            dim = kinds_dimension(body)
        case = case_of(body)
        entry: dict[str, Any] = {"t": arrived, "hash": body_hash, "key": key, "model": model, "case": case,
                                 "dim": dim, "attempt": attempt, "status": 0, "fault": "",
                                 "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "t_end": None}
        if cfg.keep_log:
            self.log.append(entry)  # now, so a hanging request is visible while it hangs
        try:
            return await self._answer(request, body, body_hash, attempt, key, model, case, dim, entry)
        except _Dropped:
            if not entry["status"]:
                entry["status"] = "drop"
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError from None  # aiohttp drops the connection, writes nothing
        finally:
            entry["t_end"] = time.time()
            self._record(entry)

    async def _answer(self, request: web.Request, body: dict[str, Any], body_hash: str, attempt: int,
                      key: str, model: str, case: str, dim: str, entry: dict[str, Any]) -> web.StreamResponse:
        cfg = self.cfg
        # rate limit (not a random fault: depends on timing)
        if cfg.rate_limit:
            now = time.monotonic()
            win = self._windows[model]
            while win and now - win[0] >= 1.0:
                win.popleft()
            if len(win) >= cfg.rate_limit:
                wait = max(0.001, 1.0 - (now - win[0]))
                entry.update(status=429, fault="rate_limit")
                return web.json_response(
                    {"error": {"message": "Rate limit reached for requests", "type": "requests",
                               "code": "rate_limit_exceeded"}},
                    status=429, headers={"Retry-After": f"{wait:.3f}", "retry-after-ms": str(round(wait * 1000))})
            win.append(now)
        hidden = self._hidden_limit(model, entry)
        if hidden is not None:
            return hidden
        self._in_flight[model] += 1
        try:
            return await self._reply(body, body_hash, attempt, key, model, case, dim, entry)
        finally:
            self._in_flight[model] -= 1

    def _hidden_limit(self, model: str, entry: dict[str, Any]) -> web.Response | None:
        """A 429 when the request is over a hidden limit (``hidden_rpm``, ``hidden_concurrency``), else None."""
        cfg = self.cfg
        error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
        if cfg.hidden_concurrency is not None and self._in_flight[model] >= cfg.hidden_concurrency:
            entry.update(status=429, fault="hidden_concurrency")
            return web.json_response(error, status=429)
        if cfg.hidden_rpm:
            now = time.monotonic()
            win = self._hidden[model]
            while win and now - win[0] >= cfg.hidden_window_s:
                win.popleft()
            if len(win) >= cfg.hidden_rpm * cfg.hidden_window_s / 60:
                entry.update(status=429, fault="hidden_rpm")
                wait = max(0.001, cfg.hidden_window_s - (now - win[0]))
                headers = {"Retry-After": f"{wait:.3f}"} if cfg.hidden_retry_after else None
                return web.json_response(error, status=429, headers=headers)
            win.append(now)
        return None

    async def _reply(self, body: dict[str, Any], body_hash: str, attempt: int, key: str, model: str, case: str,
                     dim: str, entry: dict[str, Any]) -> web.StreamResponse:
        cfg = self.cfg
        prompt_chars = sum(len(_text(m)) for m in body["messages"])
        if cfg.context_limit_chars is not None and prompt_chars > cfg.context_limit_chars:
            entry.update(status=400, fault="context")
            limit_tokens = cfg.context_limit_chars // 2
            return web.json_response(
                {"error": {"message": f"This model's maximum context length is {limit_tokens} tokens. However, "
                                      f"your messages resulted in {prompt_chars // 2} tokens. Please reduce the "
                                      "length of the messages.",
                           "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
                status=400)
        fault = self._fault(body_hash, attempt)
        entry["fault"] = fault
        # the cache is looked up when the request arrives, filled when its reply goes out
        blocks = self.cache.blocks(model, body) if cfg.prompt_cache else []
        hit_blocks = self.cache.cached_tokens(model, blocks, 1 << 62) if cfg.prompt_cache else 0
        await asyncio.sleep(self._latency(body_hash, attempt))
        if fault == "p_timeout":
            entry["status"] = "hang"
            await self._sleep_bounded(cfg.hang_s)
            raise _Dropped
        if fault == "p_drop":
            raise _Dropped
        if fault in ("p_429", "p_500", "p_503"):
            status = int(fault[2:])
            entry["status"] = status
            headers = {"Retry-After": f"{cfg.retry_after_s:g}"} if status == 429 else None
            return web.json_response({"error": {"message": f"fake server: injected {status}"}},
                                     status=status, headers=headers)
        if not dim:  # not a judge request (e.g. `judges check`): a short plain reply
            reply: dict[str, Any] | str = "OK"
            data = chat_response({k: v for k, v in body.items() if k not in ("tools", "response_format")}, "")
            data["choices"][0]["message"]["content"] = "OK"
        else:
            rng = random.Random(f"{cfg.seed}|{body_hash}|{attempt}")
            if fault == "p_malformed":
                good = json.dumps(kinds_reply(body, rng, 0.5, 0.0) if dim.startswith("kind:") else
                                  judgment_reply(cfg, model, case, dim, key, case_texts(body)), ensure_ascii=False)
                reply = good[: max(1, int(len(good) * rng.uniform(0.2, 0.8)))]
            elif fault == "p_invalid" and not dim.startswith("kind:"):
                reply = invalid_reply(dim, rng)
            elif dim.startswith("kind:"):  # a likert or criteria rubric (tests.fakellm.kinds_reply)
                record, conversation = record_texts(body)
                reply = kinds_reply(body, random.Random(f"{cfg.seed}|{key}"),
                                    _uniform(cfg.seed, "quality", conversation if cfg.defects_from == "conversation"
                                             else case, dim),
                                    model_bias(cfg, model) - length_shift(cfg, model, record))
                reply = miss(cfg, model, body, reply) if "deductions" in reply else {
                    k: miss(cfg, model, body, v) if isinstance(v, dict) else v for k, v in reply.items()}
            elif "CaseJudgment" in json.dumps(body, ensure_ascii=False):  # call: per_case, every dimension at once
                reply = {d: miss(cfg, model, body, cfg.replies.get(f"{model}|{case}", {}).get(d)
                                 or judgment_reply(cfg, model, case, d, f"{key}|{d}", case_texts(body)))
                         for d in DIMENSIONS}
            else:
                reply = miss(cfg, model, body, cfg.replies.get(f"{model}|{case}", {}).get(dim)
                             or judgment_reply(cfg, model, case, dim, key, case_texts(body)))
            text = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
            prompt_chars = sum(len(_text(m)) for m in body["messages"])
            prompt_tokens = max(1, prompt_chars // 2)
            cached = min(hit_blocks, prompt_tokens)
            data = chat_response(body, reply, prompt_tokens=prompt_tokens, completion_tokens=max(1, len(text) // 2),
                                 cached_tokens=cached, cache_style=self.cache.style(model))
            if cfg.prompt_cache:
                self.cache.add(model, blocks)
            entry["cached_tokens"] = cached
        data["id"] = f"chatcmpl-{body_hash}-{attempt}"
        entry.update(status=200, prompt_tokens=data["usage"]["prompt_tokens"],
                     completion_tokens=data["usage"]["completion_tokens"])
        return web.Response(body=json.dumps(data, ensure_ascii=False).encode(), content_type="application/json")

    def _fault(self, body_hash: str, attempt: int) -> str:
        cfg = self.cfg
        if cfg.fault_free_after is not None and attempt >= cfg.fault_free_after:
            return ""
        u = _uniform(cfg.seed, "fault", body_hash, attempt)
        acc = 0.0
        for name in FAULTS:
            acc += getattr(cfg, name)
            if u < acc:
                return name
        return ""

    def _latency(self, body_hash: str, attempt: int) -> float:
        cfg = self.cfg
        if cfg.latency_ms <= 0:
            return 0.0
        if cfg.latency_dist == "fixed":
            ms = cfg.latency_ms
        else:  # lognormal with the given median
            u = min(max(_uniform(cfg.seed, "latency", body_hash, attempt), 1e-12), 1 - 1e-12)
            z = _norm_ppf(u)
            ms = cfg.latency_ms * math.exp(cfg.latency_sigma * z)
        return min(ms, cfg.latency_max_ms) / 1000

    async def _sleep_bounded(self, seconds: float) -> None:
        assert self._stop is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)

    def _record(self, entry: dict[str, Any]) -> None:
        if self._log_fh is not None:
            self._log_fh.write(json.dumps(entry) + "\n")
            self._log_fh.flush()

    async def _get_log(self, request: web.Request) -> web.Response:
        return web.json_response(self.log)

    async def _get_stats(self, request: web.Request) -> web.Response:
        statuses = collections.Counter(str(e["status"]) for e in self.log)
        cpu = os.times()
        return web.json_response({"requests": self.n_requests, "statuses": statuses,
                                  "uptime_s": time.monotonic() - self.started,
                                  "cpu_s": cpu.user + cpu.system,
                                  "first_t": self.log[0]["t"] if self.log else None,
                                  "last_t_end": max((e["t_end"] for e in self.log if e["t_end"]), default=None)})

    async def _post_stop(self, request: web.Request) -> web.Response:
        self._request_stop()
        return web.json_response({"stopping": True})

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    # ------------------------------------------------------------------ lifecycle

    async def serve(self, on_ready: Any = None) -> None:
        """Serve until stopped, ``max_requests`` reached or ``max_lifetime_s`` elapsed."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self.cfg.log_file:
            self._log_fh = open(self.cfg.log_file, "a", encoding="utf-8")  # noqa: SIM115
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_get("/_log", self._get_log)
        app.router.add_get("/_stats", self._get_stats)
        app.router.add_post("/_stop", self._post_stop)
        self.batches.routes(app)
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=75,
                               shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=2048)
        await site.start()
        assert isinstance(site._server, asyncio.Server)  # started: it listens
        sockets = site._server.sockets
        self.port = sockets[0].getsockname()[1]
        self.started = time.monotonic()
        if on_ready:
            on_ready(self)
        self._ready.set()
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=self.cfg.max_lifetime_s)
        except TimeoutError:
            pass
        finally:
            self._stop.set()
            await runner.cleanup()
            if self._log_fh is not None:
                self._log_fh.close()
                self._log_fh = None

    def start_thread(self) -> str:
        """Start serving in a daemon thread; returns the base URL once it listens."""

        def main() -> None:
            try:
                asyncio.run(self.serve())
            except BaseException as e:  # noqa: BLE001 - reported by stop() / the waiter
                self.error = e
                self._ready.set()

        self._thread = threading.Thread(target=main, name="fake-llm-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start within 10 s")
        if self.error:
            raise RuntimeError(f"fake server failed to start: {self.error!r}")
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # loop already closed
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> FakeServer:
        self.start_thread()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ helpers for tests

    def requests_for(self, *, model: str | None = None, case: str | None = None,
                     dim: str | None = None) -> list[dict[str, Any]]:
        return [e for e in list(self.log) if (model is None or e["model"] == model)
                and (case is None or e["case"] == case) and (dim is None or e["dim"] == dim)]


class FakeBatches:
    """OpenAI's files and batches endpoints, answering each line as the chat endpoint would.

    ``POST /v1/files`` (multipart: ``purpose``, ``file``), ``GET /v1/files/{id}`` and
    ``GET /v1/files/{id}/content``; ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches``
    (newest first, ``limit`` and ``after``, each batch with its ``metadata``) and
    ``POST /v1/batches/{id}/cancel``. A batch moves from ``in_progress`` to ``completed`` once
    ``batch_delay_s`` has passed when it is next retrieved or listed, or when ``POST /_batches/complete``
    is called. Each line is answered by the chat endpoint's own reply code (:meth:`FakeServer._reply`,
    with the same judgment key, faults and prompt cache: cached tokens are reported as in a live
    reply); replies that are not 200 go to the error file. ``batch_expire``, ``batch_p_line_error``
    and ``batch_p_invalid`` inject expired batches, error lines and replies the rubric refuses.
    Every HTTP request to these endpoints is counted in ``http_requests``; each answered line is
    logged like a chat request, with ``batch`` set to the batch id.
    """

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.files: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.http_requests = 0
        self._locks: dict[str, asyncio.Lock] = {}
        self._created = 0

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/v1/files", self._post_file)
        r.add_get("/v1/files/{id}", self._get_file)
        r.add_get("/v1/files/{id}/content", self._get_content)
        r.add_post("/v1/batches", self._post_batch)
        r.add_get("/v1/batches", self._list)
        r.add_get("/v1/batches/{id}", self._get_batch)
        r.add_post("/v1/batches/{id}/cancel", self._cancel)
        r.add_post("/_batches/complete", self._complete_all)
        r.add_get("/_batches/stats", self._stats)

    def _file(self, name: str, purpose: str, data: bytes) -> dict[str, Any]:
        fid = f"file-{len(self.files) + 1:04d}{_h(name, len(data), len(self.files))[:8]}"
        obj = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": name, "purpose": purpose, "status": "processed"}
        self.files[fid] = (obj, data)
        return obj

    async def _post_file(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        form = await request.post()
        upload, purpose = form.get("file"), str(form.get("purpose", ""))
        if not isinstance(upload, web.FileField) or purpose != "batch":
            return web.json_response({"error": {"message": "want multipart file= and purpose=batch"}}, status=400)
        return web.json_response(self._file(upload.filename or "upload.jsonl", purpose, upload.file.read()))

    async def _get_file(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        found = self.files.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.json_response(found[0])

    async def _get_content(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        found = self.files.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=found[1], content_type="application/octet-stream")

    async def _post_batch(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        body = await request.json()
        if body.get("input_file_id") not in self.files:
            return web.json_response({"error": {"message": "input_file_id not found"}}, status=400)
        self._created += 1
        lines = self.files[body["input_file_id"]][1].decode().splitlines()
        bid = f"batch_{self._created:04d}{_h(body['input_file_id'])[:8]}"
        now = int(time.time())
        self.batches[bid] = {
            "id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress", "output_file_id": None, "error_file_id": None, "created_at": now,
            "in_progress_at": now, "expires_at": now + 86400, "finalizing_at": None, "completed_at": None,
            "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": len([x for x in lines if x.strip()]), "completed": 0, "failed": 0},
            "metadata": body.get("metadata") or {}, "_expire": self._created <= self.server.cfg.batch_expire,
            "_fail": 0 < self._created - self.server.cfg.batch_expire <= self.server.cfg.batch_fail,
            "_t": time.monotonic()}
        self._locks[bid] = asyncio.Lock()
        return web.json_response(self._public(self.batches[bid]))

    async def _get_batch(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        bid = request.match_info["id"]
        if bid not in self.batches:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        await self._maybe_finish(bid)
        return web.json_response(self._public(self.batches[bid]))

    async def _list(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        limit = int(request.query.get("limit", "20"))
        ids = sorted(self.batches, key=lambda b: self.batches[b]["_t"], reverse=True)
        after = request.query.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = ids[:limit]
        for bid in page:
            await self._maybe_finish(bid)
        data = [self._public(self.batches[b]) for b in page]
        return web.json_response({"object": "list", "data": data, "first_id": page[0] if page else None,
                                  "last_id": page[-1] if page else None, "has_more": len(ids) > limit})

    async def _cancel(self, request: web.Request) -> web.Response:
        self.http_requests += 1
        bid = request.match_info["id"]
        if bid not in self.batches:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        b = self.batches[bid]
        if b["status"] in ("validating", "in_progress"):
            b.update(status="cancelled", cancelled_at=int(time.time()))
        return web.json_response(self._public(b))

    async def _complete_all(self, request: web.Request) -> web.Response:
        for bid in list(self.batches):
            await self._maybe_finish(bid, now=True)
        return web.json_response({"completed": len(self.batches)})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    def stats(self) -> dict[str, Any]:
        """For tests and benchmarks: HTTP requests to the batch endpoints, and each batch (oldest first) with
        its status, metadata and the ``custom_id`` of every line of its input file."""
        out = []
        for b in sorted(self.batches.values(), key=lambda x: x["_t"]):
            lines = self.files[b["input_file_id"]][1].decode().splitlines()
            out.append({"id": b["id"], "status": b["status"], "metadata": b["metadata"],
                        "custom_ids": [json.loads(x)["custom_id"] for x in lines if x.strip()]})
        return {"http_requests": self.http_requests, "files": len(self.files), "batches": out}

    @staticmethod
    def _public(b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in b.items() if not k.startswith("_")}

    async def _maybe_finish(self, bid: str, *, now: bool = False) -> None:
        b = self.batches[bid]
        delay = self.server.cfg.batch_delay_s
        due = now or (delay is not None and time.monotonic() - b["_t"] >= delay)
        if b["status"] != "in_progress" or not due:
            return
        async with self._locks[bid]:
            if b["status"] == "in_progress":
                await self._finish(b)

    async def _finish(self, b: dict[str, Any]) -> None:
        cfg = self.server.cfg
        if b["_fail"]:
            b.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
                {"code": "invalid_request", "message": "fake server: the input file failed validation",
                 "param": None, "line": 1}]})
            return
        lines = [json.loads(x) for x in self.files[b["input_file_id"]][1].decode().splitlines() if x.strip()]
        answer = lines[: len(lines) // 2] if b["_expire"] else lines

        async def one(i: int, line: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
            custom_id = line.get("custom_id")
            rid = f"batch_req_{b['id']}_{i}"
            if _uniform(cfg.seed, "batch_error", b["id"], custom_id) < cfg.batch_p_line_error:
                return False, {"id": rid, "custom_id": custom_id, "response": None,
                               "error": {"code": "server_error", "message": "fake server: injected line error"}}
            status, data = await self._answer(b["id"], line["body"])
            return status == 200, {"id": rid, "custom_id": custom_id, "error": None,
                                   "response": {"status_code": status, "request_id": rid, "body": data}}

        # a provider works through a batch's lines in parallel (each line takes the chat endpoint's latency; one
        # after another, 3,858 lines at 8 s would take 8.6 hours): the first line alone (its prompt fills the
        # cache, as a provider's first requests do), then the others batch_parallel at a time; order kept
        gate = asyncio.Semaphore(max(1, cfg.batch_parallel))

        async def gated(i: int, line: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
            async with gate:
                return await one(i, line)

        answered = [await one(0, answer[0])] if answer else []
        answered += await asyncio.gather(*(gated(i, line) for i, line in enumerate(answer) if i))
        out = [row for ok, row in answered if ok]
        errors = [row for ok, row in answered if not ok]
        finished = int(time.time())
        if out:
            b["output_file_id"] = self._file(f"{b['id']}_output.jsonl", "batch_output", _jsonl(out))["id"]
        if errors:
            b["error_file_id"] = self._file(f"{b['id']}_error.jsonl", "batch_output", _jsonl(errors))["id"]
        b["request_counts"].update(completed=len(out), failed=len(errors))
        if b["_expire"]:
            b.update(status="expired", expired_at=finished)
        else:
            b.update(status="completed", finalizing_at=finished, completed_at=finished)

    async def _answer(self, batch_id: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One line answered by the chat endpoint's reply code, keyed as a chat request is."""
        srv, cfg = self.server, self.server.cfg
        model = str(body.get("model", ""))
        raw = json.dumps(body, ensure_ascii=False, sort_keys=True).encode()
        body_hash = hashlib.sha256(raw).hexdigest()[:20]
        srv._attempts[body_hash] += 1
        attempt = srv._attempts[body_hash]
        key = _h(cfg.seed, model, run_marker(body, {}), *(_text(m) for m in base_messages(body["messages"])))[:20]
        try:
            dim = dimension_of(body)
        except ValueError:
            dim = kinds_dimension(body)
        case = case_of(body)
        entry: dict[str, Any] = {"t": time.time(), "hash": body_hash, "key": key, "model": model, "case": case,
                                 "dim": dim, "attempt": attempt, "status": 0, "fault": "", "prompt_tokens": 0,
                                 "cached_tokens": 0, "completion_tokens": 0, "t_end": None, "batch": batch_id}
        if cfg.keep_log:
            srv.log.append(entry)
        if (dim and not dim.startswith("kind:")
                and _uniform(cfg.seed, "batch_invalid", batch_id, body_hash) < cfg.batch_p_invalid):
            rng = random.Random(f"{cfg.seed}|{body_hash}|invalid")
            reply = invalid_reply(dim, rng)
            data = chat_response(body, reply, prompt_tokens=max(1, sum(len(_text(m)) for m in body["messages"]) // 2))
            entry.update(status=200, fault="batch_invalid")
            status = 200
        else:
            try:
                resp = await srv._reply(body, body_hash, attempt, key, model, case, dim, entry)
            except _Dropped:  # a hang or a dropped connection of the chat endpoint: a failed line here
                entry["t_end"] = time.time()
                return 500, {"error": {"message": "fake server: request dropped", "type": "server_error"}}
            assert isinstance(resp, web.Response) and resp.body is not None
            # a json_response: its body is bytes (typed as any payload)
            data, status = json.loads(bytes(resp.body)), resp.status  # type: ignore[arg-type]
        entry["t_end"] = time.time()
        srv._record(entry)
        return status, data


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _norm_ppf(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - lo:
        return -_norm_ppf(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


# ---------------------------------------------------------------------- as a separate process


_OPTIONAL = {"rate_limit": float, "hidden_rpm": float, "hidden_concurrency": int, "context_limit_chars": int,
             "fault_free_after": int, "log_file": str, "batch_delay_s": float}


def _optional(kind: Any) -> Any:
    return lambda text: None if text.lower() == "none" else kind(text)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.fake_server", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed as READY <url>)")
    defaults = FakeConfig()
    for f in fields(FakeConfig):
        if f.name in ("bias", "keep_log", "prompt_cache"):
            continue
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            continue
        kind: Any = {int: int, float: float, dict: json.loads}.get(type(default), str)
        if f.name in _OPTIONAL:
            kind = _optional(_OPTIONAL[f.name])
        p.add_argument(flag, type=kind, default=default)
    p.add_argument("--bias", action="append", default=[], metavar="MODEL=X",
                   help="per-model bias (extra deductions on average), repeatable")
    p.add_argument("--no-keep-log", action="store_true", help="do not keep the request log in memory")
    p.add_argument("--prompt-cache", action="store_true", help="report cached prompt tokens (PromptCache)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    kw = {f.name: getattr(args, f.name) for f in fields(FakeConfig)
          if f.name not in ("bias", "keep_log", "prompt_cache")}
    kw["prompt_cache"] = args.prompt_cache
    kw["bias"] = {k: float(v) for k, v in (b.split("=", 1) for b in args.bias)}
    kw["keep_log"] = not args.no_keep_log
    server = FakeServer(FakeConfig(**kw), host=args.host, port=args.port)

    def ready(s: FakeServer) -> None:
        print(f"READY {s.url}", flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server._request_stop)
        await server.serve(on_ready=ready)

    asyncio.run(run())


def spawn(cfg: FakeConfig, *, timeout: float = 20.0,
          cwd: str | Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the server as a separate process; returns ``(process, base_url)`` once it listens."""
    args = [sys.executable, "-m", "tests.fake_server", "--port", "0"]
    for f in fields(FakeConfig):
        v = getattr(cfg, f.name)
        if f.name == "bias":
            args += [x for k, b in v.items() for x in ("--bias", f"{k}={b}")]
        elif f.name == "keep_log":
            if not v:
                args.append("--no-keep-log")
        elif f.name == "prompt_cache":
            if v:
                args.append("--prompt-cache")
        elif v is not None or f.name in _OPTIONAL:
            args += ["--" + f.name.replace("_", "-"), json.dumps(v) if isinstance(v, dict) else str(v)]
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=cwd or root, env=env)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            return proc, line.split()[1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"fake server process did not start: {line!r}")


if __name__ == "__main__":
    main()
