-- 19: from where each user reads a room that was shared with them.
-- A room's owner reads its whole timeline; another user reads it only
-- from the `members_changed` notice of the change that first gave one of
-- their bots a seat in it (again after they had none): what was said
-- before, while the room was not theirs to read (perhaps its owner's
-- alone, answered from her private memory), stays hidden from them and
-- from their bots (GET /v1/groups/{room}/entries, search, a new member's
-- first room input). No row: the user reads the room from its start
-- (rooms shared before this migration, as before).
CREATE TABLE room_audience (
    room_id   TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    from_seq  INTEGER NOT NULL,
    since     INTEGER NOT NULL,
    PRIMARY KEY (room_id, user_id)
) WITHOUT ROWID;
CREATE INDEX room_audience_user ON room_audience (user_id);
