-- 9: which tool call forgot an item (`<turn>/<call id>`), so that a Forget
-- by text run again after a crash answers what that call forgot instead of
-- "nothing matches" (layers/apply.rs, MemoryOp::RemoveByCall). NULL for
-- items forgotten otherwise (by id, by the fact extraction, through the
-- API) and for rows from before this migration. Partial index: only rows
-- a call forgot are in it.
ALTER TABLE memory_forgotten ADD COLUMN forgotten_by TEXT;
CREATE INDEX memory_forgotten_by ON memory_forgotten(forgotten_by)
    WHERE forgotten_by IS NOT NULL;
