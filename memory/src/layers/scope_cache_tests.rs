//! The scope cache through the Store's snapshot API: a write is in the
//! next snapshot, an unwritten scope is not read again, and time still
//! expires cached notes.

use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::super::test_fixture::Fixture;
use super::super::test_fixture::bot;
use super::super::test_fixture::fixture;
use super::super::*;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;

const HOUR: i64 = 3_600_000;

fn alice() -> MemoryScope {
    MemoryScope::User(UserId::new("alice").unwrap())
}

fn new(seed: &str, layer: Layer, text: &str) -> NewMemory {
    NewMemory {
        id: MemoryId::derive(seed),
        scope: alice(),
        layer,
        text: text.into(),
        importance: Importance::NORMAL,
        expires_at: None,
        source: "test".into(),
    }
}

async fn texts(f: &Fixture, b: &BotRecord, input: &str) -> Vec<String> {
    f.snapshot(b, input)
        .await
        .items()
        .map(|i| i.text.clone())
        .collect()
}

#[tokio::test]
async fn every_write_is_in_the_next_snapshot() {
    let f = fixture();
    let (a1, a2) = (bot("a1", "alice", &[]), bot("a2", "alice", &[]));
    assert!(texts(&f, &a1, "tea").await.is_empty());
    f.add(new("p1", Layer::Profile, "Prefers tea")).await;
    assert_eq!(texts(&f, &a1, "tea").await, ["Prefers tea"]);
    assert_eq!(
        texts(&f, &a2, "tea").await,
        ["Prefers tea"],
        "same user scope"
    );
    f.hub
        .apply(MemoryOp::Replace {
            id: MemoryId::derive("p1"),
            scope: alice(),
            text: "Prefers green tea".into(),
            importance: None,
            source: "test".into(),
        })
        .await
        .unwrap();
    assert_eq!(texts(&f, &a1, "tea").await, ["Prefers green tea"]);
    f.add(new("l1", Layer::Log, "Ordered tea from the new supplier"))
        .await;
    let mut note = new("n1", Layer::Notes, "Waiting for the tea invoice");
    note.expires_at = Some(f.now() + HOUR);
    f.add(note).await;
    assert_eq!(
        texts(&f, &a2, "tea").await,
        [
            "Prefers green tea",
            "Ordered tea from the new supplier",
            "Waiting for the tea invoice"
        ]
    );
    f.hub
        .apply(MemoryOp::Remove {
            id: MemoryId::derive("p1"),
            scope: alice(),
        })
        .await
        .unwrap();
    assert_eq!(
        texts(&f, &a1, "tea").await,
        [
            "Ordered tea from the new supplier",
            "Waiting for the tea invoice"
        ],
        "a forgotten fact leaves the next snapshot"
    );
    f.store.close().await;
}

#[tokio::test]
async fn a_scope_not_written_since_is_not_read_again() {
    let f = fixture();
    let a1 = bot("a1", "alice", &[]);
    f.add(new("p1", Layer::Profile, "Prefers tea")).await;
    assert_eq!(texts(&f, &a1, "").await, ["Prefers tea"]);
    // behind the store's back: the cached scope does not see it...
    let side = rusqlite::Connection::open(f.dir.path().join("db.sqlite")).unwrap();
    side.execute("DELETE FROM memory", []).unwrap();
    assert_eq!(
        texts(&f, &a1, "").await,
        ["Prefers tea"],
        "served from the cache"
    );
    // ...until the store writes to that scope: then it is read again
    f.add(new("p2", Layer::Profile, "Lives in Lyon")).await;
    assert_eq!(texts(&f, &a1, "").await, ["Lives in Lyon"]);
    f.store.close().await;
}

#[tokio::test]
async fn cached_notes_still_expire_with_time() {
    let f = fixture();
    let a1 = bot("a1", "alice", &[]);
    let mut note = new("n1", Layer::Notes, "Call back at noon");
    note.expires_at = Some(f.now() + HOUR);
    f.add(note).await;
    assert_eq!(texts(&f, &a1, "").await, ["Call back at noon"]);
    f.clock.advance_ms(2 * HOUR);
    assert!(texts(&f, &a1, "").await.is_empty(), "expired with no write");
    f.store.close().await;
}

#[test]
fn the_cache_stays_bounded_in_scopes_and_items() {
    use super::MAX_ITEMS;
    use super::MAX_SCOPES;
    use super::MemoryGenerations;
    use super::ScopeCache;
    use super::ScopeContents;

    let cache = ScopeCache::new(Arc::new(MemoryGenerations::default()));
    let empty = Arc::new(ScopeContents {
        profile: Vec::new(),
        notes: Vec::new(),
        log: Vec::new(),
    });
    let agent = |i: usize| MemoryScope::Agent(BotId::new(format!("b{i}")).unwrap());
    for i in 0..MAX_SCOPES + 10 {
        cache.put(&agent(i), 0, empty.clone());
        assert!(cache.entries.lock().map.len() <= MAX_SCOPES);
    }
    assert!(
        cache.get(&agent(MAX_SCOPES + 9)).is_ok(),
        "the newest is kept"
    );
    // items: a few big scopes fill the budget, the next one starts over
    let fact = MemoryItem {
        id: MemoryId::derive("x"),
        scope: alice(),
        layer: Layer::Profile,
        text: "x".into(),
        importance: Importance::NORMAL,
        source: "test".into(),
        created_at: 0,
        updated_at: 0,
        expires_at: None,
    };
    let big = Arc::new(ScopeContents {
        profile: vec![fact; MAX_ITEMS / 3],
        notes: Vec::new(),
        log: Vec::new(),
    });
    for i in 0..10 {
        cache.put(&agent(i), 0, big.clone());
        let entries = cache.entries.lock();
        assert!(entries.items <= MAX_ITEMS, "{}", entries.items);
        let counted: usize = entries.map.values().map(|(_, c)| c.items()).sum();
        assert_eq!(entries.items, counted);
    }
    // replacing a scope's entry does not count it twice
    cache.put(&agent(0), 1, big.clone());
    cache.put(&agent(0), 2, big.clone());
    let entries = cache.entries.lock();
    let counted: usize = entries.map.values().map(|(_, c)| c.items()).sum();
    assert_eq!(entries.items, counted);
}
