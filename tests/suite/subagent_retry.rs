//! A person's retry of a subagent's task runs the subagent again: it
//! counts against its parent's `runtime.max_subagents` and is `running`
//! again. (Before, the retry was requeued whatever the count, so the
//! parent had more subagents running than its limit, and CheckSubagent
//! listed the retried one as `[failed]` while it ran.)

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

// A subagent's model takes longer than the test: it works until a person
// cancels its turn (its task then fails, and its parent hears of it).
const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^delegate two"
steps = [
  { tool = "Task", args = { description = "a", prompt = "SUBTASK a" } },
  { tool = "Task", args = { description = "b", prompt = "SUBTASK b" } },
  { tool = "SendMessage", args = { text = "delegated two" } },
]

[[rule]]
bot = "p"
match = "^delegate (c|d)"
steps = [
  { tool = "Task", args = { description = "more", prompt = "SUBTASK c" } },
  { tool = "SendMessage", args = { text = "delegated: {{tool_result}}" } },
]

[[rule]]
bot = "p"
match = "^check"
steps = [
  { tool = "CheckSubagent", args = {} },
  { tool = "SendMessage", args = { text = "status: {{tool_result}}" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "heard: {{input}}" } } ]

[[rule]]
match = "SUBTASK"
steps = [
  { delay_ms = 120000, tool = "SendMessage", args = { text = "working" } },
  { delay_ms = 120000, tool = "SendMessage", args = { text = "finished" } },
]
"#;

/// The id of `p`'s subagent for task `description`, once it exists.
async fn subagent(host: &TestHost, description: &str) -> String {
    let name = format!("p-name · {description}");
    host.wait_get("/v1/bots", |v| {
        v["bots"]
            .as_array()?
            .iter()
            .find(|b| b["origin"] == "subagent:p" && b["name"] == name.as_str())
            .map(|b| b["id"].clone())
    })
    .await
    .as_str()
    .unwrap()
    .to_owned()
}

/// `p`'s reply to `text` (the last delivery of the turn that answered
/// it), and the DM's session.
async fn reply_to(host: &TestHost, text: &str) -> (String, String) {
    let (session, end) = host.end_turn("p", text).await;
    assert_eq!(end["status"], "completed", "{end}");
    let reply = host
        .entries(&session)
        .await
        .iter()
        .filter(|e| e["kind"] == "delivery" && e["turn"] == end["turn"])
        .filter_map(|e| e["text"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_owned();
    (session, reply)
}

/// Cancels the task turn of subagent `sub`; answers its id.
async fn cancel(host: &TestHost, sub: &str) -> String {
    // its turn, once it runs
    let turn = host
        .wait_get(&format!("/v1/bots/{sub}/turns"), |v| {
            v["turns"].as_array()?.first().map(|t| t["id"].clone())
        })
        .await;
    let (status, body) = host
        .post_raw(&format!("/v1/bots/{sub}/cancel"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"], true, "{body}");
    turn.as_str().unwrap().to_owned()
}

/// Waits until `p` heard `n` reports of cancelled tasks and its turns on
/// them ended.
async fn heard_cancelled(host: &TestHost, dm: &str, n: usize) {
    host.wait_for(dm, |es| {
        let heard = deliveries(es)
            .into_iter()
            .filter(|d| d.starts_with("heard:") && d.contains("a person cancelled my turn"))
            .count();
        (heard == n).then_some(Value::Bool(true))
    })
    .await;
    host.wait_get("/v1/bots/p/turns", |v| {
        let turns = v["turns"].as_array()?;
        (!turns.iter().any(|t| t["status"] == "running")).then_some(Value::Bool(true))
    })
    .await;
}

#[tokio::test]
async fn a_retried_subagent_task_counts_against_the_limit_and_runs_as_running() {
    let host = TestFleet::new()
        .runtime(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\nmax_subagents = 2\n",
        )
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent"])
        .start()
        .await;
    let (dm, reply) = reply_to(&host, "delegate two").await;
    assert_eq!(reply, "delegated two");
    let (a, b) = (subagent(&host, "a").await, subagent(&host, "b").await);

    // a person cancels a's task: a failed, its parent hears of it
    let a_turn = cancel(&host, &a).await;
    heard_cancelled(&host, &dm, 1).await;

    // p starts another: b and c run, the limit
    let (_, started) = reply_to(&host, "delegate c").await;
    assert!(started.contains("started subagent"), "{started}");

    // a retry of a's task would make three: refused, naming the limit
    let (status, body) = host.retry(&a_turn).await;
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the limit is 2") && message.contains("wait for one of them to finish"),
        "{message}"
    );
    assert_eq!(body["error"]["transient"], true, "{body}");

    // once b's task ended (a person cancelled it too), the retry runs a
    // again, as running
    cancel(&host, &b).await;
    heard_cancelled(&host, &dm, 2).await;
    let (status, body) = host.retry(&a_turn).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["requeued"], 1, "{body}");
    let (_, status) = reply_to(&host, "check").await;
    assert!(status.contains(&format!("{a} [running]")), "{status}");
    // and it counts: a new task is refused at the limit
    let (_, refused) = reply_to(&host, "delegate d").await;
    assert!(refused.contains("the limit is 2"), "{refused}");
    host.shutdown().await;
}
