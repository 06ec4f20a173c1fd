//! Opening a workspace's paths beneath its root, in the kernel.
//!
//! [`Workspace::resolve`](super::Workspace::resolve) checks a path
//! (symlinks followed) before a file tool uses it, but the check and the
//! use are separate steps: a process the bot started earlier can swap a
//! directory of the path for a symlink out of the workspace in between.
//! So every file the tools open, and every directory they create or
//! rename in, is reached from a descriptor of the workspace root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: the kernel refuses
//! (`EXDEV`) any lookup that would leave the root, whatever was swapped
//! when. Symlinks that stay inside keep working.
//!
//! Mount points inside a workspace are crossed (no `RESOLVE_NO_XDEV`): no
//! bot can mount anything, so one is the operator's, and meant.
//!
//! A kernel without `openat2` (before Linux 5.6, or a seccomp filter that
//! hides it) answers `ENOSYS`; then paths are opened by name from the same
//! descriptor, the check before being the only one (the host's log says so
//! once).

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use rustix::fs::Mode;
use rustix::fs::OFlags;
use rustix::fs::ResolveFlags;
use rustix::io::Errno;

/// How the kernel resolves a path beneath the root: never out of it (`..`
/// past it, an absolute path or symlink), never through a `/proc` magic
/// link.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// How often a lookup is tried that the kernel gave up on (`EAGAIN`)
/// because a rename ran during it.
const TRIES: usize = 16;

/// Set once the kernel has said it has no `openat2`.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// A workspace's root, opened, and its paths opened beneath it.
#[derive(Debug)]
pub(crate) struct Beneath {
    fd: OwnedFd,
    path: PathBuf,
}

impl Beneath {
    /// Opens the root `path` (canonical; a symlink there is refused).
    pub(crate) fn new(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The root's path.
    pub(crate) fn root(&self) -> &Path {
        &self.path
    }

    /// Opens `path`, absolute inside the root, with `flags` (never
    /// creating it). A lookup that leaves the root fails with `EXDEV`
    /// (see [`is_outside`]).
    pub(crate) fn open(&self, path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        let rel = match path.strip_prefix(&self.path) {
            Ok(rel) if rel.as_os_str().is_empty() => Path::new("."),
            Ok(rel) => rel,
            Err(_) => return Err(Errno::XDEV.into()),
        };
        let flags = flags | OFlags::CLOEXEC;
        let mut tries = 1;
        while !NO_OPENAT2.load(Ordering::Relaxed) {
            match rustix::fs::openat2(&self.fd, rel, flags, Mode::empty(), BENEATH) {
                Err(Errno::AGAIN) if tries < TRIES => tries += 1,
                Err(Errno::NOSYS) => without_openat2(),
                done => return done.map_err(io::Error::from),
            }
        }
        Ok(rustix::fs::openat(&self.fd, rel, flags, Mode::empty())?)
    }

    /// Opens the directory `path` (absolute inside the root) as a handle
    /// for `*at` calls.
    pub(crate) fn dir(&self, path: &Path) -> io::Result<OwnedFd> {
        self.open(path, OFlags::PATH | OFlags::DIRECTORY)
    }

    /// Opens the regular file `path` (absolute inside the root) for
    /// reading; `Ok(None)` when what is there is not a regular file. What
    /// is there is looked at first through an `O_PATH` handle, which opens
    /// nothing, and the open itself does not block (`O_NONBLOCK`), so a
    /// FIFO or a device swapped in between neither hangs the reader nor is
    /// opened for real; the opened file is checked again.
    pub(crate) fn open_regular(&self, path: &Path) -> io::Result<Option<File>> {
        if !File::from(self.open(path, OFlags::PATH)?)
            .metadata()?
            .is_file()
        {
            return Ok(None);
        }
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let file = File::from(self.open(path, flags)?);
        Ok(file.metadata()?.is_file().then_some(file))
    }
}

/// Whether `e` says a lookup would have left the root.
pub(crate) fn is_outside(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::XDEV.raw_os_error())
}

/// Notes that the kernel has no `openat2`; the first time, in the log.
fn without_openat2() {
    if !NO_OPENAT2.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "this kernel has no openat2 (Linux 5.6 or later has it, unless a seccomp filter \
             hides it): Read, Write and Edit, and auto-review reading the scripts a command runs, \
             check a path and then open it by name, so a process in a workspace that swaps a \
             directory for a symlink between the two steps can lead them outside it \
             (docs/security.md, Workspace files)"
        );
    }
}
