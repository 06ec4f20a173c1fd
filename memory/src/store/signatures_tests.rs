#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;

use crate::clock::ManualClock;
use crate::digest::InputDigest;
use crate::ids::BotId;
use crate::ids::EntryId;
use crate::ids::UserId;
use crate::record::AdmitOutcome;
use crate::record::AdmitRequest;
use crate::record::EntryKind;
use crate::record::NewEntry;
use crate::record::Priority;
use crate::record::SessionKey;
use crate::record::SessionKind;
use crate::store::Mutation;
use crate::store::MutationResult;
use crate::store::Store;
use crate::store::StoreOptions;

const SOURCE: &str = "hook:r/gh";
const HOUR_MS: i64 = 3600 * 1000;

fn open(dir: &tempfile::TempDir, clock: &ManualClock) -> Store {
    Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })
    .unwrap()
}

fn signature(name: &str) -> InputDigest {
    InputDigest::of_parts([name.as_bytes()])
}

fn digest(body: &str) -> InputDigest {
    InputDigest::of_parts([body.as_bytes()])
}

/// The admission of a delivery of `body` under `delivery`, as the hook
/// handler writes it.
fn admit(delivery: &str, body: &str) -> Mutation {
    let key = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Hook,
        peer: "gh".into(),
    };
    Mutation::Admit(Box::new(AdmitRequest {
        source: SOURCE.into(),
        nonce: delivery.into(),
        nonce_time_ms: None,
        digest: digest(body),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: key.id(),
            author: "hook:gh".into(),
            turn: None,
            kind: EntryKind::Event {
                origin: "webhook gh".into(),
                text: body.into(),
                trusted: false,
                hop: None,
                chain: None,
                asked: None,
            },
        },
        session: key,
        owner: UserId::new("alice").unwrap(),
        priority: Priority::Background,
    }))
}

/// Remembers `sig` for `delivery` of `body` and admits it, in one batch;
/// the admission's outcome.
async fn deliver(
    store: &Store,
    sig: &str,
    delivery: &str,
    body: &str,
    max_kept: usize,
) -> AdmitOutcome {
    let until_ms = store.clock().now_ms() + 24 * HOUR_MS;
    let mut results = store
        .write(vec![
            Mutation::RememberSignature {
                source: SOURCE.into(),
                signature: signature(sig),
                delivery: delivery.into(),
                digest: digest(body),
                until_ms,
                max_kept,
            },
            admit(delivery, body),
        ])
        .await
        .unwrap();
    match results.pop() {
        Some(MutationResult::Admitted(o)) => o,
        other => panic!("expected an admission, got {other:?}"),
    }
}

async fn first(store: &Store, sig: &str, body: &str) -> Option<String> {
    store
        .remembered_signature(SOURCE, &signature(sig), &digest(body))
        .await
        .unwrap()
        .map(|(delivery, _)| delivery)
}

fn rows(store: &Store) -> i64 {
    store
        .read_blocking(|c| {
            Ok(c.query_row("SELECT count(*) FROM hook_signatures", [], |r| r.get(0))?)
        })
        .unwrap()
}

/// A signature is remembered with the delivery it first came with, across
/// a reopen of the store (a restart), and keeps it when it comes again
/// under another id; it counts only with its admission (a `conflict`
/// leaves nothing that counts, and the next delivery of it replaces that).
#[tokio::test]
async fn a_signature_is_remembered_with_its_first_admitted_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(chrono::Utc::now());
    let store = open(&dir, &clock);
    let outcome = deliver(&store, "sig-a", "d-1", "body a", 10).await;
    assert!(matches!(outcome, AdmitOutcome::Accepted(_)), "{outcome:?}");
    store.close().await;

    let store = open(&dir, &clock);
    assert_eq!(
        first(&store, "sig-a", "body a").await.as_deref(),
        Some("d-1")
    );
    // with another body it still repeats d-1 (the handler answers it a
    // conflict): a timestamped signature over `{ts}.{body}` is valid as a
    // body-only one over that text, and after a restart it was admitted
    // as a new delivery (audit, 2026-12-07)
    assert_eq!(
        first(&store, "sig-a", "another body").await.as_deref(),
        Some("d-1")
    );
    // the replay's own admission (under the first id) keeps the first
    let outcome = deliver(&store, "sig-a", "d-1", "body a", 10).await;
    assert!(matches!(outcome, AdmitOutcome::Duplicate(_)), "{outcome:?}");
    deliver(&store, "sig-a", "d-2", "body a", 10).await;
    assert_eq!(
        first(&store, "sig-a", "body a").await.as_deref(),
        Some("d-1")
    );

    // d-1 again with another body: a conflict, not admitted
    let outcome = deliver(&store, "sig-b", "d-1", "body b", 10).await;
    assert!(matches!(outcome, AdmitOutcome::Conflict(_)), "{outcome:?}");
    assert_eq!(first(&store, "sig-b", "body b").await, None);
    let outcome = deliver(&store, "sig-b", "d-3", "body b", 10).await;
    assert!(matches!(outcome, AdmitOutcome::Accepted(_)), "{outcome:?}");
    assert_eq!(
        first(&store, "sig-b", "body b").await.as_deref(),
        Some("d-3")
    );

    // past its window it is forgotten
    clock.advance_ms(24 * HOUR_MS);
    assert_eq!(first(&store, "sig-a", "body a").await, None);
    store.close().await;
}

/// The bound: at most `max_kept` signatures per source (the oldest go in
/// the transaction that adds one), and the ledger's pruning drops the
/// expired ones, whatever the source.
#[tokio::test]
async fn signatures_past_the_cap_or_expired_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(chrono::Utc::now());
    let store = open(&dir, &clock);
    for n in 1..=5 {
        let body = format!("body {n}");
        deliver(&store, &format!("sig-{n}"), &format!("d-{n}"), &body, 3).await;
        assert!(rows(&store) <= 3, "{} rows after {n}", rows(&store));
    }
    assert_eq!(rows(&store), 3);
    for n in 1..=5 {
        let remembered = first(&store, &format!("sig-{n}"), &format!("body {n}")).await;
        let kept = n > 2;
        assert_eq!(remembered.is_some(), kept, "sig-{n}: {remembered:?}");
    }

    // an hour short of the window, the ledger's pruning keeps them all
    clock.advance_ms(23 * HOUR_MS);
    let prune = || Mutation::PruneLedger { before_ms: 0 };
    store.write(vec![prune()]).await.unwrap();
    assert_eq!(rows(&store), 3);
    clock.advance_ms(HOUR_MS);
    store.write(vec![prune()]).await.unwrap();
    assert_eq!(rows(&store), 0);
    store.close().await;
}
