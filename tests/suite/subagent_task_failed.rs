//! A subagent's task that fails leaves a notice in its task conversation
//! that says whose task it was, not "your message": nobody sent the
//! subagent a message, its parent gave it a task (the notice read as if a
//! person had written to it, on the page's task view and in `botfleet
//! transcript`).

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { tool = "Task", args = { description = "doomed", prompt = "SUBTASK doomed" } },
  { tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
steps = [ { tool = "SendMessage", args = { text = "heard" } } ]

[[rule]]
match = "SUBTASK"
steps = [ { fail = "the model broke" } ]
"#;

#[tokio::test]
async fn a_failed_task_says_whose_task_it_was() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task"])
        .start()
        .await;
    let (_, end) = host.end_turn("p", "delegate it").await;
    assert_eq!(end["status"], "completed", "{end}");
    let sub = host
        .wait_get("/v1/bots", |v| {
            v["bots"]
                .as_array()?
                .iter()
                .find(|b| b["origin"] == "subagent:p")
                .map(|b| b["id"].clone())
        })
        .await;
    let sub = sub.as_str().unwrap();
    let (status, dm) = host.get(&format!("/v1/bots/{sub}/session"), TOKEN).await;
    assert_eq!(status, 200, "{dm}");
    let task = dm["task"]["session"].as_str().unwrap().to_owned();
    let notice = host
        .wait_for(&task, |es| {
            es.iter()
                .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
                .cloned()
        })
        .await;
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("I could not finish the task p gave me:"),
        "{notice:#}"
    );
    assert!(text.contains("the model broke"), "{notice:#}");
    assert!(!text.contains("your message"), "{notice:#}");
    assert!(notice["retry_turn"].is_string(), "{notice:#}");
    host.shutdown().await;
}
