//! The store: one writer thread with group commit, a pool of readers.

mod approval_hint;
mod approvals;
mod author_events;
mod bot_cache;
mod checkpointer;
mod lock;
mod mutation;
mod reader;
mod reader_pool;
mod rooms;
mod routines;
mod schema;
mod writer;

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;

use rusqlite::Connection;
use serde::Deserialize;
use serde::Serialize;
use tokio::sync::broadcast;
use tokio::sync::oneshot;

pub use author_events::SinceEvent;
pub use mutation::Mutation;
pub use mutation::MutationResult;
pub use writer::Callback;
pub use writer::WriterStats;

use self::reader_pool::ReaderPool;
use self::writer::Job;
use self::writer::Reply;
use self::writer::Writer;
use crate::clock::Clock;
use crate::clock::SystemClock;
use crate::error::Result;
use crate::error::StoreError;
use crate::ids::BotId;
use crate::ids::SessionId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::record::Change;
use crate::record::Entry;
use crate::record::InboxItem;
use crate::record::SessionRecord;
use crate::record::SessionView;
use crate::record::ToolCallRecord;
use crate::record::TurnRecord;
use crate::record::TurnStatus;

/// SQLite's `synchronous` setting for the WAL. See docs/operations.md for
/// what each survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// fsync only at checkpoints: a committed transaction survives a process
    /// crash; the last ones before a power loss may be rolled back.
    #[default]
    Normal,
    /// fsync the WAL at every commit: survives power loss too. Group commit
    /// shares one fsync among every batch of the group.
    Full,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// How to open a store.
#[derive(Clone)]
pub struct StoreOptions {
    /// Database file.
    pub path: PathBuf,
    /// WAL durability.
    pub synchronous: Synchronous,
    /// Most batches folded into one transaction.
    pub max_group: usize,
    /// Most read connections open at once; a read that finds them all
    /// busy waits for one. They stay open for the life of the store.
    pub readers: usize,
    /// Capacity of the change-signal channel.
    pub change_capacity: usize,
    /// Source of stored timestamps.
    pub clock: Arc<dyn Clock>,
    /// How often the checkpoint thread copies the WAL into the database.
    pub checkpoint_period: std::time::Duration,
    /// WAL size (in frames, pages) past which the writer finishes the
    /// checkpoint itself between two groups, so that its next write starts
    /// the WAL over from the beginning (see `checkpointer.rs`).
    pub wal_restart_frames: i64,
}

impl StoreOptions {
    /// Defaults for a database at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            synchronous: Synchronous::Normal,
            max_group: 1024,
            readers: 8,
            change_capacity: 4096,
            clock: Arc::new(SystemClock),
            checkpoint_period: checkpointer::PERIOD,
            // 64 MiB of 4 KiB pages: `journal_size_limit` below
            wal_restart_frames: 16_384,
        }
    }
}

