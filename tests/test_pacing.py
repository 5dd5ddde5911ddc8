"""Pacing (consensus_eval/judges/pacing.py): the rpm/tpm spacer's window bounds, FIFO order,
cancellation and wake-ups, the in-flight gate, ``concurrency: auto`` sized by Little's law, AIMD
against the fake server's hidden limit, and the binding limit the run summary names.

Time is simulated: :class:`tests.pacing_sim.VirtualLoop` is an event loop whose clock jumps to the next timer
instead of sleeping, so the window properties are checked exactly and nothing here is timed.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import LLMJudgeConfig, RulesJudgeConfig, load_config
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Rubric
from consensus_eval.judges.llm import LLMJudge
from consensus_eval.judges.pacing import (
    ASSUMED_LATENCY_S,
    GUARD_MEMORY_S,
    HEADROOM,
    INITIAL_CONCURRENCY,
    MAX_GUARD_S,
    PACED_GUARD_S,
    SEND_GUARD_S,
    AutoLimit,
    Binding,
    Gate,
    Pacing,
    SendLog,
    Spacer,
)
from tests.fake_server import FakeConfig, FakeServer
from tests.pacing_sim import figures, hidden_workload, judge_layer, virtual

EPS = 1e-6


def max_in_window(times: list[float], window: float) -> int:
    """The most events in any half-open window [t, t + window) (float noise allowed for)."""
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] < t + window - EPS:
            j += 1
        best = max(best, j - i)
    return best


# --------------------------------------------------------------------------- the rpm spacer


@pytest.mark.parametrize("rpm", [300, 1200])
def test_no_window_sees_more_than_the_rate_with_400_waiters(rpm: int) -> None:
    """400 workers, each sending requests with a random latency in between: in any sliding second
    at most rpm/60 releases, in any sliding minute at most rpm, and the rate is reached (the old
    limiter released 5 at once every second: up to 11 in a sliding second at rpm 300)."""
    per_worker = 1 if rpm == 300 else 4  # 400 or 1,600 releases: more than a minute's worth either way
    rng = random.Random(rpm)

    async def main() -> tuple[list[float], Spacer]:
        loop = asyncio.get_running_loop()
        spacer = Spacer(rpm)
        times: list[float] = []

        async def worker() -> None:
            for _ in range(per_worker):
                await spacer.acquire()
                times.append(loop.time())
                await asyncio.sleep(rng.uniform(0.0, 3.0))

        await asyncio.gather(*(worker() for _ in range(400)))
        return times, spacer

    times, spacer = virtual(main)
    n = 400 * per_worker
    assert len(times) == n == spacer.releases
    assert max_in_window(times, 1.0) <= rpm / 60
    assert max_in_window(times, 60.0) <= rpm
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 60 / rpm - EPS  # never two closer than one interval
    assert times[-1] - times[0] == pytest.approx((n - 1) * 60 / rpm, rel=1e-6)  # and no slower: the rate is reached
    # event-driven: one timer callback per release that had to wait, no polling
    assert spacer.wakeups <= spacer.releases
    assert spacer.waits >= n - 1


def test_releases_are_first_come_first_served_and_an_idle_pause_builds_no_burst() -> None:
    async def main() -> list[tuple[int, float]]:
        loop = asyncio.get_running_loop()
        spacer = Spacer(60)  # one a second
        order: list[tuple[int, float]] = []

        async def one(i: int, arrive: float) -> None:
            await asyncio.sleep(arrive)
            await spacer.acquire()
            order.append((i, loop.time()))

        # arrivals out of creation order; then a long pause, then 3 together
        arrivals = [0.5, 0.1, 0.3, 0.2, 0.4, 30.0, 30.001, 30.002]
        await asyncio.gather(*(one(i, a) for i, a in enumerate(arrivals)))
        return order

    order = virtual(main)
    assert [i for i, _ in order] == [1, 3, 2, 4, 0, 5, 6, 7]
    times = [t for _, t in order]
    assert times[:5] == pytest.approx([0.1, 1.1, 2.1, 3.1, 4.1])
    assert times[5:] == pytest.approx([30.0, 31.0, 32.0])  # after 26 s idle: still one a second


def test_a_cancelled_waiter_leaves_the_queue_and_a_released_one_gives_its_turn_back() -> None:
    """Waiter 2 is cancelled while waiting: it never goes, and 3 takes the next turn. Waiter 4 is
    cancelled right after its release, before it ran: its turn goes to 5 at once, not a second later."""
    released: list[tuple[int, float]] = []
    tasks: dict[int, asyncio.Task[None]] = {}

    class CancelAfterRelease(Spacer):
        victim: asyncio.Future[None] | None = None

        def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
            head = self._waiters[0][0] if self._waiters else None
            super()._fire(loop)
            if head is not None and head is self.victim and head.done():
                tasks[4].cancel()

    async def main() -> CancelAfterRelease:
        loop = asyncio.get_running_loop()
        spacer = CancelAfterRelease(60)

        async def one(i: int) -> None:
            await spacer.acquire()
            released.append((i, loop.time()))

        for i in range(7):
            tasks[i] = asyncio.create_task(one(i))
            await asyncio.sleep(0)  # each in the queue before the next is created
        spacer.victim = spacer._waiters[3][0]  # waiter 4 (0 went at once; 1, 2, 3, 4 wait)
        await asyncio.sleep(0.5)
        tasks[2].cancel()
        results = await asyncio.gather(*tasks.values(), return_exceptions=True)
        assert [isinstance(r, asyncio.CancelledError) for r in results] == [False, False, True, False, True,
                                                                             False, False]
        return spacer

    spacer = virtual(main)
    assert released == [(0, 0.0), (1, 1.0), (3, 2.0), (5, pytest.approx(3.0)), (6, pytest.approx(4.0))]
    assert spacer.releases == 5
    assert max_in_window([t for _, t in released], 1.0) == 1


def test_tpm_spacing_charges_the_estimate_and_corrects_by_the_usage() -> None:
    """tpm 6,000 = 100 tokens a second. A 200-token estimate holds the next request 2 s; its usage of
    500 moves the next one to 5 s; a 429 refunds its charge."""
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        pacing = Pacing(tpm=6000, concurrency=10)
        t: list[float] = []
        first = await pacing.acquire(200)
        t.append(loop.time())
        second = asyncio.create_task(pacing.acquire(200))
        await asyncio.sleep(1.0)
        pacing.release(first, tokens=500)  # 300 more than charged: the next turn moves 3 s later
        ticket = await second
        t.append(loop.time())
        pacing.release(ticket, rate_limited=True)  # refunded: the next goes at once
        third = await pacing.acquire(100)
        t.append(loop.time())
        pacing.release(third, tokens=100)
        return t

    assert virtual(main) == pytest.approx([0.0, 5.0, 5.0])


# --------------------------------------------------------------------------- the in-flight gate


def test_the_gate_admits_at_most_its_limit_first_come_first_served_and_follows_a_lower_limit() -> None:
    async def main() -> tuple[list[int], int, int]:
        gate = Gate(3)
        order: list[int] = []
        peak = 0

        async def one(i: int) -> None:
            nonlocal peak
            await gate.acquire()
            order.append(i)
            peak = max(peak, gate.in_flight)
            await asyncio.sleep(1.0)
            gate.release()

        tasks = []
        for i in range(10):
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0)
        await asyncio.sleep(0.5)
        assert gate.waiting == 7  # 3 in, 7 waiting
        late = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        assert gate.waiting == 8
        late.cancel()  # a cancelled waiter is no longer counted
        await asyncio.gather(late, return_exceptions=True)
        assert gate.waiting == 7
        gate.set_limit(1)
        low_peak = 0

        async def watch() -> None:
            nonlocal low_peak
            await asyncio.sleep(1.0)  # once the first three are out
            while any(not t.done() for t in tasks):
                low_peak = max(low_peak, gate.in_flight)
                await asyncio.sleep(0.25)

        await asyncio.gather(*tasks, watch())
        assert gate.waiting == 0 and gate.in_flight == 0
        return order, peak, low_peak

    order, peak, low_peak = virtual(main)
    assert order == list(range(10)) and peak == 3 and low_peak == 1


# --------------------------------------------------------------------------- concurrency: auto


def _simulate(pacing: Pacing, n: int, latency: Callable[[int], float], *, workers: int = 256,
              hidden_in_flight: int | None = None) -> tuple[float, list[int], int, list[float]]:
    """``n`` requests through ``pacing`` by ``workers`` workers against a simulated provider that
    answers 429 at once (after 10 ms) to a request beyond ``hidden_in_flight`` in flight: returns
    (seconds, the limit after each reply, 429s, send times)."""
    limits: list[int] = []
    sent: list[float] = []
    n429 = 0
    at_server = 0

    async def main() -> float:
        nonlocal n429
        loop = asyncio.get_running_loop()
        queue = list(range(n))

        async def worker() -> None:
            nonlocal n429, at_server
            while queue:
                i = queue.pop()
                while True:
                    ticket = await pacing.acquire(0)
                    sent.append(loop.time())
                    if hidden_in_flight is not None and at_server >= hidden_in_flight:
                        await asyncio.sleep(0.01)
                        pacing.release(ticket, rate_limited=True)
                        n429 += 1
                        await asyncio.sleep(1.0)  # backoff
                        continue
                    at_server += 1
                    await asyncio.sleep(latency(i))
                    at_server -= 1
                    pacing.release(ticket, tokens=100)
                    limits.append(pacing.gate.limit)
                    break

        start = loop.time()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return loop.time() - start

    return virtual(main), limits, n429, sent


def test_auto_concurrency_is_sized_from_rpm_and_the_observed_latency() -> None:
    """The example panel's deepseek judge: rpm 120 at a 30 s latency needs 60 in flight (Little's law).
    auto starts from the assumed 10 s latency, then sizes from the latencies that come in, and
    reaches the rpm; concurrency 8 (the old default) gets 16 a minute."""
    rng = random.Random(7)
    lat = [30.0 * math.exp(0.3 * rng.gauss(0, 1)) for _ in range(600)]
    auto = Pacing(rpm=120, concurrency="auto")
    first = auto.gate.limit
    assert first == math.ceil(2 * ASSUMED_LATENCY_S * HEADROOM) + 1
    seconds, limits, _, sent = _simulate(auto, 600, lambda i: lat[i])
    mean = sum(lat) / len(lat)
    assert limits[-1] == pytest.approx(2 * mean * HEADROOM + 1, abs=6)  # the target follows the latencies
    steady = [t for t in sent if t >= 60.0]  # once the first replies have sized the limit
    assert (len(steady) - 1) / (steady[-1] - steady[0]) * 60 == pytest.approx(120, rel=0.01)
    assert 600 / seconds * 60 >= 0.8 * 120  # the whole run: ramp-up and the last replies' tail included
    report = auto.report()
    assert report.binding == "rpm" and report.achieved_rpm == pytest.approx(600 / seconds * 60, rel=0.05)

    fixed = Pacing(rpm=120, concurrency=8)
    seconds8, _, _, _ = _simulate(fixed, 120, lambda i: lat[i], workers=8)
    assert 120 / seconds8 * 60 == pytest.approx(8 / mean * 60, rel=0.1)  # ~16 a minute
    assert fixed.report().binding == "concurrency"


def test_auto_concurrency_without_a_known_rate_grows_additively_and_is_cut_on_429() -> None:
    """No rpm: AIMD alone. A hidden limit of 20 in flight answers 429 above it: the limit is cut
    (multiplicatively), grows back slowly, and settles around the hidden limit; the report blames 429s.
    (The rate learned at the first 429 does not hold it back: a 429 with the learned window not full
    cuts the in-flight ceiling, not the rate; the limit may reach Little's law's headroom over it.)"""
    pacing = Pacing(concurrency="auto")
    assert pacing.gate.limit == INITIAL_CONCURRENCY
    rng = random.Random(3)
    lat = [rng.uniform(0.8, 1.2) for _ in range(3000)]
    seconds, limits, n429, sent = _simulate(pacing, 3000, lambda i: lat[i], hidden_in_flight=20)
    assert max(limits) <= math.ceil(20 * HEADROOM) + 2
    # requests/s (20 in flight at 1 s would give 20): the rate learned at the first 429 (from a young
    # run's few seconds) and the in-flight ceiling both hold it back: 0.75 of it over the run, 0.79
    # after two minutes, where the pacing before the learned rate reached 0.89 and 0.93 (with 2.2 % of
    # requests answered 429, here 0.1 %: the cost of the learned rate against a limit on requests in
    # flight; bench/README.md, "Pacing and rate limits")
    assert 3000 / seconds >= 0.7 * 20
    late = [t for t in sent if t >= 120.0]
    assert len(late) / (late[-1] - 120.0) >= 0.7 * 20
    assert pacing.auto is not None and pacing.auto.cuts >= 1 and n429 >= 1
    assert sum(limits[-500:]) / 500 >= 0.7 * 20  # AIMD saw-tooth between 0.7 and 1 of the hidden limit
    assert n429 / 3000 < 0.05
    report = pacing.report()
    assert report.binding == "provider 429s"
    assert report.explain().startswith("provider 429s: ") and "answered 429" in report.explain()


@pytest.mark.parametrize("seed", [1, 2])
def test_a_hidden_rate_per_minute_is_learned_at_the_first_429(seed: int) -> None:
    """No rpm, a provider that takes 300 requests in any sliding minute, 1,050 requests to completion: the
    slow start ends at the first 429, the limit is learned from what the provider accepted in its window
    (exactly: 300), and from then on the requests are paced by it. Over the calls' sending time (the slow
    start included) the accepted rate is at least 0.95 of the hidden limit, no minute after the first
    falls below 0.9 of it (the rule before, docs/design/pacing.md: 300, 86, 242, 290), and under 1 % of the
    requests are answered 429."""
    pacing = Pacing(concurrency="auto")
    f = figures(hidden_workload(pacing, 300, 1050, seed), 300)
    assert f.accepted == 1050
    assert f.sustained >= 0.95 and f.share_429 < 0.01
    assert min(f.per_minute[1:-1]) >= 0.9 * 300 and max(f.per_minute) <= 300
    auto = pacing.auto
    assert auto is not None and auto.learned_rpm is not None and not auto.slow_start and auto.learn
    assert 300 <= auto.learned_rpm <= 1.15 * 300
    report = pacing.report()
    assert report.binding == "provider 429s" and report.learned_rpm == auto.learned_rpm
    assert "paced at" in report.explain()
    assert report.accepted_rpm == pytest.approx(report.achieved_rpm * (1 - report.rate_limited / report.requests))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_the_slow_start_a_freed_slot_is_reused_a_quarter_second_after_the_window(seed: int) -> None:
    """The same 300/min provider and 1,050 requests, from a busy client that writes its requests one at a
    time, 6 ms each (the slow start's bunch reaches the provider spread over up to a second). Once the slow
    start's sends have left the window, a slot freed by a send leaving it goes again within 0.3 s (the
    request 300 places later arrives at most 60.3 s after it, in the median; the rule before kept every send
    a second past the window: 1.0 s, a steady minute of 295); under 1 % of the requests are answered 429 and
    at least 0.955 of the limit is sustained (0.952-0.976 over seeds 1-3 before, 0.958-0.983 now)."""
    pacing = Pacing(concurrency="auto")
    log = hidden_workload(pacing, 300, 1050, seed, send_cost_s=0.006)
    f = figures(log, 300)
    assert f.accepted == 1050 and f.share_429 < 0.01
    ok = sorted(t for t, status, _ in log if status == 200)
    reuse = [ok[k] - ok[k - 300] - 60.0 for k in range(600, len(ok))]  # both paced by the learned limit
    assert 0.0 <= statistics.median(reuse) <= 0.3
    assert f.sustained >= 0.955


def test_through_the_judge_layer_a_hidden_limit_is_met_politely_from_the_first_minute(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pacing's targets through the judge layer itself (LLMJudge.judge: litellm, instructor, the pacing and
    the retries with the provider's Retry-After; the runner's 256 workers per judge), on simulated time:
    two judges, 240 calls each to completion, against a provider that takes 60 requests per judge in any
    sliding minute (each request reaching it up to 50 ms after it was sent): at most 5 % of the requests
    answered 429, a learned rate within 1.15x of the limit, at least 0.95 of the limit sustained over the
    calls' sending time, no full minute below 0.9 of it (the pacing before: 2-7 % answered 429, 0.87-0.94
    sustained, minutes of 44-58), and the run summary's accepted requests per minute apart from those
    answered 429. (300/min through the judge layer: bench/pacing_bench.py --part judgesim; the pacing
    alone at 300/min: the test above.)"""
    hidden_rpm = 60.0
    monkeypatch.setenv("JUDGE_A_KEY", "sk-test-pacing")
    for run in judge_layer(hidden_rpm, 240, judges=2, seed=6):
        f, report = run.figures, run.judge.pacing_report()
        assert f.accepted == 240 and report is not None
        assert f.share_429 <= 0.05 and report.rate_limited == f.rejected
        assert report.learned_rpm is not None and 1 / 1.15 <= report.learned_rpm / hidden_rpm <= 1.15
        assert f.sustained >= 0.95
        assert min(f.per_minute[:-1]) >= 0.9 * hidden_rpm
        assert report.accepted_rpm == pytest.approx((report.requests - report.rate_limited) / report.active_s * 60)
        assert report.explain().startswith(f"provider 429s: {report.accepted_rpm:.1f} requests/min accepted")


