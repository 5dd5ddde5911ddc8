"""The store's schema and its numbered migrations.

A store says its schema version in ``PRAGMA user_version`` (and, for the consensus-eval versions that read only
that, in ``meta.schema_version``; a store written before schema 8 has only the latter). :data:`STEPS` is the
ordered list of migrations: ``STEPS[n]`` takes a store of version ``n`` to ``n + 1``, in one transaction with the
version bump, so a store is always at one version. A new store is created at :data:`SCHEMA_VERSION` directly.

Opening writable (:func:`open_writable`) upgrades an older store in place; opening read-only
(:func:`open_read_only`) never writes, and never branches on the version either: an older store is copied into
memory and upgraded there, so every reader sees the current schema. A store of a newer version is refused.

History: 2 ``calls.error_kind``; 3 ``human_labels``; 4 ``batches``, ``batch_calls``; 5 ``human_labels.origin`` and
``evidence``, ``spot_checks``, the team (``reviewers``, ``assignments``); 6 ``human_labels.kind`` ``criterion``;
7 a plan row per (request, case); 8 the labels as an append-only history (``label_events``, ``label_actions``,
:mod:`consensus_eval.execution.labels`): every label of ``human_labels`` became its first event, and the table
went; 9 ``spot_checks.part``: the tuning and held-out parts of a spot check (NULL for a sample drawn
before, which the next identical draw splits); 10 ``label_events.copied_from`` and ``copied_seq`` (an event copied
from another run by ``human copy``: that run and its event), ``heldout_looks`` (each comparison of two versions on
a spot check's held-out part); 11 ``cases``: the run's cases one row a case (before, one ``meta.cases`` value,
which SQLite refuses above 1 GB: about 370,000 records of 2.7 KB).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable

from consensus_eval._errors import InputError
from consensus_eval.execution import labels

SCHEMA_VERSION = 11

#: every table of a store at :data:`SCHEMA_VERSION` (tables of schema 1 to 6 as they were, less ``human_labels``)
SCHEMA = """
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
    request_hash TEXT NOT NULL,
    case_id      TEXT NOT NULL,
    dimension    TEXT NOT NULL,
    judge        TEXT NOT NULL,
    run          INTEGER NOT NULL,
    position     INTEGER NOT NULL,
    PRIMARY KEY (request_hash, case_id)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    position INTEGER PRIMARY KEY,
    case_id  TEXT NOT NULL,
    body     TEXT NOT NULL
);
""" + """
CREATE TABLE IF NOT EXISTS batches (
    key             TEXT PRIMARY KEY,
    judge           TEXT NOT NULL,
    state           TEXT NOT NULL,
    batch_id        TEXT,
    input_file_id   TEXT,
    output_file_id  TEXT,
    error_file_id   TEXT,
    provider_status TEXT,
    n_calls         INTEGER NOT NULL,
    reason          TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batch_calls (
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    PRIMARY KEY (key, request_hash)
);
CREATE INDEX IF NOT EXISTS batch_calls_hash ON batch_calls (request_hash);
""" + """
CREATE TABLE IF NOT EXISTS reviewers (
    name       TEXT PRIMARY KEY,
    role       TEXT NOT NULL CHECK (role IN ('reviewer', 'adjudicator')),
    key_hash   TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS assignments (
    case_id  TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    PRIMARY KEY (case_id, reviewer)
);
CREATE TABLE IF NOT EXISTS spot_checks (
    case_id     TEXT PRIMARY KEY,
    position    INTEGER NOT NULL,
    probability REAL NOT NULL CHECK (probability > 0 AND probability <= 1),
    stratum     TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    drawn_at    REAL NOT NULL,
    part        TEXT CHECK (part IN ('tuning', 'heldout'))
);
CREATE TABLE IF NOT EXISTS heldout_looks (
    look_id   TEXT PRIMARY KEY,
    heldout   TEXT NOT NULL,
    version_a TEXT NOT NULL,
    version_b TEXT NOT NULL,
    run_a     TEXT NOT NULL,
    run_b     TEXT NOT NULL,
    at        REAL NOT NULL
);
""" + labels.LABELS_SCHEMA

#: the ``human_labels`` table of schemas 3 to 6 (as schema 6 left it), what the steps before 8 work on
_HUMAN_LABELS = """
CREATE TABLE IF NOT EXISTS human_labels (
    case_id      TEXT NOT NULL,
    dimension    TEXT,
    deduction_id TEXT,
    reviewer     TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('score', 'verdict', 'comment', 'added_deduction', 'categories',
                                           'criterion')),
    value,
    points       REAL,
    comment      TEXT,
    labelled_at  REAL NOT NULL,
    source       TEXT NOT NULL,
    origin       TEXT NOT NULL DEFAULT 'own' CHECK (origin IN ('own', 'accepted', 'reference')),
    evidence     TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS human_labels_key
    ON human_labels (reviewer, kind, case_id, ifnull(dimension, ''), ifnull(deduction_id, ''));
"""


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _to_2(db: sqlite3.Connection) -> None:
    """calls.error_kind: why a failed call failed (a kind of :class:`~consensus_eval.domain.judgment.ErrorKind`)."""
    if "error_kind" not in _columns(db, "calls"):
        db.execute("ALTER TABLE calls ADD COLUMN error_kind TEXT")


def _to_3(db: sqlite3.Connection) -> None:
    """human_labels."""
    _run(db, _HUMAN_LABELS)


def _to_4(db: sqlite3.Connection) -> None:
    """batches and batch_calls (a judge's provider batches)."""
    _run(db, SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS batches"):
                    SCHEMA.index("CREATE TABLE IF NOT EXISTS reviewers")])


def _to_5(db: sqlite3.Connection) -> None:
    """human_labels.origin and evidence; spot_checks (and the team's tables, where a later version made them)."""
    have = _columns(db, "human_labels") if "human_labels" in _tables(db) else {"origin", "evidence"}
    if "origin" not in have:
        db.execute("ALTER TABLE human_labels ADD COLUMN origin TEXT NOT NULL DEFAULT 'own' "
                   "CHECK (origin IN ('own', 'accepted', 'reference'))")
    if "evidence" not in have:
        db.execute("ALTER TABLE human_labels ADD COLUMN evidence TEXT")
    _run(db, SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS reviewers"):
                    SCHEMA.index("CREATE TABLE IF NOT EXISTS heldout_looks")])


def _to_6(db: sqlite3.Connection) -> None:
    """human_labels.kind 'criterion' and origin 'reference' in the CHECKs (SQLite cannot change a CHECK in place:
    the table is rebuilt, every row kept); the team's tables, which a store of 5 made only once it had a team."""
    _run(db, SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS reviewers"):
                    SCHEMA.index("CREATE TABLE IF NOT EXISTS spot_checks")])
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'human_labels'").fetchone()
    if row is None or ("'criterion'" in row[0] and "'reference'" in row[0]):
        return
    cols = ", ".join(sorted(_columns(db, "human_labels")))
    db.execute("ALTER TABLE human_labels RENAME TO human_labels_before_6")
    db.execute("DROP INDEX IF EXISTS human_labels_key")
    _run(db, _HUMAN_LABELS)
    db.execute(f"INSERT INTO human_labels ({cols}) SELECT {cols} FROM human_labels_before_6")
    db.execute("DROP TABLE human_labels_before_6")


