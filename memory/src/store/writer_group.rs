//! The writer's group commit: every waiting batch in one transaction, a
//! group with a failing batch replayed with one savepoint per batch, the
//! callers answered after the commit, and the WAL checkpoint the writer
//! finishes between two groups. `impl Writer`, split from `writer.rs`.

use std::collections::HashMap;

use super::Reply;
use super::Touched;
use super::Writer;
use crate::error::Result;
use crate::error::StoreError;
use crate::record::Change;
use crate::store::checkpointer;
use crate::store::mutation::Mutation;
use crate::store::mutation::MutationResult;

impl Writer {
    /// Checkpoints what the checkpoint thread could not reach (the frames
    /// committed while it ran) with no transaction open, so the WAL is
    /// fully copied and the next write starts it over from the beginning.
    /// Without this a WAL under steady writes never starts over: the
    /// checkpoint thread always lags the newest commits, and the file grows
    /// by every frame ever written until the load stops.
    pub(super) fn catch_up_wal(&mut self) {
        let started = std::time::Instant::now();
        match checkpointer::passive(&self.conn) {
            Ok((log, done)) => {
                use std::sync::atomic::Ordering::Relaxed;
                self.stats.wal_catch_ups.fetch_add(1, Relaxed);
                self.stats
                    .wal_catch_up_us
                    .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
                tracing::debug!(log, done, "writer caught up the WAL checkpoint");
            }
            Err(e) => tracing::debug!(error = %e, "writer checkpoint skipped"),
        }
    }

    /// Whether the database and its WAL are still the files at their
    /// paths; asked before each `COMMIT`, so that nothing is acknowledged
    /// into a deleted or replaced file (`file_identity.rs`).
    fn files_in_place(&self) -> Result<()> {
        self.files.check()
    }

    pub(super) fn commit_group(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>) {
        // Fast path: every batch in one transaction, no savepoints. A batch
        // that fails is rare (a caller bug or a race it must resolve); then
        // the whole group is rolled back and replayed with one savepoint per
        // batch, so the failing one fails alone.
        // A database found damaged takes no more writes until the host
        // stops: what it took would be lost by the restore from a backup
        // (`writer_health.rs`).
        if let Some(damaged) = self.stats.health.damaged() {
            self.fail_group(jobs, "refused (the database is damaged)", &damaged);
            return;
        }
        match self.try_group(jobs) {
            Ok(Some((results, touched))) => self.finish_group(jobs, results, touched),
            Ok(None) => self.commit_group_isolated(jobs),
            Err(e) => self.fail_group(jobs, "transaction failed", &e),
        }
    }

