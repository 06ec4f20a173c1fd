//! The store's process lock: one process at a time writes a database.
//!
//! SQLite would let a second process open the same file and write to it
//! between our commits; two hosts on one data directory would then both
//! resume the same unfinished turns and run their side effects twice. An
//! advisory lock on `<db>.lock` (flock on Unix, LockFileEx on Windows),
//! held for the writer's life, makes the second open fail instead. The
//! operating system drops it when the process dies, SIGKILL included, so a
//! crash never leaves a stale lock.
//!
//! A lock on `<db>.lock` alone is defeated by deleting that file while a
//! host holds it: the next process creates a new file at the path and
//! locks that one. On Unix the store also takes a `flock` on the database
//! file itself once it is sure that file is the store's (after the
//! history check): deleting `fleet.db` loses the store anyway (the running
//! host then refuses writes, `file_identity.rs`, and the next start refuses
//! the missing history), so there is nothing left to defeat. `flock` locks
//! are independent of the POSIX (`fcntl`) locks SQLite takes on the same
//! file on Linux; on Windows a lock on the database would block SQLite's
//! own reads and writes, so there it is `<db>.lock` only.

use std::fs::File;
use std::fs::OpenOptions;
use std::fs::TryLockError;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use crate::error::StoreError;

/// How long an open waits for the lock: a store of this process that is
/// closing (its writer finishing the last group) lets go within that.
const WAIT: Duration = Duration::from_secs(1);

/// Held while a store is open; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct StoreLock {
    _file: File,
    /// The lock on the database file itself (Unix), taken by
    /// [`StoreLock::lock_database`]. Dropped after the writer's connection
    /// is closed: closing a descriptor of a file drops every POSIX lock
    /// the process holds on it, SQLite's included, so it must not close
    /// while SQLite still needs them.
    _database: Option<File>,
}

/// The lock file of the database at `db`.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl StoreLock {
    /// Takes the lock of the database at `db`, or fails with
    /// [`StoreError::InUse`] when another store holds it.
    pub(crate) fn acquire(db: &Path) -> Result<Self, StoreError> {
        let path = lock_path(db);
        let deadline = Instant::now() + WAIT;
        loop {
            let file = open_for_lock(db, &path)?;
            lock(&file, db, &path, deadline)?;
            // the file locked must still be the one at the path: one
            // deleted between our open and our lock is no lock at all
            // (another process may have created and locked a new one)
            if same_file(&file, &path) || Instant::now() >= deadline {
                return Ok(Self {
                    _file: file,
                    _database: None,
                });
            }
        }
    }

    /// Also locks the database file `db` itself (creating it empty if it
    /// is missing, which SQLite takes for a new database): a second
    /// process fails with [`StoreError::InUse`] even when `<db>.lock` was
    /// deleted under this one. Call it after the history check (which
    /// must still see a missing database as missing). No-op off Unix.
    pub(crate) fn lock_database(&mut self, db: &Path) -> Result<(), StoreError> {
        if cfg!(unix) {
            let file = open_for_lock(db, db)?;
            lock(&file, db, db, Instant::now() + WAIT)?;
            self._database = Some(file);
        }
        Ok(())
    }
}

/// Fails unless SQLite's own files beside `db` (`-wal`, `-shm`), when an
/// earlier host left them, are this process's to write: one it may not
/// write stopped the start with SQLite's bare "attempt to write a
/// readonly database" (QA); it is told as an unwritable database is.
/// Called before anything of a new store is made.
pub(crate) fn check_sqlite_files(db: &Path) -> Result<(), StoreError> {
    for suffix in ["-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = Path::new(&name);
        if path.is_file()
            && let Err(cause) = OpenOptions::new().read(true).write(true).open(path)
        {
            return Err(not_writable(db, path, cause));
        }
    }
    Ok(())
}

/// [`StoreError::NotWritable`] of `path` in `db`'s directory, for a
/// refused permission or a read-only file system; [`StoreError::Io`]
/// for another cause.
fn not_writable(db: &Path, path: &Path, cause: std::io::Error) -> StoreError {
    match cause.kind() {
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => {
            StoreError::NotWritable {
                dir: db
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .display()
                    .to_string(),
                path: path.display().to_string(),
                cause,
            }
        }
        _ => StoreError::Io {
            path: path.display().to_string(),
            cause,
        },
    }
}

/// Opens (creating) `path` to lock it; a data directory the host may not
/// write is told as such.
fn open_for_lock(db: &Path, path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|cause| not_writable(db, path, cause))
}

/// Takes the exclusive lock on `file` (at `path`), waiting until
/// `deadline` for a closing store of this process to let go.
fn lock(file: &File, db: &Path, path: &Path, deadline: Instant) -> Result<(), StoreError> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::InUse {
                    path: db.display().to_string(),
                });
            }
            Err(TryLockError::Error(source)) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    cause: source,
                });
            }
        }
    }
}

/// Whether `file` is the file at `path` (Unix; elsewhere, assumed).
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, _path: &Path) -> bool {
    true
}
