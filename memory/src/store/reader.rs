//! The queries of read-only connections (the pool is in
//! `reader_pool.rs`).

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Row;
use rusqlite::params;

use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::record::Entry;
use crate::record::EntryKind;
use crate::record::InboxItem;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::record::SessionRecord;
use crate::record::SessionView;
use crate::record::ToolCallRecord;
use crate::record::ToolCallStatus;
use crate::record::TurnRecord;
use crate::record::TurnStatus;

fn corrupt(table: &'static str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table,
        detail: detail.to_string(),
    }
}

pub(super) const ENTRY_COLUMNS: &str =
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

pub(super) fn collect_entries(
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

const BOT_COLUMNS: &str =
    "id, name, owner, role, provider, tools, settings, origin, created_at, updated_at";

fn bot_from_row(row: &Row<'_>) -> rusqlite::Result<[String; 8]> {
    Ok([
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ])
}

fn bot_from_parts(parts: [String; 8], created_at: i64, updated_at: i64) -> Result<BotRecord> {
    let [id, name, owner, role, provider, tools, settings, origin] = parts;
    Ok(BotRecord {
        id: BotId::new(id)?,
        name,
        owner: UserId::new(owner)?,
        role,
        provider,
        tools: serde_json::from_str(&tools).map_err(|e| corrupt("bots", e))?,
        settings: serde_json::from_str(&settings).map_err(|e| corrupt("bots", e))?,
        origin,
        created_at,
        updated_at,
    })
}

fn query_bots(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<BotRecord>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, |row| {
        Ok((
            bot_from_row(row)?,
            row.get::<_, i64>(8)?,
            row.get::<_, i64>(9)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (parts, c, u) = row?;
        out.push(bot_from_parts(parts, c, u)?);
    }
    Ok(out)
}

pub(crate) fn get_bot(conn: &Connection, id: &BotId) -> Result<Option<BotRecord>> {
    Ok(query_bots(
        conn,
        &format!("SELECT {BOT_COLUMNS} FROM bots WHERE id = ?1"),
        params![id.as_str()],
    )?
    .pop())
}

pub(crate) fn list_bots(conn: &Connection, owner: Option<&UserId>) -> Result<Vec<BotRecord>> {
    match owner {
        Some(owner) => query_bots(
            conn,
            &format!("SELECT {BOT_COLUMNS} FROM bots WHERE owner = ?1 ORDER BY id"),
            params![owner.as_str()],
        ),
        None => query_bots(
            conn,
            &format!("SELECT {BOT_COLUMNS} FROM bots ORDER BY id"),
            [],
        ),
    }
}

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

pub(crate) fn pending_inbox(conn: &Connection, bot: &BotId) -> Result<Vec<InboxItem>> {
    let mut stmt = conn.prepare_cached(
        "SELECT gid, session_id, seq, priority FROM inbox WHERE bot_id = ?1 AND turn_id IS NULL ORDER BY bot_id, gid",
    )?;
    let rows = stmt.query_map(params![bot.as_str()], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (gid, session, seq, priority) = row?;
        out.push(InboxItem {
            bot: bot.clone(),
            gid,
            session: session.parse()?,
            seq,
            priority: Priority::from_i64(priority)
                .ok_or_else(|| corrupt("inbox", format!("priority {priority}")))?,
        });
    }
    Ok(out)
}

pub(crate) fn bots_with_work(conn: &Connection) -> Result<Vec<BotId>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT bot_id FROM inbox WHERE turn_id IS NULL
         UNION SELECT bot_id FROM turns WHERE status = 'running'",
    )?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(BotId::new(row?)?);
    }
    Ok(out)
}

const TURN_COLUMNS: &str =
    "id, bot_id, session_id, status, inputs, checkpoint, attempts, error, started_at, ended_at";

