"""Provider batches (``batch: true`` on an LLM judge): which calls, submit, poll, collect, store.

One pass (:func:`run_batches`; ``score`` makes one, ``score --wait`` repeats it every
``batch_poll_s`` until no batch is left running):

1. **resolve**: a batch stored as ``intent`` without a batch id (the process stopped between recording
   it and storing the id the provider gave) is looked up at the provider by its key (the batch's
   ``metadata``): found, it is ``submitted``; not found, it was never created: ``abandoned``, and its
   calls are pending again.
2. **collect**: each ``submitted`` batch is retrieved. Still running: left alone. Over (``completed``,
   ``expired``, ``failed``, ``cancelled``): its output file and its error file are read; each answer is
   validated and stored as a live reply is (:meth:`LLMJudge.judge_completion`: instructor's parsing for
   the judge's mode, the rubric, the ungrounded re-ask; a reply that fails validation is asked again
   live), each error line is stored ``failed`` with its reason; calls with no line at all (an expired
   batch's unanswered ones) are stored nothing and go back to pending, the reason on the batch.
   Calls already stored ``ok`` are skipped, so a collection cut short is simply done again. A batch the
   provider ``failed`` (it refused the input: the same input would fail again) has its calls stored
   ``failed`` (``bad_request``, with the provider's errors) instead; the next ``score`` retries them.
3. **submit**: the batch judges' calls that are not stored ``ok``, not in a batch still running, and not
   failed during this pass's collection (a failure is retried by the next ``score``, as a live failure
   is) are written as the provider's JSONL (:mod:`consensus_eval.judges.batch_api`), cut under the provider's
   limits (50,000 requests, 200 MB). For each batch, in this order: the batch and its calls are stored as
   ``intent`` (key = a hash of its request hashes and how many batches the store has seen), the file is
   uploaded, the batch is created with the key in its ``metadata``, and its id is stored (``submitted``).

Kill -9 at any point loses no batch and submits none twice: a call is reserved by its batch's intent row
before the provider hears of the batch, an intent is only ever resolved by asking the provider, and a
batch is collected by request hash into a store that never overwrites an ``ok`` row.

Upload failures leave nothing at the provider: the batch is ``abandoned`` and its calls stored failed with
the reason. A failure creating the batch is ambiguous when it is a timeout, a 5xx or a dropped connection
(the provider may have created it): the intent stays and the next pass looks it up; a refusal (400, 401,
404, refused connection) abandons it and stores its calls failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from consensus_eval.domain.judgment import CallOutcome, ErrorKind
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.execute import Progress, ProgressHook, to_record, too_long
from consensus_eval.execution.plan import Call, distinct
from consensus_eval.execution.store import BatchRecord, Store
from consensus_eval.judges.batch_api import (
    OVER,
    BatchAPI,
    LineResult,
    batch_line,
    encode,
    line_failure,
    read_lines,
    split,
)
from consensus_eval.judges.llm import LLMJudge
from consensus_eval.judges.retry import HTTPFailure

#: TEST ONLY. The name of a step after which the process kills itself with SIGKILL (``intent``: a batch's
#: intent row stored; ``upload``: its file uploaded and the file id stored; ``create``: the batch created at
#: the provider, its id NOT stored yet; ``submitted``: its id stored; ``line``: the first reply of a
#: collected batch stored; ``collected``: a batch fully collected). Used by tests/test_batch.py to check
#: that a kill at each step loses no batch and submits none twice. Never set it in real use.
KILL_ENV = "CONSENSUS_EVAL_TEST_KILL_AFTER"
#: seconds before an intent was recorded from which the provider's list is searched for its batch (clock skew)
LOOKUP_MARGIN_S = 3600.0
#: replies of a collected batch validated at once (those asked again live run side by side, under the judge's pacing)
COLLECT_CHUNK = 256
#: batch creation failures that prove no batch was created (the provider refused, or was never reached)
_NOT_CREATED: frozenset[ErrorKind] = frozenset({"bad_request", "authentication", "not_found", "connection_refused"})


@dataclass
class BatchReport:
    """What the batch pass did, for the run's summary: the batches still running at the provider when it
    returned (``pending``: their calls are not stored; rerun ``score`` to collect), and one line per event
    (submitted, collected, ended without every reply, failed to submit) in ``notes``."""

    pending: list[BatchRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _kill_point(step: str) -> None:
    """TEST ONLY (:data:`KILL_ENV`): die here, as a kill -9 would, when the test asks for this step."""
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def batch_key(request_hashes: Sequence[str], seen: int) -> str:
    """Our name of a batch: a hash of its calls' request hashes and of ``seen`` (how many batches the store
    holds already, so that the same calls resubmitted after an expiry get a new name)."""
    blob = "\n".join(sorted(request_hashes)) + f"\n#{seen}"
    return "ce-" + hashlib.sha256(blob.encode()).hexdigest()[:40]


async def run_batches(calls: Sequence[Call], judges: Sequence[LLMJudge], rubric: Rubric, store: Store, *,
                      progress: Progress, wait: bool = False, stop: asyncio.Event | None = None,
                      on_progress: ProgressHook | None = None, poll_s: float | None = None) -> BatchReport:
    """Resolve, collect and submit the batch judges' ``calls`` (the module's docstring); with ``wait``,
    again every ``poll_s`` seconds (default: the smallest ``batch_poll_s`` of the judges) until no batch is
    running or ``stop`` is set. ``progress`` counts the calls collected and resumed."""
    report = BatchReport()
    by_judge = {j.config.name: j for j in judges}
    mine = [c for c in distinct(calls) if c.planned.judge in by_judge]   # a shared request is sent once
    done = store.done_hashes()
    progress.total += len(mine)
    progress.skipped += sum(c.planned.request_hash in done for c in mine)
    if on_progress:
        on_progress(progress)
    by_hash = {c.planned.request_hash: c for c in mine}
    failed_now: set[str] = set()
    interval = poll_s if poll_s is not None else min((j.config.batch_poll_s for j in judges), default=30.0)
    lock = _FolderLock(store.path.with_name(LOCK_NAME))
    while True:
        if not await lock.wait(stop, report):
            report.pending = [b for b in store.batches(active_only=True) if b.judge in by_judge]
            progress.interrupted = True
            return report
        try:
            await _resolve(store, by_judge, report)
            await _collect(store, by_judge, by_hash, rubric, progress, failed_now, report, on_progress)
            await _submit(store, by_judge, mine, progress, failed_now, report, on_progress)
        finally:
            lock.release()
        running = [b for b in store.batches(active_only=True) if b.judge in by_judge]
        if not wait or not running or (stop is not None and stop.is_set()):
            report.pending = running
            return report
        if stop is None:
            await asyncio.sleep(interval)
            continue
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            continue
        report.pending = running
        progress.interrupted = True
        return report


#: the lock file beside the store that one process at a time holds during a pass (resolve, collect, submit):
#: an intent another live process is still creating must not be taken for a dead process's
LOCK_NAME = "results.sqlite.batch-lock"
#: seconds between two tries of a lock another process holds
LOCK_RETRY_S = 0.2


class _FolderLock:
    """An exclusive ``flock`` on a file beside the store, held for one pass; the system drops it when the
    process dies (a kill -9 included). Where ``fcntl`` does not exist (Windows) it always succeeds: one
    process per folder is then the rule."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> bool:
        if self._fh is not None:
            return True
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return True
        fh = open(self.path, "a+")  # noqa: SIM115 - held open as long as the lock
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return False
        self._fh = fh
        return True

    async def wait(self, stop: asyncio.Event | None, report: BatchReport) -> bool:
        """Take the lock, waiting while another process holds it (its pass takes seconds: a ``--wait`` loop
        holds it only during a pass); False when ``stop`` is set first."""
        while not self.acquire():
            if not any(n.startswith("waited for another") for n in report.notes):
                report.notes.append("waited for another consensus-eval process to finish its pass over this "
                                    "folder's batches")
            if stop is not None and stop.is_set():
                return False
            await asyncio.sleep(LOCK_RETRY_S)
        return True

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the file drops its flock
            self._fh = None


