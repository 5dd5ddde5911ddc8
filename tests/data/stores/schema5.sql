-- the store's DDL at schema 5 (consensus_eval's _SCHEMA at commit 9fd72a9)
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
    source       TEXT NOT NULL,
    origin       TEXT NOT NULL DEFAULT 'own' CHECK (origin IN ('own', 'accepted')),
    evidence     TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS human_labels_key
    ON human_labels (reviewer, kind, case_id, ifnull(dimension, ''), ifnull(deduction_id, ''));
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
CREATE TABLE IF NOT EXISTS spot_checks (
    case_id     TEXT PRIMARY KEY,
    position    INTEGER NOT NULL,
    probability REAL NOT NULL CHECK (probability > 0 AND probability <= 1),
    stratum     TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    drawn_at    REAL NOT NULL
);
