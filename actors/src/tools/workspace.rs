//! The fleet workspace: the directories that file tools and Shell may
//! touch. Each owner (the user a bot belongs to) has one,
//! `<workspace>/<owner id>/`: the bots of one owner share theirs, and no
//! bot sees another owner's files ([`Workspaces`]).

use std::collections::BTreeSet;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::OnceLock;

use botfleet_memory::UserId;

use crate::safety::LockManager;

#[path = "workspace_beneath.rs"]
mod beneath;
#[path = "workspace_disk.rs"]
mod disk;

pub(crate) use self::beneath::Beneath;
pub(crate) use self::beneath::is_outside;
pub(crate) use self::disk::DiskReserve;
pub(crate) use self::disk::DiskSpace;
pub(crate) use self::disk::FREE_SPACE_HINT;
pub(crate) use self::disk::size as disk_size;

/// A path the workspace refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    /// The path leaves the workspace.
    #[error(
        "path {path:?} is outside the workspace; use a path relative to the workspace root (e.g. `notes/todo.md`)"
    )]
    Outside {
        /// The path as given.
        path: String,
    },
    /// The path leaves the workspace through a symbolic link in it.
    #[error(
        "path {path:?} leads outside the workspace through a symbolic link (it resolves to {target}); only files inside the workspace can be reached: use one there"
    )]
    LinkOutside {
        /// The path as given.
        path: String,
        /// Where it resolves to.
        target: String,
    },
    /// The path is empty or malformed.
    #[error("path {path:?} is not usable: {why}")]
    Invalid {
        /// The path as given.
        path: String,
        /// Why.
        why: &'static str,
    },
    /// The workspace itself could not be set up (see [`Workspaces::for_owner`]).
    #[error(
        "path {path:?} cannot be reached: your workspace is not usable ({why}); tell your owner, the host's operator has to fix it and restart the host"
    )]
    Unavailable {
        /// The path as given.
        path: String,
        /// What is wrong with the workspace.
        why: String,
    },
}

/// One workspace directory (canonical root) and its file locks.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    /// Locks on the files of this directory; clones share them, so every
    /// bot working here waits for the same locks (and a Shell call, which
    /// takes them all, holds only this directory).
    locks: LockManager,
    /// Why the directory cannot be used; then `root` is empty.
    problem: Option<Arc<str>>,
    /// The free space the tools leave on its file system (workspace_disk.rs).
    reserve: DiskReserve,
}

