-- 24: bot names compared as mentions compare them. CreateAgent and
-- UpdateAgent refuse a name (or id) another bot already answers to
-- (`name_key`: NFKC, lowercase, no spaces or invisible characters), which
-- read every bot record of the fleet at every such call. SQLite cannot
-- fold names so, so the writer stores each bot's folded name with it, and
-- the check looks up the few bots that answer to the new words
-- (`bots_answering_to`; ids, ASCII, fold with `lower`: migration 17).
-- The rows already stored get theirs in this migration's transaction
-- (`schema.rs`, `fill_name_keys`); a row written by anything else, NULL
-- here, is still found (and folded) by the check. A change to how
-- `name_key` folds needs a migration that folds the stored names again.
ALTER TABLE bots ADD COLUMN name_key TEXT;
CREATE INDEX bots_name_key ON bots(name_key);
