//! Reads of a session around the events one author wrote in it: what a
//! room member's floor is decided on (a member may speak while the
//! coordinator's newest input to it is unanswered), and the notices a
//! member got between two of its inputs; and the turn ends after an input
//! (whether an earlier turn already answered it).
//!
//! Indexed reads that decode only the entries asked for, not the session's
//! tail: events are found by the `kind` and `author` columns walking
//! `(session_id, seq)`, so the JSON bodies of the entries passed over are
//! never parsed.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Store;
use super::reader::ENTRY_COLUMNS;
use super::reader::collect_entries;
use crate::error::Result;
use crate::ids::SessionId;
use crate::record::Entry;

/// The newest event by one author, and what came after it.
#[derive(Debug, Clone, PartialEq)]
pub struct SinceEvent {
    /// Seq of the newest event the author wrote in the session.
    pub seq: i64,
    /// The session's turn-end entries and notices after it, oldest first.
    pub after: Vec<Entry>,
}

impl Store {
    /// The newest event `author` wrote in `session` and the turn ends and
    /// notices after it; `None` if the author never wrote an event there.
    ///
    /// Runs on the calling thread: a short indexed read on a hot path (a
    /// member's SendMessage in a room), cheaper than the hop to the
    /// blocking pool.
    pub fn since_newest_event_now(
        &self,
        session: SessionId,
        author: &str,
    ) -> Result<Option<SinceEvent>> {
        let author = author.to_owned();
        self.inner
            .readers
            .with(|c| since_newest_event(c, session, &author))
    }

    /// The notices of `session` after seq `after`, oldest first.
    ///
    /// Runs on the calling thread, like [`Store::since_newest_event_now`].
    pub fn notices_after_now(&self, session: SessionId, after: i64) -> Result<Vec<Entry>> {
        self.inner.readers.with(|c| {
            collect_entries(
                c,
                &format!(
                    "SELECT {ENTRY_COLUMNS} FROM entries
                     WHERE session_id = ?1 AND seq > ?2 AND kind = 'notice' ORDER BY seq"
                ),
                params![session.to_string(), after],
            )
        })
    }

    /// The turn-end entries of `session` after seq `after`, oldest first.
    ///
    /// Runs on the calling thread, like [`Store::since_newest_event_now`].
    pub fn turn_ends_after_now(&self, session: SessionId, after: i64) -> Result<Vec<Entry>> {
        self.inner.readers.with(|c| {
            collect_entries(
                c,
                &format!(
                    "SELECT {ENTRY_COLUMNS} FROM entries
                     WHERE session_id = ?1 AND seq > ?2 AND kind = 'turn_end' ORDER BY seq"
                ),
                params![session.to_string(), after],
            )
        })
    }

    /// The notices of `session` after seq `after` and before the next
    /// event `author` wrote there (all of them if it wrote none), oldest
    /// first.
    pub async fn notices_before_next_event(
        &self,
        session: SessionId,
        after: i64,
        author: &str,
    ) -> Result<Vec<Entry>> {
        let author = author.to_owned();
        self.read(move |c| notices_before_next_event(c, session, after, &author))
            .await
    }
}

fn notices_before_next_event(
    conn: &Connection,
    session: SessionId,
    after: i64,
    author: &str,
) -> Result<Vec<Entry>> {
    collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries
             WHERE session_id = ?1 AND seq > ?2 AND kind = 'notice'
               AND seq < COALESCE((SELECT MIN(seq) FROM entries
                   WHERE session_id = ?1 AND seq > ?2 AND kind = 'event' AND author = ?3),
                   9223372036854775807)
             ORDER BY seq"
        ),
        params![session.to_string(), after, author],
    )
}

fn since_newest_event(
    conn: &Connection,
    session: SessionId,
    author: &str,
) -> Result<Option<SinceEvent>> {
    let session = session.to_string();
    let seq: Option<i64> = conn
        .prepare_cached(
            "SELECT seq FROM entries WHERE session_id = ?1 AND kind = 'event' AND author = ?2
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![session, author], |r| r.get(0))
        .optional()?;
    let Some(seq) = seq else {
        return Ok(None);
    };
    let after = collect_entries(
        conn,
        &format!(
            "SELECT {ENTRY_COLUMNS} FROM entries
             WHERE session_id = ?1 AND seq > ?2 AND kind IN ('turn_end', 'notice') ORDER BY seq"
        ),
        params![session, seq],
    )?;
    Ok(Some(SinceEvent { seq, after }))
}
