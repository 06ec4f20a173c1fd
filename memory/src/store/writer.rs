//! The single writer: one OS thread owns the read-write connection and
//! commits every waiting batch in one transaction (group commit).
//!
//! Sequence for each wake-up:
//! 1. block for one job, then drain up to `max_batch` more without waiting;
//! 2. `BEGIN IMMEDIATE`; each job runs inside its own `SAVEPOINT`, so a job
//!    that fails rolls back alone and the rest still commit — unless its
//!    write failed inside a statement (a full disk, an I/O error) and
//!    SQLite rolled the whole transaction back itself: then the whole
//!    group fails with that error (`writer_group.rs`);
//! 3. `COMMIT` once; only now is any caller answered (a failed commit fails
//!    every job of the group and clears the caches);
//! 4. answer the jobs in submission order, then broadcast one payload-free
//!    [`Change`] per touched session.
//!
//! A clean close (`Job::Close`) also takes back the count of each turn
//! start it committed (`StartTurn`, `BumpAttempts`) whose turn is still
//! running, and of each start counted on inputs no stored turn has taken
//! yet (`CountStart`) that are still pending: the host stopped those
//! turns, they did not crash, and `runtime.max_turn_attempts` counts
//! crashes. A killed process never gets there, so its starts stay counted.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;
use tokio::sync::broadcast;
use tokio::sync::oneshot;

use super::mutation::Mutation;
use super::mutation::MutationResult;
use crate::clock::Clock;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::layers::MemoryGenerations;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::AdmittedRecord;
use crate::record::BotRecord;
use crate::record::Change;
use crate::record::NewEntry;
use crate::record::SessionRecord;

/// A post-commit continuation, called on the writer thread in submission
/// order. It must be quick and must not block (send a message, no I/O).
pub type Callback = Box<dyn FnOnce(Result<Vec<MutationResult>>) + Send>;

/// How a job is answered.
pub(crate) enum Reply {
    Oneshot(oneshot::Sender<Result<Vec<MutationResult>>>),
    Callback(Callback),
}

/// One atomic batch and its answer, or the order to stop.
pub(crate) enum Job {
    Batch {
        batch: Vec<Mutation>,
        reply: Reply,
    },
    /// Take back the starts of the turns still running, checkpoint the
    /// WAL, close the connection, answer, and exit.
    Close(oneshot::Sender<()>),
}

/// Counters of the writer, readable while it runs.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Transactions committed.
    pub commits: std::sync::atomic::AtomicU64,
    /// Batches committed.
    pub batches: std::sync::atomic::AtomicU64,
    /// Mutations applied.
    pub mutations: std::sync::atomic::AtomicU64,
    /// Microseconds spent applying and committing.
    pub busy_us: std::sync::atomic::AtomicU64,
    /// Checkpoints the writer finished itself so the WAL could start over
    /// (`checkpointer.rs`).
    pub wal_catch_ups: std::sync::atomic::AtomicU64,
    /// Microseconds those checkpoints took (part of `busy_us`).
    pub wal_catch_up_us: std::sync::atomic::AtomicU64,
    /// Most frames (pages) the checkpoint thread found in the WAL.
    pub wal_frames_peak: std::sync::atomic::AtomicU64,
    /// What the writer (and the indexer) saw of the store's health: read
    /// by `GET /healthz`; a damaged database latched here refuses every
    /// later write (`writer_health.rs`).
    pub health: health::StoreHealth,
}

