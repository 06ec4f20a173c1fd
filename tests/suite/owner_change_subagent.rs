//! A subagent's task delegated from a person's DM does not run on after
//! fleet.toml gives the bot to someone else: a real host (`botfleet run`)
//! on an OpenAI-compatible server on loopback is killed with SIGKILL while
//! the subagent that alice's DM set off waits for the model, and restarts
//! with bot `boss` given to bob. The subagent's task ends `failed` without
//! a model call (its Shell never writes into bob's workspace), with an
//! `owner_changed` notice in its task session; the report `boss` gets, in
//! its own session with the subagent (bob's, never alice's DM), says the
//! task was not run because the bot changed owner, and CheckSubagent shows
//! it failed and why.
//!
//! bob reads the task session only from the change on: the task is
//! alice's words, as her DM is.
//!
//! Before, the subagent asked the model again with alice's task and its
//! Shell ran in `data/workspace/bob` (H4 finding 16); its report came from
//! that run, and nobody was told that work alice ordered ran on bob's
//! files.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use botfleet::memory::BotId;
use botfleet::memory::SessionKey;
use botfleet::memory::SessionKind;
use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::crash::turn_ended;
use super::crash::wait_until;
use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::results_since_input;
use crate::support::openai_server::user_texts;
use crate::support::process::HostProcess;
use crate::support::process::free_port;
use crate::support::process::poll;

/// What marks the subagent's task in its requests.
const SUBTASK: &str = "SUBTASK ownerchg";
/// The file the task's Shell writes once it runs after its first steps.
const MARKER: &str = "alice_was_here.txt";
/// What the task's Shell steps before it write.
const PROGRESS: &str = "progress.txt";
/// What the subagent reports if its task runs to the end.
const DONE: &str = "SUBDONE";

const TOOLS: &[&str] = &[
    "SendMessage",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
    "Shell",
];

/// What alice asks `boss` for once it is hers again: more work for the
/// subagent, given with MessageSubagent as [`STEER`].
const MORE: &str = "MORE for the subagent";
/// The work [`MORE`] gives the subagent.
const STEER: &str = "STEER carry on";

/// Whether `request` is one of the subagent's (its task is in it).
fn is_subagent(request: &Value) -> bool {
    user_texts(request).iter().any(|t| t.contains(SUBTASK))
}

fn call(n: usize, tool: &str, args: Value) -> Reply {
    Reply::tool_call(&format!("call_{n}"), tool, args.to_string())
}

/// The model. The subagent takes `steps` Shell steps writing
/// [`PROGRESS`], then one writing [`MARKER`] (held at `gate`, which
/// never opens, until `after` is set: the restart cuts it off), then
/// reports [`DONE`]. `boss` in alice's DM starts the task with Task and
/// says so; woken by the subagent's report, it runs CheckSubagent on it.
fn model(request: &Value, steps: usize, after: &AtomicBool, gate: &watch::Receiver<bool>) -> Reply {
    let n = results_since_input(request);
    if is_subagent(request) {
        return if n < steps {
            call(
                n,
                "Shell",
                json!({ "command": format!("echo step >> {PROGRESS}") }),
            )
        } else if n == steps {
            let write = call(
                n,
                "Shell",
                json!({ "command": format!("pwd; echo written-by-alices-task > {MARKER}") }),
            );
            if after.load(Ordering::SeqCst) {
                write
            } else {
                write.hold_until(gate.clone())
            }
        } else if n == steps + 1 {
            call(n, "SendMessage", json!({ "text": DONE }))
        } else {
            Reply::text("")
        };
    }
    let after_tool = last_message(request).is_some_and(|m| m["role"] == "tool");
    let asked_more = user_texts(request).last().is_some_and(|t| t.contains(MORE));
    if asked_more {
        let sub = user_texts(request)
            .iter()
            .find_map(|t| t.split("SUB=").nth(1).map(|id| id.trim().to_owned()));
        return match (after_tool, sub) {
            (false, Some(id)) => call(n, "MessageSubagent", json!({ "id": id, "text": STEER })),
            _ => Reply::text(""),
        };
    }
    let report = user_texts(request)
        .iter()
        .rev()
        .find_map(|t| subagent_in_report(t));
    match report {
        Some(id) if !after_tool => call(n, "CheckSubagent", json!({ "id": id })),
        Some(_) => Reply::text(""),
        None => match n {
            0 => call(
                n,
                "Task",
                json!({ "description": "ownerchg", "prompt": SUBTASK }),
            ),
            1 => call(n, "SendMessage", json!({ "text": "delegated" })),
            _ => Reply::text(""),
        },
    }
}