def _young_run(probe_answer: int) -> Pacing:
    """A pacing whose first 429 comes 10 s into the run (20 requests accepted before it, latency 1 s),
    then one more request: the probe, answered ``probe_answer``."""
    async def main() -> Pacing:
        loop = asyncio.get_running_loop()
        pacing = Pacing(concurrency="auto")
        for _ in range(20):
            ticket = await pacing.acquire(0)
            await asyncio.sleep(0.5)
            pacing.release(ticket, tokens=1)
        await asyncio.sleep(10.0 - loop.time())
        refused = await pacing.acquire(0)
        pacing.release(refused, rate_limited=True)
        auto = pacing.auto
        assert auto is not None and auto.allowed == 20 and auto.test_at is not None
        assert loop.time() < auto.test_at
        probe = await pacing.acquire(0)  # the window (60 s) holds 20 of 20: only the probe goes, a round trip on
        assert probe.probe and loop.time() >= auto.test_at and loop.time() < 60.0
        pacing.release(probe, tokens=1) if probe_answer == 200 else pacing.release(probe, rate_limited=True)
        return pacing

    return virtual(main)


def test_a_young_runs_learned_window_is_tested_by_one_probe() -> None:
    """A first 429 before a minute has passed: 20 accepted could be 20 per minute, or 20 in flight, or a
    shorter window. One probe a round trip later tells: answered 429, the minute holds (nothing more goes
    until the window frees); accepted, there is no such window and AIMD alone paces (no learned rate)."""
    held = _young_run(429)
    assert held.auto is not None and held.auto.learn and held.auto.learned_rpm == 20 and held.auto.test_at is None
    freed = _young_run(200)
    assert freed.auto is not None and not freed.auto.learn and freed.auto.learned_rpm is None
    assert freed.auto.ceiling is not None and freed.learned_spacer is None


