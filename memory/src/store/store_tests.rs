use pretty_assertions::assert_eq;

use super::*;
use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::TurnId;
use crate::ids::UserId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::BotRecord;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn open(dir: &tempfile::TempDir) -> Result<Store> {
    Store::open(StoreOptions::new(dir.path().join("fleet.db")))
}

/// The key of alice's DM with bot `r`, where [`admit`] writes.
fn alice_dm() -> SessionKey {
    SessionKey {
        bot: BotId::new("r").unwrap_or_else(|e| panic!("{e}")),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
}

fn admit(nonce: &str, text: &str, nonce_time_ms: Option<i64>) -> Mutation {
    let key = alice_dm();
    Mutation::Admit(Box::new(AdmitRequest {
        source: "user:alice".into(),
        nonce: nonce.into(),
        nonce_time_ms,
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

fn outcome(results: Vec<MutationResult>) -> AdmitOutcome {
    match results.into_iter().next() {
        Some(MutationResult::Admitted(o)) => o,
        other => panic!("expected an admission, got {other:?}"),
    }
}

#[tokio::test]
async fn ledger_answers_accepted_duplicate_conflict() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let first = outcome(store.write(vec![admit("n1", "hello", None)]).await?);
    let AdmitOutcome::Accepted(rec) = first.clone() else {
        panic!("{first:?}")
    };
    assert_eq!(rec.seq, 1);
    let again = outcome(store.write(vec![admit("n1", "hello", None)]).await?);
    assert_eq!(again, AdmitOutcome::Duplicate(rec.clone()));
    let other = outcome(store.write(vec![admit("n1", "bye", None)]).await?);
    assert_eq!(other, AdmitOutcome::Conflict(rec.clone()));
    // one entry, one pending inbox item
    let entries = store.entries_after(rec.session, 0, 100).await?;
    assert_eq!(entries.len(), 1);
    let inbox = store.pending_inbox(&rec.bot).await?;
    assert_eq!(inbox.len(), 1);
    Ok(())
}

#[tokio::test]
async fn seqs_strictly_increase_under_concurrency() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let mut handles = Vec::new();
    for i in 0..200 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            store
                .write(vec![admit(&format!("n{i}"), &format!("m{i}"), None)])
                .await
        }));
    }
    for h in handles {
        h.await??;
    }
    let bot = BotId::new("r")?;
    let session = SessionKey {
        bot,
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id();
    let entries = store.entries_after(session, 0, 1000).await?;
    let seqs: Vec<i64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test]
async fn a_failing_batch_rolls_back_alone() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let good = store.clone();
    let a = tokio::spawn(async move { good.write(vec![admit("a", "a", None)]).await });
    // second mutation fails (turn does not exist): the admission in the same
    // batch must be rolled back with it
    let bad = store
        .write(vec![
            admit("b", "b", None),
            Mutation::Checkpoint {
                turn: TurnId::new_v7(),
                checkpoint: serde_json::json!({}),
            },
        ])
        .await;
    assert!(matches!(bad, Err(StoreError::NotFound { .. })), "{bad:?}");
    a.await??;
    let c = outcome(store.write(vec![admit("c", "c", None)]).await?);
    let AdmitOutcome::Accepted(rec) = c else {
        panic!()
    };
    let texts: Vec<String> = store
        .entries_after(rec.session, 0, 10)
        .await?
        .iter()
        .map(|e| e.kind.text().to_owned())
        .collect();
    assert_eq!(texts, vec!["a".to_string(), "c".to_string()]);
    Ok(())
}

