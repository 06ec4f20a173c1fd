//! The [`Store`]'s read of the idempotency ledger outside an admission.

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Store;
use crate::AdmitOutcome;
use crate::AdmitRequest;
use crate::AdmittedRecord;
use crate::BotId;
use crate::InputDigest;
use crate::error::Result;

impl Store {
    /// Whether the ledger holds a message from `source` (`user:<id>`, as
    /// admissions write it) under the idempotency key `nonce`: a retry of
    /// it is answered `duplicate` (or `conflict`), so the API lets it
    /// through a user's message rate, which counts only new messages.
    pub async fn ledger_has_key(&self, source: &str, nonce: &str) -> Result<bool> {
        let (source, nonce) = (source.to_owned(), nonce.to_owned());
        self.read(move |c| has_key(c, &source, &nonce)).await
    }
}

impl Store {
    /// What the ledger already answers to `req`: `duplicate` (its key
    /// with the same digest) or `conflict` (another digest) with the
    /// original record, or `None` when it holds no message under its key.
    /// A read, for a message the API refuses before admitting (to a bot
    /// that takes no more messages): a retry of one accepted before still
    /// gets the answer its admission would.
    pub async fn ledger_answer(&self, req: &AdmitRequest) -> Result<Option<AdmitOutcome>> {
        let req = req.clone();
        self.read(move |c| answer(c, &req)).await
    }

    /// [`Store::ledger_answer`] from the parts it compares: the message
    /// from `source` under the key `nonce`, whose input has `digest`. For
    /// a retry to what its sender can no longer reach (a bot given to
    /// another user, a room they were taken out of), where no request can
    /// be made.
    pub async fn ledger_answer_to(
        &self,
        source: &str,
        nonce: &str,
        digest: InputDigest,
    ) -> Result<Option<AdmitOutcome>> {
        let (source, nonce) = (source.to_owned(), nonce.to_owned());
        self.read(move |c| answer_to(c, &source, &nonce, &digest))
            .await
    }
}

/// The ledger's answer to `req` when it holds its key (the writer's
/// admission asks it first, in its transaction).
pub(super) fn answer(conn: &Connection, req: &AdmitRequest) -> Result<Option<AdmitOutcome>> {
    answer_to(conn, &req.source, &req.nonce, &req.digest)
}

fn answer_to(
    conn: &Connection,
    source: &str,
    nonce: &str,
    digest_of_input: &InputDigest,
) -> Result<Option<AdmitOutcome>> {
    let found: Option<(String, String, String, i64, i64, String, i64)> = conn
        .prepare_cached(
            "SELECT digest, bot_id, session_id, seq, gid, entry_id, created_at
             FROM ledger WHERE source = ?1 AND nonce = ?2",
        )?
        .query_row(params![source, nonce], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .optional()?;
    let Some((digest, bot, session, seq, gid, entry_id, created_at)) = found else {
        return Ok(None);
    };
    let record = AdmittedRecord {
        bot: BotId::new(bot)?,
        session: session.parse()?,
        seq,
        gid,
        entry_id: entry_id.parse()?,
        admitted_at: created_at,
    };
    Ok(Some(if digest == digest_of_input.to_hex() {
        AdmitOutcome::Duplicate(record)
    } else {
        AdmitOutcome::Conflict(record)
    }))
}

fn has_key(conn: &Connection, source: &str, nonce: &str) -> Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM ledger WHERE source = ?1 AND nonce = ?2")?;
    Ok(stmt.exists(params![source, nonce])?)
}
