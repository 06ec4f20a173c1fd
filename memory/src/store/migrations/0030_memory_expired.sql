-- 30: notes purged past their expiry leave their id, scope and expiry
-- here, as forgotten items do, so that an id shown while the note lived
-- still answers "expired at ..." once a later write to its scope purged it
-- (it answered "no memory item" then, as for an id that never existed;
-- QA 2026-12-06). NULL for items forgotten otherwise.
ALTER TABLE memory_forgotten ADD COLUMN expired_at INTEGER;
