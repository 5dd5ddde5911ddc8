"""Failures by their real cause: every failed call says what went wrong (``error_kind`` and
a reason that starts with it in words), only what another attempt can cure is retried, and a judge
that no call can get through (dead endpoint, bad key, unknown model, a module missing here) stops
after its first such failure instead of retrying every call.

The failures are real: a closed port, a TLS handshake with a plain HTTP server, HTTP statuses from a
local aiohttp server, dropped and hanging requests from tests/fake_server.py, and an ImportError
raised inside litellm.acompletion and wrapped by litellm itself. Only DNS is simulated (getaddrinfo
answers "not known" for one host) so the test does not depend on this machine's resolver.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from consensus_eval import api as evaluate
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig
from consensus_eval.domain.judgment import CallOutcome
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.execution.store import Store, StoredCall
from consensus_eval.judges.llm import STOPS_THE_JUDGE, LLMJudge, classify
from consensus_eval.judges.retry import RETRYABLE
from tests.conftest import FAKE_KEY, write_config
from tests.fake_server import FakeConfig, FakeServer
from tests.fakellm import chat_response, make_reply
from tests.helpers import ModeServer, present, write_cases

KIND_WORDS = {"rate_limit": "rate limited", "server_error": "server error", "timeout": "timeout",
              "connection": "connection dropped", "connection_refused": "connection refused",
              "authentication": "authentication failed", "not_found": "not found", "bad_request": "bad request",
              "invalid_reply": "invalid reply", "local": "local error"}


# --------------------------------------------------------------------------- real endpoints


class StatusServer(ModeServer):
    """A local OpenAI-compatible endpoint answering ``POST /<mode>/v1/chat/completions`` with HTTP
    status ``<mode>`` (an OpenAI-style error body; 400 is a context window exceeded), ``html``
    (200 with a body that is not JSON) or ``ok`` (a valid judgment). Counts requests per mode."""

    lifetime_s = 120.0

    def __init__(self) -> None:
        super().__init__()
        self.requests: collections.Counter[str] = collections.Counter()

    async def answer(self, mode: str, body: dict[str, Any]) -> web.StreamResponse:
        self.requests[mode] += 1
        if mode == "ok":
            return web.json_response(chat_response(body, make_reply("accuracy", random.Random(1), n=1)))
        if mode == "html":
            return web.Response(text="<html>502 from a proxy, served as 200</html>", content_type="text/html")
        status = int(mode)
        message = f"fake status {status} for key {FAKE_KEY}"  # providers do echo keys: must be scrubbed
        error = {"message": message, "type": "invalid_request_error", "code": None}
        if status == 400:
            error.update(message="This model's maximum context length is 8192 tokens. However, your messages "
                                 "resulted in 9000 tokens.", code="context_length_exceeded")
        return web.json_response({"error": error}, status=status)


@pytest.fixture(scope="module")
def status_server() -> Iterator[StatusServer]:
    with StatusServer() as srv:
        yield srv


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: bound, then closed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def _judge(rubric: Rubric, api_base: str, *, model: str = "openai/fake", **kw: Any) -> LLMJudge:
    kw = {"max_retries": 2, "timeout_s": 5.0, "mode": "tools", "input_cost_per_token": 0,
          "output_cost_per_token": 0, **kw}
    return LLMJudge(LLMJudgeConfig(name="j", model=model, api_base=api_base, api_key_env="JUDGE_A_KEY", **kw), rubric)


def _call(rubric: Rubric, judge: LLMJudge, n: int = 1) -> list[CallOutcome]:
    """``n`` calls of ``judge`` (different cases), one after the other, in one event loop."""
    d = rubric.dimension("accuracy")

    async def calls() -> list[CallOutcome]:
        return [await judge.judge(case, d, render(rubric, d, case))
                for case in (Case(id=f"c{i}", conversation="医生：血糖多少？\n患者：空腹9.6。", record="主诉：多饮3年")
                             for i in range(n))]

    return asyncio.run(calls())


def _assert_failed(out: CallOutcome, kind: str, attempts: int) -> None:
    assert out.status == "failed" and out.judgment is None
    assert out.error_kind == kind, out.error
    assert out.error is not None
    prefix = "not attempted: judge stopped after " if attempts == 0 else ""
    assert out.error.startswith(prefix + KIND_WORDS[kind]), out.error
    assert "\n" not in out.error and FAKE_KEY not in out.error
    assert out.attempts == attempts, out


# --------------------------------------------------------------------------- classification, end to end


@pytest.mark.parametrize(("status", "kind"), [
    (400, "bad_request"), (401, "authentication"), (402, "authentication"), (403, "authentication"),
    (404, "not_found"), (422, "bad_request"), (429, "rate_limit"), (500, "server_error"), (502, "server_error"),
    (503, "server_error"), (504, "timeout"), ("html", "server_error"),
])
@pytest.mark.parametrize("model", ["openai/fake", "hosted_vllm/fake"])
def test_an_http_status_is_classified_by_what_the_server_sent(rubric: Rubric, api_keys: str,
                                                              status_server: StatusServer, status: int | str, kind: str,
                                                              model: str) -> None:
    # a fixed concurrency: classifying is what this tests, not the pacer (``auto`` learns a limit from the 429s and
    # waits out its window before each retry: 30 s a test)
    judge = _judge(rubric, status_server.url(status), model=model, max_retries=2, concurrency=1)
    before = status_server.requests[str(status)]
    [out] = _call(rubric, judge)
    retried = kind in RETRYABLE
    _assert_failed(out, kind, attempts=3 if retried else 1)
    assert out.error is not None
    assert status_server.requests[str(status)] - before == out.attempts  # every attempt reached the server
    assert ("gave up after 3 attempt(s)" if retried else "not retried") in out.error
    if status == 400:
        assert out.error.startswith("bad request (400, context window exceeded)")
    elif status != "html":
        assert out.error.startswith(f"{KIND_WORDS[kind]} ({status})")
    assert (judge.stopped is not None) == (kind in STOPS_THE_JUDGE)


@pytest.mark.parametrize("model", ["openai/fake", "hosted_vllm/fake"])
def test_a_closed_port_is_connection_refused_not_a_500(rubric: Rubric, api_keys: str, model: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    [out] = _call(rubric, _judge(rubric, url, model=model))
    _assert_failed(out, "connection_refused", attempts=1)
    assert out.error is not None
    assert out.error.startswith(f"connection refused, not retried: cannot reach {url} (refused: ")
    assert "ConnectionRefusedError" in out.error and "InternalServerError" not in out.error


def test_a_failed_dns_lookup_is_connection_refused(rubric: Rubric, api_keys: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp.resolver

    if aiohttp.resolver.DefaultResolver is not aiohttp.resolver.ThreadedResolver:
        pytest.skip("aiohttp resolves without getaddrinfo here (aiodns)")
    real = socket.getaddrinfo

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    [out] = _call(rubric, _judge(rubric, "http://no-such-host.invalid/v1"))
    _assert_failed(out, "connection_refused", attempts=1)
    assert out.error is not None
    assert "(DNS lookup failed: gaierror: " in out.error


def test_a_tls_handshake_with_a_plain_http_server_is_connection_refused(rubric: Rubric, api_keys: str) -> None:
    with FakeServer(FakeConfig(max_lifetime_s=600)) as srv:
        [out] = _call(rubric, _judge(rubric, srv.url.replace("http://", "https://") + "/v1"))
    _assert_failed(out, "connection_refused", attempts=1)
    assert out.error is not None
    assert "(TLS failed: SSLError: " in out.error


def test_dropped_and_hanging_requests_are_retried(rubric: Rubric, api_keys: str) -> None:
    with FakeServer(FakeConfig(p_drop=1.0, fault_free_after=None, max_lifetime_s=600)) as srv:
        [out] = _call(rubric, _judge(rubric, srv.url + "/v1", max_retries=2))
    _assert_failed(out, "connection", attempts=3)
    assert out.error is not None
    assert out.error.startswith("connection dropped, gave up after 3 attempt(s): ")
    with FakeServer(FakeConfig(p_timeout=1.0, hang_s=60, fault_free_after=None, max_lifetime_s=600)) as srv:
        start = time.monotonic()
        [out] = _call(rubric, _judge(rubric, srv.url + "/v1", max_retries=1, timeout_s=0.3))
    _assert_failed(out, "timeout", attempts=2)
    assert out.error is not None
    assert out.error.startswith("timeout, gave up after 2 attempt(s): ")
    # both hangs were cut, not waited out: two would take 120 s (a bound on the hang, not a deadline: load slows
    # the two 0.3 s timeouts by seconds, never by a minute)
    assert time.monotonic() - start < 60


def _raise_inside_litellm(monkeypatch: pytest.MonkeyPatch, error: BaseException, model: str) -> list[str]:
    """Make litellm.acompletion fail on this machine for ``model`` as litellm 1.106.0-1.106.2 does without
    `mcp`: there, ``completion()`` (which acompletion runs) imports litellm.responses.mcp when tools are
    sent, and acompletion's ``except Exception`` hands the ImportError to ``exception_type``, which
    wraps it as APIConnectionError (its __context__). The wrapping is litellm's own, unpatched."""
    import litellm.main

    real = litellm.main.completion
    calls: list[str] = []

    def completion(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("model") == model:
            calls.append(model)
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm.main, "completion", completion)
    return calls


