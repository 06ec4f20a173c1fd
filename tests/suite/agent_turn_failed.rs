//! A turn answering another bot's message fails for good: the notice in
//! that conversation (the owner reads it) names the bot whose message it
//! was, not "your message", which the owner never sent (soak, 2026-12-07),
//! and offers the retry; and the bot that asked hears of it where it
//! asked from (`bot_turn_failed:<id>`), so its person is not left waiting.

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::fleet::deliveries;

const SCRIPT: &str = r#"
[[rule]]
bot = "r"
match = "^ask"
steps = [
  { calls = [
      { tool = "SendToAgent", args = { agent = "a", text = "please help" } },
      { tool = "SendMessage", args = { text = "asked a" } },
  ] },
]

[[rule]]
bot = "a"
steps = [ { fail = "the endpoint answered 500" } ]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "ok" } } ]
"#;

/// The `turn_failed` notice `session` comes to hold.
async fn failure_notice(host: &TestHost, session: &str) -> Value {
    host.wait_for(session, |es| {
        es.iter()
            .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
            .cloned()
    })
    .await
}

#[tokio::test]
async fn a_failed_turn_over_another_bots_message_names_that_bot() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage", "SendToAgent"])
        .bot("a", "s", &["SendMessage", "SendToAgent"])
        .start()
        .await;
    let (status, sent) = host.send("r", "ask a for help", None).await;
    assert_eq!(status, 202, "{sent}");
    // r's turn sent the message to a before it ended
    host.wait_turn_end(
        sent["session"].as_str().unwrap(),
        sent["seq"].as_i64().unwrap(),
    )
    .await;
    let session = SessionKey {
        bot: BotId::new("a").unwrap(),
        kind: SessionKind::Agent,
        peer: "r".into(),
    }
    .id()
    .to_string();
    let notice = failure_notice(&host, &session).await;
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("I could not finish working on the message from bot r: ")
            && text.contains("the endpoint answered 500")
            && !text.contains("your message"),
        "{notice}"
    );
    assert!(notice["retry_turn"].is_string(), "{notice}");

    // r, which asked from alice's DM, hears of it there, and can tell her
    // (QA: the notice was only in the two bots' conversation, and the
    // person's request hung)
    let dm = sent["session"].as_str().unwrap();
    let event = host
        .wait_for(dm, |es| {
            es.iter()
                .find(|e| e["kind"] == "event" && e["origin"] == "bot_turn_failed:a")
                .cloned()
        })
        .await;
    let text = event["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("a's turn over your message \"please help\" failed (")
            && text.contains("the endpoint answered 500")
            && text.contains("unless its owner retries that turn"),
        "{event}"
    );
    assert_eq!(event["trusted"], true, "{event}");
    let es = host
        .wait_for(dm, |es| {
            (deliveries(es).len() == 2).then(|| serde_json::json!(es))
        })
        .await;
    assert_eq!(deliveries(es.as_array().unwrap()), vec!["asked a", "ok"]);
    host.shutdown().await;
}

const REPORT_SCRIPT: &str = r#"
[[rule]]
bot = "p"
match = "your subagent"
steps = [ { fail = "the endpoint answered 500" } ]

[[rule]]
bot = "p"
match = "^delegate"
steps = [
  { calls = [
      { tool = "Task", args = { description = "okjob", prompt = "SUBTASK do it" } },
      { tool = "SendMessage", args = { text = "delegated" } },
  ] },
]

[[rule]]
match = "SUBTASK"
steps = [ { tool = "SendMessage", args = { text = "report: done" } } ]
"#;

/// The turn a subagent's report wakes in the person's DM fails: the
/// notice names the subagent whose report it was, not "your message"
/// (the person's message was answered already: review, 2026-12-07).
#[tokio::test]
async fn a_failed_turn_over_a_subagents_report_in_a_dm_names_the_subagent() {
    let host = TestFleet::new()
        .script("s", REPORT_SCRIPT)
        .bot("p", "s", &["SendMessage", "Task", "CheckSubagent"])
        .start()
        .await;
    let (status, sent) = host.send("p", "delegate it", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    let notice = failure_notice(&host, &dm).await;
    let text = notice["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("I could not finish working on the message from bot p.sub-")
            && !text.contains("your message"),
        "{notice}"
    );
    host.shutdown().await;
}
