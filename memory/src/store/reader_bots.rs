//! Reads of what belongs to a bot: its record (`bots`), its subagents,
//! its token usage (`bot_usage`), and its owner's secrets (`user_secrets`).

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Row;
use rusqlite::params;

use super::corrupt;
use crate::error::Result;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;

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

/// `owner`'s bots other than subagents (origin not `subagent:`), by id:
/// a search of index `bots_owner_main` (migration 26), which holds no
/// subagent, however many tasks the owner's bots delegated.
pub(crate) const MAIN_BOTS_OF_OWNER: &str =
    "WHERE owner = ?1 AND substr(origin, 1, 9) <> 'subagent:' ORDER BY id";

/// See [`MAIN_BOTS_OF_OWNER`].
pub(crate) fn main_bots_of(conn: &Connection, owner: &UserId) -> Result<Vec<BotRecord>> {
    query_bots(
        conn,
        &format!("SELECT {BOT_COLUMNS} FROM bots {MAIN_BOTS_OF_OWNER}"),
        params![owner.as_str()],
    )
}

/// `owner`'s bots, by id, without the finished subagents (done, failed,
/// stopped) of each parent past its `keep` latest ones (by creation), and
/// how many those are. Index reads only, whatever the number of tasks
/// the owner's bots ever delegated: the bots other than subagents
/// ([`main_bots_of`]), then of each what [`subagents_listed`] reads, and
/// those subagents' records by key. (It sorted every finished subagent
/// of the owner, and read and decoded every bot record of the owner, at
/// each `GET /v1/bots`, which the web page asks again at each change.)
/// Every subagent is found so: its parent is a bot of the same owner
/// that is no subagent (Task makes its subagents its caller's owner's, a
/// new owner takes a bot's subagents along, and a subagent has no Task).
/// Subagents made in one millisecond are latest in the order they were
/// made, as CheckSubagent lists them (the old read took the greater id,
/// a hash).
pub(crate) fn bots_keeping(
    conn: &Connection,
    owner: &UserId,
    keep: usize,
) -> Result<(Vec<BotRecord>, usize)> {
    let mut bots = main_bots_of(conn, owner)?;
    let mut left_out = 0;
    let mut subagents = Vec::new();
    for parent in &bots {
        let (listed, past) = subagents_listed(conn, &parent.id, keep)?;
        left_out += past;
        for s in listed {
            if let Some(bot) = get_bot(conn, &s.id)?
                && bot.owner == *owner
            {
                subagents.push(bot);
            }
        }
    }
    bots.extend(subagents);
    bots.sort_by(|a, b| a.id.cmp(&b.id));
    Ok((bots, left_out))
}

/// The bots that may answer to the mention `key` (a
/// [`name_key`](crate::ids::name_key)), by id: those whose id folds to it
/// (ids are ASCII, which `lower` folds as `name_key` does: index
/// `bots_id_folded`), whose stored folded name is it (`bots_name_key`),
/// and any whose folded name was never stored (a row written outside
/// the store's writer), for the caller to compare. Index searches only,
/// never a scan of `bots`: CreateAgent and UpdateAgent read this at each
/// call, whatever the size of the fleet.
pub(crate) const BOTS_ANSWERING_TO: &str =
    "WHERE lower(id) = ?1 OR name_key = ?1 OR name_key IS NULL ORDER BY id";

/// See [`BOTS_ANSWERING_TO`].
pub(crate) fn bots_answering_to(conn: &Connection, key: &str) -> Result<Vec<BotRecord>> {
    query_bots(
        conn,
        &format!("SELECT {BOT_COLUMNS} FROM bots {BOTS_ANSWERING_TO}"),
        params![key],
    )
}

