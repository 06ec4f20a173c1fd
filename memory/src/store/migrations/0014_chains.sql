-- 14: chains of bot-to-bot messages, by the input that started them (a
-- person's message, a routine's run, a webhook's delivery: its entry id).
-- `messages` counts the chain's messages between bots as they are written
-- (`runtime.max_chain_messages` bounds it); `told` is 1 once the chain's
-- person was told it was cut off (one notice per chain, across restarts).
-- Chains started before this migration have no row: they are not counted.
CREATE TABLE chains (
    origin TEXT PRIMARY KEY,
    messages INTEGER NOT NULL DEFAULT 0,
    told INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
