//! The open-approval hint against a read that races a request: the read
//! begins after the request was submitted and reads the database before
//! the writer commits it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::mpsc;

use serde_json::json;

use crate::clock::ManualClock;
use crate::digest::InputDigest;
use crate::ids::ApprovalId;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitRequest;
use crate::record::ApprovalRequestOutcome;
use crate::record::EntryKind;
use crate::record::NewApproval;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

/// A store with alice's DM with bot `r` (an approval belongs to a session).
async fn store_with_dm(dir: &tempfile::TempDir) -> (Store, SessionKey) {
    let store = Store::open(StoreOptions {
        clock: Arc::new(ManualClock::new(chrono::Utc::now())),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })
    .unwrap();
    let key = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    let text = "paste it".to_owned();
    store
        .write(vec![Mutation::Admit(Box::new(AdmitRequest {
            source: "user:alice".into(),
            nonce: "n1".into(),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([text.as_bytes()]),
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: key.id(),
                author: "alice".into(),
                turn: None,
                kind: EntryKind::UserMessage { text },
            },
            session: key.clone(),
            owner: UserId::new("alice").unwrap(),
            priority: Priority::UserDm,
        }))])
        .await
        .unwrap();
    (store, key)
}

fn request(key: &SessionKey) -> Mutation {
    Mutation::RequestApproval(Box::new(NewApproval {
        id: ApprovalId::new_v7(),
        bot: key.bot.clone(),
        session: key.id(),
        turn: None,
        call_id: "c1".into(),
        tool: "Shell".into(),
        fingerprint: "f".into(),
        summary: "run f".into(),
        reason: "pipes a download into a shell".into(),
        action: json!({"command": "f"}),
        ttl_ms: 10 * 60 * 1000,
        max_pending: 4,
    }))
}

/// Holds the writer thread in a continuation until the returned sender
/// is used (or dropped): batches submitted meanwhile wait uncommitted.
fn hold_writer(store: &Store) -> mpsc::Sender<()> {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    store
        .write_then(
            Vec::new(),
            Box::new(move |_| {
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
            }),
        )
        .unwrap();
    held_rx.recv().unwrap();
    release_tx
}

#[tokio::test]
async fn a_read_that_raced_a_request_does_not_hide_it_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, key) = store_with_dm(&dir).await;
    let release = hold_writer(&store);
    // submitted while the writer is held: not committed yet
    let (done_tx, done_rx) = mpsc::channel();
    store
        .write_then(
            vec![request(&key)],
            Box::new(move |r| done_tx.send(r).unwrap()),
        )
        .unwrap();
    // a read now finds nothing (rightly: nothing is committed)
    assert!(store.open_approvals(&key.bot).await.unwrap().is_empty());
    release.send(()).unwrap();
    let committed = tokio::task::spawn_blocking(move || done_rx.recv().unwrap())
        .await
        .unwrap()
        .unwrap();
    let Some(MutationResult::ApprovalRequested(outcome)) = committed.first() else {
        panic!("{committed:?}");
    };
    let ApprovalRequestOutcome::Created(created) = outcome.as_ref() else {
        panic!("{outcome:?}");
    };
    // committed: every read from now on finds it
    let open = store.open_approvals(&key.bot).await.unwrap();
    assert_eq!(
        open.iter().map(|a| a.id).collect::<Vec<_>>(),
        vec![created.id],
        "the committed approval is open"
    );
}

#[tokio::test]
async fn the_same_race_through_write() {
    let dir = tempfile::tempdir().unwrap();
    let (store, key) = store_with_dm(&dir).await;
    let release = hold_writer(&store);
    let writer = store.clone();
    let batch = vec![request(&key)];
    let write = tokio::spawn(async move { writer.write(batch).await });
    // let the spawned write submit its batch (it then waits for the commit)
    while store.inner.approval_hint.check(&key.bot).is_none() {
        tokio::task::yield_now().await;
    }
    assert!(store.open_approvals(&key.bot).await.unwrap().is_empty());
    release.send(()).unwrap();
    write.await.unwrap().unwrap();
    assert_eq!(store.open_approvals(&key.bot).await.unwrap().len(), 1);
}