fn query_subagents(
    conn: &Connection,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<crate::record::SubagentRecord>> {
    Ok(query_subagent_rows(conn, "result", filter, params)?
        .into_iter()
        .map(|(_, s)| s)
        .collect())
}

/// Subagents with their rowid (their order among equal `created_at`, as
/// index `subagents_parent` keeps them); `result` is the column (or
/// `NULL`: not read) their result is read from.
fn query_subagent_rows(
    conn: &Connection,
    result: &str,
    filter: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<(i64, crate::record::SubagentRecord)>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, parent, parent_session, description, status, {result}, created_at, updated_at, rowid FROM subagents {filter}"
    ))?;
    let rows = stmt.query_map(params, |r| {
        Ok((
            (
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ),
            r.get::<_, i64>(6)?,
            r.get::<_, i64>(7)?,
            r.get::<_, i64>(8)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (
            (id, parent, parent_session, description, status, result),
            created_at,
            updated_at,
            rowid,
        ) = row?;
        out.push((
            rowid,
            crate::record::SubagentRecord {
                id: BotId::new(id)?,
                parent: BotId::new(parent)?,
                parent_session: parent_session.parse()?,
                description,
                status: crate::record::SubagentStatus::parse(&status)
                    .ok_or_else(|| corrupt("subagents", format!("status {status}")))?,
                result,
                created_at,
                updated_at,
            },
        ));
    }
    Ok(out)
}

/// Subagent `?1` of parent `?2`: a read by its key.
pub(crate) const SUBAGENT_OF: &str = "WHERE id = ?1 AND parent = ?2";

/// Subagent `id` of `parent` (`None`: `parent` has no such subagent):
/// a key read, whatever else `parent` delegated.
pub(crate) fn subagent_of(
    conn: &Connection,
    parent: &BotId,
    id: &str,
) -> Result<Option<crate::record::SubagentRecord>> {
    Ok(query_subagents(conn, SUBAGENT_OF, params![id, parent.as_str()])?.pop())
}

/// The running subagents of `parent`, oldest first: a read of index
/// `subagents_running` (migration 25), never of its finished ones.
pub(crate) const SUBAGENTS_RUNNING_OF: &str =
    "WHERE parent = ?1 AND status = 'running' ORDER BY created_at, rowid";

/// The running subagents of `parent`, oldest first, their results not
/// read (`None`): what `runtime.max_subagents` counts.
pub(crate) fn running_subagents_of(
    conn: &Connection,
    parent: &BotId,
) -> Result<Vec<crate::record::SubagentRecord>> {
    Ok(
        query_subagent_rows(conn, "NULL", SUBAGENTS_RUNNING_OF, params![parent.as_str()])?
            .into_iter()
            .map(|(_, s)| s)
            .collect(),
    )
}

/// The latest `?2` finished subagents of `parent`, latest first: index
/// `subagents_parent` read from its end, up to the `?2`-th finished one
/// (and the running ones between).
pub(crate) const SUBAGENTS_FINISHED_LATEST: &str = "WHERE parent = ?1 AND status <> 'running' \
     ORDER BY created_at DESC, rowid DESC LIMIT ?2";

/// How many subagents `parent` has: index `subagents_parent` only.
pub(crate) const SUBAGENTS_COUNT_OF: &str = "SELECT COUNT(*) FROM subagents WHERE parent = ?1";

/// What a parent's list of subagents shows: every running one and its
/// `finished` latest finished ones, oldest first, their results not read
/// (`None`), and how many earlier finished ones are left out. Three
/// index reads, whatever the number of tasks the parent ever delegated.
pub(crate) fn subagents_listed(
    conn: &Connection,
    parent: &BotId,
    finished: usize,
) -> Result<(Vec<crate::record::SubagentRecord>, usize)> {
    let mut rows =
        query_subagent_rows(conn, "NULL", SUBAGENTS_RUNNING_OF, params![parent.as_str()])?;
    let running = rows.len();
    let latest = query_subagent_rows(
        conn,
        "NULL",
        SUBAGENTS_FINISHED_LATEST,
        params![parent.as_str(), i64::try_from(finished).unwrap_or(i64::MAX)],
    )?;
    let shown_finished = latest.len();
    rows.extend(latest);
    rows.sort_by_key(|(rowid, s)| (s.created_at, *rowid));
    let all: i64 = conn
        .prepare_cached(SUBAGENTS_COUNT_OF)?
        .query_row(params![parent.as_str()], |r| r.get(0))?;
    let left_out = usize::try_from(all)
        .unwrap_or(usize::MAX)
        .saturating_sub(running + shown_finished);
    Ok((rows.into_iter().map(|(_, s)| s).collect(), left_out))
}

/// The task (its description) of each of `ids` that is a subagent of
/// `parent`: what a turn of the parent needs to name the reports of its
/// subagents that its context shows, each read by its key (a parent may
/// keep thousands of finished ones; every turn read them all).
pub(crate) fn subagent_tasks(
    conn: &Connection,
    parent: &BotId,
    ids: &[BotId],
) -> Result<Vec<(BotId, String)>> {
    let mut stmt =
        conn.prepare_cached("SELECT description FROM subagents WHERE id = ?1 AND parent = ?2")?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(description) = stmt
            .query_row(params![id.as_str(), parent.as_str()], |r| r.get(0))
            .optional()?
        {
            out.push((id.clone(), description));
        }
    }
    Ok(out)
}

/// How subagent `id` was stopped (`None`: it was not, or before the stop
/// was recorded).
pub(crate) fn subagent_stop(
    conn: &Connection,
    id: &BotId,
) -> Result<Option<crate::record::SubagentStop>> {
    let json: Option<Option<String>> = conn
        .prepare_cached("SELECT stop FROM subagents WHERE id = ?1")?
        .query_row(params![id.as_str()], |r| r.get(0))
        .optional()?;
    json.flatten()
        .map(|j| {
            serde_json::from_str(&j)
                .map_err(|e| corrupt("subagents", format!("the stop of {id}: {e}")))
        })
        .transpose()
}

pub(crate) fn get_subagent(
    conn: &Connection,
    id: &BotId,
) -> Result<Option<crate::record::SubagentRecord>> {
    Ok(query_subagents(conn, "WHERE id = ?1", params![id.as_str()])?.pop())
}

/// The subagents whose task title and report a start must withhold or
/// show again: those whose task session has a floor (a task given in a
/// conversation that stays another person's when their bot changed
/// owner, `Writer::floor_task_of_unread_origin`) and that are not
/// withheld yet, and those withheld whose session has none any more (the
/// bot given back).
pub(crate) fn subagent_task_holds(
    conn: &Connection,
) -> Result<Vec<crate::record::SubagentTaskHold>> {
    // the task session of a subagent is its (bot, 'subagent', parent)
    // session: those with a floor not withheld yet (read from the floors,
    // few), and those withheld whose floor is gone (index
    // `subagents_withheld`), never every subagent a fleet kept
    let held: Vec<(String, bool, Option<String>)> = conn
        .prepare_cached(
            "SELECT sub.id, 1, NULL FROM session_floors f
               JOIN sessions s ON s.id = f.session_id AND s.kind = 'subagent'
               JOIN subagents sub ON sub.id = s.bot_id AND sub.parent = s.peer
              WHERE sub.withheld_description IS NULL
             UNION ALL
             SELECT sub.id, 0, sub.withheld_description FROM subagents sub
              WHERE sub.withheld_description IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM sessions s JOIN session_floors f ON f.session_id = s.id
                                 WHERE s.bot_id = sub.id AND s.kind = 'subagent' AND s.peer = sub.parent)",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::with_capacity(held.len());
    for (id, floored, withheld_description) in held {
        let id = BotId::new(&id).map_err(|e| corrupt("subagents", e.to_string()))?;
        if let Some(record) = get_subagent(conn, &id)? {
            out.push(crate::record::SubagentTaskHold {
                record,
                floored,
                withheld_description,
            });
        }
    }
    Ok(out)
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
        let u = usage_of([calls, prompt, prefix, cached, completion]);
        all.add(&u);
        turns += t;
        if d == today {
            day.add(&u);
        }
    }
    Ok((all, day, turns))
}

