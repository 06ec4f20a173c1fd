//! The approvals page (`GET /v1/approvals` without `status`) of a user
//! with many approvals behind them: 10,000 decided (denied) and 3 pending,
//! asked in a routine's session (no person writes there; each request
//! and decision adds a card entry: 20,000 entries), read a page of 100 at
//! a time, pending first. It read and ordered every approval of the user
//! until the listing became two reads stopping at the page's limit
//! (migration 29, `approvals_owner_pending`); each approval read then
//! walked the session's 20,000 entries for a newer user message (202 ms a
//! page) until only a DM's entries were (`approvals.rs`).
#![allow(clippy::expect_used)]

use std::hint::black_box;

use botfleet_memory::AdmitRequest;
use botfleet_memory::ApprovalDecision;
use botfleet_memory::ApprovalId;
use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::InputDigest;
use botfleet_memory::Mutation;
use botfleet_memory::NewApproval;
use botfleet_memory::NewEntry;
use botfleet_memory::Priority;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use criterion::Criterion;
use serde_json::json;

/// Decided approvals behind the user.
const DECIDED: usize = 10_000;
/// Approvals written (and decided) per store write.
const BATCH: usize = 250;

/// A store holding alice's `DECIDED` denied approvals and 3 pending ones.
async fn filled(store: &Store) -> Result<(), botfleet_memory::StoreError> {
    let alice = UserId::new("alice")?;
    // a routine's session: its runs are events, no person writes there
    let key = SessionKey {
        bot: BotId::new("r")?,
        kind: SessionKind::Routine,
        peer: "nightly-deploy".into(),
    };
    let text = "deploy the nightly build";
    store
        .write(vec![Mutation::Admit(Box::new(AdmitRequest {
            source: "routine:r/nightly-deploy".into(),
            nonce: "n1".into(),
            nonce_time_ms: None,
            digest: InputDigest::of_parts([text.as_bytes()]),
            entry: NewEntry {
                id: EntryId::new_v7(),
                session: key.id(),
                author: "routine".into(),
                turn: None,
                kind: EntryKind::Event {
                    origin: "routine:nightly-deploy".into(),
                    text: text.into(),
                    trusted: true,
                    hop: None,
                    chain: None,
                    asked: None,
                },
            },
            session: key.clone(),
            owner: alice.clone(),
            priority: Priority::Background,
        }))])
        .await?;
    let approval = |i: usize| NewApproval {
        id: ApprovalId::new_v7(),
        bot: key.bot.clone(),
        session: key.id(),
        turn: None,
        call_id: format!("c{i}"),
        tool: "Shell".into(),
        fingerprint: format!("f{i}"),
        summary: format!("run deploy {i}"),
        reason: "uploads a file".into(),
        action: json!({ "command": format!("deploy {i}") }),
        ttl_ms: 24 * 3600 * 1000,
        max_pending: 4,
    };
    for start in (0..DECIDED).step_by(BATCH) {
        // each asked and denied in turn, as a person does: one pending at
        // a time (a bot may have only a few)
        let mut batch = Vec::with_capacity(2 * BATCH);
        for i in start..start + BATCH {
            let new = approval(i);
            let id = new.id;
            batch.push(Mutation::RequestApproval(Box::new(new)));
            batch.push(Mutation::DecideApproval {
                id,
                decision: ApprovalDecision::Deny,
                by: alice.clone(),
            });
        }
        store.write(batch).await?;
    }
    let pending: Vec<Mutation> = (DECIDED..DECIDED + 3)
        .map(|i| Mutation::RequestApproval(Box::new(approval(i))))
        .collect();
    store.write(pending).await?;
    Ok(())
}

pub fn page(c: &mut Criterion) {
    // a bench that cannot set up fails loudly rather than measure nothing
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("approvals_page: a tokio runtime");
    let dir = tempfile::tempdir().expect("approvals_page: a temporary directory");
    let store = rt
        .block_on(async {
            let store = Store::open(StoreOptions::new(dir.path().join("db.sqlite")))?;
            filled(&store).await?;
            Ok::<_, botfleet_memory::StoreError>(store)
        })
        .expect("approvals_page: a store holding the approvals");
    let alice = UserId::new("alice").expect("a valid user id");
    let first = rt.block_on(store.approvals_of_owner(&alice, 100));
    assert!(
        matches!(&first, Ok(page) if page.len() == 100 && page[..3].iter().all(|a| a.is_pending())),
        "{first:?}"
    );
    let mut group = c.benchmark_group("approvals_page");
    group.bench_function("page_of_100_behind_10k_decided", |b| {
        b.iter(|| black_box(rt.block_on(store.approvals_of_owner(&alice, 100))))
    });
    group.finish();
}
