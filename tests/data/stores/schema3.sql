-- the store's DDL at schema 3 (consensus_eval's _SCHEMA at commit 8d395e6)
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
CREATE TABLE IF NOT EXISTS human_labels (
    case_id      TEXT NOT NULL,
    dimension    TEXT,
    deduction_id TEXT,
    reviewer     TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('score', 'verdict', 'comment', 'added_deduction', 'categories')),
    value,
    points       REAL,
    comment      TEXT,
    labelled_at  REAL NOT NULL,
    source       TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS human_labels_key
    ON human_labels (reviewer, kind, case_id, ifnull(dimension, ''), ifnull(deduction_id, ''));