def test_the_guard_follows_how_late_429s_come_back_and_forgets_old_ones() -> None:
    """A send stays in the learned window's count SEND_GUARD_S longer than the window, or as long as the
    longest round trip of the recent 429s (answered at once: what the client's own delays add), at most
    MAX_GUARD_S; a 429 older than GUARD_MEMORY_S no longer counts."""
    auto = AutoLimit(rpm=None, tpm=None, cap=256)
    assert auto.guard_s(0.0) == SEND_GUARD_S
    auto.refusal_trips.append((10.0, 0.2))
    assert auto.guard_s(11.0) == SEND_GUARD_S
    auto.refusal_trips.append((20.0, 3.5))
    assert auto.guard_s(21.0) == 3.5
    assert auto.guard_s(20.0 + GUARD_MEMORY_S + 1) == SEND_GUARD_S
    auto.refusal_trips.append((30.0, 60.0))
    assert auto.guard_s(31.0) == MAX_GUARD_S


def test_the_guard_shrinks_once_the_slow_starts_bunch_has_left_the_window() -> None:
    """The slow start's sends (before the first 429) keep SEND_GUARD_S past the window; once the last of
    them has left it, the learned limit's sends (spread out) keep PACED_GUARD_S; a 429's longer round trip
    still sets it. The young run's probe, sent past the count on purpose, says nothing about the guard."""
    auto = AutoLimit(rpm=None, tpm=None, cap=256)
    auto.on_rate_limited(30.0, 31.0, accepted=200, age_s=30.0)
    assert auto.paced_from == 31.0 and auto.allowed == 200
    assert auto.guard_s(31.0 + 60.0) == SEND_GUARD_S
    assert auto.guard_s(31.0 + 60.0 + SEND_GUARD_S) == PACED_GUARD_S < SEND_GUARD_S
    auto.refusal_trips.append((100.0, 0.6))
    assert auto.guard_s(101.0) == 0.6
    probed = _young_run(429)
    assert probed.auto is not None and not probed.auto.refusal_trips


