"""The store: one SQLite file per output folder, the only state shared between stages.

It holds every call as it lands (request hash, case, dimension, judge, run, status, raw reply,
parsed judgment, tokens, cost, latency, attempts, error), and the context of the latest run (the
rubric, the config without secrets, the cases and the plan), so that ``report``, ``audit`` and
``reliability`` rebuild everything from it without calling a judge.

Resume: a call whose request hash has an ``ok`` row is never made again. Each row is committed as
it lands (WAL journal), so a kill loses at most the calls in flight.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        found = self.get_meta("schema_version")
        if found is None:
            self.set_meta("schema_version", SCHEMA_VERSION)
        elif found == 1:
            self._db.execute("ALTER TABLE calls ADD COLUMN error_kind TEXT")
            self.set_meta("schema_version", SCHEMA_VERSION)
        elif found != SCHEMA_VERSION:
            raise RuntimeError(f"{self.path}: store schema {found}, this version reads {SCHEMA_VERSION}")

    @classmethod
    def open_existing(cls, folder: str | Path) -> Store:
        """Open ``folder/results.sqlite`` of a finished or interrupted run (no judge is called)."""
        path = Path(folder) / STORE_NAME
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no store here; run `consensus-eval score ... --out {folder}` first")
        return cls(path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ meta

    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                         (key, json.dumps(value, ensure_ascii=False)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # ------------------------------------------------------------------ plan

    def set_plan(self, calls: Iterable[PlannedCall]) -> None:
        """Replace the plan (the calls that make up the current evaluation)."""
        with self._transaction():
            self._db.execute("DELETE FROM plan")
            self._db.executemany(
                "INSERT OR REPLACE INTO plan VALUES (?, ?, ?, ?, ?, ?)",
                ((c.request_hash, c.case_id, c.dimension, c.judge, c.run, i) for i, c in enumerate(calls)),
            )

    def plan_size(self) -> int:
        """How many calls the current plan has."""
        return int(self._db.execute("SELECT COUNT(*) FROM plan").fetchone()[0])

    def plan(self) -> list[PlannedCall]:
        rows = self._db.execute(
            "SELECT request_hash, case_id, dimension, judge, run FROM plan ORDER BY position").fetchall()
        return [PlannedCall(*r) for r in rows]

    # ------------------------------------------------------------------ calls

    def done_hashes(self) -> set[str]:
        """Request hashes that have a stored ``ok`` judgment (never called again)."""
        return {r[0] for r in self._db.execute("SELECT request_hash FROM calls WHERE status = 'ok'")}

    def record(self, rec: CallRecord) -> None:
        """Store a call's outcome now (committed at once). An ``ok`` row is never overwritten."""
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
        cols = ", ".join(f"c.{c}" for c in _COLUMNS)
        if planned_only:
            sql = f"SELECT {cols} FROM calls c JOIN plan p USING (request_hash) ORDER BY p.position"
        else:
            sql = f"SELECT {cols} FROM calls c ORDER BY c.finished_at"
        return [self._to_record(r) for r in self._db.execute(sql)]

    @staticmethod
    def _to_record(row: tuple[Any, ...]) -> CallRecord:
        d = dict(zip(_COLUMNS, row, strict=True))  # the row of SELECT {_COLUMNS}
        if d["judgment"]:
            d["judgment"] = Judgment.model_validate_json(d["judgment"])
        return CallRecord.model_validate(d)

    def _transaction(self) -> _Tx:
        return _Tx(self._db)


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