impl Workspace {
    /// Uses `root`, creating it if needed, and checks that the host can
    /// create files in it (the owners' directories go there): a workspace
    /// it may not write (another user's, a read-only mount) was found only
    /// by the first file tool or Shell call. The error names the
    /// directory and what to do.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let unusable = |e: std::io::Error, what: &str| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "the workspace {} {what} ({e}); it must be a directory the user running \
                     botfleet can write: fix its owner and permissions (e.g. `chown -R $(id -un) \
                     {}` and `chmod u+rwx {}`; remount a read-only disk read-write), or set \
                     `host.workspace` to such a directory",
                    root.display(),
                    root.display(),
                    root.display()
                ),
            )
        };
        std::fs::create_dir_all(root).map_err(|e| unusable(e, "cannot be created"))?;
        let root = root
            .canonicalize()
            .map_err(|e| unusable(e, "cannot be read"))?;
        writable(&root).map_err(|e| unusable(e, "cannot be written by the host"))?;
        Ok(Self {
            root,
            locks: LockManager::new(),
            problem: None,
            reserve: DiskReserve::Default,
        })
    }

    /// This workspace, and the owners' ones made from it ([`Workspaces`]),
    /// leaving `mib` MiB free on their file system (`runtime.
    /// tools_min_free_disk_mb`; 0: none; `None`: 512 MiB or 5 % of the
    /// file system, whichever is less), see workspace_disk.rs.
    #[must_use]
    pub fn with_min_free_disk_mb(mut self, mib: Option<u64>) -> Self {
        self.reserve = mib.map_or(DiskReserve::Default, DiskReserve::Mib);
        self
    }

    /// The free space on its file system against the tools' reserve
    /// (`None`: no reserve, or the file system cannot say).
    pub(crate) fn disk_space(&self) -> Option<DiskSpace> {
        DiskSpace::of(&self.root, self.reserve)
    }

    /// A workspace that refuses every path, because of `problem`. Its root
    /// is the empty path: what uses the root without resolving a path
    /// (Shell's default directory, its `HOME`) fails too, as no file
    /// operation finds the empty path, rather than reaching somewhere else.
    fn unavailable(problem: String) -> Self {
        Self {
            root: PathBuf::new(),
            locks: LockManager::new(),
            problem: Some(problem.into()),
            reserve: DiskReserve::Mib(0),
        }
    }

    /// The canonical root (empty when the workspace is not usable, see
    /// [`Workspace::problem`]).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file locks of this directory.
    pub fn locks(&self) -> &LockManager {
        &self.locks
    }

    /// Why this workspace cannot be used, if it cannot.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// The root opened, to open paths beneath it: what [`Workspace::resolve`]
    /// checked cannot be swapped for a way out before it is used.
    pub(crate) fn beneath(&self) -> std::io::Result<Beneath> {
        Beneath::new(&self.root)
    }

    /// Opens the regular file at `path`, as [`Workspace::resolve`] gave it,
    /// for reading beneath the root ([`Beneath::open_regular`]): `Ok(None)`
    /// when what is there is not a regular file, an error when it is
    /// missing or (a directory swapped for a symlink out since the check)
    /// outside the workspace ([`is_outside`]).
    pub(crate) fn open_regular(&self, path: &Path) -> std::io::Result<Option<std::fs::File>> {
        self.beneath()?.open_regular(path)
    }

    /// Resolves a path given by the model (relative to the root, or
    /// absolute inside it) to an absolute path inside the workspace.
    /// Symlinks are followed for the part of the path that exists, so a
    /// link pointing out of the workspace is refused too. `~` and `~/…`
    /// are the root, as in Shell (whose `HOME` it is); `~name/…` (another
    /// user's home in a shell) is refused, and a file really named so is
    /// reached as `./~name`.
    ///
    /// This is a check by name: the file tools open what it returns
    /// beneath the root ([`Workspace::beneath`]), so nothing swapped in
    /// after it leads them out.
    pub fn resolve(&self, given: &str) -> Result<PathBuf, WorkspaceError> {
        if let Some(why) = &self.problem {
            return Err(WorkspaceError::Unavailable {
                path: given.into(),
                why: why.to_string(),
            });
        }
        if given.trim().is_empty() {
            return Err(WorkspaceError::Invalid {
                path: given.into(),
                why: "it is empty",
            });
        }
        if given.contains('\0') {
            return Err(WorkspaceError::Invalid {
                path: given.into(),
                why: "it contains a NUL byte",
            });
        }
        let p = match given.strip_prefix('~') {
            None => Path::new(given),
            Some("") => Path::new("."),
            Some(rest) => match rest.strip_prefix('/') {
                Some(rest) => Path::new(rest.trim_start_matches('/')),
                None => {
                    return Err(WorkspaceError::Invalid {
                        path: given.into(),
                        why: "`~name` is another user's home in a shell, and only `~` (the \
                              workspace root) is known here; give the path relative to the \
                              root, or `./~name` for a file really named so",
                    });
                }
            },
        };
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        };
        let normal =
            normalize(&joined).ok_or_else(|| WorkspaceError::Outside { path: given.into() })?;
        if !normal.starts_with(&self.root) {
            return Err(WorkspaceError::Outside { path: given.into() });
        }
        // follow symlinks in the existing prefix
        let mut existing = normal.clone();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_owned());
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let real = existing
            .canonicalize()
            .map_err(|_| WorkspaceError::Outside { path: given.into() })?;
        if !real.starts_with(&self.root) {
            // inside by name, out by a link (QA: "use a path relative to
            // the workspace root" of a relative path, no word of the link)
            return Err(WorkspaceError::LinkOutside {
                path: given.into(),
                target: real.display().to_string(),
            });
        }
        let mut out = real;
        for name in rest.into_iter().rev() {
            out.push(name);
        }
        Ok(out)
    }
}

/// Checks that the host may create files in `dir`: creates an empty file
/// there and removes it. (The permission bits would answer wrong for root,
/// ACLs and read-only mounts.) Only a refusal is an error: a full disk or
/// no descriptor left passes, as it passes when it is over, and a
/// workspace found unusable stays so until the host restarts.
fn writable(dir: &Path) -> std::io::Result<()> {
    use std::io::ErrorKind;
    let probe = dir.join(format!(".botfleet-write-check-{}", std::process::id()));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe);
    match created {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            Err(e)
        }
        Err(_) => Ok(()),
    }
}

/// Lexical normalisation of `.` and `..`; `None` if `..` climbs past the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