/// A database file deleted or emptied where the directory has run before
/// is lost history, not a restore: refused, naming both ways on, and
/// nothing is written in its place.
#[tokio::test]
async fn a_missing_or_empty_database_with_history_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("fleet.db");
    {
        let store = open(&dir)?;
        store.write(vec![admit("old", "x", Some(1_000))]).await?;
        store.close().await;
    }
    let _ = std::fs::remove_file(dir.path().join("fleet.db-wal"));
    let _ = std::fs::remove_file(dir.path().join("fleet.db-shm"));
    let refused = |dir: &tempfile::TempDir| match open(dir) {
        Err(StoreError::HistoryGone {
            state, generation, ..
        }) => (state, generation),
        other => panic!("{:?}", other.map(|_| "opened")),
    };
    std::fs::remove_file(&db)?;
    assert_eq!(refused(&dir), ("missing", Some(1)));
    assert!(!db.exists(), "nothing is written in its place");
    std::fs::write(&db, "")?;
    assert_eq!(refused(&dir), ("empty (0 bytes)", Some(1)));
    assert_eq!(std::fs::metadata(&db)?.len(), 0);
    // a generation file emptied or damaged is history too (QA, 2026-12-04)
    let sidecar = dir.path().join("fleet.db.generation");
    for damaged in ["", "x"] {
        std::fs::write(&sidecar, damaged)?;
        assert_eq!(refused(&dir), ("empty (0 bytes)", None));
        assert_eq!(std::fs::read_to_string(&sidecar)?, damaged);
    }
    // starting over on purpose: the generation file removed
    std::fs::remove_file(dir.path().join("fleet.db.generation"))?;
    let store = open(&dir)?;
    assert!(!store.was_restored());
    Ok(())
}

#[tokio::test]
async fn restored_snapshot_makes_old_keys_unknown() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("fleet.db");
    {
        let store = open(&dir)?;
        store.write(vec![admit("old", "x", Some(1_000))]).await?;
        store.close().await;
    }
    // snapshot the database, run once more, then restore the snapshot
    let snapshot = dir.path().join("snap.db");
    std::fs::copy(&db, &snapshot)?;
    {
        let store = open(&dir)?;
        store.write(vec![admit("later", "y", Some(2_000))]).await?;
        store.close().await;
    }
    std::fs::copy(&snapshot, &db)?;
    let _ = std::fs::remove_file(dir.path().join("fleet.db-wal"));
    let _ = std::fs::remove_file(dir.path().join("fleet.db-shm"));
    let store = open(&dir)?;
    assert!(store.was_restored());
    // the key admitted after the snapshot cannot be vouched for
    let o = outcome(store.write(vec![admit("later", "y", Some(2_000))]).await?);
    assert!(matches!(o, AdmitOutcome::Unknown { .. }), "{o:?}");
    // the key the snapshot holds is still a duplicate
    let o = outcome(store.write(vec![admit("old", "x", Some(1_000))]).await?);
    assert!(matches!(o, AdmitOutcome::Duplicate(_)), "{o:?}");
    Ok(())
}

#[tokio::test]
async fn pruned_ledger_answers_unknown_for_old_keys() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    store.write(vec![admit("k", "x", Some(10))]).await?;
    let now = store.clock().now_ms();
    store
        .write(vec![Mutation::PruneLedger { before_ms: now + 1 }])
        .await?;
    let o = outcome(store.write(vec![admit("k", "x", Some(10))]).await?);
    assert!(matches!(o, AdmitOutcome::Unknown { .. }), "{o:?}");
    let o = outcome(store.write(vec![admit("new", "x", Some(now + 10))]).await?);
    assert!(matches!(o, AdmitOutcome::Accepted(_)), "{o:?}");
    Ok(())
}

#[tokio::test]
async fn change_signals_follow_commits() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let mut rx = store.subscribe();
    store.write(vec![admit("a", "a", None)]).await?;
    let change = rx.recv().await?;
    assert_eq!(change.seq, 1);
    assert_eq!(change.owner.as_str(), "alice");
    Ok(())
}

