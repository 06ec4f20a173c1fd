//! A bot made by CreateAgent keeps, at each start, only the tools its
//! maker still has in fleet.toml: CreateAgent gives only tools the maker
//! has, and that cap holds over time. A maker taken out of the config has
//! none: the bots it made keep only SendMessage, stay their owner's and
//! still answer.
//!
//! (Before, a tool taken from a bot in fleet.toml stayed with the bots it
//! had made: they went on writing files after their maker lost Write, and
//! after it was removed.)

use std::path::PathBuf;

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
bot = "maker"
match = "^mkagent"
steps = [
  { tool = "CreateAgent", args = { id = "helper", name = "Helper", role = "Writes notes.", tools = ["SendMessage", "Write"] } },
  { tool = "SendMessage", args = { text = "made: {{tool_result}}" } },
]

[[rule]]
bot = "helper"
match = "^dowrite-"
steps = [
  { tool = "Write", args = { path = "{{input}}.txt", content = "helper wrote" } },
  { tool = "SendMessage", args = { text = "write said: {{tool_result}}" } },
]

[[rule]]
bot = "helper"
match = "^slowwrite"
steps = [
  { tool = "SendMessage", args = { text = "starting" } },
  { delay_ms = 120000, tool = "Write", args = { path = "slow.txt", content = "helper wrote" } },
  { tool = "SendMessage", args = { text = "write said: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} here" } } ]
"#;

const MAKER_TOOLS: &[&str] = &["SendMessage", "Write", "CreateAgent"];

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

/// alice's files.
fn files(host: &TestHost) -> PathBuf {
    host.fleet.path().join("data/workspace/alice")
}

/// Has `maker` make `helper` (tools SendMessage, Write) and `helper`
/// write a file, which appears.
async fn made_helper_writes(host: &TestHost) {
    let (_, end) = host.end_turn("maker", "mkagent now").await;
    assert_eq!(end["status"], "completed", "{end}");
    let helper = listed(host, "helper").await;
    assert_eq!(helper["origin"], "agent:maker", "{helper:#}");
    assert_eq!(
        helper["tools"],
        json!(["SendMessage", "Write"]),
        "{helper:#}"
    );
    let (result, failed) = write_result(host, "dowrite-one").await;
    assert!(!failed, "{result}");
    assert!(files(host).join("dowrite-one.txt").exists(), "{result}");
}

/// The result of the Write call of `helper`'s turn answering `text`, and
/// whether it is an error.
async fn write_result(host: &TestHost, text: &str) -> (String, bool) {
    let (end, entries) = host.end_turn_as("helper", TOKEN, text).await;
    assert_eq!(end["status"], "completed", "{entries:#?}");
    let result = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "Write" && e["turn"] == end["turn"])
        .unwrap_or_else(|| panic!("no Write result in {entries:#?}"));
    (
        result["content"].as_str().unwrap_or_default().to_owned(),
        result["is_error"] == true,
    )
}

#[tokio::test]
async fn a_bot_made_by_create_agent_loses_a_tool_its_maker_lost() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .start()
        .await;
    made_helper_writes(&host).await;

    // the operator takes Write (and CreateAgent) from maker
    let fleet = host
        .shutdown()
        .await
        .without_bot("maker")
        .bot("maker", "s", &["SendMessage"]);
    fleet.write();
    let host = restart(fleet).await;
    let helper = listed(&host, "helper").await;
    assert_eq!(helper["tools"], json!(["SendMessage"]), "{helper:#}");
    assert!(helper["removed_at"].is_null(), "{helper:#}");
    // helper's Write is refused, and no file appears
    let (result, failed) = write_result(&host, "dowrite-two").await;
    assert!(failed && result.contains("no tool"), "{result}");
    assert!(!files(&host).join("dowrite-two.txt").exists());

    // nothing comes back by itself when maker has Write again
    let fleet = host
        .shutdown()
        .await
        .without_bot("maker")
        .bot("maker", "s", MAKER_TOOLS);
    fleet.write();
    let host = restart(fleet).await;
    let helper = listed(&host, "helper").await;
    assert_eq!(helper["tools"], json!(["SendMessage"]), "{helper:#}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_bot_whose_maker_was_removed_keeps_only_send_message_and_still_answers() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .bot("other", "s", &["SendMessage"])
        .start()
        .await;
    made_helper_writes(&host).await;

    // maker leaves the config
    let fleet = host.shutdown().await.without_bot("maker");
    fleet.write();
    let host = restart(fleet).await;
    assert!(listed(&host, "maker").await["removed_at"].is_i64());
    let helper = listed(&host, "helper").await;
    assert_eq!(helper["tools"], json!(["SendMessage"]), "{helper:#}");
    assert!(helper["removed_at"].is_null(), "{helper:#}");
    let (result, failed) = write_result(&host, "dowrite-three").await;
    assert!(failed && result.contains("no tool"), "{result}");
    assert!(!files(&host).join("dowrite-three.txt").exists());
    // it is still its owner's bot, and answers them
    let (_, end) = host.end_turn("helper", "hello").await;
    assert_eq!(end["status"], "completed", "{end}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_turn_the_restart_cut_off_is_refused_the_tool_its_bot_lost() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("maker", "s", MAKER_TOOLS)
        .start()
        .await;
    made_helper_writes(&host).await;
    // helper is about to write when the host stops
    let (status, v) = host
        .send("helper", "slowwrite please", Some("k-slow"))
        .await;
    assert_eq!(status, 202, "{v}");
    host.wait_get("/v1/bots/helper/turns", |v| {
        v["turns"]
            .as_array()?
            .iter()
            .find(|t| t["status"] == "running")
            .cloned()
    })
    .await;
    host.wait_running("helper").await;

    // maker loses Write; the resumed turn goes on at once
    let fleet = host.shutdown().await.without_bot("maker").bot(
        "maker",
        "s",
        &["SendMessage", "CreateAgent"],
    );
    fleet.write();
    let script = fleet.path().join("scripts/s.toml");
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, text.replace("delay_ms = 120000, ", "")).unwrap();
    let host = restart(fleet).await;
    let end = host
        .wait_turn_end(v["session"].as_str().unwrap(), v["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(v["session"].as_str().unwrap()).await;
    let result = entries
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "Write" && e["turn"] == end["turn"])
        .unwrap_or_else(|| panic!("no Write result in {entries:#?}"));
    assert!(
        result["is_error"] == true && result["content"].as_str().unwrap().contains("no tool"),
        "{result}"
    );
    assert!(!files(&host).join("slow.txt").exists());
    host.shutdown().await;
}
