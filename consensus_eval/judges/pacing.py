"""Pacing of one judge's HTTP attempts: an even request rate (``rpm``), a token budget (``tpm``) and
an in-flight limit (``concurrency``: a number, or ``auto``), all event-driven.

Every attempt (first ask, re-ask, retry) passes :meth:`Pacing.acquire` before it is sent and
:meth:`Pacing.release` when its reply (or failure) is in. In that order it waits for:

1. a **slot** under the in-flight limit (:class:`Gate`, FIFO);
2. its turn under ``rpm`` (:class:`Spacer`): one release every ``60 / rpm`` s, never two closer, so no
   window of any length (a second, an exact minute) sees more than ``ceil(window x rpm / 60)``;
3. its turn under ``tpm`` (a :class:`Spacer` whose unit is a token): after a request charged ``n``
   tokens the next may go ``n x 60 / tpm`` s later. The charge is the request's *estimated prompt
   tokens*; when the reply is in, the difference to its *actual* usage (prompt + completion tokens)
   moves the next release later (or earlier); a 429 is refunded (nothing was processed); any other
   failure keeps its charge (the provider may have processed it). So the tokens sent in any window of
   ``W`` s stay within ``tpm x W / 60`` plus one request's worth, and the estimate's error is paid
   back on the following requests.

No waiter polls: each sleeps on a future, woken by the releaser or by one ``loop.call_at`` timer per
spacer (one wake-up per release). A waiter cancelled while waiting leaves the queue; one cancelled
after it was released gives its slot/turn back to the next in line.

``concurrency: auto`` (:class:`AutoLimit`) sets the in-flight limit to
``min(max_concurrency, Little's-law target, AIMD ceiling)``:

- **Little's law**: requests in flight = rate x latency. With a known rate (``rpm``, and ``tpm``
  divided by the mean tokens per request; the lower), the target is
  ``ceil(rate/s x mean latency x 1.25) + 1`` (25 % headroom: the extra slots wait at the spacer, which
  keeps the rate). The mean latency is that of the last 50 successful attempts; before the first
  one it is assumed to be :data:`ASSUMED_LATENCY_S` (so ``rpm 120`` starts at 26 in flight).
- **AIMD** for limits the provider does not publish: a 429 sets a ceiling of ``0.9 x`` the current
  limit (multiplicative decrease; at most once per round trip: a 429 of a request sent before the last
  cut is not news), and each success while the limit is in use raises it by ``1 / ceiling`` (additive:
  +1 per round trip of successes). A ceiling that climbs back to the Little's-law target is lifted.
  With no rate known there is no target: the ceiling starts at :data:`INITIAL_CONCURRENCY` and, until
  the first 429, grows by 1 per success (slow start: doubling per round trip). The decrease is 0.9, not
  TCP's 0.5: a provider's per-minute window reacts late (docs/design/pacing.md).
- **A learned limit** when no rate is known (providers count most hidden limits per minute, in a
  sliding or fixed window): the first 429 ends the slow start and sets the requests allowed per
  :data:`RATE_WINDOW_S` s to what the provider accepted (sent and not answered 429, :class:`SendLog`)
  in that window before the refused request was sent; in a run younger than the window, everything
  since the first request. From then on no request goes while the sends the provider accepted in the
  last window (plus a guard, :meth:`AutoLimit.guard_s`: a request reaches the provider a little after
  it is sent, later on a loaded machine)
  number what it allows, and requests are spread evenly at that rate (a :class:`Spacer`), so the slow
  start's burst, still in the provider's window, is not repeated. *A young run's window is tested*: a
  limit of n requests per minute learned after t < 60 s could also be a limit on requests in flight,
  or a shorter window. One request (the probe) goes a round trip after the first 429, past the window's
  count: answered 429, the minute is confirmed; accepted, the provider's window was not full, and the
  limit becomes n per t s (the window the run had seen) for a while. A later 429 with the window nearly
  full (:data:`WINDOW_FULL`) sets the limit again from what was accepted; one with the window not full
  is a limit on requests in flight: it cuts the ceiling instead (AIMD as above). The limit grows by
  :data:`RATE_STEP` of itself per round trip while the window is full to :data:`GROW_FULL`, only after
  a whole window without a 429, twice as fast after each further one (up to :data:`PROBE_MAX`): an
  exact limit probed at every round trip would cost a 429 every few round trips. Against a limit on
  requests in flight the learned limit and the ceiling both hold requests back: such a provider is
  served below its throughput, with few 429s. Why these rules, and what they give against simulated
  providers: docs/design/pacing.md.
- **cap**: ``max_concurrency`` (default 256 for an LLM judge): what one client keeps open.

:meth:`Pacing.report` says, per judge, what limited it (:class:`PacingReport`).
"""

