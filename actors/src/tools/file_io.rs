//! How the file tools touch files: only regular files are opened (a FIFO
//! blocks its reader until someone writes, a device may never end), and a
//! file is replaced through a temporary file created exclusively beside it.
//! Every path is opened beneath the workspace root ([`Beneath`]), and a
//! file is created, renamed and removed in its directory opened so: a
//! directory swapped for a symlink out after the path was checked leads
//! nowhere ([`FileError::Outside`]).
//!
//! The functions block: call them from `spawn_blocking`.

use std::ffi::OsStr;
use std::ffi::OsString;
use std::fs::File;
use std::fs::Metadata;
use std::fs::Permissions;
use std::io::ErrorKind;
use std::io::Write as _;
use std::os::fd::AsFd as _;
use std::os::fd::BorrowedFd;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;
use std::path::PathBuf;

use rustix::fs::AtFlags;
use rustix::fs::Mode;
use rustix::fs::OFlags;
use rustix::io::Errno;

use crate::tools::workspace::Beneath;
use crate::tools::workspace::is_outside;

/// Why a file could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// The path is a directory.
    #[error("a directory")]
    Directory,
    /// The path is a FIFO, a socket or a device.
    #[error("{0}, not a regular file")]
    Special(&'static str),
    /// The path leads out of the workspace (a directory of it became a
    /// symlink out after it was checked).
    #[error("outside the workspace")]
    Outside,
    /// Write's file is a symbolic link that leads nowhere (to this
    /// target): writing would replace the link with a file.
    #[error("a symbolic link to {0}, which does not exist")]
    BrokenLink(PathBuf),
    /// The operating system refused.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// An error of a lookup beneath the root: [`FileError::Outside`] if it
/// would have left it.
fn beneath(e: std::io::Error) -> FileError {
    if is_outside(&e) {
        FileError::Outside
    } else {
        FileError::Io(e)
    }
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

/// The metadata of what `fd` is (an `O_PATH` handle will do).
fn metadata(fd: OwnedFd) -> std::io::Result<Metadata> {
    File::from(fd).metadata()
}

/// Opens an existing regular file for reading, beneath the root. What is
/// there (symlinks followed) is looked at first through an `O_PATH`
/// handle, which opens nothing, and the open itself does not block
/// (`O_NONBLOCK`), so a FIFO swapped in between cannot hang the call; the
/// opened file is checked again.
pub(crate) fn open_regular(ws: &Beneath, path: &Path) -> Result<(File, Metadata), FileError> {
    regular_only(&metadata(ws.open(path, OFlags::PATH).map_err(beneath)?)?)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = File::from(ws.open(path, flags).map_err(beneath)?);
    let meta = file.metadata()?;
    regular_only(&meta)?;
    Ok((file, meta))
}

/// The directory of the file at `path` and the file's name in it.
pub(crate) fn split(path: &Path) -> Result<(&Path, &OsStr), FileError> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(FileError::Directory),
    }
}

/// The directory `path`, opened beneath the root (for [`replace`]).
pub(crate) fn open_dir(ws: &Beneath, path: &Path) -> Result<OwnedFd, FileError> {
    ws.dir(path).map_err(beneath)
}

/// Makes the directory `path` and those above it that are missing, one at
/// a time, each in its parent opened beneath the root, and opens it (for
/// [`replace`]).
pub(crate) fn make_dirs(ws: &Beneath, path: &Path) -> Result<OwnedFd, FileError> {
    let rel = path
        .strip_prefix(ws.root())
        .map_err(|_| FileError::Outside)?;
    let mut at = ws.root().to_path_buf();
    let mut dir = open_dir(ws, &at)?;
    for part in rel.components() {
        at.push(part);
        match ws.dir(&at) {
            Ok(fd) => {
                dir = fd;
                continue;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(beneath(e)),
        }
        match rustix::fs::mkdirat(&dir, part.as_os_str(), Mode::from_bits_truncate(0o777)) {
            // made meanwhile: opened (and so checked) next like any other
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(FileError::Io(e.into())),
        }
        dir = open_dir(ws, &at)?;
    }
    Ok(dir)
}

/// The permissions of the regular file `name` in `dir`, `None` if there
/// is no file there yet. A symlink there is refused
/// ([`FileError::BrokenLink`]): the rename would replace the link itself
/// (a path checked by
/// [`Workspace::resolve`](crate::tools::workspace::Workspace::resolve)
/// ends in one only when it dangles, or was swapped in since), and it
/// did: the person's link was gone, a plain file in its place (QA,
/// 2026-12-06).
pub(crate) fn existing_target(
    dir: &OwnedFd,
    name: &OsStr,
) -> Result<Option<Permissions>, FileError> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let meta = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => metadata(fd)?,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(FileError::Io(e.into())),
    };
    if meta.file_type().is_symlink() {
        let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(std::io::Error::from)?;
        return Err(FileError::BrokenLink(PathBuf::from(OsString::from_vec(
            target.into_bytes(),
        ))));
    }
    regular_only(&meta)?;
    Ok(Some(meta.permissions()))
}