struct Inner {
    tx: mpsc::Sender<Job>,
    readers: Arc<ReaderPool>,
    changes: broadcast::Sender<Change>,
    clock: Arc<dyn Clock>,
    path: PathBuf,
    restored: bool,
    stats: Arc<WriterStats>,
    /// Bots that may have open approvals (`approval_hint.rs`).
    approval_hint: approval_hint::OpenApprovalHint,
    /// What snapshots read of each memory scope (`layers/scope_cache.rs`).
    memory_cache: crate::layers::ScopeCache,
    /// Bot records read (`bot_cache.rs`).
    bots: Arc<bot_cache::BotCache>,
    /// Dropping it stops the checkpoint thread.
    stop_checkpoints: parking_lot::Mutex<Option<mpsc::Sender<()>>>,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl Store {
    /// Opens (creating if needed) the database, applies migrations, checks
    /// whether it was restored from an older snapshot, and starts the writer.
    pub fn open(options: StoreOptions) -> Result<Self> {
        let path = options.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        let lock = lock::StoreLock::acquire(&path)?;
        let mut conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", options.synchronous.pragma())?;
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        conn.pragma_update(None, "cache_size", -65536)?;
        // checkpoints run on their own thread (checkpointer.rs)
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // stable plans: no re-prepare of range queries at every run (STAT4)
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::migrate(&mut conn)?;

        let now = options.clock.now_ms();
        let (horizon, restored) = check_generation(&conn, &path, now)?;
        let approval_hint = approval_hint::OpenApprovalHint::load(&conn)?;

        let (changes, _) = broadcast::channel(options.change_capacity.max(16));
        let (tx, rx) = mpsc::channel::<Job>();
        let stats = Arc::new(WriterStats::default());
        let memory_generations = Arc::new(crate::layers::MemoryGenerations::default());
        let catch_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let bots = Arc::new(bot_cache::BotCache::default());
        let writer = Writer::new(
            conn,
            options.clock.clone(),
            changes.clone(),
            options.max_group,
            horizon,
            writer::WriterShared {
                lock,
                stats: stats.clone(),
                memory_generations: memory_generations.clone(),
                catch_up: catch_up.clone(),
                bots: bots.clone(),
            },
        );
        std::thread::Builder::new()
            .name("botfleet-store-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| io_err(&path, e))?;
        let (stop_checkpoints, stop_rx) = mpsc::channel();
        let checkpoints = checkpointer::Checkpoints {
            path: path.clone(),
            period: options.checkpoint_period,
            restart_frames: options.wal_restart_frames,
            catch_up,
            stats: stats.clone(),
        };
        std::thread::Builder::new()
            .name("botfleet-store-checkpoint".into())
            .spawn(move || checkpoints.run(stop_rx))
            .map_err(|e| io_err(&path, e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                tx,
                readers: Arc::new(ReaderPool::new(path.clone(), options.readers)),
                changes,
                clock: options.clock,
                path,
                restored,
                stats,
                approval_hint,
                memory_cache: crate::layers::ScopeCache::new(memory_generations),
                bots,
                stop_checkpoints: parking_lot::Mutex::new(Some(stop_checkpoints)),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether this open found the database restored from an older
    /// snapshot than the last one this data directory ran.
    pub fn was_restored(&self) -> bool {
        self.inner.restored
    }

    /// The clock stored times come from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Commits `batch` atomically (in a group with whatever else is
    /// waiting) and answers after the commit.
    pub async fn write(&self, batch: Vec<Mutation>) -> Result<Vec<MutationResult>> {
        self.inner.approval_hint.note(&batch);
        let (tx, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Job::Batch {
                batch,
                reply: Reply::Oneshot(tx),
            })
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Like [`Store::write`], but calls `then` on the writer thread right
    /// after the commit. Continuations run in submission order, which lets
    /// a caller keep order without waiting.
    pub fn write_then(&self, batch: Vec<Mutation>, then: Callback) -> Result<()> {
        self.inner.approval_hint.note(&batch);
        self.inner
            .tx
            .send(Job::Batch {
                batch,
                reply: Reply::Callback(then),
            })
            .map_err(|e| {
                if let Job::Batch {
                    reply: Reply::Callback(f),
                    ..
                } = e.0
                {
                    f(Err(StoreError::WriterGone));
                }
                StoreError::WriterGone
            })
    }

    /// Commits what is queued, checkpoints the WAL into the database file
    /// and stops the writer. Later writes fail with [`StoreError::WriterGone`].
    pub async fn close(&self) {
        self.inner.stop_checkpoints.lock().take();
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Job::Close(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// The writer's counters.
    pub fn stats(&self) -> &WriterStats {
        &self.inner.stats
    }

    /// What memory snapshots read of each scope, kept between turns.
    pub(crate) fn memory_cache(&self) -> &crate::layers::ScopeCache {
        &self.inner.memory_cache
    }

    /// Subscribes to change signals.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.inner.changes.subscribe()
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = self.inner.readers.clone();
        tokio::task::spawn_blocking(move || pool.with(f))
            .await
            .map_err(|e| StoreError::Reader(e.to_string()))?
    }

    /// Runs a read on the calling thread (for benches and blocking callers).
    pub fn read_blocking<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.inner.readers.with(f)
    }

    /// A bot by id.
    /// Served from the records read before when no bot was written since
    /// (`bot_cache.rs`).
    pub async fn get_bot(&self, id: &BotId) -> Result<Option<BotRecord>> {
        if let Some(record) = self.inner.bots.get(id) {
            return Ok(Some(record));
        }
        let generation = self.inner.bots.generation();
        let id = id.clone();
        let record = self.read(move |c| reader::get_bot(c, &id)).await?;
        if let Some(r) = &record {
            self.inner.bots.put(generation, r);
        }
        Ok(record)
    }

    /// Bots, of one owner or all.
    pub async fn list_bots(&self, owner: Option<&UserId>) -> Result<Vec<BotRecord>> {
        let owner = owner.cloned();
        self.read(move |c| reader::list_bots(c, owner.as_ref()))
            .await
    }

    /// A session by id.
    pub async fn get_session(&self, id: SessionId) -> Result<Option<SessionRecord>> {
        self.read(move |c| reader::get_session(c, id)).await
    }

    /// What a turn's context is built from, in one read: the session's
    /// record, its latest summary and its newest `window` entries after the
    /// summary (see `reader::session_view`).
    pub async fn session_view(&self, id: SessionId, window: i64) -> Result<SessionView> {
        self.read(move |c| reader::session_view(c, id, window))
            .await
    }

    /// A page of a session: its record and its entries with seq > `after`,
    /// oldest first, at most `limit`, in one read, so the record's
    /// `last_seq` is never older than the entries (see
    /// `reader::session_page`). `None` when there is no such session.
    pub async fn session_page(
        &self,
        id: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Option<(SessionRecord, Vec<Entry>)>> {
        self.read(move |c| reader::session_page(c, id, after, limit))
            .await
    }

    /// Sessions of a bot (its own: a room's public timeline is not one,
    /// even when the room is named like the bot).
    pub async fn sessions_of_bot(&self, bot: &BotId) -> Result<Vec<SessionRecord>> {
        let bot = bot.clone();
        self.read(move |c| reader::sessions_of_bot(c, &bot)).await
    }

    /// Entries of a session with seq > `after`, oldest first, at most `limit`.
    pub async fn entries_after(
        &self,
        session: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Entry>> {
        self.read(move |c| reader::entries_after(c, session, after, limit))
            .await
    }

    /// [`Store::entries_after`] on the calling thread, for short indexed
    /// reads on a hot path where the hop to the blocking pool costs more
    /// than the read itself (a room coordinator checking a member's turn).
    pub fn entries_after_now(
        &self,
        session: SessionId,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Entry>> {
        self.inner
            .readers
            .with(|c| reader::entries_after(c, session, after, limit))
    }

    /// Entries of a session with `from <= seq <= to`.
    pub async fn entries_between(
        &self,
        session: SessionId,
        from: i64,
        to: i64,
    ) -> Result<Vec<Entry>> {
        self.read(move |c| reader::entries_between(c, session, from, to))
            .await
    }

    /// The newest compaction summary of a session.
    pub async fn latest_summary(&self, session: SessionId) -> Result<Option<Entry>> {
        self.read(move |c| reader::latest_summary(c, session)).await
    }

    /// The newest `limit` entries of a session, oldest first.
    pub async fn tail_entries(&self, session: SessionId, limit: i64) -> Result<Vec<Entry>> {
        self.read(move |c| reader::tail_entries(c, session, limit))
            .await
    }

    /// Entries of every session in global order after `gid` (for indexers).
    pub async fn entries_after_gid(&self, gid: i64, limit: i64) -> Result<Vec<Entry>> {
        self.read(move |c| reader::entries_after_gid(c, gid, limit))
            .await
    }

    /// The newest global entry order.
    pub async fn max_gid(&self) -> Result<i64> {
        self.read(reader::max_gid).await
    }

    /// A bot's admitted inputs that no turn has consumed, oldest first.
    pub async fn pending_inbox(&self, bot: &BotId) -> Result<Vec<InboxItem>> {
        let bot = bot.clone();
        self.read(move |c| reader::pending_inbox(c, &bot)).await
    }

    /// Bots with pending inputs or unfinished turns.
    pub async fn bots_with_work(&self) -> Result<Vec<BotId>> {
        self.read(reader::bots_with_work).await
    }

    /// A bot's turns still marked running (after a crash).
    pub async fn open_turns(&self, bot: &BotId) -> Result<Vec<TurnRecord>> {
        let bot = bot.clone();
        self.read(move |c| reader::open_turns(c, &bot)).await
    }

    /// A turn by id.
    pub async fn get_turn(&self, id: TurnId) -> Result<Option<TurnRecord>> {
        self.read(move |c| reader::get_turn(c, id)).await
    }

    /// A bot's newest turns.
    pub async fn turns_of_bot(&self, bot: &BotId, limit: i64) -> Result<Vec<TurnRecord>> {
        let bot = bot.clone();
        self.read(move |c| reader::turns_of_bot(c, &bot, limit))
            .await
    }

    /// Turn counts per status for a bot.
    pub async fn turn_status_counts(&self, bot: &BotId) -> Result<Vec<(TurnStatus, i64)>> {
        let bot = bot.clone();
        self.read(move |c| reader::turn_status_counts(c, &bot))
            .await
    }

    /// The tool calls of a turn, in order.
    pub async fn tool_calls(&self, turn: TurnId) -> Result<Vec<ToolCallRecord>> {
        self.read(move |c| reader::tool_calls(c, turn)).await
    }

    /// A bot's token usage: all days, `today` (UTC `YYYY-MM-DD`), and the
    /// number of turns counted.
    pub async fn bot_usage(
        &self,
        bot: &BotId,
        today: &str,
    ) -> Result<(crate::record::TokenUsage, crate::record::TokenUsage, i64)> {
        let bot = bot.clone();
        let today = today.to_owned();
        self.read(move |c| reader::bot_usage(c, &bot, &today)).await
    }

    /// The secrets a person supplied: (name, value, updated_at).
    pub async fn user_secrets(
        &self,
        owner: &UserId,
    ) -> Result<Vec<(String, crate::record::SecretValue, i64)>> {
        let owner = owner.clone();
        self.read(move |c| reader::user_secrets(c, &owner)).await
    }

    /// The subagents a bot delegated to, oldest first.
    pub async fn subagents_of(&self, parent: &BotId) -> Result<Vec<crate::record::SubagentRecord>> {
        let parent = parent.clone();
        self.read(move |c| reader::subagents_of(c, &parent)).await
    }

    /// A subagent by its bot id.
    pub async fn get_subagent(&self, id: &BotId) -> Result<Option<crate::record::SubagentRecord>> {
        let id = id.clone();
        self.read(move |c| reader::get_subagent(c, &id)).await
    }

    /// Routines of one bot (by name), or of every bot (by bot, then name).
    pub async fn routines(&self, bot: Option<&BotId>) -> Result<Vec<crate::record::RoutineRecord>> {
        let bot = bot.cloned();
        self.read(move |c| routines::list(c, bot.as_ref())).await
    }

    /// One routine of a bot.
    pub async fn get_routine(
        &self,
        bot: &BotId,
        name: &str,
    ) -> Result<Option<crate::record::RoutineRecord>> {
        let bot = bot.clone();
        let name = name.to_owned();
        self.read(move |c| routines::get(c, &bot, &name)).await
    }

    /// A group room by id.
    pub async fn get_room(
        &self,
        id: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRecord>> {
        let id = id.clone();
        self.read(move |c| rooms::get_room(c, &id)).await
    }

    /// Rooms `user` owns, plus every shared room (the caller filters those
    /// by membership).
    pub async fn rooms_for(&self, user: &UserId) -> Result<Vec<crate::record::RoomRecord>> {
        let user = user.clone();
        self.read(move |c| rooms::rooms_for(c, &user)).await
    }

    /// A room's unfinished runs, oldest first.
    pub async fn open_room_runs(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Vec<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::open_runs(c, &room)).await
    }

    /// A room's newest finished run.
    pub async fn last_done_room_run(
        &self,
        room: &crate::ids::RoomId,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::last_done_run(c, &room)).await
    }

    /// One run of a room, by the seq of the message that started it.
    pub async fn get_room_run(
        &self,
        room: &crate::ids::RoomId,
        trigger_seq: i64,
    ) -> Result<Option<crate::record::RoomRunRecord>> {
        let room = room.clone();
        self.read(move |c| rooms::get_run(c, &room, trigger_seq))
            .await
    }

    /// Rooms with unfinished runs (resumed after a restart).
    pub async fn rooms_with_open_runs(&self) -> Result<Vec<crate::ids::RoomId>> {
        self.read(rooms::rooms_with_open_runs).await
    }

    /// Row count of a table (`entries`, `turns`, `bots`, `ledger`).
    pub async fn count(&self, table: &'static str) -> Result<i64> {
        self.read(move |c| reader::count(c, table)).await
    }

    /// An approval, with its status as of now (a stored `pending` past its
    /// TTL or behind a newer user message reads `expired`).
    pub async fn approval(
        &self,
        id: crate::ids::ApprovalId,
    ) -> Result<Option<crate::record::ApprovalRecord>> {
        let now = self.inner.clock.now_ms();
        self.read(move |c| approvals::get(c, id, now)).await
    }

    /// A user's approvals as of now: pending first (oldest first), then the
    /// others newest first; at most `limit`.
    pub async fn approvals_of_owner(
        &self,
        owner: &UserId,
        limit: i64,
    ) -> Result<Vec<crate::record::ApprovalRecord>> {
        let owner = owner.clone();
        let now = self.inner.clock.now_ms();
        self.read(move |c| approvals::of_owner(c, &owner, now, limit))
            .await
    }

    /// A bot's open approvals as of now (stored pending, or approved and
    /// unused; each with its effective status, so some may read
    /// `expired`), oldest first.
    pub async fn open_approvals(&self, bot: &BotId) -> Result<Vec<crate::record::ApprovalRecord>> {
        // most bots never had an approval: no read before their side effects
        let Some(at) = self.inner.approval_hint.check(bot) else {
            return Ok(Vec::new());
        };
        let id = bot.clone();
        let now = self.inner.clock.now_ms();
        let open = self
            .read(move |c| approvals::open_of_bot(c, &id, now))
            .await?;
        if open.is_empty() {
            self.inner.approval_hint.settle(bot, at);
        }
        Ok(open)
    }

    /// A bot's newest review log rows (what auto-review asked about or
    /// blocked), newest first.
    pub async fn reviews_of_bot(
        &self,
        bot: &BotId,
        limit: i64,
    ) -> Result<Vec<crate::record::ReviewRecord>> {
        let bot = bot.clone();
        self.read(move |c| approvals::reviews_of_bot(c, &bot, limit))
            .await
    }

    /// A value from the meta table.
    pub async fn meta(&self, key: &'static str) -> Result<Option<String>> {
        self.read(move |c| reader::optional_meta(c, key)).await
    }
}

/// Compares the database's generation with the data directory's sidecar
/// file. A database older than the sidecar was restored from a snapshot:
/// the ledger cannot vouch for anything before now. Returns the ledger
/// horizon and whether a restore was detected.
fn check_generation(conn: &Connection, path: &Path, now: i64) -> Result<(i64, bool)> {
    let sidecar = sidecar_path(path);
    let db_gen: i64 = writer::get_meta(conn, "generation")?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let file_gen: i64 = match std::fs::read_to_string(&sidecar) {
        Ok(s) => s.trim().parse().unwrap_or(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io_err(&sidecar, e)),
    };
    let mut horizon: i64 = writer::get_meta(conn, "ledger_pruned_before_ms")?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let restored = db_gen < file_gen;
    if restored {
        tracing::warn!(
            db_gen,
            file_gen,
            "database is older than this data directory: restored from a snapshot"
        );
        writer::set_meta(conn, "restored_at_ms", &now.to_string())?;
    }
    if let Some(r) = writer::get_meta(conn, "restored_at_ms")?.and_then(|v| v.parse::<i64>().ok()) {
        horizon = horizon.max(r);
    }
    let next = db_gen.max(file_gen) + 1;
    writer::set_meta(conn, "generation", &next.to_string())?;
    let tmp = sidecar.with_extension("generation.tmp");
    std::fs::write(&tmp, next.to_string()).map_err(|e| io_err(&tmp, e))?;
    std::fs::rename(&tmp, &sidecar).map_err(|e| io_err(&sidecar, e))?;
    Ok((horizon, restored))
}

fn sidecar_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".generation");
    db.with_file_name(name)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