pub(crate) struct Writer {
    stats: Arc<WriterStats>,
    conn: Connection,
    clock: Arc<dyn Clock>,
    changes: broadcast::Sender<Change>,
    max_batch: usize,
    /// Last seq per session, valid for committed state plus the open
    /// transaction's successful jobs.
    seqs: HashMap<SessionId, i64>,
    /// Bot and owner per session, for change signals.
    sessions: HashMap<SessionId, (BotId, UserId)>,
    /// Turns whose start (new or resumed) this writer committed and whose
    /// end it has not: a clean close takes those starts back.
    started: HashSet<TurnId>,
    /// Inbox gids whose start this writer counted (`CountStart`) and that
    /// no stored turn has taken since: counted once per process, and taken
    /// back at a clean close.
    counted: HashSet<i64>,
    /// Nonces made before this time and not in the ledger answer `unknown`.
    horizon_ms: i64,
    /// Bumped for each memory scope a committed group wrote to, before
    /// its callers are answered (`layers/scope_cache.rs`).
    memory_generations: Arc<MemoryGenerations>,
    /// Set by the checkpoint thread when the WAL has grown past its limit:
    /// the writer checkpoints between two groups (`checkpointer.rs`).
    catch_up: Arc<AtomicBool>,
    /// Bumped after a committed bot write, before answering (`bot_cache.rs`).
    bots: Arc<super::bot_cache::BotCache>,
    /// Held until the connection is closed (`lock.rs`).
    lock: Option<super::lock::StoreLock>,
    /// The database and WAL files as opened: checked before each commit
    /// (`file_identity.rs`).
    files: super::file_identity::FileIdentity,
}

/// Sessions a job touched: session → newest seq.
type Touched = HashMap<SessionId, i64>;

#[path = "writer_apply.rs"]
mod apply;

#[path = "writer_approvals.rs"]
mod approvals;

#[path = "writer_entries.rs"]
mod entries;

#[path = "writer_group.rs"]
mod group;

#[path = "writer_health.rs"]
pub mod health;

#[path = "writer_limits.rs"]
mod limits;

#[path = "writer_subagents.rs"]
mod subagents;

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;

/// What the writer shares with the store's handles and threads.
pub(crate) struct WriterShared {
    pub(crate) stats: Arc<WriterStats>,
    pub(crate) memory_generations: Arc<MemoryGenerations>,
    /// Set by the checkpoint thread (`checkpointer.rs`).
    pub(crate) catch_up: Arc<AtomicBool>,
    pub(crate) bots: Arc<super::bot_cache::BotCache>,
    /// The store's process lock, released when the writer stops.
    pub(crate) lock: super::lock::StoreLock,
    /// The files the connection writes, as opened.
    pub(crate) files: super::file_identity::FileIdentity,
}

impl Writer {
    pub(crate) fn new(
        conn: Connection,
        clock: Arc<dyn Clock>,
        changes: broadcast::Sender<Change>,
        max_batch: usize,
        horizon_ms: i64,
        shared: WriterShared,
    ) -> Self {
        let WriterShared {
            stats,
            memory_generations,
            catch_up,
            bots,
            lock,
            files,
        } = shared;
        Self {
            stats,
            conn,
            clock,
            changes,
            max_batch: max_batch.max(1),
            seqs: HashMap::new(),
            sessions: HashMap::new(),
            started: HashSet::new(),
            counted: HashSet::new(),
            horizon_ms,
            memory_generations,
            catch_up,
            bots,
            lock: Some(lock),
            files,
        }
    }

