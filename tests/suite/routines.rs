//! Routines: the Scheduler with an injected manual clock and tokio's paused
//! clock (exact instants, restarts, missed slots, its own timer). DST days
//! are in `routines_dst.rs`, fleet.toml and the API in `routines_api.rs`;
//! the rig here is shared.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use botfleet_actors::FleetSettings;
use botfleet_actors::Runtime;
use botfleet_actors::scheduler::FireOutcome;
use botfleet_actors::scheduler::Firing;
use botfleet_actors::scheduler::RoutineSpec;
use botfleet_actors::scheduler::SchedulerError;
use botfleet_actors::scheduler::SchedulerHandle;
use botfleet_actors::tools::ToolRegistry;
use botfleet_actors::tools::Workspace;
use botfleet_memory::BotId;
use botfleet_memory::BotRecord;
use botfleet_memory::CatchUp;
use botfleet_memory::Clock;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::ManualClock;
use botfleet_memory::Mutation;
use botfleet_memory::Priority;
use botfleet_memory::RoutineOrigin;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::Store;
use botfleet_memory::StoreOptions;
use botfleet_memory::UserId;
use chrono::DateTime;
use chrono::Utc;
use pretty_assertions::assert_eq;
use serde_json::json;

pub(super) fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339)
        .unwrap()
        .timestamp_millis()
}

pub(super) fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc()
}

pub(super) fn spec(name: &str, cron: &str, tz: &str) -> RoutineSpec {
    RoutineSpec {
        name: name.into(),
        cron: cron.into(),
        timezone: tz.into(),
        prompt: format!("Run the {name} routine."),
        silent_ok: true,
        catch_up: CatchUp::Once,
    }
}

/// A store and a runtime (no fleet running: admitted inputs wait in the
/// inbox) with a manual clock, and bot `r` owned by alice.
pub(super) struct Rig {
    _dir: tempfile::TempDir,
    pub(super) clock: ManualClock,
    pub(super) store: Store,
    rt: Arc<Runtime>,
    pub(super) bot: BotId,
}

impl Rig {
    pub(super) async fn new(start: &str) -> Self {
        Self::with_clock(ManualClock::new(at(start))).await
    }

    async fn with_clock(clock: ManualClock) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(StoreOptions {
            clock: Arc::new(clock.clone()),
            ..StoreOptions::new(dir.path().join("fleet.db"))
        })
        .unwrap();
        let ws = dir.path().join("workspace");
        let rt = Arc::new(Runtime::new(
            store.clone(),
            HashMap::new(),
            ToolRegistry::builtin(),
            FleetSettings::new(ws.clone()),
            Workspace::open(&ws).unwrap(),
        ));
        let bot = BotId::new("r").unwrap();
        store
            .write(vec![Mutation::UpsertBot(BotRecord {
                id: bot.clone(),
                name: "R".into(),
                owner: UserId::new("alice").unwrap(),
                role: "test".into(),
                provider: "none".into(),
                tools: vec![],
                settings: json!({}),
                origin: "config".into(),
                created_at: 0,
                updated_at: 0,
            })])
            .await
            .unwrap();
        Self {
            _dir: dir,
            clock,
            store,
            rt,
            bot,
        }
    }

    pub(super) async fn scheduler(&self, config: Vec<RoutineSpec>) -> SchedulerHandle {
        self.scheduler_with(Arc::new(self.clock.clone()), config)
            .await
    }

    async fn scheduler_with(
        &self,
        clock: Arc<dyn Clock>,
        config: Vec<RoutineSpec>,
    ) -> SchedulerHandle {
        let config = config.into_iter().map(|s| (self.bot.clone(), s)).collect();
        SchedulerHandle::start(self.rt.clone(), clock, config)
            .await
            .unwrap()
    }

    /// The events admitted into routine `name`'s session.
    pub(super) async fn events(&self, name: &str) -> Vec<Entry> {
        let session = SessionKey {
            bot: self.bot.clone(),
            kind: SessionKind::Routine,
            peer: name.into(),
        }
        .id();
        self.store
            .entries_after(session, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.kind, EntryKind::Event { .. }))
            .collect()
    }

    pub(super) async fn next_fire(&self, name: &str) -> Option<i64> {
        self.store
            .get_routine(&self.bot, name)
            .await
            .unwrap()
            .unwrap()
            .next_fire_ms
    }
}