def test_the_send_log_counts_what_the_provider_accepted_and_when_the_window_frees() -> None:
    log = SendLog()
    for t in (0.0, 1.0, 2.0, 3.0, 4.0):
        log.add(t)
    log.reject(2.0)  # answered 429: the provider did not count it
    assert log.accepted(4.0, 60.0) == 4
    assert log.accepted(4.0, 2.5) == 2  # sends at 3 and 4 (2 was rejected)
    assert log.free_at(4.0, 60.0, 5) == 4.0  # room already
    assert log.free_at(4.0, 60.0, 4) == 60.0  # the oldest accepted (0) leaves at 60
    assert log.free_at(4.0, 60.0, 3) == 61.0  # two must leave: 0 and 1 (2 was not counted)
    assert log.free_at(4.0, 60.0, 2) == 63.0  # 0, 1 and 3
    assert log.accepted_before(3.0, 60.0) == 2  # sends at 0 and 1 (2 was rejected; 3 itself not counted)
    assert log.accepted_before(4.0, 2.5) == 1  # the send at 3
    log.add(70.0)  # the window kept is 70 s (60 s and MAX_GUARD_S): the send at 0 is gone
    assert log.accepted(70.0, 61.0) == 1 and log.first == 0.0


def test_auto_without_any_limit_grows_to_the_cap_and_no_further() -> None:
    pacing = Pacing(concurrency="auto", max_concurrency=12)
    _, limits, _, _ = _simulate(pacing, 500, lambda i: 1.0, workers=40)
    assert limits[0] <= INITIAL_CONCURRENCY + 1 and max(limits) == 12