def _to_7(db: sqlite3.Connection) -> None:
    """A plan row per (request, case): a plan keyed by the request alone (a second case of the same content replaced
    the first's rows) is rebuilt keyed by both, its rows kept; the next ``score`` plans every case again."""
    pk = [r[1] for r in sorted(db.execute("PRAGMA table_info(plan)"), key=lambda r: r[5]) if r[5]]
    if pk != ["request_hash"]:
        return
    db.execute("ALTER TABLE plan RENAME TO plan_before_cases")
    start = SCHEMA.index("CREATE TABLE IF NOT EXISTS plan")
    db.execute(SCHEMA[start:SCHEMA.index(";", start)])
    db.execute("INSERT INTO plan SELECT request_hash, case_id, dimension, judge, run, position FROM plan_before_cases")
    db.execute("DROP TABLE plan_before_cases")


def _to_8(db: sqlite3.Connection) -> None:
    """The labels as events: each row of human_labels becomes the first event of its label (in the order they were
    written), with the phase it was given in as far as the store tells (an own score or criterion verdict on a
    spot-check case: blind; an adjudicator's reference: adjudication; the rest: revealed); human_labels goes."""
    _run(db, labels.LABELS_SCHEMA)
    if "human_labels" not in _tables(db):
        return
    have = _columns(db, "human_labels")
    cols = ["case_id", "dimension", "deduction_id", "reviewer", "kind", "value", "points", "comment", "labelled_at",
            "source", "origin", "evidence"]
    select = [c if c in have else "'own'" if c == "origin" else "NULL" for c in cols]
    spot = {r[0] for r in db.execute("SELECT case_id FROM spot_checks")} if "spot_checks" in _tables(db) else set()
    events = []
    for row in db.execute(f"SELECT {', '.join(select)} FROM human_labels ORDER BY labelled_at, rowid"):
        r = dict(zip(cols, row, strict=True))
        origin: labels.LabelOrigin = r["origin"] if r["origin"] in labels.LABEL_ORIGINS else "own"
        phase: labels.LabelPhase = ("adjudication" if origin == "reference" else
                                    "blind" if r["case_id"] in spot and origin == "own"
                                    and r["kind"] in labels.FROZEN_KINDS else "revealed")
        events.append(labels.LabelEvent(
            reviewer=r["reviewer"], case_id=r["case_id"], dimension=r["dimension"], deduction_id=r["deduction_id"],
            kind=r["kind"], op="set", value=r["value"], points=r["points"], comment=r["comment"],
            evidence=r["evidence"], origin=origin, phase=phase, source=r["source"] or "", at=r["labelled_at"] or 0.0))
    labels.insert_events(db, events)
    db.execute("DROP TABLE human_labels")


