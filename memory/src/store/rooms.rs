//! Group rooms and their runs: the SQL behind the room mutations (called by
//! the writer inside its transaction) and the room reads (called on pooled
//! read connections). Tables: migration 0002, under `-- rooms`.

use rusqlite::Connection;
use rusqlite::ErrorCode;
use rusqlite::OptionalExtension;
use rusqlite::params;
use serde_json::Value;

use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::RoomId;
use crate::ids::UserId;
use crate::record::RoomRecord;
use crate::record::RoomRunRecord;
use crate::record::RoomRunStatus;

fn corrupt(table: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

// ---- writes (on the writer's connection, inside its transaction) ----

/// Inserts a new room; refuses an id that is taken, ignoring case: bot
/// ids and mentions ignore case, so rooms `r1` and `R1` side by side
/// could not be told apart by people. Checked here, in the writer's
/// transaction, so two creations cannot both pass. Room ids are one
/// namespace for the whole fleet: a clash with another user's room must
/// not tell the creator that room's spelling or whose it is.
/// Of `ids`, those a room holds, ignoring case: `(id asked, the room's
/// id)` each (`Store::rooms_holding`, and `peek_rooms_holding` for
/// `botfleet check-config`).
pub(crate) fn rooms_holding(conn: &Connection, ids: &[String]) -> Result<Vec<(String, String)>> {
    let mut held = Vec::new();
    let mut stmt =
        conn.prepare_cached("SELECT id FROM rooms WHERE id = ?1 COLLATE NOCASE LIMIT 1")?;
    for id in ids {
        let room: Option<String> = stmt.query_row([id], |r| r.get(0)).optional()?;
        if let Some(room) = room {
            held.push((id.clone(), room));
        }
    }
    Ok(held)
}

pub(crate) fn create_room(conn: &Connection, room: &RoomRecord) -> Result<()> {
    // room and bot ids meet in search hits (`bot`) and in the transcript
    // files' directories (`transcripts/<id>/`): a room takes no bot's id,
    // whoever's, in any case (QA: room `b1` beside bot b1); decided here,
    // as `create_bot` refuses a room's id, so the two cannot race
    let bot_holds: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM bots WHERE lower(id) = lower(?1))")?
        .query_row(params![room.id.as_str()], |r| r.get(0))?;
    if bot_holds {
        return Err(StoreError::Rejected(format!(
            "the id {:?} is taken by a bot: rooms and bots share search results and the \
             transcript files' directories, so a room takes no bot's id; pass another `id`",
            room.id.as_str()
        )));
    }
    let existing: Option<(String, String)> = conn
        .prepare_cached("SELECT id, owner FROM rooms WHERE id = ?1 COLLATE NOCASE LIMIT 1")?
        .query_row(params![room.id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if let Some((existing, owner)) = existing {
        // only the room's owner is told its spelling (a member's owner,
        // who sees a shared room too, lists it with GET /v1/groups)
        let seen = (owner == room.owner.as_str()).then_some(existing.as_str());
        return Err(taken(seen, room.id.as_str()));
    }
    let members = serde_json::to_string(&room.members).map_err(|e| corrupt("rooms", e))?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO rooms (id, name, owner, members, shared, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        // the record's times: the answer to its creation is what a read
        // gives (the writer's clock read them a millisecond or two later)
        .execute(params![
            room.id.as_str(),
            room.name,
            room.owner.as_str(),
            members,
            room.shared,
            room.created_at,
            room.updated_at
        ]);
    match inserted {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == ErrorCode::ConstraintViolation => {
            Err(taken(None, room.id.as_str()))
        }
        Err(e) => Err(e.into()),
    }
}

/// The refusal of room id `wanted` because a room holds it (perhaps in
/// another case): `seen` is that room's id when the creator may see the
/// room, `None` when not (then only the id asked for is named).
fn taken(seen: Option<&str>, wanted: &str) -> StoreError {
    StoreError::Rejected(taken_message(seen, wanted))
}

/// The text of [`taken`].
fn taken_message(seen: Option<&str>, wanted: &str) -> String {
    match seen {
        Some(existing) if existing == wanted => {
            format!("a room \"{existing}\" already exists; choose another name or id")
        }
        Some(existing) => format!(
            "a room \"{existing}\" already exists, and room ids ignore case, so \"{wanted}\" \
             would be taken for it; choose another name or id"
        ),
        None => format!(
            "the room id \"{wanted}\" is taken: room ids are shared by all users of the fleet \
             and ignore case; choose another name or id"
        ),
    }
}

/// Decides again whether each room with `bot` or one of its subagents as
/// a member is shared, from its members' current owners: shared when one
/// of them (or a member without a bot record) is not the room owner's,
/// the rule `create_room` applies (actors/src/group/room.rs). Called when
/// `bot`'s owner (and so its subagents') may have changed, in the
/// writer's transaction. Returns the rooms that changed, with their new
/// value.
///
/// A room that becomes shared this way (a member given to another user
/// in fleet.toml) was its owner's alone until now: as with a change of
/// members that gives it to someone (`audience::newcomers`), each other
/// user with a member in it reads its timeline from the next entry on
/// (the start's notice of it, `actors/src/group/given.rs`), not what was
/// said while it was private.
pub(crate) fn follow_member_owners(
    conn: &Connection,
    bot: &BotId,
    now: i64,
) -> Result<Vec<(RoomId, bool)>> {
    let mut stmt = conn.prepare_cached(
        "WITH current (id, shared) AS (
           SELECT r.id, EXISTS (
             SELECT 1 FROM json_each(r.members) m LEFT JOIN bots b ON b.id = m.value
             WHERE b.owner IS NULL OR b.owner != r.owner)
           FROM rooms r
           WHERE EXISTS (
             SELECT 1 FROM json_each(r.members) m
             WHERE m.value = ?1 OR m.value IN (SELECT id FROM subagents WHERE parent = ?1)))
         UPDATE rooms SET shared = current.shared, updated_at = ?2
         FROM current WHERE rooms.id = current.id AND rooms.shared != current.shared
         RETURNING rooms.id, rooms.shared",
    )?;
    let rows = stmt.query_map(params![bot.as_str(), now], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
    })?;
    let mut changed = Vec::new();
    for row in rows {
        let (id, shared) = row?;
        changed.push((RoomId::new(id)?, shared));
    }
    for (room, shared) in &changed {
        if *shared {
            admit_other_owners(conn, room, now)?;
        }
    }
    Ok(changed)
}

/// Every user but its owner with a member in `room` (a room that was
/// its owner's alone) reads its timeline from the next entry on.
fn admit_other_owners(conn: &Connection, room: &RoomId, now: i64) -> Result<()> {
    let users: Vec<String> = conn
        .prepare_cached(
            "SELECT DISTINCT b.owner FROM rooms r, json_each(r.members) m
             JOIN bots b ON b.id = m.value
             WHERE r.id = ?1 AND b.owner != r.owner ORDER BY b.owner",
        )?
        .query_map(params![room.as_str()], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let users = users
        .into_iter()
        .map(UserId::new)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    audience::admit(conn, room, &users, next_timeline_seq(conn, room)?, now)
}

/// The writer's next seq of `room`'s timeline: this connection sees the
/// entries its open transaction wrote.
fn next_timeline_seq(conn: &Connection, room: &RoomId) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM entries WHERE session_id = ?1")?
        .query_row(
            params![crate::record::room_timeline(room).id().to_string()],
            |r| r.get(0),
        )?)
}

