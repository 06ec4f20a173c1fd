//! What a Forget forgot, kept for the fact extractions still to land
//! (table `memory_forget_marks`, migration 15).
//!
//! A turn's fact extraction runs after the turn, in the background (and
//! after a restart, maybe much later: `extractions_owed`). A person who
//! says a fact and then asks to forget it must not see the fact come back
//! when the extraction of the earlier turn lands. So every Forget leaves a
//! mark per scope it reached, with its commit time: the text a Forget by
//! text matched on, or the hash of the text of an item forgotten by id.
//! An extraction's add ([`MemoryOp::AddExtracted`](super::MemoryOp)) is
//! checked against the marks of its scope committed at or after its
//! turn's start (`turns.started_at`): what was said before a Forget stays
//! forgotten, what is said after it may be remembered again.
//!
//! Marks are pruned once no extraction can predate them: older than the
//! oldest turn still running or owing its extraction, and than
//! [`MIN_KEEP_MS`] (a running turn writes its start with its first step,
//! so the store does not see it before). A needle is the text of a
//! forgotten fact, or part of it: pruning deletes it with
//! `secure_delete`, as a forgotten item is.

use rusqlite::Connection;
use rusqlite::params;
use sha2::Digest;
use sha2::Sha256;

use super::apply::forgotten_scope;
use super::apply::get_item;
use super::apply::secure;
use super::types::MemoryId;
use super::types::MemoryItem;
use super::types::MemoryScope;
use super::types::NewMemory;
use super::types::comparison_key;
use crate::error::Result;
use crate::ids::TurnId;

/// Shortest time a mark is kept: a turn that started before the Forget
/// but has not written its first step yet (its first model call) is not
/// in the store for the pruning to see.
pub(crate) const MIN_KEEP_MS: i64 = 3_600_000;

/// Records a Forget by text of `scope` that matched on `needle`.
pub(crate) fn record_needle(
    conn: &Connection,
    scope: &MemoryScope,
    needle: &str,
    now: i64,
) -> Result<()> {
    prune(conn, now)?;
    let needle = comparison_key(needle);
    if needle.is_empty() {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT INTO memory_forget_marks (scope_kind, scope_id, needle, forgotten_at)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![scope.kind().as_str(), scope.key(), needle, now])?;
    Ok(())
}

/// Records that `item` was forgotten (by id): its text's hash, not the
/// text.
pub(crate) fn record_removed(conn: &Connection, item: &MemoryItem, now: i64) -> Result<()> {
    prune(conn, now)?;
    conn.prepare_cached(
        "INSERT INTO memory_forget_marks (scope_kind, scope_id, text_hash, forgotten_at)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        item.scope.kind().as_str(),
        item.scope.key(),
        text_hash(&item.text),
        now
    ])?;
    Ok(())
}

/// Whether a Forget covers `new`, proposed by the extraction of `turn`:
/// its id was forgotten (the same extraction ran before and its add was
/// forgotten since), or a mark of its scope committed at or after the
/// turn's start matches its text.
pub(crate) fn covers(conn: &Connection, new: &NewMemory, turn: TurnId, now: i64) -> Result<bool> {
    prune(conn, now)?;
    if forgotten_scope(conn, &new.id)?.is_some() {
        return Ok(true);
    }
    let Some(started) = turn_start(conn, turn)? else {
        return Ok(false);
    };
    let key = comparison_key(&new.text);
    let hash = text_hash(&new.text);
    let mut stmt = conn.prepare_cached(
        "SELECT needle, text_hash FROM memory_forget_marks
         WHERE scope_kind = ?1 AND scope_id = ?2 AND forgotten_at >= ?3",
    )?;
    let mut rows = stmt.query(params![new.scope.kind().as_str(), new.scope.key(), started])?;
    while let Some(row) = rows.next()? {
        let needle: Option<String> = row.get(0)?;
        let hashed: Option<String> = row.get(1)?;
        let by_text = needle.is_some_and(|n| key.contains(&n));
        let by_item = hashed.is_some_and(|h| h == hash);
        if by_text || by_item {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The item `id` of `scope` when it changed after its turn ended at
/// `ended` ([`turn_end`]: a newer fact than what the turn said: the
/// extraction proposing the change read the turn's words), else `None`
/// (also for a turn the store does not know or that has not ended, or an
/// item gone or elsewhere: the change itself answers those). The turn's
/// own changes (a Remember during it) are older than its end and do not
/// count.
pub(crate) fn changed_since(
    conn: &Connection,
    id: &MemoryId,
    scope: &MemoryScope,
    ended: Option<i64>,
) -> Result<Option<MemoryItem>> {
    let Some(ended) = ended else {
        return Ok(None);
    };
    Ok(get_item(conn, id)?.filter(|i| &i.scope == scope && i.updated_at > ended))
}

/// When `turn` ended, if the store knows it and it has ended.
pub(crate) fn turn_end(conn: &Connection, turn: TurnId) -> Result<Option<i64>> {
    let ended: Option<i64> = conn
        .prepare_cached("SELECT ended_at FROM turns WHERE id = ?1")?
        .query_row(params![turn.to_string()], |r| r.get(0))
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(ended)
}

/// When `turn` started, if the store knows it.
fn turn_start(conn: &Connection, turn: TurnId) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT started_at FROM turns WHERE id = ?1")?
        .query_row(params![turn.to_string()], |r| r.get(0))
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(Into::into)
}

/// Deletes the marks no extraction can predate any more (see the module
/// docs).
fn prune(conn: &Connection, now: i64) -> Result<()> {
    // owed rows are few, turns many: each owed row looks its turn up
    let oldest_pending: Option<i64> = conn
        .prepare_cached(
            "SELECT MIN(started_at) FROM (
                 SELECT started_at FROM turns WHERE status = 'running'
                 UNION ALL
                 SELECT (SELECT started_at FROM turns WHERE id = o.turn_id)
                 FROM extractions_owed o
             )",
        )?
        .query_row([], |r| r.get(0))?;
    let horizon = oldest_pending.map_or(now - MIN_KEEP_MS, |t| t.min(now - MIN_KEEP_MS));
    secure(conn, |conn| {
        conn.prepare_cached("DELETE FROM memory_forget_marks WHERE forgotten_at < ?1")?
            .execute(params![horizon])?;
        Ok(())
    })
}

/// The hash a mark keeps of a forgotten item's text (comparison form).
fn text_hash(text: &str) -> String {
    hex::encode(Sha256::digest(comparison_key(text).as_bytes()))
}

#[cfg(test)]
#[path = "forget_marks_tests.rs"]
mod tests;
