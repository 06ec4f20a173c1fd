//! Chains of bot-to-bot messages, by the input that started them: how many
//! messages each has sent, and whether its person was told it was cut off.
//! A message is counted in the transaction that appends it (one upsert
//! beside the entry), so the count is exact and survives restarts; the
//! writer checks it, in the transaction that would append the next one,
//! before it appends it (`WriteLimit::ChainMessages`), so the bound is
//! exact however many bots send at the same moment.
//!
//! A chain's row goes once it was last written longer ago than the
//! ledger's retention (`PruneChains`, with the ledger's hourly pruning):
//! every message of a chain writes its row, so a chain still sending is
//! never pruned. A chain silent that long whose last messages still wait
//! (a paused bot, a host stopped for longer) counts again from 0 if it
//! wakes: at worst `runtime.max_chain_messages` more messages, after a
//! silence of at least a day, and a runaway chain is never silent; its
//! length stays bounded by the hop budget.

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

/// Whether `needed` more messages of the chain `origin` started fit in
/// `max`.
pub(crate) fn has_room(
    conn: &Connection,
    origin: &ChainOrigin,
    max: u64,
    needed: u64,
) -> Result<bool> {
    Ok(messages(conn, origin)?.saturating_add(needed) <= max)
}

/// Drops at most `max` rows of chains last written before `before_ms`;
/// how many went. The scan stops once `max` are found (chains start at
/// entry ids, mostly UUIDv7s: in key order the oldest come first), so
/// each call holds the writer briefly however large the table is.
pub(crate) fn prune(conn: &Connection, before_ms: i64, max: usize) -> Result<usize> {
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    Ok(conn
        .prepare_cached(
            "DELETE FROM chains WHERE origin IN
               (SELECT origin FROM chains WHERE updated_at < ?1 LIMIT ?2)",
        )?
        .execute(params![before_ms, max])?)
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