/// `bot` (and its subagents, which follow it) went from `former` to
/// another owner in the fleet's config, in the writer's transaction,
/// after [`follow_member_owners`]. In each shared room it or one of its
/// subagents is in, not the new owner's, where no other member is theirs,
/// the new owner gains the room with this change, as with a change of
/// members (`audience::newcomers`): they read its timeline from the next
/// entry on (the start's notice, `actors/src/group/given.rs`), not what
/// was said there before. This covers a room that was shared already
/// (carol's bot in alice's room given to bob); one that was its owner's
/// alone got the same floor from `follow_member_owners`.
pub(crate) fn admit_new_owner(
    conn: &Connection,
    bot: &BotId,
    former: &UserId,
    now: i64,
) -> Result<()> {
    let Some(owner) = conn
        .prepare_cached("SELECT owner FROM bots WHERE id = ?1")?
        .query_row(params![bot.as_str()], |r| r.get::<_, String>(0))
        .optional()?
    else {
        return Ok(());
    };
    let rooms: Vec<String> = conn
        .prepare_cached(
            "WITH moved (id) AS (SELECT ?1 UNION SELECT id FROM subagents WHERE parent = ?1)
             SELECT r.id FROM rooms r
             WHERE r.shared = 1 AND r.owner != ?2
               AND EXISTS (SELECT 1 FROM json_each(r.members) m WHERE m.value IN moved)
               AND NOT EXISTS (
                 SELECT 1 FROM json_each(r.members) m JOIN bots b ON b.id = m.value
                 WHERE b.owner = ?2 AND m.value NOT IN moved)
             ORDER BY r.id",
        )?
        .query_map(params![bot.as_str(), owner], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let user = UserId::new(owner)?;
    for room in rooms {
        let room = RoomId::new(room)?;
        tracing::info!(%bot, %former, owner = %user, %room, "a member given to another owner gives them the room from its next entry on");
        let next = next_timeline_seq(conn, &room)?;
        audience::admit(conn, &room, std::slice::from_ref(&user), next, now)?;
    }
    Ok(())
}

/// The refusal of a change to a closed room (`what` is refused).
fn closed(room: &RoomId, what: &str) -> StoreError {
    StoreError::Rejected(format!(
        "the room is closed: {room} {what}. Its timeline stays readable; create a new room \
         (POST /v1/groups) to go on"
    ))
}

/// A room's members and close time, read in the writer's transaction.
fn members_and_closed(conn: &Connection, room: &RoomId) -> Result<(Vec<BotId>, Option<i64>)> {
    let row: Option<(String, Option<i64>)> = conn
        .prepare_cached("SELECT members, closed_at FROM rooms WHERE id = ?1")?
        .query_row(params![room.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((members, closed_at)) = row else {
        return Err(StoreError::NotFound {
            what: "room",
            id: room.to_string(),
        });
    };
    let members = serde_json::from_str(&members).map_err(|e| corrupt("rooms", e))?;
    Ok((members, closed_at))
}

/// Refuses a message to room `room` from `poster` unless the room, read
/// in the writer's transaction (after the ledger accepted the message),
/// still is as the message was decided from: open, with `members` and
/// `shared`, and usable by `poster` (its owner, or in a shared room the
/// owner of one of its members). The caller picked the addressed members
/// and may-use from an earlier read; checked here, no post can land
/// after a member change with members or an access from before it (a
/// retry of one accepted before still answers `duplicate`).
pub(crate) fn ensure_postable(
    conn: &Connection,
    room: &RoomId,
    poster: &UserId,
    members: &[BotId],
    shared: bool,
) -> Result<()> {
    let row: Option<(String, String, bool, Option<i64>)> = conn
        .prepare_cached("SELECT owner, members, shared, closed_at FROM rooms WHERE id = ?1")?
        .query_row(params![room.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((owner, current, current_shared, closed_at)) = row else {
        return Err(StoreError::NotFound {
            what: "room",
            id: room.to_string(),
        });
    };
    if closed_at.is_some() {
        return Err(closed(room, "takes no more messages"));
    }
    let current: Vec<BotId> = serde_json::from_str(&current).map_err(|e| corrupt("rooms", e))?;
    if current != members || current_shared != shared {
        return Err(StoreError::Rejected(format!(
            "the members of room {room} changed while this message was posted, so it was not \
             posted; read the room again (GET /v1/groups/{room}) and post it again"
        )));
    }
    if owner == poster.as_str() {
        return Ok(());
    }
    let member_owner: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM json_each(?1) m JOIN bots b ON b.id = m.value
             WHERE b.owner = ?2)",
        )?
        .query_row(
            params![
                serde_json::to_string(members).map_err(|e| corrupt("rooms", e))?,
                poster.as_str()
            ],
            |r| r.get(0),
        )?;
    if shared && member_owner {
        Ok(())
    } else {
        Err(StoreError::Rejected(format!(
            "{poster} may not post in room {room}: none of its members is theirs any more"
        )))
    }
}

/// Replaces a room's members with `to` (and its `shared` flag), if they
/// are still `from`: the caller read `from` and wrote the notice of the
/// change from it, so a change that landed in between is refused rather
/// than described wrongly. `Ok(false)` when they already are `to`
/// (nothing is written). Refused for a closed room.
pub(crate) fn set_members(
    conn: &Connection,
    room: &RoomId,
    from: &[BotId],
    to: &[BotId],
    shared: bool,
    now: i64,
) -> Result<bool> {
    let (current, closed_at) = members_and_closed(conn, room)?;
    if closed_at.is_some() {
        return Err(closed(room, "takes no more member changes"));
    }
    if current == to {
        return Ok(false);
    }
    if current != from {
        return Err(StoreError::Rejected(format!(
            "the members of room {room} changed while this change was made; read the room \
             again (GET /v1/groups/{room} or `botfleet group list`) and send the list again"
        )));
    }
    let members = serde_json::to_string(to).map_err(|e| corrupt("rooms", e))?;
    conn.prepare_cached(
        "UPDATE rooms SET members = ?2, shared = ?3, updated_at = ?4 WHERE id = ?1",
    )?
    .execute(params![room.as_str(), members, shared, now])?;
    Ok(true)
}

/// Closes a room. `Ok(false)` when it was already closed (its close time
/// is kept).
pub(crate) fn close_room(conn: &Connection, room: &RoomId, now: i64) -> Result<bool> {
    if members_and_closed(conn, room)?.1.is_some() {
        return Ok(false);
    }
    conn.prepare_cached("UPDATE rooms SET closed_at = ?2, updated_at = ?2 WHERE id = ?1")?
        .execute(params![room.as_str(), now])?;
    Ok(true)
}

/// Inserts the run a user message started (the message is `trigger_seq` of
/// the room timeline).
pub(crate) fn insert_run(
    conn: &Connection,
    room: &RoomId,
    trigger_seq: i64,
    state: &Value,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO room_runs (room_id, trigger_seq, status, state, created_at, updated_at)
         VALUES (?1, ?2, 'running', ?3, ?4, ?4)",
    )?
    .execute(params![room.as_str(), trigger_seq, state.to_string(), now])?;
    Ok(())
}

/// Replaces a run's status and state.
pub(crate) fn save_run(
    conn: &Connection,
    room: &RoomId,
    trigger_seq: i64,
    status: RoomRunStatus,
    state: &Value,
    now: i64,
) -> Result<()> {
    let n = conn
        .prepare_cached(
            "UPDATE room_runs SET status = ?3, state = ?4, updated_at = ?5
             WHERE room_id = ?1 AND trigger_seq = ?2",
        )?
        .execute(params![
            room.as_str(),
            trigger_seq,
            status.as_str(),
            state.to_string(),
            now
        ])?;
    if n == 0 {
        return Err(StoreError::NotFound {
            what: "room run",
            id: format!("{room}#{trigger_seq}"),
        });
    }
    Ok(())
}

// ---- reads ----

const ROOM_COLUMNS: &str = "id, name, owner, members, shared, created_at, updated_at, closed_at";

fn query_rooms(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<RoomRecord>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {ROOM_COLUMNS} FROM rooms {filter}"))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, bool>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
            r.get::<_, Option<i64>>(7)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, name, owner, members, shared, created_at, updated_at, closed_at) = row?;
        out.push(RoomRecord {
            id: RoomId::new(id)?,
            name,
            owner: UserId::new(owner)?,
            members: serde_json::from_str::<Vec<BotId>>(&members)
                .map_err(|e| corrupt("rooms", e))?,
            shared,
            created_at,
            updated_at,
            closed_at,
        });
    }
    Ok(out)
}

