-- 13: closing group rooms. `closed_at` (ms) is set once by the room's
-- owner (`DELETE /v1/groups/{group}`): a closed room takes no more
-- messages and no member changes, but keeps its timeline readable and
-- searchable (nothing is deleted). NULL while the room is open; rooms
-- made before this migration are open.
ALTER TABLE rooms ADD COLUMN closed_at INTEGER;
