"""Simulated time for pacing: an event loop whose clock jumps to the next timer, and a provider with a
hidden per-minute limit, served a fixed workload to completion by the pacing alone (:func:`hidden_workload`)
or by the judge layer itself (:func:`judge_layer`: litellm, instructor, the pacing, the retries). Shared by
tests/test_pacing.py and bench/pacing_bench.py (which adds its own patching of the old limiter's clock
around :func:`virtual`)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import math
import random
import selectors
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.SelectSelector):
    """A selector that never sleeps: with nothing ready it moves the virtual clock by the timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise RuntimeError("deadlock: nothing scheduled and nothing to wait for")
        self.now += max(0.0, timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time: ``time()`` is the virtual clock, sleeps cost nothing."""

    def __init__(self) -> None:
        self._jump = _JumpingSelector()
        super().__init__(self._jump)

    def time(self) -> float:
        return self._jump.now


def virtual(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` to completion on a fresh :class:`VirtualLoop`."""
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on ``loop`` (litellm's logging worker), let it end, and close the loop."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def lognormal(rng: random.Random, median: float, sigma: float = 0.5, cap: float | None = None) -> float:
    """A lognormal draw with this median (and shape ``sigma``), at most ``cap``."""
    x = median * math.exp(sigma * rng.gauss(0, 1))
    return min(x, cap) if cap else x


class _Pacing(Protocol):  # consensus_eval.judges.pacing.Pacing, or an older version of it (the bench's --old-ref)
    async def acquire(self, tokens: int) -> Any: ...
    def release(self, ticket: Any, *, tokens: int | None = ..., rate_limited: bool = ...) -> None: ...


def hidden_workload(pacing: _Pacing, hidden_rpm: float, requests: int, seed: int,
                    run: Callable[[Callable[[], Awaitable[list[tuple[float, int, float]]]]],
                                  list[tuple[float, int, float]]] = virtual,
                    send_cost_s: float = 0.0) -> list[tuple[float, int, float]]:
    """``requests`` requests through ``pacing``, sent by 256 workers to completion against a simulated
    provider that accepts at most ``hidden_rpm`` requests in any sliding 60 s window (429 after 5 ms
    above it; the worker then waits until the window frees, as a Retry-After says, and sends the request
    again), latency lognormal median 8 s capped at 30 s (``run``: how the coroutine is run,
    :func:`virtual` by default): ``(arrival, status, reply end)`` of every request sent. With
    ``send_cost_s`` the client writes its requests one at a time, each taking that long (a busy client:
    a bunch of requests released at once reaches the provider spread out, the last ones late)."""

    async def main() -> list[tuple[float, int, float]]:
        loop = asyncio.get_running_loop()
        rng = random.Random(seed)
        window: collections.deque[float] = collections.deque()
        log: list[tuple[float, int, float]] = []
        left = requests
        written = -math.inf  # when the client's writer is free (send_cost_s)

        async def worker() -> None:
            nonlocal left, written
            while left > 0:
                left -= 1
                while True:
                    ticket = await pacing.acquire(0)
                    if send_cost_s:
                        written = max(loop.time(), written) + send_cost_s
                        await asyncio.sleep(written - loop.time())
                    now = loop.time()
                    while window and now - window[0] >= 60.0:
                        window.popleft()
                    if len(window) >= hidden_rpm:
                        log.append((now, 429, now + 0.005))
                        await asyncio.sleep(0.005)
                        pacing.release(ticket, rate_limited=True)
                        await asyncio.sleep(60.0 - (now - window[0]))
                        continue
                    window.append(now)
                    await asyncio.sleep(lognormal(rng, 8.0, 0.5, cap=30.0))
                    log.append((now, 200, loop.time()))
                    pacing.release(ticket, tokens=1)
                    break

        await asyncio.gather(*(worker() for _ in range(256)))
        return log

    return run(main)


# --------------------------------------------------------------------------- a fixed workload to completion


@dataclass
class Figures:
    """What a provider with a hidden limit of ``hidden_rpm`` (per sliding 60 s) saw of one client's
    fixed workload, from its own log: every request's arrival time and status, and the replies' ends.

    ``share_429``: requests answered 429 among all; ``sustained``: accepted requests per minute over the
    calls' sending time (first arrival to last accepted arrival), as a share of the limit; ``wall``:
    accepted per minute from the first arrival to the last reply, as a share of the limit (the last
    replies' latency included: an even pacer of n calls reaches at best n / (n + limit x latency / 60));
    ``per_minute``: accepted arrivals in each minute from the first arrival."""

    requests: int
    rejected: int
    accepted: int
    hidden_rpm: float
    first: float
    last_accepted: float
    last_reply: float

    @property
    def share_429(self) -> float:
        return self.rejected / self.requests if self.requests else 0.0

    @property
    def sustained(self) -> float:
        span = self.last_accepted - self.first
        return self.accepted / span * 60 / self.hidden_rpm if span > 0 else 0.0

    @property
    def wall(self) -> float:
        span = self.last_reply - self.first
        return self.accepted / span * 60 / self.hidden_rpm if span > 0 else 0.0

    per_minute: list[int] = field(default_factory=list)


def figures(log: list[tuple[float, int, float]], hidden_rpm: float) -> Figures:
    """:class:`Figures` of a provider's log: ``(arrival, status, reply end)`` per request."""
    ok = sorted(t for t, st, _ in log if st == 200)
    first = min(t for t, _, _ in log)
    minutes = collections.Counter(int((t - first) // 60) for t in ok)
    return Figures(requests=len(log), rejected=sum(1 for _, st, _ in log if st == 429), accepted=len(ok),
                   hidden_rpm=hidden_rpm, first=first, last_accepted=ok[-1], last_reply=max(e for _, _, e in log),
                   per_minute=[minutes[m] for m in range(max(minutes) + 1)])


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs what the loop would hand to a thread at once, in the loop's thread (litellm builds its
    requests in ``run_in_executor``): on simulated time no thread may finish 'later'."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine, as a thread would
            fut.set_exception(e)
        return fut


@dataclass
class JudgeRun:
    """One judge's share of :func:`judge_layer`: the provider's :class:`Figures`, its log and the judge."""

    figures: Figures
    log: list[tuple[float, int, float]]
    judge: Any  # consensus_eval.judges.llm.LLMJudge


def judge_layer(hidden_rpm: float, calls: int, *, judges: int = 1, seed: int = 0, retry_after: bool = True,
                latency_median_s: float = 8.0, arrival_jitter_s: float = 0.05) -> list[JudgeRun]:
    """``calls`` judge calls per judge through the real judge layer (``LLMJudge.judge``: litellm,
    instructor, the pacing and the retries; ``concurrency: auto``, no rpm, as many workers as the
    runner starts) on simulated time, to completion: each judge's provider (respx, in process) accepts
    at most ``hidden_rpm`` requests in any sliding 60 s window (429 at once above it, with a
    Retry-After saying when the window frees when ``retry_after``), latency lognormal with median
    ``latency_median_s`` (sigma 0.5, at most 30 s). A request reaches the provider up to
    ``arrival_jitter_s`` after the client sent it (uniform; the client's own work per request). Needs
    ``JUDGE_A_KEY`` in the environment."""
    import httpx
    import respx

    from consensus_eval.domain.cases import Case
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.judges.llm import LLMJudge
    from tests.fakellm import chat_response, dimension_of, make_reply

    rubric = load_rubric("medical_record")
    loop = VirtualLoop()
    loop.set_default_executor(_InlineExecutor())
    rng = random.Random(seed)
    base = "http://hidden.test/v1"
    made = [LLMJudge(LLMJudgeConfig(name=f"j{k}", model=f"openai/hidden-{k}", api_base=base,
                                    api_key_env="JUDGE_A_KEY", mode="tools", max_retries=8,
                                    input_cost_per_token=0, output_cost_per_token=0), rubric)
            for k in range(judges)]
    windows: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
    logs: dict[str, list[tuple[float, int, float]]] = collections.defaultdict(list)

    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(rng.uniform(0.0, arrival_jitter_s))
        body = json.loads(request.content)
        now = loop.time()
        window = windows[body["model"]]
        while window and now - window[0] >= 60.0:
            window.popleft()
        if len(window) >= hidden_rpm:
            logs[body["model"]].append((now, 429, now))
            headers = {"Retry-After": f"{60.0 - (now - window[0]):.3f}"} if retry_after else None
            return httpx.Response(429, json={"error": {"message": "Rate limit reached"}}, headers=headers)
        window.append(now)
        await asyncio.sleep(lognormal(rng, latency_median_s, 0.5, cap=30.0))
        logs[body["model"]].append((now, 200, loop.time()))
        return httpx.Response(200, json=chat_response(body, make_reply(dimension_of(body), rng, n=1)))

    cases = [Case(id=f"c{i}", conversation="医生：血糖多少？\n患者：空腹9.6。", record=f"主诉：多饮{i}年")
             for i in range(calls // len(rubric.dimensions) + 1)]
    work = [(c, d) for c in cases for d in rubric.dimensions][:calls]

    async def one_judge(judge: LLMJudge) -> None:
        queue = list(reversed(work))

        async def worker() -> None:
            while queue:
                case, d = queue.pop()
                out = await judge.judge(case, d, render(rubric, d, case))
                if out.status != "ok":
                    raise AssertionError(f"{judge.config.name}: {out.error}")

        await asyncio.gather(*(worker() for _ in range(min(judge.config.max_workers, len(queue)))))

    async def main() -> None:
        await asyncio.gather(*(one_judge(j) for j in made))

    try:
        with respx.mock(using="httpx") as mock:
            mock.post(f"{base}/chat/completions").mock(side_effect=answer)
            loop.run_until_complete(main())
    finally:
        _close(loop)
    return [JudgeRun(figures(logs[f"hidden-{k}"], hidden_rpm), logs[f"hidden-{k}"], j) for k, j in enumerate(made)]
