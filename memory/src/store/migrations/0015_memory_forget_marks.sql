-- 15: what a Forget forgot, for the fact extractions still to land. An
-- extraction runs after its turn, in the background, and after a restart
-- maybe much later (`extractions_owed`, migration 12): an add it proposes
-- from what a person said before a Forget must not bring back what the
-- Forget removed (layers/forget_marks.rs, docs/memory.md "Forgetting").
-- One row per scope a Forget reached: `needle` is the text a Forget by
-- text matched on (comparison form, contained in a text = forgotten);
-- `text_hash` is the SHA-256 of the comparison form of an item forgotten
-- by id (equal = forgotten; the text itself is not kept). Rows are pruned
-- once no extraction can predate them (the oldest owed or running turn,
-- and at least an hour), so the table holds seconds to hours of Forgets.
CREATE TABLE memory_forget_marks (
    scope_kind   TEXT NOT NULL,
    scope_id     TEXT NOT NULL,
    needle       TEXT,
    text_hash    TEXT,
    forgotten_at INTEGER NOT NULL
);
CREATE INDEX memory_forget_marks_scope
    ON memory_forget_marks(scope_kind, scope_id, forgotten_at);
