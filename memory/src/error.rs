//! Errors of the memory crate.

use crate::ids::IdError;

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite reported an error. Its message is part of this one's, so it
    /// is not also the error's `source` (`{:#}` of anyhow would print it
    /// again: "file is not a database: file is not a database").
    #[error("sqlite: {0}")]
    Sqlite(rusqlite::Error),
    /// A file of the store could not be read or written.
    // `cause`, not `source`: the message already says it (as `Sqlite`)
    #[error("store i/o on {path}: {cause}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A stored JSON column did not parse (the database was changed by hand
    /// or by an incompatible version).
    #[error("corrupt record in {table}: {detail}")]
    Corrupt {
        /// Table of the record.
        table: &'static str,
        /// What failed to parse.
        detail: String,
    },
    /// The writer thread is gone (it panicked or the store was closed).
    #[error("the store writer has stopped; restart the host")]
    WriterGone,
    /// Another process has the store open: a host already running on the
    /// same data directory, or `botfleet reindex` while it runs.
    #[error(
        "the store {path} is in use by another botfleet process (a host already running on this data directory?); stop that process first, or use another data directory"
    )]
    InUse {
        /// The database file.
        path: String,
    },
    /// The database file is missing or empty while the data directory has
    /// history (its generation sidecar counts earlier starts): opened, it
    /// would silently start an empty fleet over the old one.
    #[error(
        "the store {path} is {state}, but this data directory has history ({sidecar} {}): restore {path} from a backup, or, to start over, move the data directory away (or delete {sidecar})",
        counted(.generation)
    )]
    HistoryGone {
        /// The database file.
        path: String,
        /// `missing` or `empty (0 bytes)`.
        state: &'static str,
        /// The generation sidecar file.
        sidecar: String,
        /// The generation it holds; `None` when it holds no number (empty
        /// or damaged: only a store that ran writes it, whole).
        generation: Option<i64>,
    },
    /// The database was written by a newer version of botfleet.
    #[error(
        "database schema version {found} is newer than this binary supports ({supported}); upgrade botfleet"
    )]
    SchemaTooNew {
        /// Version found in the file.
        found: i64,
        /// Highest version this binary knows.
        supported: i64,
    },
    /// The database was written by an older version of botfleet, and it
    /// was opened without migrating (`StoreOptions::migrate` off: an
    /// offline command such as `reindex`, which must not upgrade it).
    #[error(
        "database schema version {found} is older than this binary's ({supported}), and this command does not upgrade it"
    )]
    SchemaOlder {
        /// Version found in the file.
        found: i64,
        /// Version this binary migrates to.
        supported: i64,
    },
    /// A referenced record does not exist.
    #[error("{what} not found: {id}")]
    NotFound {
        /// Kind of record.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// A mutation broke an invariant of the data (a caller bug or a race
    /// the caller must resolve).
    #[error("rejected write: {0}")]
    Rejected(String),
    /// A record to create has an id that another record (perhaps another
    /// user's) already holds; nothing was written.
    #[error("{what} id {id:?} is already taken")]
    Taken {
        /// Kind of record.
        what: &'static str,
        /// The id.
        id: String,
    },
    /// An id did not parse.
    #[error(transparent)]
    Id(#[from] IdError),
    /// A blocking read task panicked or was cancelled.
    #[error("store reader task failed: {0}")]
    Reader(String),
    /// The disk holding the store is full (SQLite's `SQLITE_FULL`): the
    /// transaction was rolled back, nothing of it was saved.
    #[error(
        "the disk holding the store is full ({detail}); free disk space in the host's data directory, then retry (nothing was saved)"
    )]
    DiskFull {
        /// SQLite's message.
        detail: String,
    },
    /// The disk failed a read or a write (SQLite's `SQLITE_IOERR`): the
    /// transaction was rolled back, nothing of it was saved.
    #[error(
        "the disk holding the store failed a read or write ({detail}); check the disk (the system log says more) and any file-size limit on the host process (`ulimit -f`, systemd `LimitFSIZE=`), then retry (nothing was saved)"
    )]
    DiskIo {
        /// SQLite's message.
        detail: String,
    },
    /// The database file the store writes is no longer the file at its
    /// path (deleted, or replaced by another file, while the store ran):
    /// what it committed would go to a file nothing can open again, so
    /// every later write is refused.
    #[error(
        "the store's file {path} {what} while the host ran, so nothing more can be saved (what went into the old, unlinked file is lost when the host stops); restart the host, after putting fleet.db back from a backup if it is gone (docs/operations.md, \"Backups and restore\")"
    )]
    FileGone {
        /// The database file or its WAL.
        path: String,
        /// `was deleted` or `was replaced by another file`.
        what: &'static str,
    },
    /// SQLite found the database damaged (`SQLITE_CORRUPT`,
    /// `SQLITE_NOTADB`): a page it read is not what it wrote, or the file
    /// is no SQLite database at all.
    #[error(
        "the store's database is damaged ({detail}); stop the host and restore fleet.db from a backup (docs/operations.md, \"Backups and restore\")"
    )]
    Damaged {
        /// SQLite's message.
        detail: String,
    },
    /// The data directory cannot be written (a read-only mount, or
    /// permissions): the store cannot create its files there.
    #[error(
        "the data directory {dir} must be writable by the host, but {path}: {cause}; make it writable for the user the host runs as (or mount it read-write), or set `[host] data_dir` to a writable directory"
    )]
    NotWritable {
        /// The data directory.
        dir: String,
        /// The file that could not be opened for writing.
        path: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The store's file is an SQLite database of another program (tables,
    /// no botfleet schema version): the host does not add its tables to
    /// it, nor turn on its write-ahead log.
    #[error(
        "{path} is not a botfleet store: it is an SQLite database of another program (tables {tables}), which the host would change; move that file away, or set `[host] data_dir` (or --data) to another directory"
    )]
    Foreign {
        /// The database file.
        path: String,
        /// The first few of its tables, quoted.
        tables: String,
    },
}

