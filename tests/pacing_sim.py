"""Simulated time for pacing: an event loop whose clock jumps to the next timer, and a provider with a
hidden per-minute limit. Shared by tests/test_pacing.py and bench/pacing_bench.py (which adds its own
patching of the old limiter's clock around :func:`virtual`)."""

from __future__ import annotations

import asyncio
import collections
import math
import random
import selectors
from collections.abc import Awaitable, Callable
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


def lognormal(rng: random.Random, median: float, sigma: float = 0.5, cap: float | None = None) -> float:
    """A lognormal draw with this median (and shape ``sigma``), at most ``cap``."""
    x = median * math.exp(sigma * rng.gauss(0, 1))
    return min(x, cap) if cap else x


class _Pacing(Protocol):  # consensus_eval.judges.pacing.Pacing, or an older version of it (the bench's --old-ref)
    async def acquire(self, tokens: int) -> Any: ...
    def release(self, ticket: Any, *, tokens: int | None = ..., rate_limited: bool = ...) -> None: ...


def hidden_window(pacing: _Pacing, hidden_rpm: float, seconds: float, seed: int,
                  run: Callable[[Callable[[], Awaitable[list[tuple[float, int]]]]], list[tuple[float, int]]] = virtual,
                  ) -> list[tuple[float, int]]:
    """256 workers against a simulated provider that accepts at most ``hidden_rpm`` requests in any
    sliding 60 s window (429 after 5 ms above it; the worker then waits until the window frees, as a
    Retry-After says), latency lognormal median 8 s capped at 30 s, for ``seconds`` of simulated time
    (``run``: how the coroutine is run, :func:`virtual` by default): the (send time, status) of every
    request."""

    async def main() -> list[tuple[float, int]]:
        loop = asyncio.get_running_loop()
        rng = random.Random(seed)
        window: collections.deque[float] = collections.deque()
        log: list[tuple[float, int]] = []

        async def worker() -> None:
            while True:
                ticket = await pacing.acquire(0)
                now = loop.time()
                while window and now - window[0] >= 60.0:
                    window.popleft()
                if len(window) >= hidden_rpm:
                    log.append((now, 429))
                    await asyncio.sleep(0.005)
                    pacing.release(ticket, rate_limited=True)
                    await asyncio.sleep(60.0 - (now - window[0]))
                    continue
                window.append(now)
                log.append((now, 200))
                await asyncio.sleep(lognormal(rng, 8.0, 0.5, cap=30.0))
                pacing.release(ticket, tokens=1)

        tasks = [asyncio.create_task(worker()) for _ in range(256)]
        await asyncio.sleep(seconds)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return log

    return run(main)
