//! A subagent's name holds its parent's (`Boss · audit logs`): a parent
//! renamed, by UpdateAgent or in fleet.toml, renames its subagents.
//!
//! (Before, the name was copied when the task started: the bot list, the
//! web page and `botfleet bots` kept showing the subagent under its
//! parent's old name.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::restart;
use crate::support::process::cli;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "audit logs", prompt = "SUBTASK audit" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^rename"
steps = [
  { tool = "UpdateAgent", args = { agent = "p", name = "Chief" } },
  { tool = "SendMessage", args = { text = "renamed: {{tool_result}}" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "heard" } } ]

[[rule]]
match = "SUBTASK audit"
steps = [ { tool = "SendMessage", args = { text = "REPORT audited" } } ]
"#;

/// The name `GET /v1/bots` gives bot `id`.
async fn name_of(host: &TestHost, id: &str) -> String {
    let (status, v) = host.get("/v1/bots", TOKEN).await;
    assert_eq!(status, 200, "{v}");
    v["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .and_then(|b| b["name"].as_str())
        .unwrap_or_else(|| panic!("no bot {id}: {v}"))
        .to_owned()
}

#[tokio::test]
async fn a_renamed_parents_subagents_take_its_new_name() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task", "UpdateAgent", "Shell"])
        .start()
        .await;
    host.complete_turn("p", "delegate please").await;
    let sub = host.wait_subagent_of("p").await;
    assert_eq!(name_of(&host, &sub).await, "p-name · audit logs");

    // renamed by UpdateAgent (its own, here)
    let session = host.complete_turn("p", "rename yourself").await;
    let es = host.entries(&session).await;
    assert!(
        es.iter().any(|e| e["kind"] == "delivery"
            && e["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("renamed: updated p")),
        "{es:#?}"
    );
    assert_eq!(name_of(&host, "p").await, "Chief");
    assert_eq!(name_of(&host, &sub).await, "Chief · audit logs");
    let (code, out, err) = cli(&["bots"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with(&sub))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("Chief · audit logs"), "{out}");

    // renamed in fleet.toml, with a tool taken away (the subagent's own
    // record is written again at the start, after its parent's)
    let fleet = host.shutdown().await;
    let path = fleet.path().join("fleet.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text
        .replace("name = \"p-name\"", "name = \"Boss\"")
        .replace(", \"Shell\"]", "]");
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let host = restart(fleet).await;
    assert_eq!(name_of(&host, "p").await, "Boss");
    assert_eq!(name_of(&host, &sub).await, "Boss · audit logs");
    let (status, v): (u16, Value) = host.get(&format!("/v1/bots/{sub}"), TOKEN).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["name"], "Boss · audit logs", "{v}");
    assert_eq!(v["tools"], serde_json::json!(["SendMessage"]), "{v}");
    host.shutdown().await;
}
