//! A store that could not be opened: what a start says, and what it
//! leaves behind.
//!
//! On a disk with a few kilobytes left, SQLite's first writes of a new
//! store fail with "disk I/O error" as often as with "database or disk is
//! full" (extending the WAL index, `-shm`, is not a plain write): a start
//! then said to check the disk, while the disk was only full. And a new
//! store's files made before the failure stayed, so the next start, with
//! space freed, no longer said "new data directory" (QA, 2026-12-04).

use std::path::Path;

use crate::error::StoreError;

/// Free bytes under which a disk I/O error is told as a full disk.
const NEARLY_FULL: u64 = 1 << 20;

/// `e` as a failed open tells it: a disk I/O error where the file system
/// of `dir` has less than [`NEARLY_FULL`] free is a full disk.
pub(super) fn explained(e: StoreError, dir: &Path) -> StoreError {
    match e {
        StoreError::DiskIo { detail } => match free_bytes(dir) {
            Some(free) if free < NEARLY_FULL => StoreError::DiskFull {
                detail: format!("{detail}, with {free} bytes free on the disk"),
            },
            _ => StoreError::DiskIo { detail },
        },
        other => other,
    }
}

/// Bytes free for an unprivileged writer on the file system of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize.max(1)))
}

/// Removes the files an open that was to create the store at `path` made
/// before it failed (the database, its WAL and index, the generation
/// file): none held history. The lock file stays, as after every run.
pub(super) fn remove_new_files(path: &Path) {
    for suffix in ["", "-wal", "-shm", ".generation", ".generation.tmp"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(Path::new(&name));
    }
}
