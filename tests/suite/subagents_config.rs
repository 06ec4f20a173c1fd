//! Subagents follow their parent's config across a restart: removed with
//! it (and back with it), never a tool it lost, on its provider; and a
//! bot whose provider the config dropped ends its turns visibly.
//!
//! (Before, a subagent kept running turns after its parent was removed,
//! kept the tools and provider copied when it was made, and a turn whose
//! provider was gone stayed `running` for good, its parent never told.)

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;
use crate::support::fleet::restart;

/// `ann` delegates; her subagent says it started, then works longer than
/// the test, so its task is running (and stored) when the host stops.
const SLOW_TASK: &str = r#"
[[rule]]
bot = "ann"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "job", prompt = "SUBTASK" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "ann"
match = "^make scout"
steps = [
  { tool = "CreateAgent", args = { id = "scout", name = "Scout", role = "Finds things.", tools = ["SendMessage"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK"
steps = [
  { tool = "SendMessage", args = { text = "REPORT started" } },
  { delay_ms = 120000, tool = "SendMessage", args = { text = "REPORT finished on s" } },
]

[[rule]]
match = "^shell now"
steps = [
  { tool = "Shell", args = { command = "echo ran-shell" } },
  { tool = "SendMessage", args = { text = "shell: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// The same work where the subagent finishes at once and `ann` passes its
/// report on.
const QUICK_TASK: &str = r#"
[[rule]]
bot = "ann"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "job", prompt = "SUBTASK" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "ann"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "got report: {{input}}" } } ]

[[rule]]
match = "^shell now"
steps = [
  { tool = "Shell", args = { command = "echo ran-shell" } },
  { tool = "SendMessage", args = { text = "shell: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK"
steps = [
  { tool = "SendMessage", args = { text = "REPORT started" } },
  { tool = "SendMessage", args = { text = "REPORT finished on o" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

/// The record of `id` in `GET /v1/bots`.
async fn listed(host: &TestHost, id: &str) -> Value {
    let (status, list) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{list}");
    list["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no bot {id} in {list:#}"))
}

/// Has `ann` delegate, and waits until her subagent's task turn is
/// stored (its first step is written) with `status`; returns the
/// subagent's id and `ann`'s DM session.
async fn delegate(host: &TestHost, status: &str) -> (String, String) {
    let (session, end) = host.end_turn("ann", "delegate please").await;
    assert_eq!(end["status"], "completed", "{end}");
    let sub = host.wait_subagent_of("ann").await;
    host.wait_get(&format!("/v1/bots/{sub}/turns"), |v| {
        v["turns"]
            .as_array()?
            .iter()
            .find(|t| t["status"] == status)
            .cloned()
    })
    .await;
    if status == "running" {
        host.wait_running(&sub).await;
    }
    (sub, session)
}

/// `fleet.toml` of `host`'s fleet with provider `s` taken out and every
/// bot on `o`.
fn without_provider_s(fleet: &TestFleet) {
    let path = fleet.path().join("fleet.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let block = "[providers.s]\nkind = \"scripted\"\nscript = \"scripts/s.toml\"\n";
    assert!(text.contains(block), "{text}");
    let text = text
        .replace(block, "")
        .replace("provider = \"s\"", "provider = \"o\"");
    std::fs::write(&path, text).unwrap();
}

#[tokio::test]
async fn a_subagent_of_a_removed_bot_is_removed_with_it_and_runs_no_turn() {
    let tools = &["SendMessage", "Task"];
    let host = TestFleet::new()
        .script("s", SLOW_TASK)
        .bot("ann", "s", tools)
        .bot("bob", "s", &["SendMessage"])
        .start()
        .await;
    let (sub, _) = delegate(&host, "running").await;

    // ann leaves the config while her subagent works
    let fleet = host.shutdown().await.without_bot("ann");
    fleet.write();
    let host = restart(fleet).await;
    let listed_sub = listed(&host, &sub).await;
    assert!(listed_sub["removed_at"].is_i64(), "{listed_sub:#}");
    // a person's message to it is refused, as to its parent
    let (status, v) = host.send(&sub, "hi sub", Some("k-sub")).await;
    assert_eq!(status, 409, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    // which way its parent went (QA: both ways were named)
    assert!(
        message.contains("its parent ann is no longer in the fleet's config")
            && message.contains("List ann in fleet.toml again")
            && !message.contains("CreateAgent"),
        "{message}"
    );
    // the host woke the bots with unfinished work as it started; once
    // another bot answered, the subagent has still not resumed its task
    let (_, end) = host.end_turn("bob", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    let listed_sub = listed(&host, &sub).await;
    assert!(listed_sub["running_turn"].is_null(), "{listed_sub:#}");

    // listed again, ann brings her subagent back, and its task resumes
    let fleet = host.shutdown().await.bot("ann", "s", tools);
    fleet.write();
    let host = restart(fleet).await;
    let listed_sub = listed(&host, &sub).await;
    assert!(listed_sub["removed_at"].is_null(), "{listed_sub:#}");
    host.wait_running(&sub).await;
    host.shutdown().await;
}

#[tokio::test]
async fn a_subagent_loses_a_tool_its_parent_lost() {
    let host = TestFleet::new()
        .script("s", QUICK_TASK)
        .bot("ann", "s", &["SendMessage", "Task", "Read", "Shell"])
        .start()
        .await;
    let (sub, _) = delegate(&host, "completed").await;
    let tools = listed(&host, &sub).await["tools"].clone();
    assert_eq!(tools, json!(["SendMessage", "Read", "Shell"]));

    // ann is not given Shell any more
    let fleet =
        host.shutdown()
            .await
            .without_bot("ann")
            .bot("ann", "s", &["SendMessage", "Task", "Read"]);
    fleet.write();
    let host = restart(fleet).await;
    let tools = listed(&host, &sub).await["tools"].clone();
    assert_eq!(tools, json!(["SendMessage", "Read"]));
    // nor is her subagent: a Shell call of its is refused
    let (session, end) = host.end_turn(&sub, "shell now").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    let result = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "Shell")
        .unwrap_or_else(|| panic!("no Shell result in {entries:#?}"))
        .to_string();
    assert!(
        result.contains("no tool") && !result.contains("ran-shell"),
        "{result}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_subagent_whose_provider_was_dropped_runs_on_its_parents_and_reports() {
    let host = TestFleet::new()
        .script("s", SLOW_TASK)
        .script("o", QUICK_TASK)
        .bot("ann", "s", &["SendMessage", "Task"])
        .start()
        .await;
    let (sub, session) = delegate(&host, "running").await;

    // provider s leaves the config; ann moves to o
    let fleet = host.shutdown().await;
    without_provider_s(&fleet);
    let host = restart(fleet).await;
    assert_eq!(listed(&host, &sub).await["provider"], "o");
    // the task ends, and ann hears of it in the session that delegated it
    let report = host
        .wait_for(&session, |es| {
            deliveries(es)
                .into_iter()
                .find(|d| d.starts_with("got report:"))
                .map(Value::from)
        })
        .await;
    assert!(
        report.as_str().unwrap().contains("REPORT finished on o"),
        "{report}"
    );
    let turns = host
        .get(&format!("/v1/bots/{sub}/turns"), TOKEN)
        .await
        .1
        .to_string();
    assert!(!turns.contains("\"running\""), "{turns}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_turn_of_a_bot_whose_provider_was_dropped_fails_with_a_retry() {
    let host = TestFleet::new()
        .script("s", SLOW_TASK)
        .script("o", QUICK_TASK)
        .bot("ann", "s", &["SendMessage", "CreateAgent"])
        .start()
        .await;
    let (_, end) = host.end_turn("ann", "make scout").await;
    assert_eq!(end["status"], "completed", "{end}");
    // scout, made by ann, has her provider: s
    assert_eq!(listed(&host, "scout").await["provider"], "s");

    let fleet = host.shutdown().await;
    without_provider_s(&fleet);
    let host = restart(fleet).await;
    // scout's turn cannot run; it fails, saying why, with a retry
    let (session, end) = host.end_turn("scout", "hello scout").await;
    assert_eq!(end["status"], "failed", "{end}");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("no turn_failed notice in {entries:#?}"));
    assert!(notice["retry_turn"].is_string(), "{notice:#}");
    assert!(
        notice["text"].as_str().unwrap().contains("\"s\""),
        "{notice:#}"
    );
    host.shutdown().await;
}