/// Reads a regular file of at most `max` bytes; `Ok(Err(size))` when it
/// is larger (nothing more than `max + 1` bytes is read).
pub(crate) fn read_bounded(
    ws: &Beneath,
    path: &Path,
    max: usize,
) -> Result<Result<(Vec<u8>, Permissions), u64>, FileError> {
    use std::io::Read as _;
    let (file, meta) = open_regular(ws, path)?;
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
struct TempFile<'a> {
    dir: BorrowedFd<'a>,
    name: OsString,
    kept: bool,
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = rustix::fs::unlinkat(self.dir, &self.name, AtFlags::empty());
        }
    }
}

/// Replaces (or creates) the file `name` in the directory `dir` with
/// `content`, atomically: a crash leaves the old file or the new one,
/// never half of one.
///
/// The content goes to a temporary file in the same directory, under a
/// random name and created with `O_EXCL`, which never follows a symlink
/// or reuses a file planted there; it is synced, given `permissions` (the
/// old file's, so a script stays executable), and renamed over `name`.
/// It is removed on every error. Everything happens in `dir`, opened
/// beneath the root, whatever its path leads to meanwhile.
pub(crate) fn replace(
    dir: &OwnedFd,
    name: &OsStr,
    content: &[u8],
    permissions: Option<Permissions>,
) -> Result<(), FileError> {
    // short enough that the temporary name stays under NAME_MAX
    let stem: String = name.to_string_lossy().chars().take(64).collect();
    let temp = OsString::from(format!(
        ".{stem}.{}.botfleet-tmp",
        uuid::Uuid::new_v4().simple()
    ));
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, &temp, flags, Mode::from_bits_truncate(0o666))
        .map_err(std::io::Error::from)?;
    let mut tmp = TempFile {
        dir: dir.as_fd(),
        name: temp,
        kept: false,
    };
    let mut file = File::from(fd);
    file.write_all(content)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);
    rustix::fs::renameat(dir, &tmp.name, dir, name).map_err(std::io::Error::from)?;
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

/// The first component of `dir` below the root that is not a directory
/// and so keeps `dir` from being made; `None` if none does (the failure
/// had another cause). Each component is looked at in its parent opened
/// beneath the root, and a link is followed beneath it too.
pub(crate) fn blocker(ws: &Beneath, dir: &Path) -> Option<Blocker> {
    let root = ws.root();
    let rel = dir.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    let mut parent = ws.dir(&at).ok()?;
    for part in rel.components() {
        at.push(part);
        let name = part.as_os_str();
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let meta = match rustix::fs::openat(&parent, name, flags, Mode::empty()) {
            Ok(fd) => metadata(fd).ok()?,
            // the rest is still to be made: nothing in the way so far
            Err(_) => return None,
        };
        if meta.is_dir() {
            parent = ws.dir(&at).ok()?;
            continue;
        }
        if !meta.file_type().is_symlink() {
            return Some(Blocker::File(at));
        }
        let target = rustix::fs::readlinkat(&parent, name, Vec::new()).ok()?;
        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
        let lexical = at.parent().map(|p| p.join(&target))?;
        let problem = match ws.open(&at, OFlags::PATH).and_then(metadata) {
            // a link to a directory inside (resolve refused one outside)
            Ok(meta) if meta.is_dir() => {
                parent = ws.dir(&at).ok()?;
                continue;
            }
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
