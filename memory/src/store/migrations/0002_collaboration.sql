-- 2: group rooms, routines, subagent delegations (issue 4)
-- (reserved; filled in by the feature)
SELECT 1;

-- rooms
-- A group room (actors/src/group): members in their fixed speaking order
-- (JSON array of bot ids). Its public timeline is the session
-- {bot: <room id>, kind: room, peer: timeline}.
CREATE TABLE rooms (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    members    TEXT NOT NULL,
    shared     INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX rooms_owner ON rooms(owner);
-- One row per user message posted to a room: the run it started. The row
-- is written in the same transaction as the message; `state` is the
-- coordinator's checkpoint (round, position, counts, member cursors),
-- replaced together with every public reply it publishes.
CREATE TABLE room_runs (
    room_id     TEXT NOT NULL,
    trigger_seq INTEGER NOT NULL,
    status      TEXT NOT NULL,      -- running | done
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (room_id, trigger_seq)
) WITHOUT ROWID;
CREATE INDEX room_runs_open ON room_runs(room_id, trigger_seq) WHERE status = 'running';

-- routines
-- One row per (bot, routine): the definition and the schedule's progress.
-- `next_fire_ms` is the next slot (UTC ms); a fire admits its input and
-- moves `next_fire_ms` in one transaction, so a slot fires at most once.
CREATE TABLE routines (
    bot_id       TEXT NOT NULL,
    name         TEXT NOT NULL,
    cron         TEXT NOT NULL,
    timezone     TEXT NOT NULL,
    prompt       TEXT NOT NULL,
    silent_ok    INTEGER NOT NULL,
    catch_up     TEXT NOT NULL,
    origin       TEXT NOT NULL,
    next_fire_ms INTEGER,
    last_fire_ms INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (bot_id, name)
) WITHOUT ROWID;
