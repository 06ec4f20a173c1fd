-- 21: two reads that walked a whole table.
-- * A user's sessions (`sessions_of_owner`: what an API search may read,
--   at every search) scanned every session of the fleet. Sessions are
--   written once, when first used, so the index costs nothing per turn.
-- * A bot's turn list (`GET /v1/bots/{bot}/turns`) read the turns table
--   backwards until it found its turns: a bot that did little read the
--   whole table (~200 ms at 1,000,000 turns, per request). One index
--   entry per turn start.
CREATE INDEX sessions_owner ON sessions(owner, bot_id);
CREATE INDEX turns_bot ON turns(bot_id);
