//! Which bots the agent tools reach, through a host (round 20, H4
//! findings 1, 2, 3 and 10): another bot's subagent takes no work from
//! SendToAgent and no change from UpdateAgent, and CreateAgent stops at
//! `runtime.max_created_agents` and takes no id of a subagent's form.

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// The results of the tool calls of the turn `end` closed, in order.
fn results(es: &[Value], end: &Value) -> Vec<Value> {
    es.iter()
        .filter(|e| e["kind"] == "tool_result" && e["turn"] == end["turn"])
        .cloned()
        .collect()
}

/// Sends `text` to `bot`; the results of the calls of the turn that
/// answers it, once it completed.
async fn call_results(host: &TestHost, bot: &str, text: &str) -> Vec<Value> {
    let (session, end) = host.end_turn(bot, text).await;
    assert_eq!(end["status"], "completed", "{end}");
    results(&host.entries(&session).await, &end)
}

/// Regression (H4 finding 1 addendum, finding 2): bot q gave work to p's
/// subagent with SendToAgent (it ran, and q could neither check nor stop
/// it) and rewrote its role with UpdateAgent. Both are refused, naming
/// its parent; nothing is sent and its record is unchanged.
#[tokio::test]
async fn another_bots_subagent_takes_no_work_and_no_change() {
    let script = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "quick", prompt = "SUBTASK quick" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "got report" } } ]

[[rule]]
match = "SUBTASK quick"
steps = [ { tool = "SendMessage", args = { text = "REPORT done" } } ]

[[rule]]
bot = "q"
match = "^p\\.sub-"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "{{input}}", text = "work for q please" } },
  { tool = "UpdateAgent", args = { agent = "{{input}}", role = "no longer a subagent" } },
] }, { tool = "SendMessage", args = { text = "tried" } } ]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("p", "s", &["SendMessage", "Task"])
        .bot("q", "s", &["SendMessage", "SendToAgent", "UpdateAgent"])
        .start()
        .await;
    let (_, sent) = host.send("p", "delegate it", None).await;
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        deliveries(es)
            .iter()
            .any(|d| d == "got report")
            .then_some(json!(true))
    })
    .await;
    let sub = host.wait_subagent_of("p").await;
    let (_, before) = host.get(&format!("/v1/bots/{sub}"), TOKEN).await;

    let results = call_results(&host, "q", &sub).await;
    let send = &results[0];
    assert_eq!(send["name"], "SendToAgent", "{results:#?}");
    assert_eq!(send["is_error"], true, "{send}");
    assert_eq!(
        send["content"],
        format!(
            "error: {sub} is a subagent of p, and only p gives it work: nothing was sent. \
             Next step: message p, which started it, or tell your person instead"
        ),
        "{send}"
    );
    let update = &results[1];
    assert_eq!(update["name"], "UpdateAgent", "{results:#?}");
    assert_eq!(update["is_error"], true, "{update}");
    assert_eq!(
        update["content"],
        format!(
            "error: {sub} is a subagent of p: its task defines it and only p steers it; \
             nothing was changed. Next step: update an agent that is not a subagent, or \
             message p"
        ),
        "{update}"
    );
    // nothing reached it, and its record is as it was
    let rt = host.host.as_ref().unwrap().fleet.runtime().clone();
    let would_be = SessionKey {
        bot: BotId::new(sub.as_str()).unwrap(),
        kind: SessionKind::Agent,
        peer: "q".into(),
    };
    let stored = rt.store.get_session(would_be.id()).await.unwrap();
    assert!(stored.is_none(), "{stored:?}");
    let (_, after) = host.get(&format!("/v1/bots/{sub}"), TOKEN).await;
    assert_eq!(after["role"], before["role"], "{after:#}");
    assert_eq!(after["tools"], before["tools"], "{after:#}");
    host.shutdown().await;
}

/// Regression (H4 findings 3 and 10): CreateAgent made 300 bots in one
/// turn, and one by a subagent's id (`boss.sub-000000000000`). Through
/// fleet.toml's `runtime.max_created_agents = 2`: the third is refused,
/// saying the limit, its key and what to do, and so is an id of a
/// subagent's form; two bots were made.
#[tokio::test]
async fn create_agent_stops_at_runtime_max_created_agents() {
    let script = r#"
[[rule]]
bot = "boss"
match = "^hire"
steps = [
  { tool = "CreateAgent", args = { name = "Kid One", role = "Helps." } },
  { tool = "CreateAgent", args = { name = "Kid Two", role = "Helps." } },
  { tool = "CreateAgent", args = { name = "Kid Three", role = "Helps." } },
  { tool = "CreateAgent", args = { name = "Kid Sub", role = "Helps.", id = "boss.sub-000000000000" } },
  { tool = "SendMessage", args = { text = "hired" } },
]
"#;
    let host = TestFleet::new()
        .script("s", script)
        .bot("boss", "s", &["SendMessage", "CreateAgent"])
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_created_agents = 2")
        .start()
        .await;
    let results = call_results(&host, "boss", "hire some help").await;
    let contents: Vec<&str> = results
        .iter()
        .filter(|e| e["name"] == "CreateAgent")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents.len(), 4, "{results:#?}");
    assert!(
        contents[0].starts_with("created agent kid-one "),
        "{contents:#?}"
    );
    assert!(
        contents[1].starts_with("created agent kid-two "),
        "{contents:#?}"
    );
    assert_eq!(
        contents[2],
        "error: your owner already has 2 agents made by CreateAgent (the limit is 2, \
         runtime.max_created_agents); no agent was created. Next step: give the work to an \
         agent that exists (SendToAgent), or ask your person to remove agents no longer needed"
    );
    assert!(
        contents[3]
            .starts_with("error: the id \"boss.sub-000000000000\" has the form of a subagent's id"),
        "{contents:#?}"
    );
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let mut made: Vec<&str> = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["origin"] == "agent:boss")
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    made.sort_unstable();
    assert_eq!(made, ["kid-one", "kid-two"], "{bots:#}");
    host.shutdown().await;
}