pub(super) fn slots(fired: &[Firing]) -> Vec<(String, i64, bool)> {
    fired
        .iter()
        .map(|f| match &f.outcome {
            FireOutcome::Fired { late, .. } => (f.name.clone(), f.slot_ms, *late),
            other => panic!("{} did not fire: {other:?}", f.name),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn eight_in_shanghai_fires_at_midnight_utc_exactly_once() {
    let rig = Rig::new("2026-11-30T12:00:00Z").await;
    let h = rig
        .scheduler(vec![spec("brief", "0 8 * * *", "Asia/Shanghai")])
        .await;
    let slot = ms("2026-12-01T00:00:00Z");
    assert_eq!(rig.next_fire("brief").await, Some(slot));

    rig.clock.set(at("2026-11-30T23:59:59Z"));
    assert_eq!(h.tick().await.unwrap(), vec![]);
    rig.clock.set(at("2026-12-01T00:00:00Z"));
    assert_eq!(
        slots(&h.tick().await.unwrap()),
        vec![("brief".into(), slot, false)]
    );
    // poked again, a second later, an hour later: nothing more
    assert_eq!(h.tick().await.unwrap(), vec![]);
    rig.clock.advance_ms(3_600_000);
    assert_eq!(h.tick().await.unwrap(), vec![]);

    let events = rig.events("brief").await;
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e.created_at, slot, "admitted at the scheduled instant");
    let EntryKind::Event {
        origin,
        text,
        trusted,
        ..
    } = &e.kind
    else {
        unreachable!()
    };
    assert_eq!(origin, "routine:brief");
    assert!(*trusted);
    assert!(text.starts_with("Run the brief routine."), "{text}");
    assert!(text.contains("2026-12-01 08:00:00 CST"), "{text}");
    let inbox = rig.store.pending_inbox(&rig.bot).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].priority, Priority::Background);
    assert_eq!(
        rig.next_fire("brief").await,
        Some(ms("2026-12-02T00:00:00Z"))
    );
    let stored = rig
        .store
        .get_routine(&rig.bot, "brief")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.last_fire_ms, Some(slot));
    assert_eq!(stored.origin, RoutineOrigin::Config);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_never_fires_a_slot_twice() {
    let rig = Rig::new("2026-11-30T12:00:00Z").await;
    let config = vec![spec("brief", "0 8 * * *", "Asia/Shanghai")];
    let h = rig.scheduler(config.clone()).await;
    rig.clock.set(at("2026-12-01T00:00:00Z"));
    assert_eq!(h.tick().await.unwrap().len(), 1);
    h.stop().await;

    // the same instant, a new scheduler over the same store
    let h = rig.scheduler(config.clone()).await;
    assert_eq!(h.tick().await.unwrap(), vec![]);
    rig.clock.advance_ms(30_000);
    assert_eq!(h.tick().await.unwrap(), vec![]);
    h.stop().await;
    assert_eq!(rig.events("brief").await.len(), 1);

    // Even if the slot's admission had committed without the routine
    // moving on (it cannot: both are one transaction), the nonce derived
    // from (bot, routine, slot) would refuse a second one.
    let next = ms("2026-12-02T00:00:00Z");
    let record = rig
        .store
        .get_routine(&rig.bot, "brief")
        .await
        .unwrap()
        .unwrap();
    let text = botfleet_actors::scheduler::routine_text(
        &record,
        "Asia/Shanghai".parse().unwrap(),
        next,
        false,
    )
    .unwrap();
    let owner = UserId::new("alice").unwrap();
    let early = botfleet_actors::scheduler::routine_admission(&record, &owner, next, text);
    rig.store
        .write(vec![Mutation::Admit(Box::new(early))])
        .await
        .unwrap();
    rig.clock.set(at("2026-12-02T00:00:00Z"));
    let h = rig.scheduler(config).await;
    h.tick().await.unwrap();
    assert_eq!(rig.events("brief").await.len(), 2, "one per slot");
    assert_eq!(
        rig.next_fire("brief").await,
        Some(ms("2026-12-03T00:00:00Z"))
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn missed_slots_run_once_or_are_skipped() {
    let rig = Rig::new("2026-06-01T10:30:00Z").await;
    let mut skip = spec("skip", "0 * * * *", "UTC");
    skip.catch_up = CatchUp::Skip;
    let config = vec![spec("once", "0 * * * *", "UTC"), skip];
    let h = rig.scheduler(config.clone()).await;
    h.stop().await;

    // down from 10:30 to 15:20: slots 11:00 … 15:00 were missed
    rig.clock.set(at("2026-06-01T15:20:00Z"));
    let h = rig.scheduler(config).await;
    h.tick().await.unwrap(); // the start already caught up; this is a no-op
    let once = rig.events("once").await;
    assert_eq!(once.len(), 1, "one run for five missed slots");
    let EntryKind::Event { text, .. } = &once[0].kind else {
        unreachable!()
    };
    assert!(text.contains("2026-06-01 11:00:00 UTC"), "{text}");
    assert!(text.contains("runs late"), "{text}");
    assert_eq!(rig.events("skip").await.len(), 0);
    for name in ["once", "skip"] {
        assert_eq!(rig.next_fire(name).await, Some(ms("2026-06-01T16:00:00Z")));
    }

    // on time again, both run
    rig.clock.set(at("2026-06-01T16:00:00Z"));
    let mut fired = slots(&h.tick().await.unwrap());
    fired.sort();
    let slot = ms("2026-06-01T16:00:00Z");
    assert_eq!(
        fired,
        vec![("once".into(), slot, false), ("skip".into(), slot, false)]
    );
    // a tick less than a minute late is on time, not missed
    rig.clock.set(at("2026-06-01T17:00:45Z"));
    assert_eq!(h.tick().await.unwrap().len(), 2);
    h.stop().await;
}

/// A wall clock that follows tokio's (paused) clock.
struct TokioClock {
    base_ms: i64,
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        self.base_ms + self.start.elapsed().as_millis() as i64
    }
}

#[tokio::test(start_paused = true)]
async fn the_timer_fires_without_pokes() {
    let rig = Rig::new("2026-11-30T23:00:00Z").await;
    let clock = Arc::new(TokioClock {
        base_ms: ms("2026-11-30T23:00:00Z"),
        start: tokio::time::Instant::now(),
    });
    let h = rig
        .scheduler_with(
            clock.clone(),
            vec![spec("brief", "0 8 * * *", "Asia/Shanghai")],
        )
        .await;
    // an hour of paused time passes: the scheduler's own timer fires it
    tokio::time::sleep(Duration::from_secs(3_600 + 5)).await;
    for _ in 0..100 {
        if !rig.events("brief").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = rig.events("brief").await;
    assert_eq!(events.len(), 1);
    assert_eq!(
        rig.store
            .get_routine(&rig.bot, "brief")
            .await
            .unwrap()
            .unwrap()
            .last_fire_ms,
        Some(ms("2026-12-01T00:00:00Z"))
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn api_routines_persist_and_config_routines_are_owned_by_the_file() {
    let rig = Rig::new("2026-06-01T00:00:00Z").await;
    let h = rig.scheduler(vec![spec("cfg", "0 9 * * *", "UTC")]).await;
    let put = h
        .put(&rig.bot, spec("api", "0 10 * * *", "UTC"))
        .await
        .unwrap();
    assert_eq!(put.record.origin, RoutineOrigin::Api);
    assert!(put.created);
    assert_eq!(put.record.next_fire_ms, Some(ms("2026-06-01T10:00:00Z")));
    // replacing with another schedule re-plans it
    let put = h
        .put(&rig.bot, spec("api", "0 7 * * *", "Asia/Shanghai"))
        .await
        .unwrap();
    assert_eq!(put.record.next_fire_ms, Some(ms("2026-06-01T23:00:00Z")));
    assert!(!put.created, "a replace");
    assert!(matches!(
        h.put(&rig.bot, spec("cfg", "0 1 * * *", "UTC")).await,
        Err(SchedulerError::ConfigOwned { .. })
    ));
    assert!(matches!(
        h.delete(&rig.bot, "cfg").await,
        Err(SchedulerError::ConfigOwned { .. })
    ));
    // a name that differs from one of the bot's only in case is refused
    // (QA: `Every-Minute` beside `every-minute`, two routines and two
    // sessions), naming the one it clashes with
    // (fleet.toml's is changed there: the advice to put it under its name
    // was then refused as the file's, QA)
    for (given, existing, fix) in [
        ("API", "api", "put it as \"api\" to replace that one"),
        (
            "Cfg",
            "cfg",
            "that one is defined in fleet.toml: change it there",
        ),
    ] {
        let e = h
            .put(&rig.bot, spec(given, "0 1 * * *", "UTC"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, SchedulerError::NameClash { existing: x, .. } if x == existing),
            "{e}"
        );
        assert!(e.to_string().contains(fix), "{e}");
    }
    let e = h
        .put(&rig.bot, spec("bad", "0 8 * *", "UTC"))
        .await
        .unwrap_err();
    assert!(matches!(e, SchedulerError::Invalid(_)), "{e}");
    assert!(matches!(
        h.put(&BotId::new("ghost").unwrap(), spec("x", "0 8 * * *", "UTC"))
            .await,
        Err(SchedulerError::UnknownBot(_))
    ));
    h.stop().await;

    // a restart keeps the API routine; a config routine gone from the file
    // is removed
    let h = rig.scheduler(vec![]).await;
    let names: Vec<String> = h
        .list(&rig.bot)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, vec!["api".to_string()]);
    assert!(h.delete(&rig.bot, "api").await.unwrap());
    assert!(!h.delete(&rig.bot, "api").await.unwrap());
    assert!(h.list(&rig.bot).await.unwrap().is_empty());
    h.stop().await;
}

/// Down across one missed slot, back 3 s after the next one: with
/// `"skip"` the missed slot (63 s late) passes and the on-time one runs,
/// exactly once; with `"once"` one late run covers both, naming the first
/// missed slot, as docs/operations.md says.
#[tokio::test(start_paused = true)]
async fn skip_still_runs_the_slot_that_is_on_time_after_downtime() {
    let rig = Rig::new("2026-06-01T15:20:23Z").await; // 11:20:23 EDT
    let mut skip = spec("t3", "* * * * *", "America/New_York");
    skip.catch_up = CatchUp::Skip;
    let config = vec![skip, spec("t4", "* * * * *", "America/New_York")];
    let h = rig.scheduler(config.clone()).await;
    for name in ["t3", "t4"] {
        assert_eq!(rig.next_fire(name).await, Some(ms("2026-06-01T15:21:00Z")));
    }
    h.stop().await;

    // down from 11:20:23 to 11:22:03: 11:21 was missed, 11:22 is 3 s late
    rig.clock.set(at("2026-06-01T15:22:03Z"));
    let h = rig.scheduler(config).await;
    // the start catches up (this poke may come first and do it instead);
    // poking again changes nothing
    h.tick().await.unwrap();
    assert_eq!(h.tick().await.unwrap(), vec![]);
    rig.clock.advance_ms(20_000);
    assert_eq!(h.tick().await.unwrap(), vec![]);

    let record = |name: &'static str| {
        let store = rig.store.clone();
        let bot = rig.bot.clone();
        async move { store.get_routine(&bot, name).await.unwrap().unwrap() }
    };
    let texts = |events: Vec<Entry>| -> Vec<String> {
        events
            .into_iter()
            .map(|e| {
                let EntryKind::Event { text, .. } = e.kind else {
                    unreachable!()
                };
                text
            })
            .collect()
    };

    // skip: 11:21 passed, 11:22 ran on time, once
    let t3 = texts(rig.events("t3").await);
    assert_eq!(t3.len(), 1, "{t3:?}");
    assert!(t3[0].contains("2026-06-01 11:22:00 EDT"), "{}", t3[0]);
    assert!(!t3[0].contains("runs late"), "{}", t3[0]);
    let r = record("t3").await;
    assert_eq!(r.last_fire_ms, Some(ms("2026-06-01T15:22:00Z")));
    assert_eq!(r.next_fire_ms, Some(ms("2026-06-01T15:23:00Z")));

    // once: one late run for 11:21 (and 11:22), as documented
    let t4 = texts(rig.events("t4").await);
    assert_eq!(t4.len(), 1, "{t4:?}");
    assert!(t4[0].contains("2026-06-01 11:21:00 EDT"), "{}", t4[0]);
    assert!(t4[0].contains("runs late"), "{}", t4[0]);
    let r = record("t4").await;
    assert_eq!(r.last_fire_ms, Some(ms("2026-06-01T15:21:00Z")));
    assert_eq!(r.next_fire_ms, Some(ms("2026-06-01T15:23:00Z")));

    // then both follow the schedule
    rig.clock.set(at("2026-06-01T15:23:00Z"));
    let mut fired = slots(&h.tick().await.unwrap());
    fired.sort();
    let slot = ms("2026-06-01T15:23:00Z");
    assert_eq!(
        fired,
        vec![("t3".into(), slot, false), ("t4".into(), slot, false)]
    );
    h.stop().await;
}

/// The same catch-up seen by a poke (no restart): the scheduler stalled
/// past a slot reports the missed slot as skipped and fires the on-time
/// one in the same tick.
#[tokio::test(start_paused = true)]
async fn a_stalled_skip_routine_reports_the_skip_and_the_fire() {
    let rig = Rig::new("2026-06-01T15:20:23Z").await;
    let mut skip = spec("t3", "* * * * *", "America/New_York");
    skip.catch_up = CatchUp::Skip;
    let h = rig.scheduler(vec![skip]).await;
    rig.clock.set(at("2026-06-01T15:22:03Z"));
    let fired = h.tick().await.unwrap();
    let got: Vec<(i64, bool)> = fired
        .iter()
        .map(|f| {
            (
                f.slot_ms,
                matches!(f.outcome, FireOutcome::Fired { late: false, .. }),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (ms("2026-06-01T15:21:00Z"), false),
            (ms("2026-06-01T15:22:00Z"), true)
        ],
        "{fired:?}"
    );
    assert_eq!(fired[0].outcome, FireOutcome::Skipped);
    assert_eq!(h.tick().await.unwrap(), vec![]);
    assert_eq!(rig.events("t3").await.len(), 1);
    h.stop().await;
}