from __future__ import annotations

import asyncio
import bisect
import math
from collections import deque
from dataclasses import dataclass
from typing import Literal

from consensus_eval._errors import UsageError

#: assumed latency of a request before the first reply has come in (Little's-law target of ``auto``)
ASSUMED_LATENCY_S = 10.0
#: headroom over Little's law (extra slots wait at the rate spacer, so the rate is not exceeded)
HEADROOM = 1.25
#: in-flight limit of ``auto`` when no rate (rpm, tpm) is known: AIMD starts here
INITIAL_CONCURRENCY = 8
#: multiplicative decrease of the in-flight ceiling on a 429 (after the first)
DECREASE = 0.9
#: the first cut, which ends the slow start (an overshoot of up to 2x)
FIRST_DECREASE = 0.5
#: latencies kept for the mean (Little's law)
LATENCY_WINDOW = 50
#: the window a provider is assumed to count its hidden limit over (requests per minute), in seconds
RATE_WINDOW_S = 60.0
#: a send stays in the learned window's count this much longer than the window: the provider counts a
#: request when it arrives, a little after it was sent, and a send that left the client's count before
#: the provider's would be refused. At least this for the slow start's sends (sent in a bunch: a busy
#: client writes the last of them late), at least :data:`PACED_GUARD_S` for those the learned limit spread
#: out; more when 429s come back later (:meth:`AutoLimit.guard_s`)
SEND_GUARD_S = 1.0
PACED_GUARD_S = 0.25
#: the most the guard grows to, how many of the last 429s' round trips set it, and for how long one counts
MAX_GUARD_S = 10.0
GUARD_SAMPLES = 16
GUARD_MEMORY_S = 300.0
#: the learned limit's spacer releases requests this much faster than the limit (the window's count holds
#: the limit): a burst sent before the first 429 is followed as it leaves the window, a few at a time
SPREAD = 2.0
#: a later 429 re-learns the limit when the last window held at least this share of what the learned
#: limit allows in it (the provider counts a window); otherwise it is an in-flight limit: the ceiling is cut
WINDOW_FULL = 0.9
#: the learned limit grows only while the last window holds at least this share of what it allows (it is
#: what holds requests back); above :data:`WINDOW_FULL`, so that it cannot grow past what a 429 re-learns
GROW_FULL = 0.98
#: increase of the learned limit while it holds requests back, after a whole window without a 429: this
#: share of it per round trip, doubled after each further window without one (up to :data:`PROBE_MAX`)
RATE_STEP = 0.01
PROBE_MAX = 16.0
#: the windows without a 429 before the learned limit grows double each time a 429 finds it where it was,
#: up to 2 ** SETTLED_MAX (a limit found again and again is probed less and less often)
SETTLED_MAX = 3

Binding = Literal["rpm", "tpm", "concurrency", "provider 429s", "latency"]


