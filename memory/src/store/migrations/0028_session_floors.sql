-- 28: where a new owner starts reading a session given to them. A bot's
-- own session of a group room belongs to the bot's owner; when the bot is
-- given to another user in fleet.toml the session goes with it (its
-- former owner, who may have lost the room, no longer reads what the
-- room says to it), and its new owner reads it from the change on: what
-- it saw there before, while the room was not theirs to read, stays
-- hidden from them, as the room's own timeline does (room_audience).
-- `since` (ms) hides the turns and reviews from before the change.
CREATE TABLE session_floors (
    session_id TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    from_seq   INTEGER NOT NULL,
    since      INTEGER NOT NULL
);
CREATE INDEX session_floors_user ON session_floors(user_id);
