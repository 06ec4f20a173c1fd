//! Who reads a room from where (migration 0019, table `room_audience`).
//!
//! A room's owner reads its whole timeline. A user who gains the room
//! with a change of members (one of their bots joins while none was in
//! it) reads it from the `members_changed` notice of that change on:
//! what was said before, while the room was not theirs to read (perhaps
//! its owner's alone, answered from her private memory), stays hidden
//! from them and from their bots. No row: from the start (rooms shared
//! before the table existed).

use std::collections::BTreeSet;

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use crate::error::Result;
use crate::ids::BotId;
use crate::ids::RoomId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::SessionKind;

/// The owners of `bots` that have a record.
fn owners(conn: &Connection, bots: &[BotId]) -> Result<BTreeSet<String>> {
    let mut stmt = conn.prepare_cached("SELECT owner FROM bots WHERE id = ?1")?;
    let mut out = BTreeSet::new();
    for bot in bots {
        if let Some(owner) = stmt
            .query_row(params![bot.as_str()], |r| r.get::<_, String>(0))
            .optional()?
        {
            out.insert(owner);
        }
    }
    Ok(out)
}

/// The users other than the room's owner with a bot in `to` and none in
/// `from`: a change from `from` to `to` gives them the room.
pub(crate) fn newcomers(
    conn: &Connection,
    room: &RoomId,
    from: &[BotId],
    to: &[BotId],
) -> Result<Vec<UserId>> {
    let owner: Option<String> = conn
        .prepare_cached("SELECT owner FROM rooms WHERE id = ?1")?
        .query_row(params![room.as_str()], |r| r.get(0))
        .optional()?;
    let before = owners(conn, from)?;
    let mut out = Vec::new();
    for user in owners(conn, to)? {
        if Some(&user) != owner.as_ref() && !before.contains(&user) {
            out.push(UserId::new(user)?);
        }
    }
    Ok(out)
}

/// `users` read `room` from timeline seq `from_seq` on (replacing what
/// they read it from before: they had no bot in it since).
pub(crate) fn admit(
    conn: &Connection,
    room: &RoomId,
    users: &[UserId],
    from_seq: i64,
    now: i64,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO room_audience (room_id, user_id, from_seq, since) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (room_id, user_id) DO UPDATE SET from_seq = excluded.from_seq,
           since = excluded.since",
    )?;
    for user in users {
        stmt.execute(params![room.as_str(), user.as_str(), from_seq, now])?;
    }
    Ok(())
}

/// The first timeline seq of `room` that `user` may read, when it is
/// not the first (`None`: from the start, or no row).
pub(crate) fn visible_from(conn: &Connection, room: &RoomId, user: &UserId) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT a.from_seq FROM room_audience a JOIN rooms r ON r.id = a.room_id
             WHERE a.room_id = ?1 AND a.user_id = ?2 AND r.owner != a.user_id",
        )?
        .query_row(params![room.as_str(), user.as_str()], |r| r.get(0))
        .optional()?)
}

/// Every room `user` reads from a later seq than its start (not rooms
/// they own), with that seq.
pub(crate) fn floors(conn: &Connection, user: &UserId) -> Result<Vec<(RoomId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT a.room_id, a.from_seq FROM room_audience a JOIN rooms r ON r.id = a.room_id
         WHERE a.user_id = ?1 AND r.owner != a.user_id ORDER BY a.room_id",
    )?;
    let rows = stmt.query_map(params![user.as_str()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (room, from) = row?;
        out.push((RoomId::new(room)?, from));
    }
    Ok(out)
}

/// The stored sessions of `bots` in `room` (`{bot, kind: group, peer:
/// room}`), with their compaction epoch.
pub(crate) fn member_sessions(
    conn: &Connection,
    room: &RoomId,
    bots: &[BotId],
) -> Result<Vec<(SessionId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, epoch FROM sessions WHERE bot_id = ?1 AND kind = ?2 AND peer = ?3",
    )?;
    let mut out = Vec::new();
    for bot in bots {
        let row: Option<(String, i64)> = stmt
            .query_row(
                params![bot.as_str(), SessionKind::Group.as_str(), room.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((id, epoch)) = row {
            out.push((id.parse()?, epoch));
        }
    }
    Ok(out)
}
