//! The hop budget counts bot-to-bot messages per message of a person: a new
//! message from the person starts over at hop 0, even when it is batched
//! into one turn with a bot's message deep into an older chain. (Before,
//! the turn took the chain's hop count and refused the person's request
//! with "the hop budget … is spent".)

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

const SCRIPT: &str = r#"
[[rule]]
bot = "a"
match = "^start"
steps = [
  { calls = [
    { tool = "SendToAgent", args = { agent = "b", text = "ping" } },
    { tool = "SendMessage", args = { text = "started" } },
  ] },
  { delay_ms = 1500, text = "still busy" },
]

[[rule]]
bot = "a"
match = "^ask b"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "b", text = "fresh question" } },
  { tool = "SendMessage", args = { text = "asked b" } },
] } ]

[[rule]]
bot = "a"
steps = [ { text = "nothing to do" } ]

[[rule]]
bot = "b"
match = "ping"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "pong" } } ]

[[rule]]
bot = "b"
steps = [ { text = "read it" } ]
"#;

const TOOLS: &[&str] = &["SendMessage", "SendToAgent"];

#[tokio::test]
async fn a_persons_message_starts_a_new_hop_budget() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a", "s", TOOLS)
        .bot("b", "s", TOOLS)
        .runtime("debounce_ms = 0\nmax_hops = 2")
        .start()
        .await;
    let (_, started) = host.send("a", "start", None).await;
    let session = started["session"].as_str().unwrap().to_owned();
    // b's pong (hop 2, the budget) reaches a's DM while a is still busy
    host.wait_for(&session, |es| {
        es.iter()
            .find(|e| e["kind"] == "agent_message" && e["hop"] == 2)
            .cloned()
    })
    .await;
    let (_, asked) = host.send("a", "ask b again", None).await;
    let end = host
        .wait_turn_end(&session, asked["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries: Vec<Value> = host.entries(&session).await;
    let asked_seq = asked["seq"].as_i64().unwrap();
    let results: Vec<&str> = entries
        .iter()
        .filter(|e| {
            e["kind"] == "tool_result"
                && e["name"] == "SendToAgent"
                && e["seq"].as_i64().unwrap() > asked_seq
        })
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 1, "{entries:#?}");
    assert!(
        results[0].contains("delivered to b") && !results[0].contains("hop budget"),
        "{results:?}"
    );
    assert!(deliveries(&entries).iter().any(|t| t.starts_with("asked")));

    host.shutdown().await;
}
