#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::scheduler::spec::Schedule;

#[test]
fn on_time_fires_late_depends_on_catch_up() {
    let slot = 1_000_000;
    for c in [CatchUp::Once, CatchUp::Skip] {
        assert_eq!(
            plan_slot(slot, slot, c, None),
            SlotPlan::Fire { late: false }
        );
        assert_eq!(
            plan_slot(slot, slot + LATE_AFTER_MS, c, None),
            SlotPlan::Fire { late: false }
        );
    }
    let late = slot + LATE_AFTER_MS + 1;
    assert_eq!(
        plan_slot(slot, late, CatchUp::Once, None),
        SlotPlan::Fire { late: true }
    );
    assert_eq!(plan_slot(slot, late, CatchUp::Skip, None), SlotPlan::Skip);
    // a slot from before a restore is unknown, whatever the policy
    assert_eq!(
        plan_slot(slot, late, CatchUp::Once, Some(slot + 1)),
        SlotPlan::Unknown
    );
    assert_eq!(
        plan_slot(slot, slot, CatchUp::Once, Some(slot)),
        SlotPlan::Fire { late: false }
    );
}

#[test]
fn nonces_name_the_routine_and_slot() {
    assert_eq!(
        routine_nonce("brief", 1_764_547_200_000),
        "brief@1764547200000"
    );
    assert_eq!(
        routine_source(&botfleet_memory::BotId::new("r").unwrap()),
        "routine:r"
    );
}

/// The scheduler's loop reduced to its decisions: at each tick, a due slot
/// is planned; on time, the newest due slot fires; after a fire the
/// routine moves to the first slot after now, after a skip to the newest
/// slot not late yet, which fires in the same tick. Answers the fires and,
/// per tick, the slot pending before it.
fn simulate(
    schedule: &Schedule,
    start: i64,
    ticks: &[i64],
    catch_up: CatchUp,
) -> (Vec<(i64, i64)>, Vec<Option<i64>>) {
    let mut next = schedule.next_after(start);
    let mut fired = Vec::new();
    let mut pending = Vec::new();
    for &now in ticks {
        pending.push(next);
        let Some(mut slot) = next.filter(|s| *s <= now) else {
            continue;
        };
        if plan_slot(slot, now, catch_up, None) == SlotPlan::Skip {
            next = next_after_skip(schedule, now);
            let Some(on_time) = next.filter(|s| *s <= now) else {
                continue;
            };
            slot = on_time;
        }
        match plan_slot(slot, now, catch_up, None) {
            SlotPlan::Fire { late: false } => {
                slot = newest_due(schedule, slot, now);
                fired.push((slot, now));
            }
            SlotPlan::Fire { late: true } => fired.push((slot, now)),
            SlotPlan::Skip | SlotPlan::Unknown => {}
        }
        next = schedule.next_after(now.max(slot));
    }
    (fired, pending)
}

#[test]
fn skip_drops_late_slots_only() {
    let every_minute = Schedule::parse("* * * * *", "America/New_York").unwrap();
    let minute = 60_000;
    let t = 1_780_326_000_000; // 2026-06-01T15:00:00Z, a whole hour
    // 3 s after a slot: that slot (the one before it is late)
    assert_eq!(next_after_skip(&every_minute, t + 3_000), Some(t));
    // exactly LATE_AFTER_MS after a slot: still on time
    assert_eq!(
        next_after_skip(&every_minute, t + LATE_AFTER_MS),
        Some(t + minute)
    );
    let hourly = Schedule::parse("0 * * * *", "UTC").unwrap();
    // no slot within the grace: the next one
    assert_eq!(
        next_after_skip(&hourly, t + LATE_AFTER_MS + 1),
        Some(t + 60 * minute)
    );
    assert_eq!(next_after_skip(&hourly, t + 59_999), Some(t));
    // several slots within the grace: the newest
    let every_20s = Schedule::parse("*/20 * * * * *", "UTC").unwrap();
    assert_eq!(next_after_skip(&every_20s, t + 45_000), Some(t + 40_000));
}

