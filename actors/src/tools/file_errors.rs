//! What Read, Write and Edit say when a path or the host fails them:
//! what is wrong, named, and what to do about it (a path outside the
//! workspace, a directory or a FIFO where a file was meant, a file in the
//! way of a directory, a symbolic-link loop, a full disk).

use std::path::Path;
use std::path::PathBuf;

use super::file_io::Blocker;
use super::file_io::FileError;
use super::file_io::LinkProblem;
use crate::tools::ToolError;
use crate::tools::workspace::WorkspaceError;

/// What to do about a symbolic-link loop, for a bot without Shell.
const NO_LOOP_HINT: &str = "use a path that does not go through the looping link";

/// What to do about a path outside the workspace.
pub(super) const OUTSIDE_HINT: &str =
    "use a path relative to the workspace root; files outside it cannot be reached";

/// What to do about a path a symbolic link leads out of the workspace.
const LINK_OUTSIDE_HINT: &str =
    "use a path that does not go through that link; files outside the workspace cannot be reached";

/// What to do when the workspace itself cannot be used: no path helps (the
/// hint said to use a path relative to the root, after the message had
/// said to tell the owner).
pub(in crate::tools) const UNUSABLE_HINT: &str = "nothing to retry now, no path works: tell the person \
     that your files cannot be reached until the host's operator fixes the workspace (the \
     host's log says what is wrong with it)";

/// A path the workspace refused, with what to do about it.
pub(super) fn workspace_error(e: &WorkspaceError) -> ToolError {
    let hint = match e {
        WorkspaceError::Unavailable { .. } => UNUSABLE_HINT,
        WorkspaceError::Outside { .. } | WorkspaceError::Invalid { .. } => OUTSIDE_HINT,
        WorkspaceError::LinkOutside { .. } => LINK_OUTSIDE_HINT,
    };
    ToolError::new(e.to_string(), hint)
}

/// When the host, not the path, is what failed a file tool or Shell: the
/// disk is full, its quota used up or read-only, or the host has no file
/// descriptor left. What is wrong, and what to do: nothing the model does
/// with the path helps, and trying again at once meets the same (the
/// hint was to check the path and try again).
pub(in crate::tools) fn host_failure(e: &std::io::Error) -> Option<(&'static str, &'static str)> {
    Some(match e.raw_os_error()? {
        libc::ENOSPC => (
            "the disk holding the workspace is full",
            "nothing to retry now: tell the person that the disk is full and that the host's \
             operator has to free space on it",
        ),
        libc::EDQUOT => (
            "the host's disk quota is used up",
            "nothing to retry now: tell the person that the host's disk quota is used up and \
             that its operator has to free space or raise the quota",
        ),
        libc::EROFS => (
            "the disk holding the workspace is read-only",
            "nothing to retry now: tell the person that the workspace's disk is read-only and \
             that the host's operator has to make it writable",
        ),
        libc::EMFILE | libc::ENFILE => (
            "the host has run out of file descriptors (too many connections or files open)",
            "nothing to retry now: tell the person that the host ran out of file descriptors; \
             it passes when connections close, or the host's operator raises its open-file \
             limit (`ulimit -n`)",
        ),
        _ => return None,
    })
}

pub(super) fn io_error(action: &str, shown: &str, e: &std::io::Error) -> ToolError {
    if let Some((cause, hint)) = host_failure(e) {
        return ToolError::new(format!("cannot {action} {shown}: {cause} ({e})"), hint);
    }
    if is_loop(e) {
        // a link made into a loop after the path was checked ([`looped`])
        return ToolError::new(
            format!(
                "cannot {action} {shown}: the path goes through a symbolic-link loop (a link \
                 that leads back to itself, directly or through other links), so it leads to \
                 no file ({e})"
            ),
            "find the link with Shell (`ls -l` on each directory of the path), then remove it \
             (`rm LINK`) or point it at a real file or directory, or use another path",
        )
        .or_without("Shell", NO_LOOP_HINT);
    }
    let error = |hint: &str| ToolError::new(format!("cannot {action} {shown}: {e}"), hint);
    match e.kind() {
        std::io::ErrorKind::NotFound => error(
            "check the path (list the directory with Shell `ls`), or Write the file first",
        )
        .or_without(
            "Shell",
            "check the path (ask the person which files there are), or Write the file first",
        ),
        std::io::ErrorKind::PermissionDenied => {
            error("the host may not touch this file; choose another path")
        }
        std::io::ErrorKind::IsADirectory => error("this is a directory; give a file path"),
        _ => error("check the path and try again"),
    }
}

