//! Opening an index that may be damaged, and wiping one.
//!
//! The index is derived data (the store is the truth), so a damaged index
//! must not keep the host from starting: [`TranscriptIndex::open_or_set_aside`]
//! moves an index that cannot be opened to `index.damaged-<time>` beside it
//! (kept for inspection; only the newest [`KEPT_DAMAGED_COPIES`] are kept)
//! and opens a new, empty one, which the indexer fills again from the
//! store. [`TranscriptIndex::open_empty`] is `botfleet
//! reindex`'s start: it deletes whatever the directory holds, readable or
//! not. Both first take the directory's writer lock, so an index that
//! another process (a running host) uses is never touched.
//!
//! [`drop_stale`] is the indexer's start: an index or JSONL mirror ahead of
//! the store, or any after a restore or over a new database (of another
//! history), is rebuilt from it.

use std::io::ErrorKind;
use std::path::Path;
use std::path::PathBuf;

use tantivy::Index;
use tantivy::TantivyError;
use tantivy::directory::Directory;
use tantivy::directory::DirectoryLock;
use tantivy::directory::INDEX_WRITER_LOCK;
use tantivy::directory::MmapDirectory;
use tantivy::directory::error::LockError;
use tantivy::directory::error::OpenReadError;

use super::error::IndexError;
use super::jsonl_mirror::JsonlMirror;
use super::search::TranscriptIndex;
use super::writer::Indexer;
use crate::store::Store;

/// A damaged index that [`TranscriptIndex::open_or_set_aside`] moved away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// Where the damaged index is now.
    pub moved_to: PathBuf,
    /// Why it could not be opened.
    pub cause: String,
}

impl TranscriptIndex {
    /// Opens the index in `dir` like [`TranscriptIndex::open`], but an index
    /// that cannot be read (a damaged `meta.json`, a missing or corrupt
    /// segment file) is moved to `<dir>.damaged-<UTC time>` and a new, empty
    /// index is created in its place; the second value says where the old
    /// one went. The caller should log it: the indexer rebuilds the new
    /// index from the store. Errors that moving cannot cure (another
    /// process holds the index, permissions) are returned as they are.
    pub fn open_or_set_aside(
        dir: impl AsRef<Path>,
    ) -> Result<(Self, Option<SetAside>), IndexError> {
        let dir = dir.as_ref();
        let cause = match Self::open(dir) {
            Ok(index) => return Ok((index, None)),
            Err(e) if is_damage(&e) => e.to_string(),
            Err(e) => return Err(e),
        };
        let moved_to = move_aside(dir, &cause)?;
        let index = Self::open(dir)?;
        Ok((index, Some(SetAside { moved_to, cause })))
    }

    /// The running host's repair of an index found damaged (see
    /// `health.rs`): moves the directory aside like
    /// [`TranscriptIndex::open_or_set_aside`] and opens a new, empty index
    /// for every clone. The caller (the indexer) must have dropped its
    /// writer, and fills the new index from the store.
    pub(crate) fn set_aside_damaged(&self, cause: &str) -> Result<SetAside, IndexError> {
        let moved_to = move_aside(self.dir(), cause)?;
        self.reopen()?;
        Ok(SetAside {
            moved_to,
            cause: cause.to_owned(),
        })
    }

    /// Deletes everything in `dir` (an index, damaged or not) and opens a
    /// new, empty index there. Fails with [`IndexError::Locked`] if another
    /// process holds the index's writer lock.
    pub fn open_empty(dir: impl AsRef<Path>) -> Result<Self, IndexError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
        let lock = writer_lock(dir)?;
        let lock_name = INDEX_WRITER_LOCK.filepath.as_os_str();
        let entries = std::fs::read_dir(dir).map_err(|e| IndexError::io(dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| IndexError::io(dir, e))?;
            // the lock file stays while the lock is held
            if entry.file_name() == lock_name {
                continue;
            }
            let path = entry.path();
            let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.map_err(|e| IndexError::io(&path, e))?;
        }
        drop(lock);
        Self::open(dir)
    }

    /// Reads every file of the index's segments and checks its checksum;
    /// if any fails, marks the index damaged (the indexer then sets it
    /// aside and rebuilds it) and says which. It reads the whole index, so
    /// the indexer runs it in the background after it starts
    /// (`benches/search.rs` measures it).
    pub fn check_segments(&self) -> Result<Option<String>, IndexError> {
        let inner = self.current();
        let Some(cause) = damaged_segments(inner.index())? else {
            return Ok(None);
        };
        self.health()
            .mark_damaged(inner.generation(), cause.clone());
        Ok(Some(cause))
    }
}

