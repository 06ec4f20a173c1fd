//! Reads of a bot's work: its pending inputs (`inbox`), its turns and
//! their tool calls.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::corrupt;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::InboxItem;
use crate::record::Priority;
use crate::record::ToolCallRecord;
use crate::record::ToolCallStatus;
use crate::record::TurnRecord;
use crate::record::TurnStatus;

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

/// The filter of [`open_turns`]. The reads of a bot's running turns name
/// their index: with `turns_bot` (every turn of a bot) beside it, SQLite
/// without statistics takes that one and walks all the bot's turns.
pub(crate) const OPEN_TURNS: &str =
    "INDEXED BY turns_open WHERE bot_id = ?1 AND status = 'running' ORDER BY started_at";

pub(crate) fn open_turns(conn: &Connection, bot: &BotId) -> Result<Vec<TurnRecord>> {
    query_turns(conn, OPEN_TURNS, params![bot.as_str()])
}

pub(crate) fn get_turn(conn: &Connection, id: TurnId) -> Result<Option<TurnRecord>> {
    Ok(query_turns(conn, "WHERE id = ?1", params![id.to_string()])?.pop())
}

/// A bot's newest turns, newest first. Turns are inserted as they start
/// (their `started_at` is never changed), so the table read backwards in
/// rowid order stops after `limit` of this bot's turns: ~1 ms for a bot
/// that worked lately among 360,000 turns, where sorting on `started_at`
/// read all of them (~75 ms). The limit is also the bot's turn count
/// ([`turn_status_counts`], two index lookups), so a bot with fewer
/// turns than `limit` stops at its first one, and a bot without turns
/// reads nothing; a bot whose first turn is old still reads the table
/// back to it (~200 ms at 1,000,000 turns). An index on `bot_id` would
/// make that ~0.5 ms but cost every turn start an index entry: ~8% of the
/// store writer's time under fleet-load (migration 22).
///
/// With `owner`, only the turns in sessions that user owns, counted after
/// that filter (the few session ids of the bot with that owner are read
/// first): the API's rule, under which a user reads a turn only when they
/// read its session (a bot given to another owner keeps its DMs with its
/// former owner, and their turns, from the new owner).
pub(crate) fn turns_of_bot(
    conn: &Connection,
    bot: &BotId,
    owner: Option<&UserId>,
    before: Option<TurnId>,
    limit: i64,
) -> Result<Vec<TurnRecord>> {
    let turns: i64 = turn_status_counts(conn, bot)?.iter().map(|(_, n)| n).sum();
    let limit = limit.min(turns);
    if limit <= 0 {
        return Ok(Vec::new());
    }
    // the cursor's rowid, read once: a bound the scan starts from (a
    // subquery in the filter made every page scan from the newest turn)
    let below = match before {
        None => i64::MAX,
        Some(turn) => match conn
            .prepare_cached("SELECT rowid FROM turns WHERE id = ?1")?
            .query_row(params![turn.to_string()], |r| r.get::<_, i64>(0))
            .optional()?
        {
            Some(rowid) => rowid,
            None => return Ok(Vec::new()),
        },
    };
    match owner {
        None => query_turns(conn, BOT_TURNS, params![bot.as_str(), limit, below]),
        Some(owner) => query_turns(
            conn,
            BOT_TURNS_FOR_OWNER,
            params![bot.as_str(), limit, owner.as_str(), below],
        ),
    }
}

/// The filter of [`turns_of_bot`] without an owner; `?3`: only turns
/// stored before that rowid (the page after a cursor).
const BOT_TURNS: &str = "WHERE bot_id = ?1 AND rowid < ?3 ORDER BY rowid DESC LIMIT ?2";

/// The filter of [`turns_of_bot`] with an owner (`?3`): turns in their
/// sessions, but not those from before a session was given to them
/// (`session_floors.rs`).
const BOT_TURNS_FOR_OWNER: &str = "WHERE bot_id = ?1
       AND rowid < ?4
       AND session_id IN (SELECT id FROM sessions WHERE bot_id = ?1 AND owner = ?3)
       AND NOT EXISTS (SELECT 1 FROM session_floors f WHERE f.session_id = turns.session_id
         AND f.user_id = ?3 AND turns.started_at < f.since)
     ORDER BY rowid DESC LIMIT ?2";

pub(crate) fn tool_calls(conn: &Connection, turn: TurnId) -> Result<Vec<ToolCallRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT call_id, ordinal, name, arguments, status, outcome, is_error,
                status = 'started' AND ended_at IS NOT NULL
         FROM tool_calls WHERE turn_id = ?1 ORDER BY ordinal",
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
            r.get::<_, bool>(7)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (call_id, ordinal, name, arguments, status, outcome, is_error, stopped) = row?;
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
            stopped,
        });
    }
    Ok(out)
}

/// A bot's running turns, counted in the partial index `turns_open`.
pub(crate) const RUNNING_TURNS: &str =
    "SELECT COUNT(*) FROM turns INDEXED BY turns_open WHERE bot_id = ?1 AND status = 'running'";

/// A bot's ended turns per status, kept in `turn_counts`.
pub(crate) const ENDED_TURNS: &str =
    "SELECT status, n FROM turn_counts WHERE bot_id = ?1 AND n > 0 ORDER BY status";

/// A bot's turn counts per status, by status name: its ended turns from
/// `turn_counts` (migration 11), which the writer keeps as turns end,
/// and its running ones from the partial index `turns_open`. Two
/// index lookups however many turns the store holds (counting in `turns`
/// scanned the whole table). Statuses without turns are left out.
pub(crate) fn turn_status_counts(conn: &Connection, bot: &BotId) -> Result<Vec<(TurnStatus, i64)>> {
    let running: i64 = conn
        .prepare_cached(RUNNING_TURNS)?
        .query_row(params![bot.as_str()], |r| r.get(0))?;
    let mut stmt = conn.prepare_cached(ENDED_TURNS)?;
    let rows = stmt.query_map(params![bot.as_str()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (s, n) = row?;
        out.push((
            TurnStatus::parse(&s).ok_or_else(|| corrupt("turn_counts", format!("status {s}")))?,
            n,
        ));
    }
    if running > 0 {
        out.push((TurnStatus::Running, running));
        out.sort_by_key(|(s, _)| s.as_str());
    }
    Ok(out)
}

#[cfg(test)]
#[path = "turn_counts_tests.rs"]
mod tests;
