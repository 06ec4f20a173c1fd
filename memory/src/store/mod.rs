//! The store: one writer thread with group commit, a pool of readers.
//! Here: opening, writing and closing; the [`Store`]'s reads are in
//! `store_*.rs`, by topic.

mod approval_hint;
mod approvals;
mod author_events;
mod bot_cache;
mod chains;
mod checkpointer;
mod extractions;
mod file_identity;
mod lock;
mod mutation;
mod open_failure;
mod peek;
mod reader;
mod reader_pool;
mod rooms;
mod routines;
pub(crate) mod schema;
mod session_floors;
mod signatures;
mod store_approvals;
mod store_bots;
mod store_check;
mod store_deliveries;
mod store_ledger;
mod store_rooms;
mod store_sessions;
mod store_turns;
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
pub use chains::ChainsCursor;
pub use chains::SilentChains;
pub use extractions::OwedExtraction;
pub use mutation::Limit;
pub use mutation::Limited;
pub use mutation::MAX_SECRETS_PER_USER;
pub use mutation::Mutation;
pub use mutation::MutationResult;
pub use mutation::WriteLimit;
pub use peek::StoreHistory;
pub use peek::peek;
pub use peek::peek_bots;
pub use peek::peek_in_use;
pub use peek::peek_open_rooms;
pub use peek::peek_rooms_holding;
pub use routines::RoutineRun;
pub use store_bots::BotActivity;
pub use store_bots::BotListing;
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
use crate::record::Change;

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
    /// A workspace directory to remember in the meta table (`workspace`)
    /// as the one the bots' files were last seen in; `None` keeps what is
    /// remembered. What was remembered before is
    /// [`Store::previous_workspace`].
    pub workspace: Option<String>,
    /// Whether opening applies the migrations this binary has (the
    /// host). Off, a database of an older schema is refused unchanged
    /// ([`StoreError::SchemaOlder`]): an offline command that rebuilds
    /// derived data (`reindex`) must not upgrade a database an operator
    /// may have restored to roll back to an older botfleet.
    pub migrate: bool,
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
            workspace: None,
            migrate: true,
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
    /// No database file (or an empty one) was there before this open.
    created: bool,
    /// The workspace remembered before this open.
    previous_workspace: Option<String>,
    stats: Arc<WriterStats>,
    /// Bots that may have open approvals (`approval_hint.rs`).
    approval_hint: Arc<approval_hint::OpenApprovalHint>,
    /// What snapshots read of each memory scope (`layers/scope_cache.rs`).
    memory_cache: crate::layers::ScopeCache,
    /// Bot records read (`bot_cache.rs`).
    bots: Arc<bot_cache::BotCache>,
    /// Dropping it stops the checkpoint thread.
    stop_checkpoints: parking_lot::Mutex<Option<mpsc::Sender<()>>>,
    /// Set by [`Store::close`] (`Store::is_closed`).
    closed: std::sync::atomic::AtomicBool,
    /// Whether what was derived from another history (the search index,
    /// the mirror) is still to be rebuilt: set when this open found a
    /// restore or created the database, taken by the indexer's first start
    /// ([`Store::take_new_history`]).
    new_history: std::sync::atomic::AtomicBool,
    /// What the checkpoint thread runs with, for tests that run its
    /// checkpoints themselves.
    #[cfg(test)]
    checkpoints: checkpointer::Checkpoints,
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
    // a full disk is said as such, with what to do, as SQLite's is (it
    // was "store i/o on …/fleet.db.generation.tmp: No space left on
    // device" at a start on a full disk)
    if matches!(
        source.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) {
        return StoreError::DiskFull {
            detail: format!("{}: {source}", path.display()),
        };
    }
    StoreError::Io {
        path: path.display().to_string(),
        cause: source,
    }
}

/// What [`Store::prepare`] gives the writer and the store.
struct Prepared {
    conn: Connection,
    /// The generation horizon ([`check_generation`]).
    horizon: i64,
    /// Whether the database was restored from an older snapshot.
    restored: bool,
    /// The workspace the store remembered before this open.
    previous_workspace: Option<String>,
    approval_hint: Arc<approval_hint::OpenApprovalHint>,
}

