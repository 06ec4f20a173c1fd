//! The pruning of chains' counts by a started host: the rows of chains
//! silent for longer than the ledger's retention go, page after page
//! (a reader walks `chains` 500 rows at a time, the writer drops each
//! page's silent rows by key), and the rows of chains written since stay
//! with their counts.

use std::sync::Arc;

use botfleet_memory::BotId;
use botfleet_memory::ChainOrigin;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::ManualClock;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;

use crate::support::fleet::TestFleet;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// A message from b to a, counted under `chain`.
fn message(session: SessionId, chain: ChainOrigin) -> Mutation {
    Mutation::Append(Box::new(NewEntry {
        id: EntryId::new_v7(),
        session,
        author: "b".into(),
        turn: None,
        kind: EntryKind::AgentMessage {
            from: BotId::new("b").unwrap(),
            text: "hi".into(),
            hop: 1,
            reply_session: None,
            chain: Some(chain),
            answers: false,
        },
    }))
}

#[tokio::test]
async fn a_started_host_prunes_chains_silent_past_the_retention_page_after_page() {
    let fleet = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot("b", "s", &["SendMessage"])
        .runtime("ledger_retention_days = 7");
    let path = fleet.path().join("data/fleet.db");
    std::fs::create_dir_all(fleet.path().join("data")).unwrap();
    let clock = ManualClock::new(chrono::Utc::now());
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(&path)
    })
    .unwrap();
    let key = SessionKey {
        bot: BotId::new("a").unwrap(),
        kind: SessionKind::Agent,
        peer: "b".into(),
    };
    let session = SessionRecord {
        id: key.id(),
        key,
        owner: UserId::new("alice").unwrap(),
        epoch: 0,
        last_seq: 0,
        created_at: 0,
    };
    store
        .write(vec![Mutation::EnsureSession(session.clone())])
        .await
        .unwrap();
    let chain = || ChainOrigin {
        session: session.id,
        entry: EntryId::new_v7(),
    };
    // more than two pages of chains silent for 30 days, and among them,
    // in key order, chains that sent a day ago and one still sending
    clock.advance_ms(-30 * DAY_MS);
    let silent: Vec<ChainOrigin> = (0..1_200).map(|_| chain()).collect();
    let recent: Vec<ChainOrigin> = [100, 600, 1_100].iter().map(|&i| silent[i]).collect();
    let mut batch: Vec<Mutation> = silent.iter().map(|c| message(session.id, *c)).collect();
    let young = chain();
    batch.push(message(session.id, young));
    store.write(batch).await.unwrap();
    clock.advance_ms(29 * DAY_MS);
    let mut batch: Vec<Mutation> = recent.iter().map(|c| message(session.id, *c)).collect();
    batch.push(message(session.id, young));
    store.write(batch).await.unwrap();
    store.close().await;
    drop(store);

    let host = fleet.start().await;
    let fleet = host.shutdown().await;
    let store = Store::open(StoreOptions::new(fleet.path().join("data/fleet.db"))).unwrap();
    let mut left = Vec::new();
    for c in &silent {
        let n = store.chain_messages(c).await.unwrap();
        if n > 0 {
            left.push((c.entry, n));
        }
    }
    let kept: Vec<(EntryId, u64)> = recent.iter().map(|c| (c.entry, 2)).collect();
    assert_eq!(
        left.len(),
        kept.len(),
        "chains left: only those that sent since stay"
    );
    assert_eq!(left, kept);
    assert_eq!(store.chain_messages(&young).await.unwrap(), 2);
    store.close().await;
}