/// Reads every file of `index`'s segments and checks its checksum; `Some`
/// says which fail. Also the evidence asked for when a search panics
/// (`health.rs`).
pub(crate) fn damaged_segments(index: &Index) -> Result<Option<String>, IndexError> {
    let damaged = index.validate_checksum()?;
    if damaged.is_empty() {
        return Ok(None);
    }
    let mut names: Vec<String> = damaged.iter().map(|p| p.display().to_string()).collect();
    names.sort();
    Ok(Some(format!(
        "segment files fail their checksum: {}",
        names.join(", ")
    )))
}

/// Moves the index in `dir` to a free `<dir>.damaged-<time>` beside it,
/// after taking its writer lock (an index another process writes is never
/// moved), and says so in a `WARN` line.
fn move_aside(dir: &Path, cause: &str) -> Result<PathBuf, IndexError> {
    let lock = writer_lock(dir)?;
    let moved_to = aside_path(dir);
    std::fs::rename(dir, &moved_to).map_err(|e| IndexError::io(dir, e))?;
    // the lock file moved with the index; releasing it there is harmless
    drop(lock);
    tracing::warn!(
        dir = %dir.display(),
        moved_to = %moved_to.display(),
        cause,
        "the search index is damaged: moved it aside and rebuilding it from the store; searches miss older entries until the rebuild is done. Delete the moved copy once you no longer need it"
    );
    prune_damaged(dir);
    Ok(moved_to)
}

/// How many damaged indexes set aside beside the index are kept: the
/// newest, for inspection, and the one before (was it the same damage?).
/// Each is a whole index: a repair repeated on every search once left a
/// copy per search until the disk filled.
pub(crate) const KEPT_DAMAGED_COPIES: usize = 2;

/// Deletes the damaged indexes set aside beside `dir` but the newest
/// [`KEPT_DAMAGED_COPIES`]. Only names [`aside_path`] makes are touched;
/// a failure is logged, not returned: the repair itself succeeded.
fn prune_damaged(dir: &Path) {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return;
    };
    let prefix = format!("{}.damaged-", name.to_string_lossy());
    let entries = match std::fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %parent.display(), error = %e, "cannot list the damaged indexes set aside, to delete the older ones");
            return;
        }
    };
    let mut copies: Vec<((String, u32), PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let key = aside_order(e.file_name().to_str()?.strip_prefix(&prefix)?)?;
            Some((key, e.path()))
        })
        .collect();
    // oldest first
    copies.sort();
    let excess = copies.len().saturating_sub(KEPT_DAMAGED_COPIES);
    for (_, path) in copies.into_iter().take(excess) {
        match std::fs::remove_dir_all(&path) {
            Ok(()) => tracing::info!(
                deleted = %path.display(),
                kept = KEPT_DAMAGED_COPIES,
                "deleted an older damaged index set aside (the newest ones are kept)"
            ),
            Err(e) => tracing::warn!(
                path = %path.display(),
                error = %e,
                "cannot delete an older damaged index set aside; delete it by hand"
            ),
        }
    }
}

/// Where a name [`aside_path_named`] made sorts, from what follows its
/// `<dir>.<why>-`: its UTC time, then its `-n` (1 when absent). `None` for
/// a name it did not make (kept whatever it is).
fn aside_order(rest: &str) -> Option<(String, u32)> {
    let (stamp, n) = match rest.split_once('-') {
        Some((stamp, n)) => (stamp, n.parse().ok()?),
        None => (rest, 1),
    };
    chrono::NaiveDateTime::parse_from_str(stamp, ASIDE_STAMP)
        .ok()
        .map(|_| (stamp.to_owned(), n))
}

/// The time stamp of a set-aside name: it sorts as text in time order.
const ASIDE_STAMP: &str = "%Y%m%dT%H%M%SZ";

/// Takes the writer lock of the index directory `dir` without reading the
/// index (it may be unreadable).
fn writer_lock(dir: &Path) -> Result<DirectoryLock, IndexError> {
    let directory = MmapDirectory::open(dir).map_err(TantivyError::from)?;
    directory
        .acquire_lock(&INDEX_WRITER_LOCK)
        .map_err(|e| match e {
            LockError::LockBusy => IndexError::Locked {
                dir: dir.to_path_buf(),
            },
            LockError::IoError(io) => {
                IndexError::io(dir, std::io::Error::new(io.kind(), io.to_string()))
            }
        })
}

/// A free name beside `dir` for its damaged index: `index.damaged-<time>`,
/// with `-2`, `-3`… if that exists.
fn aside_path(dir: &Path) -> PathBuf {
    aside_path_named(dir, "damaged")
}