/// The room with id `id`, ignoring case as creation does (`create_room`
/// keeps ids that differ only in case from both existing, so at most one
/// matches): a room made as `Mix` is found as `mix` too.
pub(crate) fn get_room(conn: &Connection, id: &RoomId) -> Result<Option<RoomRecord>> {
    Ok(query_rooms(
        conn,
        "WHERE id = ?1 COLLATE NOCASE LIMIT 1",
        params![id.as_str()],
    )?
    .pop())
}

/// The rooms user `?1` owns and every shared room, by id: two index
/// searches, `rooms_owner` and the partial index `rooms_shared`
/// (migration 27), joined by SQLite's OR (only the rooms found are
/// sorted). Before that index it scanned every room of the fleet, each
/// user's private rooms included.
pub(crate) const ROOMS_FOR: &str = "WHERE owner = ?1 OR shared = 1 ORDER BY id";

/// Every room not closed, by id.
pub(crate) fn open_rooms(conn: &Connection) -> Result<Vec<RoomRecord>> {
    query_rooms(conn, "WHERE closed_at IS NULL ORDER BY id", [])
}

/// Rooms a user owns, plus every shared room (the caller decides which of
/// those the user may see): see [`ROOMS_FOR`].
pub(crate) fn rooms_for(conn: &Connection, user: &UserId) -> Result<Vec<RoomRecord>> {
    query_rooms(conn, ROOMS_FOR, params![user.as_str()])
}

