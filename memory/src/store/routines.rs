//! The `routines` table: writes (applied by the writer inside its
//! transaction) and reads (on a reader connection).

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::Row;
use rusqlite::params;

use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::record::CatchUp;
use crate::record::RoutineOrigin;
use crate::record::RoutineRecord;
use crate::record::TurnRecord;

const COLUMNS: &str = "bot_id, name, cron, timezone, prompt, silent_ok, catch_up, origin, \
                       next_fire_ms, last_fire_ms, created_at, updated_at";

/// Creates or replaces a routine (its definition and schedule state). The
/// times are the record's, its creation time too: the scheduler keeps an
/// existing routine's for a change of it, and gives a routine that
/// replaces another of its name (a fleet-file routine replacing an API
/// one) its own, so the runs of the one before are not its own. So what
/// the scheduler holds and answers is what a read gives (the writer's
/// clock read them a millisecond or two later).
pub(crate) fn put(conn: &Connection, r: &RoutineRecord) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO routines (bot_id, name, cron, timezone, prompt, silent_ok, catch_up, origin,
                               next_fire_ms, last_fire_ms, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (bot_id, name) DO UPDATE SET cron = excluded.cron,
           timezone = excluded.timezone, prompt = excluded.prompt,
           silent_ok = excluded.silent_ok, catch_up = excluded.catch_up,
           origin = excluded.origin, next_fire_ms = excluded.next_fire_ms,
           last_fire_ms = excluded.last_fire_ms, created_at = excluded.created_at,
           updated_at = excluded.updated_at",
    )?
    .execute(params![
        r.bot.as_str(),
        r.name,
        r.cron,
        r.timezone,
        r.prompt,
        r.silent_ok,
        r.catch_up.as_str(),
        r.origin.as_str(),
        r.next_fire_ms,
        r.last_fire_ms,
        r.created_at,
        r.updated_at
    ])?;
    Ok(())
}

/// Deletes a routine; the number of rows removed (0 or 1).
pub(crate) fn delete(conn: &Connection, bot: &BotId, name: &str) -> Result<usize> {
    Ok(conn
        .prepare_cached("DELETE FROM routines WHERE bot_id = ?1 AND name = ?2")?
        .execute(params![bot.as_str(), name])?)
}

/// Records that the slot `slot_ms` was handled (fired, or skipped) and
/// moves the routine to `next_fire_ms`. Refused unless the routine is still
/// waiting for exactly that slot, so the batch it is part of (the
/// admission of the fire) rolls back with it. `updated_at` stays: it is
/// when the definition last changed (QA: every fire moved it).
pub(crate) fn advance(
    conn: &Connection,
    bot: &BotId,
    name: &str,
    slot_ms: i64,
    fired: bool,
    next_fire_ms: Option<i64>,
) -> Result<()> {
    let n = conn
        .prepare_cached(
            "UPDATE routines SET next_fire_ms = ?4,
               last_fire_ms = CASE WHEN ?5 THEN ?3 ELSE last_fire_ms END
             WHERE bot_id = ?1 AND name = ?2 AND next_fire_ms = ?3",
        )?
        .execute(params![bot.as_str(), name, slot_ms, next_fire_ms, fired])?;
    if n == 0 {
        return Err(StoreError::Rejected(format!(
            "routine {name:?} of bot {bot} is not waiting for slot {slot_ms} (changed, deleted or already handled)"
        )));
    }
    Ok(())
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<RawRoutine> {
    Ok(RawRoutine {
        bot: row.get(0)?,
        name: row.get(1)?,
        cron: row.get(2)?,
        timezone: row.get(3)?,
        prompt: row.get(4)?,
        silent_ok: row.get(5)?,
        catch_up: row.get(6)?,
        origin: row.get(7)?,
        next_fire_ms: row.get(8)?,
        last_fire_ms: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
    })
}

struct RawRoutine {
    bot: String,
    name: String,
    cron: String,
    timezone: String,
    prompt: String,
    silent_ok: bool,
    catch_up: String,
    origin: String,
    next_fire_ms: Option<i64>,
    last_fire_ms: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl RawRoutine {
    fn into_record(self) -> Result<RoutineRecord> {
        let corrupt = |detail: String| StoreError::Corrupt {
            table: "routines",
            detail,
        };
        Ok(RoutineRecord {
            bot: BotId::new(self.bot)?,
            catch_up: CatchUp::parse(&self.catch_up)
                .ok_or_else(|| corrupt(format!("catch_up {:?}", self.catch_up)))?,
            origin: RoutineOrigin::parse(&self.origin)
                .ok_or_else(|| corrupt(format!("origin {:?}", self.origin)))?,
            name: self.name,
            cron: self.cron,
            timezone: self.timezone,
            prompt: self.prompt,
            silent_ok: self.silent_ok,
            next_fire_ms: self.next_fire_ms,
            last_fire_ms: self.last_fire_ms,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Routines of one bot, or of every bot, ordered by bot and name.
pub(crate) fn list(conn: &Connection, bot: Option<&BotId>) -> Result<Vec<RoutineRecord>> {
    let rows: Vec<RawRoutine> = match bot {
        Some(bot) => conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM routines WHERE bot_id = ?1 ORDER BY name"
            ))?
            .query_map(params![bot.as_str()], from_row)?
            .collect::<rusqlite::Result<_>>()?,
        None => conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM routines ORDER BY bot_id, name"
            ))?
            .query_map([], from_row)?
            .collect::<rusqlite::Result<_>>()?,
    };
    rows.into_iter().map(RawRoutine::into_record).collect()
}

/// One routine.
pub(crate) fn get(conn: &Connection, bot: &BotId, name: &str) -> Result<Option<RoutineRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM routines WHERE bot_id = ?1 AND name = ?2"
    ))?
    .query_row(params![bot.as_str(), name], from_row)
    .optional()?
    .map(RawRoutine::into_record)
    .transpose()
}