impl Store {
    /// Opens (creating if needed) the database, applies migrations, checks
    /// whether it was restored from an older snapshot, and starts the writer.
    pub fn open(options: StoreOptions) -> Result<Self> {
        let path = options.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        let mut lock = lock::StoreLock::acquire(&path)?;
        check_history(&path)?;
        // missing or 0 bytes with no history (`check_history`): new
        let created = !std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
        lock::check_sqlite_files(&path)?;
        lock.lock_database(&path)?;
        let prepared = Self::prepare(&path, &options);
        let Prepared {
            conn,
            horizon,
            restored,
            previous_workspace,
            approval_hint,
        } = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                if created {
                    open_failure::remove_new_files(&path);
                }
                let dir = path.parent().unwrap_or_else(|| Path::new("."));
                return Err(open_failure::explained(e, dir));
            }
        };
        // after the writes above: the WAL exists
        let files = file_identity::FileIdentity::of(&path);

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
                files,
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
        #[cfg(test)]
        let by_hand = checkpoints.clone();
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
                created,
                previous_workspace,
                stats,
                approval_hint,
                memory_cache: crate::layers::ScopeCache::new(memory_generations),
                bots,
                stop_checkpoints: parking_lot::Mutex::new(Some(stop_checkpoints)),
                closed: std::sync::atomic::AtomicBool::new(false),
                new_history: std::sync::atomic::AtomicBool::new(restored || created),
                #[cfg(test)]
                checkpoints: by_hand,
            }),
        })
    }

    /// The database at `path` opened, checked, configured and migrated,
    /// with what the writer starts from: everything of an open that
    /// writes to the disk before the writer runs, so that a failure of it
    /// is explained and cleaned up in one place (`open_failure.rs`).
    fn prepare(path: &Path, options: &StoreOptions) -> Result<Prepared> {
        let mut conn = Connection::open(path)?;
        schema::refuse_foreign(&conn, path)?;
        if !options.migrate {
            // before any pragma that could write the file
            schema::require_current(&conn)?;
        }
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
        // rows written with keys an older binary computed
        crate::layers::refresh_memory_keys(&mut conn)?;

        let now = options.clock.now_ms();
        let (horizon, restored) = check_generation(&conn, path, now)?;
        let previous_workspace = writer::get_meta(&conn, "workspace")?;
        if let Some(workspace) = &options.workspace {
            writer::set_meta(&conn, "workspace", workspace)?;
        }
        let approval_hint = Arc::new(approval_hint::OpenApprovalHint::load(&conn)?);
        Ok(Prepared {
            conn,
            horizon,
            restored,
            previous_workspace,
            approval_hint,
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

    /// Whether this open created the database: no file (or an empty one,
    /// with no history behind it) was there before.
    pub fn was_created(&self) -> bool {
        self.inner.created
    }

    /// Whether this open found a restore or created the database, asked
    /// once: `true` only to the first caller (the indexer's first start,
    /// which rebuilds what was derived from another history; a restart of
    /// the indexer later in the same run must not: review, it cleared the
    /// index it had built and moved the mirror aside again).
    pub fn take_new_history(&self) -> bool {
        self.inner
            .new_history
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// The workspace directory remembered before this open (see
    /// [`StoreOptions::workspace`]); `None` if none was.
    pub fn previous_workspace(&self) -> Option<&str> {
        self.inner.previous_workspace.as_deref()
    }

    /// [`Self::was_created`] and [`Self::previous_workspace`] together, as
    /// [`peek`] reads them without an open.
    pub fn history(&self) -> StoreHistory {
        StoreHistory {
            created: self.inner.created,
            previous_workspace: self.inner.previous_workspace.clone(),
        }
    }

    /// The clock stored times come from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Commits `batch` atomically (in a group with whatever else is
    /// waiting) and answers after the commit.
    pub async fn write(&self, batch: Vec<Mutation>) -> Result<Vec<MutationResult>> {
        let requested = self.inner.approval_hint.note(&batch);
        let (tx, rx) = oneshot::channel();
        let reply = if requested.is_empty() {
            Reply::Oneshot(tx)
        } else {
            // on the writer thread, after the commit: a continuation runs
            // even when this future is dropped before the answer
            let hint = Arc::clone(&self.inner.approval_hint);
            Reply::Callback(Box::new(move |result| {
                hint.committed(&requested);
                let _ = tx.send(result);
            }))
        };
        self.inner
            .tx
            .send(Job::Batch { batch, reply })
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Like [`Store::write`], but calls `then` on the writer thread right
    /// after the commit. Continuations run in submission order, which lets
    /// a caller keep order without waiting.
    pub fn write_then(&self, batch: Vec<Mutation>, then: Callback) -> Result<()> {
        let requested = self.inner.approval_hint.note(&batch);
        let then: Callback = if requested.is_empty() {
            then
        } else {
            let hint = Arc::clone(&self.inner.approval_hint);
            Box::new(move |result| {
                hint.committed(&requested);
                then(result);
            })
        };
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
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.stop_checkpoints.lock().take();
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Job::Close(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Whether [`Store::close`] was called: a write that fails with
    /// [`StoreError::WriterGone`] after it was cut off by a planned stop
    /// (what it would have written is redone at the next start), not by a
    /// writer that failed.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(std::sync::atomic::Ordering::SeqCst)
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

    /// A read bounded by an index to a few rows or pages (most reads, and
    /// those of a turn's path): it runs on the calling thread when a
    /// reader connection is at hand, and on the blocking pool only while
    /// every one is lent out. Such a read takes microseconds; the hop to
    /// the blocking pool and back (two thread switches, each costly on a
    /// VM) took longer, and a group reply makes several reads: inline,
    /// a reply in one room took 22–30% less time (docs/performance.md).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match self.inner.readers.try_with(f) {
            Ok(result) => result,
            Err(f) => self.read_many(f).await,
        }
    }

    /// A read that may walk many rows (listings of every bot, session,
    /// turn or approval of an owner, transcript pages, counts): always on
    /// the blocking pool, so that no tokio worker is held for it.
    async fn read_many<T: Send + 'static>(
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

    /// Row count of a table (`entries`, `turns`, `bots`, `ledger`).
    pub async fn count(&self, table: &'static str) -> Result<i64> {
        self.read_many(move |c| reader::count(c, table)).await
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
    // a failed write (a full disk) leaves no temporary file behind: the
    // next start writes it anew
    let written = std::fs::write(&tmp, next.to_string())
        .map_err(|e| io_err(&tmp, e))
        .and_then(|()| std::fs::rename(&tmp, &sidecar).map_err(|e| io_err(&sidecar, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    Ok((horizon, restored))
}

/// Refuses to open a database file that is missing or empty (0 bytes)
/// where the generation sidecar says this directory has run before: that
/// is lost history (a deleted or truncated file, a failed copy), never a
/// restore, and opening would create an empty fleet in its place and move
/// the sidecar on, so that the next start could not tell. (An older
/// snapshot restored in its place is a restore: [`check_generation`].)
fn check_history(path: &Path) -> Result<()> {
    let state = match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => "empty (0 bytes)",
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing",
        Err(e) => return Err(io_err(path, e)),
    };
    let sidecar = sidecar_path(path);
    // only a store that ran writes the sidecar, whole (a temporary file
    // renamed): one that holds no number was emptied or damaged since,
    // and is history all the same (QA, 2026-12-04: an empty one let an
    // empty fleet start over the lost database)
    let generation: Option<i64> = match std::fs::read_to_string(&sidecar) {
        Ok(s) => match s.trim().parse::<i64>() {
            Ok(n) if n <= 0 => return Ok(()),
            Ok(n) => Some(n),
            Err(_) => None,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(&sidecar, e)),
    };
    Err(StoreError::HistoryGone {
        path: path.display().to_string(),
        state,
        sidecar: sidecar.display().to_string(),
        generation,
    })
}

fn sidecar_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".generation");
    db.with_file_name(name)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

#[cfg(test)]
mod generation_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A start on a full disk says the disk is full (what to do included)
    /// and leaves no `fleet.db.generation.tmp` behind. (`/dev/full` fails
    /// every write with `ENOSPC`, for anyone: the temporary file is a link
    /// to it.)
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_full_disk_at_start_is_said_and_leaves_no_temporary_file() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("fleet.db.generation.tmp");
        std::os::unix::fs::symlink("/dev/full", &tmp).unwrap();
        let message = match Store::open(StoreOptions::new(dir.path().join("fleet.db"))) {
            Err(e @ StoreError::DiskFull { .. }) => e.to_string(),
            Err(e) => panic!("expected DiskFull, got {e:?}: {e}"),
            Ok(_) => panic!("the store opened with its generation file unwritable"),
        };
        assert!(
            message.contains("the disk holding the store is full")
                && message.contains("free disk space")
                && message.contains("fleet.db.generation.tmp"),
            "{message}"
        );
        assert!(
            std::fs::symlink_metadata(&tmp).is_err(),
            "the temporary file was left behind"
        );
        // space back: the next start writes it and opens
        let store = Store::open(StoreOptions::new(dir.path().join("fleet.db"))).unwrap();
        store.close().await;
        assert!(std::fs::symlink_metadata(&tmp).is_err());
        assert!(dir.path().join("fleet.db.generation").is_file());
    }
}

#[cfg(test)]
#[path = "store_files_tests.rs"]
mod files_tests;
