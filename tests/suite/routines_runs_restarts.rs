//! Routines: what the routine view and `botfleet routines`
//! tell of a routine's last run and of a bot that does not run its
//! routines; restarts in a daylight-saving gap or fold; fleet.toml and the
//! API naming the same routine; an API routine of a bot given away.

use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;
use crate::support::process::cli;
use crate::support::process::poll;
use crate::support::routines::FAILING;
use crate::support::routines::once_in;

/// Regression: a routine deleted and made again under the same name
/// showed the deleted routine's last run as its own — `last_status:
/// "failed"`, the old turn and error, beside `last_fire: null` — and `botfleet
/// routines` told the user to `botfleet retry` that old turn (the deleted
/// routine's prompt) though the new routine had never run.
#[tokio::test]
async fn a_routine_made_again_under_a_deleted_ones_name_has_no_last_run() {
    let host = TestFleet::new()
        .script("s", FAILING)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let put = |body: Value| {
        host.call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/brief",
            TOKEN,
            Some(body),
        )
    };
    let (status, body) = put(json!({"cron": once_in(3), "timezone": "UTC",
                                    "prompt": "FAILME now"}))
    .await;
    assert_eq!(status, 201, "{body}");
    let failed = host
        .wait_get("/v1/bots/r/routines", |v| {
            v["routines"][0]["last_status"]
                .as_str()
                .filter(|s| *s == "failed")
                .map(|_| v["routines"][0].clone())
        })
        .await;
    assert!(failed["last_turn"].is_string(), "{failed}");

    let (status, body) = host
        .call(
            reqwest::Method::DELETE,
            "/v1/bots/r/routines/brief",
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = put(json!({"cron": "0 0 1 1 *", "timezone": "UTC",
                                    "prompt": "Brief me."}))
    .await;
    assert_eq!(status, 201, "{body}");
    let fresh = |r: &Value| {
        (
            r["last_fire"].clone(),
            r["last_status"].clone(),
            r["last_turn"].clone(),
            r["last_error"].clone(),
        )
    };
    let none = (Value::Null, Value::Null, Value::Null, Value::Null);
    assert_eq!(fresh(&body["routine"]), none, "{body}");
    let (status, body) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(fresh(&body["routines"][0]), none, "{body}");

    let (code, out, err) = cli(&["routines", "r"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let row = out.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("brief ") && !row.contains("failed") && !out.contains("retry"),
        "{out}"
    );
    host.shutdown().await;
}

/// Regression: `botfleet routines` listed the routines of a bot that does
/// not run them as if they would fire: a removed bot's with their next
/// slots to come (they pass without a run), and a bot paused by its daily
/// token budget's with a NEXT in the past and no word why (the slot waits
/// for the pause's end). The listing now says so under the table.
#[tokio::test]
async fn the_cli_listing_says_why_a_bots_routines_do_not_run() {
    let host = TestFleet::new()
        .midday()
        .script(
            "s",
            "[[rule]]\nsteps = [ { tool = \"SendMessage\", args = { text = \"ok\" } } ]\n",
        )
        .bot("r", "s", &["SendMessage"])
        .bot_lines("daily_token_budget = 1")
        .bot("gone", "s", &["SendMessage"])
        .start()
        .await;
    for bot in ["r", "gone"] {
        let (status, body) = host
            .call(
                reqwest::Method::PUT,
                &format!("/v1/bots/{bot}/routines/daily"),
                TOKEN,
                Some(json!({"cron": "0 8 * * *", "timezone": "UTC", "prompt": "Brief me."})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (code, out, err) = cli(&["routines", "gone"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().count(),
        2,
        "a bot that runs its routines: no note\n{out}"
    );

    // r spends its budget with one turn
    host.complete_turn("r", "hello").await;
    let until = host
        .wait_get("/v1/bots", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| b["id"] == "r")?
                .get("paused_until")
                .filter(|u| u.is_i64())
                .cloned()
        })
        .await;
    let until = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(until.as_i64().unwrap())
        .unwrap()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    let (code, out, err) = cli(&["routines", "r"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "r is paused by its daily token budget until {until}: its routines wait"
        )),
        "{out}"
    );

    // gone leaves fleet.toml: its API routine stays, and runs no more
    let fleet = host.shutdown().await.without_bot("gone");
    fleet.write();
    let host = restart(fleet).await;
    let (code, out, err) = cli(&["routines", "gone"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|row| row.starts_with("daily "))
            && out.contains("gone is removed: its routines do not run")
            && out.contains("`botfleet routines remove gone NAME`"),
        "{out}"
    );
    // with its last routine removed, nothing offers a `put` the host
    // refuses (QA: "gone has no routines; add one with …", then 409)
    let (code, _, err) = cli(
        &["routines", "remove", "gone", "daily"],
        host.url.as_str(),
        TOKEN,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = cli(&["routines", "gone"], host.url.as_str(), TOKEN).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("gone is removed") && !err.contains("routines put"),
        "{err}"
    );
    host.shutdown().await;
}

/// The host stopped across a routine's slot and started again with the
/// clock in a daylight-saving gap or in the repeated hour of its zone
/// (America/New_York): `catch_up = "once"` runs the missed slot once,
/// late, naming it; `"skip"` lets it pass and runs a slot not yet a
/// minute late on time, once; no slot runs twice.
#[tokio::test(start_paused = true)]
async fn a_restart_in_a_dst_gap_or_fold_catches_up_once_or_skips() {
    use botfleet_actors::scheduler::RoutineSpec;
    use botfleet_memory::CatchUp;
    use botfleet_memory::EntryKind;

    use super::routines::Rig;
    use super::routines::at;
    use super::routines::ms;
    use super::routines::spec;

    let with = |name: &str, cron: &str, catch_up: CatchUp| {
        let mut s = spec(name, cron, "America/New_York");
        s.catch_up = catch_up;
        s
    };
    /// Starts the scheduler again at `back`; per routine that ran, its
    /// name, whether it ran late, and the slot its input names.
    async fn back_at(rig: &Rig, config: &[RoutineSpec], back: &str) -> Vec<(String, bool, String)> {
        rig.clock.set(at(back));
        let h = rig.scheduler(config.to_vec()).await;
        // the start catches up (its own tick, or this one: whichever comes
        // first); a second tick at the same instant fires nothing more
        h.tick().await.unwrap();
        let again = h.tick().await.unwrap();
        assert!(again.is_empty(), "a slot ran twice: {again:?}");
        h.stop().await;
        let mut ran = Vec::new();
        for name in config.iter().map(|s| s.name.clone()) {
            for e in rig.events(&name).await {
                let EntryKind::Event { text, .. } = &e.kind else {
                    continue;
                };
                let slot = text
                    .split("scheduled for ")
                    .nth(1)
                    .and_then(|t| t.split(" (").next())
                    .unwrap_or_default();
                ran.push((name.clone(), text.contains("runs late"), slot.to_owned()));
            }
        }
        ran
    }
    let ran = |name: &str, late: bool, slot: &str| (name.to_owned(), late, slot.to_owned());

    // spring forward, 2026-03-08 02:00 EST → 03:00 EDT; down from 01:00
    // EST to 03:10 EDT
    let gap = [
        with("wall-once", "30 2 * * *", CatchUp::Once),
        with("wall-skip", "30 2 * * *", CatchUp::Skip),
        with("real-once", "*/30 * * * *", CatchUp::Once),
        with("real-skip", "*/30 * * * *", CatchUp::Skip),
    ];
    let rig = Rig::new("2026-03-08T06:00:00Z").await;
    rig.scheduler(gap.to_vec()).await.stop().await;
    assert_eq!(
        back_at(&rig, &gap, "2026-03-08T07:10:00Z").await,
        vec![
            // 02:30 does not exist: its slot was the gap's end
            ran("wall-once", true, "2026-03-08 03:00:00 EDT"),
            ran("real-once", true, "2026-03-08 01:30:00 EST"),
        ]
    );
    for (name, next) in [
        ("wall-once", "2026-03-09T06:30:00Z"),
        ("wall-skip", "2026-03-09T06:30:00Z"),
        ("real-once", "2026-03-08T07:30:00Z"),
        ("real-skip", "2026-03-08T07:30:00Z"),
    ] {
        assert_eq!(rig.next_fire(name).await, Some(ms(next)), "{name}");
    }

    // fall back, 2026-11-01 02:00 EDT → 01:00 EST; down from 00:45 EDT to
    // 01:30:30 EST, 30 s after the repeated hour's second 01:30
    let fold = [
        with("wall-once", "30 1 * * *", CatchUp::Once),
        with("wall-skip", "30 1 * * *", CatchUp::Skip),
        with("real-once", "*/30 * * * *", CatchUp::Once),
        with("real-skip", "*/30 * * * *", CatchUp::Skip),
    ];
    let rig = Rig::new("2026-11-01T04:45:00Z").await;
    rig.scheduler(fold.to_vec()).await.stop().await;
    assert_eq!(
        back_at(&rig, &fold, "2026-11-01T06:30:30Z").await,
        vec![
            ran("wall-once", true, "2026-11-01 01:30:00 EDT"),
            ran("real-once", true, "2026-11-01 01:00:00 EDT"),
            // the second 01:30 is a slot of real time only, and on time
            ran("real-skip", false, "2026-11-01 01:30:00 EST"),
        ]
    );
    for (name, next) in [
        ("wall-once", "2026-11-02T06:30:00Z"),
        ("wall-skip", "2026-11-02T06:30:00Z"),
        ("real-once", "2026-11-01T07:00:00Z"),
        ("real-skip", "2026-11-01T07:00:00Z"),
    ] {
        assert_eq!(rig.next_fire(name).await, Some(ms(next)), "{name}");
    }
}

/// A routine made through the API, then written into fleet.toml under its
/// name while the host was down: the file wins at the next start (the
/// routine becomes the file's: its definition, and the API may no longer
/// change it), as another routine: made at that start, with no runs of the
/// API's (QA, 2026-12-05: it was listed with the API routine's creation
/// and last run, whose failure offered a retry of the API's prompt);
/// taken out of the file again, it is gone, the API's one does not come
/// back (docs/operations.md, "Routines and webhooks").
#[tokio::test(start_paused = true)]
async fn fleet_toml_wins_over_an_api_routine_of_its_name_at_the_next_start() {
    use botfleet_actors::scheduler::SchedulerError;
    use botfleet_memory::RoutineOrigin;

    use super::routines::Rig;
    use super::routines::ms;
    use super::routines::spec;

    let rig = Rig::new("2026-06-01T00:00:00Z").await;
    let h = rig.scheduler(vec![]).await;
    for name in ["same", "other"] {
        h.put(&rig.bot, spec(name, "0 10 * * *", "UTC"))
            .await
            .unwrap();
    }
    h.stop().await;

    // down; the file now has both names, one with the API's schedule
    rig.clock.set(super::routines::at("2026-06-01T08:00:00Z"));
    let mut same = spec("same", "0 10 * * *", "UTC");
    same.prompt = "From the file.".into();
    let config = vec![same, spec("other", "30 9 * * *", "UTC")];
    let h = rig.scheduler(config.clone()).await;
    // the owner's routines that went are named, with what they were (QA,
    // 2026-12-04: they went without a word)
    let notes = h.start_notes();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains("routine \"same\"")
            && n.contains("cron \"0 10 * * *\"")
            && n.contains("another name")),
        "{notes:?}"
    );
    // one line of single spaces (QA: runs of ten spaces inside it)
    assert!(notes.iter().all(|n| !n.contains("  ")), "{notes:?}");
    let listed = h.list(&rig.bot).await.unwrap();
    let seen: Vec<(&str, RoutineOrigin, &str, Option<i64>)> = listed
        .iter()
        .map(|r| (r.name.as_str(), r.origin, r.prompt.as_str(), r.next_fire_ms))
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "other",
                RoutineOrigin::Config,
                "Run the other routine.",
                Some(ms("2026-06-01T09:30:00Z"))
            ),
            (
                "same",
                RoutineOrigin::Config,
                "From the file.",
                Some(ms("2026-06-01T10:00:00Z"))
            ),
        ]
    );
    let made: Vec<(&str, i64, Option<i64>)> = listed
        .iter()
        .map(|r| (r.name.as_str(), r.created_at, r.last_fire_ms))
        .collect();
    let start = ms("2026-06-01T08:00:00Z");
    assert_eq!(made, vec![("other", start, None), ("same", start, None)]);
    assert!(matches!(
        h.put(&rig.bot, spec("same", "0 11 * * *", "UTC")).await,
        Err(SchedulerError::ConfigOwned { .. })
    ));
    assert!(matches!(
        h.delete(&rig.bot, "other").await,
        Err(SchedulerError::ConfigOwned { .. })
    ));
    h.stop().await;
    // so the store has them, read at the next start
    rig.clock.set(super::routines::at("2026-06-01T08:30:00Z"));
    let h = rig.scheduler(config).await;
    let made: Vec<(String, i64)> = h
        .list(&rig.bot)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.created_at))
        .collect();
    assert_eq!(made, vec![("other".into(), start), ("same".into(), start)]);
    h.stop().await;

    // out of the file again: gone, both
    let h = rig.scheduler(vec![]).await;
    assert_eq!(h.list(&rig.bot).await.unwrap(), vec![]);
    h.stop().await;
}