class Spacer:
    """Releases waiters one at a time, first come first served, at least ``cost x unit_s`` seconds
    after the previous release (``cost``: that previous release's cost; 1 for a request).

    ``per_minute`` units per minute: ``unit_s = 60 / per_minute``. No credit builds up while idle: a
    request after a pause goes at once and the next one ``unit_s`` later, so there is no burst.
    """

    def __init__(self, per_minute: float) -> None:
        if per_minute <= 0:
            raise UsageError("per_minute must be positive")
        self.unit_s = 60.0 / per_minute
        self._next = -math.inf  # earliest time of the next release (loop time)
        self._last_cost = 0.0  # cost of the last release (to give it back)
        self._waiters: deque[tuple[asyncio.Future[None], float]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        #: releases made (acquisitions that returned), timer callbacks run (wake-ups), seconds waited
        self.releases = 0
        self.wakeups = 0
        self.waited_s = 0.0
        self.waits = 0  # acquisitions that had to wait
        #: seconds during which at least one caller waited for its turn
        self.queued_s = 0.0
        self._live = 0  # callers waiting now
        self._since = 0.0

    @property
    def waiting(self) -> int:
        return self._live

    def _count(self, loop: asyncio.AbstractEventLoop, delta: int) -> None:
        now = loop.time()
        if self._live > 0:
            self.queued_s += now - self._since
        self._since = now
        self._live += delta

    async def acquire(self, cost: float = 1.0) -> float:
        """Wait for this caller's turn; returns the seconds waited."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._drop_done()
        if not self._waiters and now >= self._next:
            self._release(now, cost)
            self.releases += 1
            return 0.0
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append((fut, cost))
        self._count(loop, +1)
        self._arm(loop)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # released, then cancelled before it ran: give the turn back
                self._give_back(loop)
            else:
                self._count(loop, -1)
            raise
        waited = loop.time() - now
        self.releases += 1
        self.waits += 1
        self.waited_s += waited
        return waited

    def adjust(self, cost: float) -> None:
        """Move the next release by ``cost`` units (negative: earlier), e.g. an estimate corrected."""
        self._next += cost * self.unit_s
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._arm(asyncio.get_running_loop())

    def _release(self, now: float, cost: float) -> None:
        self._next = max(now, self._next) + cost * self.unit_s
        self._last_cost = cost

    def _drop_done(self) -> None:
        while self._waiters and self._waiters[0][0].done():  # cancelled waiters leave at the head
            self._waiters.popleft()

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is None and self._waiters:
            self._timer = loop.call_at(self._next, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self.wakeups += 1
        self._drop_done()
        if not self._waiters:
            return
        now = loop.time()
        if now < self._next - 1e-9:  # early (clock resolution): wait the rest
            self._arm(loop)
            return
        fut, cost = self._waiters.popleft()
        self._release(now, cost)
        self._count(loop, -1)
        fut.set_result(None)
        self._arm(loop)

    def _give_back(self, loop: asyncio.AbstractEventLoop) -> None:
        self._next -= self._last_cost * self.unit_s  # as if that release had not happened
        self._last_cost = 0.0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._arm(loop)


class Gate:
    """At most ``limit`` holders at a time; waiters served first come first served. ``limit`` may
    change at any time (a lower limit lets nobody new in until enough have left)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._waiting = 0  # waiters neither woken nor cancelled (counted, not recounted at every acquire)
        self.waited_s = 0.0
        self.waits = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    async def acquire(self) -> float:
        loop = asyncio.get_running_loop()
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()
        if not self._waiters and self.in_flight < self.limit:
            self.in_flight += 1
            return 0.0
        start = loop.time()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        self._waiting += 1
        try:
            await fut  # the releaser counted this holder in before waking it
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()
            else:
                self._waiting -= 1
            raise
        waited = loop.time() - start
        self.waits += 1
        self.waited_s += waited
        return waited

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def set_limit(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._wake()

    def _wake(self) -> None:
        while self.in_flight < self.limit and self._waiters:
            fut = self._waiters.popleft()
            if fut.done():
                continue
            self.in_flight += 1
            self._waiting -= 1
            fut.set_result(None)


class AutoLimit:
    """The in-flight limit of ``concurrency: auto`` (module docstring): Little's law, AIMD, cap."""

    def __init__(self, *, rpm: float | None, tpm: float | None, cap: int) -> None:
        self.rpm, self.tpm, self.cap = rpm, tpm, cap
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.tokens: deque[float] = deque(maxlen=LATENCY_WINDOW)  # tokens per request, as reported
        self.charged: deque[float] = deque(maxlen=LATENCY_WINDOW)  # tokens per request, as estimated
        known_rate = rpm is not None or tpm is not None
        #: AIMD ceiling (None: none); without a known rate AIMD alone sets the limit
        self.ceiling: float | None = None if known_rate else float(min(INITIAL_CONCURRENCY, cap))
        self.last_cut = -math.inf
        self.cuts = 0
        #: before the first 429 without a known rate: +1 per success (doubling per round trip)
        self.slow_start = not known_rate
        #: without a known rate, from the first 429 on: the requests the provider allows per
        #: :data:`RATE_WINDOW_S`, learned from the 429s (``learn`` is False once the young run's probe
        #: found no such window: AIMD alone from then on)
        self.learn = not known_rate
        self.allowed: float | None = None
        #: when the probe that tests a young run's learned window may go (None: no test pending)
        self.test_at: float | None = None
        #: (when, round trip) of the last 429s (answered at once: how late a request reaches the provider)
        self.refusal_trips: deque[tuple[float, float]] = deque(maxlen=GUARD_SAMPLES)
        #: when the first 429 ended the slow start (what was sent before went in its bunch)
        self.paced_from: float | None = None
        self._last_429 = -math.inf
        #: 429s in a row that found the learned limit where it was (a request or 2 %): each doubles the
        #: quiet windows before the limit grows again (:data:`SETTLED_MAX`)
        self._settled = 0

    def guard_s(self, now: float) -> float:
        """How much longer than the window a send stays in its count: :data:`SEND_GUARD_S` while the slow
        start's sends are the oldest in it (they went in a bunch, and a busy client writes a bunch's last
        requests late), :data:`PACED_GUARD_S` once they have left (the learned limit's sends go spread
        out), or the longest round trip of the last 429s (of the last :data:`GUARD_MEMORY_S`) when longer:
        a provider answers a 429 at once, so its round trip bounds how late a request reached it (the
        client's own delays, on a loaded machine); at most :data:`MAX_GUARD_S`."""
        floor = SEND_GUARD_S
        if self.paced_from is not None and now - RATE_WINDOW_S - SEND_GUARD_S >= self.paced_from:
            floor = PACED_GUARD_S
        recent = (trip for at, trip in self.refusal_trips if now - at <= GUARD_MEMORY_S)
        return min(MAX_GUARD_S, max(floor, max(recent, default=0.0)))

    @property
    def learned_rpm(self) -> float | None:
        """The learned limit in requests per minute (None: nothing learned yet)."""
        return None if self.allowed is None else self.allowed * 60 / RATE_WINDOW_S

    def allowed_now(self) -> int:
        """The accepted sends the learned limit allows in its window (at least 1)."""
        return max(1, int(self.allowed or 0))

    def rate_per_s(self) -> float | None:
        """The known rate limit in requests per second (the lower of rpm's and tpm's), or None."""
        rates = []
        if self.rpm is not None:
            rates.append(self.rpm / 60)
        if self.learned_rpm is not None:
            rates.append(self.learned_rpm * SPREAD / 60)  # the spacer's rate: slots to follow a burst leaving
        seen = self.tokens or self.charged  # reported usage once there is some, else the estimates
        if self.tpm is not None and seen:
            rates.append(self.tpm / 60 / max(1.0, sum(seen) / len(seen)))
        return min(rates) if rates else None

    def mean_latency(self) -> float:
        return sum(self.latencies) / len(self.latencies) if self.latencies else ASSUMED_LATENCY_S

    def target(self) -> int | None:
        """Little's law: what in flight reaches the known rate at the mean latency (None: no rate known)."""
        rate = self.rate_per_s()
        if rate is None:
            return None
        return math.ceil(rate * self.mean_latency() * HEADROOM) + 1

    def limit(self) -> int:
        target = self.target()
        limit = self.cap if target is None else min(self.cap, target)
        if self.ceiling is not None:
            limit = min(limit, int(self.ceiling))
        return max(1, limit)

    def on_success(self, latency_s: float, busy: bool, now: float = 0.0, paced: bool = False) -> None:
        """A reply: its latency; ``busy``: demand was at the in-flight limit when it went; ``paced``:
        the learned limit's window is full (it is what holds requests back)."""
        self.latencies.append(latency_s)
        if self.allowed is not None and paced:
            quiet = (now - self._last_429) / RATE_WINDOW_S  # windows since the last 429
            wait = 2 ** min(self._settled, SETTLED_MAX)  # windows, more once the limit was found again
            if quiet >= wait:
                # +RATE_STEP x probe of the limit per round trip's worth of successes (allowed per window
                # x latency / window of them), the probe doubling with each further quiet window
                probe = min(PROBE_MAX, 2.0 ** min(int(quiet - wait), 16))
                self.allowed += RATE_STEP * probe * RATE_WINDOW_S / self.mean_latency()
        if self.ceiling is not None and busy:
            step = 1.0 if self.slow_start else 1 / self.ceiling
            self.ceiling = min(float(self.cap), self.ceiling + step)
            target = self.target()
            if target is not None and self.ceiling >= target and self.test_at is None:
                # back at Little's law: the provider's limit is not the binding one (kept while a young run's
                # window is tested: if the probe finds none, the ceiling is what is left)
                self.ceiling = None

    def on_rate_limited(self, sent_at: float, now: float, accepted: int | None = None,
                        age_s: float | None = None) -> bool:
        """A 429: cut the ceiling, once per round trip. Returns whether it was cut.

        Without a known rate, ``accepted`` (requests sent and not answered 429 in the learned window
        before the refused one was sent) sets the learned limit, and ``age_s`` (the run's age when the
        refused one was sent) says whether the first 429 came before the window's end (module docstring)."""
        if sent_at < self.last_cut:
            return False
        if self.learn and accepted is not None:
            first = self.allowed is None
            # full: the window held about what the learned limit allows in it
            full = first or accepted >= WINDOW_FULL * (self.allowed or 0.0)
            if first or not full:  # the slow start's overshoot, or a limit on requests in flight
                self.ceiling = max(1.0, DECREASE * self.limit())
            if full:  # the provider's window is full: it accepts about what it accepted in it
                same = not first and abs(accepted - (self.allowed or 0.0)) <= max(1.0, 0.02 * (self.allowed or 0.0))
                self._settled = self._settled + 1 if same else 0
                self.allowed = max(1.0, float(accepted))
                if first:
                    self.paced_from = now
                if first and age_s is not None and age_s < RATE_WINDOW_S - self.mean_latency():
                    self.test_at = now + self.mean_latency()
            self._last_429 = now
        else:
            self.ceiling = max(1.0, (FIRST_DECREASE if self.slow_start else DECREASE) * self.limit())
        self.slow_start = False
        self.last_cut = now
        self.cuts += 1
        return True

    def on_probe(self, accepted: bool) -> None:
        """The young run's probe came back: ``accepted`` (not answered 429) or not (module docstring)."""
        self.test_at = None
        if accepted:  # not a window of a minute (a limit on requests in flight, a shorter window): AIMD alone
            self.learn = False
            self.allowed = None


class SendLog:
    """Send times of the last :data:`RATE_WINDOW_S` + :data:`MAX_GUARD_S` seconds (in order) and which
    of them were answered 429: how many the provider accepted in a window, and when the oldest of them
    leaves it."""

    def __init__(self) -> None:
        self._sent: list[float] = []
        self._start = 0  # entries before it are older than the window kept
        self._rejected: list[float] = []  # send times answered 429, sorted
        self.first: float | None = None

    def add(self, t: float) -> None:
        if self.first is None:
            self.first = t
        self._sent.append(t)
        self._trim(t)

    def reject(self, t: float) -> None:
        bisect.insort(self._rejected, t)

    def _trim(self, now: float) -> None:
        cut = now - RATE_WINDOW_S - MAX_GUARD_S
        self._start = bisect.bisect_right(self._sent, cut, lo=self._start)
        if self._start > 1024 and self._start * 2 > len(self._sent):
            del self._sent[:self._start]
            self._start = 0
        k = bisect.bisect_right(self._rejected, cut)
        if k:
            del self._rejected[:k]

    def accepted(self, now: float, window_s: float) -> int:
        """Sends in ``(now - window_s, now]`` not answered 429 (those in flight count: the provider
        counted them when they arrived)."""
        self._trim(now)
        lo = now - window_s
        sent = len(self._sent) - bisect.bisect_right(self._sent, lo, lo=self._start)
        return sent - (len(self._rejected) - bisect.bisect_right(self._rejected, lo))

    def accepted_before(self, t: float, window_s: float) -> int:
        """Sends in ``(t - window_s, t)`` not answered 429: what the provider had accepted in its window
        when a request sent at ``t`` arrived (sends after it, and it, are not counted)."""
        lo = t - window_s
        sent = bisect.bisect_left(self._sent, t, lo=self._start) - bisect.bisect_right(self._sent, lo, lo=self._start)
        return sent - (bisect.bisect_left(self._rejected, t) - bisect.bisect_right(self._rejected, lo))

    def free_at(self, now: float, window_s: float, limit: int) -> float:
        """When fewer than ``limit`` accepted sends will be in the window (``now`` if already)."""
        over = self.accepted(now, window_s) - limit + 1
        if over <= 0:
            return now
        lo = now - window_s
        i = bisect.bisect_right(self._sent, lo, lo=self._start)
        j = bisect.bisect_right(self._rejected, lo)
        while True:  # the over-th oldest accepted send in the window leaves it at its time + window
            t = self._sent[i]
            if j < len(self._rejected) and self._rejected[j] == t:
                j += 1
            else:
                over -= 1
                if over == 0:
                    return t + window_s
            i += 1


def _wake_up(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass
class Ticket:
    """One attempt's passage: when it was sent and what it was charged."""

    sent_at: float
    charged_tokens: float
    busy: bool  # the limit was in use (demand at the limit) when it went
    probe: bool = False  # the probe that tests a young run's learned window (AutoLimit.on_probe)


@dataclass
class PacingReport:
    """What limited a judge's requests during a run, with the figures to judge it by.

    ``requests``: HTTP attempts sent; ``rate_limited``: those answered 429; ``active_s``: seconds from
    the first attempt's request for a slot to the last attempt's end; ``achieved_rpm``: requests per
    minute over that time (those answered 429 included); ``accepted_rpm``: requests not answered 429 per
    minute over that time; ``achieved_tpm``: tokens (prompt + completion, as reported) per minute;
    ``rpm``/``tpm``: the configured limits (None: none); ``concurrency``: as configured (a number or
    ``auto``); ``limit_final``/``limit_min``/``limit_max``: the in-flight limit at the end and its range;
    ``mean_in_flight``: time-weighted mean of attempts in flight (slots held); ``mean_latency_s``: mean
    latency (sent to reply) of the successful attempts; ``cuts``: AIMD decreases after 429s;
    ``rpm_wait_share`` / ``tpm_wait_share``: share of the active time during which some attempt waited
    for its rpm / tpm turn; ``slot_wait_share``: share of attempts that waited for a slot;
    ``full_share``: share of the active time during which every slot was taken; ``ceiling_share``: share
    of the active time during which an AIMD ceiling (after a 429) held the limit below what the
    configured limits allow.

    ``binding`` (first match): ``provider 429s`` when the limit was cut after 429s and spent at least
    half the time below what the configured limits allow; ``rpm`` / ``tpm`` when some attempt waited for
    its turn there at least half the time; ``concurrency`` when every slot was taken at least half the
    time; else ``latency`` (no limit held requests back: the provider's latency, or too few calls to
    fill the limits, set the pace).
    """

    requests: int
    rate_limited: int
    active_s: float
    achieved_rpm: float
    achieved_tpm: float
    rpm: float | None
    tpm: float | None
    concurrency: int | str
    limit_final: int
    limit_min: int
    limit_max: int
    mean_in_flight: float
    mean_latency_s: float | None
    cuts: int
    rpm_wait_share: float
    tpm_wait_share: float
    slot_wait_share: float
    full_share: float
    ceiling_share: float
    binding: Binding
    #: without a known rate: the rate learned from the provider's 429s at the end (requests/min), or None
    learned_rpm: float | None = None
    accepted_rpm: float = 0.0

    def explain(self) -> str:
        """One line: the binding limit and the figures behind it (requests accepted per minute, and
        those answered 429 apart)."""
        rate = f"{self.accepted_rpm:.1f} requests/min accepted"
        if self.rate_limited:
            rate += f" + {self.achieved_rpm - self.accepted_rpm:.1f}/min answered 429"
        if self.rpm is not None:
            rate += f" of rpm {self.rpm:g}"
        if self.binding == "tpm":
            detail = f" ({self.achieved_tpm:,.0f} tokens/min of tpm {self.tpm or 0:,.0f})"
        elif self.binding == "concurrency":
            detail = f" with {self.limit_final} in flight (concurrency {self.concurrency})"
        elif self.binding == "provider 429s":
            learned = f", paced at {self.learned_rpm:.1f} requests/min" if self.learned_rpm is not None else ""
            detail = (f" ({self.rate_limited} of {self.requests} requests answered 429, limit cut {self.cuts} "
                      f"time(s), {self.limit_final} in flight at the end{learned})")
        elif self.binding == "latency":
            latency = f"{self.mean_latency_s:.1f} s" if self.mean_latency_s is not None else "unknown"
            detail = (f" (mean latency {latency}, {self.mean_in_flight:.1f} in flight on average, "
                      f"limit {self.limit_final})")
        else:
            detail = ""
        return f"{self.binding}: {rate}{detail}"


class Pacing:
    """One judge's pacing: a :class:`Gate` whose limit is fixed or :class:`AutoLimit`'s, and spacers
    for ``rpm`` and ``tpm``. Use::

        ticket = await pacing.acquire(estimated_prompt_tokens)
        ... send ...
        pacing.release(ticket, latency_s=..., tokens=actual_total_tokens)   # or rate_limited=True / failed=True
    """

    def __init__(self, *, rpm: float | None = None, tpm: float | None = None,
                 concurrency: int | Literal["auto"] = "auto", max_concurrency: int = 256) -> None:
        self.rpm, self.tpm, self.concurrency = rpm, tpm, concurrency
        self.auto = AutoLimit(rpm=rpm, tpm=tpm, cap=max_concurrency) if concurrency == "auto" else None
        first = self.auto.limit() if self.auto is not None else int(concurrency)
        self.gate = Gate(first)
        self.rpm_spacer = Spacer(rpm) if rpm is not None else None
        self.tpm_spacer = Spacer(tpm) if tpm is not None else None
        #: without a known rate: the sends of the last window (what the provider accepted), and once a
        #: 429 has taught a rate, the spacer that paces by it (one admitted at a time, under the lock)
        self.sends = SendLog() if self.auto is not None and self.auto.learn else None
        self.learned_spacer: Spacer | None = None
        self._learn_lock = asyncio.Lock()
        self._probing = False  # the young run's probe is out
        self._wake: asyncio.Future[None] | None = None  # the waiter at the learned window, to wake on news
        self.requests = 0
        self.rate_limited = 0
        self.tokens = 0
        self.limit_min = self.limit_max = first
        self._first: float | None = None
        self._last = 0.0
        self._area = 0.0  # integral of in-flight over time
        self._full = 0.0  # time with every slot taken
        self._under_ceiling = 0.0  # time with an AIMD ceiling below what the configured limits allow
        self._mark_t: float | None = None
        self._latency_sum = 0.0
        self._latency_n = 0

    async def acquire(self, tokens: float = 0.0) -> Ticket:
        """Wait for a slot, then the rpm turn, then the tpm turn (charged ``tokens``)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._first is None:
            self._first = now
        self._mark(now)
        demand = self.gate.in_flight + self.gate.waiting + 1
        await self.gate.acquire()
        probe = False
        try:
            if self.learned_spacer is not None:
                probe = await self._learned_turn(loop)
            if self.rpm_spacer is not None:
                await self.rpm_spacer.acquire()
            if self.tpm_spacer is not None:
                await self.tpm_spacer.acquire(tokens)
                if self.auto is not None:
                    self.auto.charged.append(tokens)
        except BaseException:
            self._leave(loop.time())
            raise
        self.requests += 1
        sent_at = loop.time()
        if self.sends is not None:
            self.sends.add(sent_at)
        return Ticket(sent_at=sent_at, charged_tokens=tokens if self.tpm_spacer is not None else 0.0,
                      busy=demand >= self.gate.limit, probe=probe)

    async def _learned_turn(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Under a learned limit: wait until the last window (and the guard) holds fewer
        accepted sends than it allows (so a burst sent before the first 429 is not repeated), then for
        the spacer's turn. Returns True for the young run's probe, which goes past both (module docstring)."""
        auto, sends, spacer = self.auto, self.sends, self.learned_spacer
        assert auto is not None and sends is not None and spacer is not None
        async with self._learn_lock:
            while True:
                now = loop.time()
                if auto.allowed is None:  # the probe found no window: nothing learned to wait for
                    return False
                at = sends.free_at(now, RATE_WINDOW_S + auto.guard_s(now), auto.allowed_now())
                if at <= now:
                    break
                if auto.test_at is not None and not self._probing:
                    if now >= auto.test_at:
                        self._probing = True
                        return True
                    at = min(at, auto.test_at)
                await self._sleep_until(loop, at)
            await spacer.acquire()
        return False

    def _wake_waiter(self) -> None:
        if self._wake is not None:
            _wake_up(self._wake)

    async def _sleep_until(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        """Sleep until ``at``, or until what was learned changes (:meth:`_update_limit` wakes it)."""
        wake: asyncio.Future[None] = loop.create_future()
        timer = loop.call_at(at + 1e-6, _wake_up, wake)
        self._wake = wake
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    def release(self, ticket: Ticket, *, tokens: int | None = None, rate_limited: bool = False) -> None:
        """The attempt is over: ``tokens`` it used (None: unknown), whether it was answered 429."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.tpm_spacer is not None:
            if rate_limited:
                self.tpm_spacer.adjust(-ticket.charged_tokens)  # nothing processed: refunded
            elif tokens is not None:
                self.tpm_spacer.adjust(tokens - ticket.charged_tokens)
                if self.auto is not None:
                    self.auto.tokens.append(tokens)
        if tokens is not None:
            self.tokens += tokens
        if ticket.probe and self.auto is not None:
            self._probing = False
            if rate_limited or tokens is not None:  # any other failure says nothing: probe again
                self.auto.on_probe(accepted=not rate_limited)
        if self.auto is not None and rate_limited:
            self._mark(now)
            if self.sends is not None and self.sends.first is not None:
                self.sends.reject(ticket.sent_at)
                if self.auto.allowed is not None and ticket.sent_at >= self.auto.last_cut and not ticket.probe:
                    # a request the learned limit let through (not the slow start's last ones, read late
                    # on a loaded machine, nor the probe, sent past the count on purpose): its round trip
                    # says how late requests reach the provider
                    self.auto.refusal_trips.append((now, now - ticket.sent_at))
                self.auto.on_rate_limited(ticket.sent_at, now,
                                          self.sends.accepted_before(ticket.sent_at, RATE_WINDOW_S),
                                          ticket.sent_at - self.sends.first)
            else:
                self.auto.on_rate_limited(ticket.sent_at, now)
        elif tokens is not None:
            self._latency_sum += now - ticket.sent_at
            self._latency_n += 1
            if self.auto is not None:
                paced = self._rate_full(now)
                self.auto.on_success(now - ticket.sent_at, ticket.busy, now, paced)
        if rate_limited:
            self.rate_limited += 1
        self._leave(now)

    def _rate_full(self, now: float) -> bool:
        """Whether the learned rate is what holds requests back: the last window holds nearly what it
        allows (:data:`GROW_FULL`). (Waiters at its spacer are no sign: requests come in bunches.)"""
        auto, sends = self.auto, self.sends
        if auto is None or sends is None or auto.allowed is None:
            return False
        return sends.accepted(now, RATE_WINDOW_S + auto.guard_s(now)) >= min(GROW_FULL * auto.allowed,
                                                                        auto.allowed_now() - 1)

    def _leave(self, now: float) -> None:
        self._mark(now)
        self.gate.release()
        self._last = now
        self._update_limit()

    def _update_limit(self) -> None:
        if self.auto is None:
            return
        learned = self.auto.learned_rpm
        if learned is None and self.learned_spacer is not None:  # the probe found no window: AIMD alone
            self.learned_spacer = None
            self._wake_waiter()
        elif learned is not None:
            learned *= SPREAD
            if self.learned_spacer is None:
                self.learned_spacer = Spacer(learned)
            elif self.learned_spacer.unit_s != 60.0 / learned:
                self.learned_spacer.unit_s = 60.0 / learned
                self._wake_waiter()
        limit = self.auto.limit()
        if limit != self.gate.limit:
            self.gate.set_limit(limit)
            self.limit_min = min(self.limit_min, limit)
            self.limit_max = max(self.limit_max, limit)

    def _mark(self, now: float) -> None:
        """Integrate in-flight, full and under-ceiling time up to ``now`` (called before each change)."""
        if self._mark_t is not None:
            dt = now - self._mark_t
            self._area += self.gate.in_flight * dt
            if self.gate.in_flight >= self.gate.limit:
                self._full += dt
            if self._held_down():
                self._under_ceiling += dt
        self._mark_t = now

    def _held_down(self) -> bool:
        """Whether 429s hold the limit below what the configured limits allow (an AIMD ceiling after a cut)."""
        auto = self.auto
        if auto is not None and auto.learned_rpm is not None:
            return True  # the rate the 429s taught paces the requests
        if auto is None or auto.ceiling is None or not auto.cuts:
            return False
        target = auto.target()
        return auto.ceiling < (auto.cap if target is None else min(auto.cap, target))

    def report(self) -> PacingReport:
        active = max(self._last - (self._first if self._first is not None else self._last), 1e-9)
        rpm_share = self.rpm_spacer.queued_s / active if self.rpm_spacer else 0.0
        tpm_share = self.tpm_spacer.queued_s / active if self.tpm_spacer else 0.0
        slot_share = self.gate.waits / self.requests if self.requests else 0.0
        full = self._full / active
        ceiling = self._under_ceiling / active
        cuts = self.auto.cuts if self.auto is not None else 0
        binding: Binding
        if cuts and ceiling >= 0.5:
            binding = "provider 429s"
        elif rpm_share >= 0.5:
            binding = "rpm"
        elif tpm_share >= 0.5:
            binding = "tpm"
        elif full >= 0.5:
            binding = "concurrency"
        else:
            binding = "latency"
        return PacingReport(
            requests=self.requests, rate_limited=self.rate_limited, active_s=active if self.requests else 0.0,
            achieved_rpm=self.requests / active * 60 if self.requests else 0.0,
            accepted_rpm=(self.requests - self.rate_limited) / active * 60 if self.requests else 0.0,
            achieved_tpm=self.tokens / active * 60 if self.requests else 0.0,
            rpm=self.rpm, tpm=self.tpm, concurrency=self.concurrency, limit_final=self.gate.limit,
            limit_min=self.limit_min, limit_max=self.limit_max,
            mean_in_flight=self._area / active if self.requests else 0.0,
            mean_latency_s=self._latency_sum / self._latency_n if self._latency_n else None, cuts=cuts,
            rpm_wait_share=rpm_share, tpm_wait_share=tpm_share, slot_wait_share=slot_share,
            full_share=full, ceiling_share=ceiling, binding=binding,
            learned_rpm=self.auto.learned_rpm if self.auto is not None else None)
