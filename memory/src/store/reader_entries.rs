//! Reads of the `entries` table: a session's transcript by seq, every
//! session's in global order (`gid`), and its latest summary.

use rusqlite::Connection;
use rusqlite::Row;
use rusqlite::params;

use super::corrupt;
use crate::error::Result;
use crate::ids::SessionId;
use crate::record::Entry;
use crate::record::EntryKind;

pub(crate) const ENTRY_COLUMNS: &str =
    "gid, session_id, seq, id, author, turn_id, body, created_at";

fn entry_from_row(row: &Row<'_>) -> rusqlite::Result<EntryRow> {
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

type EntryRow = (
    i64,
    String,
    i64,
    String,
    String,
    Option<String>,
    String,
    i64,
);

fn entry_from_parts(parts: EntryRow) -> Result<Entry> {
    let (gid, session, seq, id, author, turn, body, created_at) = parts;
    let kind: EntryKind = serde_json::from_str(&body).map_err(|e| corrupt("entries", e))?;
    Ok(Entry {
        id: id.parse()?,
        session: session.parse()?,
        seq,
        gid,
        author,
        turn: turn.map(|t| t.parse()).transpose()?,
        created_at,
        kind,
    })
}

pub(crate) fn collect_entries(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<Entry>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, entry_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(entry_from_parts(row?)?);
    }
    Ok(out)
}

pub(crate) fn entries_after(
    conn: &Connection,
    session: SessionId,
    after: i64,
    limit: i64,
) -> Result<Vec<Entry>> {
    collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        ),
        params![session.to_string(), after, limit],
    )
}

pub(crate) fn entries_between(
    conn: &Connection,
    session: SessionId,
    from: i64,
    to: i64,
) -> Result<Vec<Entry>> {
    collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq"
        ),
        params![session.to_string(), from, to],
    )
}

/// Public messages (user messages and deliveries) of a timeline with seq
/// below `before` that a reader has not seen: user messages after
/// `user`, deliveries after `delivery` not written by `except`.
pub(crate) fn count_unseen_messages(
    conn: &Connection,
    session: SessionId,
    seen: (i64, i64),
    before: i64,
    except: &str,
) -> Result<i64> {
    let (user, delivery) = seen;
    Ok(conn
        .prepare_cached(
            "SELECT count(*) FROM entries WHERE session_id = ?1 AND seq > ?2 AND seq < ?3 \
             AND ((kind = 'user_message' AND seq > ?4) \
               OR (kind = 'delivery' AND seq > ?5 AND author != ?6))",
        )?
        .query_row(
            params![
                session.to_string(),
                user.min(delivery),
                before,
                user,
                delivery,
                except
            ],
            |r| r.get(0),
        )?)
}

pub(crate) fn tail_entries(
    conn: &Connection,
    session: SessionId,
    limit: i64,
) -> Result<Vec<Entry>> {
    let mut out = collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2"
        ),
        params![session.to_string(), limit],
    )?;
    out.reverse();
    Ok(out)
}

pub(crate) fn entries_after_gid(conn: &Connection, gid: i64, limit: i64) -> Result<Vec<Entry>> {
    collect_entries(
        conn,
        &format!("SELECT {ENTRY_COLUMNS} FROM entries WHERE gid > ?1 ORDER BY gid LIMIT ?2"),
        params![gid, limit],
    )
}

pub(crate) fn max_gid(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT COALESCE(MAX(gid), 0) FROM entries")?
        .query_row([], |r| r.get(0))?)
}

/// Where `from` asked replies to go, by its newest message in `session`:
/// the `reply_session` of its newest `agent_message` there, with when that
/// message was written (ms; `None` if it wrote none there, or named none).
/// Walks the session's entries from its end by the `(session_id, seq)`
/// index.
pub(crate) fn reply_session_of(
    conn: &Connection,
    session: SessionId,
    from: &str,
) -> Result<Option<(SessionId, i64)>> {
    let Some(entry) = collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 AND kind = 'agent_message' \
             AND author = ?2 ORDER BY seq DESC LIMIT 1"
        ),
        params![session.to_string(), from],
    )?
    .pop() else {
        return Ok(None);
    };
    Ok(match entry.kind {
        EntryKind::AgentMessage { reply_session, .. } => {
            reply_session.map(|s| (s, entry.created_at))
        }
        _ => None,
    })
}

pub(crate) fn latest_summary(conn: &Connection, session: SessionId) -> Result<Option<Entry>> {
    Ok(collect_entries(
        conn,
        &format!("SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 AND kind = 'summary' ORDER BY seq DESC LIMIT 1"),
        params![session.to_string()],
    )?
    .pop())
}

/// How many summaries `session` holds after `seq`: through the partial
/// index `entries_summary`, so a count never walks the session's other
/// entries.
pub(crate) fn summaries_after(conn: &Connection, session: SessionId, seq: i64) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*) FROM entries WHERE session_id = ?1 AND kind = 'summary' AND seq > ?2",
        )?
        .query_row(params![session.to_string(), seq], |r| r.get(0))?)
}
