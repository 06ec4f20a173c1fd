//! How the file tools touch files: only regular files are opened (a FIFO
//! blocks its reader until someone writes, a device may never end), and a
//! file is replaced through a temporary file created exclusively beside it.
//!
//! The functions block: call them from `spawn_blocking`.

use std::fs::File;
use std::fs::Metadata;
use std::fs::OpenOptions;
use std::fs::Permissions;
use std::io::ErrorKind;
use std::io::Write as _;
use std::os::unix::fs::FileTypeExt as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::path::PathBuf;

/// Why a file could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// The path is a directory.
    #[error("a directory")]
    Directory,
    /// The path is a FIFO, a socket or a device.
    #[error("{0}, not a regular file")]
    Special(&'static str),
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Refuses anything but a regular file, saying what it is.
fn regular_only(meta: &Metadata) -> Result<(), FileError> {
    let kind = meta.file_type();
    if kind.is_file() {
        Ok(())
    } else if kind.is_dir() {
        Err(FileError::Directory)
    } else if kind.is_fifo() {
        Err(FileError::Special("a FIFO (named pipe)"))
    } else if kind.is_socket() {
        Err(FileError::Special("a socket"))
    } else if kind.is_block_device() || kind.is_char_device() {
        Err(FileError::Special("a device"))
    } else {
        Err(FileError::Special("a special file"))
    }
}

/// Opens an existing regular file for reading. Its metadata (symlinks
/// followed) is checked before the open, and the open itself does not
/// block (`O_NONBLOCK`), so a FIFO swapped in between cannot hang the
/// call; the opened file is checked again.
pub(crate) fn open_regular(path: &Path) -> Result<(File, Metadata), FileError> {
    regular_only(&std::fs::metadata(path)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    regular_only(&meta)?;
    Ok((file, meta))
}

/// The permissions of the regular file at `path`, `None` if there is no
/// file there yet (a dangling symlink counts as none: it is replaced).
pub(crate) fn existing_target(path: &Path) -> Result<Option<Permissions>, FileError> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            regular_only(&meta)?;
            Ok(Some(meta.permissions()))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads a regular file of at most `max` bytes; `Ok(Err(size))` when it
/// is larger (nothing more than `max + 1` bytes is read).
pub(crate) fn read_bounded(
    path: &Path,
    max: usize,
) -> Result<Result<(Vec<u8>, Permissions), u64>, FileError> {
    use std::io::Read as _;
    let (file, meta) = open_regular(path)?;
    if meta.len() > max as u64 {
        return Ok(Err(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Ok(Err(bytes.len() as u64));
    }
    Ok(Ok((bytes, meta.permissions())))
}

/// A temporary file that is removed unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    kept: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Replaces (or creates) the file at `path` with `content`, atomically: a
/// crash leaves the old file or the new one, never half of one.
///
/// The content goes to a temporary file in the same directory, under a
/// random name and created with `O_EXCL` (`create_new`), which never
/// follows a symlink or reuses a file planted there; it is synced, given
/// `permissions` (the old file's, so a script stays executable), and
/// renamed over `path`. It is removed on every error.
pub(crate) fn replace(
    path: &Path,
    content: &[u8],
    permissions: Option<Permissions>,
) -> Result<(), FileError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(FileError::Directory);
    };
    // short enough that the temporary name stays under NAME_MAX
    let stem: String = name.to_string_lossy().chars().take(64).collect();
    let mut tmp = TempFile {
        path: dir.join(format!(
            ".{stem}.{}.botfleet-tmp",
            uuid::Uuid::new_v4().simple()
        )),
        kept: false,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp.path)?;
    file.write_all(content)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp.path, path)?;
    tmp.kept = true;
    Ok(())
}

/// What keeps a directory from being made inside the workspace, found
/// after `create_dir_all` failed: the OS says only "File exists".
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Blocker {
    /// A file (or another non-directory) where a directory goes.
    File(PathBuf),
    /// A symbolic link where a directory goes whose target is not a
    /// directory: missing, a file, or outside the workspace.
    Link {
        /// The link.
        at: PathBuf,
        /// Its target as written in it.
        target: PathBuf,
        /// Where that target is: outside the workspace, missing, or not a
        /// directory.
        problem: LinkProblem,
    },
}

/// Why a link cannot hold a directory ([`Blocker::Link`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LinkProblem {
    /// The target is outside the workspace (followed or not, nothing is
    /// made there).
    Outside,
    /// The target does not exist.
    Missing,
    /// The target is a file, not a directory.
    NotADirectory,
}

/// The first component of `dir` below `root` that is not a directory and
/// so keeps `dir` from being made; `None` if none does (the failure had
/// another cause).
pub(crate) fn blocker(root: &Path, dir: &Path) -> Option<Blocker> {
    let rel = dir.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            // the rest is still to be made: nothing in the way so far
            Err(_) => return None,
        };
        if meta.is_dir() {
            continue;
        }
        if !meta.file_type().is_symlink() {
            return Some(Blocker::File(at));
        }
        let target = std::fs::read_link(&at).ok()?;
        let lexical = at.parent().map(|p| p.join(&target))?;
        let problem = match std::fs::metadata(&at) {
            // a link to a directory inside (resolve refused one outside)
            Ok(meta) if meta.is_dir() => continue,
            _ if !lexically_inside(root, &lexical) => LinkProblem::Outside,
            Ok(_) => LinkProblem::NotADirectory,
            Err(_) => LinkProblem::Missing,
        };
        return Some(Blocker::Link {
            at,
            target,
            problem,
        });
    }
    None
}

/// Whether `path`, its `.` and `..` taken as written, stays in `root`.
fn lexically_inside(root: &Path, path: &Path) -> bool {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return false;
                }
            }
            Component::CurDir => {}
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
        }
    }
    out.starts_with(root)
}
