//! Where a user starts reading a session given to them (migration 0028,
//! table `session_floors`).
//!
//! A bot's own session of a group room is its owner's. When the bot is
//! given to another user in fleet.toml the session goes with it
//! (`writer_entries.rs`, `follows_bot_owner`), and its new owner reads it
//! from that change on: what the bot saw there before, while the room was
//! not theirs to read, stays hidden from them and their bots, as the
//! room's own timeline does (`room_audience.rs`). `since` hides the
//! session's turns and reviews from before the change. No row: from the
//! start.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use crate::error::Result;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::UserId;

/// `user` reads `session` from seq `from_seq` on, and its turns and
/// reviews from time `since` (ms) on (replacing an earlier floor: the
/// session has one owner at a time).
pub(crate) fn set(
    conn: &Connection,
    session: SessionId,
    user: &UserId,
    from_seq: i64,
    since: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO session_floors (session_id, user_id, from_seq, since) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session_id) DO UPDATE SET user_id = excluded.user_id,
           from_seq = excluded.from_seq, since = excluded.since",
    )?
    .execute(params![session.to_string(), user.as_str(), from_seq, since])?;
    Ok(())
}

/// Takes `session`'s floor away: its owner reads it from the start.
pub(crate) fn clear(conn: &Connection, session: SessionId) -> Result<()> {
    conn.prepare_cached("DELETE FROM session_floors WHERE session_id = ?1")?
        .execute(params![session.to_string()])?;
    Ok(())
}

/// Where `user` starts reading `session`: (first seq, first time in ms),
/// `None` when from the start.
pub(crate) fn floor(
    conn: &Connection,
    session: SessionId,
    user: &UserId,
) -> Result<Option<(i64, i64)>> {
    Ok(conn
        .prepare_cached(
            "SELECT from_seq, since FROM session_floors WHERE session_id = ?1 AND user_id = ?2",
        )?
        .query_row(params![session.to_string(), user.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

/// The seq `session` is read from by its owner, whoever that is (a
/// session has one floor at a time), `None` when from the start.
pub(crate) fn floor_of(conn: &Connection, session: SessionId) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT from_seq FROM session_floors WHERE session_id = ?1")?
        .query_row(params![session.to_string()], |r| r.get(0))
        .optional()?)
}

/// The sessions of `bot` that `user` reads from a later seq than its
/// start, with that seq (a walk of the user's floors, a few rows).
pub(crate) fn floors_of_bot(
    conn: &Connection,
    bot: &BotId,
    user: &UserId,
) -> Result<Vec<(SessionId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT f.session_id, f.from_seq FROM session_floors f
         JOIN sessions s ON s.id = f.session_id
         WHERE f.user_id = ?1 AND s.bot_id = ?2",
    )?;
    session_seqs(&mut stmt, params![user.as_str(), bot.as_str()])
}

/// Every session `user` reads from a later seq than its start, with that
/// seq.
pub(crate) fn floors(conn: &Connection, user: &UserId) -> Result<Vec<(SessionId, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_id, from_seq FROM session_floors WHERE user_id = ?1 ORDER BY session_id",
    )?;
    session_seqs(&mut stmt, params![user.as_str()])
}

/// The (session, seq) rows `stmt` answers for `params`.
fn session_seqs(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<(SessionId, i64)>> {
    let rows = stmt.query_map(params, |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (session, from) = row?;
        out.push((session.parse()?, from));
    }
    Ok(out)
}