/// A free name beside `dir`: `<dir>.<why>-<time>`, with `-2`, `-3`… if
/// that exists.
fn aside_path_named(dir: &Path, why: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map_or_else(|| "index".into(), |n| n.to_string_lossy().into_owned());
    let stamp = chrono::Utc::now().format(ASIDE_STAMP);
    let base_name = format!("{name}.{why}-{stamp}");
    let base = dir.with_file_name(&base_name);
    // after the highest `-n` of this second, not in the first gap: a name
    // freed by [`prune_damaged`] is not reused, so names sort in the order
    // they were made and the newest copy is never the one deleted
    let highest = dir
        .parent()
        .and_then(|parent| std::fs::read_dir(parent).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            match name.to_str()?.strip_prefix(&base_name)? {
                "" => Some(1),
                rest => rest.strip_prefix('-')?.parse::<u32>().ok(),
            }
        })
        .max();
    let numbered = |n: u32| match n {
        1 => base.clone(),
        n => PathBuf::from(format!("{}-{n}", base.display())),
    };
    let mut n = highest.map_or(1, |h| h + 1);
    let mut path = numbered(n);
    while path.exists() {
        n += 1;
        path = numbered(n);
    }
    path
}

/// Whether opening (or checking, after a search panicked) failed because
/// of what the index files hold (moving them aside and starting over cures
/// it), rather than because of the environment: a held lock, permissions,
/// a directory that cannot be read.
pub(crate) fn is_damage(e: &IndexError) -> bool {
    match e {
        IndexError::Tantivy(t) => match t {
            TantivyError::LockFailure(..)
            | TantivyError::OpenDirectoryError(_)
            | TantivyError::OpenWriteError(_)
            | TantivyError::SystemError(_) => false,
            TantivyError::IoError(io) => !environmental(io.kind()),
            TantivyError::OpenReadError(OpenReadError::IoError { io_error, .. }) => {
                !environmental(io_error.kind())
            }
            TantivyError::OpenReadError(
                OpenReadError::FileDoesNotExist(_) | OpenReadError::IncompatibleIndex(_),
            )
            | TantivyError::AggregationError(_)
            | TantivyError::IndexAlreadyExists
            | TantivyError::DataCorruption(_)
            | TantivyError::Poisoned
            | TantivyError::FieldNotFound(_)
            | TantivyError::InvalidArgument(_)
            | TantivyError::ErrorInThread(_)
            | TantivyError::IndexBuilderMissingArgument(_)
            | TantivyError::SchemaError(_)
            | TantivyError::IncompatibleIndex(_)
            | TantivyError::InternalError(_)
            | TantivyError::DeserializeError(_)
            | TantivyError::MissingPlugin(_)
            | TantivyError::ConflictingPlugins(_)
            | TantivyError::UnexpectedPlugin(_) => true,
        },
        IndexError::CorruptMarker { .. } => true,
        IndexError::Query(_)
        | IndexError::MirrorDamaged { .. }
        | IndexError::Locked { .. }
        | IndexError::Store(_)
        | IndexError::Io { .. }
        | IndexError::NotWritable { .. }
        | IndexError::MirrorNotWritable { .. }
        | IndexError::Damaged { .. }
        | IndexError::SearchTimeout { .. }
        | IndexError::SearchesBusy { .. }
        | IndexError::Task(_)
        | IndexError::IndexerGone
        | IndexError::SearchFailed { .. }
        | IndexError::Timeout { .. } => false,
    }
}

/// I/O failures that say nothing about the files' content.
fn environmental(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::PermissionDenied
            | ErrorKind::OutOfMemory
            | ErrorKind::StorageFull
            | ErrorKind::ReadOnlyFilesystem
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    )
}

/// Index and mirror ready for the indexer, after [`drop_stale`].
pub(crate) struct Fresh {
    /// The writer (cleared if it was stale).
    pub(crate) indexer: Indexer,
    /// The mirror (a new, empty one if it was stale).
    pub(crate) mirror: Option<JsonlMirror>,
}