async def _resolve(store: Store, judges: dict[str, LLMJudge], report: BatchReport) -> None:
    for b in store.batches(active_only=True):
        if b.state != "intent" or b.judge not in judges:
            continue
        if b.batch_id is not None:  # id and state are stored together; kept for a store written otherwise
            store.update_batch(b.key, state="submitted")
            continue
        try:
            found = await BatchAPI(judges[b.judge]).find(b.key, since=b.created_at - LOOKUP_MARGIN_S)
        except HTTPFailure as e:
            report.notes.append(f"{b.judge}: batch {b.key} could not be looked up at the provider ({e}); "
                                "it stays reserved until it is found or known never to have been created")
            continue
        if found is not None:
            store.update_batch(b.key, state="submitted", batch_id=found)
            report.notes.append(f"{b.judge}: batch {found} ({b.n_calls} calls) found at the provider by its key")
        else:
            store.update_batch(b.key, state="abandoned",
                               reason="never created at the provider (the process stopped before); calls pending again")
            report.notes.append(f"{b.judge}: batch {b.key} was never created at the provider; "
                                f"its {b.n_calls} call(s) are pending again")


async def _collect(store: Store, judges: dict[str, LLMJudge], by_hash: dict[str, Call], rubric: Rubric,
                   progress: Progress, failed_now: set[str], report: BatchReport,
                   on_progress: ProgressHook | None) -> None:
    for b in store.batches(active_only=True):
        if b.state != "submitted" or b.judge not in judges or b.batch_id is None:
            continue
        judge = judges[b.judge]
        api = BatchAPI(judge)
        try:
            status = await api.retrieve(b.batch_id)
            if status.status not in OVER:
                if status.status != b.provider_status:
                    store.update_batch(b.key, provider_status=status.status)
                continue
            files = [f for f in (status.output_file_id, status.error_file_id) if f]
            contents = [await api.content(f) for f in files]
        except HTTPFailure as e:
            report.notes.append(f"{b.judge}: batch {b.batch_id}: {e}; collected on a later pass")
            continue
        done = store.done_hashes()
        answered: set[str] = set()
        todo: list[tuple[Call, LineResult]] = []
        for data in contents:
            for line in read_lines(data):
                call = by_hash.get(line.custom_id)
                if call is None or line.custom_id in answered:
                    continue  # not a call of this plan (another config's), or a line twice
                answered.add(line.custom_id)
                if line.custom_id not in done:
                    todo.append((call, line))
        counts = await _store_replies(todo, judge, rubric, store, progress, failed_now, on_progress)
        n_ok, n_failed = counts["ok"], counts["failed"]
        unanswered = [h for h in store.batch_calls(b.key) if h not in answered and h not in done]
        reason = None
        if status.status == "failed":  # the provider refused the batch (its input): the same input would fail again
            reason = (f"provider status failed ({status.errors or 'no reason given'}): {len(unanswered)} of "
                      f"{b.n_calls} call(s) stored failed; the next `score` submits them again")
            for h in unanswered:
                if h in by_hash:
                    failure = CallOutcome(
                        status="failed", error_kind="bad_request", model=judge.config.model, attempts=1,
                        error=judge.scrub(f"batch {b.batch_id} failed at the provider: "
                                           f"{status.errors or 'no reason given'}"))
                    store.record(to_record(by_hash[h], failure, None))
                    failed_now.add(h)
                    n_failed += 1
                    progress.count(judge.config.name, failure)
        elif status.status != "completed" or unanswered:
            reason = (f"provider status {status.status}" + (f" ({status.errors})" if status.errors else "")
                      + f": {len(unanswered)} of {b.n_calls} call(s) unanswered, pending again")
        state = "collected" if status.status == "completed" else status.status
        store.update_batch(b.key, state=state, provider_status=status.status, output_file_id=status.output_file_id,
                           error_file_id=status.error_file_id, reason=reason)
        _kill_point("collected")
        report.notes.append(f"{b.judge}: batch {b.batch_id} {status.status}: {n_ok} ok, {n_failed} failed"
                            + (f", {len(unanswered)} unanswered (pending again)"
                               if unanswered and status.status != "failed" else "")
                            + (f" ({status.errors})" if status.errors else ""))


