//! A room member may not give a subagent work from the room (Task,
//! MessageSubagent): the subagent's report would wake it in the room
//! after the discussion ended, where nothing it says can be published.
//! The call is refused with why, within the turn, so the member can tell
//! the room; no subagent is started.
//!
//! (Before, Task ran: the member said the task was started, the
//! discussion ended, and the report's turn had its SendMessage refused
//! ("not published: no discussion … is waiting for your turn"): the
//! result never reached the room, and the person was not told.)

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "delegate"
steps = [
  { tool = "Task", args = { description = "room task", prompt = "SUBTASK report" } },
  { tool = "SendMessage", args = { text = "task: {{tool_result}}" } },
]

[[rule]]
match = "SUBTASK report"
steps = [ { tool = "SendMessage", args = { text = "ROOM_SUB_REPORT" } } ]

[[rule]]
steps = [ { text = "nothing to add" } ]
"#;

#[tokio::test]
async fn a_room_members_task_is_refused_with_why_and_starts_no_subagent() {
    let tools = &[
        "SendMessage",
        "Task",
        "CheckSubagent",
        "MessageSubagent",
        "StopSubagent",
    ];
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", tools)
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let (status, body) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "r1", "members": ["p", "q"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let room = body["id"].as_str().unwrap_or("r1").to_owned();
    let (_, run) = host
        .discuss(TOKEN, &room, "@p delegate the audit please")
        .await;
    let said: Vec<&str> = run
        .iter()
        .filter(|e| e["kind"] == "delivery" && e["author"] == "p")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said.len(), 1, "{run:#?}");
    assert!(
        said[0].starts_with("task: ")
            && said[0].contains("the tool Task is not available in a group room's turns")
            && said[0]
                .contains("a subagent's report comes back after the room's discussion has ended"),
        "{}",
        said[0]
    );
    // nothing was started whose report could not reach the room
    let (_, bots) = host.get("/v1/bots?subagents=all", TOKEN).await;
    let subs: Vec<&serde_json::Value> = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["origin"] == "subagent:p")
        .collect();
    assert!(subs.is_empty(), "{bots:#}");
    host.shutdown().await;
}