def test_an_exception_raised_inside_litellm_is_local(rubric: Rubric, api_keys: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm

    calls = _raise_inside_litellm(monkeypatch, ModuleNotFoundError("No module named 'mcp'", name="mcp"),
                                  "openai/fake")
    with pytest.raises(litellm.exceptions.APIConnectionError) as info:  # what litellm makes of it
        asyncio.run(litellm.acompletion(model="openai/fake", api_base="http://127.0.0.1:9/v1", api_key="x",
                                        messages=[{"role": "user", "content": "hi"}]))
    assert isinstance(info.value.__context__, ModuleNotFoundError)
    assert classify(info.value)[0] == "local"

    [out] = _call(rubric, _judge(rubric, "http://127.0.0.1:9/v1"))
    _assert_failed(out, "local", attempts=1)
    assert out.error is not None
    assert out.error.startswith("local error, not retried: ModuleNotFoundError: No module named 'mcp' "
                                "(raised inside litellm, which reported it as APIConnectionError)")
    assert len(calls) == 2


def test_a_reply_the_server_garbled_is_not_local(rubric: Rubric, api_keys: str, status_server: StatusServer) -> None:
    """A 200 whose body is not JSON makes litellm raise (a JSONDecodeError under it): the server's
    fault, retried, never 'local' (which would stop the judge)."""
    judge = _judge(rubric, status_server.url("html"), model="hosted_vllm/fake", max_retries=1)
    [out] = _call(rubric, judge)
    _assert_failed(out, "server_error", attempts=2)
    assert out.error is not None
    assert out.error.startswith("server error (unreadable reply, HTTP 200)") and judge.stopped is None


def test_check_reports_the_kind(rubric: Rubric, api_keys: str, status_server: StatusServer) -> None:
    ok, msg = asyncio.run(_judge(rubric, f"http://127.0.0.1:{closed_port()}/v1").check())
    assert not ok and msg.startswith("connection refused, not retried: cannot reach ") and \
        msg.endswith("[connection_refused]")
    ok, msg = asyncio.run(_judge(rubric, status_server.url(401)).check())
    assert not ok and msg.startswith("authentication failed (401), not retried: ") and msg.endswith("[authentication]")
    assert FAKE_KEY not in msg and "***" in msg
    ok, msg = asyncio.run(_judge(rubric, status_server.url("ok")).check())
    assert ok, msg


# --------------------------------------------------------------------------- a judge that cannot work stops


def test_a_stopped_judge_makes_no_request_and_says_why(rubric: Rubric, api_keys: str,
                                                       status_server: StatusServer) -> None:
    judge = _judge(rubric, status_server.url(404))
    before = status_server.requests["404"]
    first, *rest = _call(rubric, judge, n=5)
    assert status_server.requests["404"] - before == 1
    _assert_failed(first, "not_found", attempts=1)
    for out in rest:
        _assert_failed(out, "not_found", attempts=0)  # not attempted: no HTTP attempt
        assert out.error == f"not attempted: judge stopped after {first.error}"
        assert out.cost == 0 and out.prompt_tokens == 0


@pytest.mark.parametrize("status", [400, 422])
def test_a_bad_request_fails_the_call_not_the_judge(rubric: Rubric, api_keys: str, status_server: StatusServer,
                                                    status: int) -> None:
    judge = _judge(rubric, status_server.url(status))
    before = status_server.requests[str(status)]
    outs = _call(rubric, judge, n=3)
    assert status_server.requests[str(status)] - before == 3  # each call asked once, none retried
    for out in outs:
        _assert_failed(out, "bad_request", attempts=1)
    assert judge.stopped is None


HEALTHY = """\
  - name: healthy
    model: openai/fake-healthy
    api_base: {url}/v1
    mode: json
    concurrency: 4
    input_cost_per_token: 0
    output_cost_per_token: 0
"""


def _dead_panel(tmp_path: Path, healthy_url: str, api_base: str, *, concurrency: int, model: str = "openai/fake-dead",
                mode: str = "tools") -> Path:
    dead = f"""\
  - name: dead
    model: {model}
    api_base: {api_base}
    api_key_env: JUDGE_A_KEY
    mode: {mode}
    concurrency: {concurrency}
    max_retries: 4
    max_reasks: 2
    input_cost_per_token: 0
    output_cost_per_token: 0
"""
    return write_config(tmp_path / "panel.yaml", dead + HEALTHY.format(url=healthy_url), runs=1, important_runs=1)


def _run_dead_panel(tmp_path: Path, cfg: Path) -> tuple[list[StoredCall], list[StoredCall], float]:
    """4 cases x 3 dimensions: 12 calls per judge. Returns (dead rows, healthy rows, run seconds)."""
    cases = write_cases(tmp_path / "cases.jsonl", 4)
    prep = evaluate.prepare(cases, cfg)
    start = time.monotonic()
    evaluate.run(prep, tmp_path / "out")
    elapsed = time.monotonic() - start
    with Store(tmp_path / "out" / "results.sqlite") as store:
        rows = store.calls()
    return [r for r in rows if r.judge == "dead"], [r for r in rows if r.judge == "healthy"], elapsed


def _assert_stopped(dead: list[StoredCall], kind: str, max_attempts: int) -> int:
    """All 12 calls failed with ``kind``; those made before the stop each made one attempt, the others none."""
    assert len(dead) == 12 and all(r.status == "failed" and r.error_kind == kind for r in dead), \
        [(r.error_kind, r.error) for r in dead]
    tried = [r for r in dead if r.attempts]
    assert 1 <= len(tried) <= max_attempts and all(r.attempts == 1 for r in tried)
    assert all(present(r.error).startswith(KIND_WORDS[kind]) for r in tried)
    first = tried[0].error
    assert all(present(r.error).startswith("not attempted: judge stopped after " + KIND_WORDS[kind]) for r in dead
               if not r.attempts)
    assert any(r.error == f"not attempted: judge stopped after {first}" for r in dead if not r.attempts) or \
        len(tried) == 12
    return len(tried)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_judge_on_a_closed_port_fails_fast_and_the_others_go_on(tmp_path: Path, api_keys: str,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  concurrency: int) -> None:
    """A dead endpoint costs one connection attempt per call in flight when it is found dead
    (concurrency 1: exactly one; concurrency 4: at most 4, the calls started together), not
    ``max_retries`` + 1 per call with backoff (once 5 attempts per call, minutes)."""
    import litellm

    dead_url = f"http://127.0.0.1:{closed_port()}/v1"
    sent: collections.Counter[str | None] = collections.Counter()
    real = litellm.acompletion

    async def counting(**kwargs: Any) -> Any:
        sent[kwargs.get("api_base")] += 1
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", counting)
    with FakeServer(FakeConfig(seed=1, latency_ms=5, max_lifetime_s=600)) as srv:
        dead, healthy, elapsed = _run_dead_panel(tmp_path, _dead_panel(tmp_path, srv.url, dead_url,
                                                                       concurrency=concurrency))
    n_tried = _assert_stopped(dead, "connection_refused", max_attempts=concurrency)
    assert sent[dead_url] == n_tried == sum(r.attempts for r in dead)
    if concurrency == 1:
        assert n_tried == 1
    assert len(healthy) == 12 and all(r.status == "ok" for r in healthy)
    print(f"\nclosed port, concurrency {concurrency}: 12 calls failed in {elapsed:.2f} s with {n_tried} "
          f"connection attempt(s)")


def test_a_judge_with_a_bad_key_stops_after_one_401(tmp_path: Path, api_keys: str, status_server: StatusServer) -> None:
    before = status_server.requests["401"]
    with FakeServer(FakeConfig(seed=1, latency_ms=5, max_lifetime_s=600)) as srv:
        dead, healthy, _elapsed = _run_dead_panel(
            tmp_path, _dead_panel(tmp_path, srv.url, status_server.url(401), concurrency=1))
    assert _assert_stopped(dead, "authentication", max_attempts=1) == 1
    assert status_server.requests["401"] - before == 1
    assert all(r.status == "ok" for r in healthy)
    assert all(FAKE_KEY not in present(r.error) and "***" in present(r.error) for r in dead)


def test_a_module_missing_inside_litellm_stops_the_judge(tmp_path: Path, api_keys: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm 1.106.0-1.106.2 without `mcp`, in TOOLS mode: every call would fail the same way."""
    calls = _raise_inside_litellm(monkeypatch, ModuleNotFoundError("No module named 'mcp'", name="mcp"),
                                  "openai/fake-dead")
    with FakeServer(FakeConfig(seed=1, latency_ms=5, max_lifetime_s=600)) as srv:
        dead, healthy, _elapsed = _run_dead_panel(
            tmp_path, _dead_panel(tmp_path, srv.url, srv.url + "/v1", concurrency=1))
    assert _assert_stopped(dead, "local", max_attempts=1) == 1 and len(calls) == 1
    assert "No module named 'mcp'" in present(dead[0].error)
    assert all(r.status == "ok" for r in healthy)


def test_a_judge_bug_is_local_and_stops_the_judge(rubric: Rubric, api_keys: str, monkeypatch: pytest.MonkeyPatch,
                                                  status_server: StatusServer) -> None:
    """An exception of our own (here: converting a valid reply) is `local` too."""
    from consensus_eval.domain.kinds.deductions import DeductionsReply

    def broken(self: object, dimension: Dimension) -> None:
        raise TypeError("to_judgment() is broken")

    monkeypatch.setattr(DeductionsReply, "to_judgment", broken)
    judge = _judge(rubric, status_server.url("ok"))
    first, second = _call(rubric, judge, n=2)
    _assert_failed(first, "local", attempts=1)
    assert first.error == "local error, not retried: TypeError: to_judgment() is broken"
    _assert_failed(second, "local", attempts=0)


# --------------------------------------------------------------------------- the classifier on its own


def test_classify_reads_the_chain_not_the_outer_class() -> None:
    import litellm

    def wrapped(inner: BaseException, outer: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as e:
                raise outer from e
        except BaseException as e:  # noqa: BLE001
            return e

    def llm(cls: Callable[..., BaseException], **kw: Any) -> BaseException:
        return cls(message="litellm says so", llm_provider="openai", model="m", **kw)

    cases = {
        # litellm's "500" over a refused connection, a reset and a read timeout
        "connection_refused": wrapped(ConnectionRefusedError(111, "Connect call failed"),
                                      llm(litellm.exceptions.InternalServerError)),
        "connection": wrapped(ConnectionResetError(104, "Connection reset by peer"),
                              llm(litellm.exceptions.InternalServerError)),
        "timeout": wrapped(TimeoutError("read timed out"), llm(litellm.exceptions.InternalServerError)),
        # raised on this machine
        "local": wrapped(TypeError("unexpected keyword"), llm(litellm.exceptions.APIConnectionError)),
    }
    for kind, error in cases.items():
        assert classify(error)[0] == kind, (kind, error)
    assert classify(TimeoutError())[:2] == ("timeout", "timeout")  # our hard timeout
    assert classify(KeyError("x"))[0] == "local"
    # no response and no cause: litellm's class says what litellm decided before sending
    assert classify(llm(litellm.exceptions.AuthenticationError))[0] == "authentication"
    assert classify(llm(litellm.exceptions.RateLimitError))[0] == "rate_limit"
    assert classify(llm(litellm.exceptions.ContextWindowExceededError))[0] == "bad_request"
    assert json.dumps(sorted(RETRYABLE)) == '["connection", "rate_limit", "server_error", "timeout"]'