async def _store_replies(todo: list[tuple[Call, LineResult]], judge: LLMJudge, rubric: Rubric, store: Store,
                         progress: Progress, failed_now: set[str], on_progress: ProgressHook | None) -> Counter[str]:
    """Validate and store a batch's lines (each call's reply, or its error); how many ended ``ok`` / ``failed``.
    Side by side: a reply that fails validation is asked again live, paced by the judge like any call."""
    counts = Counter[str]()

    async def one(call: Call, line: LineResult) -> None:
        if line.ok:
            assert line.body is not None
            outcome = await judge.judge_completion(call.case, rubric.dimension(call.planned.dimension),
                                                   call.messages, call.planned.run, line.body)
        else:
            kind, error = line_failure(line)
            outcome = CallOutcome(status="failed", error_kind=kind, error=judge.scrub(error),  # type: ignore[arg-type]
                                  model=judge.config.model, attempts=1)
        store.record(to_record(call, outcome, None))
        if outcome.status == "failed":
            failed_now.add(call.planned.request_hash)
        counts[outcome.status] += 1
        progress.count(judge.config.name, outcome)
        if on_progress:
            on_progress(progress)
        if sum(counts.values()) == 1:
            _kill_point("line")

    for start in range(0, len(todo), COLLECT_CHUNK):
        await asyncio.gather(*(one(c, x) for c, x in todo[start:start + COLLECT_CHUNK]))
    return counts