fn query_turns(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<TurnRecord>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {TURN_COLUMNS} FROM turns {filter}"))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, String>(5)?,
            r.get::<_, i64>(6)?,
            r.get::<_, Option<String>>(7)?,
            r.get::<_, i64>(8)?,
            r.get::<_, Option<i64>>(9)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, bot, session, status, inputs, checkpoint, attempts, error, started_at, ended_at) =
            row?;
        out.push(TurnRecord {
            id: id.parse()?,
            bot: BotId::new(bot)?,
            session: session.parse()?,
            status: TurnStatus::parse(&status)
                .ok_or_else(|| corrupt("turns", format!("status {status}")))?,
            inputs: serde_json::from_str(&inputs).map_err(|e| corrupt("turns", e))?,
            checkpoint: serde_json::from_str(&checkpoint).map_err(|e| corrupt("turns", e))?,
            attempts,
            error,
            started_at,
            ended_at,
        });
    }
    Ok(out)
}

pub(crate) fn open_turns(conn: &Connection, bot: &BotId) -> Result<Vec<TurnRecord>> {
    query_turns(
        conn,
        "WHERE bot_id = ?1 AND status = 'running' ORDER BY started_at",
        params![bot.as_str()],
    )
}

pub(crate) fn get_turn(conn: &Connection, id: TurnId) -> Result<Option<TurnRecord>> {
    Ok(query_turns(conn, "WHERE id = ?1", params![id.to_string()])?.pop())
}

pub(crate) fn turns_of_bot(conn: &Connection, bot: &BotId, limit: i64) -> Result<Vec<TurnRecord>> {
    query_turns(
        conn,
        "WHERE bot_id = ?1 ORDER BY started_at DESC LIMIT ?2",
        params![bot.as_str(), limit],
    )
}

pub(crate) fn tool_calls(conn: &Connection, turn: TurnId) -> Result<Vec<ToolCallRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT call_id, ordinal, name, arguments, status, outcome, is_error FROM tool_calls
         WHERE turn_id = ?1 ORDER BY ordinal",
    )?;
    let rows = stmt.query_map(params![turn.to_string()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(5)?,
            r.get::<_, bool>(6)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (call_id, ordinal, name, arguments, status, outcome, is_error) = row?;
        out.push(ToolCallRecord {
            turn,
            call_id,
            ordinal,
            name,
            arguments,
            status: ToolCallStatus::parse(&status)
                .ok_or_else(|| corrupt("tool_calls", format!("status {status}")))?,
            outcome,
            is_error,
        });
    }
    Ok(out)
}

pub(crate) fn count(conn: &Connection, table: &str) -> Result<i64> {
    let sql = match table {
        "entries" => "SELECT COUNT(*) FROM entries",
        "turns" => "SELECT COUNT(*) FROM turns",
        "bots" => "SELECT COUNT(*) FROM bots",
        "ledger" => "SELECT COUNT(*) FROM ledger",
        other => return Err(StoreError::Rejected(format!("no table {other}"))),
    };
    Ok(conn.prepare_cached(sql)?.query_row([], |r| r.get(0))?)
}

pub(crate) fn turn_status_counts(conn: &Connection, bot: &BotId) -> Result<Vec<(TurnStatus, i64)>> {
    let mut stmt = conn
        .prepare_cached("SELECT status, COUNT(*) FROM turns WHERE bot_id = ?1 GROUP BY status")?;
    let rows = stmt.query_map(params![bot.as_str()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (s, n) = row?;
        out.push((
            TurnStatus::parse(&s).ok_or_else(|| corrupt("turns", format!("status {s}")))?,
            n,
        ));
    }
    Ok(out)
}

pub(crate) fn optional_meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row(params![key], |r| r.get(0))
        .optional()?)
}

fn query_subagents(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<crate::record::SubagentRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, parent, parent_session, description, status, result, created_at, updated_at FROM subagents {filter}"
    ))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(5)?,
            r.get::<_, i64>(6)?,
            r.get::<_, i64>(7)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, parent, parent_session, description, status, result, created_at, updated_at) =
            row?;
        out.push(crate::record::SubagentRecord {
            id: BotId::new(id)?,
            parent: BotId::new(parent)?,
            parent_session: parent_session.parse()?,
            description,
            status: crate::record::SubagentStatus::parse(&status)
                .ok_or_else(|| corrupt("subagents", format!("status {status}")))?,
            result,
            created_at,
            updated_at,
        });
    }
    Ok(out)
}

