//! A person's message interrupts a turn that waits for the workspace lock:
//! the wait ends, the waiting call is recorded as not run (it never runs,
//! not even once the lock is free), and the new message is answered while
//! another bot's Shell call still holds the workspace. (Before, the wait
//! ended only on a cancel: the person waited for the other bot's command,
//! then the call that had not started ran.)

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// Bot `holder` holds the workspace until the test writes `release`.
macro_rules! holder_rule {
    () => {
        r#"
[[rule]]
bot = "holder"
steps = [
  { tool = "Shell", args = { command = "touch holding; while [ ! -e release ]; do sleep 0.05; done; echo held", timeout_s = 120 } },
  { tool = "SendMessage", args = { text = "holder: {{tool_result}}" } },
]
"#
    };
}

const SCRIPT: &str = concat!(
    holder_rule!(),
    r#"
[[rule]]
bot = "waiter"
match = "^work please"
steps = [
  { tool = "Shell", args = { command = "touch waiter-ran; echo worked" } },
  { tool = "SendMessage", args = { text = "waiter: {{tool_result}}" } },
]

[[rule]]
bot = "waiter"
match = "^stop, new question"
steps = [ { tool = "SendMessage", args = { text = "the answer to the new question" } } ]
"#
);

/// Sends `text` to `bot`; returns (session, seq).
async fn send(host: &TestHost, bot: &str, text: &str) -> (String, i64) {
    let (status, body) = host.send(bot, text, None).await;
    assert_eq!(status, 202, "{body}");
    (
        body["session"].as_str().unwrap().to_owned(),
        body["seq"].as_i64().unwrap(),
    )
}

/// Waits until `path` exists (a file signals nothing: polls, bounded).
async fn wait_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the Shell calls in `entries` returned.
fn shell_results(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .map(|e| e["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn a_persons_message_interrupts_a_turn_waiting_for_the_workspace_lock() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("holder", "s", &["SendMessage", "Shell"])
        .bot("waiter", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"off\"\n")
        .start()
        .await;
    let ws = host.fleet.path().join("data/workspace/alice");

    // holder's Shell call holds the workspace until the test releases it
    let (holder, hold) = send(&host, "holder", "hold it").await;
    wait_file(&ws.join("holding")).await;

    // waiter's Shell call queues for the workspace lock
    let (session, work) = send(&host, "waiter", "work please").await;
    host.wait_for(&session, |entries| {
        entries
            .iter()
            .find(|e| e["kind"] == "assistant" && e["tool_calls"][0]["name"] == "Shell")
            .cloned()
    })
    .await;

    // the person's new message ends the wait: the turn ends interrupted and
    // the new message is answered, while holder still holds the workspace
    let (_, question) = send(&host, "waiter", "stop, new question").await;
    let answered = host.wait_turn_end(&session, question).await;
    assert_eq!(answered["status"], "completed", "{answered:#}");
    let entries = host.entries(&session).await;
    let interrupted = entries
        .iter()
        .find(|e| {
            e["kind"] == "turn_end"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&work.into()))
        })
        .unwrap_or_else(|| panic!("no end of the first turn: {entries:#?}"));
    assert_eq!(interrupted["status"], "interrupted", "{interrupted:#}");
    let results = shell_results(&entries);
    assert_eq!(results.len(), 1, "{results:#?}");
    assert!(
        results[0].starts_with("not run: a new message from the person interrupted the turn"),
        "{}",
        results[0]
    );
    assert_eq!(
        deliveries(&entries),
        ["the answer to the new question"],
        "{entries:#?}"
    );
    assert!(
        shell_results(&host.entries(&holder).await).is_empty(),
        "holder's command still runs"
    );
    assert!(
        !ws.join("waiter-ran").exists(),
        "the waiting call did not run"
    );

    // once the workspace is free, the call that did not start stays not run
    std::fs::write(ws.join("release"), "").unwrap();
    let done = host.wait_turn_end(&holder, hold).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    let said = deliveries(&host.entries(&holder).await);
    assert!(said.len() == 1 && said[0].contains("held"), "{said:?}");
    assert!(!ws.join("waiter-ran").exists(), "it never runs");
    host.shutdown().await;
}

const APPROVED: &str = concat!(
    holder_rule!(),
    r#"
[[rule]]
bot = "waiter"
match = "(?s)^work please|approved approval"
steps = [
  { tool = "Shell", args = { command = "printenv; touch waiter-ran" } },
  { tool = "SendMessage", args = { text = "waiter: done" } },
]

[[rule]]
bot = "waiter"
steps = [ { tool = "SendMessage", args = { text = "the answer to the new question" } } ]
"#
);