    /// Runs until every sender is dropped.
    pub(crate) fn run(mut self, rx: Receiver<Job>) {
        let mut jobs: Vec<(Vec<Mutation>, Reply)> = Vec::with_capacity(self.max_batch);
        let mut close = None;
        while let Ok(first) = rx.recv() {
            let mut next = Some(first);
            while let Some(job) = next.take() {
                match job {
                    Job::Batch { batch, reply } => jobs.push((batch, reply)),
                    Job::Close(done) => {
                        close = Some(done);
                        break;
                    }
                }
                if jobs.len() < self.max_batch {
                    next = rx.try_recv().ok();
                }
            }
            if !jobs.is_empty() {
                let started = std::time::Instant::now();
                let n = jobs.len() as u64;
                let m: usize = jobs.iter().map(|(b, _)| b.len()).sum();
                self.commit_group(&mut jobs);
                use std::sync::atomic::Ordering::Relaxed;
                self.stats.commits.fetch_add(1, Relaxed);
                self.stats.batches.fetch_add(n, Relaxed);
                self.stats.mutations.fetch_add(m as u64, Relaxed);
                if self.catch_up.swap(false, Relaxed) {
                    self.catch_up_wal();
                }
                self.stats
                    .busy_us
                    .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
            }
            if close.is_some() {
                break;
            }
        }
        if close.is_some() {
            self.take_back_starts();
        }
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(error = %e, "checkpoint at close failed");
        }
        drop(self.conn);
        // after the connection: the next process to open finds it closed
        drop(self.lock);
        if let Some(done) = close {
            let _ = done.send(());
        }
        tracing::debug!("store writer stopped");
    }

    /// Notes the turn starts and ends a committed batch wrote, and the
    /// starts it counted on inputs no stored turn has taken.
    pub(super) fn note_starts(&mut self, batch: &[Mutation]) {
        for m in batch {
            if let Mutation::StartTurn { turn, inputs, .. } = m {
                self.started.insert(*turn);
                for gid in inputs {
                    self.counted.remove(gid);
                }
            } else if let Mutation::BumpAttempts { turn } = m {
                self.started.insert(*turn);
            } else if let Mutation::EndTurn { turn, .. } = m {
                self.started.remove(turn);
            } else if let Mutation::CountStart { inputs, .. } = m {
                self.counted.extend(inputs.iter().copied());
            }
        }
    }

    /// Whether this writer counted a start of a turn over inbox row `gid`
    /// that no stored turn has taken since (`Mutation::CountStart`).
    pub(super) fn counted_start(&self, gid: i64) -> bool {
        self.counted.contains(&gid)
    }

    /// At a clean close: each turn this writer started that is still
    /// running has one start less, so that the next start does not count
    /// this one as a crash. (A start whose run already crashed in this
    /// process, a panic waiting to be resumed, is forgiven too.)
    /// Each input whose start it counted and that no stored turn took
    /// since has that count taken back too. The calls of those turns still
    /// `started` get the close's time as their end (`ended_at`, with no
    /// outcome): the host's stop ended them (a Shell command dies with its
    /// process group), so the resumed turn tells the model that, not that
    /// the host crashed (QA: crash torture).
    fn take_back_starts(&mut self) {
        if self.started.is_empty() && self.counted.is_empty() {
            return;
        }
        let turns: Vec<TurnId> = self.started.drain().collect();
        let inputs: Vec<i64> = self.counted.drain().collect();
        let result = self.conn.execute_batch("BEGIN IMMEDIATE").and_then(|()| {
            let mut n = 0;
            let mut stmt = self.conn.prepare_cached(
                "UPDATE turns SET attempts = attempts - 1
                 WHERE id = ?1 AND status = 'running' AND attempts > 0",
            )?;
            for turn in &turns {
                n += stmt.execute(params![turn.to_string()])?;
            }
            let mut stmt = self.conn.prepare_cached(
                "UPDATE tool_calls SET ended_at = ?2
                 WHERE turn_id = ?1 AND status = 'started' AND ended_at IS NULL",
            )?;
            let now = self.clock.now_ms();
            for turn in &turns {
                n += stmt.execute(params![turn.to_string(), now])?;
            }
            let mut stmt = self.conn.prepare_cached(
                "UPDATE inbox SET starts = starts - 1
                 WHERE gid = ?1 AND turn_id IS NULL AND starts > 0",
            )?;
            for gid in &inputs {
                n += stmt.execute(params![gid])?;
            }
            Ok(n)
        });
        match result.and_then(|n| self.conn.execute_batch("COMMIT").map(|()| n)) {
            Ok(n) => tracing::debug!(rows = n, "clean close: starts of running turns taken back"),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                tracing::warn!(error = %e, "clean close: the starts of running turns stay counted");
            }
        }
    }
}

pub(crate) fn set_meta(conn: &Connection, key: &str, value: &str) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![key, value])?;
    Ok(())
}

pub(crate) fn get_meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row(params![key], |r| r.get(0))
        .optional()?)
}
