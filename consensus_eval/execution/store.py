"""The store: one SQLite file per output folder, the only state shared between stages.

It holds every call as it lands (request hash, case, dimension, judge, run, status, raw reply,
parsed judgment, tokens, cost, latency, attempts, error), and the context of the latest run (the
rubric, the config without secrets, the cases and the plan), so that ``report``, ``audit`` and
``reliability`` rebuild everything from it without calling a judge.

Resume: a call whose request hash has an ``ok`` row is never made again. Each row is committed as
it lands (WAL journal; the calls that land together in one transaction, :meth:`Store.record_many`), so a kill
loses at most the calls in flight (and the rules judge's last half second: free to make again;
:class:`consensus_eval.execution.execute.Recorder`).

Opened ``read_only`` (what ``report``, ``audit`` and ``reliability`` need), the store is an SQLite
``mode=ro`` connection: no journal mode, no pragma, no schema or meta write, so an output folder on
a read-only disk or shared without write permission can be read. (The WAL journal is used while a
run writes; the last writer to close turns it back into a single file, see :meth:`Store.close`.)

Human labels (schema 8): every reviewer's scores, verdicts on deductions, comments and added deductions, whoever
wrote them (a sheet imported by ``consensus-eval human import``, the review web app, the API), are kept as an
append-only history of events (table ``label_events``, :mod:`consensus_eval.execution.labels`); the labels
(:class:`HumanLabelRecord`, :meth:`Store.human_labels`) are derived from it, and nothing is updated in place.
Nothing a command rebuilds touches that history: ``score`` (a resume included) replaces the plan and adds calls,
``report`` / ``audit`` / ``reliability`` only read. :meth:`Store.write_labels` appends the events of one action in
one short transaction (what a click in the web app does), checked against the team's roles, the blind spot check,
the version the writer saw and its action id; :meth:`Store.replace_human_labels` writes what a re-imported sheet
changed (a re-import of the same sheet adds nothing). One process writes a run's data at a time: a store opened to
write holds the run's lock (:mod:`consensus_eval.execution.lock`; a team change runs beside the review server, each
write one transaction, and a label write checks its reviewer's membership and key: ``member_key``), and a store
that is there is checked whole (``PRAGMA quick_check``, read-only) before anything is written to it
(:func:`check_whole`), as it is before it is read; connections wait for each other (WAL journal, ``busy_timeout``).
A check reads every page (9 s for 1.7 GB, minutes for 17.5 GB), so it is made once per state of the file: a store
found whole, or closed by the writer that checked it, has the file's identity recorded beside it (:data:`CHECKED_NAME`:
device, inode, size, modification and change times, the header's change counter and page count), and an open that
finds the same identity, with no journal beside the store, does not read it all again. Anything that writes the file
from outside (a copy, an edit, a restore) changes its change time, so the next open checks it whole.

Spot checks and the team (schema 5): the ``spot_checks`` table holds the random sample drawn by
``audit --spot-check`` with each case's inclusion probability and its part (tuning or held out, schema 9;
:class:`SpotCheckRecord`), ``heldout_looks`` the comparisons made on the held-out part (schema 10,
:class:`HeldoutLook`). The ``reviewers`` table
names the team (:class:`ReviewerRecord`): each reviewer's personal link carries a secret key, of which only a
SHA-256 hash is stored; ``assignments`` says which reviewer reviews which case. The schema's versions and their
migrations: :mod:`consensus_eval.execution.migrations`.

Provider batches (schema 4): the ``batches`` table keeps each batch of a ``batch: true`` judge
(:class:`BatchRecord`: our key, the provider's id, its state and files) and ``batch_calls`` the request
hashes in it. An ``intent`` row is written, with its calls, before the provider is asked to create the
batch, so a kill at any point leaves a trace to look it up by (:mod:`consensus_eval.execution.batch`).

Every problem a user can meet (an output path that is a file, a folder that is not writable, a file
that is not a store, a store of a newer consensus-eval) is an :class:`InputError` saying so, never
an sqlite3 traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from consensus_eval._errors import InputError, StateError, UsageError
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.judgment import CallOutcome, ErrorKind
from consensus_eval.domain.stored import StoredJudgment, stored_judgment
from consensus_eval.domain.textio import RefusedJSON, loads_json
from consensus_eval.execution import labels as _labels
from consensus_eval.execution.labels import (  # the labels' types, where their users have always imported them
    CRITERION_VALUES,
    LABEL_KINDS,
    LABEL_ORIGINS,
    LABEL_PHASES,
    VERDICTS,
    Change,
    CriterionVerdictValue,
    HumanLabelRecord,
    LabelConflict,
    LabelEvent,
    LabelKind,
    LabelOrigin,
    LabelPhase,
    LabelRefused,
    Slot,
    Verdict,
    Written,
)
from consensus_eval.execution.lock import Hold, acquire, release
from consensus_eval.execution.migrations import SCHEMA_VERSION, check_version, in_memory_upgraded, upgrade, version_of

__all__ = [
    "BUSY_TIMEOUT_S",
    "CRITERION_VALUES",
    "LABEL_KINDS",
    "LABEL_ORIGINS",
    "LABEL_PHASES",
    "SCHEMA_VERSION",
    "STORE_NAME",
    "VERDICTS",
    "BatchRecord",
    "CallRecord",
    "Change",
    "CriterionVerdictValue",
    "HumanLabelRecord",
    "LabelConflict",
    "LabelEvent",
    "LabelKind",
    "LabelOrigin",
    "LabelPhase",
    "LabelRefused",
    "PlannedCall",
    "ReviewerRecord",
    "ReviewerRole",
    "Slot",
    "SpotCheckRecord",
    "Store",
    "StoredCall",
    "Verdict",
    "Written",
    "key_hash",
]


#: how long a writer waits for another writer's transaction before giving up (SQLite busy_timeout), seconds
BUSY_TIMEOUT_S = 30.0
#: the store's file name inside an output folder
STORE_NAME = "results.sqlite"
#: beside the store: the identity of the file when it was last known whole (module docstring, :func:`check_whole`)
CHECKED_NAME = f".{STORE_NAME}.checked"


class CallRecord(CallOutcome):
    """One call's outcome (:class:`CallOutcome`) as stored: which call it was, how long it took,
    when it landed. ``judgment`` is None unless ``status == 'ok'``."""

    request_hash: str
    case_id: str
    dimension: str
    judge: str
    run: int
    latency_s: float | None = None
    finished_at: float = 0.0


@dataclass(slots=True, frozen=True)
class StoredCall:
    """One stored call as read back (:meth:`Store.calls`): a plain read model of a :class:`CallRecord` (the same
    field names), built straight from its row, its judgment from its JSON
    (:class:`~consensus_eval.domain.stored.StoredJudgment`): what was stored was validated when written."""

    request_hash: str
    case_id: str
    dimension: str
    judge: str
    run: int
    status: Literal["ok", "failed"]
    judgment: StoredJudgment | None = None
    raw: str | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    attempts: int = 1
    latency_s: float | None = None
    finished_at: float = 0.0

    def to_record(self) -> CallRecord:
        """The same call as a :class:`CallRecord` (its judgment validated again): what :meth:`Store.record` takes."""
        values = {f: getattr(self, f) for f in _READ_COLUMNS}
        values["judgment"] = None if self.judgment is None else self.judgment.to_judgment()
        return CallRecord.model_validate(values)


#: a :class:`StoredCall` made from its fields' values, slot by slot (what :meth:`Store.calls` makes of every row)
_make_call = slots_maker(StoredCall)
#: a call's status as read, one string object each
_STATUS: dict[str, Literal["ok", "failed"]] = {"ok": "ok", "failed": "failed"}
#: the calls table's columns in :class:`StoredCall`'s field order (what :meth:`Store.calls` selects)
_READ_COLUMNS = [f for f in StoredCall.__dataclass_fields__]


def _loads_judgment(text: str) -> Any:
    """``json.loads(text)`` of a stored judgment, parsed by pydantic-core's JSON parser when it can (the same
    values: floats correctly rounded by both, tests/test_stored.py compares them; 0.85 -> 0.53 s CPU for the
    240,000 judgments of a 20,000 x 4 store). What it refuses (damaged JSON, an escaped lone surrogate, deep
    nesting) is parsed by ``json.loads``: its value, or its error, as before."""
    try:
        return from_json(text, cache_strings="keys")
    except ValueError:
        return json.loads(text)


@dataclass(frozen=True)
class PlannedCall:
    """One call the plan needs: a (case, dimension, judge, run) and its request hash."""

    request_hash: str
    case_id: str
    dimension: str
    judge: str
    run: int


_COLUMNS = list(CallRecord.model_fields)
#: a call stored again: an ``ok`` row is never overwritten
_UPSERT = ("ON CONFLICT(request_hash) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "request_hash") + " WHERE calls.status != 'ok'")
#: what :meth:`Store.record_many` runs for each call
_RECORD_SQL = f"INSERT INTO calls ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) {_UPSERT}"


def _column_value(rec: CallRecord, column: str, now: float) -> Any:
    """What the calls table stores in ``column`` for ``rec``: the judgment as its JSON, ``finished_at`` now
    when unset, any other field as it is (read straight from the record: no dump of the whole record)."""
    if column == "judgment":
        return rec.judgment.model_dump_json() if rec.judgment else None
    if column == "finished_at":
        return rec.finished_at or now
    return getattr(rec, column)

#: the two parts of a spot check (:attr:`SpotCheckRecord.part`)
SpotCheckPart = Literal["tuning", "heldout"]


class SpotCheckRecord(BaseModel):
    """One case of the random spot-check sample (table ``spot_checks``, schema 5; the medical_record rubric's 随机抽查).

    ``probability``: the case's inclusion probability under the design that drew it (n_h / N_h in its
    stratum), what inverse-probability weights are made of; ``stratum``: the stratum it was drawn in
    (``all`` without stratification, else e.g. ``system=scribe-a`` or ``band=60-70``); ``position``: its
    place in the draw (0-based); ``seed``: the seed of the draw; ``drawn_at``: when (Unix time); ``part``: the part
    of the sample the case is in (schema 9): ``tuning`` (prompts may be tuned on it, few-shot examples
    drawn from it) or ``heldout`` (what a prompt change is measured on); None for a sample drawn before the split."""

    case_id: str
    position: int
    probability: float
    stratum: str = "all"
    seed: int = 0
    drawn_at: float = 0.0
    part: SpotCheckPart | None = None


_SPOT_COLUMNS = list(SpotCheckRecord.model_fields)


class HeldoutLook(BaseModel):
    """One comparison of two versions on a spot check's held-out part (table ``heldout_looks``, schema 10):
    ``heldout`` names the held-out part (its seed and cases),
    ``version_a`` / ``version_b`` the two versions compared (what their judges were asked on it), ``run_a`` /
    ``run_b`` the folders compared, ``at`` when. ``look_id`` is made of the held-out part and the two versions, so
    the same comparison made again is the same look, and a look copied to another run (``human copy``) is one."""

    look_id: str
    heldout: str
    version_a: str
    version_b: str
    run_a: str
    run_b: str
    at: float = 0.0


_LOOK_COLUMNS = list(HeldoutLook.model_fields)

#: what a reviewer of the team may do: ``reviewer`` labels cases; ``adjudicator`` also settles the cases
#: two reviewers disagree on
ReviewerRole = Literal["reviewer", "adjudicator"]
REVIEWER_ROLES: tuple[ReviewerRole, ...] = ("reviewer", "adjudicator")


class ReviewerRecord(BaseModel):
    """One reviewer of the team (table ``reviewers``, schema 5): ``name`` (what their labels carry),
    ``role`` and when they were added. Their key is never stored, only its SHA-256 hash (``key_hash``)."""

    name: str
    role: ReviewerRole = "reviewer"
    key_hash: str
    created_at: float = 0.0


_REVIEWER_COLUMNS = list(ReviewerRecord.model_fields)


def key_hash(key: str) -> str:
    """The stored form of a reviewer's key: its SHA-256, hex (a key is 192 random bits: no salt or
    stretching is needed against guessing)."""
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()

#: where a provider batch is (table ``batches``): ``intent`` recorded before the provider was asked to
#: create it (its calls are reserved; ``batch_id`` unknown until created or found by its metadata),
#: ``submitted`` created at the provider, not collected yet; then one final state: ``collected`` (every
#: reply read and stored), ``expired`` / ``failed`` / ``cancelled`` (the provider ended it: its calls
#: without a reply went back to pending), ``abandoned`` (never created at the provider: its calls went back)
BatchState = Literal["intent", "submitted", "collected", "expired", "failed", "cancelled", "abandoned"]
#: the states whose calls are reserved (neither made live nor put in another batch)
ACTIVE_BATCH_STATES: tuple[BatchState, ...] = ("intent", "submitted")


class BatchRecord(BaseModel):
    """One provider batch of one judge as stored (table ``batches``; its calls in ``batch_calls``).

    ``key``: our name for it (a hash of its calls' request hashes), sent to the provider as the batch's
    ``metadata`` so that a batch created by a process killed before it stored ``batch_id`` is found again;
    ``state``: :data:`BatchState`; ``provider_status``: the provider's last word (``in_progress``,
    ``completed``, ``expired``...); ``n_calls``: calls in it; ``reason``: why it ended without every reply
    (or why creating it failed); ``created_at`` / ``updated_at``: Unix time, seconds."""

    key: str
    judge: str
    state: BatchState
    batch_id: str | None = None
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    provider_status: str | None = None
    n_calls: int
    reason: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


_BATCH_COLUMNS = list(BatchRecord.model_fields)


#: past every rowid and position (SQLite's integers are at most 2**63 - 1)
_NO_END = 2**63 - 1


class PlanOrderError(StateError):
    """The plan's calls cannot be read a few cases at a time (:meth:`Store.calls_in_plan_order`,
    :func:`~consensus_eval.execution.stored_run.read_stored_by_cases`): its rows are not in plan order, or a case's
    calls are not consecutive in it (a plan that grew by rounds). The reader that raises it has yielded part of
    the run; its caller reads the whole run instead."""


class Store:
    """SQLite store of calls, plan and run context for one output folder."""

    def __init__(self, path: str | Path, *, read_only: bool = False, _checked: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        #: one write transaction at a time on this connection (a web app may share one Store across threads)
        self._lock = threading.RLock()
        #: the calls table's columns as selected
        self._select = list(_READ_COLUMNS)
        #: opened to write: this process's hold on the run's lock (execution.lock), let go on close
        self._hold: Hold | None = None
        if read_only:
            self._db = self._connect_read_only(checked=_checked)
        else:
            self._folder_ready()
            hold = self._hold = acquire(self.path.parent)  # one writer per run: a second is refused, naming this
            try:
                if hold is not None and not hold.store_checked:  # a damaged store: refused before any write
                    check_whole(self.path)
                    hold.store_checked = True
                self._db = self._connect_read_write()
            except BaseException:
                if hold is not None:
                    release(hold)
                raise
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening

    def _folder_ready(self) -> None:
        folder = self.path.parent
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a folder; the store must be a file (results.sqlite)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise InputError(f"{folder}: the output folder is a file, not a folder; give --out a folder "
                             "(it is created if it does not exist)") from None
        except NotADirectoryError:
            raise InputError(f"{folder}: cannot create the output folder: part of the path is a file, "
                             "not a folder") from None
        except PermissionError:
            raise InputError(f"{folder}: cannot create the output folder: permission denied "
                             "(its parent folder is read-only or not yours)") from None
        except OSError as e:
            raise InputError(f"{folder}: cannot create the output folder: {e.strerror or e}") from None
        if not _writable(folder):
            raise InputError(f"{folder}: the output folder is read-only: the store ({STORE_NAME}) cannot be "
                             "written there; give --out a folder you can write to")

    def _connect_read_write(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                 timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and not {"calls", "plan", "meta"} & tables:
                db.close()
                raise InputError(f"{self.path}: not a consensus-eval store (an SQLite database with other "
                                 f"tables: {', '.join(sorted(tables)[:5])}); move it away or give another --out")
            db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            db.close()
            raise self._open_error(e) from None
        return db

    def another_reader(self) -> Store:
        """Another read-only connection to this store, not checked again (it was when this one was opened: 9 s for
        1.7 GB): what a forked process reads with, since a connection is never shared across a fork."""
        return Store(self.path, read_only=True, _checked=True)

    def _connect_read_only(self, *, checked: bool = False) -> sqlite3.Connection:
        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            if not checked:
                _check_once(db, self.path)   # a damaged store is refused, not read as if it were whole
            return db
        except sqlite3.OperationalError as e:
            # A WAL store in a folder that cannot be written: SQLite cannot create the -shm file a WAL
            # reader needs. Nothing can write the store there either (a writer needs the -wal file),
            # so it is read as an immutable file.
            if _writable(self.path.parent):
                raise self._open_error(e) from None
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        try:
            db = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            _quick_check(db, self.path)
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        return db

    def _open_error(self, e: sqlite3.Error) -> InputError:
        msg = str(e)
        if isinstance(e, sqlite3.DatabaseError) and "malformed" in msg:
            return _damaged(self.path, msg)
        if isinstance(e, sqlite3.DatabaseError) and "not a database" in msg:
            return InputError(f"{self.path}: not a consensus-eval store: the file is not an SQLite database or "
                              f"is damaged ({msg}); move it away and score again")
        if "readonly" in msg or "read-only" in msg:
            return InputError(f"{self.path}: the store is read-only (the file or its folder {self.path.parent} "
                              "cannot be written); copy the folder somewhere writable")
        return InputError(f"{self.path}: cannot open the store: {msg}")

    def _check_schema(self) -> None:
        """Check the store's version (:mod:`~consensus_eval.execution.migrations`): a new store is created at the
        current one, an older one upgraded in place (writable) or read through an upgraded copy in memory
        (read-only: nothing is written, and every reader sees the current schema); a newer one is refused."""
        try:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and not {"calls", "plan", "meta"} <= tables:
                raise InputError(f"{self.path}: not a consensus-eval store (an SQLite database without the "
                                 "calls, plan and meta tables)")
            if not tables and self.read_only:
                raise InputError(f"{self.path}: not a consensus-eval store (an empty SQLite database)")
            found = version_of(self._db) if tables else None
            check_version(found, self.path)
            if found == SCHEMA_VERSION:
                return
            try:
                if self.read_only:
                    self._db = in_memory_upgraded(self._db, found)
                else:
                    upgrade(self._db, found)
            except InputError as e:     # a step that found the store damaged (nothing was written)
                raise InputError(f"{self.path}: damaged store: {e}; move it away and score again") from None
        except sqlite3.Error as e:
            raise self._open_error(e) from None

    @classmethod
    def open_existing(cls, folder: str | Path, *, read_only: bool = False) -> Store:
        """Open ``folder/results.sqlite`` of a finished or interrupted run (no judge is called).

        ``read_only``: open it without writing anything (SQLite ``mode=ro``): what the commands that
        only read a run (``report``, ``audit``, ``reliability``) use, so they work on a read-only folder.
        """
        path = Path(folder) / STORE_NAME
        if not path.is_file():
            if Path(folder).is_file():
                raise InputError(f"{folder}: is a file; give the output folder of a `score` run")
            raise InputError(f"{path}: no store here; run `consensus-eval score ... --out {folder}` first")
        if path.stat().st_size == 0:
            raise InputError(f"{path}: an empty file, not a consensus-eval store; move it away and score again")
        store = cls(path, read_only=read_only)
        try:
            if store.get_meta("config") is None or store.get_meta("rubric") is None:
                raise InputError(f"{path}: no run is recorded in this store (no config or rubric); "
                                 f"run `consensus-eval score ... --out {folder}` first")
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Close the store. The last writer to close turns the WAL journal back into a plain file
        (journal mode DELETE), so a store at rest is one self-contained file: a read-only reader
        leaves nothing beside it, and one on a read-only disk needs no -wal/-shm files. While another
        connection is open the switch is refused at once and the store stays in WAL mode."""
        if not self.read_only:
            with suppress(sqlite3.Error):
                self._db.execute("PRAGMA journal_mode=DELETE")
        self._db.close()
        if self._hold is not None:
            hold, self._hold = self._hold, None
            if hold.store_checked:   # whole when this process began to write it, and written since by SQLite alone
                _record_whole(self.path)
            release(hold)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ meta

    def set_meta(self, key: str, value: Any) -> None:
        self._writable()
        if key == "cases":
            raise UsageError("a run's cases are stored one row a case: Store.set_cases, not set_meta('cases')")
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (key, json.dumps(value, ensure_ascii=False)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._reading():
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if not row:
            return default
        try:
            return loads_json(row[0])
        except RefusedJSON as e:
            raise InputError(f"{self.path}: damaged store: meta {key!r}: {e.msg}") from None
        except (TypeError, ValueError):
            raise InputError(f"{self.path}: damaged store: meta {key!r} is not JSON") from None

    # ------------------------------------------------------------------ cases

    def set_cases(self, cases: Iterable[Mapping[str, Any]]) -> None:
        """Replace the run's cases, one row a case in their order.

        A run's cases are never one value: SQLite refuses a value above 1 GB, about 370,000 records of 2.7 KB.

        Args:
            cases: each case's JSON dump (``Case.model_dump(mode="json")``), with its ``id``.
        """
        self._writable()
        with self._transaction():
            self._db.execute("DELETE FROM cases")
            self._db.executemany("INSERT INTO cases (position, case_id, body) VALUES (?, ?, ?)",
                                 ((i, c["id"], json.dumps(c, ensure_ascii=False)) for i, c in enumerate(cases)))

    def cases(self) -> list[Any]:
        """The run's cases as :meth:`set_cases` stored them (each one's JSON dump), in their order; a row that
        does not read back is an :class:`InputError` naming the case and its row."""
        return list(self.iter_cases())

    def iter_cases(self, start: int = 0, stop: int | None = None) -> Iterator[Any]:
        """:meth:`cases`, one at a time: what a reader that holds a few cases at a time reads
        (:meth:`calls_in_plan_order`); from the ``start``-th case (0: the first) to before the ``stop``-th (None:
        to the last)."""
        with self._reading():   # row by row: the raw texts of a large run never sit in memory all at once
            for position, case_id, body in self._db.execute(
                    "SELECT position, case_id, body FROM cases WHERE position >= ? AND position < ? ORDER BY position",
                    (start, _NO_END if stop is None else stop)):
                try:
                    yield loads_json(body)
                except RefusedJSON as e:
                    raise InputError(f"{self.path}: damaged store: cases: case {case_id!r} (row {position + 1}): "
                                     f"{e.msg}") from None
                except (TypeError, ValueError):
                    raise InputError(f"{self.path}: damaged store: cases: case {case_id!r} (row {position + 1}) "
                                     "is not JSON") from None

    # ------------------------------------------------------------------ plan

    def set_plan(self, calls: Iterable[PlannedCall]) -> None:
        """Replace the plan (the calls that make up the current evaluation). Cases with the same content plan
        the same requests: each keeps its own row, and the one stored call of a request is each one's."""
        self._writable()
        with self._transaction():
            self._db.execute("DELETE FROM plan")
            self._db.executemany(
                "INSERT OR REPLACE INTO plan VALUES (?, ?, ?, ?, ?, ?)",
                ((c.request_hash, c.case_id, c.dimension, c.judge, c.run, i) for i, c in enumerate(calls)),
            )

    def plan_size(self) -> int:
        """How many calls the current plan has."""
        with self._reading():
            return int(self._db.execute("SELECT COUNT(*) FROM plan").fetchone()[0])

    def plan(self) -> list[PlannedCall]:
        with self._reading():
            rows = self._db.execute(
                "SELECT request_hash, case_id, dimension, judge, run FROM plan ORDER BY position").fetchall()
        return [PlannedCall(*r) for r in rows]

    def unstored_plan(self) -> list[tuple[str, str]]:
        """(request hash, case id) of each planned call with nothing stored, in plan order: the calls of
        :meth:`plan` that :meth:`calls` does not return, without reading the whole plan (240,000 rows at
        20,000 cases x 4 judges)."""
        with self._reading():
            return self._db.execute(
                "SELECT p.request_hash, p.case_id FROM plan p LEFT JOIN calls c USING (request_hash) "
                "WHERE c.request_hash IS NULL ORDER BY p.position").fetchall()

    # ------------------------------------------------------------------ calls

    def done_hashes(self) -> set[str]:
        """Request hashes that have a stored ``ok`` judgment (never called again)."""
        with self._reading():
            return {r[0] for r in self._db.execute("SELECT request_hash FROM calls WHERE status = 'ok'")}

    def record(self, rec: CallRecord) -> None:
        """Store a call's outcome now (committed at once). An ``ok`` row is never overwritten."""
        self.record_many([rec])

    def record_many(self, recs: Sequence[CallRecord]) -> None:
        """Store calls' outcomes in one transaction, each as :meth:`record` stores it: one commit for many
        calls (what a fast judge's calls cost most when each is committed alone)."""
        self._writable()
        now = time.time()
        rows = [[_column_value(rec, c, now) for c in _COLUMNS] for rec in recs]
        with self._transaction():
            self._db.executemany(_RECORD_SQL, rows)

    def import_calls(self, source: Path) -> int:
        """Copy the planned calls of the store file ``source`` into this one as they are stored there, byte for
        byte, in one transaction (an ``ok`` row here is kept): how a merge of shards takes each shard's calls.
        Returns how many rows were copied."""
        self._writable()
        with self._lock:
            self._db.execute("ATTACH DATABASE ? AS src", (str(source),))
            try:
                have = {r[1] for r in self._db.execute("PRAGMA src.table_info(calls)")}
                select = ", ".join(f"c.{c}" if c in have else "NULL" for c in _COLUMNS)
                with self._transaction():
                    return self._db.execute(
                        f"INSERT INTO calls ({', '.join(_COLUMNS)}) SELECT {select} FROM src.calls c "
                        f"WHERE c.request_hash IN (SELECT request_hash FROM src.plan) {_UPSERT}").rowcount
            finally:
                self._db.execute("DETACH DATABASE src")

    def calls(self, *, planned_only: bool = True, replies: bool = True) -> list[StoredCall]:
        """Stored calls, in plan order (only those of the current plan unless told otherwise), as plain read
        models (:class:`StoredCall`; no validation: what was stored was validated when written). Of the plan:
        one per planned (request, case), under the planned case (a call of a request that cases with the same
        content share is read once for each of them).

        ``replies=False``: without the judges' raw replies (``raw`` None): what a rebuild reads, since
        nothing after the judge layer uses them."""
        select = self._select if replies else ["NULL" if c == "raw" else c for c in self._select]
        cols = ", ".join(c if c == "NULL" else f"c.{c}" for c in select)
        if not planned_only:
            sql = f"SELECT 0, {cols} FROM calls c ORDER BY c.finished_at"
            with self._reading():   # row by row: the raw rows of a large run never sit in memory all at once
                return self._to_records(self._db.execute(sql), [])
        # sorted here by plan position rather than by SQLite (a temporary B-tree of every row, judgments
        # included: twice the time of the scan at 240,000 calls); positions are distinct
        cols = cols.replace("c.case_id", "p.case_id", 1)
        sql = f"SELECT p.position, {cols} FROM calls c JOIN plan p USING (request_hash)"
        positions: list[int] = []
        with self._reading():
            records = self._to_records(self._db.execute(sql), positions)
        return [records[i] for i in sorted(range(len(records)), key=positions.__getitem__)]

    def calls_in_plan_order(self, *, replies: bool = True, chunk: int = 4096,
                            rows: tuple[int, int | None] = (0, None)) -> Iterator[list[StoredCall]]:
        """The stored calls of the plan (those :meth:`calls` returns, the same read models), streamed in plan order
        ``chunk`` at a time: what a reader that never holds the whole run reads
        (:func:`~consensus_eval.execution.stored_run.read_stored_by_cases`). ``rows``: only the plan's rows from
        the first (a row of :meth:`plan_row_of`) to before the second (None: to the end).

        The plan's rows are walked in the order they were written, which is plan order (:meth:`set_plan` writes
        them by position), each call found by its key: nothing is sorted. A plan whose rows are not in that
        order is a :class:`PlanOrderError` (read it with :meth:`calls`)."""
        select = self._select if replies else ["NULL" if c == "raw" else c for c in self._select]
        cols = ", ".join(c if c == "NULL" else f"c.{c}" for c in select).replace("c.case_id", "p.case_id", 1)
        # CROSS JOIN: SQLite keeps the plan as the outer loop, so its rowid order needs no sort
        sql = (f"SELECT p.position, {cols} FROM plan p CROSS JOIN calls c ON c.request_hash = p.request_hash "
               "WHERE p.rowid >= ? AND p.rowid < ? ORDER BY p.rowid")
        last = -1
        with self._reading():
            cursor = self._db.execute(sql, (rows[0], _NO_END if rows[1] is None else rows[1]))
            while fetched := cursor.fetchmany(chunk):
                positions: list[int] = []
                records = self._to_records(fetched, positions)
                for position in positions:
                    if position <= last:
                        raise PlanOrderError(f"{self.path}: the plan's rows are not in plan order")
                    last = position
                yield records

    def plan_row_of(self, position: int) -> int | None:
        """The first of the plan's rows (its rowid, as :meth:`calls_in_plan_order` walks them) that is a call of
        the ``position``-th case (0: the first); None when the plan has none of its calls. One pass over the plan:
        where a reader of the cases from that one on starts (:func:`~consensus_eval.execution.stored_run.spans`)."""
        with self._reading():
            row = self._db.execute("SELECT min(rowid) FROM plan WHERE case_id = "
                                   "(SELECT case_id FROM cases WHERE position = ?)", (position,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def case_count(self) -> int:
        """How many cases the run has."""
        with self._reading():
            return int(self._db.execute("SELECT COUNT(*) FROM cases").fetchone()[0])

    def _to_records(self, rows: Iterable[tuple[Any, ...]], positions: list[int] | None) -> list[StoredCall]:
        """The calls of the rows of ``SELECT position, {_READ_COLUMNS}``, each row's position appended to
        ``positions`` (None: not kept). One loop over the rows, each unpacked into names (2.7 -> 2.5 s of CPU for
        the 240,000 calls of a 20,000 x 4 store, against a method call and a slice per row)."""
        intern, status_of, make = sys.intern, _STATUS.__getitem__, _make_call
        loads, parse = _loads_judgment, stored_judgment
        records: list[StoredCall] = []
        append, place = records.append, (positions.append if positions is not None else None)
        for (position, rh, case_id, dim, judge, run, status, judgment, raw, error, error_kind, model, prompt_tokens,
             cached_tokens, completion_tokens, reasoning_tokens, cost, attempts, latency_s, finished_at) in rows:
            try:
                j = parse(loads(judgment)) if judgment else None
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # deep nesting: Recursion
                raise InputError(f"{self.path}: damaged store: the call {rh!r} does not read back "
                                 f"(its judgment: {type(e).__name__}: {e})") from None
            kind = None if error_kind is None else cast("ErrorKind", intern(error_kind))
            append(make(rh, intern(case_id), intern(dim), intern(judge), run, status_of(status), j, raw, error, kind,
                        None if model is None else intern(model), prompt_tokens, cached_tokens, completion_tokens,
                        reasoning_tokens, cost, attempts, latency_s, finished_at))
            if place is not None:
                place(position)
        return records

    # ------------------------------------------------------------------ provider batches

    def add_batch_intent(self, key: str, judge: str, request_hashes: Sequence[str]) -> list[str]:
        """Record a batch about to be created (state ``intent``) with its calls, in one transaction,
        before the provider is asked: a kill after this point leaves a trace to look the batch up by.

        Returns the calls it reserved: those not stored ``ok`` and not in another batch still running,
        read in the same write transaction (another process scoring into the same folder cannot reserve
        them too); nothing is recorded when that leaves none, or when ``key`` is taken."""
        self._writable()
        now = time.time()
        with self._transaction(immediate=True):
            taken = {r[0] for r in self._db.execute(
                "SELECT bc.request_hash FROM batch_calls bc JOIN batches b USING (key) "
                f"WHERE b.state IN ({', '.join('?' for _ in ACTIVE_BATCH_STATES)})", ACTIVE_BATCH_STATES)}
            taken |= {r[0] for r in self._db.execute("SELECT request_hash FROM calls WHERE status = 'ok'")}
            mine = [h for h in dict.fromkeys(request_hashes) if h not in taken]
            if not mine:
                return []
            rec = BatchRecord(key=key, judge=judge, state="intent", n_calls=len(mine), created_at=now, updated_at=now)
            cur = self._db.execute(f"INSERT OR IGNORE INTO batches ({', '.join(_BATCH_COLUMNS)}) VALUES "
                                   f"({', '.join('?' for _ in _BATCH_COLUMNS)})",
                                   [getattr(rec, c) for c in _BATCH_COLUMNS])
            if cur.rowcount == 0:
                return []
            self._db.executemany("INSERT INTO batch_calls (key, request_hash) VALUES (?, ?)",
                                 ((key, h) for h in mine))
        return mine

    def update_batch(self, key: str, **fields: Any) -> None:
        """Set fields of a stored batch (committed at once); ``updated_at`` is set to now."""
        self._writable()
        unknown = set(fields) - set(_BATCH_COLUMNS)
        if unknown or "key" in fields:
            raise UsageError(f"not batch fields: {', '.join(sorted(unknown | ({'key'} & set(fields))))}")
        fields["updated_at"] = time.time()
        self._db.execute(f"UPDATE batches SET {', '.join(f'{c} = ?' for c in fields)} WHERE key = ?",
                         [*fields.values(), key])

    def batches(self, *, judge: str | None = None, active_only: bool = False) -> list[BatchRecord]:
        """Stored batches, oldest first (``active_only``: those in :data:`ACTIVE_BATCH_STATES`). A store of
        schema 1 to 3 opened read-only has none."""
        where, args = [], []
        if judge is not None:
            where.append("judge = ?")
            args.append(judge)
        if active_only:
            where.append(f"state IN ({', '.join('?' for _ in ACTIVE_BATCH_STATES)})")
            args += ACTIVE_BATCH_STATES
        sql = (f"SELECT {', '.join(_BATCH_COLUMNS)} FROM batches"
               + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY created_at, rowid")
        with self._reading():
            if not self._has_table("batches"):
                return []
            rows = self._db.execute(sql, args).fetchall()
        try:
            return [BatchRecord.model_validate(dict(zip(_BATCH_COLUMNS, r, strict=True))) for r in rows]
        except ValidationError as e:
            raise InputError(f"{self.path}: damaged store: a batch does not read back "
                             f"({e.errors()[0]['msg']})") from None

    def batch_calls(self, key: str) -> list[str]:
        """The request hashes of the calls in batch ``key``."""
        with self._reading():
            if not self._has_table("batch_calls"):
                return []
            return [r[0] for r in self._db.execute("SELECT request_hash FROM batch_calls WHERE key = ? "
                                                   "ORDER BY rowid", (key,))]

    def batched_hashes(self) -> set[str]:
        """Request hashes reserved by a batch that is not over (:data:`ACTIVE_BATCH_STATES`)."""
        with self._reading():
            if not self._has_table("batches"):
                return set()
            return {r[0] for r in self._db.execute(
                "SELECT bc.request_hash FROM batch_calls bc JOIN batches b USING (key) "
                f"WHERE b.state IN ({', '.join('?' for _ in ACTIVE_BATCH_STATES)})", ACTIVE_BATCH_STATES)}

    # ------------------------------------------------------------------ human labels

    def human_labels(self, *, reviewer: str | None = None) -> list[HumanLabelRecord]:
        """Every human label (of one ``reviewer`` if given) as its events leave it (:func:`~.labels.fold`: a blind
        label keeps its blind value, with any later change as its revision), in the order they were last written."""
        return _labels.fold(self.label_events(reviewer=reviewer))

    def label_events(self, *, reviewer: str | None = None, case_id: str | None = None) -> list[LabelEvent]:
        """The history of the labels (of one ``reviewer``, of one case), every event in the order written."""
        with self._reading():
            try:
                return _labels.read_events(self._db, reviewer=reviewer, case_id=case_id)
            except InputError as e:
                raise InputError(f"{self.path}: {e}") from None

    def import_label_events(self, events: Sequence[LabelEvent]) -> None:
        """Append another store's label events as they are (when, by whom, phase, source, action), in one
        transaction: how a merge of shards takes each shard's history (:mod:`consensus_eval.execution.shards`)."""
        self._writable()
        with self._transaction():
            _labels.insert_events(self._db, events)

    def write_labels(self, changes: Sequence[Change], *, source: str, action_id: str | None = None,
                     session: str | None = None, expect: Mapping[Slot, int] | None = None,
                     actor: str | None = None, member_key: str | None = None) -> Written:
        """Append the events of one action (labels set or cleared, :class:`~.labels.Change`) in one short
        transaction, committed at once (:func:`~.labels.append`): the team's roles and the blind spot check are
        enforced (:class:`LabelRefused`), ``expect`` (slot -> the version the writer saw) refuses a stale write
        (:class:`LabelConflict`), and a repeated ``action_id`` of ``actor`` (default: the labels' reviewer) writes
        nothing (``applied`` False). ``source``: what wrote it (``review``, a sheet's path, ``api``);
        ``session``: the review session's tag; ``member_key``: the hash of the personal key the session was opened
        with (the writer must still be on the team with it: :func:`~.labels.check_member`)."""
        self._writable()
        with self._transaction(immediate=True):
            return _labels.append(self._db, changes, source=source, action_id=action_id, session=session,
                                  expect=expect, actor=actor, member_key=member_key)

    def reveal(self, reviewer: str, case_ids: Iterable[str], *, source: str, session: str | None = None) -> list[str]:
        """Record that the judges of these spot-check cases were shown to ``reviewer`` (their blind scores are
        frozen from now on); returns the cases revealed now (each is revealed once)."""
        self._writable()
        with self._transaction(immediate=True):
            return _labels.reveal(self._db, reviewer, case_ids, source=source, session=session)

    def revealed_cases(self, reviewer: str) -> set[str]:
        """The spot-check cases whose judges were shown to ``reviewer``."""
        with self._reading():
            return _labels.revealed_cases(self._db, reviewer)

    def upsert_human_label(self, label: HumanLabelRecord) -> HumanLabelRecord:
        """Set one label now (:meth:`write_labels`, source the label's or ``api``). Returns the label as stored."""
        self.write_labels([Change(label)], source=label.source or "api")
        got = [lb for lb in _labels.fold(self.label_events(reviewer=label.reviewer, case_id=label.case_id))
               if lb.key == label.key]
        return got[0] if got else label

    def delete_human_label(self, *, reviewer: str, kind: LabelKind, case_id: str, dimension: str | None = None,
                           deduction_id: str | None = None) -> bool:
        """Clear one reviewer's label of that key (a ``clear`` event); whether there was one."""
        key = HumanLabelRecord(case_id=case_id, dimension=dimension, deduction_id=deduction_id, reviewer=reviewer,
                               kind=kind)
        had = any(lb.key == key.key for lb in _labels.fold(self.label_events(reviewer=reviewer, case_id=case_id)))
        if had:
            self.write_labels([Change(key, clear=True)], source="api")
        return had

    def replace_human_labels(self, reviewer: str, source: str, labels: Iterable[HumanLabelRecord]) -> int:
        """Make what ``reviewer`` has from ``source`` what ``labels`` say, atomically (one transaction: a reader
        sees the old set or the new one): a label of theirs last written from ``source`` and not in ``labels`` is
        cleared, a label that differs from the stored one is set (whatever source wrote that one: the latest wins),
        an unchanged one writes nothing. Every label must be ``reviewer``'s; ``source`` is set here. Returns how many
        labels were given."""
        return self.replace_human_labels_of(source, {reviewer: list(labels)})

    def replace_human_labels_of(self, source: str, by_reviewer: Mapping[str, Sequence[HumanLabelRecord]]) -> int:
        """:meth:`replace_human_labels` for several reviewers of one source (a sheet naming several),
        all in one transaction."""
        self._writable()
        changes: list[Change] = []
        n = 0
        with self._transaction(immediate=True):
            for reviewer, labels in by_reviewer.items():
                for label in labels:
                    if label.reviewer != reviewer:
                        raise UsageError(f"a label of reviewer {label.reviewer!r} in a replacement of "
                                         f"{reviewer!r}'s labels")
                given = {lb.key for lb in labels}
                n += len(labels)
                by_key, _ = _labels.label_states(_labels.read_events(self._db, reviewer=reviewer))
                for key, st in by_key.items():
                    now = st.now
                    if key not in given and now is not None and now.source == source:
                        changes.append(Change(HumanLabelRecord(reviewer=key[0], kind=key[1], case_id=key[2],
                                                               dimension=key[3] or None, deduction_id=key[4] or None),
                                              clear=True))
                changes += [Change(lb) for lb in labels]
            _labels.append(self._db, changes, source=source, force_source=True)
        return n

    # ------------------------------------------------------------------ spot checks

    def spot_checks(self) -> list[SpotCheckRecord]:
        """The random spot-check sample drawn by ``audit --spot-check`` (empty: none drawn), in draw order."""
        with self._reading():
            if not self._has_table("spot_checks"):
                return []
            rows = self._db.execute(f"SELECT {', '.join(_SPOT_COLUMNS)} FROM spot_checks ORDER BY position").fetchall()
        return [SpotCheckRecord.model_validate(dict(zip(_SPOT_COLUMNS, r, strict=True))) for r in rows]

    def replace_spot_checks(self, sample: Sequence[SpotCheckRecord]) -> None:
        """Replace the spot-check sample by ``sample``, atomically."""
        self._writable()
        with self._transaction(immediate=True):
            self._db.execute("DELETE FROM spot_checks")
            marks = ", ".join("?" for _ in _SPOT_COLUMNS)
            self._db.executemany(f"INSERT INTO spot_checks ({', '.join(_SPOT_COLUMNS)}) VALUES ({marks})",
                                 ([getattr(r, c) for c in _SPOT_COLUMNS] for r in sample))

    def heldout_looks(self) -> list[HeldoutLook]:
        """The comparisons made on the spot check's held-out part (:class:`HeldoutLook`), oldest first."""
        with self._reading():
            if not self._has_table("heldout_looks"):
                return []
            rows = self._db.execute(f"SELECT {', '.join(_LOOK_COLUMNS)} FROM heldout_looks ORDER BY at, look_id")
            return [HeldoutLook.model_validate(dict(zip(_LOOK_COLUMNS, r, strict=True))) for r in rows.fetchall()]

    def add_heldout_looks(self, looks: Sequence[HeldoutLook]) -> int:
        """Record comparisons on the held-out part (one already recorded, by its ``look_id``, is kept as it was);
        returns how many were new."""
        self._writable()
        with self._transaction(immediate=True):
            before = self._db.total_changes
            self._db.executemany(f"INSERT OR IGNORE INTO heldout_looks ({', '.join(_LOOK_COLUMNS)}) VALUES "
                                 f"({', '.join('?' for _ in _LOOK_COLUMNS)})",
                                 ([getattr(lk, c) for c in _LOOK_COLUMNS] for lk in looks))
            return self._db.total_changes - before

    # ------------------------------------------------------------------ reviewers (the team)

    def reviewers(self) -> list[ReviewerRecord]:
        """The team's reviewers, in the order they were added (empty: no team, one-token mode)."""
        with self._reading():
            if not self._has_table("reviewers"):
                return []
            rows = self._db.execute(f"SELECT {', '.join(_REVIEWER_COLUMNS)} FROM reviewers "
                                    "ORDER BY created_at, rowid").fetchall()
        return [ReviewerRecord.model_validate(dict(zip(_REVIEWER_COLUMNS, r, strict=True))) for r in rows]

    def reviewer_by_key(self, key: str) -> ReviewerRecord | None:
        """The reviewer whose personal key this is (None: no such key)."""
        with self._reading():
            if not self._has_table("reviewers"):
                return None
            row = self._db.execute(f"SELECT {', '.join(_REVIEWER_COLUMNS)} FROM reviewers WHERE key_hash = ?",
                                   (key_hash(key),)).fetchone()
        return ReviewerRecord.model_validate(dict(zip(_REVIEWER_COLUMNS, row, strict=True))) if row else None

    def put_reviewer(self, name: str, role: ReviewerRole, key: str) -> ReviewerRecord:
        """Add the reviewer ``name``, or give them a new key and role (their old link stops working)."""
        self._writable()
        rec = ReviewerRecord(name=name, role=role, key_hash=key_hash(key), created_at=time.time())
        with self._transaction(immediate=True):
            old = self._db.execute("SELECT created_at FROM reviewers WHERE name = ?", (name,)).fetchone()
            if old is not None:
                rec = rec.model_copy(update={"created_at": old[0]})
            self._db.execute(f"INSERT OR REPLACE INTO reviewers ({', '.join(_REVIEWER_COLUMNS)}) VALUES (?, ?, ?, ?)",
                             [getattr(rec, c) for c in _REVIEWER_COLUMNS])
        return rec

    def remove_reviewer(self, name: str) -> bool:
        """Remove ``name`` from the team (their link stops working; their labels stay); whether they were in it."""
        self._writable()
        with self._transaction(immediate=True):
            cur = self._db.execute("DELETE FROM reviewers WHERE name = ?", (name,))
        return cur.rowcount > 0

    def assignments(self) -> list[tuple[str, str]]:
        """(case id, reviewer) of every assignment, in the order written (empty: nothing assigned)."""
        with self._reading():
            if not self._has_table("assignments"):
                return []
            return [(r[0], r[1]) for r in self._db.execute("SELECT case_id, reviewer FROM assignments ORDER BY rowid")]

    def replace_assignments(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Replace every assignment by ``pairs`` (case id, reviewer), atomically."""
        self._writable()
        with self._transaction(immediate=True):
            self._db.execute("DELETE FROM assignments")
            self._db.executemany("INSERT INTO assignments (case_id, reviewer) VALUES (?, ?)", pairs)

    def data_version(self) -> int:
        """SQLite's ``data_version`` of this connection: it changes when another connection (another process, a
        sheet import, ``reviewers assign``) commits to the store, and not on this connection's own writes. A
        cache of what is stored compares it to know when to read again."""
        with self._reading():
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def _has_table(self, name: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                (name,)).fetchone() is not None

    def _transaction(self, *, immediate: bool = False) -> _Tx:
        return _Tx(self._db, self._lock, immediate)

    def _writable(self) -> None:
        if self.read_only:
            raise StateError(f"{self.path}: opened read-only; cannot write to the store")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn an SQLite error while reading (a damaged file) into an InputError naming the store."""
        try:
            yield
        except sqlite3.Error as e:
            raise self._open_error(e) from None


def check_whole(path: Path) -> None:
    """Before the first write into the store ``path`` (if there is one): open it read-only and run SQLite's
    ``quick_check``; a damaged store is an :class:`InputError` saying how to recover what it holds, and nothing
    is written to it. (A file that is not an SQLite store at all is left to the opening, which says so.)"""
    try:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return
    except OSError:
        return
    uri = f"file:{quote(str(path.absolute()))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        _check_once(db, path)
    except sqlite3.OperationalError:
        return   # cannot be read without writing (a WAL store in a folder it cannot make -shm in): opened as before
    except sqlite3.DatabaseError as e:
        raise _damaged(path, str(e)) from None
    finally:
        db.close()


def _identity(path: Path) -> list[object] | None:
    """The store file ``path`` as :data:`CHECKED_NAME` records it (module docstring); None when it has a journal
    beside it (its content is then the file and the journal: not what the identity covers) or cannot be read."""
    if any(path.with_name(path.name + end).exists() for end in ("-wal", "-journal")):
        return None
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            header = f.read(32)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, header[24:32].hex()]


def _marker(path: Path) -> Path | None:
    """Where the identity of the store ``path`` is recorded: :data:`CHECKED_NAME` beside a run's store; None for
    another file (a merge's store being written under a temporary name, renamed once whole: no record is left behind
    under the temporary name)."""
    return path.with_name(CHECKED_NAME) if path.name == STORE_NAME else None


def _check_once(db: sqlite3.Connection, path: Path) -> None:
    """:func:`_quick_check` of ``db`` (the store ``path``) unless the file is as it was when last known whole
    (:func:`_record_whole`); recorded whole after a check it passes."""
    seen = _identity(path)
    marker = _marker(path)
    if seen is not None and marker is not None:
        with suppress(OSError, ValueError):
            if json.loads(marker.read_bytes()) == seen:
                return
    _quick_check(db, path)
    _record_whole(path, seen)


def _record_whole(path: Path, checked: list[object] | None = None) -> None:
    """Record the store ``path`` as whole as it now is, so that the next open does not read all of it again: after a
    check (``checked``: its identity when the check began; nothing is recorded if the file changed during the check)
    or when the writer that found it whole closes it. Nothing is recorded where the folder cannot be written (each
    open checks the store there) or while a journal is beside it."""
    marker = _marker(path)
    if marker is None:
        return
    found = _identity(path)
    if found is None or (checked is not None and found != checked):
        with suppress(OSError):
            marker.unlink()
        return
    tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(found), encoding="ascii")
        os.replace(tmp, marker)
    except OSError:
        with suppress(OSError):
            tmp.unlink()


def _quick_check(db: sqlite3.Connection, path: Path) -> None:
    """SQLite's ``quick_check`` of ``db`` (the store ``path``): a problem found is :func:`_damaged`."""
    rows = db.execute("PRAGMA quick_check(3)").fetchall()
    if rows != [("ok",)]:
        raise _damaged(path, "; ".join(line for r in rows for line in str(r[0]).splitlines()
                                       if not line.startswith("***")))


def _damaged(path: Path, problem: str) -> InputError:
    return InputError(
        f"{path}: the store is damaged (SQLite's check: {problem[:300]}); nothing was written to it. To recover what "
        f"it holds, work on a copy: `sqlite3 {path} .recover | sqlite3 recovered.sqlite`, then put recovered.sqlite "
        f"in a new folder as {STORE_NAME} and run the command on that folder (a `score` resumes there: only the "
        "calls lost are made again); or move the folder away and score again")


def _writable(folder: Path) -> bool:
    """Whether this process (its effective uid) may create files in ``folder``."""
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)


class _Tx:
    """A transaction; ``immediate`` takes the write lock at BEGIN (waiting up to the busy timeout for
    another writer), so a write never fails half-way on a lock another connection holds."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, immediate: bool = False) -> None:
        self.db = db
        self.lock = lock
        self.immediate = immediate

    def __enter__(self) -> None:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE" if self.immediate else "BEGIN")
        except BaseException:
            self.lock.release()
            raise

    def __exit__(self, exc_type: object, *rest: object) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.lock.release()
