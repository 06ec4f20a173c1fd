//! The running indexer: a ractor actor that owns the single writer.
//!
//! - On start it opens the writer, reads the commit marker and catches up
//!   from the store (`entries_after_gid`) — this is also how a crash
//!   between the SQLite commit and the index commit heals.
//! - It subscribes to the store's change signals; each signal (coalesced)
//!   becomes a [`IndexerMsg::CatchUp`], which reads one batch after the
//!   cursor and schedules itself again while more remain, so a long
//!   catch-up never blocks a [`IndexerMsg::Flush`] for more than one batch.
//! - It commits [`IndexOptions::commit_interval`] after the first
//!   uncommitted entry or unflushed mirror line (a one-shot timer), or at
//!   once when [`IndexOptions::commit_batch`] entries wait. Commits flush
//!   the mirror and reload the shared reader, so searches see new entries
//!   within about the interval, and a mirror rebuilt behind a caught-up
//!   index is complete as soon.
//! - Searches do not go through the actor: they use a clone of the
//!   [`TranscriptIndex`].
//! - A damaged index (a segment that fails its checksum, checked in the
//!   background after start, or a search that panicked or passed its
//!   deadline) becomes a [`IndexerMsg::Repair`]: the actor drops its
//!   writer, moves the index aside, opens a new one for every clone and
//!   fills it from the store (`health.rs`, `repair.rs`).
//!
//! Exit policy (`OnError`): an error that leaves the writer in a known
//! state (a failed store read, a failed commit, a mirror file that cannot
//! be written) is logged and retried on the next signal or tick; a panic in
//! a blocking index task loses the writer, so the actor stops with an error
//! and its supervisor restarts it, which re-opens the index at its last
//! commit.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorProcessingErr;
use ractor::ActorRef;
use ractor::RpcReplyPort;
use ractor::rpc::CallResult;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::error::IndexError;
use super::feed::Feed;
use super::feed::Resolved;
use super::feed::Sink;
use super::feed::blocking;
use super::repair::Fresh;
use super::repair::drop_stale;
use super::search::TranscriptIndex;
use super::writer::IndexOptions;
use super::writer::IndexProgress;
use super::writer::Indexer;
use crate::record::Entry;
use crate::store::Store;

/// The indexer actor. Holds no state of its own; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct IndexerActor;

/// What the indexer is started with. Clone it to restart the actor.
#[derive(Debug, Clone)]
pub struct IndexerArgs {
    /// The opened index (its clones serve searches).
    pub index: TranscriptIndex,
    /// The store the transcript comes from.
    pub store: Store,
    /// Writer and commit settings.
    pub options: IndexOptions,
    /// Root of the JSONL mirror (`<data_dir>/transcripts`); `None` turns
    /// the mirror off.
    pub mirror_root: Option<PathBuf>,
}

/// Messages of [`IndexerActor`].
#[derive(Debug)]
pub enum IndexerMsg {
    /// Entries the sender already holds, sent after their store commit
    /// (saves a read). Entries the index already has are skipped; entries
    /// that do not follow on the index's cursor without a gap make it read
    /// from the store instead.
    Index(Vec<Entry>),
    /// The store may have new entries: read the next batch and index it.
    CatchUp,
    /// The commit timer fired: commit what waits.
    Tick,
    /// Catch up with the store completely, commit, and answer where the
    /// index stands. Call it with a timeout ([`IndexerActor::flush`]).
    Flush(RpcReplyPort<Result<IndexProgress, IndexError>>),
    /// The index was found damaged (a search panicked or passed its
    /// deadline, or a segment failed its checksum): drop the writer, move
    /// the index aside, open a new one and fill it from the store.
    Repair,
}

/// State of a running [`IndexerActor`].
pub struct IndexerState {
    /// The index written (its directory is checked when writes fail).
    index: TranscriptIndex,
    /// Whether the deletion of the index directory was logged.
    index_gone_told: bool,
    /// The writer side; `None` only while a batch runs in the blocking pool
    /// or after such a task panicked.
    sink: Option<Sink>,
    feed: Feed,
    options: IndexOptions,
    /// Forwards store change signals as `CatchUp`.
    signals: JoinHandle<()>,
    /// Whether a `CatchUp` from the signal forwarder is already queued.
    catch_up_queued: Arc<AtomicBool>,
    /// Whether a `Tick` is scheduled.
    tick_armed: bool,
    /// Turns damage found by searches into `Repair`.
    damage: JoinHandle<()>,
    /// Until the catch-up of the start has read the store's end: when it
    /// began and the cursor then, for the log line that says it is done
    /// (after a rebuild, the index answers in full only from then on).
    starting: Option<(std::time::Instant, i64)>,
}

