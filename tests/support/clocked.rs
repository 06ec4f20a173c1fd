//! The parts of an in-process fleet whose stored times a test moves: a
//! store on a manual clock, its workspace and fleet settings, in a new
//! temporary directory; and the bot records it starts with.

use std::sync::Arc;
use std::time::Duration;

use botfleet::actors::FleetSettings;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::Clock;
use botfleet::memory::ManualClock;
use botfleet::memory::Store;
use botfleet::memory::StoreOptions;
use botfleet::memory::UserId;
use botfleet::tools::Workspace;
use serde_json::json;

/// A store on a manual clock, with a workspace and settings beside it.
pub struct ClockedParts {
    /// Holds the store and the workspace; keep it as long as they are used.
    pub dir: tempfile::TempDir,
    /// The store's clock: advancing it moves every stored time's "now".
    pub clock: ManualClock,
    pub store: Store,
    pub ws: Workspace,
    /// Settings for the workspace, with no debounce (inputs are taken at
    /// once, so a test does not wait on the wall clock).
    pub settings: FleetSettings,
}

/// Opens a store whose clock starts at `start` (RFC 3339) in a new
/// temporary directory, with a workspace and fleet settings for it.
pub fn clocked_parts(start: &str) -> ClockedParts {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(
        chrono::DateTime::parse_from_rfc3339(start)
            .unwrap()
            .to_utc(),
    );
    let store = Store::open(StoreOptions {
        clock: Arc::new(clock.clone()),
        ..StoreOptions::new(dir.path().join("fleet.db"))
    })
    .unwrap();
    let ws = Workspace::open(&dir.path().join("ws")).unwrap();
    let mut settings = FleetSettings::new(ws.root().to_path_buf());
    settings.debounce = Duration::ZERO;
    ClockedParts {
        dir,
        clock,
        store,
        ws,
        settings,
    }
}

/// A bot of alice's from the config, named as its id, with no role: the
/// record an in-process fleet starts with (override fields with struct
/// update syntax).
pub fn bot_record(id: &str, provider: &str, tools: &[&str]) -> BotRecord {
    BotRecord {
        id: BotId::new(id).unwrap(),
        name: id.to_owned(),
        owner: UserId::new("alice").unwrap(),
        role: String::new(),
        provider: provider.into(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        settings: json!({}),
        origin: "config".into(),
        created_at: 0,
        updated_at: 0,
    }
}

/// The system's clock moved to read 12:00 UTC of the day it is made, and
/// going on at the system's pace from there: twelve hours from either
/// midnight, more than any test runs.
#[derive(Debug, Clone, Copy)]
pub struct MiddayClock {
    offset_ms: i64,
}

impl MiddayClock {
    pub fn new() -> Self {
        let now = chrono::Utc::now();
        let noon = now.date_naive().and_hms_opt(12, 0, 0).unwrap().and_utc();
        Self {
            offset_ms: noon.timestamp_millis() - now.timestamp_millis(),
        }
    }
}

impl Clock for MiddayClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis() + self.offset_ms
    }
}
