//! The notes about the data directory and the workspace: a new data
//! directory, and a workspace moved without its files. A start says them
//! from the store it opened; `botfleet check-config` says the same ones
//! from the files as they are ([`check_notes`]), so a wrong
//! `host.data_dir` or `host.workspace` shows before the start.

use std::path::Path;
use std::path::PathBuf;

use botfleet_memory::StoreHistory;

use crate::config::HostConfig;

/// The store's file in a data directory.
pub(super) const STORE_FILE: &str = "fleet.db";

/// The data directory of `host` and its workspace (`host.workspace`, by
/// default `<data_dir>/workspace`), as a start uses them.
pub(super) fn data_and_workspace(host: &HostConfig) -> (PathBuf, PathBuf) {
    let data_dir = host.data_dir.clone();
    let workspace = host
        .workspace
        .clone()
        .unwrap_or_else(|| default_workspace(&data_dir));
    (data_dir, workspace)
}

/// The workspace of a data directory without `host.workspace`.
fn default_workspace(data_dir: &Path) -> PathBuf {
    data_dir.join("workspace")
}

/// The notes about `data_dir` and `workspace` whose store remembers
/// `history`: that the data directory is new (a start creates its store:
/// said once), and the warning of [`moved_workspace_warning`] against the
/// workspace the files were last seen in (an older store remembers none:
/// it was the default one).
pub(super) fn data_dir_notes(
    data_dir: &Path,
    workspace: &Path,
    history: &StoreHistory,
) -> Vec<String> {
    let mut notes = Vec::new();
    if history.created {
        // the whole path: `./data` is the one a wrong current directory
        // makes (QA, 2026-12-04: the note hid where it was)
        let shown = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        notes.push(format!(
            "new data directory {}: starting with no history",
            shown.display()
        ));
    }
    let previous = match &history.previous_workspace {
        Some(p) => Some(PathBuf::from(p)),
        None => (!history.created).then(|| default_workspace(data_dir)),
    };
    notes.extend(previous.and_then(|old| moved_workspace_warning(&old, workspace)));
    notes.extend(open_data_dir_warning(data_dir));
    notes
}

/// A warning when other local users may read `data_dir` (its mode gives
/// the group or others any access): the store holds every transcript and
/// the secrets people saved through the API, unencrypted, and SQLite
/// makes its files readable by all (QA: a data directory of 0755 let any
/// account read `user_secrets`). A new one is made 0700; one made before,
/// or by hand, is told, not changed.
fn open_data_dir_warning(data_dir: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(data_dir).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "WARNING: other local users may read the data directory {} (mode {mode:o}): its store \
             holds every transcript and the secrets people saved, unencrypted; make it private \
             with `chmod 700 {}`",
            data_dir.display(),
            data_dir.display()
        )
    })
}

/// `botfleet check-config`'s notes about the data directory and the
/// workspace of `host`: those a start would give now. A store that cannot
/// be read is a warning of its own (the start would say why it cannot
/// open it).
pub fn check_notes(host: &HostConfig) -> Vec<String> {
    let (data_dir, workspace) = data_and_workspace(host);
    // read without a lock, a migration or a file created: a host may run
    match botfleet_memory::peek_store(&data_dir.join(STORE_FILE)) {
        Ok(history) => data_dir_notes(&data_dir, &workspace, &history),
        Err(e) => vec![format!(
            "WARNING: cannot read the store {}: {e}; whether the data directory is new or its \
             workspace moved is not checked",
            data_dir.join(STORE_FILE).display()
        )],
    }
}

/// Directory entries [`holds_files`] looks at, at most, before it takes
/// a tree of empty directories that large for one that holds files.
const MAX_ENTRIES_LOOKED_AT: usize = 10_000;

/// Whether `dir` holds a file (or anything but a directory) at any depth.
/// Empty directories do not count: the first message to a moved
/// workspace makes `<user id>/` there, and the warning stopped while
/// every file was still in the old one (QA, 2026-12-04).
pub(super) fn holds_files(dir: &Path) -> bool {
    let mut pending = vec![dir.to_path_buf()];
    let mut looked_at = 0usize;
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            looked_at += 1;
            if looked_at > MAX_ENTRIES_LOOKED_AT {
                return true;
            }
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(entry.path()),
                _ => return true,
            }
        }
    }
    false
}

/// A warning when the workspace the bots' files were last seen in, `old`,
/// still holds them while the configured one, `new`, is empty or missing
/// (`host.workspace` changed, the files not moved). The same directory
/// never warns: it cannot both hold files and not.
pub(super) fn moved_workspace_warning(old: &Path, new: &Path) -> Option<String> {
    if holds_files(new) || !holds_files(old) {
        return None;
    }
    // absolute, so the command works from any directory; and a copy
    // into the new directory, made or not, with what a first message made
    // there already (`mv old/* new/` renamed a user's directory to `new`
    // when it was missing, failed on one made since, and skipped the
    // dotfiles: QA)
    let new = std::path::absolute(new).unwrap_or_else(|_| new.to_path_buf());
    let old = std::path::absolute(old).unwrap_or_else(|_| old.to_path_buf());
    Some(format!(
        "WARNING: the workspace {} is empty, but {}, where the bots' files were before, \
         still holds them: no bot sees them now. Stop the host and copy them over \
         (`mkdir -p {new} && cp -a {old}/. {new}/`, then delete {old} once the bots find \
         their files), or set `host.workspace` back (docs/operations.md, Upgrading)",
        new.display(),
        old.display(),
        new = crate::shell_words::shell_quote(&new.display().to_string()),
        old = crate::shell_words::shell_quote(&old.display().to_string()),
    ))
}