const RUN_COLUMNS: &str = "room_id, trigger_seq, status, state, created_at, updated_at";

fn query_runs(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<RoomRunRecord>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM room_runs {filter}"))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (room, trigger_seq, status, state, created_at, updated_at) = row?;
        out.push(RoomRunRecord {
            room: RoomId::new(room)?,
            trigger_seq,
            status: RoomRunStatus::parse(&status)
                .ok_or_else(|| corrupt("room_runs", format!("status {status}")))?,
            state: serde_json::from_str(&state).map_err(|e| corrupt("room_runs", e))?,
            created_at,
            updated_at,
        });
    }
    Ok(out)
}

/// The filter of [`open_runs`]. Named index: without statistics SQLite
/// takes the primary key `(room_id, trigger_seq)` for it, which walks
/// every run the room ever had (each row with its checkpoint) and keeps
/// the running one; the coordinator reads this at every run start and
/// the room's SendMessage at every reply, so a room's replies grew slower
/// with its history (~1 ms more per reply after 300 discussions).
pub(crate) const OPEN_RUNS: &str =
    "INDEXED BY room_runs_open WHERE room_id = ?1 AND status = 'running' ORDER BY trigger_seq";

/// A room's unfinished runs, oldest first.
pub(crate) fn open_runs(conn: &Connection, room: &RoomId) -> Result<Vec<RoomRunRecord>> {
    query_runs(conn, OPEN_RUNS, params![room.as_str()])
}

