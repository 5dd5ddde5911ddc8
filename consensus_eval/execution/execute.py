"""Run the planned calls concurrently into the store.

Each judge has its own pool of workers (``config.max_workers``: its ``concurrency``, or the cap of
``concurrency: auto``; the judge's own pacing admits its HTTP attempts under the in-flight limit, ``rpm``
and ``tpm``), so a slow or failing judge never stalls the others. Every outcome is stored as it lands
(:class:`Recorder`: the outcomes that land together are committed in one transaction); calls whose judgment
is already stored are not made again.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.plan import Call, distinct
from consensus_eval.execution.store import BatchRecord, CallRecord, Store
from consensus_eval.judges.base import CallOutcome, Judge, Paced, Pooled, WholeCase
from consensus_eval.judges.pacing import PacingReport


@dataclass
class Progress:
    """Counts of a run, reported as calls land (done / total, failures, cost, ETA)."""

    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    cost: float = 0.0
    started: float = field(default_factory=time.monotonic)
    by_judge: Counter[str] = field(default_factory=Counter)
    #: the run was stopped (``stop`` was set) before every call was made
    interrupted: bool = False
    #: per judge that paces its requests (LLM judges), what limited it in this run (set at the end)
    pacing: dict[str, PacingReport] = field(default_factory=dict)
    #: rounds of a plan that grows (adaptive runs, a cascade: :mod:`consensus_eval.execution.adaptive`);
    #: ``total`` grows with each round. 1 for a fixed plan.
    rounds: int = 1
    #: where each round's calls start in the plan as stored (plan positions; ``[0]`` for a fixed plan): what a
    #: merge of shards needs to order the calls of a plan that grows as one process would
    round_starts: list[int] = field(default_factory=lambda: [0])
    #: provider batches (``batch: true`` judges) still running when the run returned: their calls are not
    #: stored yet (rerun ``score`` or ``score --wait`` to collect them); empty when no batch is pending
    batches: list[BatchRecord] = field(default_factory=list)
    #: what the batch pass did, one line per event (submitted, collected, expired, could not submit)
    batch_notes: list[str] = field(default_factory=list)

    def count(self, judge: str, outcome: CallOutcome) -> None:
        """Count one call's stored outcome (done, failed, cost, per judge)."""
        self.done += 1
        self.failed += outcome.status == "failed"
        self.cost += outcome.cost or 0.0
        self.by_judge[judge] += 1

    def eta_s(self) -> float | None:
        if not self.done:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.skipped - self.done)


ProgressHook = Callable[[Progress], None]


async def execute(
    calls: Sequence[Call], judges: Sequence[Judge], rubric: Rubric, store: Store,
    on_progress: ProgressHook | None = None, stop: asyncio.Event | None = None,
    progress: Progress | None = None,
) -> Progress:
    """Run the calls not yet stored, each judge with its own worker pool; store each outcome.

    Setting ``stop`` ends the run at once: calls in flight are cancelled (nothing is stored for
    them, so a resumed run makes them again), no new call starts, and the progress says
    ``interrupted``. Every outcome stored before that stays stored. ``progress``: the counts of the
    earlier rounds of a plan that grows, continued (these calls are added to its ``total``). Calls that
    cases with the same content share are made once (:func:`~consensus_eval.execution.plan.distinct`).
    """
    calls = distinct(calls)
    done = store.done_hashes()
    todo: dict[str, list[Call]] = {j.config.name: [] for j in judges}
    for c in calls:
        if c.planned.request_hash not in done:
            todo[c.planned.judge].append(c)
    skipped = len(calls) - sum(map(len, todo.values()))
    for judge in judges:  # a judge answering several calls with one request (call: per_case) shares it among these
        if isinstance(judge, WholeCase):
            judge.expect([(c.planned.case_id, c.planned.run, c.planned.dimension) for c in todo[judge.config.name]])
    if progress is None:
        progress = Progress(total=len(calls), skipped=skipped)
    else:
        progress.total += len(calls)
        progress.skipped += skipped
    if on_progress:
        on_progress(progress)

    recorder = Recorder(store)

    async def worker(judge: Judge, queue: asyncio.Queue[Call]) -> None:
        while True:
            try:
                call = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            start = time.monotonic()
            outcome = await _judge_safely(judge, call, rubric)
            recorder.add(to_record(call, outcome, time.monotonic() - start, landed=True), judge.deterministic)
            progress.count(judge.config.name, outcome)
            if on_progress:
                on_progress(progress)

    tasks = []
    for judge in judges:
        queue: asyncio.Queue[Call] = asyncio.Queue()
        for c in todo[judge.config.name]:
            queue.put_nowait(c)
        # a worker waits for its call's request: with one request per case (call: per_case), a case's calls
        # wait together, so as many workers per request slot as the calls one request answers
        per_request = judge.calls_per_request if isinstance(judge, WholeCase) else 1
        n_workers = min(judge.config.max_workers * per_request, queue.qsize())
        tasks += [asyncio.create_task(worker(judge, queue)) for _ in range(n_workers)]
    if not tasks:
        return progress
    pooled = [j for j in judges if isinstance(j, Pooled) and todo[j.config.name]]
    try:
        for judge in pooled:  # a judge with a pool of its own (the rules judge's processes on a large run)
            judge.open([c.case for c in todo[judge.config.name]])
        await _until_done_or_stopped(asyncio.gather(*tasks), stop, progress)
    finally:
        for judge in pooled:
            await judge.close()
        recorder.flush()
        for judge in judges:
            pacing = judge.pacing_report() if isinstance(judge, Paced) else None
            if pacing is not None:
                progress.pacing[judge.config.name] = pacing
    return progress


