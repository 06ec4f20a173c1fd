//! Forgetting a project's memory item over HTTP (`DELETE /v1/memory/{id}`):
//! a user with a bot in the project may, whatever else their bots did
//! (here: delegated a task, which makes a subagent, a bot with no
//! project); a user without one is told there is no such item. The right
//! is decided from the user's bots other than subagents (index
//! `bots_owner_main`, migration 26), where it read every bot record of
//! the user, each subagent one included.

use botfleet::memory::Importance;
use botfleet::memory::Layer;
use botfleet::memory::MemoryId;
use botfleet::memory::MemoryOp;
use botfleet::memory::NewMemory;
use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SCRIPT: &str = r#"
[[rule]]
bot = "p1"
match = "^task"
steps = [
  { tool = "Task", args = { description = "look it up", prompt = "SUBTASK quick" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p1"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "noted" } } ]

[[rule]]
match = "SUBTASK quick"
steps = [ { tool = "SendMessage", args = { text = "REPORT done" } } ]
"#;

async fn delete(host: &TestHost, token: &str, id: &MemoryId) -> (u16, Value) {
    let r = host
        .http
        .delete(format!("{}/v1/memory/{id}", host.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json::<Value>().await.unwrap())
}

/// Adds `text` to project apollo's profile, as a memory tool would; its
/// id is derived from `seed`.
async fn remember_in_apollo(host: &TestHost, seed: &str, text: &str) -> MemoryId {
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    let id = MemoryId::derive(seed);
    rt.memory
        .apply(MemoryOp::Add(NewMemory {
            id: id.clone(),
            scope: "project:apollo".parse().unwrap(),
            layer: Layer::Profile,
            text: text.into(),
            importance: Importance::NORMAL,
            expires_at: None,
            source: "test".into(),
        }))
        .await
        .unwrap();
    id
}

#[tokio::test]
async fn a_projects_item_is_forgotten_by_its_members_only() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p1", "s", &["SendMessage", "Task"])
        .bot_lines("projects = [\"apollo\"]")
        .bot("a2", "s", &["SendMessage"])
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .start()
        .await;
    // alice's project bot delegated: her bots include a subagent now
    host.send_until_reports("p1", "task one", 1).await;
    let (status, bots) = host.get("/v1/bots?subagents=all", TOKEN).await;
    assert_eq!(status, 200, "{bots}");
    assert!(
        bots["bots"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["origin"] == "subagent:p1"),
        "{bots}"
    );
    let id = remember_in_apollo(&host, "apollo launch", "Launch is on May 3").await;

    // bob has no bot in apollo: as if there were no such item
    let (status, body) = delete(&host, BOB_TOKEN, &id).await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("no memory item {id} for you")),
        "{body}"
    );
    // alice's p1 is in apollo: forgotten, then already forgotten
    let (status, body) = delete(&host, TOKEN, &id).await;
    assert_eq!(
        (status, body["status"].as_str(), body["scope"].as_str()),
        (200, Some("forgotten"), Some("project:apollo")),
        "{body}"
    );
    let (status, body) = delete(&host, TOKEN, &id).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("already_forgotten")),
        "{body}"
    );
    // and bob still may not learn it existed
    let (status, body) = delete(&host, BOB_TOKEN, &id).await;
    assert_eq!(status, 404, "{body}");
    host.shutdown().await;
}

/// Regression (QA): a bot taken out of fleet.toml (removed at the next
/// start) kept its owner in its projects: bob, whose only apollo bot was
/// removed, still listed what apollo's members remembered after it left,
/// under that bot's memory, and forgot it for them. A removed bot is in
/// no project: its memory lists its own scopes, and bob forgets nothing
/// of apollo's.
#[tokio::test]
async fn a_removed_bot_takes_its_owner_out_of_its_projects() {
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p1", "s", &["SendMessage"])
        .bot_lines("projects = [\"apollo\"]")
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("projects = [\"apollo\"]");
    let host = fleet.start().await;
    let fleet = host.shutdown().await.without_bot("b1");
    fleet.write();
    let host = crate::support::fleet::restart(fleet).await;
    let (_, bots) = host.get("/v1/bots", BOB_TOKEN).await;
    assert!(bots["bots"][0]["removed_at"].is_i64(), "{bots:#}");

    let id = remember_in_apollo(&host, "apollo plan", "The plan after b1 left").await;

    let scopes = |v: &Value| -> Vec<String> {
        v["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["scope"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, memory) = host.get("/v1/bots/b1/memory", BOB_TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    assert!(
        !scopes(&memory).contains(&"project:apollo".to_owned()),
        "{memory:#}"
    );
    assert!(!memory.to_string().contains("The plan after b1 left"));
    let (status, body) = delete(&host, BOB_TOKEN, &id).await;
    assert_eq!(status, 404, "{body}");
    // alice's p1 is still in apollo
    let (status, memory) = host.get("/v1/bots/p1/memory", TOKEN).await;
    assert_eq!(status, 200, "{memory}");
    assert!(memory.to_string().contains("The plan after b1 left"));
    let (status, body) = delete(&host, TOKEN, &id).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("forgotten")),
        "{body}"
    );
    host.shutdown().await;
}