/// A room's oldest unfinished run: the one in progress, or the next to
/// start (runs of a room are sequential). One row, however many messages
/// wait behind it: read at every run start and every SendMessage in the
/// room, where reading every open run (each with its checkpoint) made a
/// reply's cost grow with the room's backlog.
pub(crate) fn oldest_open_run(conn: &Connection, room: &RoomId) -> Result<Option<RoomRunRecord>> {
    Ok(query_runs(conn, OLDEST_OPEN_RUN, params![room.as_str()])?.pop())
}

/// The filter of [`oldest_open_run`]: [`OPEN_RUNS`], first row only.
pub(crate) const OLDEST_OPEN_RUN: &str = "INDEXED BY room_runs_open WHERE room_id = ?1 AND status = 'running' ORDER BY trigger_seq LIMIT 1";

/// A room's newest finished run.
pub(crate) fn last_done_run(conn: &Connection, room: &RoomId) -> Result<Option<RoomRunRecord>> {
    Ok(query_runs(
        conn,
        "WHERE room_id = ?1 AND status = 'done' ORDER BY trigger_seq DESC LIMIT 1",
        params![room.as_str()],
    )?
    .pop())
}

/// One run.
pub(crate) fn get_run(
    conn: &Connection,
    room: &RoomId,
    trigger_seq: i64,
) -> Result<Option<RoomRunRecord>> {
    Ok(query_runs(
        conn,
        "WHERE room_id = ?1 AND trigger_seq = ?2",
        params![room.as_str(), trigger_seq],
    )?
    .pop())
}

/// Rooms with unfinished runs (to resume after a restart).
pub(crate) fn rooms_with_open_runs(conn: &Connection) -> Result<Vec<RoomId>> {
    let mut stmt =
        conn.prepare_cached("SELECT DISTINCT room_id FROM room_runs WHERE status = 'running'")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(RoomId::new(row?)?);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "rooms_for_tests.rs"]
mod rooms_for_tests;

#[path = "room_audience.rs"]
pub(crate) mod audience;

#[path = "room_era.rs"]
mod era;

#[cfg(test)]
#[path = "rooms_tests.rs"]
mod tests;
