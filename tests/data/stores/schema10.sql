-- the store's DDL at schema 10 (consensus_eval's SCHEMA at commit f4c54b9)
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

CREATE TABLE IF NOT EXISTS label_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id    TEXT,
    reviewer     TEXT NOT NULL,
    case_id      TEXT NOT NULL,
    dimension    TEXT,
    deduction_id TEXT,
    kind         TEXT CHECK (kind IN ('score', 'verdict', 'comment', 'added_deduction', 'categories', 'criterion')),
    op           TEXT NOT NULL CHECK (op IN ('set', 'clear', 'reveal')),
    value,
    points       REAL,
    comment      TEXT,
    evidence     TEXT,
    origin       TEXT NOT NULL DEFAULT 'own' CHECK (origin IN ('own', 'accepted', 'reference')),
    phase        TEXT NOT NULL CHECK (phase IN ('blind', 'revealed', 'adjudication')),
    session      TEXT,
    source       TEXT NOT NULL,
    at           REAL NOT NULL,
    copied_from  TEXT,
    copied_seq   INTEGER,
    CHECK ((op = 'reveal') = (kind IS NULL))
);
CREATE INDEX IF NOT EXISTS label_events_case ON label_events (case_id, reviewer);
CREATE INDEX IF NOT EXISTS label_events_reviewer ON label_events (reviewer);
CREATE TABLE IF NOT EXISTS label_actions (
    reviewer  TEXT NOT NULL,
    action_id TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (reviewer, action_id)
);
CREATE TRIGGER IF NOT EXISTS label_events_append_only_update BEFORE UPDATE ON label_events
BEGIN SELECT RAISE(ABORT, 'label_events is append-only: a change is a new event'); END;
CREATE TRIGGER IF NOT EXISTS label_events_append_only_delete BEFORE DELETE ON label_events
BEGIN SELECT RAISE(ABORT, 'label_events is append-only: a label cleared is a clear event'); END;
