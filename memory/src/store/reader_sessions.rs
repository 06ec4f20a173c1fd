//! Reads of the `sessions` table: a session by id, a bot's own sessions,
//! and a session with its entries read in one transaction.

use rusqlite::Connection;
use rusqlite::Row;
use rusqlite::params;

use super::corrupt;
use super::entries::entries_after;
use super::entries::latest_summary;
use super::entries::summaries_after;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::UserId;
use crate::record::Entry;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::SessionView;

/// id, bot, kind, peer, owner, epoch, created_at, last_seq
type SessionRow = (String, String, String, String, String, i64, i64, i64);

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

const SESSION_SELECT: &str =
    "SELECT s.id, s.bot_id, s.kind, s.peer, s.owner, s.epoch, s.created_at,
     COALESCE((SELECT MAX(seq) FROM entries e WHERE e.session_id = s.id), 0) FROM sessions s";

fn query_sessions(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<SessionRecord>> {
    let mut stmt = conn.prepare_cached(&format!("{SESSION_SELECT} {filter}"))?;
    let rows = stmt.query_map(params, session_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        let (id, bot, kind, peer, owner, epoch, created_at, last_seq) = row?;
        out.push(SessionRecord {
            id: id.parse()?,
            key: SessionKey {
                bot: BotId::new(bot)?,
                kind: SessionKind::parse(&kind)
                    .ok_or_else(|| corrupt("sessions", format!("kind {kind}")))?,
                peer,
            },
            owner: UserId::new(owner)?,
            epoch,
            last_seq,
            created_at,
        });
    }
    Ok(out)
}

pub(crate) fn get_session(conn: &Connection, id: SessionId) -> Result<Option<SessionRecord>> {
    Ok(query_sessions(conn, "WHERE s.id = ?1", params![id.to_string()])?.pop())
}

/// A bot's own sessions. A room's public timeline is keyed by the room's
/// id in the bot column (`room_timeline`), so a room named like a bot would
/// pass for that bot's session: timelines are left out here, and reach a
/// reader only through room membership.
pub(crate) fn sessions_of_bot(conn: &Connection, bot: &BotId) -> Result<Vec<SessionRecord>> {
    query_sessions(
        conn,
        "WHERE s.bot_id = ?1 AND s.kind != 'room' ORDER BY s.created_at",
        params![bot.as_str()],
    )
}

/// The sessions of every subagent `parent` delegated to (room timelines
/// left out, as in [`sessions_of_bot`]), in one read: a parent that
/// delegated for months has thousands of subagents.
pub(crate) fn sessions_of_subagents(
    conn: &Connection,
    parent: &BotId,
) -> Result<Vec<SessionRecord>> {
    query_sessions(
        conn,
        "WHERE s.bot_id IN (SELECT id FROM subagents WHERE parent = ?1) AND s.kind != 'room'
         ORDER BY s.created_at",
        params![parent.as_str()],
    )
}

/// The sessions `owner` owns (`sessions.owner`), room timelines left out
/// (as in [`sessions_of_bot`]): their bots' sessions, and their DMs with a
/// bot that has since been given to someone else.
pub(crate) fn sessions_of_owner(conn: &Connection, owner: &UserId) -> Result<Vec<SessionRecord>> {
    query_sessions(conn, OWNER_SESSIONS, params![owner.as_str()])
}

/// The filter of [`sessions_of_owner`], read through `sessions_owner`
/// (migration 21; it scanned every session of the fleet at every API
/// search).
pub(super) const OWNER_SESSIONS: &str =
    "WHERE s.owner = ?1 AND s.kind != 'room' ORDER BY s.created_at";

/// A session's record, its latest summary and its newest entries after
/// the summary: the newest `window` entries other than summaries (or
/// from the summary's end, if later),
/// at most `2 × window` — and, when `keep_from` is given, from that seq on
/// whatever the window (a running turn's first input: its inputs and its
/// own entries must be in its context however many entries it wrote). One
/// read transaction, so the entries end at the record's `last_seq` and the
/// summary is the one they follow.
pub(crate) fn session_view(
    conn: &Connection,
    session: SessionId,
    window: i64,
    keep_from: Option<i64>,
) -> Result<SessionView> {
    // rolled back when dropped: a read leaves nothing to keep
    let tx = conn.unchecked_transaction()?;
    let record = get_session(&tx, session)?;
    let last = record.as_ref().map(|r| r.last_seq).unwrap_or(0);
    // a session given to its owner with its bot from a seq on
    // (`session_floors.rs`): what came before is no more the bot's context
    // than its owner's to read (a summary of it included)
    let floor = crate::store::session_floors::floor_of(&tx, session)?;
    let latest = latest_summary(&tx, session)?;
    // the window is the newest `window` entries of the transcript: the
    // summaries among them do not count (a catch-up compaction of many
    // chunks writes one per chunk, which pushed the turn's input out of
    // the next turn's window with no summary covering it). Each pass
    // widens the window by the summaries in it, so `newest` only falls,
    // and never below `last - window` minus every summary: it ends. With
    // no summary in the window (none yet, or the newest one before it),
    // nothing more is read.
    let mut newest = last.saturating_sub(window);
    if latest.as_ref().is_some_and(|s| s.seq > newest) {
        loop {
            let summaries = summaries_after(&tx, session, newest)?;
            let wider = last.saturating_sub(window).saturating_sub(summaries);
            if wider >= newest {
                break;
            }
            newest = wider;
        }
    }
    let summary = latest.filter(|s| floor.is_none_or(|f| s.seq >= f));
    let start = keep_from.map_or(newest, |k| newest.min(k.saturating_sub(1)));
    let from = crate::record::covers_to_seq(summary.as_ref())
        .max(start)
        // a turn's inputs from before it stay (`keep_from`): the run
        // admitted before the change runs once, with its input
        .max(floor.map_or(0, |f| keep_from.map_or(f - 1, |k| (f - 1).min(k - 1))))
        .max(0);
    let limit = window.saturating_mul(2).max(last.saturating_sub(from));
    let entries = entries_after(&tx, session, from, limit)?;
    Ok(SessionView {
        record,
        summary,
        entries,
        floor,
    })
}

/// A session's record and its entries with seq > `after` (oldest first, at
/// most `limit`), in one read transaction: the record's `last_seq` is at
/// least the seq of every entry returned, whatever commits meanwhile.
/// `None` when there is no such session.
///
/// With `reader`, the page starts no earlier than where that user reads
/// the session from when it was given to them with its bot
/// (`session_floors.rs`), read in the same transaction; a session
/// `reader` does not own comes without its entries, none of which is
/// read (the caller refuses it as unknown, and the time its answer takes
/// must not tell how long another user's conversation is: QA timed a
/// page of 1,000 at 0.39 ms against 0.24 ms for no session at all).
pub(crate) fn session_page(
    conn: &Connection,
    session: SessionId,
    reader: Option<&crate::ids::UserId>,
    after: i64,
    limit: i64,
) -> Result<Option<(SessionRecord, Vec<Entry>)>> {
    // rolled back when dropped: a read leaves nothing to keep
    let tx = conn.unchecked_transaction()?;
    let Some(record) = get_session(&tx, session)? else {
        return Ok(None);
    };
    let floor = match reader {
        Some(user) if record.owner != *user => return Ok(Some((record, Vec::new()))),
        Some(user) => crate::store::session_floors::floor(&tx, session, user)?,
        None => None,
    };
    let after = floor.map_or(after, |(from_seq, _)| after.max(from_seq - 1));
    let entries = entries_after(&tx, session, after, limit)?;
    Ok(Some((record, entries)))
}