/// The usage on `day` of `root` and of each subagent it delegated to
/// (the bots whose model calls its daily token budget counts), one row
/// per bot that used tokens that day, by bot id. One keyed read of
/// `bot_usage` (its primary key is `(bot_id, day)`) over the subagents
/// table's index on `parent`.
pub(crate) fn family_usage(
    conn: &Connection,
    root: &BotId,
    day: &str,
) -> Result<Vec<(BotId, crate::record::TokenUsage)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT bot_id, calls, prompt_tokens, prefix_tokens, cached_tokens, completion_tokens \
         FROM bot_usage WHERE day = ?2 \
         AND (bot_id = ?1 OR bot_id IN (SELECT id FROM subagents WHERE parent = ?1)) \
         ORDER BY bot_id",
    )?;
    let rows = stmt.query_map(params![root.as_str(), day], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, calls, prompt, prefix, cached, completion) = row?;
        out.push((
            BotId::new(id)?,
            usage_of([calls, prompt, prefix, cached, completion]),
        ));
    }
    Ok(out)
}

/// A `bot_usage` row's counts (`calls`, `prompt_tokens`,
/// `prefix_tokens`, `cached_tokens`, `completion_tokens`) as usage; a
/// negative count (never written) reads as 0.
fn usage_of([calls, prompt, prefix, cached, completion]: [i64; 5]) -> crate::record::TokenUsage {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    crate::record::TokenUsage {
        calls: u32::try_from(calls).unwrap_or(u32::MAX),
        prompt_tokens: count(prompt),
        prefix_tokens: count(prefix),
        cached_tokens: count(cached),
        completion_tokens: count(completion),
    }
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

/// The ids of `owner`'s bots, in no set order: a search of the index
/// `bots_owner` that decodes no record (the API's read of an unwritten DM,
/// `GET /v1/sessions/{id}/entries`, matches a session id against them).
pub(crate) const BOT_IDS_OF_OWNER: &str = "SELECT id FROM bots WHERE owner = ?1";

/// See [`BOT_IDS_OF_OWNER`].
pub(crate) fn bot_ids_of(conn: &Connection, owner: &UserId) -> Result<Vec<BotId>> {
    let ids: Vec<String> = conn
        .prepare_cached(BOT_IDS_OF_OWNER)?
        .query_map(params![owner.as_str()], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter().map(|id| Ok(BotId::new(id)?)).collect()
}

/// The steps of SQLite's plan for `sql` (`EXPLAIN QUERY PLAN`), for the
/// tests that keep these reads off whole-table scans and sorts.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
fn plan(conn: &Connection, sql: &str, args: impl rusqlite::Params) -> Vec<String> {
    conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap()
        .query_map(args, |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[cfg(test)]
#[path = "reader_subagents_tests.rs"]
mod subagents_tests;

#[cfg(test)]
#[path = "reader_main_bots_tests.rs"]
mod main_bots_tests;
