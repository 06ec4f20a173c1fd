-- 22: `turns_bot`, made by migration 21 as first written (2026-12-03),
-- goes: an index entry per turn start cost ~8% of the store writer's time
-- under fleet-load, for `GET /v1/bots/{bot}/turns` alone, which reads
-- the table backwards and now stops once it has the bot's turns
-- (`turn_counts`: a bot without turns reads nothing).
DROP INDEX IF EXISTS turns_bot;