def _to_9(db: sqlite3.Connection) -> None:
    """spot_checks.part: the part of the spot check a case is in (``tuning`` or ``heldout``; NULL for a sample
    drawn before the split)."""
    if "spot_checks" in _tables(db) and "part" not in _columns(db, "spot_checks"):
        db.execute("ALTER TABLE spot_checks ADD COLUMN part TEXT CHECK (part IN ('tuning', 'heldout'))")


def _to_10(db: sqlite3.Connection) -> None:
    """label_events.copied_from and copied_seq (an event another run's labels were copied from, ``human copy``);
    heldout_looks (the comparisons made on a spot check's held-out part)."""
    have = _columns(db, "label_events")
    for col, sql_type in (("copied_from", "TEXT"), ("copied_seq", "INTEGER")):
        if col not in have:
            db.execute(f"ALTER TABLE label_events ADD COLUMN {col} {sql_type}")
    _run(db, SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS heldout_looks"):
                    SCHEMA.index("CREATE TABLE IF NOT EXISTS label_events")])


def _to_11(db: sqlite3.Connection) -> None:
    """cases: the run's cases one row a case, in their order, moved out of ``meta.cases`` (one JSON list) as they
    were stored; a ``meta.cases`` that is not a list of objects with a text ``id`` is a damaged store."""
    _run(db, SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS cases"):
                    SCHEMA.index("CREATE TABLE IF NOT EXISTS batches")])
    row = db.execute("SELECT value FROM meta WHERE key = 'cases'").fetchone()
    if row is None:
        return
    try:
        cases = json.loads(row[0])
    except (TypeError, ValueError, RecursionError) as e:
        raise InputError(f"meta 'cases' is not JSON ({type(e).__name__})") from None
    if not isinstance(cases, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in cases):
        raise InputError("meta 'cases' is not a list of cases with an id")
    db.executemany("INSERT INTO cases (position, case_id, body) VALUES (?, ?, ?)",
                   ((i, c["id"], json.dumps(c, ensure_ascii=False)) for i, c in enumerate(cases)))
    db.execute("DELETE FROM meta WHERE key = 'cases'")