/// The fleet workspace: a root holding one directory per owner,
/// `<root>/<owner id>/`, created (mode 0700) when one of the owner's bots
/// first needs it. The bots of an owner (also those made by CreateAgent
/// and its subagents, which belong to the owner of the bot that made
/// them) share that [`Workspace`] and its locks; no bot reaches another
/// owner's directory. Every bot has an owner, and every turn (a room's,
/// a routine's, a webhook's) runs as one of its bots, so there is no
/// ownerless workspace.
///
/// An owner id is one path component as it is: user ids are 1-64 of
/// ASCII letters, digits, `-`, `_` and `.`, starting with a letter or a
/// digit (`botfleet_memory::UserId`), so never empty, `.` or `..`, and
/// never with a `/` or a NUL. What is still refused: a directory entry of
/// that name that is a symlink or a file, and, on a file system that
/// ignores case, another user's directory whose name differs only in case.
pub struct Workspaces {
    root: PathBuf,
    /// The reserve of every owner's workspace.
    reserve: DiskReserve,
    /// The owners' workspaces opened so far, in the order first used.
    /// Each is kept as long as the fleet runs (an owner's bots must share
    /// one [`LockManager`]), so a tool call can borrow its bot's for the
    /// whole call (`ToolContext::workspace`). Owners are few (the fleet
    /// file's users); a lookup walks the list.
    opened: OnceLock<Box<Slot>>,
}

/// An owner's workspace in [`Workspaces::opened`].
struct Slot {
    owner: UserId,
    workspace: Workspace,
    /// The owner opened after this one.
    next: OnceLock<Box<Slot>>,
}

impl std::fmt::Debug for Workspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspaces")
            .field("root", &self.root)
            .field(
                "opened",
                &self.opened().map(|s| &s.owner).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Workspaces {
    /// The owners' directories beneath `root`'s.
    pub fn new(root: Workspace) -> Self {
        Self {
            root: root.root,
            reserve: root.reserve,
            opened: OnceLock::new(),
        }
    }

    /// The fleet's root, which holds the owners' directories (no bot works
    /// in it).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace of `owner`'s bots, created on first use. When its
    /// directory cannot be used (see [`Workspaces`]) the host's log says
    /// why and the workspace refuses every path
    /// ([`WorkspaceError::Unavailable`]) until the host restarts.
    pub fn for_owner(&self, owner: &UserId) -> &Workspace {
        let mut cell = &self.opened;
        // opened before a race for the last place was lost: tried again
        // at the next place
        let mut spare: Option<Box<Slot>> = None;
        loop {
            let slot = match cell.get() {
                Some(slot) => slot,
                None => {
                    // the directory is made outside the cell's lock
                    let mut mine = Some(spare.take().unwrap_or_else(|| self.open(owner)));
                    let slot = cell.get_or_init(|| match mine.take() {
                        Some(slot) => slot,
                        None => self.open(owner),
                    });
                    spare = mine;
                    slot
                }
            };
            if slot.owner == *owner {
                return &slot.workspace;
            }
            cell = &slot.next;
        }
    }

    /// The workspaces opened so far.
    fn opened(&self) -> impl Iterator<Item = &Slot> {
        std::iter::successors(self.opened.get(), |s| s.next.get()).map(|s| &**s)
    }

    /// `owner`'s workspace, its directory made or checked now.
    fn open(&self, owner: &UserId) -> Box<Slot> {
        let dir = self.root.join(owner.as_str());
        let workspace = match prepare(&self.root, &dir, owner) {
            Ok(()) => Workspace {
                root: dir,
                locks: LockManager::new(),
                problem: None,
                reserve: self.reserve,
            },
            Err(why) => {
                tracing::error!(
                    "the workspace of user {owner}, {}, cannot be used: {why}; its bots' file \
                     tools and Shell refuse to run until it is fixed and the host restarted",
                    dir.display()
                );
                Workspace::unavailable(why)
            }
        };
        Box::new(Slot {
            owner: owner.clone(),
            workspace,
            next: OnceLock::new(),
        })
    }

    /// The entries of the root that are not the directory of one of
    /// `owners`, by name: what an older version left there, when all bots
    /// shared the root, which no bot sees any more.
    pub fn strays<'a>(
        &self,
        owners: impl IntoIterator<Item = &'a UserId>,
    ) -> std::io::Result<Vec<String>> {
        let owners: BTreeSet<&str> = owners.into_iter().map(UserId::as_str).collect();
        let mut strays = Vec::new();
        for entry in std::fs::read_dir(&self.root)? {
            let entry = entry?;
            let name = entry.file_name();
            // the entry's own type: a symlink is never an owner's directory
            let is_dir = entry.file_type()?.is_dir();
            match name.to_str() {
                Some(owner) if is_dir && owners.contains(owner) => {}
                Some(_) | None => strays.push(name.to_string_lossy().into_owned()),
            }
        }
        strays.sort();
        Ok(strays)
    }

    /// The warning for the host's start when the root holds [strays]
    /// (`None` when it holds only owners' directories): it names them and
    /// says where each owner's files are now. Nothing is moved: which
    /// owner a file of the shared root belongs to is for people to say.
    ///
    /// [strays]: Workspaces::strays
    pub fn stray_warning<'a>(
        &self,
        owners: impl IntoIterator<Item = &'a UserId>,
    ) -> Option<String> {
        let root = self.root.display();
        let strays = match self.strays(owners) {
            Ok(strays) if strays.is_empty() => return None,
            Ok(strays) => strays,
            Err(e) => {
                return Some(format!(
                    "WARNING: cannot list the workspace {root} to look for files an older \
                     version left there: {e}"
                ));
            }
        };
        // a directory named like a user id is most likely the workspace
        // of a user removed from the config (or renamed): theirs again if
        // the same id comes back, so it is never called an old version's
        let (former, old): (Vec<String>, Vec<String>) = strays.into_iter().partition(|s| {
            UserId::new(s.as_str()).is_ok()
                && std::fs::symlink_metadata(self.root.join(s)).is_ok_and(|m| m.is_dir())
        });
        let mut out = Vec::new();
        if !former.is_empty() {
            out.push(format!(
                "WARNING: the workspace {root} holds {} director{} named like a user id that \
                 is not a configured user's: {}. No bot sees it now; it is most likely the \
                 workspace of a user removed from the config or renamed. Keep it if that user \
                 may come back (the same id gets it back) (docs/operations.md, Users)",
                former.len(),
                if former.len() == 1 { "y" } else { "ies" },
                named(&former)
            ));
        }
        if !old.is_empty() {
            out.push(format!(
                "WARNING: the workspace {root} holds {} entr{} that no bot sees any more: {}. \
                 Each user's bots now work in their own directory, {root}/<user id>/, and the \
                 files at the root (left by an older version, when all bots shared them) were \
                 not moved; move what a user's bots should keep into that user's directory \
                 (docs/operations.md, Upgrading)",
                old.len(),
                if old.len() == 1 { "y" } else { "ies" },
                named(&old)
            ));
        }
        Some(out.join("\n"))
    }
}