#[test]
fn readers_stay_within_the_pool_and_are_reused() -> TestResult {
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::SeqCst;

    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions {
        readers: 2,
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (store, inside, most) = (store.clone(), inside.clone(), most.clone());
            std::thread::spawn(move || -> Result<()> {
                for _ in 0..50 {
                    store.read_blocking(|c| {
                        let now = inside.fetch_add(1, SeqCst) + 1;
                        most.fetch_max(now, SeqCst);
                        let n = reader::count(c, "entries");
                        inside.fetch_sub(1, SeqCst);
                        n
                    })?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "reader thread panicked")??;
    }
    assert!(
        most.load(SeqCst) <= 2,
        "{} reads at once",
        most.load(SeqCst)
    );
    let open = store.inner.readers.open_connections();
    assert!((1..=2).contains(&open), "{open} connections open");

    // a read that panics gives its connection back
    let one = Store::open(StoreOptions {
        readers: 1,
        ..StoreOptions::new(dir.path().join("one.db"))
    })?;
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        one.read_blocking(|_| -> Result<()> { panic!("read failed") })
    }));
    assert!(panicked.is_err());
    assert_eq!(one.read_blocking(|c| reader::count(c, "entries"))?, 0);
    assert_eq!(one.inner.readers.open_connections(), 1);
    Ok(())
}

/// A read runs on the calling thread while a reader connection is at
/// hand, and on the blocking pool while every one is lent out (the
/// caller's thread is not held waiting for one); a listing always runs on
/// the blocking pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_read_runs_here_while_a_connection_is_free() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions {
        readers: 1,
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let here = std::thread::current().id();
    let thread_of = |store: &Store| {
        let store = store.clone();
        async move {
            store
                .read(|_| Ok(std::thread::current().id()))
                .await
                .unwrap()
        }
    };
    assert_eq!(thread_of(&store).await, here);
    let many = store.read_many(|_| Ok(std::thread::current().id())).await?;
    assert_ne!(many, here);

    // the one connection lent out on another thread until told
    let (lent_tx, lent_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let store = store.clone();
        std::thread::spawn(move || {
            store.read_blocking(|_| {
                lent_tx.send(()).ok();
                go_rx.recv().ok();
                Ok(())
            })
        })
    };
    lent_rx.recv()?;
    // given back once the read was polled and left pending (it went to
    // the blocking pool); a read that waited for it here would block that
    // poll, and run here once the holder gives up after 10 s
    let (polled_tx, polled_rx) = std::sync::mpsc::channel::<()>();
    let release = std::thread::spawn(move || {
        polled_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .ok();
        go_tx.send(()).ok();
    });
    let mut read = std::pin::pin!(thread_of(&store));
    let first = futures::FutureExt::now_or_never(read.as_mut());
    assert_eq!(first, None, "the read waited on the caller's thread");
    polled_tx.send(())?;
    assert_ne!(read.await, here);
    release.join().map_err(|_| "release panicked")?;
    holder.join().map_err(|_| "holder panicked")??;
    // back in the pool: here again
    assert_eq!(thread_of(&store).await, here);
    Ok(())
}