#: ``STEPS[n]`` migrates a store of version ``n`` to ``n + 1`` (``STEPS[0]`` unused: there is no version 0)
STEPS: list[Callable[[sqlite3.Connection], None] | None] = [None, _to_2, _to_3, _to_4, _to_5, _to_6, _to_7, _to_8,
                                                            _to_9, _to_10, _to_11]
assert len(STEPS) == SCHEMA_VERSION


def _run(db: sqlite3.Connection, sql: str) -> None:
    """Run a DDL script statement by statement, inside the caller's transaction (``executescript`` would commit
    it first)."""
    for stmt in _statements(sql):
        db.execute(stmt)


def _statements(sql: str) -> list[str]:
    """The statements of a DDL script (a trigger's body kept whole)."""
    out, buf = [], []
    for line in sql.splitlines():
        if not line.strip() or line.lstrip().startswith("--"):
            continue
        buf.append(line)
        text = "\n".join(buf)
        if text.rstrip().endswith(";") and (not re.match(r"\s*CREATE TRIGGER", text, re.I)
                                             or re.search(r"\bEND;\s*$", text)):
            out.append(text)
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out


def version_of(db: sqlite3.Connection) -> int | str | None:
    """The store's schema version: ``PRAGMA user_version``, or the ``meta.schema_version`` a store before 8 keeps (the
    higher of the two, so that a newer store is recognised whichever it says); None for a store that says none (a
    new, empty one); the text of a ``meta.schema_version`` that is not a number."""
    uv = int(db.execute("PRAGMA user_version").fetchone()[0])
    meta = 0
    if "meta" in _tables(db):
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None:
            try:
                found = json.loads(row[0])
            except ValueError:
                return str(row[0])
            if not isinstance(found, int) or isinstance(found, bool):
                return repr(found)
            meta = found
    return max(uv, meta) or None


def check_version(found: int | str | None, path: object) -> None:
    """Refuse a store of a newer consensus-eval, or one whose version is not a version."""
    if found is None or (isinstance(found, int) and 1 <= found <= SCHEMA_VERSION):
        return
    if isinstance(found, int) and found > SCHEMA_VERSION:
        raise InputError(f"{path}: this store has schema version {found}, written by a newer consensus-eval; this "
                         f"version reads schema versions 1 to {SCHEMA_VERSION}: upgrade consensus-eval to read it")
    raise InputError(f"{path}: not a consensus-eval store (schema version {found}; this version reads schema "
                     f"versions 1 to {SCHEMA_VERSION})")


def upgrade(db: sqlite3.Connection, found: int | str | None) -> None:
    """Bring ``db`` (of version ``found``; None: a new store) to :data:`SCHEMA_VERSION`, one step per transaction
    (each step and its version bump commit together). ``db`` is in autocommit mode (``isolation_level=None``)."""
    if found == SCHEMA_VERSION:
        return
    if not isinstance(found, int):
        found = SCHEMA_VERSION if not ({"calls", "plan"} & _tables(db)) else 7
        if found == SCHEMA_VERSION:
            db.execute("BEGIN IMMEDIATE")
            try:
                _run(db, SCHEMA)
                _set_version(db, SCHEMA_VERSION)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return
    for n in range(found, SCHEMA_VERSION):
        step = STEPS[n]
        assert step is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            if version_of(db) == n:     # another process may have upgraded it meanwhile
                step(db)
                if n + 1 == SCHEMA_VERSION:
                    _run(db, SCHEMA)    # anything an older version created lazily (the team's tables)
                _set_version(db, n + 1)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def _set_version(db: sqlite3.Connection, n: int) -> None:
    db.execute(f"PRAGMA user_version = {int(n)}")
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (json.dumps(n),))


def in_memory_upgraded(db: sqlite3.Connection, found: int | str | None) -> sqlite3.Connection:
    """A copy of ``db`` in memory, upgraded to :data:`SCHEMA_VERSION` (``db`` itself is left as it is): how an older
    store is read read-only. ``db`` is closed."""
    mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        db.backup(mem)
        upgrade(mem, found)
    except BaseException:
        mem.close()
        raise
    finally:
        db.close()
    return mem
