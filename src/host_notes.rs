//! The start's notes about the data directory and the workspace: a new
//! data directory, and a workspace moved without its files.

use std::path::Path;

/// Whether `dir` is a directory with anything in it.
pub(super) fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// A warning when the workspace the bots' files were last seen in, `old`,
/// still holds them while the configured one, `new`, is empty or missing
/// (`host.workspace` changed, the files not moved). The same directory
/// never warns: it cannot both hold files and not.
pub(super) fn moved_workspace_warning(old: &Path, new: &Path) -> Option<String> {
    if holds_files(new) || !holds_files(old) {
        return None;
    }
    let new = std::path::absolute(new).unwrap_or_else(|_| new.to_path_buf());
    Some(format!(
        "WARNING: the workspace {} is empty, but {}, where the bots' files were before, \
         still holds them: no bot sees them now. Stop the host and move them \
         (`mv {}/* {}/`), or set `host.workspace` back (docs/operations.md, Upgrading)",
        new.display(),
        old.display(),
        old.display(),
        new.display()
    ))
}
