//! The `extractions_owed` table (migrations 12 and 16): the fact
//! extractions of completed turns that have not finished yet. Writes are applied by the
//! writer inside its transaction, reads run on a reader connection.
//!
//! A row is written with its turn's end and deleted when the
//! extraction's outcome is recorded, so only an extraction cut off by a
//! crash or a restart outlives its host; the next start runs it again
//! (`botfleet_actors::memory`), counting each such re-run in `attempts`,
//! unless the bot's owner is no longer the one recorded (`owner_id`,
//! migration 16): the row holds that owner's messages.

use rusqlite::Connection;
use rusqlite::params;
use serde::Deserialize;
use serde::Serialize;

use super::Store;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;

/// A completed turn's fact extraction that has not finished: what it
/// reads, so that it can run again after a restart exactly as it would
/// have run after the turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwedExtraction {
    /// The turn.
    pub turn: TurnId,
    /// Its bot.
    pub bot: BotId,
    /// Its session.
    pub session: SessionId,
    /// Ids of the memory items the turn showed (the only ones the
    /// extraction may replace or remove), as text.
    pub shown: Vec<String>,
    /// The bot's owner when the turn ended: the person who wrote
    /// `user_texts`, whose memory the extraction writes. A re-run after
    /// the bot went to another owner is dropped, or the former owner's
    /// words would land in the new owner's memory.
    pub owner: UserId,
    /// What the bot's owner wrote in the turn.
    pub user_texts: Vec<String>,
    /// The turn's final reply.
    pub final_reply: String,
    /// Runs started after a restart so far (0 until the first re-run).
    pub attempts: i64,
    /// When it was first owed (ms; set by the writer).
    pub created_at: i64,
}

/// The row's `job` column: what the extraction reads.
#[derive(Serialize, Deserialize)]
struct Job {
    shown: Vec<String>,
    user_texts: Vec<String>,
    reply: String,
}

/// Records that `owed`'s extraction has to run; a turn already owed is
/// left as it is (its attempts are kept).
pub(crate) fn owe(conn: &Connection, owed: &OwedExtraction, now: i64) -> Result<()> {
    let job = serde_json::to_string(&Job {
        shown: owed.shown.clone(),
        user_texts: owed.user_texts.clone(),
        reply: owed.final_reply.clone(),
    })
    .map_err(|e| StoreError::Corrupt {
        table: "extractions_owed",
        detail: e.to_string(),
    })?;
    conn.prepare_cached(
        "INSERT INTO extractions_owed (turn_id, bot_id, session_id, job, attempts, created_at, owner_id)
         VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6) ON CONFLICT (turn_id) DO NOTHING",
    )?
    .execute(params![
        owed.turn.to_string(),
        owed.bot.as_str(),
        owed.session.to_string(),
        job,
        now,
        owed.owner.as_str()
    ])?;
    Ok(())
}

/// Deletes a turn's owed extraction; the rows removed (0 or 1).
pub(crate) fn clear(conn: &Connection, turn: TurnId) -> Result<usize> {
    Ok(conn
        .prepare_cached("DELETE FROM extractions_owed WHERE turn_id = ?1")?
        .execute(params![turn.to_string()])?)
}

/// Counts one more re-run of a turn's owed extraction; its attempts after
/// the count (0 when it is no longer owed).
pub(crate) fn bump(conn: &Connection, turn: TurnId) -> Result<i64> {
    let n = conn
        .prepare_cached(
            "UPDATE extractions_owed SET attempts = attempts + 1 WHERE turn_id = ?1
             RETURNING attempts",
        )?
        .query_row(params![turn.to_string()], |r| r.get::<_, i64>(0));
    match n {
        Ok(n) => Ok(n),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// The oldest `limit` owed extractions.
fn list(conn: &Connection, limit: i64) -> Result<Vec<OwedExtraction>> {
    let mut stmt = conn.prepare_cached(
        "SELECT turn_id, bot_id, session_id, job, attempts, created_at, owner_id
         FROM extractions_owed ORDER BY created_at, turn_id LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, String>(6)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (turn, bot, session, job, attempts, created_at, owner) = row?;
        let job: Job = serde_json::from_str(&job)
            .map_err(|e| reader_corrupt(format!("job of turn {turn}: {e}")))?;
        out.push(OwedExtraction {
            turn: turn.parse()?,
            bot: BotId::new(bot)?,
            session: session.parse()?,
            owner: UserId::new(owner)?,
            shown: job.shown,
            user_texts: job.user_texts,
            final_reply: job.reply,
            attempts,
            created_at,
        });
    }
    Ok(out)
}

fn reader_corrupt(detail: String) -> StoreError {
    StoreError::Corrupt {
        table: "extractions_owed",
        detail,
    }
}

impl Store {
    /// The oldest `limit` fact extractions still owed (cut off by a crash
    /// or a restart), oldest first.
    pub async fn owed_extractions(&self, limit: i64) -> Result<Vec<OwedExtraction>> {
        self.read_many(move |c| list(c, limit)).await
    }
}

#[cfg(test)]
#[path = "extractions_tests.rs"]
mod tests;