/// The subagent a report to its parent is from (`subagent_report.md`:
/// "Message from bot `ID`, your subagent: ...").
fn subagent_in_report(text: &str) -> Option<String> {
    let rest = text.split("Message from bot `").nth(1)?;
    let (id, tail) = rest.split_once('`')?;
    tail.starts_with(", your subagent").then(|| id.to_owned())
}

fn session_id(bot: &str, kind: SessionKind, peer: &str) -> String {
    SessionKey {
        bot: BotId::new(bot).unwrap(),
        kind,
        peer: peer.into(),
    }
    .id()
    .to_string()
}

/// Every file named `name` under `dir`, at any depth.
fn found(dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(list) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in list.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(found(&path, name));
        } else if e.file_name() == name {
            out.push(path);
        }
    }
    out
}

/// The subagent's requests among `requests`.
fn subagent_requests(server: &OpenAiServer, from: usize) -> usize {
    server
        .requests()
        .iter()
        .skip(from)
        .filter(|r| is_subagent(&r.body))
        .count()
}

/// Alice's DM sets `boss` delegating; the subagent takes `steps` steps,
/// and the host is killed while it waits for the model in the next one;
/// the host restarts with `boss` given to bob.
async fn task_of_the_former_owner_ends_unrun(steps: usize) {
    let after = Arc::new(AtomicBool::new(false));
    let (_open, gate) = watch::channel(false);
    let responder = {
        let after = Arc::clone(&after);
        move |b: &Value| model(b, steps, &after, &gate)
    };
    let server = OpenAiServer::builder().responder(responder).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("boss", "main", TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    let alice = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let (status, sent) = alice
        .send_message("boss", "DELEGATE it", &format!("ownerchg-sub-{steps}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    wait_until(&host.url, &dm, turn_ended(sent["seq"].as_i64().unwrap())).await;
    // the subagent's request of its step writing the marker is held
    while subagent_requests(&server, 0) < steps + 1 {
        server.wait_for_requests(server.request_count() + 1).await;
    }
    let sub = alice.get("/v1/bots").await.unwrap()["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["origin"] == "subagent:boss")
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .expect("boss's subagent");
    let before_restart = server.request_count();
    let url = host.url.clone();
    host.kill9().await;

    let fleet = fleet
        .without_bot("boss")
        .bot_of("boss", "main", TOOLS, "bob");
    fleet.write();
    after.store(true, Ordering::SeqCst);
    let host = HostProcess::start(&path, port, &log).await;
    let bob = botfleet::client::Client::new(&url, BOB_TOKEN).unwrap();

    // boss hears of it in its own session with the subagent, bob's, and
    // checks on it there
    let own = session_id("boss", SessionKind::Agent, &sub);
    let entries = poll(30, async || {
        let es = bob
            .entries_after(&own, 0)
            .await
            .map_err(|e| e.to_string())?;
        let checked = es
            .iter()
            .any(|e| e["kind"] == "tool_result" && e["name"] == "CheckSubagent");
        if checked {
            Ok(es)
        } else {
            Err(format!("{own}: {es:#?}"))
        }
    })
    .await;
    let reports: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "agent_message" && e["from"] == sub.as_str())
        .collect();
    assert_eq!(reports.len(), 1, "{entries:#?}");
    let report = reports[0]["text"].as_str().unwrap();
    assert!(
        report.contains("your former owner") && report.contains("not run"),
        "the report does not say the task was not run: {report}"
    );
    assert!(!report.contains(DONE), "{report}");
    let check = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "CheckSubagent")
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        check.contains("[failed]") && check.contains("your former owner"),
        "CheckSubagent: {check}"
    );
    // nor does CheckSubagent quote alice's task to bob's bot (review:
    // it read the task session past its floor)
    assert!(!check.contains(SUBTASK), "CheckSubagent: {check}");

    // the task ended in its session, saying why, without a model call
    let task = session_id(&sub, SessionKind::Subagent, "boss");
    let es = bob.entries_after(&task, 0).await.unwrap();
    let end = es
        .iter()
        .rev()
        .find(|e| e["kind"] == "turn_end")
        .unwrap_or_else(|| panic!("{es:#?}"));
    assert_eq!(end["status"], "failed", "{es:#?}");
    let notice = es
        .iter()
        .find(|e| e["kind"] == "notice" && e["turn"] == end["turn"])
        .unwrap_or_else(|| panic!("no notice: {es:#?}"));
    assert_eq!(notice["code"], "owner_changed", "{notice}");
    assert!(notice["retry_turn"].is_null(), "{notice}");
    // bob reads the task session from the change on: alice's task and
    // the steps taken for her before it are not his to read (before, the
    // session moved whole and bob read and searched her task), and no
    // step came after it
    assert!(
        !es.iter()
            .any(|e| e["kind"] == "assistant" || e.to_string().contains(SUBTASK)),
        "bob reads alice's task or the task stepped on: {es:#?}"
    );
    assert_eq!(
        subagent_requests(&server, before_restart),
        0,
        "the model was asked for the task after the owner change"
    );

    // nothing of the task ran in bob's workspace (or anywhere)
    let data = fleet.path().join("data");
    assert_eq!(found(&data, MARKER), Vec::<std::path::PathBuf>::new());
    if steps > 0 {
        let progress = found(&data.join("workspace/bob"), PROGRESS);
        assert!(progress.is_empty(), "{progress:?}");
    }

    // alice's DM got nothing, and she reads none of it
    let es = alice.entries_after(&dm, 0).await.unwrap();
    assert!(
        !es.iter().any(|e| e["kind"] == "agent_message"),
        "a report reached alice's DM: {es:#?}"
    );
    assert!(alice.entries_after(&own, 0).await.is_err());
    assert!(alice.entries_after(&task, 0).await.is_err());

    // bob has boss steer it: refused, and nothing of his is written into
    // alice's task (review: his steering was, and once the bot was given
    // back she read it)
    let (status, sent) = bob
        .send_message(
            "boss",
            &format!("{MORE} SUB={sub}"),
            &format!("bob-more-{steps}"),
        )
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let bobs = sent["session"].as_str().unwrap().to_owned();
    let es = poll(30, async || {
        let es = bob
            .entries_after(&bobs, 0)
            .await
            .map_err(|e| e.to_string())?;
        match es.iter().any(|e| e["kind"] == "turn_end") {
            true => Ok(es),
            false => Err(format!("{es:#?}")),
        }
    })
    .await;
    let refused = es
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "MessageSubagent")
        .unwrap_or_else(|| panic!("no MessageSubagent: {es:#?}"));
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["content"]
            .as_str()
            .is_some_and(|c| c.contains("another owner") && c.contains("was not sent")),
        "{refused}"
    );
    let es = bob.entries_after(&task, 0).await.unwrap();
    assert!(
        !es.iter().any(|e| e.to_string().contains(STEER)),
        "bob's steering is in the task: {es:#?}"
    );
    // nor does a retry of the task's turn run it again (review: it was
    // taken, ended the same way, and boss was told a second time)
    let ended = es
        .iter()
        .find(|e| e["kind"] == "turn_end")
        .and_then(|e| e["turn"].as_str())
        .unwrap_or_else(|| panic!("no turn end in the task: {es:#?}"))
        .to_owned();
    let retried = reqwest::Client::new()
        .post(format!("{}/v1/turns/{ended}/retry", host.url))
        .bearer_auth(BOB_TOKEN)
        .send()
        .await
        .unwrap();
    // (a turn the restart cut off started before the change: bob does
    // not see it, `404`; a queued task's turn started after it, `409`)
    let status = retried.status().as_u16();
    let said = retried.text().await.unwrap();
    if steps == 0 {
        assert_eq!(status, 409, "{said}");
        assert!(said.contains("cannot be retried"), "{said}");
    } else {
        assert!(status == 404 || status == 409, "{status} {said}");
    }

    // given back to alice, her task is whole again: she reads it, and
    // more work she has boss give it runs with the task in its context
    // (review: the first change's floor stayed, and cut the subagent's
    // context whoever owned the session)
    host.kill9().await;
    let fleet = fleet.without_bot("boss").bot("boss", "main", TOOLS);
    fleet.write();
    let host = HostProcess::start(&path, port, &log).await;
    let alice = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let es = alice.entries_after(&task, 0).await.unwrap();
    assert!(
        es.iter().any(|e| e.to_string().contains(SUBTASK)),
        "alice does not read her task: {es:#?}"
    );
    let before_more = server.request_count();
    let (status, sent) = alice
        .send_message(
            "boss",
            &format!("{MORE} SUB={sub}"),
            &format!("more-{steps}"),
        )
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 202, "{sent}");
    let steered = poll(30, async || {
        let found = server
            .requests()
            .iter()
            .skip(before_more)
            .find(|r| {
                let texts = user_texts(&r.body);
                texts.iter().any(|t| t.contains(STEER)) && !texts.iter().any(|t| t.contains(MORE))
            })
            .map(|r| r.body.clone());
        found.ok_or_else(|| format!("{} requests", server.request_count()))
    })
    .await;
    assert!(
        is_subagent(&steered),
        "the subagent's context lost its task: {:?}",
        user_texts(&steered)
    );
    host.kill9().await;
    server.shutdown().await;
}

