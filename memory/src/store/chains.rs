//! Chains of bot-to-bot messages, by the input that started them: how many
//! messages each has sent, and whether its person was told it was cut off.
//! A message is counted in the transaction that appends it (one upsert
//! beside the entry), so the count is exact and survives restarts; the
//! actors read it in one keyed read before they send another.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Store;
use crate::error::Result;
use crate::record::ChainOrigin;

/// Counts one more message of the chain `origin` started.
pub(crate) fn count(conn: &Connection, origin: &ChainOrigin, now: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO chains (origin, messages, told, updated_at) VALUES (?1, 1, 0, ?2)
         ON CONFLICT (origin) DO UPDATE SET messages = messages + 1, updated_at = excluded.updated_at",
    )?
    .execute(params![origin.entry.to_string(), now])?;
    Ok(())
}

/// Marks the chain `origin` started as told it was cut off; whether it was
/// not told before (so the notice is to be written now).
pub(crate) fn mark_told(conn: &Connection, origin: &ChainOrigin, now: i64) -> Result<bool> {
    let n = conn
        .prepare_cached(
            "INSERT INTO chains (origin, messages, told, updated_at) VALUES (?1, 0, 1, ?2)
             ON CONFLICT (origin) DO UPDATE SET told = 1, updated_at = excluded.updated_at
             WHERE told = 0",
        )?
        .execute(params![origin.entry.to_string(), now])?;
    Ok(n > 0)
}

/// Messages the chain `origin` started has sent so far.
fn messages(conn: &Connection, origin: &ChainOrigin) -> Result<u64> {
    let n: Option<i64> = conn
        .prepare_cached("SELECT messages FROM chains WHERE origin = ?1")?
        .query_row(params![origin.entry.to_string()], |r| r.get(0))
        .optional()?;
    Ok(n.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}

/// Whether the person of the chain `origin` started was told it was cut off.
fn told(conn: &Connection, origin: &ChainOrigin) -> Result<bool> {
    let told: Option<i64> = conn
        .prepare_cached("SELECT told FROM chains WHERE origin = ?1")?
        .query_row(params![origin.entry.to_string()], |r| r.get(0))
        .optional()?;
    Ok(told == Some(1))
}

impl Store {
    /// How many bot-to-bot messages the chain `origin` started has sent.
    pub async fn chain_messages(&self, origin: &ChainOrigin) -> Result<u64> {
        let origin = *origin;
        self.read(move |c| messages(c, &origin)).await
    }

    /// Whether the chain `origin` started was told it was cut off (a read
    /// that spares the writer a `TellChain` that would do nothing; the
    /// mutation decides).
    pub async fn chain_told(&self, origin: &ChainOrigin) -> Result<bool> {
        let origin = *origin;
        self.read(move |c| told(c, &origin)).await
    }
}

#[cfg(test)]
#[path = "chains_tests.rs"]
mod tests;
