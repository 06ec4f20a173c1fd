//! The store's process lock: one process at a time writes a database.
//!
//! SQLite would let a second process open the same file and write to it
//! between our commits; two hosts on one data directory would then both
//! resume the same unfinished turns and run their side effects twice. An
//! advisory lock on `<db>.lock` (flock on Unix, LockFileEx on Windows),
//! held for the writer's life, makes the second open fail instead. The
//! operating system drops it when the process dies, SIGKILL included, so a
//! crash never leaves a stale lock.

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
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| StoreError::Io {
                path: path.display().to_string(),
                cause: source,
            })?;
        let deadline = Instant::now() + WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Self { _file: file }),
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
}