/// How the last fire of a routine went, as the store knows it
/// ([`Store::routine_runs`](super::Store::routine_runs)).
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineRun {
    /// The routine's name.
    pub name: String,
    /// The `gid` of its last fire's event (what the turn that takes it
    /// lists among its `inputs`).
    pub fire: i64,
    /// The stored turn that took that fire (the newest, when a retry took
    /// it again), or `None` while no stored turn has: none has taken it
    /// yet, or the one that took it is still on its first model call (a
    /// turn is stored with its first step; its bot knows it meanwhile).
    pub turn: Option<TurnRecord>,
}

/// The runs of `bot`'s routines: for each routine that has fired, its
/// name, its last fire and the stored turn that took it (see
/// [`RoutineRun`]). The turn is
/// found through the entries of the routine's session after the fire (the
/// `(session_id, seq)` index), not by scanning the turns table, which has
/// no index on the session. Only fires of the routine as it is now count:
/// those since its row was created (a routine deleted and made again under
/// its name, through the API or fleet.toml, keeps its session, and the
/// runs of the one before are not its own).
pub(crate) fn last_runs(conn: &Connection, bot: &BotId) -> Result<Vec<RoutineRun>> {
    let sessions: Vec<(String, String, i64)> = conn
        .prepare_cached(
            "SELECT s.peer, s.id, r.created_at FROM sessions s
             JOIN routines r ON r.bot_id = s.bot_id AND r.name = s.peer
             WHERE s.bot_id = ?1 AND s.kind = 'routine'",
        )?
        .query_map(params![bot.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut runs = Vec::new();
    for (name, session, created_at) in sessions {
        let fire: Option<(i64, i64)> = conn
            .prepare_cached(
                "SELECT gid, seq FROM entries
                 WHERE session_id = ?1 AND kind = 'event' AND json_extract(body, '$.origin') = ?2
                   AND created_at >= ?3
                 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row(
                params![session, format!("routine:{name}"), created_at],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((gid, seq)) = fire else { continue };
        let turn_ids: Vec<String> = conn
            .prepare_cached(
                "SELECT DISTINCT turn_id FROM entries
                 WHERE session_id = ?1 AND seq > ?2 AND turn_id IS NOT NULL",
            )?
            .query_map(params![session, seq], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut taken: Option<TurnRecord> = None;
        for id in turn_ids {
            let Some(turn) = super::reader::get_turn(conn, id.parse()?)? else {
                continue;
            };
            let newer = taken
                .as_ref()
                .is_none_or(|t| (turn.started_at, turn.id) > (t.started_at, t.id));
            if turn.inputs.contains(&gid) && newer {
                taken = Some(turn);
            }
        }
        runs.push(RoutineRun {
            name,
            fire: gid,
            turn: taken,
        });
    }
    Ok(runs)
}

impl super::Store {
    /// The runs of `bot`'s routines: for each routine that has fired, its
    /// last fire and the stored turn that took it, or `None` while no
    /// stored turn has (the bot is busy, the fire was just admitted, or
    /// the turn that took it is on its first model call: see
    /// [`RoutineRun`]).
    pub async fn routine_runs(&self, bot: &BotId) -> Result<Vec<RoutineRun>> {
        let bot = bot.clone();
        self.read_many(move |c| last_runs(c, &bot)).await
    }
}

#[cfg(test)]
#[path = "routines_tests.rs"]
mod tests;
