//! A person's message that interrupts a parent's turn leaves the parent's
//! subagents alone: the subagent started in the interrupted turn works on,
//! runs its side effect once, and its report wakes the parent once.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "^research"
steps = [
  { tool = "Task", args = { description = "slow job", prompt = "do the slow job" } },
  { delay_ms = 5000, tool = "SendMessage", args = { text = "delegated" } },
]

[[rule]]
bot = "p"
match = "^hey"
steps = [ { tool = "SendMessage", args = { text = "hey back" } } ]

[[rule]]
bot = "p"
match = "Message from bot"
steps = [ { tool = "SendMessage", args = { text = "report in: {{input}}" } } ]

[[rule]]
match = "do the slow job"
steps = [
  { tool = "Shell", args = { command = "echo ran >> sub.txt" } },
  { delay_ms = 500, tool = "SendMessage", args = { text = "slow job finished" } },
]
"#;

#[tokio::test]
async fn a_persons_message_interrupting_the_parent_leaves_its_subagent_working() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("p", "s", &["SendMessage", "Task", "Shell"])
        .tables("[review]\nshell = \"off\"\n")
        .start()
        .await;
    let (status, sent) = host.send("p", "research this", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    // the Task call is stored; the parent's turn waits on its next step
    let sub = host.wait_subagent_of("p").await;
    let (status, hey) = host.send("p", "hey there", None).await;
    assert_eq!(status, 202, "{hey}");

    let es = host
        .wait_for(&session, |es| {
            deliveries(es)
                .iter()
                .any(|d| d.starts_with("report in"))
                .then(|| Value::Array(es.to_vec()))
        })
        .await;
    let es = es.as_array().unwrap();
    // the person's message did interrupt the parent's turn
    assert!(
        es.iter()
            .any(|e| e["kind"] == "turn_end" && e["status"] == "interrupted"),
        "{es:#?}"
    );
    assert!(deliveries(es).iter().any(|d| d == "hey back"), "{es:#?}");
    let reports: Vec<&Value> = es.iter().filter(|e| e["kind"] == "agent_message").collect();
    assert_eq!(reports.len(), 1, "one report wakes the parent: {es:#?}");
    assert_eq!(reports[0]["from"], sub.as_str());
    assert!(
        reports[0]["text"]
            .as_str()
            .unwrap()
            .contains("slow job finished"),
        "{es:#?}"
    );
    let (_, bots) = host.get("/v1/bots", crate::support::fleet::TOKEN).await;
    let listed = bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == sub.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["subagent_status"], "done", "{listed:#}");
    let ran = std::fs::read_to_string(host.fleet.path().join("data/workspace/alice/sub.txt"));
    assert_eq!(ran.unwrap(), "ran\n", "the subagent's side effect ran once");
    host.shutdown().await;
}