/// A routine made through the API, then one written into fleet.toml
/// under its name in another case (`c2`, `C2`): one name to people, as
/// the API's own check holds, so the file's replaces it at the next start
/// and the banner says so (QA, 2026-12-06: both were kept, each with its
/// schedule and session, without a word).
#[tokio::test(start_paused = true)]
async fn a_file_routine_replaces_an_api_routine_whose_name_differs_only_in_case() {
    use botfleet_memory::RoutineOrigin;

    use super::routines::Rig;
    use super::routines::spec;

    let rig = Rig::new("2026-06-01T00:00:00Z").await;
    let h = rig.scheduler(vec![]).await;
    h.put(&rig.bot, spec("c2", "0 10 * * *", "UTC"))
        .await
        .unwrap();
    h.stop().await;
    let h = rig.scheduler(vec![spec("C2", "30 9 * * *", "UTC")]).await;
    let notes = h.start_notes();
    assert!(
        notes.len() == 1
            && notes[0].contains("routine \"c2\"")
            && notes[0].contains("cron \"0 10 * * *\"")
            && notes[0].contains("\"C2\", a name differing from it only in case"),
        "{notes:?}"
    );
    let listed: Vec<(String, RoutineOrigin)> = h
        .list(&rig.bot)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.origin))
        .collect();
    assert_eq!(listed, vec![("C2".to_owned(), RoutineOrigin::Config)]);
    h.stop().await;
    // gone from the store too: the next start reads only the file's
    let h = rig.scheduler(vec![spec("C2", "30 9 * * *", "UTC")]).await;
    assert!(h.start_notes().is_empty(), "{:?}", h.start_notes());
    let names: Vec<String> = h
        .list(&rig.bot)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["C2"]);
    h.stop().await;
}