/// A full disk, a failing disk and a damaged database get their own variants, so callers (the
/// API's `507`) can tell the user what to do without matching messages.
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull {
                detail: e.to_string(),
            },
            Some(rusqlite::ErrorCode::SystemIoFailure) => StoreError::DiskIo {
                detail: e.to_string(),
            },
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                StoreError::Damaged {
                    detail: e.to_string(),
                }
            }
            // the writer numbers entries itself, and an inbox row takes its
            // entry's number: a clash means the tables disagree, as a
            // damaged file or one rolled back without its WAL leaves them
            // (QA: every message then got `500 internal`)
            Some(rusqlite::ErrorCode::ConstraintViolation) if clashes_on_gid(&e) => {
                StoreError::Damaged {
                    detail: format!(
                        "{e}: an entry number the database gives out is taken already, so its \
                         tables disagree"
                    ),
                }
            }
            _ => StoreError::Sqlite(e),
        }
    }
}

/// Whether `e` is a clash on an entry's number (`entries.gid`,
/// `inbox.gid`), which only disagreeing tables bring about.
fn clashes_on_gid(e: &rusqlite::Error) -> bool {
    let rusqlite::Error::SqliteFailure(_, Some(message)) = e else {
        return false;
    };
    message
        .strip_prefix("UNIQUE constraint failed: ")
        .is_some_and(|columns| matches!(columns, "entries.gid" | "inbox.gid"))
}

impl StoreError {
    /// Whether retrying the same operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Sqlite(e) => matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ),
            StoreError::Io { .. } => true,
            StoreError::Reader(_) => true,
            StoreError::Corrupt { .. }
            | StoreError::WriterGone
            | StoreError::InUse { .. }
            | StoreError::HistoryGone { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::SchemaOlder { .. }
            | StoreError::NotFound { .. }
            | StoreError::Rejected(_)
            | StoreError::Taken { .. }
            | StoreError::Id(_)
            // an immediate retry finds the disk as full or as broken
            | StoreError::DiskFull { .. }
            | StoreError::DiskIo { .. }
            // only a restart (after a restore) helps
            | StoreError::FileGone { .. }
            | StoreError::Damaged { .. }
            | StoreError::NotWritable { .. }
            | StoreError::Foreign { .. } => false,
        }
    }
}

/// How a generation sidecar counts earlier starts, for [`StoreError::HistoryGone`].
fn counted(generation: &Option<i64>) -> String {
    match generation {
        Some(n) => format!("counts {n} earlier start(s)"),
        None => "is there, though it holds no count (emptied or damaged)".to_owned(),
    }
}
