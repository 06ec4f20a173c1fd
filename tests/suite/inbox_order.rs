//! Inputs routed out of commit order still run. Each sender routes what it
//! admitted after its own commit returns, so a bot can get a lower gid
//! after a higher one. (Before, the bot's queue dropped any gid below the
//! highest it had seen as a copy: many relays messaging one hub at once
//! left hundreds of messages stranded in the hub's inbox while it reported
//! itself idle, until the host restarted.)

use std::time::Duration;

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;
use tokio::time::Instant;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const RELAYS: usize = 24;
const BURSTS: usize = 8;

#[tokio::test]
async fn every_message_to_a_busy_hub_is_answered() {
    let mut script = String::from(
        r#"
[[rule]]
bot = "hub"
steps = [ { text = "noted" } ]
"#,
    );
    script.push_str(
        r#"
[[rule]]
match = "^pass it on"
steps = [ { tool = "SendToAgent", args = { agent = "hub", text = "relayed {{input}}" } } ]
"#,
    );
    let mut fleet = TestFleet::new()
        .script("s", &script)
        .runtime("debounce_ms = 0\nextract_memory = false")
        .bot("hub", "s", &["SendMessage"]);
    for i in 0..RELAYS {
        fleet = fleet.bot(&format!("relay-{i}"), "s", &["SendMessage", "SendToAgent"]);
    }
    let host = fleet.start().await;
    for burst in 0..BURSTS {
        let sends = (0..RELAYS).map(|i| {
            let host = &host;
            async move {
                let (status, body) = host
                    .send(&format!("relay-{i}"), &format!("pass it on {burst}"), None)
                    .await;
                assert_eq!(status, 202, "{body}");
            }
        });
        futures::future::join_all(sends).await;
    }
    // every relayed message reaches a turn of the hub
    let sessions: Vec<String> = (0..RELAYS)
        .map(|i| {
            SessionKey {
                bot: BotId::new("hub").unwrap(),
                kind: SessionKind::Agent,
                peer: format!("relay-{i}"),
            }
            .id()
            .to_string()
        })
        .collect();
    // once every bot is idle, every relayed message was taken by a turn
    // of the hub
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut idle_twice = 0;
    while idle_twice < 2 {
        let (_, bots) = host.get("/v1/bots", TOKEN).await;
        let idle = bots["bots"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["running_turn"].is_null() && b["queued"] == 0);
        idle_twice = if idle { idle_twice + 1 } else { 0 };
        assert!(
            Instant::now() < deadline,
            "the fleet never went idle: {bots}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut received = 0;
    let mut unanswered = Vec::new();
    for s in &sessions {
        let (status, v) = host
            .get(&format!("/v1/sessions/{s}/entries?limit=1000"), TOKEN)
            .await;
        if status != 200 {
            continue;
        }
        let entries: Vec<Value> = v["entries"].as_array().cloned().unwrap_or_default();
        let answered: Vec<i64> = entries
            .iter()
            .filter(|e| e["kind"] == "turn_end")
            .flat_map(|e| e["inputs"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_i64())
            .collect();
        for e in entries.iter().filter(|e| e["kind"] == "agent_message") {
            received += 1;
            let seq = e["seq"].as_i64().unwrap_or(0);
            if !answered.contains(&seq) {
                unanswered.push((s.clone(), seq));
            }
        }
    }
    assert!(received >= RELAYS, "{received} relayed");
    assert!(
        unanswered.is_empty(),
        "the hub is idle with {} of {received} relayed messages never taken: {unanswered:?}",
        unanswered.len()
    );
    host.shutdown().await;
}