#[tokio::test]
async fn an_approved_call_stopped_while_waiting_for_the_lock_does_not_use_its_approval() {
    let host = TestFleet::new()
        .script("s", APPROVED)
        .bot("holder", "s", &["SendMessage", "Shell"])
        .bot("waiter", "s", &["SendMessage", "Shell"])
        .start()
        .await;
    let ws = host.fleet.path().join("data/workspace/alice");
    let token = crate::support::fleet::TOKEN;

    // waiter's command needs a person's approval
    let (session, work) = send(&host, "waiter", "work please").await;
    host.wait_turn_end(&session, work).await;
    let (_, v) = host.get("/v1/approvals", token).await;
    let id = v["approvals"][0]["id"].as_str().unwrap().to_owned();

    // the workspace is held when the person approves: the approved call
    // waits for the lock...
    send(&host, "holder", "hold it").await;
    wait_file(&ws.join("holding")).await;
    let (status, v) = host
        .post_raw(
            &format!("/v1/approvals/{id}"),
            Some(token),
            None,
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    host.wait_for(&session, |entries| {
        let shells = entries
            .iter()
            .filter(|e| e["kind"] == "assistant" && e["tool_calls"][0]["name"] == "Shell")
            .count();
        (shells == 2).then_some(Value::Null)
    })
    .await;
    // ...and a person's message stops it before it starts
    let (_, question) = send(&host, "waiter", "stop, new question").await;
    host.wait_turn_end(&session, question).await;
    let results = shell_results(&host.entries(&session).await);
    assert!(
        results.last().unwrap().starts_with("not run"),
        "{results:#?}"
    );
    // the call did not run, so the approval was not used: the record (and
    // the web page, which reads it) must not say it ran
    let (_, v) = host.get(&format!("/v1/approvals/{id}"), token).await;
    assert!(v["approval"]["consumed_at"].is_null(), "{v:#}");
    assert!(!ws.join("waiter-ran").exists());
    std::fs::write(ws.join("release"), "").unwrap();
    host.shutdown().await;
}

/// A turn interrupted by a person's message after a step that ran a
/// command: its input goes back to the queue, and the turn that takes it
/// again sees the command's result — also after a restart, when the bot's
/// context is read from the store. (Read back, the context stopped at the
/// input: the new turn ran the command again.)
#[tokio::test]
async fn the_work_of_an_interrupted_turn_is_not_done_again_after_a_restart() {
    let script = r#"
[[rule]]
bot = "a"
match = "^relay"
steps = [
  { tool = "SendToAgent", args = { agent = "b", text = "please do the work" } },
  { tool = "SendMessage", args = { text = "relayed" } },
]

[[rule]]
bot = "b"
match = "^Message from bot"
steps = [
  { tool = "Shell", args = { command = "echo ran >> effect.log" } },
  { delay_ms = 1500, tool = "SendMessage", args = { text = "work done" } },
]

[[rule]]
bot = "b"
match = "^hello"
steps = [ { delay_ms = 1000, tool = "SendMessage", args = { text = "hi" } } ]
"#;
    let fleet = TestFleet::new()
        .script("s", script)
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .bot("b", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"off\"\n");
    let effect = fleet.path().join("data/workspace/alice/effect.log");
    let host = fleet.start().await;
    let (a_dm, seq) = send(&host, "a", "relay").await;
    host.wait_turn_end(&a_dm, seq).await;
    let work = botfleet_memory::SessionKey {
        bot: botfleet_memory::BotId::new("b").unwrap(),
        kind: botfleet_memory::SessionKind::Agent,
        peer: "a".into(),
    }
    .id()
    .to_string();
    // the command ran; the person's message interrupts the next step
    host.wait_for(&work, |es| {
        es.iter().find(|e| e["kind"] == "tool_result").cloned()
    })
    .await;
    send(&host, "b", "hello").await;
    host.wait_for(&work, |es| {
        es.iter()
            .find(|e| e["kind"] == "turn_end" && e["status"] == "interrupted")
            .cloned()
    })
    .await;
    // stopped while b answers the person: the work's input waits queued
    let fleet = host.shutdown().await;
    let host = crate::support::fleet::restart(fleet).await;
    let end = host
        .wait_for(&work, |es| {
            es.iter()
                .find(|e| e["kind"] == "turn_end" && e["status"] == "completed")
                .cloned()
        })
        .await;
    assert_eq!(end["deliveries"], 1, "{end}");
    assert_eq!(std::fs::read_to_string(&effect).unwrap(), "ran\n");
    host.shutdown().await;
}