/// Regression: a routine the owner made through the API went with the
/// bot when fleet.toml gave the bot to another user, and kept firing for
/// the new owner: the former owner's prompt ran with the new owner's
/// tools, workspace and secrets, which an owner change promises never
/// happens (docs/operations.md, "Changing a bot's owner"). The change now
/// removes it; the file's routine, the operator's, goes with the bot and
/// fires for the new owner; the former owner sees neither.
#[tokio::test]
async fn a_former_owners_api_routine_does_not_run_for_the_new_owner() {
    use crate::support::fleet::BOB_TOKEN;

    let script = "[[rule]]\nsteps = [ { text = \"noted\" } ]\n";
    let daily = "[[bots.routines]]\nname = \"daily\"\ncron = \"* * * * * *\"\n\
                 timezone = \"UTC\"\nprompt = \"Daily.\"\n";
    let host = TestFleet::new()
        .script("s", script)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(daily)
        .start()
        .await;
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/tick",
            TOKEN,
            Some(json!({"cron": "* * * * * *", "timezone": "UTC", "prompt": "Tick."})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // it ran for alice
    host.wait_get("/v1/bots/r/routines", |v| {
        let routines = v["routines"].as_array()?;
        let tick = routines.iter().find(|r| r["name"] == "tick")?;
        tick["last_fire_ms"].as_i64().map(Value::from)
    })
    .await;
    let session = host
        .wait_get("/v1/search?q=Tick", |v| {
            v["hits"][0]["session"].as_str().map(Value::from)
        })
        .await;
    let session = session.as_str().unwrap().to_owned();
    let fleet = host
        .shutdown()
        .await
        .without_bot("r")
        .bot_of("r", "s", &["SendMessage"], "bob")
        .bot_lines(daily);
    fleet.write();
    let host = restart(fleet).await;
    let (status, _) = host.get("/v1/bots/r/routines", TOKEN).await;
    assert_eq!(status, 404, "the former owner no longer sees them");
    let (status, after) = host.get("/v1/bots/r/routines", BOB_TOKEN).await;
    assert_eq!(status, 200, "{after}");
    let names: Vec<&str> = after["routines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["daily"], "alice's API routine is gone: {after}");
    // and its runs are not bob's to read: alice's prompts, what the bot
    // sent her (QA: bob read and searched them)
    let (_, found) = host.get("/v1/search?q=Tick", BOB_TOKEN).await;
    assert_eq!(found["hits"], json!([]), "{found}");
    let (status, page) = host
        .get(&format!("/v1/sessions/{session}/entries"), BOB_TOKEN)
        .await;
    assert_eq!(status, 200, "{page}");
    // (a run admitted before the change and cut off by the stop finishes
    // after it, as documented: its steps are after the floor, its prompt
    // before it; the routine fires every second, so one may be)
    let entries = page["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .all(|e| e["kind"] != "event" && !e.to_string().contains("Tick.")),
        "{page}"
    );
    let last = after["routines"][0]["last_fire_ms"].as_i64().unwrap_or(0);
    // the file's fires on, for bob
    poll(20, async || {
        let (_, now) = host.get("/v1/bots/r/routines", BOB_TOKEN).await;
        match now["routines"][0]["last_fire_ms"].as_i64() {
            Some(fire) if fire > last => Ok(()),
            _ => Err(format!("no fire of daily for bob yet: {now}")),
        }
    })
    .await;
    // and bob may make a routine of that name again, his own
    let (status, body) = host
        .call(
            reqwest::Method::PUT,
            "/v1/bots/r/routines/tick",
            BOB_TOKEN,
            Some(json!({"cron": "0 9 * * *", "timezone": "UTC", "prompt": "Bob's tick."})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert!(body["last_status"].is_null(), "{body}");
    host.shutdown().await;
}

/// Regression: a routine planned while the wall clock ran ahead (a host
/// whose clock was set a year ahead, then corrected by NTP; a VM restored
/// with a wrong clock) kept its next slot in that future: once the clock
/// was right again, the routine fired no more until the clock got there —
/// silently, for a year here. A clock set back is noticed now, running or
/// at a start: such a routine is planned again from now; a slot that
/// already ran does not run again when the clock passes it a second time.
#[tokio::test(start_paused = true)]
async fn a_clock_set_back_plans_routines_again_from_now() {
    use super::routines::Rig;
    use super::routines::at;
    use super::routines::ms;
    use super::routines::slots;
    use super::routines::spec;

    // a year ahead
    let rig = Rig::new("2027-06-01T08:00:00Z").await;
    let config = vec![spec("daily", "0 9 * * *", "UTC")];
    let h = rig.scheduler(config.clone()).await;
    h.tick().await.unwrap();
    assert_eq!(
        rig.next_fire("daily").await,
        Some(ms("2027-06-01T09:00:00Z"))
    );
    // corrected while the host runs
    rig.clock.set(at("2026-06-01T08:00:00Z"));
    assert_eq!(h.tick().await.unwrap(), vec![]);
    assert_eq!(
        rig.next_fire("daily").await,
        Some(ms("2026-06-01T09:00:00Z"))
    );
    rig.clock.set(at("2026-06-01T09:00:00Z"));
    assert_eq!(
        slots(&h.tick().await.unwrap()),
        vec![("daily".to_owned(), ms("2026-06-01T09:00:00Z"), false)]
    );
    // set back a second after that run: the slot that ran waits again,
    // and passes without a second run
    rig.clock.set(at("2026-06-01T08:59:59Z"));
    h.tick().await.unwrap();
    rig.clock.set(at("2026-06-01T09:00:00Z"));
    h.tick().await.unwrap();
    assert_eq!(
        rig.events("daily").await.len(),
        1,
        "the 09:00 slot ran once"
    );
    assert_eq!(
        rig.next_fire("daily").await,
        Some(ms("2026-06-02T09:00:00Z"))
    );

    // ahead again, then corrected while the host was down: the start sees it
    rig.clock.set(at("2027-06-01T08:00:00Z"));
    h.tick().await.unwrap();
    h.stop().await;
    assert_eq!(
        rig.next_fire("daily").await,
        Some(ms("2027-06-01T09:00:00Z"))
    );
    rig.clock.set(at("2026-06-02T08:00:00Z"));
    let h = rig.scheduler(config).await;
    h.tick().await.unwrap();
    assert_eq!(
        rig.next_fire("daily").await,
        Some(ms("2026-06-02T09:00:00Z"))
    );
    h.stop().await;
}
