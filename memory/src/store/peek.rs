//! What a data directory's store remembers, read without opening it as a
//! host does (`botfleet check-config`, which may run while a host runs on
//! it): no lock is taken and nothing is migrated or created.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::OpenFlags;
use rusqlite::OptionalExtension;

use super::writer::get_meta;
use crate::error::Result;

/// What a store said of itself before it was opened: as
/// [`super::Store::was_created`] and [`super::Store::previous_workspace`]
/// report it after an open, or as [`peek`] reads it without one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHistory {
    /// No store was there (or an empty file): a start begins with no
    /// history.
    pub created: bool,
    /// The workspace the bots' files were last seen in, when the store
    /// remembers one (`StoreOptions::workspace`).
    pub previous_workspace: Option<String>,
}

/// Reads the store at `db` read-only. Its WAL is read when there is one
/// (a host is running, or was killed); without one the database file is
/// all there is, opened as immutable so that SQLite leaves no `-wal` or
/// `-shm` file behind.
pub fn peek(db: &Path) -> Result<StoreHistory> {
    if !std::fs::metadata(db).is_ok_and(|m| m.len() > 0) {
        return Ok(StoreHistory {
            created: true,
            previous_workspace: None,
        });
    }
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let conn = if Path::new(&wal).exists() {
        Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?
    } else {
        Connection::open_with_flags(
            format!("file:{}?immutable=1", uri_path(db)),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )?
    };
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    // a store too old to have a meta table remembers nothing
    let has_meta = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let previous_workspace = if has_meta {
        get_meta(&conn, "workspace")?
    } else {
        None
    };
    Ok(StoreHistory {
        created: false,
        previous_workspace,
    })
}

/// `path` written for a `file:` URI: every byte but unreserved ones and
/// `/` percent-encoded (a `?`, `#` or `%` in a directory's name).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::new();
    for &b in absolute.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
