//! The store checked against what was derived from it: a start whose
//! search index or JSONL mirror holds entries the database does not have,
//! while no restore was made (`fleet.db.generation` says so), found a
//! database that lost writes it had committed, or one that is damaged
//! (QA: a damaged `fleet.db` started, answered every message `500
//! internal`, and `/healthz` said `ok`; a deleted or damaged WAL lost 60
//! accepted messages with only a WARN that blamed a restore).

use super::Store;
use crate::error::Result;
use crate::error::StoreError;

impl Store {
    /// The first problem SQLite's `PRAGMA quick_check` finds in the
    /// database, `None` when it finds none. It reads every page, so it is
    /// run only where something already looks wrong.
    pub async fn quick_check(&self) -> Result<Option<String>> {
        self.read_many(|conn| {
            let mut stmt = conn.prepare("PRAGMA quick_check(1)")?;
            let first: String = stmt.query_row([], |r| r.get(0))?;
            Ok((first != "ok").then_some(first))
        })
        .await
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
