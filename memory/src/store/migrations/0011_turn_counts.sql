-- 11: ended turns per bot and status, for `GET /v1/bots`.
-- Counting a bot's turns in `turns` scanned the whole table (its only
-- index is the partial `turns_open`), so the bot list cost bots × turns.
-- Here a count is one primary-key lookup. Running turns are not counted
-- here: `turns_open` holds them, a few entries per bot.
--
-- The writer keeps the counts in the transaction that ends a turn
-- (`Mutation::EndTurn`, the one write that changes a turn's status; a
-- turn starts running), so they stay exact through crashes, resumes and
-- retries (a retry is a new turn). A count that falls to 0 keeps its row;
-- readers skip it.
--
-- Measured at 300,000 turns (docs/performance.md, "The bot list's turn
-- counts"), in writer time per turn: this +4-6 µs; an index on
-- turns(bot_id, status) +17-20 µs (an index entry written at each start
-- and moved at each end, on pages spread over the bots), and a count
-- still walks every turn of the bot; triggers on `turns` keeping this
-- table +8-9 µs (a statement with triggers copies each page it changes
-- to a statement journal).
CREATE TABLE turn_counts (
    bot_id TEXT NOT NULL,
    status TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (bot_id, status)
) WITHOUT ROWID;
INSERT INTO turn_counts (bot_id, status, n)
    SELECT bot_id, status, COUNT(*) FROM turns WHERE status <> 'running'
    GROUP BY bot_id, status;
