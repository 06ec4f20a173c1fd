//! The signatures of recent webhook deliveries (table `hook_signatures`,
//! migration 20), each with the delivery id it first came with: the same
//! signature under another id is a replay of that delivery, after a
//! restart too. The host keeps them in memory as well, as a cache; this is
//! the truth.
//!
//! A signature is written in the transaction that admits its delivery
//! ([`Mutation::RememberSignature`](crate::Mutation::RememberSignature),
//! batched before the `Admit`), and counts only while the ledger holds
//! that delivery with the digest it was written with: a crash leaves both
//! or neither, and
//! the row of a delivery that was not admitted (a `conflict`, an
//! `unknown`) counts for nothing and is replaced by the next delivery of
//! its signature. Bounded: past `max_kept` rows of one source the oldest
//! go in the transaction that adds one, and expired rows go with the
//! ledger's hourly pruning (`PruneLedger`).

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;

use super::Store;
use crate::digest::InputDigest;
use crate::error::Result;

/// What [`remember`] writes: a delivery's signature and how long it is
/// remembered.
pub(crate) struct Signed<'a> {
    /// The ledger source of the delivery (`hook:<bot>/<hook>`).
    pub source: &'a str,
    /// A digest of the signature as sent.
    pub signature: &'a InputDigest,
    /// The delivery id (the ledger nonce) it came with.
    pub delivery: &'a str,
    /// The digest of the delivery's admission.
    pub digest: &'a InputDigest,
    /// Remembered until then (ms).
    pub until_ms: i64,
    /// Most rows kept for `source`.
    pub max_kept: usize,
}

/// Remembers `signed` unless its signature is remembered already (for
/// another delivery that the ledger holds, and not expired), then drops
/// the oldest rows of its source past `max_kept`.
pub(crate) fn remember(conn: &Connection, signed: &Signed<'_>, now: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO hook_signatures (source, signature, delivery, n, until_ms, digest)
         VALUES (?1, ?2, ?3,
                 (SELECT coalesce(max(n), 0) + 1 FROM hook_signatures WHERE source = ?1), ?4, ?6)
         ON CONFLICT (source, signature) DO UPDATE
         SET delivery = excluded.delivery, n = excluded.n, until_ms = excluded.until_ms,
             digest = excluded.digest
         WHERE hook_signatures.until_ms <= ?5
            OR NOT EXISTS (SELECT 1 FROM ledger l WHERE l.source = hook_signatures.source
                           AND l.nonce = hook_signatures.delivery
                           AND l.digest = coalesce(hook_signatures.digest, ?6))",
    )?
    .execute(params![
        signed.source,
        signed.signature.0.as_slice(),
        signed.delivery,
        signed.until_ms,
        now,
        signed.digest.to_hex()
    ])?;
    // each row's `n` is above all of its source's before it: those within
    // `max_kept` of the newest are at most `max_kept`
    let kept = i64::try_from(signed.max_kept).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "DELETE FROM hook_signatures WHERE source = ?1
         AND n <= (SELECT max(n) FROM hook_signatures WHERE source = ?1) - ?2",
    )?
    .execute(params![signed.source, kept])?;
    Ok(())
}

/// Drops the rows expired as of `now`; how many went.
pub(crate) fn prune_expired(conn: &Connection, now: i64) -> Result<usize> {
    Ok(conn
        .prepare_cached("DELETE FROM hook_signatures WHERE until_ms <= ?1")?
        .execute(params![now])?)
}

impl Store {
    /// The delivery id `signature` (a digest of a webhook delivery's
    /// signature) was first remembered with under the ledger source
    /// `source`, and until when (ms), if it is remembered still: not
    /// expired, and that delivery is in the ledger with the digest it was
    /// remembered with, whatever body the signature comes with now (the
    /// caller answers another body as a conflict). `digest`, the asking
    /// request's, stands in for it on rows written before migration 31.
    pub async fn remembered_signature(
        &self,
        source: &str,
        signature: &InputDigest,
        digest: &InputDigest,
    ) -> Result<Option<(String, i64)>> {
        let now = self.clock().now_ms();
        let (source, signature, digest) = (source.to_owned(), *signature, digest.to_hex());
        self.read(move |c| find(c, &source, &signature, &digest, now))
            .await
    }
}

fn find(
    conn: &Connection,
    source: &str,
    signature: &InputDigest,
    digest: &str,
    now: i64,
) -> Result<Option<(String, i64)>> {
    Ok(conn
        .prepare_cached(
            "SELECT s.delivery, s.until_ms FROM hook_signatures s
             WHERE s.source = ?1 AND s.signature = ?2 AND s.until_ms > ?3
               AND EXISTS (SELECT 1 FROM ledger l WHERE l.source = s.source
                           AND l.nonce = s.delivery AND l.digest = coalesce(s.digest, ?4))",
        )?
        .query_row(params![source, signature.0.as_slice(), now, digest], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

#[cfg(test)]
#[path = "signatures_tests.rs"]
mod tests;
