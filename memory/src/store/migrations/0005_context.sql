-- 5: token usage per bot and day (per-turn usage is in the turn_end entry)
CREATE TABLE bot_usage (
    bot_id            TEXT NOT NULL,
    day               TEXT NOT NULL,   -- UTC date, YYYY-MM-DD
    turns             INTEGER NOT NULL,
    calls             INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    prefix_tokens     INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    PRIMARY KEY (bot_id, day)
) WITHOUT ROWID;
