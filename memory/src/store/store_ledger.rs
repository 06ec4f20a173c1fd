//! The [`Store`]'s read of the idempotency ledger outside an admission.

use rusqlite::Connection;
use rusqlite::params;

use super::Store;
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

fn has_key(conn: &Connection, source: &str, nonce: &str) -> Result<bool> {
    let mut stmt = conn.prepare_cached("SELECT 1 FROM ledger WHERE source = ?1 AND nonce = ?2")?;
    Ok(stmt.exists(params![source, nonce])?)
}
