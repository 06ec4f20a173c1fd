//! Chains of bot-to-bot messages, by the input that started them: how many
//! messages each has sent, and whether its person was told it was cut off.
//! A message is counted in the transaction that appends it (one upsert
//! beside the entry), so the count is exact and survives restarts; the
//! writer checks it, in the transaction that would append the next one,
//! before it appends it (`WriteLimit::ChainMessages`), so the bound is
//! exact however many bots send at the same moment.
//!
//! A chain's row goes once it was last written longer ago than the
//! ledger's retention (with the ledger's hourly pruning): every message of
//! a chain writes its row, so a chain still sending is never pruned. The
//! table has no index on that time (it would cost a B-tree write per
//! message, on the hot path), so the silent rows are found by a reader
//! walking the table a page at a time in key order (`Store::silent_chains`:
//! a key search from where the last page ended, never a scan of the table,
//! and never on the writer), and the writer drops them by key
//! (`PruneChains`), checking each is still silent: a chain that sent
//! between the read and the write stays. A chain silent that long whose
//! last messages still wait (a paused bot, a host stopped for longer)
//! counts again from 0 if it wakes: at worst `runtime.max_chain_messages`
//! more messages, after a silence of at least a day, and a runaway chain
//! is never silent; its length stays bounded by the hop budget.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Store;
use crate::error::Result;
use crate::ids::EntryId;
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

/// A page of the chains' rows, in key order, after a key (`''` before the
/// first): a search of the primary key, so a page costs its rows however
/// large the table is.
pub(crate) const CHAINS_PAGE: &str =
    "SELECT origin, updated_at FROM chains WHERE origin > ?1 ORDER BY origin LIMIT ?2";

/// Drops one chain's row if it is still silent since before the cut-off.
pub(crate) const DROP_SILENT: &str = "DELETE FROM chains WHERE origin = ?1 AND updated_at < ?2";

/// Drops the rows of the chains `origins` started that were last written
/// before `before_ms` (a chain written since, still sending, stays); how
/// many went. Each is a search by key.
pub(crate) fn prune(conn: &Connection, before_ms: i64, origins: &[EntryId]) -> Result<usize> {
    let mut drop = conn.prepare_cached(DROP_SILENT)?;
    let mut gone = 0;
    for origin in origins {
        gone += drop.execute(params![origin.to_string(), before_ms])?;
    }
    Ok(gone)
}

/// Up to `max` rows of chains after `after`, in key order: those last
/// written before `before_ms`, and where the next page starts.
fn silent_page(conn: &Connection, after: &str, before_ms: i64, max: usize) -> Result<SilentChains> {
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(CHAINS_PAGE)?;
    let rows = stmt
        .query_map(params![after, limit], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let next = match rows.last() {
        Some((last, _)) if rows.len() >= max => Some(ChainsCursor(last.clone())),
        _ => None,
    };
    let silent = rows
        .iter()
        .filter(|(_, updated_at)| *updated_at < before_ms)
        // every row is written from an entry id; one that is not is no
        // chain's and is left alone
        .filter_map(|(origin, _)| origin.parse().ok())
        .collect();
    Ok(SilentChains { silent, next })
}

/// One page of the walk over the chains' rows that finds the silent ones
/// (`Store::silent_chains`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilentChains {
    /// The chains of this page last written before the cut-off, by the
    /// entry that started each: what `Mutation::PruneChains` drops.
    pub silent: Vec<EntryId>,
    /// Where the next page starts; `None` once the walk is through.
    pub next: Option<ChainsCursor>,
}

/// Where a walk over the chains' rows goes on: after the last row read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainsCursor(String);

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
        self.read_many(move |c| messages(c, &origin)).await
    }

    /// Whether the chain `origin` started was told it was cut off (a read
    /// that spares the writer a `TellChain` that would do nothing; the
    /// mutation decides).
    pub async fn chain_told(&self, origin: &ChainOrigin) -> Result<bool> {
        let origin = *origin;
        self.read(move |c| told(c, &origin)).await
    }

    /// A page of at most `max` chains' rows after `after` (from the start
    /// when `None`), with those of them last written before `before_ms`:
    /// the walk that finds the chains to prune, on a reader, so the writer
    /// is held only to drop them (`Mutation::PruneChains`).
    pub async fn silent_chains(
        &self,
        after: Option<&ChainsCursor>,
        before_ms: i64,
        max: usize,
    ) -> Result<SilentChains> {
        let after = after.map_or_else(String::new, |c| c.0.clone());
        let max = max.max(1);
        self.read_many(move |c| silent_page(c, &after, before_ms, max))
            .await
    }
}

#[cfg(test)]
#[path = "chains_tests.rs"]
mod tests;
