//! "Everything but these paths", in rules that can only grant.
//!
//! Landlock denies whatever its rules do not grant, and a rule on a
//! directory grants everything beneath it, so "read anywhere except the
//! host's files" cannot be one rule on `/`. It is built instead by walking
//! from `/` down to each hidden path: at each directory on the way, every
//! entry is granted except the one that leads on to a hidden path (that
//! one is walked in turn) and the hidden path itself. The directories on
//! the way are not granted as such: they cannot be listed (`ls /` fails
//! when a hidden path is directly under `/`), though what they hold can
//! be read by name.
//!
//! The walk lists the directories when the sandbox is set up, so it is a
//! snapshot: an entry made later in one of them (a file created in `/tmp`
//! after the command started, when the data directory is under `/tmp`) is
//! not readable by that command. Each command gets a fresh snapshot.
//!
//! `/dev` is never granted whole (a raw disk would hand the hidden files'
//! blocks to a root host): it is walked like a hidden path's parent and
//! only [`DEVICES`] are granted, by the caller, with write access too.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

/// The devices of `/dev` a command may read, write and use (ioctl): what
/// ordinary programs open (`> /dev/null`, random numbers). Not `/dev/tty`:
/// the host's terminal is not the command's.
pub(crate) const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// The directory of [`DEVICES`], never granted whole.
const DEV: &str = "/dev";

/// The paths to grant read (and execute) access beneath so that
/// everything is readable but `hidden` (absolute, symbolic links resolved)
/// and `/dev`: the entries of each directory on the way from `/` to a
/// hidden path, except those on the way and the hidden paths. `list` gives
/// the names in a directory; a directory it cannot list grants nothing
/// (fails closed). Each path comes once, in order.
pub(crate) fn read_grants(
    hidden: &[PathBuf],
    mut list: impl FnMut(&Path) -> std::io::Result<Vec<OsString>>,
) -> Vec<PathBuf> {
    let hidden = minimal(hidden);
    let blocked: Vec<PathBuf> = hidden
        .iter()
        .cloned()
        .chain(std::iter::once(PathBuf::from(DEV)))
        .collect();
    // the directories on the way to a blocked path, but none inside a
    // hidden one (/dev under a hidden `/` is not walked)
    let walk: BTreeSet<PathBuf> = blocked
        .iter()
        .flat_map(|b| b.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|dir| !hidden.iter().any(|h| dir.starts_with(h)))
        .collect();
    let mut grants = Vec::new();
    for dir in &walk {
        let Ok(names) = list(dir) else {
            continue;
        };
        let mut names = names;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            if walk.contains(&path) || blocked.contains(&path) {
                continue;
            }
            grants.push(path);
        }
    }
    grants
}

/// The hidden paths none of which is inside another (hiding a directory
/// hides what it holds), sorted.
fn minimal(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let all: BTreeSet<&PathBuf> = hidden.iter().collect();
    all.iter()
        .filter(|h| !all.iter().any(|other| other != *h && h.starts_with(other)))
        .map(|h| (*h).clone())
        .collect()
}

/// A hidden path strictly inside a writable directory, as `(writable,
/// hidden)`: a grant on a directory covers all beneath it, so that path
/// could not be hidden. A writable directory that is itself hidden (a
/// bot's workspace that is the fleet's workspace root) is granted: the
/// grant is what the command needs.
pub(crate) fn hidden_inside_writable<'a>(
    writable: &'a [PathBuf],
    hidden: &'a [PathBuf],
) -> Option<(&'a Path, &'a Path)> {
    writable.iter().find_map(|w| {
        hidden
            .iter()
            .find(|h| h.starts_with(w) && *h != w)
            .map(|h| (w.as_path(), h.as_path()))
    })
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
