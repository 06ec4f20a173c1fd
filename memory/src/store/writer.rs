//! The single writer: one OS thread owns the read-write connection and
//! commits every waiting batch in one transaction (group commit).
//!
//! Sequence for each wake-up:
//! 1. block for one job, then drain up to `max_batch` more without waiting;
//! 2. `BEGIN IMMEDIATE`; each job runs inside its own `SAVEPOINT`, so a job
//!    that fails rolls back alone and the rest still commit;
//! 3. `COMMIT` once; only now is any caller answered (a failed commit fails
//!    every job of the group and clears the caches);
//! 4. answer the jobs in submission order, then broadcast one payload-free
//!    [`Change`] per touched session.

use std::collections::HashMap;
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
use crate::record::TurnStatus;

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
    /// Checkpoint the WAL, close the connection, answer, and exit.
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
}

/// Sessions a job touched: session → newest seq.
type Touched = HashMap<SessionId, i64>;

#[path = "writer_approvals.rs"]
mod approvals;

#[path = "writer_entries.rs"]
mod entries;

/// What the writer shares with the store's handles and threads.
pub(crate) struct WriterShared {
    pub(crate) stats: Arc<WriterStats>,
    pub(crate) memory_generations: Arc<MemoryGenerations>,
    /// Set by the checkpoint thread (`checkpointer.rs`).
    pub(crate) catch_up: Arc<AtomicBool>,
    pub(crate) bots: Arc<super::bot_cache::BotCache>,
    /// The store's process lock, released when the writer stops.
    pub(crate) lock: super::lock::StoreLock,
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
        } = shared;
        Self {
            stats,
            conn,
            clock,
            changes,
            max_batch: max_batch.max(1),
            seqs: HashMap::new(),
            sessions: HashMap::new(),
            horizon_ms,
            memory_generations,
            catch_up,
            bots,
            lock: Some(lock),
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

    /// Checkpoints what the checkpoint thread could not reach (the frames
    /// committed while it ran) with no transaction open, so the WAL is
    /// fully copied and the next write starts it over from the beginning.
    /// Without this a WAL under steady writes never starts over: the
    /// checkpoint thread always lags the newest commits, and the file grows
    /// by every frame ever written until the load stops.
    fn catch_up_wal(&mut self) {
        let started = std::time::Instant::now();
        match super::checkpointer::passive(&self.conn) {
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

    fn commit_group(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>) {
        // Fast path: every batch in one transaction, no savepoints. A batch
        // that fails is rare (a caller bug or a race it must resolve); then
        // the whole group is rolled back and replayed with one savepoint per
        // batch, so the failing one fails alone.
        match self.try_group(jobs) {
            Ok(Some((results, touched))) => self.finish_group(jobs, results, touched),
            Ok(None) => self.commit_group_isolated(jobs),
            Err(e) => self.fail_group(jobs, &format!("transaction failed: {e}")),
        }
    }

    /// Applies every batch in one transaction. `Ok(None)` when a batch
    /// failed (the transaction is rolled back).
    #[allow(clippy::type_complexity)]
    fn try_group(
        &mut self,
        jobs: &[(Vec<Mutation>, Reply)],
    ) -> Result<Option<(Vec<Result<Vec<MutationResult>>>, Touched)>> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let mut results = Vec::with_capacity(jobs.len());
        let mut touched: Touched = HashMap::new();
        for (batch, _) in jobs {
            let mut out = Vec::with_capacity(batch.len());
            for mutation in batch {
                match self.apply(mutation, &mut touched) {
                    Ok(r) => out.push(r),
                    Err(_) => {
                        self.conn.execute_batch("ROLLBACK")?;
                        self.seqs.clear();
                        self.sessions.clear();
                        return Ok(None);
                    }
                }
            }
            results.push(Ok(out));
        }
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            return Err(e.into());
        }
        Ok(Some((results, touched)))
    }

    fn fail_group(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>, msg: &str) {
        tracing::error!(error = %msg, "store group failed");
        for (_, reply) in jobs.drain(..) {
            answer(reply, Err(StoreError::Rejected(msg.to_owned())));
        }
    }

    fn finish_group(
        &mut self,
        jobs: &mut Vec<(Vec<Mutation>, Reply)>,
        results: Vec<Result<Vec<MutationResult>>>,
        touched: Touched,
    ) {
        // cached memory snapshots of a written scope and kept bot records go
        // stale before anyone who wrote them hears back
        let mut scopes = Vec::new();
        let mut bots_written = false;
        for m in jobs.iter().flat_map(|(batch, _)| batch) {
            if let Mutation::Memory(op) = m {
                scopes.push(op.scope());
            } else if let Mutation::UpsertBot(_) = m {
                bots_written = true;
            }
        }
        self.memory_generations.bump(scopes);
        if bots_written {
            self.bots.bump();
        }
        for ((_, reply), result) in jobs.drain(..).zip(results) {
            answer(reply, result);
        }
        if self.changes.receiver_count() > 0 {
            for (session, seq) in touched {
                if let Some((bot, owner)) = self.sessions.get(&session) {
                    let _ = self.changes.send(Change {
                        session,
                        seq,
                        bot: bot.clone(),
                        owner: owner.clone(),
                    });
                }
            }
        }
    }

    /// The slow path: one savepoint per batch.
    fn commit_group_isolated(&mut self, jobs: &mut Vec<(Vec<Mutation>, Reply)>) {
        let mut results: Vec<Result<Vec<MutationResult>>> = Vec::with_capacity(jobs.len());
        let mut touched: Touched = HashMap::new();
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            self.fail_group(jobs, &format!("begin failed: {e}"));
            return;
        }
        for (batch, _) in jobs.iter() {
            results.push(self.apply_job(batch, &mut touched));
        }
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.seqs.clear();
            self.sessions.clear();
            self.fail_group(jobs, &format!("commit failed: {e}"));
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
                self.conn.execute_batch("ROLLBACK TO job; RELEASE job")?;
                for session in local.keys() {
                    self.seqs.remove(session);
                }
                Err(e)
            }
        }
    }

    fn apply(&mut self, mutation: &Mutation, touched: &mut Touched) -> Result<MutationResult> {
        let now = self.clock.now_ms();
        match mutation {
            Mutation::UpsertBot(bot) => {
                self.upsert_bot(bot, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::EnsureSession(session) => {
                self.ensure_session(session, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::Admit(req) => self
                .admit(req, now, touched, true)
                .map(MutationResult::Admitted),
            Mutation::Append(entry) => {
                let (id, seq, gid, created_at) = self.append(entry, now, touched)?;
                Ok(MutationResult::Appended {
                    id,
                    seq,
                    gid,
                    created_at,
                })
            }
            Mutation::StartTurn {
                turn,
                bot,
                session,
                inputs,
                checkpoint,
                started_at,
            } => {
                let inputs_json = serde_json::to_string(inputs).unwrap_or_else(|_| "[]".into());
                self.conn
                    .prepare_cached(
                        "INSERT INTO turns (id, bot_id, session_id, status, inputs, checkpoint, attempts, started_at)
                         VALUES (?1, ?2, ?3, 'running', ?4, ?5, 1, ?6)",
                    )?
                    .execute(params![
                        turn.to_string(),
                        bot.as_str(),
                        session.to_string(),
                        inputs_json,
                        checkpoint.to_string(),
                        started_at
                    ])?;
                let mut consume = self.conn.prepare_cached(
                    "UPDATE inbox SET turn_id = ?1 WHERE gid = ?2 AND bot_id = ?3 AND turn_id IS NULL",
                )?;
                for gid in inputs {
                    consume.execute(params![turn.to_string(), *gid, bot.as_str()])?;
                }
                Ok(MutationResult::Done)
            }
            Mutation::Checkpoint { turn, checkpoint } => {
                let n = self
                    .conn
                    .prepare_cached("UPDATE turns SET checkpoint = ?2 WHERE id = ?1")?
                    .execute(params![turn.to_string(), checkpoint.to_string()])?;
                expect_row(n, "turn", *turn)?;
                Ok(MutationResult::Done)
            }
            Mutation::BumpAttempts { turn } => {
                let attempts: Option<i64> = self
                    .conn
                    .prepare_cached(
                        "UPDATE turns SET attempts = attempts + 1 WHERE id = ?1 RETURNING attempts",
                    )?
                    .query_row(params![turn.to_string()], |r| r.get(0))
                    .optional()?;
                match attempts {
                    Some(a) => Ok(MutationResult::Attempts(a)),
                    None => Err(StoreError::NotFound {
                        what: "turn",
                        id: turn.to_string(),
                    }),
                }
            }
            Mutation::ToolStarted {
                turn,
                call_id,
                ordinal,
                name,
                arguments,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "INSERT INTO tool_calls (turn_id, call_id, ordinal, name, arguments, status, started_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, 'started', ?6)
                         ON CONFLICT (turn_id, call_id) DO NOTHING",
                    )?
                    .execute(params![turn.to_string(), call_id, ordinal, name, arguments, now])?;
                if n == 0 {
                    return Err(StoreError::Rejected(format!(
                        "tool call {call_id} of turn {turn} was already started"
                    )));
                }
                Ok(MutationResult::Done)
            }
            Mutation::ToolFinished {
                turn,
                call_id,
                outcome,
                is_error,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "UPDATE tool_calls SET status = 'done', outcome = ?3, is_error = ?4, ended_at = ?5
                         WHERE turn_id = ?1 AND call_id = ?2 AND status != 'done'",
                    )?
                    .execute(params![turn.to_string(), call_id, outcome, is_error, now])?;
                if n == 0 {
                    return Err(StoreError::Rejected(format!(
                        "tool call {call_id} of turn {turn} is unknown or already done"
                    )));
                }
                Ok(MutationResult::Done)
            }
            Mutation::EndTurn {
                turn,
                status,
                error,
            } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "UPDATE turns SET status = ?2, error = ?3, ended_at = ?4 WHERE id = ?1",
                    )?
                    .execute(params![turn.to_string(), status.as_str(), error, now])?;
                expect_row(n, "turn", *turn)?;
                Ok(MutationResult::Done)
            }
            Mutation::RequeueInputs { turn } => {
                let row: Option<(String, String, String)> = self
                    .conn
                    .prepare_cached("SELECT bot_id, inputs, status FROM turns WHERE id = ?1")?
                    .query_row(params![turn.to_string()], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .optional()?;
                let Some((bot, inputs, status)) = row else {
                    return Err(StoreError::NotFound {
                        what: "turn",
                        id: turn.to_string(),
                    });
                };
                if status == TurnStatus::Running.as_str() {
                    return Err(StoreError::Rejected(format!(
                        "turn {turn} is still running; wait for it to end before retrying"
                    )));
                }
                if status == TurnStatus::Completed.as_str() {
                    return Err(StoreError::Rejected(format!(
                        "turn {turn} completed: its inputs were answered"
                    )));
                }
                let gids: Vec<i64> =
                    serde_json::from_str(&inputs).map_err(|e| StoreError::Corrupt {
                        table: "turns",
                        detail: e.to_string(),
                    })?;
                // only inputs this turn still holds: one queued again or
                // claimed by a later turn since is not this turn's to retry
                let mut requeue = self.conn.prepare_cached(
                    "UPDATE inbox SET turn_id = NULL WHERE gid = ?2 AND bot_id = ?1 AND turn_id = ?3",
                )?;
                let mut n = 0;
                let turn = turn.to_string();
                for gid in gids {
                    n += requeue.execute(params![bot, gid, turn])?;
                }
                Ok(MutationResult::Count(n))
            }
            Mutation::AddUsage {
                bot,
                day,
                turns,
                usage,
            } => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO bot_usage (bot_id, day, turns, calls, prompt_tokens, prefix_tokens, cached_tokens, completion_tokens)
                         VALUES (?1, ?2, ?8, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT (bot_id, day) DO UPDATE SET turns = turns + excluded.turns, calls = calls + excluded.calls,
                           prompt_tokens = prompt_tokens + excluded.prompt_tokens,
                           prefix_tokens = prefix_tokens + excluded.prefix_tokens,
                           cached_tokens = cached_tokens + excluded.cached_tokens,
                           completion_tokens = completion_tokens + excluded.completion_tokens",
                    )?
                    .execute(params![
                        bot.as_str(),
                        day,
                        usage.calls,
                        usage.prompt_tokens as i64,
                        usage.prefix_tokens as i64,
                        usage.cached_tokens as i64,
                        usage.completion_tokens as i64,
                        turns
                    ])?;
                Ok(MutationResult::Done)
            }
            Mutation::SetEpoch { session, epoch } => {
                self.conn
                    .prepare_cached("UPDATE sessions SET epoch = ?2 WHERE id = ?1")?
                    .execute(params![session.to_string(), epoch])?;
                Ok(MutationResult::Done)
            }
            Mutation::SetSecret { owner, name, value } => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO user_secrets (owner, name, value, updated_at) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (owner, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    )?
                    .execute(params![owner.as_str(), name, value.expose(), now])?;
                Ok(MutationResult::Done)
            }
            Mutation::DeleteSecret { owner, name } => {
                let n = self
                    .conn
                    .prepare_cached("DELETE FROM user_secrets WHERE owner = ?1 AND name = ?2")?
                    .execute(params![owner.as_str(), name])?;
                Ok(MutationResult::Count(n))
            }
            Mutation::CreateSubagent(sub) => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO subagents (id, parent, parent_session, description, status, result, created_at, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                    )?
                    .execute(params![
                        sub.id.as_str(),
                        sub.parent.as_str(),
                        sub.parent_session.to_string(),
                        sub.description,
                        sub.status.as_str(),
                        sub.result,
                        now
                    ])?;
                Ok(MutationResult::Done)
            }
            Mutation::SetSubagentStatus { id, status, result } => {
                let n = self
                    .conn
                    .prepare_cached(
                        "UPDATE subagents SET status = ?2, result = COALESCE(?3, result), updated_at = ?4 WHERE id = ?1",
                    )?
                    .execute(params![id.as_str(), status.as_str(), result, now])?;
                if n == 0 {
                    return Err(StoreError::NotFound {
                        what: "subagent",
                        id: id.to_string(),
                    });
                }
                Ok(MutationResult::Done)
            }
            Mutation::PutRoutine(r) => {
                super::routines::put(&self.conn, r, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::DeleteRoutine { bot, name } => {
                super::routines::delete(&self.conn, bot, name).map(MutationResult::Count)
            }
            Mutation::AdvanceRoutine {
                bot,
                name,
                slot_ms,
                fired,
                next_fire_ms,
            } => {
                super::routines::advance(
                    &self.conn,
                    bot,
                    name,
                    *slot_ms,
                    *fired,
                    *next_fire_ms,
                    now,
                )?;
                Ok(MutationResult::Done)
            }
            Mutation::CreateRoom(room) => {
                super::rooms::create_room(&self.conn, room, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::AdmitToRoom {
                request,
                room,
                state,
                notices,
            } => {
                let outcome = self.admit(request, now, touched, false)?;
                if let AdmitOutcome::Accepted(rec) = &outcome {
                    super::rooms::insert_run(&self.conn, room, rec.seq, state, now)?;
                    for notice in notices {
                        self.append(notice, now, touched)?;
                    }
                }
                Ok(MutationResult::Admitted(outcome))
            }
            Mutation::SaveRoomRun {
                room,
                trigger_seq,
                status,
                state,
            } => {
                super::rooms::save_run(&self.conn, room, *trigger_seq, *status, state, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::RequestApproval(new) => self
                .request_approval(new, now, touched)
                .map(|o| MutationResult::ApprovalRequested(Box::new(o))),
            Mutation::DecideApproval { id, decision, by } => self
                .decide_approval(*id, *decision, by, now, touched)
                .map(|r| MutationResult::ApprovalChanged(Box::new(r))),
            Mutation::ConsumeApproval { id } => self
                .consume_approval(*id, now)
                .map(|r| MutationResult::ApprovalChanged(Box::new(r))),
            Mutation::ExpireApprovals { bot } => self
                .expire_approvals(bot.as_ref(), now, touched)
                .map(MutationResult::Count),
            Mutation::RecordReview(review) => {
                self.record_review(review, now)?;
                Ok(MutationResult::Done)
            }
            Mutation::Memory(op) => crate::layers::apply(&self.conn, op, now)
                .map(|r| MutationResult::Memory(Box::new(r))),
            Mutation::PruneLedger { before_ms } => {
                let before_ms = *before_ms;
                let n = self
                    .conn
                    .prepare_cached("DELETE FROM ledger WHERE created_at < ?1")?
                    .execute(params![before_ms])?;
                if before_ms > self.horizon_ms {
                    self.horizon_ms = before_ms;
                    set_meta(
                        &self.conn,
                        "ledger_pruned_before_ms",
                        &before_ms.to_string(),
                    )?;
                }
                Ok(MutationResult::Count(n))
            }
        }
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

fn expect_row(n: usize, what: &'static str, id: TurnId) -> Result<()> {
    if n == 0 {
        Err(StoreError::NotFound {
            what,
            id: id.to_string(),
        })
    } else {
        Ok(())
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