impl IndexerActor {
    /// Asks the indexer to catch up with the store and commit, waiting at
    /// most `timeout`. After it returns, searches see every entry the store
    /// had committed when the call was made.
    pub async fn flush(
        actor: &ActorRef<IndexerMsg>,
        timeout: Duration,
    ) -> Result<IndexProgress, IndexError> {
        match actor.call(IndexerMsg::Flush, Some(timeout)).await {
            Ok(CallResult::Success(result)) => result,
            Ok(CallResult::Timeout) => Err(IndexError::Timeout {
                after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
            Ok(CallResult::SenderError) | Err(_) => Err(IndexError::IndexerGone),
        }
    }
}

impl Actor for IndexerActor {
    type Msg = IndexerMsg;
    type State = IndexerState;
    type Arguments = IndexerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<IndexerMsg>,
        args: IndexerArgs,
    ) -> Result<IndexerState, ActorProcessingErr> {
        if let Some(cause) = args.index.damage() {
            // found while the indexer was down (or a repair failed)
            let index = args.index.clone();
            tokio::task::spawn_blocking(move || index.set_aside_damaged(&cause))
                .await
                .map_err(|e| IndexError::Task(e.to_string()))??;
        }
        let indexer = Indexer::open(&args.index, args.options.clone())?;
        let Fresh { indexer, mirror } = drop_stale(indexer, args.mirror_root, &args.store).await?;
        let sink = Sink { indexer, mirror };
        let from_gid = sink.cursor();
        tracing::info!(
            dir = %args.index.dir().display(),
            from_gid,
            "indexer started"
        );
        let catch_up_queued = Arc::new(AtomicBool::new(true));
        let signals = forward_signals(&args.store, myself.clone(), catch_up_queued.clone());
        let damage = forward_damage(&args.index, myself.clone());
        check_in_background(args.index.clone());
        myself.send_message(IndexerMsg::CatchUp)?;
        Ok(IndexerState {
            index: args.index,
            index_gone_told: false,
            sink: Some(sink),
            feed: Feed::new(args.store, args.options.catch_up_batch),
            options: args.options,
            signals,
            catch_up_queued,
            tick_armed: false,
            damage,
            starting: Some((std::time::Instant::now(), from_gid)),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<IndexerMsg>,
        message: IndexerMsg,
        state: &mut IndexerState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            IndexerMsg::CatchUp => {
                state.catch_up_queued.store(false, Ordering::SeqCst);
                match state.catch_up_step().await {
                    Ok(true) => {
                        state.catch_up_queued.store(true, Ordering::SeqCst);
                        myself.send_message(IndexerMsg::CatchUp)?;
                    }
                    Ok(false) => state.log_caught_up(),
                    Err(e) => state.survive(e, "catch-up")?,
                }
            }
            IndexerMsg::Index(entries) => {
                if let Err(e) = state.index_given(&myself, entries).await {
                    state.survive(e, "indexing given entries")?;
                }
            }
            IndexerMsg::Tick => {
                state.tick_armed = false;
                if let Err(e) = state.commit().await {
                    state.survive(e, "commit")?;
                }
            }
            IndexerMsg::Flush(reply) => {
                let result = state.flush().await;
                let lost = state.sink.is_none();
                let _ = reply.send(result);
                if lost {
                    return Err(IndexError::Task("the index writer was lost".into()).into());
                }
            }
            IndexerMsg::Repair => {
                if let Err(e) = state.repair(&myself).await {
                    state.survive(e, "rebuilding the damaged index")?;
                }
            }
        }
        state.arm_tick(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<IndexerMsg>,
        state: &mut IndexerState,
    ) -> Result<(), ActorProcessingErr> {
        state.signals.abort();
        state.damage.abort();
        if let Err(e) = state.commit().await {
            tracing::warn!(error = %e, "final index commit failed; the next start catches up");
        }
        Ok(())
    }
}

/// Turns store change signals into (coalesced) `CatchUp` messages. A lagged
/// receiver is harmless: the catch-up reads from the store anyway.
fn forward_signals(
    store: &Store,
    actor: ActorRef<IndexerMsg>,
    queued: Arc<AtomicBool>,
) -> JoinHandle<()> {
    let mut changes = store.subscribe();
    tokio::spawn(async move {
        // Ends when the store closes (`RecvError::Closed`) or the actor is gone.
        while let Ok(_) | Err(RecvError::Lagged(_)) = changes.recv().await {
            if !queued.swap(true, Ordering::SeqCst)
                && actor.send_message(IndexerMsg::CatchUp).is_err()
            {
                break;
            }
        }
    })
}

/// Turns damage found in the index (by a search, or the checksum check)
/// into a [`IndexerMsg::Repair`], once per damage.
fn forward_damage(index: &TranscriptIndex, actor: ActorRef<IndexerMsg>) -> JoinHandle<()> {
    let mut damage = index.health().watch();
    tokio::spawn(async move {
        // ends when the actor is gone
        loop {
            if damage.wait_for(Option::is_some).await.is_err()
                || actor.send_message(IndexerMsg::Repair).is_err()
                || damage.wait_for(Option::is_none).await.is_err()
            {
                break;
            }
        }
    })
}

/// Checks the segment files' checksums in the blocking pool, without
/// delaying the start: it reads the whole index (see the report of the
/// check's cost in `docs/operations.md`). Damage found starts a repair
/// through [`forward_damage`].
fn check_in_background(index: TranscriptIndex) {
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        match index.check_segments() {
            Ok(None) => tracing::debug!(
                elapsed_ms = started.elapsed().as_millis(),
                "the search index's segment files passed their checksums"
            ),
            // the repair says it in a WARN line
            Ok(Some(cause)) => tracing::debug!(cause, "a segment of the search index is damaged"),
            // e.g. a segment merged away while it was read: the next start
            // checks again
            Err(error) => tracing::debug!(%error, "the search index's checksums were not checked"),
        }
    });
}

impl IndexerState {
    /// Replaces a damaged index: drops the writer (and with it the
    /// directory lock), moves the index aside, opens a new one for every
    /// clone and queues a catch-up, which fills it from the store. The
    /// mirror is kept: it skips the entries it already holds.
    async fn repair(&mut self, myself: &ActorRef<IndexerMsg>) -> Result<(), IndexError> {
        let Some(cause) = self.index.damage() else {
            return Ok(());
        };
        let Sink { indexer, mirror } = self.sink()?;
        let index = self.index.clone();
        let options = self.options.clone();
        let indexer = tokio::task::spawn_blocking(move || {
            drop(indexer);
            index.set_aside_damaged(&cause)?;
            Indexer::open(&index, options)
        })
        .await
        .map_err(|e| IndexError::Task(e.to_string()))??;
        self.sink = Some(Sink { indexer, mirror });
        if !self.catch_up_queued.swap(true, Ordering::SeqCst) {
            myself
                .send_message(IndexerMsg::CatchUp)
                .map_err(|_| IndexError::IndexerGone)?;
        }
        Ok(())
    }

