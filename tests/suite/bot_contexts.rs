//! The session contexts a busy bot keeps in memory: bounded however many
//! sessions it runs turns in, and one left out is read back to the same
//! messages.

use std::time::Duration;

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::Endless;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// Most session contexts a bot keeps (`actors/src/bot_tails.rs`).
const MAX_CONTEXTS: u64 = 16;

fn hub_of(bots: &Value) -> Value {
    bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == "hub")
        .cloned()
        .unwrap()
}

fn is_reminder(message: Option<&Value>) -> bool {
    message
        .and_then(|m| m["content"].as_str())
        .is_some_and(|c| c.starts_with("[runtime reminder]"))
}

fn has_text(messages: &[Value], needle: &str) -> bool {
    messages
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(needle)))
}

/// A hub bot that 20 bots write to runs a turn in 20 sessions and stays
/// awake: it kept all 20 contexts in memory (a busy bot's memory grew with
/// every bot or person it ever talked to). Now it keeps the 16 most
/// recently used, and the first sender's session, left out, is read back
/// at its next turn: the model gets what it got before, the earlier
/// messages byte for byte.
#[tokio::test]
async fn a_busy_bot_keeps_a_bounded_number_of_contexts_and_reads_one_back_the_same() {
    let spokes = 20;
    // the spokes write for their person's messages only: the hub answers
    // in text, so each spoke is told no answer came (and is not to write
    // again for that)
    let script = r#"
[[rule]]
match = "^(first|second|third)$"
steps = [
  { tool = "SendToAgent", args = { agent = "hub", text = "hello from {{bot}}: {{input}}" } },
  { tool = "SendMessage", args = { text = "sent" } },
]
"#;
    let server = OpenAiServer::builder()
        .responder(|_| Reply::text("noted"))
        .start()
        .await;
    let mut fleet = TestFleet::new()
        .script("s", script)
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("hub", "main", &["SendMessage", "SendToAgent"]);
    for i in 0..spokes {
        fleet = fleet.bot(&format!("s{i}"), "s", &["SendMessage", "SendToAgent"]);
    }
    let host = fleet.start().await;
    let hub_turns = |hub: &Value| hub["turns"]["completed"].as_u64().unwrap_or(0);
    for i in 0..spokes {
        host.send(&format!("s{i}"), "first", None).await;
    }
    let hub = host
        .wait_get("/v1/bots", |bots| {
            let hub = hub_of(bots);
            (hub_turns(&hub) == spokes).then_some(hub)
        })
        .await;
    assert_eq!(hub["active"], true, "{hub}");
    assert_eq!(hub["contexts_in_memory"], MAX_CONTEXTS, "{hub}");
    // the first sender writes again: its session's context was left out
    host.send("s0", "second", None).await;
    host.wait_get("/v1/bots", |bots| {
        (hub_turns(&hub_of(bots)) == spokes + 1).then_some(Value::Null)
    })
    .await;
    let of_s0: Vec<Vec<Value>> = server
        .requests()
        .into_iter()
        .map(|r| r.body["messages"].as_array().unwrap().clone())
        // each turn's first request: the hub, answering in text, is then
        // reminded to answer with a tool
        .filter(|m| has_text(m, "hello from s0") && !is_reminder(m.last()))
        .collect();
    assert_eq!(of_s0.len(), 2, "{of_s0:?}");
    let (before, after) = (&of_s0[0], &of_s0[1]);
    assert!(has_text(after, "hello from s0: second"));
    assert!(after.len() > before.len());
    for (x, y) in before.iter().zip(after.iter()) {
        assert_eq!(x, y, "the context read back differs from the one in memory");
    }
    // a turn running in a session whose context was held holds it still:
    // the bot keeps as many as before (QA: the count read one lower while
    // a run held a context)
    server.push_reply(Reply::endless(Endless::Comments, Duration::from_millis(20)));
    host.send("s19", "third", None).await;
    server
        .wait_until(|body| {
            body["messages"]
                .as_array()
                .is_some_and(|m| has_text(m, "hello from s19: third"))
        })
        .await;
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let hub = hub_of(&bots);
    assert!(
        hub["running_turn"].is_string(),
        "the hub's turn runs: {hub}"
    );
    assert_eq!(hub["contexts_in_memory"], MAX_CONTEXTS, "{hub}");
    let (status, _) = host
        .call(reqwest::Method::POST, "/v1/bots/hub/cancel", TOKEN, None)
        .await;
    assert_eq!(status, 200);
    host.shutdown().await;
    server.shutdown().await;
}
