//! A store, its manual clock and a memory hub for the layers' tests.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::clock::Clock;
use crate::clock::ManualClock;
use crate::ids::BotId;
use crate::ids::UserId;
use crate::record::BotRecord;
use crate::store::Store;
use crate::store::StoreOptions;

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) store: Store,
    pub(crate) clock: ManualClock,
    pub(crate) hub: MemoryHub,
}

/// A fresh store at 2026-03-01 09:00 UTC.
pub(crate) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-03-01T09:00:00Z")
            .unwrap()
            .to_utc(),
    );
    let mut opts = StoreOptions::new(dir.path().join("db.sqlite"));
    opts.clock = Arc::new(clock.clone());
    let store = Store::open(opts).unwrap();
    let hub = MemoryHub::new(store.clone());
    Fixture {
        dir,
        store,
        clock,
        hub,
    }
}

/// A bot of `owner` in `projects`.
pub(crate) fn bot(id: &str, owner: &str, projects: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.into(),
        owner: UserId::new(owner).unwrap(),
        role: String::new(),
        provider: "p".into(),
        tools: vec![],
        settings: json!({ "projects": projects }),
        origin: "test".into(),
        created_at: 0,
        updated_at: 0,
    }
}

impl Fixture {
    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) async fn add(&self, n: NewMemory) -> MemoryOpResult {
        self.hub.apply(MemoryOp::Add(n)).await.unwrap()
    }

    pub(crate) async fn snapshot(&self, b: &BotRecord, input: &str) -> MemorySnapshot {
        self.store
            .bot_memory_snapshot(b, input, self.now())
            .await
            .unwrap()
    }
}
