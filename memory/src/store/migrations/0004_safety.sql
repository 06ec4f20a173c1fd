-- 4: approvals and review decisions (issue 5)
CREATE TABLE approvals (
    id          TEXT PRIMARY KEY,
    bot_id      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    owner       TEXT NOT NULL,
    turn_id     TEXT,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,   -- hex SHA-256 of the exact action
    summary     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    action      TEXT NOT NULL,   -- JSON: arguments and resolved scripts
    epoch       INTEGER NOT NULL, -- seq of the session's newest user message when asked
    status      TEXT NOT NULL,   -- pending | approved | denied | expired
    expired_by  TEXT,            -- ttl | user_message
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL, -- pending: decide before; approved: use before
    decided_at  INTEGER,
    decided_by  TEXT,
    consumed_at INTEGER
);
-- open approvals of a bot (pending, or approved and unused): the gate's
-- lookups; closed ones fall out of the index
CREATE INDEX approvals_open ON approvals(bot_id, fingerprint)
    WHERE status IN ('pending', 'approved') AND consumed_at IS NULL;
CREATE INDEX approvals_owner ON approvals(owner, created_at);
-- what auto-review asked about or blocked (shadow and enforce); allowed
-- actions are not logged
CREATE TABLE reviews (
    id          INTEGER PRIMARY KEY,
    bot_id      TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    turn_id     TEXT,
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    surface     TEXT NOT NULL,
    mode        TEXT NOT NULL,
    decision    TEXT NOT NULL,
    reason      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX reviews_bot ON reviews(bot_id, id);