/// Drops an index and a mirror that hold entries the store does not have:
/// the database was restored from an older snapshot, or replaced (an empty
/// `fleet.db`). Entry numbers are reused after that, so a stale index would
/// show lost entries and skip new ones. Entries are never deleted from the
/// store, so a marker above the store's newest gid is proof. After a
/// restore the open detected, or over a database this open created, they
/// are dropped whatever their markers say: derived from another history,
/// they may be behind the database too (audit: a backup restored over an
/// index of an older restore's short run kept that run's messages
/// searchable and skipped the restored ones under the same numbers). The
/// index is cleared and the mirror moved to `transcripts.stale-<UTC time>`
/// (it may hold the only copy of what the restore lost); both are rebuilt
/// from the store by the indexer's catch-up.
pub(crate) async fn drop_stale(
    indexer: Indexer,
    mirror_root: Option<PathBuf>,
    store: &Store,
) -> Result<Fresh, IndexError> {
    let newest = store.max_gid().await?;
    let indexed = indexer.progress().committed_gid;
    let mut mirror = mirror_root
        .as_ref()
        .map(|root| JsonlMirror::open(root).map(|m| m.with_store(store.clone())))
        .transpose()?;
    let mirrored = mirror.as_ref().map_or(0, JsonlMirror::mirrored_gid);
    // a restore, or a new database where an old one's index and mirror
    // were left (`fleet.db.generation` deleted to start over): what they
    // hold is of another history, and no write of this database was lost
    let restored = store.take_new_history();
    let derived = indexed > 0 || mirrored > 0;
    if (indexed <= newest && mirrored <= newest) && !(restored && derived) {
        return Ok(Fresh { indexer, mirror });
    }
    let ahead = indexed.max(mirrored);
    if !restored {
        // no restore was made: the database lost what it had committed,
        // or reads wrong; a damaged one is not rebuilt from, and what was
        // derived from it (the mirror may be the only whole copy) stays
        let problem = match store.quick_check().await {
            Ok(problem) => problem.map(|p| p.replace('\n', " ")),
            Err(e) => Some(e.to_string()),
        };
        if let Some(problem) = problem {
            tracing::error!(
                newest_in_store = newest,
                indexed,
                mirrored,
                %problem,
                "the database is damaged: its newest entry is {newest}, but the search index \
                 and the JSONL mirror hold entries up to {ahead}; they are left as they are"
            );
            store.latch_damaged(format!(
                "PRAGMA quick_check: {problem}; the search index and the JSONL mirror \
                 (transcripts/) hold entries up to {ahead}, the database's newest is {newest}: \
                 keep transcripts/ and restore fleet.db from a backup"
            ));
            return Ok(Fresh { indexer, mirror });
        }
    }
    tracing::warn!(
        newest_in_store = newest,
        indexed,
        mirrored,
        restored,
        "the search index and the JSONL mirror are not the database's (it was restored from a snapshot or replaced): rebuilding both from the database"
    );
    let indexer = tokio::task::spawn_blocking(move || {
        let mut indexer = indexer;
        indexer.clear().map(|_| indexer)
    })
    .await
    .map_err(|e| IndexError::Task(e.to_string()))??;
    let mut aside_at = None;
    if let (Some(root), Some(stale)) = (mirror_root, mirror.take()) {
        drop(stale);
        let aside = aside_path_named(&root, "stale");
        std::fs::rename(&root, &aside).map_err(|e| IndexError::io(&root, e))?;
        tracing::warn!(
            moved_to = %aside.display(),
            "moved the stale JSONL mirror aside (it may hold transcripts the restored database lost); delete it once you no longer need it"
        );
        mirror = Some(JsonlMirror::open(root)?.with_store(store.clone()));
        aside_at = Some(aside);
    }
    if !restored {
        // sound, but behind what it had committed: its WAL was lost or
        // damaged after a crash, or fleet.db was replaced by an older
        // copy without raising fleet.db.generation
        let kept = match &aside_at {
            Some(aside) => format!("their transcripts are in {}", aside.display()),
            // the index that held them was emptied above
            None => "no copy of them is kept: this host writes no mirror".to_owned(),
        };
        let detail = format!(
            "the database lost entries it had committed: its newest is {newest}, the search index \
             and the JSONL mirror had them up to {ahead} ({kept}). The machine lost power \
             (with host.synchronous = \"normal\" the last commits may go), its write-ahead log \
             (fleet.db-wal) was lost or damaged, or fleet.db was replaced by an older copy \
             without raising fleet.db.generation; messages accepted then are not in it"
        );
        tracing::error!("{detail}");
        // as after a restore: a key sent again for a message the database
        // lost answers `unknown`, not `accepted` a second time (its effects
        // may have happened)
        let now = store.clock().now_ms();
        store
            .write(vec![crate::Mutation::LedgerHorizon { at_ms: now }])
            .await?;
        store.note_lost_writes(format!(
            "{detail}; keys sent before now answer `unknown` (UUIDv7 keys)"
        ));
    }
    Ok(Fresh { indexer, mirror })
}
