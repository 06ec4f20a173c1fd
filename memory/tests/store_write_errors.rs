//! The writer when SQLite rolls a transaction back itself: a write error
//! inside a statement (a full disk, a file-size limit, an I/O error as
//! the page cache spills into the WAL) ends the whole transaction. The
//! writer's own `ROLLBACK` then failed and returned before it cleared its
//! caches of sessions and entry numbers, and every caller was answered
//! `Rejected`: later writes went into a session with no record and left a
//! gap in its numbers, and on the savepoint path the next job's
//! `RELEASE` committed it on its own while its caller was told it failed
//! (audit, 2026-12-07).
//!
//! A file-size limit (`RLIMIT_FSIZE`) is the process's: these tests are a
//! test binary of their own, and take turns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use botfleet_memory::AdmitRequest;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::MutationResult;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreError;
use botfleet_memory::StoreOptions;
use botfleet_memory::TurnId;
use botfleet_memory::UserId;
use rustix::process::Resource;
use rustix::process::Rlimit;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// One test at a time: the file-size limit is the whole process's.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes past `limit` bytes fail with `EFBIG` (a handler for `SIGXFSZ`,
/// whose default would end the process), until the guard is dropped.
struct FileSizeLimit {
    before: Rlimit,
    _signal: tokio::signal::unix::Signal,
}

impl FileSizeLimit {
    fn new(limit: u64) -> Self {
        let kind =
            tokio::signal::unix::SignalKind::from_raw(rustix::process::Signal::XFSZ.as_raw());
        let signal = tokio::signal::unix::signal(kind).unwrap();
        let before = rustix::process::getrlimit(Resource::Fsize);
        rustix::process::setrlimit(
            Resource::Fsize,
            Rlimit {
                current: Some(limit),
                maximum: before.maximum,
            },
        )
        .unwrap();
        Self {
            before,
            _signal: signal,
        }
    }
}

impl Drop for FileSizeLimit {
    fn drop(&mut self) {
        rustix::process::setrlimit(Resource::Fsize, self.before).unwrap();
    }
}

fn dm(peer: &str) -> SessionKey {
    SessionKey {
        bot: botfleet_memory::BotId::new("r").unwrap(),
        kind: SessionKind::Dm,
        peer: peer.into(),
    }
}

fn admit(key: &SessionKey, nonce: &str, text: &str) -> Mutation {
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
        session: key.clone(),
        owner: UserId::new("alice").unwrap(),
        priority: Priority::UserDm,
    }))
}

fn append(session: SessionId, text: &str) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: "alice".into(),
        turn: None,
        kind: EntryKind::UserMessage { text: text.into() },
    }))
}