/// Regression: a routine `*/10 * * * * *` whose host was down from
/// 10:22:01 to 10:22:37 ran the slot 10:22:10 (27 s late, not missed),
/// then 10:22:40; docs/operations.md says the newest due slot (10:22:30)
/// runs, once.
#[test]
fn on_time_runs_the_newest_due_slot() {
    let every_10s = Schedule::parse("*/10 * * * * *", "UTC").unwrap();
    let t = 1_780_309_320_000; // 2026-06-01T10:22:00Z
    assert_eq!(newest_due(&every_10s, t + 10_000, t + 37_000), t + 30_000);
    assert_eq!(newest_due(&every_10s, t + 10_000, t + 10_000), t + 10_000);
    assert_eq!(newest_due(&every_10s, t + 10_000, t + 19_999), t + 10_000);
    // slots far older than the grace are not walked through
    assert_eq!(newest_due(&every_10s, t - 86_400_000, t + 5_000), t);
    let hourly = Schedule::parse("0 * * * *", "UTC").unwrap();
    assert_eq!(
        newest_due(&hourly, t - 22 * 60_000, t + 5_000),
        t - 22 * 60_000
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the ticks (frequent, or with long gaps of downtime): no slot
    /// fires twice, a fire never precedes its slot, at most one fire per
    /// tick, skip never fires late, and a tick within the grace after a
    /// slot fires the newest slot due.
    #[test]
    fn slots_fire_at_most_once_and_never_early(
        cron in prop::sample::select(vec![
            "0 8 * * *", "*/15 * * * *", "30 2 * * *", "30 1 * * *", "0 9 * * 1-5", "*/20 * * * * *",
        ]),
        tz in prop::sample::select(vec!["UTC", "Asia/Shanghai", "America/New_York", "Europe/Berlin"]),
        gaps in prop::collection::vec(prop_oneof![
            4 => 1i64..=120_000,           // a busy host: ticks every so often
            1 => 120_000i64..=3 * 86_400_000, // downtime
        ], 1..60),
        start_day in 0i64..400,
        skip in any::<bool>(),
    ) {
        let schedule = Schedule::parse(cron, tz).unwrap();
        // from 2026-01-01 (covers both transitions of the year)
        let start = 1_767_225_600_000 + start_day * 86_400_000;
        let mut ticks = Vec::new();
        let mut t = start;
        for g in gaps {
            t += g;
            ticks.push(t);
        }
        let catch_up = if skip { CatchUp::Skip } else { CatchUp::Once };
        let (fired, pending) = simulate(&schedule, start, &ticks, catch_up);
        let slots: BTreeSet<i64> = fired.iter().map(|(s, _)| *s).collect();
        prop_assert_eq!(slots.len(), fired.len(), "a slot fired twice");
        let ticks_fired: BTreeSet<i64> = fired.iter().map(|(_, n)| *n).collect();
        prop_assert_eq!(ticks_fired.len(), fired.len(), "two fires in one tick");
        for (slot, now) in &fired {
            prop_assert!(slot <= now, "fired before its slot");
            if skip {
                prop_assert!(now - slot <= LATE_AFTER_MS, "skip fired a missed slot");
            }
        }
        // every tick that lands within the grace of the pending slot fires
        // the newest slot due (no older one); with skip, a tick after a
        // missed slot fires the newest slot still within its grace, if
        // there is one
        for (&now, next) in ticks.iter().zip(&pending) {
            let Some(slot) = next.filter(|s| *s <= now) else {
                continue;
            };
            if now - slot <= LATE_AFTER_MS {
                let newest = newest_due(&schedule, slot, now);
                prop_assert!(fired.contains(&(newest, now)), "the newest on-time slot did not fire");
                prop_assert_eq!(schedule.next_after(newest).filter(|s| *s <= now), None);
            } else if skip
                && let Some(on_time) = next_after_skip(&schedule, now).filter(|s| *s <= now)
            {
                prop_assert!(fired.contains(&(on_time, now)), "skip dropped an on-time slot");
            }
        }
    }
}
