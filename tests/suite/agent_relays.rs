//! A bot that answers another bot after a third one (or its own
//! subagent) woke it: the answer goes where the asking bot wanted its
//! replies — its conversation with the person who started the exchange —
//! and wakes it there, so it can tell that person.
//!
//! (The reply target came only from the bot messages among the turn's own
//! inputs: B, asked by A and woken later by C's answer or by its
//! subagent's report, sent its answer into A's session with B instead of
//! A's DM with the person; A's reply to it went back to B, and the
//! person never heard the answer.)

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

/// A asks B, B asks C, C answers B, B answers A (with `answer`, a rule's
/// steps), A tells the person.
fn relay(answer: &str) -> String {
    format!(
        r#"
[[rule]]
bot = "a"
match = "^relay"
steps = [
  {{ tool = "SendToAgent", args = {{ agent = "b", text = "Q1 please find out" }} }},
  {{ tool = "SendMessage", args = {{ text = "I asked B; I will tell you what it says." }} }},
]

[[rule]]
bot = "b"
match = "Q1 please"
steps = [ {{ tool = "SendToAgent", args = {{ agent = "c", text = "Q2 do you know?" }} }} ]

[[rule]]
bot = "c"
match = "Q2 do you"
steps = [ {{ tool = "SendToAgent", args = {{ agent = "b", text = "A2 the answer is 42" }} }} ]

[[rule]]
bot = "b"
match = "A2 the answer"
steps = [ {answer} ]

[[rule]]
bot = "a"
match = "A1 C says"
steps = [ {{ tool = "SendMessage", args = {{ text = "FINAL: the answer is 42" }} }} ]
"#
    )
}

const TOOLS: &[&str] = &["SendMessage", "SendToAgent", "Task"];

async fn start(script: &str) -> TestHost {
    TestFleet::new()
        .script("s", script)
        .bot("a", "s", TOOLS)
        .bot("b", "s", TOOLS)
        .bot("c", "s", TOOLS)
        .start()
        .await
}

/// Sends the person's message to A and waits for the final answer in
/// that conversation.
async fn final_answer_reaches_the_person(host: &TestHost) {
    let (status, sent) = host.send("a", "relay this please", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let entries = host
        .wait_for(&session, |es| {
            deliveries(es)
                .iter()
                .any(|t| t.contains("FINAL: the answer is 42"))
                .then(|| Value::Array(es.to_vec()))
        })
        .await;
    let entries = entries.as_array().unwrap();
    // B's answer is in the person's conversation with A, from B, and
    // comes before A's final answer
    let answer = entries
        .iter()
        .position(|e| e["kind"] == "agent_message" && e["from"] == "b")
        .expect("B's answer in the person's conversation with A");
    assert!(
        entries[answer]["text"]
            .as_str()
            .unwrap()
            .contains("A1 C says 42")
    );
    let last = entries
        .iter()
        .rposition(|e| e["kind"] == "delivery")
        .unwrap();
    assert!(answer < last);
    // and the person was told once
    let finals = deliveries(entries)
        .iter()
        .filter(|t| t.contains("FINAL"))
        .count();
    assert_eq!(finals, 1);
}

#[tokio::test]
async fn an_answer_after_asking_a_third_bot_reaches_the_person() {
    let host = start(&relay(
        r#"{ tool = "SendToAgent", args = { agent = "a", text = "A1 C says 42" } }"#,
    ))
    .await;
    final_answer_reaches_the_person(&host).await;
    host.shutdown().await;
}

#[tokio::test]
async fn an_answer_with_send_message_after_asking_a_third_bot_reaches_the_person() {
    // SendMessage in B's conversation with A is a message to A
    let host = start(&relay(
        r#"{ tool = "SendMessage", args = { text = "A1 C says 42" } }"#,
    ))
    .await;
    final_answer_reaches_the_person(&host).await;
    host.shutdown().await;
}

#[tokio::test]
async fn an_answer_after_a_subagents_report_reaches_the_person() {
    let script = r#"
[[rule]]
bot = "a"
match = "^relay"
steps = [
  { tool = "SendToAgent", args = { agent = "b", text = "Q1 please find out" } },
  { tool = "SendMessage", args = { text = "I asked B; I will tell you what it says." } },
]

[[rule]]
bot = "b"
match = "Q1 please"
steps = [ { tool = "Task", args = { description = "find", prompt = "SUBTASK find the answer" } } ]

[[rule]]
match = "SUBTASK find"
steps = [ { tool = "SendMessage", args = { text = "REPORT the answer is 42" } } ]

[[rule]]
bot = "b"
match = "REPORT the answer"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "A1 C says 42" } } ]

[[rule]]
bot = "a"
match = "A1 C says"
steps = [ { tool = "SendMessage", args = { text = "FINAL: the answer is 42" } } ]
"#;
    let host = start(script).await;
    final_answer_reaches_the_person(&host).await;
    host.shutdown().await;
}
