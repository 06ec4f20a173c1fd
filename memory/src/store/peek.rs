//! What a data directory's store remembers, read without opening it as a
//! host does (`botfleet check-config`, which may run while a host runs on
//! it): no lock is taken and nothing is migrated or created.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::OpenFlags;
use rusqlite::OptionalExtension;

use super::writer::get_meta;
use crate::error::Result;
use crate::record::BotRecord;

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

/// Reads the store at `db` read-only ([`open_read_only`]).
pub fn peek(db: &Path) -> Result<StoreHistory> {
    // a missing or empty file where the directory has run before is lost
    // history, as the start says ([`super::check_history`]), not a new
    // directory (QA, 2026-12-05: check-config said "starting with no
    // history" and the start then refused it)
    super::check_history(db)?;
    let Some(conn) = open_read_only(db)? else {
        return Ok(StoreHistory {
            created: true,
            previous_workspace: None,
        });
    };
    // what the start refuses, so is it here (audit: `check-config` said
    // "ok" of a database a newer botfleet migrated, and `run` refused it)
    super::schema::refuse_foreign(&conn, db)?;
    super::schema::refuse_too_new(&conn)?;
    // a store too old to have a meta table remembers nothing
    let previous_workspace = if has_table(&conn, "meta")? {
        get_meta(&conn, "workspace")?
    } else {
        None
    };
    Ok(StoreHistory {
        created: false,
        previous_workspace,
    })
}

/// The error an open of the store at `db` would meet because another
/// process holds it ([`crate::StoreError::InUse`]), `None` when none does:
/// its lock taken and let go at once, nothing else read or changed (a
/// start that must refuse for another reason says this one first when it
/// applies).
pub fn peek_in_use(db: &Path) -> Option<crate::StoreError> {
    let mut lock = match super::lock::StoreLock::acquire(db) {
        Ok(lock) => lock,
        Err(e @ crate::StoreError::InUse { .. }) => return Some(e),
        Err(_) => return None,
    };
    // the lock on the database itself, which a host holds too (its lock
    // file may have been deleted); one that is not there is nobody's
    if db.exists()
        && let Err(e @ crate::StoreError::InUse { .. }) = lock.lock_database(db)
    {
        return Some(e);
    }
    None
}

/// The bots the store at `db` holds, read as [`peek`] reads it (no lock,
/// nothing created or migrated): none when there is no store yet.
/// `botfleet check-config` checks the fleet file's bots against those
/// bots made (`botfleet_actors::check_fleet_file_bots`), as a start does.
pub fn peek_bots(db: &Path) -> Result<Vec<BotRecord>> {
    let Some(conn) = open_read_only(db)? else {
        return Ok(Vec::new());
    };
    if !has_table(&conn, "bots")? {
        return Ok(Vec::new());
    }
    super::reader::list_bots(&conn, None)
}

/// Of `ids`, those a room of the store at `db` holds, ignoring case
/// (`(id asked, the room's id)` each), read as [`peek`] reads it: none
/// when there is no store, or no rooms table yet. `botfleet check-config`
/// warns of a fleet file's bot with a room's id, as a start does.
pub fn peek_rooms_holding(db: &Path, ids: &[String]) -> Result<Vec<(String, String)>> {
    let Some(conn) = open_read_only(db)? else {
        return Ok(Vec::new());
    };
    if !has_table(&conn, "rooms")? {
        return Ok(Vec::new());
    }
    super::rooms::rooms_holding(&conn, ids)
}

/// Every room not closed of the store at `db`, read as [`peek`] reads
/// it: none when there is no store, or no rooms table yet. `botfleet
/// check-config` checks their members' names as a start does.
pub fn peek_open_rooms(db: &Path) -> Result<Vec<crate::record::RoomRecord>> {
    let Some(conn) = open_read_only(db)? else {
        return Ok(Vec::new());
    };
    if !has_table(&conn, "rooms")? {
        return Ok(Vec::new());
    }
    super::rooms::open_rooms(&conn)
}

/// The store at `db` opened read-only, `None` when there is none (no file,
/// or an empty one). Its WAL is read when there is one (a host is running,
/// or was killed); without one the database file is all there is, opened
/// as immutable so that SQLite leaves no `-wal` or `-shm` file behind.
fn open_read_only(db: &Path) -> Result<Option<Connection>> {
    if !std::fs::metadata(db).is_ok_and(|m| m.len() > 0) {
        return Ok(None);
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
    Ok(Some(conn))
}

fn has_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::store::Store;
    use crate::store::StoreOptions;

    /// What a SIGKILL right after a new store was made leaves (tester H1,
    /// round 22, suspected "new data directory" said again on the restart):
    /// the store's files copied while it is open, before any checkpoint.
    /// The database file is never empty then: SQLite writes its first page
    /// to it when the store turns WAL on, before the schema or any row goes
    /// to the WAL. So "an empty `fleet.db` is a new store" stays true (and
    /// SQLite itself drops a WAL beside an empty database file: no history
    /// could come from one), and both the peek and an open read the copy as
    /// a store with history.
    #[tokio::test]
    async fn a_store_copied_before_its_first_checkpoint_is_not_new() {
        let dir = tempfile::tempdir().unwrap();
        let (live, copy) = (dir.path().join("live"), dir.path().join("copy"));
        std::fs::create_dir_all(&copy).unwrap();
        let store = Store::open(StoreOptions {
            workspace: Some("/old/ws".into()),
            ..StoreOptions::new(live.join("fleet.db"))
        })
        .unwrap();
        assert!(store.was_created());
        for name in ["fleet.db", "fleet.db-wal"] {
            std::fs::copy(live.join(name), copy.join(name)).unwrap();
        }
        let db = copy.join("fleet.db");
        assert!(std::fs::metadata(&db).unwrap().len() > 0);
        assert!(std::fs::metadata(copy.join("fleet.db-wal")).unwrap().len() > 0);
        let seen = peek(&db).unwrap();
        assert!(!seen.created, "{seen:?}");
        assert_eq!(seen.previous_workspace.as_deref(), Some("/old/ws"));
        let reopened = Store::open(StoreOptions::new(&db)).unwrap();
        assert!(!reopened.was_created());
        assert_eq!(reopened.previous_workspace(), Some("/old/ws"));
        reopened.close().await;
        store.close().await;
    }
}