fn ensure(key: &SessionKey) -> Mutation {
    Mutation::EnsureSession(SessionRecord {
        id: key.id(),
        key: key.clone(),
        owner: UserId::new("alice").unwrap(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    })
}

/// A mutation that always fails: the checkpoint of a turn never started.
fn failing() -> Mutation {
    Mutation::Checkpoint {
        turn: TurnId::new_v7(),
        checkpoint: serde_json::json!({}),
    }
}

/// More than the writer's page cache holds, so SQLite spills pages into
/// the WAL in the middle of the statement that writes it.
fn huge() -> String {
    "x".repeat(80 << 20)
}

async fn seqs(store: &Store, session: SessionId) -> Vec<i64> {
    let entries = store.entries_after(session, 0, 10).await.unwrap();
    entries.iter().map(|e| e.seq).collect()
}

fn is_storage_failure(e: &StoreError) -> bool {
    matches!(e, StoreError::DiskIo { .. } | StoreError::DiskFull { .. })
}

#[tokio::test]
async fn a_group_sqlite_rolled_back_itself_fails_whole_with_its_own_error() -> TestResult {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let store = Store::open(StoreOptions::new(dir.path().join("fleet.db")))?;
    let (a, b) = (dm("alice"), dm("bob"));
    store.write(vec![admit(&a, "a1", "first")]).await?;
    let result = {
        let _limit = FileSizeLimit::new(24 << 20);
        store
            .write(vec![
                append(a.id(), "second"),
                ensure(&b),
                append(b.id(), &huge()),
            ])
            .await
    };
    let e = result
        .err()
        .ok_or("the group past the file-size limit was committed")?;
    assert!(is_storage_failure(&e), "answered as {e:?}");
    assert!(
        !store.stats().health.report().reasons.is_empty(),
        "/healthz ok"
    );
    // nothing of it is stored, and the caches forgot it too: the next
    // entry of `a` follows its last stored one, and `b` has no session
    // to append to until an admission makes it
    let next = store.write(vec![append(a.id(), "third")]).await?;
    assert!(
        matches!(next[..], [MutationResult::Appended { .. }]),
        "{next:?}"
    );
    assert_eq!(seqs(&store, a.id()).await, [1, 2]);
    assert!(
        store
            .write(vec![append(b.id(), "to no session")])
            .await
            .is_err()
    );
    store.write(vec![admit(&b, "b1", "hello")]).await?;
    assert!(store.get_session(b.id()).await?.is_some());
    assert_eq!(seqs(&store, b.id()).await, [1]);
    store.close().await;
    Ok(())
}

/// The same on the savepoint path (the group had a failing batch first):
/// no job after the rolled-back one runs outside the group, and every
/// caller is answered as its batch was (not) stored.
#[tokio::test]
async fn no_job_after_a_group_sqlite_rolled_back_is_committed_on_its_own() -> TestResult {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("fleet.db");
    let store = Store::open(StoreOptions::new(&db))?;
    let (a, b) = (dm("alice"), dm("bob"));
    store.write(vec![admit(&a, "a1", "first")]).await?;
    let huge = huge();
    let submit = |batch: Vec<Mutation>| {
        let (tx, rx) = tokio::sync::oneshot::channel();
        store
            .write_then(batch, Box::new(move |r| drop(tx.send(r))))
            .unwrap();
        rx
    };
    // j0's answer, which the writer thread gives, holds that thread until
    // the jobs below are queued: it then takes them as one group (no
    // wait on the clock for it to be there)
    let (entered, in_answer) = std::sync::mpsc::channel::<()>();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (tx, j0) = tokio::sync::oneshot::channel();
    store.write_then(
        vec![append(a.id(), "j0")],
        Box::new(move |r| {
            let _ = entered.send(());
            let _ = held.recv();
            let _ = tx.send(r);
        }),
    )?;
    tokio::task::spawn_blocking(move || in_answer.recv()).await??;
    let j1 = submit(vec![failing()]);
    let j2 = submit(vec![ensure(&b), append(b.id(), &huge)]);
    let j3 = submit(vec![admit(&a, "j3", "third")]);
    let answers = {
        let _limit = FileSizeLimit::new(24 << 20);
        release.send(())?;
        (j0.await?, j1.await?, j2.await?, j3.await?)
    };
    let stored: Vec<String> = store
        .entries_after(a.id(), 0, 10)
        .await?
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::UserMessage { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    // each caller's answer says whether its batch is stored
    assert_eq!(
        answers.0.is_ok(),
        stored.contains(&"j0".to_owned()),
        "{stored:?}"
    );
    assert_eq!(
        answers.3.is_ok(),
        stored.contains(&"third".to_owned()),
        "{stored:?} {:?}",
        answers.3
    );
    assert!(answers.1.is_err() && answers.2.is_err());
    if let Err(e) = &answers.2 {
        assert!(
            is_storage_failure(e) || matches!(e, StoreError::Rejected(_)),
            "{e:?}"
        );
    }
    // the numbers of `a` have no gap
    let numbers = seqs(&store, a.id()).await;
    let expected: Vec<i64> = (1..=numbers.len() as i64).collect();
    assert_eq!(numbers, expected);
    store.close().await;
    Ok(())
}
