"""The store: one SQLite file per output folder, the only state shared between stages.

It holds every call as it lands (request hash, case, dimension, judge, run, status, raw reply,
parsed judgment, tokens, cost, latency, attempts, error), and the context of the latest run (the
rubric, the config without secrets, the cases and the plan), so that ``report``, ``audit`` and
``reliability`` rebuild everything from it without calling a judge.

Resume: a call whose request hash has an ``ok`` row is never made again. Each row is committed as
it lands (WAL journal), so a kill loses at most the calls in flight.

Opened ``read_only`` (what ``report``, ``audit`` and ``reliability`` need), the store is an SQLite
``mode=ro`` connection: no journal mode, no pragma, no schema or meta write, so an output folder on
a read-only disk or shared without write permission can be read. (The WAL journal is used while a
run writes; the last writer to close turns it back into a single file, see :meth:`Store.close`.)

Every problem a user can meet (an output path that is a file, a folder that is not writable, a file
that is not a store, a store of a newer consensus-eval) is an :class:`InputError` saying so, never
an sqlite3 traceback.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from consensus_eval._errors import InputError
from consensus_eval.domain.judgment import CallOutcome, Judgment

SCHEMA_VERSION = 2  # 2: calls.error_kind (a version-1 store is upgraded in place)
#: the store's file name inside an output folder
STORE_NAME = "results.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    request_hash      TEXT PRIMARY KEY,
    case_id           TEXT NOT NULL,
    dimension         TEXT NOT NULL,
    judge             TEXT NOT NULL,
    run               INTEGER NOT NULL,
    model             TEXT,
    status            TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    raw               TEXT,
    judgment          TEXT,
    prompt_tokens     INTEGER,
    cached_tokens     INTEGER,
    completion_tokens INTEGER,
    reasoning_tokens  INTEGER,
    cost              REAL,
    latency_s         REAL,
    attempts          INTEGER NOT NULL DEFAULT 1,
    error             TEXT,
    error_kind        TEXT,
    finished_at       REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS plan (
    request_hash TEXT PRIMARY KEY,
    case_id      TEXT NOT NULL,
    dimension    TEXT NOT NULL,
    judge        TEXT NOT NULL,
    run          INTEGER NOT NULL,
    position     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


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


@dataclass(frozen=True)
class PlannedCall:
    """One call the plan needs: a (case, dimension, judge, run) and its request hash."""

    request_hash: str
    case_id: str
    dimension: str
    judge: str
    run: int


_COLUMNS = list(CallRecord.model_fields)


class Store:
    """SQLite store of calls, plan and run context for one output folder."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        #: the calls table's columns as selected (a version-1 store read as is has no error_kind)
        self._select = list(_COLUMNS)
        if read_only:
            self._db = self._connect_read_only()
        else:
            self._db = self._connect_read_write()
        try:
            self._check_schema()
        except BaseException:
            self._db.close()
            raise

    # ------------------------------------------------------------------ opening

    def _connect_read_write(self) -> sqlite3.Connection:
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
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and not {"calls", "plan", "meta"} & tables:
                db.close()
                raise InputError(f"{self.path}: not a consensus-eval store (an SQLite database with other "
                                 f"tables: {', '.join(sorted(tables)[:5])}); move it away or give another --out")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except sqlite3.Error as e:
            db.close()
            raise self._open_error(e) from None
        return db

    def _connect_read_only(self) -> sqlite3.Connection:
        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
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
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        return db

    def _open_error(self, e: sqlite3.Error) -> InputError:
        msg = str(e)
        if isinstance(e, sqlite3.DatabaseError) and ("not a database" in msg or "malformed" in msg):
            return InputError(f"{self.path}: not a consensus-eval store: the file is not an SQLite database or "
                              f"is damaged ({msg}); move it away and score again")
        if "readonly" in msg or "read-only" in msg:
            return InputError(f"{self.path}: the store is read-only (the file or its folder {self.path.parent} "
                              "cannot be written); copy the folder somewhere writable")
        return InputError(f"{self.path}: cannot open the store: {msg}")

    def _check_schema(self) -> None:
        try:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"calls", "plan", "meta"} <= tables:
                raise InputError(f"{self.path}: not a consensus-eval store (an SQLite database without the "
                                 "calls, plan and meta tables)")
            found = self.get_meta("schema_version")
        except sqlite3.Error as e:
            raise self._open_error(e) from None
        if found == SCHEMA_VERSION:
            return
        if found is None and not self.read_only:
            self.set_meta("schema_version", SCHEMA_VERSION)
        elif found == 1:
            if self.read_only:
                self._select = ["NULL" if c == "error_kind" else c for c in _COLUMNS]
            else:
                self._db.execute("ALTER TABLE calls ADD COLUMN error_kind TEXT")
                self.set_meta("schema_version", SCHEMA_VERSION)
        elif isinstance(found, int) and not isinstance(found, bool) and found > SCHEMA_VERSION:
            raise InputError(f"{self.path}: this store has schema version {found}, written by a newer "
                             f"consensus-eval; this version reads schema versions 1 to {SCHEMA_VERSION}: "
                             "upgrade consensus-eval to read it")
        elif found is not None:
            raise InputError(f"{self.path}: not a consensus-eval store (schema version {found!r}; this "
                             f"version reads schema versions 1 to {SCHEMA_VERSION})")

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
            raise FileNotFoundError(f"{path}: no store here; run `consensus-eval score ... --out {folder}` first")
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

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ meta

    def set_meta(self, key: str, value: Any) -> None:
        self._writable()
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (key, json.dumps(value, ensure_ascii=False)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._reading():
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if not row:
            return default
        try:
            return json.loads(row[0])
        except (TypeError, ValueError):
            raise InputError(f"{self.path}: damaged store: meta {key!r} is not JSON") from None

    # ------------------------------------------------------------------ plan

    def set_plan(self, calls: Iterable[PlannedCall]) -> None:
        """Replace the plan (the calls that make up the current evaluation)."""
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

    # ------------------------------------------------------------------ calls

    def done_hashes(self) -> set[str]:
        """Request hashes that have a stored ``ok`` judgment (never called again)."""
        with self._reading():
            return {r[0] for r in self._db.execute("SELECT request_hash FROM calls WHERE status = 'ok'")}

    def record(self, rec: CallRecord) -> None:
        """Store a call's outcome now (committed at once). An ``ok`` row is never overwritten."""
        self._writable()
        values = rec.model_dump()
        values["judgment"] = rec.judgment.model_dump_json() if rec.judgment else None
        values["finished_at"] = rec.finished_at or time.time()
        placeholders = ", ".join("?" for _ in _COLUMNS)
        self._db.execute(
            f"INSERT INTO calls ({', '.join(_COLUMNS)}) VALUES ({placeholders}) "
            f"ON CONFLICT(request_hash) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "request_hash")
            + " WHERE calls.status != 'ok'",
            [values[c] for c in _COLUMNS],
        )

    def calls(self, *, planned_only: bool = True) -> list[CallRecord]:
        """Stored calls, in plan order (only those of the current plan unless told otherwise)."""
        cols = ", ".join(c if c == "NULL" else f"c.{c}" for c in self._select)
        if planned_only:
            sql = f"SELECT {cols} FROM calls c JOIN plan p USING (request_hash) ORDER BY p.position"
        else:
            sql = f"SELECT {cols} FROM calls c ORDER BY c.finished_at"
        with self._reading():
            rows = self._db.execute(sql).fetchall()
        return [self._to_record(r) for r in rows]

    def _to_record(self, row: tuple[Any, ...]) -> CallRecord:
        d = dict(zip(_COLUMNS, row, strict=True))  # the row of SELECT {_COLUMNS}
        try:
            if d["judgment"]:
                d["judgment"] = Judgment.model_validate_json(d["judgment"])
            return CallRecord.model_validate(d)
        except ValidationError as e:
            raise InputError(f"{self.path}: damaged store: the call {d.get('request_hash')!r} does not read back "
                             f"({e.error_count()} problem(s), first: {e.errors()[0]['msg']})") from None

    def _transaction(self) -> _Tx:
        return _Tx(self._db)

    def _writable(self) -> None:
        if self.read_only:
            raise RuntimeError(f"{self.path}: opened read-only; cannot write to the store")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn an SQLite error while reading (a damaged file) into an InputError naming the store."""
        try:
            yield
        except sqlite3.Error as e:
            raise self._open_error(e) from None


def _writable(folder: Path) -> bool:
    """Whether this process (its effective uid) may create files in ``folder``."""
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
