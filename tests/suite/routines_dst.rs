//! Routines on daylight-saving transition days (New York, Berlin): a
//! wall time that does not exist runs once right after the gap, one that
//! happens twice runs once. With the rig of `routines.rs`: a manual clock
//! and tokio's paused clock.

use botfleet_actors::scheduler::FireOutcome;
use botfleet_actors::scheduler::SchedulerHandle;
use chrono::DateTime;
use chrono::Utc;
use pretty_assertions::assert_eq;

use super::routines::Rig;
use super::routines::at;
use super::routines::ms;
use super::routines::spec;

/// Fires routine `name` at each instant and answers the slots that fired.
async fn fire_at(rig: &Rig, h: &SchedulerHandle, instants: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for i in instants {
        rig.clock.set(at(i));
        for f in h.tick().await.unwrap() {
            let FireOutcome::Fired { .. } = f.outcome else {
                panic!("{f:?}")
            };
            out.push(
                DateTime::<Utc>::from_timestamp_millis(f.slot_ms)
                    .unwrap()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn new_york_transition_days() {
    let rig = Rig::new("2026-03-08T05:00:00Z").await;
    let h = rig
        .scheduler(vec![spec("gap", "30 2 * * *", "America/New_York")])
        .await;
    // spring forward (2026-03-08): 02:30 does not exist; it runs at 03:00 EDT
    assert_eq!(rig.next_fire("gap").await, Some(ms("2026-03-08T07:00:00Z")));
    assert_eq!(
        fire_at(
            &rig,
            &h,
            &[
                "2026-03-08T06:30:00Z", // 01:30 EST
                "2026-03-08T06:59:59Z", // 01:59:59 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT
                "2026-03-08T07:30:00Z", // 03:30 EDT
            ]
        )
        .await,
        vec!["2026-03-08T07:00:00Z"]
    );
    assert_eq!(rig.next_fire("gap").await, Some(ms("2026-03-09T06:30:00Z")));
    h.stop().await;

    // fall back (2026-11-01): 01:30 happens twice and runs once
    rig.clock.set(at("2026-10-31T12:00:00Z"));
    let h = rig
        .scheduler(vec![spec("fold", "30 1 * * *", "America/New_York")])
        .await;
    assert_eq!(
        fire_at(
            &rig,
            &h,
            &[
                "2026-10-31T12:00:01Z",
                "2026-11-01T05:30:00Z", // 01:30 EDT
                "2026-11-01T06:30:00Z", // 01:30 EST: the same wall time again
                "2026-11-01T07:30:00Z",
                "2026-11-02T06:30:00Z", // the next day, 01:30 EST
            ]
        )
        .await,
        vec!["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn berlin_transition_days() {
    let rig = Rig::new("2026-03-28T12:00:00Z").await;
    let h = rig
        .scheduler(vec![spec("night", "30 2 * * *", "Europe/Berlin")])
        .await;
    assert_eq!(
        fire_at(
            &rig,
            &h,
            &[
                "2026-03-29T00:30:00Z", // 01:30 CET: not yet
                "2026-03-29T01:00:00Z", // 03:00 CEST, right after the gap
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ]
        )
        .await,
        vec!["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]
    );
    h.stop().await;
    let rig = Rig::new("2026-10-24T12:00:00Z").await;
    let h = rig
        .scheduler(vec![spec("night", "30 2 * * *", "Europe/Berlin")])
        .await;
    assert_eq!(
        fire_at(
            &rig,
            &h,
            &[
                "2026-10-25T00:30:00Z", // 02:30 CEST
                "2026-10-25T01:30:00Z", // 02:30 CET: repeated, not run
                "2026-10-26T01:30:00Z", // 02:30 CET the next day
            ]
        )
        .await,
        vec!["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    );
    h.stop().await;
}