    /// Applies every batch in one transaction. `Ok(None)` when a batch
    /// failed (the transaction is rolled back, for the batches to be
    /// replayed one savepoint each); `Err` when the group cannot commit at
    /// all (SQLite rolled it back itself, or the commit failed).
    #[allow(clippy::type_complexity)]
    fn try_group(
        &mut self,
        jobs: &[(Vec<Mutation>, Reply)],
    ) -> Result<Option<(Vec<Result<Vec<MutationResult>>>, Touched)>> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        // raised by a prune inside the transaction: put back if it is not
        // committed (the meta row that keeps it goes with the rollback)
        let horizon = self.horizon_ms;
        let mut results = Vec::with_capacity(jobs.len());
        let mut touched: Touched = HashMap::new();
        for (batch, _) in jobs {
            let mut out = Vec::with_capacity(batch.len());
            for mutation in batch {
                match self.apply(mutation, &mut touched) {
                    Ok(r) => out.push(r),
                    Err(e) => {
                        // a write error inside a statement (a full disk, a
                        // file-size limit, an I/O error as the page cache
                        // spills into the WAL) has SQLite roll the whole
                        // transaction back itself: nothing is left to roll
                        // back, and no batch of the group was applied, so
                        // the group fails with that error (audit: the
                        // writer's own ROLLBACK failed, returned before
                        // the caches were cleared, and answered `Rejected`)
                        let gone = self.conn.is_autocommit();
                        let rolled_back = if gone {
                            Ok(())
                        } else {
                            self.conn.execute_batch("ROLLBACK")
                        };
                        self.seqs.clear();
                        self.sessions.clear();
                        self.horizon_ms = horizon;
                        if gone {
                            return Err(e);
                        }
                        rolled_back?;
                        return Ok(None);
                    }
                }
            }
            results.push(Ok(out));
        }
        if let Err(e) = self.files_in_place() {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            self.horizon_ms = horizon;
            return Err(e);
        }
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            self.horizon_ms = horizon;
            return Err(e.into());
        }
        Ok(Some((results, touched)))
    }

    /// Answers every job of a group that could not be committed. A full
    /// or failing disk, a damaged database and a deleted one keep their
    /// own variant (the API tells the user what to do), as does a write
    /// lock held elsewhere (SQLite's busy error: retryable); anything else
    /// is a rejected write.
    fn fail_group(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>, during: &str, e: &StoreError) {
        self.stats.health.note_write_failure(e);
        // the same failure at every retry and every request: once, then
        // once a minute with the count (`writer_health.rs`)
        match self.stats.health.log_now(&format!("{during}: {e}")) {
            Some(0) => tracing::error!(error = %e, during, "store group failed"),
            Some(repeats) => tracing::error!(
                error = %e,
                during,
                repeats,
                "store group failed (the same failure again; `repeats` counts the ones not logged since the last line)"
            ),
            None => {}
        }
        for (_, reply) in jobs.drain(..) {
            answer(reply, Err(group_failure(during, e)));
        }
    }

    fn finish_group(
        &mut self,
        jobs: &mut Vec<(Vec<Mutation>, Reply)>,
        results: Vec<Result<Vec<MutationResult>>>,
        touched: Touched,
    ) {
        self.stats.health.note_written();
        // cached memory snapshots of a written scope and kept bot records go
        // stale before anyone who wrote them hears back
        let mut scopes = Vec::new();
        let mut bots_written = false;
        // (a `Limited`'s writes too, whichever branch it took)
        for m in jobs
            .iter()
            .flat_map(|(batch, _)| batch)
            .flat_map(Mutation::every_write)
        {
            if let Mutation::Memory(op) = m {
                scopes.push(op.scope());
            } else if let Mutation::UpsertBot(_) | Mutation::CreateBot(_) = m {
                bots_written = true;
            }
        }
        self.memory_generations.bump(scopes);
        if bots_written {
            self.bots.bump();
        }
        for ((batch, _), result) in jobs.iter().zip(&results) {
            if result.is_ok() {
                self.note_starts(batch);
            }
        }
        for ((_, reply), result) in jobs.drain(..).zip(results) {
            answer(reply, result);
        }
        if self.changes.receiver_count() > 0 {
            for (session, seq) in touched {
                // a job of the group that failed emptied the cache
                // (`apply_job`): a session touched by a job committed
                // before it is read again, not left unsignalled
                match self.session_meta(session) {
                    Ok((bot, owner)) => {
                        let _ = self.changes.send(Change {
                            session,
                            seq,
                            bot,
                            owner,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(%session, seq, error = %e, "no change signal for a written session")
                    }
                }
            }
        }
    }

    /// The slow path: one savepoint per batch.
    fn commit_group_isolated(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>) {
        let mut results: Vec<Result<Vec<MutationResult>>> = Vec::with_capacity(jobs.len());
        let mut touched: Touched = HashMap::new();
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            self.fail_group(jobs, "begin failed", &StoreError::from(e));
            return;
        }
        let horizon = self.horizon_ms;
        for i in 0..jobs.len() {
            let result = self.apply_job(&jobs[i].0, &mut touched);
            if self.conn.is_autocommit() {
                // SQLite rolled the whole group back itself (see
                // `try_group`): the next job's `SAVEPOINT` would open a
                // transaction of its own, which its `RELEASE` committed
                // while the group's `COMMIT` failed and its caller was told
                // so (audit)
                self.seqs.clear();
                self.sessions.clear();
                self.horizon_ms = horizon;
                let e = result.err().unwrap_or_else(|| {
                    StoreError::Rejected("the transaction ended before its commit".into())
                });
                self.fail_group(jobs, "a write failed and SQLite rolled the group back", &e);
                return;
            }
            results.push(result);
        }
        // a job that found the database damaged: none of the group is
        // committed, the damage is latched (`writer_health.rs`)
        for e in results.iter().filter_map(|r| r.as_ref().err()) {
            self.stats.health.note_write_failure(e);
        }
        if let Some(damaged) = self.stats.health.damaged() {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            self.horizon_ms = horizon;
            self.fail_group(jobs, "a write found the database damaged", &damaged);
            return;
        }
        if let Err(e) = self
            .files_in_place()
            .and_then(|()| Ok(self.conn.execute_batch("COMMIT")?))
        {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            self.horizon_ms = horizon;
            self.fail_group(jobs, "commit failed", &e);
            return;
        }
        self.finish_group(jobs, results, touched);
    }

    fn apply_job(
        &mut self,
        batch: &[Mutation],
        touched: &mut Touched,
    ) -> Result<Vec<MutationResult>> {
        self.conn.execute_batch("SAVEPOINT job")?;
        let horizon = self.horizon_ms;
        let mut local: Touched = HashMap::new();
        let mut out = Vec::with_capacity(batch.len());
        let mut failure = None;
        for mutation in batch {
            match self.apply(mutation, &mut local) {
                Ok(r) => out.push(r),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        match failure {
            None => {
                self.conn.execute_batch("RELEASE job")?;
                for (session, seq) in local {
                    let slot = touched.entry(session).or_insert(seq);
                    *slot = (*slot).max(seq);
                }
                Ok(out)
            }
            Some(e) => {
                // undone alone, or with the whole group when SQLite rolled
                // it back itself or the savepoint cannot be: the caller
                // sees the transaction gone (`is_autocommit`) and fails the
                // group with `e`
                let undone = self.conn.is_autocommit()
                    || self
                        .conn
                        .execute_batch("ROLLBACK TO job; RELEASE job")
                        .is_ok();
                if !undone {
                    let _ = self.conn.execute_batch("ROLLBACK");
                }
                self.horizon_ms = horizon;
                for session in local.keys() {
                    self.seqs.remove(session);
                }
                // a session the job created is rolled back with it: a
                // cached one would make the next job skip creating its row
                self.sessions.clear();
                Err(e)
            }
        }
    }
}

/// The error one job of a failed group is answered with (`StoreError` is
/// not `Clone`: each job gets its own).
fn group_failure(during: &str, e: &StoreError) -> StoreError {
    match e {
        StoreError::DiskFull { detail } => StoreError::DiskFull {
            detail: detail.clone(),
        },
        StoreError::DiskIo { detail } => StoreError::DiskIo {
            detail: detail.clone(),
        },
        StoreError::FileGone { path, what } => StoreError::FileGone {
            path: path.clone(),
            what,
        },
        StoreError::Damaged { detail } => StoreError::Damaged {
            detail: detail.clone(),
        },
        // another process holds the write lock past the busy timeout: a
        // retry may succeed (`503`), where `Rejected` read as a refusal
        // of the write itself (`500`; audit)
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(code, message))
            if matches!(
                code.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(*code, message.clone()))
        }
        StoreError::Sqlite(_)
        | StoreError::Io { .. }
        | StoreError::Corrupt { .. }
        | StoreError::WriterGone
        | StoreError::InUse { .. }
        | StoreError::HistoryGone { .. }
        | StoreError::SchemaTooNew { .. }
        | StoreError::SchemaOlder { .. }
        | StoreError::NotFound { .. }
        | StoreError::Rejected(_)
        | StoreError::Taken { .. }
        | StoreError::Id(_)
        | StoreError::NotWritable { .. }
        | StoreError::Foreign { .. }
        | StoreError::Reader(_) => StoreError::Rejected(format!("{during}: {e}")),
    }
}

fn answer(reply: Reply, result: Result<Vec<MutationResult>>) {
    match reply {
        Reply::Oneshot(tx) => {
            let _ = tx.send(result);
        }
        Reply::Callback(f) => f(result),
    }
}