/// The first [`STRAYS_NAMED`] of `strays`, quoted, and how many more.
fn named(strays: &[String]) -> String {
    let mut named: Vec<String> = strays
        .iter()
        .take(STRAYS_NAMED)
        .map(|s| format!("{s:?}"))
        .collect();
    if strays.len() > STRAYS_NAMED {
        named.push(format!("and {} more", strays.len() - STRAYS_NAMED));
    }
    named.join(", ")
}

/// Most entries [`Workspaces::stray_warning`] names.
const STRAYS_NAMED: usize = 20;

/// Makes `dir`, `owner`'s directory beneath `root`, private (0700), or
/// checks that it is a real directory of exactly that name; else says
/// what is wrong.
fn prepare(root: &Path, dir: &Path, owner: &UserId) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("its directory cannot be created: {e}")),
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| format!("its directory cannot be read: {e}"))?;
    if meta.file_type().is_symlink() {
        // followed, it would lead the owner's bots anywhere
        return Err("its directory is a symbolic link; it must be a real directory".into());
    }
    if !meta.is_dir() {
        return Err("a file is where its directory goes".into());
    }
    // a file system that ignores case finds `alice` for `Alice`: two users
    // would share one directory
    let exact = std::fs::read_dir(root)
        .map_err(|e| format!("the workspace root cannot be listed: {e}"))?
        .filter_map(std::result::Result::ok)
        .any(|entry| entry.file_name() == owner.as_str());
    if !exact {
        return Err(
            "its directory is that of another user whose id differs only in case (the file \
             system ignores case)"
                .into(),
        );
    }
    // a directory an older version made is private from now on too
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("its directory cannot be made private (mode 0700): {e}"))?;
    }
    // one the host may not write (another user's) failed at each Write
    // with a hint to choose another path, and at each Shell call
    writable(dir).map_err(|e| format!("its directory cannot be written by the host: {e}"))?;
    Ok(())
}

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
