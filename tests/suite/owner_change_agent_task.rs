//! A subagent's task given in `p`'s conversation with `q`, alice's other
//! bot, after fleet.toml gives `p` to bob (`q` stays alice's): the task
//! is alice's bot's instruction, and its turns end `owner_changed`. Bob's
//! `p` cannot give it more work either: MessageSubagent refuses, and
//! nothing of bob's is written into the task, which alice reads whole
//! again if `p` is given back (review: the steering was recorded there,
//! and alice read bob's words once she had `p` back).

use serde_json::Value;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;
use crate::support::fleet::session_of;
use crate::support::process::poll;

/// What bob's steering holds.
const SECRET: &str = "bob-pin-4242";

const SCRIPT: &str = r#"
[[rule]]
bot = "q"
match = "^ask p"
steps = [ { tool = "SendToAgent", args = { agent = "p", text = "TASKME please" } },
          { tool = "SendMessage", args = { text = "asked p" } } ]

[[rule]]
bot = "p"
match = "TASKME"
steps = [ { tool = "Task", args = { description = "q's job", prompt = "SUBTASK from q" } },
          { text = "" } ]

[[rule]]
match = "SUBTASK"
steps = [ { delay_ms = 600000, tool = "SendMessage", args = { text = "too late" } } ]

[[rule]]
bot = "p"
match = "^p\\.sub-"
steps = [ { tool = "MessageSubagent", args = { id = "{{inputs}}", text = "STEER bob-pin-4242" } },
          { tool = "SendMessage", args = { text = "steered: {{tool_result}}" } } ]

[[rule]]
steps = [ { text = "noted" } ]
"#;

const TOOLS: &[&str] = &[
    "SendMessage",
    "SendToAgent",
    "Task",
    "CheckSubagent",
    "MessageSubagent",
];

#[tokio::test]
async fn the_new_owner_cannot_steer_a_task_the_former_owners_bot_gave() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", TOOLS)
        .bot("q", "s", TOOLS)
        .start()
        .await;
    host.end_turn("q", "ask p for a job").await;
    let sub = host.wait_subagent_of("p").await;
    host.wait_running(&sub).await;

    let fleet = host
        .shutdown()
        .await
        .without_bot("p")
        .bot_of("p", "s", TOOLS, "bob");
    fleet.write();
    let host = restart(fleet).await;
    let (end, dm) = host.end_turn_as("p", BOB_TOKEN, &sub).await;
    assert_eq!(end["status"], "completed", "{dm:#?}");
    let refused = dm
        .iter()
        .find(|e| e["kind"] == "tool_result" && e["name"] == "MessageSubagent")
        .unwrap_or_else(|| panic!("no MessageSubagent: {dm:#?}"));
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["content"]
            .as_str()
            .is_some_and(|c| c.contains("another owner") && c.contains("was not sent")),
        "{refused}"
    );
    // nothing of bob's in the task, whoever reads it
    let bob = botfleet::client::Client::new(&host.url, BOB_TOKEN).unwrap();
    let task = session_of(&sub, botfleet::memory::SessionKind::Subagent, "p");
    let es: Vec<Value> = poll(30, async || {
        bob.entries_after(&task, 0).await.map_err(|e| e.to_string())
    })
    .await;
    assert!(
        !es.iter().any(|e| e.to_string().contains(SECRET)),
        "bob's steering is in alice's bot's task: {es:#?}"
    );
    let fleet = host.shutdown().await;
    let fleet = fleet.without_bot("p").bot("p", "s", TOOLS);
    fleet.write();
    let host = restart(fleet).await;
    let es = host.entries(&task).await;
    assert!(
        !es.iter().any(|e| e.to_string().contains(SECRET)),
        "alice reads bob's steering: {es:#?}"
    );
    host.shutdown().await;
}
