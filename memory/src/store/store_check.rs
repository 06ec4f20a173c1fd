//! The store checked against what was derived from it: a start whose
//! search index or JSONL mirror holds entries the database does not have,
//! while no restore was made (`fleet.db.generation` says so), found a
//! database that lost writes it had committed, or one that is damaged
//! (QA: a damaged `fleet.db` started, answered every message `500
//! internal`, and `/healthz` said `ok`; a deleted or damaged WAL lost 60
//! accepted messages with only a WARN that blamed a restore).
//!
//! Every start also checks the whole database in the background
//! ([`Store::check_in_background`]): damage whose newest entry still reads
//! right was found only by the first write that met it, after the start
//! had answered `ok` and taken messages into it.

use super::Store;
use crate::error::Result;
use crate::error::StoreError;

impl Store {
    /// The first problem SQLite's `PRAGMA quick_check` finds in the
    /// database, `None` when it finds none. It reads every page: run once
    /// per start, in the background ([`Store::check_in_background`]), and
    /// where something already looks wrong.
    pub async fn quick_check(&self) -> Result<Option<String>> {
        self.read_many(|conn| {
            let mut stmt = conn.prepare("PRAGMA quick_check(1)")?;
            let first: String = stmt.query_row([], |r| r.get(0))?;
            Ok((first != "ok").then_some(first))
        })
        .await
    }

    /// Runs [`Store::quick_check`] on the blocking pool without delaying
    /// the caller: damage found latches the store damaged
    /// ([`Store::latch_damaged`]: writes refused, `/healthz` failing) and
    /// logs an ERROR saying what to do. A check that could not run is a
    /// WARN; the next start checks again.
    pub fn check_in_background(&self) {
        let store = self.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            match store.quick_check().await {
                Ok(None) => {
                    tracing::debug!(
                        elapsed_ms = started.elapsed().as_millis(),
                        "the database passed PRAGMA quick_check"
                    );
                }
                Ok(Some(problem)) => {
                    let problem = problem.replace('\n', " ");
                    let detail = format!(
                        "PRAGMA quick_check: {problem}; writes are refused so that nothing more \
                         is taken into a damaged file: stop the host and restore fleet.db from a \
                         backup (docs/operations.md, \"Backups and restore\")"
                    );
                    tracing::error!(%problem, "the database is damaged: {detail}");
                    store.latch_damaged(detail);
                }
                Err(error) => {
                    tracing::warn!(%error, "the database could not be checked (PRAGMA quick_check); the next start checks it again");
                }
            }
        });
    }

    /// Marks the database damaged, as a write that found it so does:
    /// every write is refused from now on (`503 storage_error`) and
    /// `/healthz` answers `503 failing`, naming `detail`.
    pub fn latch_damaged(&self, detail: String) {
        self.stats()
            .health
            .note_write_failure(&StoreError::Damaged { detail });
    }

    /// Notes, until the host stops, that the database lost writes it had
    /// committed (`detail` says which and where they went): `/healthz`
    /// answers `200 degraded` with it, and a start's banner shows it.
    pub fn note_lost_writes(&self, detail: String) {
        self.stats().health.note_lost(detail);
    }
}
