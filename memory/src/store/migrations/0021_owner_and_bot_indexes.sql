-- 21: a user's sessions (`sessions_of_owner`: what an API search may read,
-- at every search) scanned every session of the fleet. Sessions are
-- written once, when first used, so the index costs nothing per turn.
-- (This migration also made `turns_bot` for an hour of 2026-12-03: one
-- index entry per turn start cost ~8% of the store writer's time under
-- fleet-load, for a bot's turn list alone; migration 22 drops it.)
CREATE INDEX sessions_owner ON sessions(owner, bot_id);