/// The task waited for its first model answer: it is still queued after
/// the restart.
#[tokio::test]
async fn a_queued_task_of_the_former_owners_dm_ends_without_running() {
    task_of_the_former_owner_ends_unrun(0).await;
}

/// The task took a Shell step first: the restart cuts its turn off.
#[tokio::test]
async fn a_cut_off_task_of_the_former_owners_dm_ends_without_running() {
    task_of_the_former_owner_ends_unrun(1).await;
}

// An approval the subagent of such a task asked before the change reads
// `expired` (`owner_changed`) and can no longer be decided:
// `owner_change_approvals.rs`.

/// A routine alice made through the API sets `boss` delegating, and the
/// host is killed while the subagent waits for the model; `boss` goes to
/// bob. The routine goes with the change (its prompt is alice's), its
/// session goes to bob read from the change on, and the task it gave is
/// alice's instruction too: it ends `failed` without a model call, and
/// its Shell never writes; its title is withheld from bob. (Review: it ran
/// on with bob's tools, and bob read its title, as only a task given in
/// alice's DM or in a conversation with her bots ended.)
#[tokio::test]
async fn a_task_of_the_former_owners_api_routine_ends_without_running() {
    let after = Arc::new(AtomicBool::new(false));
    let (_open, gate) = watch::channel(false);
    let responder = {
        let after = Arc::clone(&after);
        move |b: &Value| model(b, 0, &after, &gate)
    };
    let server = OpenAiServer::builder().responder(responder).start().await;
    let fleet = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("boss", "main", TOOLS);
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    let port = free_port();

    let host = HostProcess::start(&path, port, &log).await;
    let alice = botfleet::client::Client::new(&host.url, TOKEN).unwrap();
    let routine =
        json!({ "cron": "* * * * * *", "timezone": "UTC", "prompt": "DELEGATE by routine" });
    alice
        .put_ok("/v1/bots/boss/routines/taxes", &routine)
        .await
        .unwrap();
    // the subagent's request of its step writing the marker is held
    while subagent_requests(&server, 0) < 1 {
        server.wait_for_requests(server.request_count() + 1).await;
    }
    alice.delete("/v1/bots/boss/routines/taxes").await.unwrap();
    let before_restart = server.request_count();
    let url = host.url.clone();
    host.kill9().await;

    let fleet = fleet
        .without_bot("boss")
        .bot_of("boss", "main", TOOLS, "bob");
    fleet.write();
    after.store(true, Ordering::SeqCst);
    let host = HostProcess::start(&path, port, &log).await;
    let bob = botfleet::client::Client::new(&url, BOB_TOKEN).unwrap();
    // every task the routine gave ends failed, none running again
    let subs = poll(30, async || {
        let bots = bob.get("/v1/bots").await.map_err(|e| e.to_string())?;
        let subs: Vec<Value> = bots["bots"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|b| b["origin"] == "subagent:boss")
            .collect();
        let ended = !subs.is_empty() && subs.iter().all(|b| b["subagent_status"] == "failed");
        if ended {
            Ok(subs)
        } else {
            Err(format!("{subs:#?}"))
        }
    })
    .await;
    for sub in &subs {
        let id = sub["id"].as_str().unwrap();
        // its title is alice's routine's words: withheld from bob
        let name = sub["name"].as_str().unwrap_or_default();
        assert!(
            !name.contains("ownerchg") && name.contains("(withheld)"),
            "{sub:#?}"
        );
        let task = session_id(id, SessionKind::Subagent, "boss");
        let es = bob.entries_after(&task, 0).await.unwrap();
        assert!(
            es.iter()
                .any(|e| e["kind"] == "notice" && e["code"] == "owner_changed"),
            "{es:#?}"
        );
    }
    assert_eq!(
        subagent_requests(&server, before_restart),
        0,
        "the model was asked for the task after the owner change"
    );
    // each report reaches boss in its own session with the subagent, not
    // in the session of alice's routine (review: it woke boss there, to
    // take up her routine's work under bob)
    for sub in &subs {
        let id = sub["id"].as_str().unwrap();
        let own = session_id("boss", SessionKind::Agent, id);
        poll(30, async || {
            let es = bob
                .entries_after(&own, 0)
                .await
                .map_err(|e| e.to_string())?;
            match es
                .iter()
                .any(|e| e["kind"] == "agent_message" && e["from"] == id)
            {
                true => Ok(()),
                false => Err(format!("{own}: {es:#?}")),
            }
        })
        .await;
    }
    let routine = session_id("boss", SessionKind::Routine, "taxes");
    let es = bob.entries_after(&routine, 0).await.unwrap_or_default();
    assert!(
        !es.iter().any(|e| e["kind"] == "agent_message"),
        "a report woke boss in alice's routine's session: {es:#?}"
    );
    let data = fleet.path().join("data");
    assert_eq!(found(&data, MARKER), Vec::<std::path::PathBuf>::new());
    host.kill9().await;
    server.shutdown().await;
}
