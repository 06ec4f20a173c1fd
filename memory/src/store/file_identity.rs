//! Whether the files the store writes are still the files at their paths.
//!
//! SQLite keeps its database and WAL open by file descriptor. A data
//! directory deleted under a running host (`rm -rf data`, `rm fleet.db*`),
//! or a database replaced by another file, leaves it writing into unlinked
//! files: every commit succeeds and is acknowledged, and all of it is gone
//! at the next start (which, after `rm -rf`, silently starts an empty
//! fleet). The writer asks [`FileIdentity::check`] before each `COMMIT`
//! and refuses the group instead (`StoreError::FileGone`).
//!
//! The check is one `stat(2)` per file on the path (about a microsecond,
//! against the tens of microseconds to milliseconds of a group commit), so
//! it runs at every commit rather than every so many milliseconds: no
//! commit after the deletion is acknowledged. An unlinked file keeps its
//! inode number while it is open, so a new file at the path never has the
//! old one's `(device, inode)`.

use std::path::Path;
use std::path::PathBuf;

use crate::error::StoreError;

/// The `(device, inode)` a file had when the store opened it.
#[derive(Debug, Clone)]
pub(crate) struct FileIdentity {
    files: Vec<Watched>,
}

#[derive(Debug, Clone)]
struct Watched {
    path: PathBuf,
    id: (u64, u64),
}

impl FileIdentity {
    /// Notes the identity of the database at `db` and of its WAL (when it
    /// exists: the store opens in WAL mode and has written by then). A file
    /// that cannot be read now is not watched.
    pub(crate) fn of(db: &Path) -> Self {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let files = [db.to_path_buf(), PathBuf::from(wal)]
            .into_iter()
            .filter_map(|path| {
                let id = identity(&path).ok()?;
                Some(Watched { path, id })
            })
            .collect();
        Self { files }
    }

    /// `Err(FileGone)` when a watched file is no longer at its path: the
    /// path is gone (or a directory on it is), or holds another file. Any
    /// other failure to look (a permission taken away) lets the write go:
    /// the file may well still be there.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        for file in &self.files {
            let what = match identity(&file.path) {
                Ok(id) if id == file.id => continue,
                Ok(_) => "was replaced by another file",
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    "was deleted"
                }
                Err(e) => {
                    tracing::debug!(path = %file.path.display(), error = %e, "store file not checked");
                    continue;
                }
            };
            return Err(StoreError::FileGone {
                path: file.path.display().to_string(),
                what,
            });
        }
        Ok(())
    }
}

#[cfg(unix)]
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Elsewhere only a deleted file is told (no inode numbers).
#[cfg(not(unix))]
fn identity(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|_| (0, 0))
}