/// Largest size of the store's WAL file seen so far.
fn note_wal(dir: &tempfile::TempDir, most: &std::sync::atomic::AtomicU64) {
    if let Ok(m) = std::fs::metadata(dir.path().join("fleet.db-wal")) {
        most.fetch_max(m.len(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// Under writes that never pause, the checkpoint thread never copies the
/// whole WAL: what was committed while it copied is left. The WAL then
/// starts over only because the writer, asked by that thread, copies the
/// rest itself between two groups.
///
/// The test runs the thread's checkpoints itself, between writes it
/// orders (the thread is left idle: a period of an hour), so nothing
/// depends on how threads are scheduled. (Before, 8 tasks wrote while the
/// thread ran every 5 ms: on a busy machine the thread's back-to-back
/// checkpoints took long enough that more than it converges on was
/// committed during each, it asked the writer late, and the WAL grew past
/// the bound in a quarter of the runs.) The frames committed during a
/// checkpoint are made by a reader that holds a snapshot while the next
/// writes commit: a checkpoint stops at the oldest snapshot in use, as the
/// thread's stops at the newest commit it saw.
#[tokio::test]
async fn the_wal_starts_over_under_steady_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions {
        checkpoint_period: std::time::Duration::from_secs(3600),
        wal_restart_frames: 256,
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })?;
    let checkpoints = store.inner.checkpoints.clone();
    let conn = checkpoints.connect()?;
    let lagging = rusqlite::Connection::open(dir.path().join("fleet.db"))?;
    let mut previous = None;
    let most = std::sync::atomic::AtomicU64::new(0);
    let text = "x".repeat(8 * 1024);
    let (rounds, half) = (60, 10);
    for round in 0..rounds {
        for i in 0..half {
            store
                .write(vec![admit(&format!("{round}-a{i}"), &text, None)])
                .await?;
        }
        // the writes below commit while the checkpoint runs
        lagging.execute_batch("BEGIN; SELECT count(*) FROM entries;")?;
        for i in 0..half {
            store
                .write(vec![admit(&format!("{round}-b{i}"), &text, None)])
                .await?;
        }
        checkpoints.tick(&conn, &mut previous);
        lagging.execute_batch("COMMIT")?;
        note_wal(&dir, &most);
    }
    // 1,200 entries of 8 KiB: ~10 MiB of text and ~50 MiB of WAL frames,
    // which is what the file grows to when only the thread checkpoints;
    // with the writer's catch-up it stays under 3 MiB
    let written = rounds * 2 * half * 8 * 1024;
    let largest = most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        largest < 8 * 1024 * 1024,
        "the WAL grew to {largest} bytes for {written} bytes written"
    );
    assert!(
        store
            .stats()
            .wal_catch_ups
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    );
    assert_eq!(
        store.read_blocking(|c| reader::count(c, "entries"))?,
        (rounds * 2 * half) as i64,
        "every write is kept"
    );
    Ok(())
}

fn bot_record(id: &str, name: &str) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap_or_else(|e| panic!("{e}")),
        name: name.into(),
        owner: UserId::new("alice").unwrap_or_else(|e| panic!("{e}")),
        role: "helps".into(),
        provider: "main".into(),
        tools: vec!["SendMessage".into()],
        settings: serde_json::json!({}),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    }
}

async fn upsert(store: &Store, id: &str, name: &str) -> Result<()> {
    store
        .write(vec![Mutation::UpsertBot(bot_record(id, name))])
        .await
        .map(drop)
}

async fn name_of(store: &Store, id: &BotId) -> Result<Option<String>> {
    Ok(store.get_bot(id).await?.map(|b| b.name))
}

#[tokio::test]
async fn bot_records_are_kept_until_a_bot_is_written() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    let a = BotId::new("a")?;
    assert_eq!(store.get_bot(&a).await?, None, "no record, nothing kept");
    upsert(&store, "a", "First").await?;
    assert_eq!(name_of(&store, &a).await?, Some("First".into()));

    // the kept record answers: deleted behind the store's back, still read
    let raw = Connection::open(dir.path().join("fleet.db"))?;
    raw.execute("DELETE FROM bots WHERE id = 'a'", [])?;
    assert_eq!(name_of(&store, &a).await?, Some("First".into()));

    // any bot write makes every kept record stale before it is answered
    upsert(&store, "b", "Other").await?;
    assert_eq!(store.get_bot(&a).await?, None, "read again after a write");
    upsert(&store, "a", "Renamed").await?;
    assert_eq!(
        name_of(&store, &a).await?,
        Some("Renamed".into()),
        "a write that was answered is seen by the next read"
    );
    Ok(())
}

/// A second open of a database in use fails with `InUse` (two hosts on one
/// data directory would both resume its turns); closing lets it go.
#[tokio::test]
async fn a_store_in_use_is_refused_until_closed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let store = open(&dir)?;
    match open(&dir) {
        Err(StoreError::InUse { path }) => assert!(path.ends_with("fleet.db"), "{path}"),
        other => panic!("expected InUse, got {other:?}"),
    }
    store.close().await;
    let again = open(&dir)?;
    again.close().await;
    Ok(())
}

/// The reads of a session, a child module so that it shares the helpers
/// above (`open`, `admit`, `alice_dm`).
#[path = "store_sessions_tests.rs"]
mod sessions;