async def _until_done_or_stopped(work: asyncio.Future[Any], stop: asyncio.Event | None, progress: Progress) -> None:
    if stop is None:
        await work
        return
    stopper = asyncio.create_task(stop.wait())
    waiters: list[asyncio.Future[Any]] = [work, stopper]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if not work.done():
        progress.interrupted = True
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
    stopper.cancel()


def too_long(judge: Judge, call: Call) -> CallOutcome | None:
    """The ``failed`` outcome of a call whose case is over the judge's ``max_case_chars`` (not sent), else None."""
    limit = judge.max_case_chars
    if limit is not None and call.case.size > limit:
        return CallOutcome(status="failed", error_kind="record_too_long",
                           error=f"case of {call.case.size:,} characters (record + conversation) is over judge "
                                 f"{judge.config.name!r}'s maximum of {limit:,}; not sent")
    return None


async def _judge_safely(judge: Judge, call: Call, rubric: Rubric) -> CallOutcome:
    refused = too_long(judge, call)
    if refused is not None:
        return refused
    try:
        return await judge.judge(call.case, rubric.dimension(call.planned.dimension), call.messages, call.planned.run)
    except Exception as e:  # noqa: BLE001 - a judge bug must not take the run down: record it as failed
        return CallOutcome(status="failed", error_kind="local", error=f"{type(e).__name__}: {e}")


def to_record(call: Call, outcome: CallOutcome, latency_s: float | None, *, landed: bool = False) -> CallRecord:
    """What the store keeps of a call's outcome (``latency_s`` None: not timed, a batch line; ``landed``: its
    ``finished_at`` is now, else the time it is stored). The outcome's fields are taken as they are (its
    judgment was validated when the outcome was made)."""
    p = call.planned
    return CallRecord(
        request_hash=p.request_hash, case_id=p.case_id, dimension=p.dimension, judge=p.judge, run=p.run,
        latency_s=latency_s, finished_at=time.time() if landed else 0.0,
        **{name: getattr(outcome, name) for name in CallOutcome.model_fields},
    )


class Recorder:
    """Stores the outcomes of :func:`execute` as they land, few transactions for many calls.

    An outcome of a judge that costs something to ask again (an LLM judge) is committed with the others that
    land in the same turn of the event loop, before any other work: a kill loses at most the calls in flight,
    as when each was committed alone. A deterministic judge's outcomes (the rules judge: free and fast to make
    again, and committing each alone cost it more than judging) are committed every :attr:`EVERY_S` seconds
    or :attr:`MAX_ROWS` outcomes. :meth:`flush` commits what is left (the run's end, a stop)."""

    #: the longest a deterministic judge's outcome waits to be committed, seconds
    EVERY_S = 0.5
    #: the most outcomes committed in one transaction
    MAX_ROWS = 1000

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rows: list[CallRecord] = []
        self._scheduled: asyncio.Handle | None = None
        #: the scheduled commit is at the end of this turn of the loop (a costly call is waiting)
        self._soon = False
        #: what a scheduled commit raised (a full disk): raised to the next worker that lands a call
        self._error: Exception | None = None

    def add(self, rec: CallRecord, deterministic: bool) -> None:
        """Take ``rec`` to commit; ``deterministic``: it is a deterministic judge's (may wait a little).
        Raises what a scheduled commit raised (the outcomes it held are kept, to commit again)."""
        if self._error is not None:
            raise self._error
        self.rows.append(rec)
        if len(self.rows) >= self.MAX_ROWS:
            self.flush()
        elif not deterministic and not self._soon:
            if self._scheduled is not None:
                self._scheduled.cancel()
            self._scheduled, self._soon = asyncio.get_running_loop().call_soon(self._flush_scheduled), True
        elif self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_later(self.EVERY_S, self._flush_scheduled)

    def flush(self) -> None:
        """Commit every outcome taken and not committed yet (one transaction); on failure they are kept."""
        if self._scheduled is not None:
            self._scheduled.cancel()
        self._scheduled, self._soon, self._error = None, False, None
        rows, self.rows = self.rows, []
        if rows:
            try:
                self.store.record_many(rows)
            except BaseException:
                self.rows = rows + self.rows
                raise

    def _flush_scheduled(self) -> None:
        try:
            self.flush()
        except Exception as e:  # noqa: BLE001 - raised to the workers (add) and by the last flush
            self._error = e