pub(crate) fn subagents_of(
    conn: &Connection,
    parent: &BotId,
) -> Result<Vec<crate::record::SubagentRecord>> {
    query_subagents(
        conn,
        "WHERE parent = ?1 ORDER BY created_at",
        params![parent.as_str()],
    )
}

pub(crate) fn get_subagent(
    conn: &Connection,
    id: &BotId,
) -> Result<Option<crate::record::SubagentRecord>> {
    Ok(query_subagents(conn, "WHERE id = ?1", params![id.as_str()])?.pop())
}

/// A bot's usage: (all days, today).
pub(crate) fn bot_usage(
    conn: &Connection,
    bot: &BotId,
    today: &str,
) -> Result<(crate::record::TokenUsage, crate::record::TokenUsage, i64)> {
    let mut stmt = conn.prepare_cached(
        "SELECT day, turns, calls, prompt_tokens, prefix_tokens, cached_tokens, completion_tokens FROM bot_usage WHERE bot_id = ?1",
    )?;
    let rows = stmt.query_map(params![bot.as_str()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
        ))
    })?;
    let mut all = crate::record::TokenUsage::default();
    let mut day = crate::record::TokenUsage::default();
    let mut turns = 0;
    for row in rows {
        let (d, t, calls, prompt, prefix, cached, completion) = row?;
        let u = crate::record::TokenUsage {
            calls: u32::try_from(calls).unwrap_or(u32::MAX),
            prompt_tokens: prompt.max(0) as u64,
            prefix_tokens: prefix.max(0) as u64,
            cached_tokens: cached.max(0) as u64,
            completion_tokens: completion.max(0) as u64,
        };
        all.add(&u);
        turns += t;
        if d == today {
            day.add(&u);
        }
    }
    Ok((all, day, turns))
}

/// A session's record, its latest summary and its newest entries after
/// the summary: from `last_seq - window` (or the summary's end, if later),
/// at most `2 × window`. One read transaction, so the entries end at the
/// record's `last_seq` and the summary is the one they follow.
pub(crate) fn session_view(
    conn: &Connection,
    session: SessionId,
    window: i64,
) -> Result<SessionView> {
    // rolled back when dropped: a read leaves nothing to keep
    let tx = conn.unchecked_transaction()?;
    let record = get_session(&tx, session)?;
    let last = record.as_ref().map(|r| r.last_seq).unwrap_or(0);
    let summary = latest_summary(&tx, session)?;
    let from = crate::record::covers_to_seq(summary.as_ref())
        .max(last - window)
        .max(0);
    let entries = entries_after(&tx, session, from, window.saturating_mul(2))?;
    Ok(SessionView {
        record,
        summary,
        entries,
    })
}

/// A session's record and its entries with seq > `after` (oldest first, at
/// most `limit`), in one read transaction: the record's `last_seq` is at
/// least the seq of every entry returned, whatever commits meanwhile.
/// `None` when there is no such session.
pub(crate) fn session_page(
    conn: &Connection,
    session: SessionId,
    after: i64,
    limit: i64,
) -> Result<Option<(SessionRecord, Vec<Entry>)>> {
    // rolled back when dropped: a read leaves nothing to keep
    let tx = conn.unchecked_transaction()?;
    let Some(record) = get_session(&tx, session)? else {
        return Ok(None);
    };
    let entries = entries_after(&tx, session, after, limit)?;
    Ok(Some((record, entries)))
}

pub(crate) fn latest_summary(conn: &Connection, session: SessionId) -> Result<Option<Entry>> {
    Ok(collect_entries(
        conn,
        &format!("SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ?1 AND kind = 'summary' ORDER BY seq DESC LIMIT 1"),
        params![session.to_string()],
    )?
    .pop())
}

pub(crate) fn user_secrets(
    conn: &Connection,
    owner: &UserId,
) -> Result<Vec<(String, crate::record::SecretValue, i64)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT name, value, updated_at FROM user_secrets WHERE owner = ?1 ORDER BY name",
    )?;
    let rows = stmt.query_map(params![owner.as_str()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (name, value, at) = row?;
        out.push((name, crate::record::SecretValue::new(value), at));
    }
    Ok(out)
}
