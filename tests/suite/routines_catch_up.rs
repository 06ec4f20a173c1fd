//! Routines' catch-up of slots they could not run on time: several due
//! slots none of which is missed (the newest runs), and slots that come
//! while the bot is paused by its daily token budget (handled like
//! downtime when the pause ends). The rig is the one of `routines.rs`: a
//! manual clock and tokio's paused clock.

use botfleet_actors::scheduler::FireOutcome;
use botfleet_actors::scheduler::RoutineSpec;
use botfleet_memory::CatchUp;
use botfleet_memory::Entry;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::TokenUsage;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::routines::Rig;
use super::routines::at;
use super::routines::ms;
use super::routines::slots;
use super::routines::spec;

/// The texts of routine events.
fn texts(events: Vec<Entry>) -> Vec<String> {
    events
        .into_iter()
        .map(|e| {
            let EntryKind::Event { text, .. } = e.kind else {
                unreachable!()
            };
            text
        })
        .collect()
}

/// A `*/10 * * * * *` UTC routine with `catch_up = "skip"` and one with
/// `"once"`.
fn every_10s() -> Vec<RoutineSpec> {
    let mut skip = spec("skip", "*/10 * * * * *", "UTC");
    skip.catch_up = CatchUp::Skip;
    vec![skip, spec("once", "*/10 * * * * *", "UTC")]
}

/// Regression: killed at 10:22:01 (after the slot 10:22:00 ran) and back
/// at 10:22:37, both routines ran the slot 10:22:10 (27 s late: not
/// missed, but not the newest either), then 10:22:40. docs/operations.md
/// ("Downtime") says the newest slot due runs, once, on time: 10:22:30.
#[tokio::test(start_paused = true)]
async fn back_within_the_grace_runs_the_newest_due_slot() {
    let rig = Rig::new("2026-06-01T10:21:55Z").await;
    let h = rig.scheduler(every_10s()).await;
    rig.clock.set(at("2026-06-01T10:22:00Z"));
    assert_eq!(h.tick().await.unwrap().len(), 2);
    h.stop().await;

    rig.clock.set(at("2026-06-01T10:22:37Z"));
    let h = rig.scheduler(every_10s()).await;
    // the start catches up (this poke may come first and do it instead)
    h.tick().await.unwrap();
    assert_eq!(h.tick().await.unwrap(), vec![]);
    for name in ["skip", "once"] {
        let t = texts(rig.events(name).await);
        assert_eq!(t.len(), 2, "{name}: {t:?}");
        assert!(t[1].contains("2026-06-01 10:22:30 UTC"), "{name}: {}", t[1]);
        assert!(!t[1].contains("runs late"), "{name}: {}", t[1]);
        let r = rig
            .store
            .get_routine(&rig.bot, name)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.last_fire_ms, Some(ms("2026-06-01T10:22:30Z")), "{name}");
        assert_eq!(r.next_fire_ms, Some(ms("2026-06-01T10:22:40Z")), "{name}");
    }

    // a poke 15 s after a slot, past the next one: the newest, too
    rig.clock.set(at("2026-06-01T10:22:55Z"));
    let mut fired = slots(&h.tick().await.unwrap());
    fired.sort();
    let slot = ms("2026-06-01T10:22:50Z");
    assert_eq!(
        fired,
        vec![("once".into(), slot, false), ("skip".into(), slot, false)]
    );
    h.stop().await;
}

/// Regression: a bot with `daily_token_budget = 20` that had spent it kept
/// getting a routine's slots admitted, one per slot (its queue went from 3
/// to 57 in ten minutes), for one turn to take them all after the pause.
/// While it is paused its slots wait, untouched; when the pause ends (the
/// next UTC midnight) they are handled like slots missed in downtime:
/// `"once"` runs once, late, naming the first; `"skip"` lets them pass and
/// runs the slot that is on time.
#[tokio::test(start_paused = true)]
async fn slots_that_come_while_the_bot_is_paused_are_caught_up_like_downtime() {
    let rig = Rig::new("2026-06-01T23:50:05Z").await;
    let mut bot = rig.store.get_bot(&rig.bot).await.unwrap().unwrap();
    bot.settings = json!({ "daily_token_budget": 20 });
    rig.store
        .write(vec![
            Mutation::UpsertBot(bot),
            Mutation::AddUsage {
                bot: rig.bot.clone(),
                day: "2026-06-01".into(),
                turns: 1,
                usage: TokenUsage {
                    calls: 1,
                    prompt_tokens: 25,
                    completion_tokens: 5,
                    ..TokenUsage::default()
                },
            },
        ])
        .await
        .unwrap();
    let h = rig.scheduler(every_10s()).await;
    let first = ms("2026-06-01T23:50:10Z");
    let midnight = ms("2026-06-02T00:00:00Z");
    for name in ["skip", "once"] {
        assert_eq!(rig.next_fire(name).await, Some(first));
    }

    // the slots up to 23:59:50 come while paused: none is admitted or
    // moved on
    for i in 0..59 {
        rig.clock.set(at("2026-06-01T23:50:10Z"));
        rig.clock.advance_ms(i * 10_000);
        for f in h.tick().await.unwrap() {
            assert_eq!(f.slot_ms, first, "{f:?}");
            assert_eq!(
                f.outcome,
                FireOutcome::Paused { until_ms: midnight },
                "{f:?}"
            );
        }
    }
    for name in ["skip", "once"] {
        assert!(rig.events(name).await.is_empty(), "{name}");
        assert_eq!(rig.next_fire(name).await, Some(first), "{name}");
    }
    assert!(rig.store.pending_inbox(&rig.bot).await.unwrap().is_empty());

    // the pause ends at midnight: one run each, as after downtime
    rig.clock.set(at("2026-06-02T00:00:03Z"));
    let fired = h.tick().await.unwrap();
    let once: Vec<_> = fired.iter().filter(|f| f.name == "once").collect();
    assert_eq!(once.len(), 1, "{fired:?}");
    assert_eq!(once[0].slot_ms, first);
    assert!(
        matches!(once[0].outcome, FireOutcome::Fired { late: true, .. }),
        "{fired:?}"
    );
    let skip: Vec<_> = fired.iter().filter(|f| f.name == "skip").collect();
    assert_eq!(skip.len(), 2, "{fired:?}");
    assert_eq!(
        (skip[0].slot_ms, &skip[0].outcome),
        (first, &FireOutcome::Skipped)
    );
    assert_eq!(skip[1].slot_ms, midnight);
    assert!(
        matches!(skip[1].outcome, FireOutcome::Fired { late: false, .. }),
        "{fired:?}"
    );
    let once = texts(rig.events("once").await);
    assert_eq!(once.len(), 1, "{once:?}");
    assert!(once[0].contains("2026-06-01 23:50:10 UTC"), "{}", once[0]);
    assert!(once[0].contains("runs late"), "{}", once[0]);
    let skip = texts(rig.events("skip").await);
    assert_eq!(skip.len(), 1, "{skip:?}");
    assert!(skip[0].contains("2026-06-02 00:00:00 UTC"), "{}", skip[0]);
    assert_eq!(rig.store.pending_inbox(&rig.bot).await.unwrap().len(), 2);
    for name in ["skip", "once"] {
        assert_eq!(
            rig.next_fire(name).await,
            Some(ms("2026-06-02T00:00:10Z")),
            "{name}"
        );
    }
    h.stop().await;
}