    fn sink(&mut self) -> Result<Sink, IndexError> {
        self.sink
            .take()
            .ok_or_else(|| IndexError::Task("the index writer was lost".into()))
    }

    /// Applies a batch in the blocking pool.
    async fn apply(&mut self, batch: Vec<Resolved>) -> Result<(), IndexError> {
        let (sink, result) = blocking(self.sink()?, move |s| s.apply(&batch)).await?;
        self.sink = Some(sink);
        result
    }

    /// Logs, once, that the catch-up of the start has read the store's
    /// end, when it had anything to read (an index rebuilt at this start,
    /// or one left behind the store by a crash).
    fn log_caught_up(&mut self) {
        let Some((began, from_gid)) = self.starting.take() else {
            return;
        };
        let to_gid = self.sink.as_ref().map_or(from_gid, Sink::cursor);
        if to_gid > from_gid {
            tracing::info!(
                from_gid,
                to_gid,
                elapsed_ms = began.elapsed().as_millis() as u64,
                "search index caught up with the store"
            );
        }
    }

    /// Reads and applies one batch; true if more may remain.
    async fn catch_up_step(&mut self) -> Result<bool, IndexError> {
        let cursor = self.sink.as_ref().map_or(0, Sink::cursor);
        let batch = self.feed.next_batch(cursor).await?;
        let full = !batch.is_empty() && batch.len() >= self.options.catch_up_batch;
        if !batch.is_empty() {
            self.apply(batch).await?;
        }
        Ok(full)
    }