def test_the_report_names_latency_when_no_limit_held_requests_back() -> None:
    pacing = Pacing(rpm=600, concurrency=50)
    _simulate(pacing, 10, lambda i: 5.0 + i, workers=10)
    report = pacing.report()
    assert report.binding == "latency" and report.requests == 10
    assert "latency" in report.explain()


# --------------------------------------------------------------------------- config


def test_concurrency_auto_is_the_llm_default_and_a_number_still_works() -> None:
    llm = LLMJudgeConfig(name="a", model="openai/x")
    assert llm.concurrency == "auto" and llm.max_workers == 256
    assert LLMJudgeConfig(name="a", model="openai/x", concurrency=4).max_workers == 4
    assert LLMJudgeConfig(name="a", model="openai/x", max_concurrency=32).max_workers == 32
    assert RulesJudgeConfig(name="rules").max_workers == 8
    assert LLMJudgeConfig(name="a", model="openai/x", tpm=90_000).tpm == 90_000


def test_a_bad_concurrency_is_refused_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rubric: medical_record\njudges:\n  - name: a\n    model: openai/x\n    concurrency: lots\n",
                   encoding="utf-8")
    with pytest.raises(Exception, match="concurrency"):
        load_config(cfg)


# --------------------------------------------------------------------------- against the fake server


