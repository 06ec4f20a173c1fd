-- 3: memory layers: profile, log, notes (issue 3)
-- One row per item. `norm` is the comparison key (whitespace collapsed,
-- lowercased): the same text in the same scope and layer is one item.
-- `chars` counts Unicode scalar values, as the limits do. `terms` are the
-- recall terms of the text (layers/recall.rs), kept so that ranking the log
-- at prompt time does not tokenize.
CREATE TABLE memory (
    id         TEXT PRIMARY KEY,
    scope_kind TEXT NOT NULL,
    scope_id   TEXT NOT NULL,
    layer      TEXT NOT NULL,
    text       TEXT NOT NULL,
    norm       TEXT NOT NULL,
    chars      INTEGER NOT NULL,
    terms      TEXT NOT NULL,
    importance INTEGER NOT NULL,
    source     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER
) WITHOUT ROWID;
CREATE INDEX memory_scope ON memory(scope_kind, scope_id, layer, norm);
-- Ids of forgotten items and their scope, so that forgetting twice is not
-- an error; the text is not kept.
CREATE TABLE memory_forgotten (
    id           TEXT PRIMARY KEY,
    scope_kind   TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    forgotten_at INTEGER NOT NULL
) WITHOUT ROWID;