    /// Indexes entries a sender gave, if they follow on the cursor.
    async fn index_given(
        &mut self,
        myself: &ActorRef<IndexerMsg>,
        mut entries: Vec<Entry>,
    ) -> Result<(), IndexError> {
        let cursor = self.sink.as_ref().map_or(0, Sink::cursor);
        entries.retain(|e| e.gid > cursor);
        let Some(first) = entries.first() else {
            return Ok(());
        };
        let contiguous =
            first.gid == cursor + 1 && entries.windows(2).all(|w| w[1].gid == w[0].gid + 1);
        if !contiguous {
            if !self.catch_up_queued.swap(true, Ordering::SeqCst) {
                myself
                    .send_message(IndexerMsg::CatchUp)
                    .map_err(|_| IndexError::IndexerGone)?;
            }
            return Ok(());
        }
        let batch = self.feed.resolve(entries).await?;
        self.apply(batch).await
    }

    /// Commits what waits, in the blocking pool.
    async fn commit(&mut self) -> Result<IndexProgress, IndexError> {
        let (sink, result) = blocking(self.sink()?, Sink::commit).await?;
        self.sink = Some(sink);
        result
    }

    /// Catches up completely and commits.
    async fn flush(&mut self) -> Result<IndexProgress, IndexError> {
        while self.catch_up_step().await? {}
        self.commit().await
    }

    /// Schedules a commit if entries or mirror lines wait and none is
    /// scheduled.
    fn arm_tick(&mut self, myself: &ActorRef<IndexerMsg>) {
        let pending = self.sink.as_ref().is_some_and(Sink::has_pending);
        if pending && !self.tick_armed {
            myself.send_after(self.options.commit_interval, || IndexerMsg::Tick);
            self.tick_armed = true;
        }
    }

    /// Applies the exit policy to an error: retry on the next signal or
    /// tick, or stop so that the supervisor restarts the indexer.
    fn survive(&mut self, error: IndexError, during: &str) -> Result<(), ActorProcessingErr> {
        let policy = match self.sink {
            None => OnError::Restart,
            Some(_) => OnError::of(&error),
        };
        // An index directory deleted under a running host cannot be rebuilt
        // in place (searches hold the open index), and restarting the actor
        // cannot open it: say once what to do, instead of a warning every
        // commit interval.
        if !self.index.dir().exists() {
            if !self.index_gone_told {
                self.index_gone_told = true;
                let why = "the search index directory was deleted while the host runs: new entries are not searchable until the host restarts, which rebuilds the index from the store; restart the host";
                tracing::error!(dir = %self.index.dir().display(), %error, "{why}");
                self.feed
                    .store()
                    .stats()
                    .health
                    .note_stopped("search index", why.to_owned());
            }
            return Ok(());
        }
        match policy {
            OnError::Retry => {
                tracing::warn!(%error, during, "indexer error; retrying on the next signal");
                Ok(())
            }
            OnError::Restart => Err(error.into()),
        }
    }
}

/// What the actor does after a failed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnError {
    /// The writer is intact: log, and let the next signal or tick retry.
    Retry,
    /// The writer is lost or the actor cannot work: stop with the error so
    /// the supervisor restarts it from the last commit.
    Restart,
}

impl OnError {
    fn of(error: &IndexError) -> Self {
        match error {
            IndexError::Store(_)
            | IndexError::Io { .. }
            | IndexError::Tantivy(_)
            | IndexError::Timeout { .. }
            | IndexError::Query(_)
            | IndexError::CorruptMarker { .. }
            | IndexError::SearchTimeout { .. }
            | IndexError::SearchesBusy { .. }
            | IndexError::SearchFailed { .. }
            | IndexError::MirrorDamaged { .. } => OnError::Retry,
            IndexError::Task(_)
            | IndexError::IndexerGone
            | IndexError::Locked { .. }
            | IndexError::Damaged { .. }
            | IndexError::MirrorNotWritable { .. }
            | IndexError::NotWritable { .. } => OnError::Restart,
        }
    }
}

#[cfg(test)]
#[path = "actor_tests.rs"]
mod tests;