def test_aimd_reacts_to_the_fake_servers_hidden_limit(rubric: Rubric, api_keys: str) -> None:
    """A hidden limit of 4 requests in flight (429 above it, no Retry-After): concurrency auto with no
    rpm starts at 8, is cut on the first 429s (the lowest limit reached is below 8, whatever it grew back to),
    and every call still ends ok."""
    cfg = FakeConfig(seed=3, latency_ms=60, hidden_concurrency=4, max_lifetime_s=600)
    d = rubric.dimension("accuracy")
    cases = [Case(id=f"c{i}", conversation="医生：血糖多少？\n患者：空腹9.6。", record=f"主诉：多饮{i}年")
             for i in range(40)]
    with FakeServer(cfg) as srv:
        judge = LLMJudge(LLMJudgeConfig(name="j", model="openai/fake", api_base=srv.url + "/v1",
                                        api_key_env="JUDGE_A_KEY", mode="tools", max_retries=8,
                                        input_cost_per_token=0, output_cost_per_token=0), rubric)
        judge.backoff.base_s = 0.05

        async def run() -> list[Any]:
            return await asyncio.gather(*(judge.judge(c, d, render(rubric, d, c)) for c in cases))

        outs = asyncio.run(run())
        statuses = [e["status"] for e in srv.log]
    assert all(o.status == "ok" for o in outs), [o.error for o in outs if o.status != "ok"]
    assert statuses.count(429) >= 1
    pacing = judge.pacing
    assert pacing.auto is not None and pacing.auto.cuts >= 1
    report = judge.pacing_report()
    assert report is not None and report.cuts == pacing.auto.cuts
    # The lowest limit the run reached (recorded at each change), not the final one: this runs in real
    # time, and once the 429s stop, the additive increase may climb back to INITIAL_CONCURRENCY before
    # the last reply. Never cut, the limit only grows from INITIAL_CONCURRENCY and this fails.
    assert report.limit_min < INITIAL_CONCURRENCY <= report.limit_max
    assert report.rate_limited == statuses.count(429)
    assert report.requests == len(statuses)
    assert report.explain()  # no rpm, no tpm: the line still renders


@pytest.mark.parametrize("binding", ["rpm", "tpm", "concurrency", "provider 429s", "latency"])
@pytest.mark.parametrize("rpm", [None, 120.0])
def test_every_binding_explains_itself_with_or_without_limits(binding: Binding, rpm: float | None) -> None:
    report = Pacing(rpm=rpm, concurrency="auto").report()
    report.binding = binding
    report.mean_latency_s = None
    line = report.explain()
    assert line.startswith(f"{binding}: 0.0 requests/min accepted")
    assert ("of rpm 120" in line) == (rpm is not None)
