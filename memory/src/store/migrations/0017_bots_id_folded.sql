-- 17: bot ids compared ignoring case. A new bot (CreateAgent, a
-- subagent's Task) is refused when its id equals a held one but for case
-- (`writer_entries.rs`, `create_bot`: mentions ignore case, so `B1` and
-- `b1` could not be told apart). Without this index that check read every
-- bot inside the writer's transaction at each Task. Not unique: a store
-- from before the check may hold two such ids, and opening it must not
-- fail; new ones are refused by the insert.
CREATE INDEX bots_id_folded ON bots(lower(id));
