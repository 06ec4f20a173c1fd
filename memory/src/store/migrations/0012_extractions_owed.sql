-- 12: fact extractions owed. A completed turn's fact extraction runs in
-- the background after the reply; a row here says it has not finished
-- yet, so an extraction cut off by a crash or a restart runs again at the
-- next start (`actors/src/memory/extract.rs`, `docs/memory.md`). The row
-- holds what the extraction reads (the ids the turn showed, the owner's
-- messages, the final reply) because the re-run must not depend on how
-- the turn's transcript reads later. Rows live seconds: written right
-- after the turn ends, deleted with the extraction's usage write; only
-- cut-off extractions stay, at most a few per bot.
CREATE TABLE extractions_owed (
    turn_id    TEXT PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    session_id TEXT NOT NULL,
    job        TEXT NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
