-- 1: the host (bots, sessions, transcript, ledger, inbox, turns, tool calls)
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE bots (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    role       TEXT NOT NULL,
    provider   TEXT NOT NULL,
    tools      TEXT NOT NULL,
    settings   TEXT NOT NULL,
    origin     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX bots_owner ON bots(owner);
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    peer       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    epoch      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    UNIQUE (bot_id, kind, peer)
);
CREATE TABLE entries (
    gid        INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    kind       TEXT NOT NULL,
    author     TEXT NOT NULL,
    turn_id    TEXT,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (session_id, seq)
);
-- entry ids are not indexed: derived ids are random, and an index on
-- them costs a random page write per entry; look entries up by
-- (session, seq) instead
CREATE TABLE ledger (
    source     TEXT NOT NULL,
    nonce      TEXT NOT NULL,
    digest     TEXT NOT NULL,
    bot_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    gid        INTEGER NOT NULL,
    entry_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (source, nonce)
) WITHOUT ROWID;
CREATE INDEX ledger_age ON ledger(created_at);
CREATE TABLE inbox (
    gid        INTEGER PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    priority   INTEGER NOT NULL,
    turn_id    TEXT
);
-- only pending rows are indexed, so the index stays a few pages
CREATE INDEX inbox_pending ON inbox(bot_id, gid) WHERE turn_id IS NULL;
CREATE TABLE turns (
    id         TEXT PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status     TEXT NOT NULL,
    inputs     TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    error      TEXT,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER
);
CREATE INDEX turns_open ON turns(bot_id) WHERE status = 'running';
CREATE TABLE tool_calls (
    turn_id    TEXT NOT NULL,
    call_id    TEXT NOT NULL,
    ordinal    INTEGER NOT NULL,
    name       TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    status     TEXT NOT NULL,
    outcome    TEXT,
    is_error   INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER,
    ended_at   INTEGER,
    PRIMARY KEY (turn_id, call_id)
) WITHOUT ROWID;

