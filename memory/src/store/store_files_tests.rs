//! The store's files under it: deleted or replaced while it runs, locked
//! through a deleted lock file, damaged, in a directory it may not write.

use pretty_assertions::assert_eq;

use super::*;
use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitRequest;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn open(dir: &tempfile::TempDir) -> Result<Store> {
    Store::open(StoreOptions::new(dir.path().join("fleet.db")))
}

/// A message from alice to bot `r`, with key `nonce`.
fn admit(nonce: &str, text: &str) -> Mutation {
    let key = SessionKey {
        bot: BotId::new("r").unwrap_or_else(|e| panic!("{e}")),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    Mutation::Admit(Box::new(AdmitRequest {
        source: "user:alice".into(),
        nonce: nonce.into(),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([text.as_bytes()]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: "alice".into(),
            turn: None,
            kind: EntryKind::UserMessage { text: text.into() },
        },
        session: key,
        owner: UserId::new("alice").unwrap_or_else(|e| panic!("{e}")),
        priority: Priority::UserDm,
    }))
}

/// A write after the database was deleted is refused, not committed into
/// the unlinked file; so is every one after it.
#[tokio::test]
async fn writes_after_the_database_is_deleted_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("a", "kept")]).await?;
    std::fs::remove_file(dir.path().join("fleet.db"))?;
    for nonce in ["b", "c"] {
        match store.write(vec![admit(nonce, "lost")]).await {
            Err(StoreError::FileGone { path, what }) => {
                assert!(path.ends_with("fleet.db"), "{path}");
                assert_eq!(what, "was deleted");
            }
            other => panic!("expected FileGone, got {other:?}"),
        }
    }
    store.close().await;
    Ok(())
}

/// A database replaced by another file (a copy put in its place) is told
/// from a deleted one.
#[tokio::test]
async fn writes_after_the_database_is_replaced_are_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("a", "kept")]).await?;
    let db = dir.path().join("fleet.db");
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy)?;
    std::fs::rename(&copy, &db)?;
    match store.write(vec![admit("b", "lost")]).await {
        Err(StoreError::FileGone { what, .. }) => {
            assert_eq!(what, "was replaced by another file")
        }
        other => panic!("expected FileGone, got {other:?}"),
    }
    store.close().await;
    Ok(())
}

/// A second open is refused even when the lock file was deleted under
/// the first (it then locks a new file at the path).
#[tokio::test]
async fn a_deleted_lock_file_does_not_let_a_second_store_in() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    std::fs::remove_file(dir.path().join("fleet.db.lock"))?;
    match open(&dir) {
        Err(StoreError::InUse { path }) => assert!(path.ends_with("fleet.db"), "{path}"),
        other => panic!("expected InUse, got {other:?}"),
    }
    store.close().await;
    let again = open(&dir)?;
    again.close().await;
    Ok(())
}

/// A data directory the store may not create files in is named as such.
/// (`/sys` refuses new files even to root, which a `chmod` would not.)
#[cfg(target_os = "linux")]
#[test]
fn a_directory_the_store_cannot_write_is_named() {
    let sys = Path::new("/sys");
    if !sys.is_dir() {
        return;
    }
    match Store::open(StoreOptions::new(sys.join("fleet.db"))) {
        Err(e @ StoreError::NotWritable { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("the data directory /sys must be writable"),
                "{message}"
            );
        }
        other => panic!("expected NotWritable, got {other:?}"),
    }
}

/// A damaged page met by a read is a `Damaged` error (the API's storage
/// error, which says to restore a backup), not an unexplained SQLite one.
#[tokio::test]
async fn a_damaged_page_is_told_as_damage() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let text = "x".repeat(3000);
    for i in 0..200 {
        store.write(vec![admit(&format!("k{i}"), &text)]).await?;
    }
    store.close().await;
    drop(store);
    // the second half of the file (the entries' pages) overwritten
    let db = dir.path().join("fleet.db");
    let mut bytes = std::fs::read(&db)?;
    let half = (bytes.len() / 2) / 4096 * 4096;
    for b in &mut bytes[half..] {
        *b = 0xA5;
    }
    std::fs::write(&db, bytes)?;
    let result = open(&dir).and_then(|store| {
        let counted = store.read_blocking(|c| reader::count(c, "entries"));
        drop(store);
        counted
    });
    match result {
        Err(e @ StoreError::Damaged { .. }) => {
            assert!(e.to_string().contains("Backups and restore"), "{e}")
        }
        other => panic!("expected Damaged, got {other:?}"),
    }
    Ok(())
}

/// The checkpoint thread never makes a database. It connects once its
/// thread runs, which under load can be after the file was deleted: it
/// then made an empty `fleet.db`, and the writer told the deletion as the
/// database "replaced by another file" (a flaky `was deleted` above).
#[test]
fn the_checkpointer_does_not_create_a_deleted_database() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("fleet.db");
    let checkpoints = checkpointer::Checkpoints {
        path: path.clone(),
        period: std::time::Duration::from_secs(1),
        restart_frames: 1,
        catch_up: std::sync::Arc::default(),
        stats: std::sync::Arc::default(),
    };
    assert!(checkpoints.connect().is_err());
    assert!(!path.exists(), "the checkpointer made {}", path.display());
}

/// Another program's SQLite database where the store's file goes is
/// refused, and left as it was: no write-ahead log turned on, no tables
/// added, no version set (QA, 2026-12-04: a start took it over). A new,
/// empty file still opens.
#[test]
fn another_programs_database_is_refused_and_left_alone() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("fleet.db");
    {
        let conn = rusqlite::Connection::open(&path)?;
        conn.execute_batch(
            "CREATE TABLE invoices(id INTEGER PRIMARY KEY, amount);
             INSERT INTO invoices(amount) VALUES (42);",
        )?;
    }
    let before = std::fs::read(&path)?;
    match open(&dir) {
        Err(e @ StoreError::Foreign { .. }) => {
            let said = e.to_string();
            assert!(said.contains("not a botfleet store"), "{said}");
            assert!(said.contains("`invoices`"), "{said}");
            assert!(said.contains("data_dir"), "{said}");
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("another program's database was opened as a store"),
    }
    assert_eq!(std::fs::read(&path)?, before, "the file was changed");
    assert!(!dir.path().join("fleet.db-wal").exists());

    let fresh = tempfile::tempdir()?;
    std::fs::write(fresh.path().join("fleet.db"), b"")?;
    open(&fresh)?;
    Ok(())
}

/// An open that was to create the store and failed leaves none of the
/// new store's files (here its WAL cannot be made: a directory holds its
/// name), so the next start, with the cause gone, is a new data
/// directory again (QA, 2026-12-04: a start on a nearly full disk left
/// fleet.db behind, and the next one no longer said "new").
#[test]
fn a_new_store_that_fails_to_open_leaves_none_of_its_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let wal = dir.path().join("fleet.db-wal");
    std::fs::create_dir(&wal)?;
    std::fs::write(wal.join("x"), b"")?;
    assert!(open(&dir).is_err(), "a store opened without its WAL");
    assert!(!dir.path().join("fleet.db").exists());
    assert!(!dir.path().join("fleet.db.generation").exists());
    std::fs::remove_dir_all(&wal)?;
    let store = open(&dir)?;
    assert!(store.was_created());
    Ok(())
}