pub(super) fn file_error(action: &str, shown: &str, e: &FileError) -> ToolError {
    match e {
        FileError::Directory if action == "read" => ToolError::new(
            format!("{shown} is a directory"),
            "list it with Shell `ls`, then Read a file in it",
        )
        .or_without(
            "Shell",
            format!("give the path of a file in it, such as `{shown}/notes.md`"),
        ),
        FileError::Directory => ToolError::new(
            format!("{shown} is a directory, not a file"),
            format!("give the path of a file, such as `{shown}/notes.md`"),
        ),
        FileError::Special(kind) => ToolError::new(
            format!("{shown} is {kind}, not a regular file"),
            "Read, Write and Edit work on regular files only; choose another path",
        ),
        FileError::Outside => ToolError::new(
            WorkspaceError::Outside { path: shown.into() }.to_string(),
            OUTSIDE_HINT,
        ),
        FileError::BrokenLink(target) => ToolError::new(
            format!(
                "cannot {action} {shown}: it is a symbolic link to {}, which does not exist; \
                 it is not replaced with a file",
                target.display()
            ),
            format!(
                "write to the file the link should lead to (inside the workspace), or remove \
                 the link first (Shell `rm {shown}`) to put a file in its place"
            ),
        ),
        FileError::Io(e) => io_error(action, shown, e),
    }
}

/// Why Write cannot make the directories of `shown`: a file or a link
/// stands where one of them goes.
pub(super) fn blocked(root: &Path, shown: &str, blocker: Blocker) -> ToolError {
    let rel = |p: &Path| {
        p.strip_prefix(root)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    let cannot = format!("cannot create the directory of {shown}");
    match blocker {
        Blocker::File(at) => {
            let at = rel(&at);
            ToolError::new(
                format!("{cannot}: {at} is a file, not a directory"),
                format!("choose a path that does not go through {at}, or move {at} away first"),
            )
        }
        Blocker::Link {
            at,
            target,
            problem,
        } => {
            let (at, target) = (rel(&at), target.display().to_string());
            let (why, hint) = match problem {
                LinkProblem::Outside => (
                    "which is outside the workspace",
                    format!("use a path inside the workspace that does not go through {at}"),
                ),
                LinkProblem::Missing => (
                    "which does not exist",
                    format!("create the directory {at} leads to first, or remove the link {at}"),
                ),
                LinkProblem::NotADirectory => (
                    "which is not a directory",
                    format!("choose a path that does not go through {at}"),
                ),
            };
            ToolError::new(
                format!("{cannot}: {at} is a symbolic link to {target}, {why}"),
                hint,
            )
        }
    }
}

pub(super) fn not_text(shown: &str, line: Option<u64>) -> ToolError {
    let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
    ToolError::new(
        format!(
            "{shown} is not a text file: it has bytes that are not UTF-8 text, or NUL bytes{at}"
        ),
        "inspect binary files with Shell (e.g. `file` or `xxd | head`)",
    )
    .or_without("Shell", "Read works on text files only; leave this one to a bot or person that can inspect binary files")
}

/// Whether `e` is the system's "too many levels of symbolic links"
/// (`ELOOP`): a link on the way leads back to itself.
fn is_loop(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// The refusal of `path` (absolute, beneath `root`) when a symbolic link
/// on its way loops: the first such link named, with what it points to,
/// and how to fix it. The system only says "too many levels of symbolic
/// links" (`ELOOP`), which names neither the link nor the way out. `None`
/// when the path does not loop.
pub(super) fn looped(action: &str, root: &Path, path: &Path) -> Option<ToolError> {
    match std::fs::metadata(path) {
        Err(e) if is_loop(&e) => {}
        Ok(_) | Err(_) => return None,
    }
    let shown = relative(root, path);
    let Some(link) = first_loop(root, path) else {
        return Some(
            ToolError::new(
                format!(
                    "cannot {action} {shown}: the path goes through a symbolic-link loop (a link \
                 that leads back to itself, directly or through other links), so it leads to \
                 no file"
                ),
                "find the link with Shell (`ls -l` on each directory of the path), then remove it \
             (`rm LINK`) or point it at a real file or directory, or use another path",
            )
            .or_without("Shell", NO_LOOP_HINT),
        );
    };
    let at = relative(root, &link);
    let to = std::fs::read_link(&link)
        .map(|t| format!(" (to {})", t.display()))
        .unwrap_or_default();
    let through = if at == shown {
        format!("{shown} is a symbolic link{to}")
    } else {
        format!("{shown} goes through {at}, a symbolic link{to}")
    };
    Some(
        ToolError::new(
            format!(
                "cannot {action} {shown}: {through} that leads back to itself, directly or through \
             other links (a symbolic-link loop), so the path leads to no file"
            ),
            format!(
                "remove the link with Shell (`rm {at}`) or point it at a real file or directory \
             (`ln -sfn TARGET {at}`), or use a path that does not go through {at}"
            ),
        )
        .or_without("Shell", format!("use a path that does not go through {at}")),
    )
}

/// The first symbolic link on the way from `root` down to `path` that
/// cannot be followed because it loops.
fn first_loop(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    for part in rel.components() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).ok()?;
        if !meta.file_type().is_symlink() {
            continue;
        }
        match std::fs::metadata(&at) {
            Err(e) if is_loop(&e) => return Some(at),
            Ok(_) | Err(_) => {}
        }
    }
    None
}

/// `path` as messages show it: relative to `root`, which is `.`.
fn relative(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
#[path = "file_errors_tests.rs"]
mod tests;
