-- 18: starts of a turn over an input before any turn over it was stored.
-- A turn's row is written with its first step, so a host killed during a
-- turn's first model call left nothing counting the start: its inputs
-- came back as a new turn after each restart, forever. `starts` counts
-- the starts of turns over an input read back from the inbox (after a
-- restart, a retry, a late arrival; `Mutation::CountStart`), at most one
-- per process, taken back at a clean close; the turn whose row takes the
-- input sets it back to 0. Past `runtime.max_turn_attempts` the turn
-- fails with a retryable notice instead of running.
ALTER TABLE inbox ADD COLUMN starts INTEGER NOT NULL DEFAULT 0;