async def _submit(store: Store, judges: dict[str, LLMJudge], calls: Sequence[Call], progress: Progress,
                  failed_now: set[str], report: BatchReport, on_progress: ProgressHook | None) -> None:
    done, reserved = store.done_hashes(), store.batched_hashes()
    for name, judge in judges.items():
        pending = [c for c in calls if c.planned.judge == name and c.planned.request_hash not in done
                   and c.planned.request_hash not in reserved and c.planned.request_hash not in failed_now]
        lines: list[tuple[str, bytes]] = []
        for c in pending:
            refused = too_long(judge, c)
            if refused is not None:  # not sent, as live
                store.record(to_record(c, refused, None))
                failed_now.add(c.planned.request_hash)
                progress.count(judge.config.name, refused)
                continue
            h = c.planned.request_hash
            lines.append((h, encode(batch_line(judge, c.messages, c.planned.dimension, c.planned.run, h, c.case))))
        for chunk in split(lines):
            await _submit_one(store, judge, chunk, report, failed_now, calls, progress)
        if on_progress:
            on_progress(progress)


async def _submit_one(store: Store, judge: LLMJudge, chunk: list[tuple[str, bytes]], report: BatchReport,
                      failed_now: set[str], calls: Sequence[Call], progress: Progress) -> None:
    name = judge.config.name
    key = batch_key([h for h, _ in chunk], len(store.batches()))
    hashes = store.add_batch_intent(key, name, [h for h, _ in chunk])
    if not hashes:  # reserved meanwhile by another process scoring into the same folder
        return
    _kill_point("intent")
    reserved = set(hashes)
    api = BatchAPI(judge)
    try:
        file_id = await api.upload(b"".join(line for h, line in chunk if h in reserved), f"{key}.jsonl")
    except HTTPFailure as e:
        _abandon(store, judge, key, hashes, e, calls, failed_now, progress, report, "uploading its file")
        return
    store.update_batch(key, input_file_id=file_id)
    _kill_point("upload")
    try:
        batch_id = await api.create(file_id, key)
    except HTTPFailure as e:
        if e.kind in _NOT_CREATED:
            _abandon(store, judge, key, hashes, e, calls, failed_now, progress, report, "creating it")
        else:  # the provider may have created it: the next pass looks it up by its key
            store.update_batch(key, reason=f"creation not confirmed: {e}")
            report.notes.append(f"{name}: batch {key} ({len(hashes)} calls): creation not confirmed ({e}); the next "
                                "`score` looks it up at the provider before submitting anything again")
        return
    _kill_point("create")
    store.update_batch(key, state="submitted", batch_id=batch_id, provider_status="validating")
    _kill_point("submitted")
    report.notes.append(f"{name}: submitted batch {batch_id} ({len(hashes)} calls)")


def _abandon(store: Store, judge: LLMJudge, key: str, hashes: list[str], error: HTTPFailure, calls: Sequence[Call],
             failed_now: set[str], progress: Progress, report: BatchReport, what: str) -> None:
    """A batch that never reached the provider: ``abandoned``, its calls stored failed with the reason."""
    reason = judge.scrub(f"batch not submitted, failed {what}: {error}")
    store.update_batch(key, state="abandoned", reason=reason)
    wanted = set(hashes)
    for c in calls:
        if c.planned.request_hash in wanted:
            failure = CallOutcome(status="failed", error_kind=error.kind, error=reason, model=judge.config.model,
                                  attempts=0)
            store.record(to_record(c, failure, None))
            failed_now.add(c.planned.request_hash)
            progress.count(judge.config.name, failure)
    report.notes.append(f"{judge.config.name}: {reason} ({len(hashes)} calls stored failed)")
