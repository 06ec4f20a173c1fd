-- 16: whose messages an owed fact extraction holds. A turn's extraction
-- reads its bot owner's messages and writes what it learns to that
-- owner's memory; an owner change (fleet.toml, at a start) between the
-- turn and a re-run of its cut-off extraction must not carry the former
-- owner's words into the new owner's memory, so the row records the owner
-- of the turn and the re-run is dropped when the bot's owner is another
-- (`actors/src/memory/extract_owed.rs`, docs/memory.md). Rows owed before
-- this migration get their bot's owner as stored now: a migration runs
-- when the store opens, before the start applies fleet.toml, so that is
-- still the owner of the turn. A row whose bot is not stored is dropped
-- (its re-run would be given up: its bot is gone).
ALTER TABLE extractions_owed ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';
UPDATE extractions_owed
   SET owner_id = COALESCE((SELECT owner FROM bots WHERE bots.id = extractions_owed.bot_id), '');
DELETE FROM extractions_owed WHERE owner_id = '';
