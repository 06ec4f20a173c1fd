//! The hop budget counts bot-to-bot messages per message of a person: a new
//! message from the person starts over at hop 0, even when it is batched
//! into one turn with a bot's message deep into an older chain. (Before,
//! the turn took the chain's hop count and refused the person's request
//! with "the hop budget … is spent".)
//!
//! When the budget cuts a chain off in a conversation between two bots,
//! the person whose message started it is told, and the refused bot is
//! told to end its turn, not to answer a person it cannot reach. A chain
//! a routine set off is reported to the bot's owner.

use botfleet_memory::BotId;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
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

/// a asks b, and b asks a back until the hop budget refuses it; then b
/// tries SendMessage (which goes back to a and is refused too).
const CHAIN: &str = r#"
[[rule]]
bot = "a"
steps = [ { tool = "SendToAgent", args = { agent = "b", text = "what do you think?" } } ]

[[rule]]
bot = "b"
match_tool = "hop budget"
steps = [
  { text = "unused" },
  { tool = "SendMessage", args = { text = "the chain is too long" } },
]

[[rule]]
bot = "b"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "ask me again" } } ]
"#;

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

/// r → a → b → a → b: the budget of 4 falls to b, in its conversation
/// with a. b is refused SendToAgent and then SendMessage (which goes back
/// to a there); it is told to end its turn, and alice, who asked r, finds
/// one `hop_budget` notice in her conversation with r. (Before, b was told
/// to "answer the person with SendMessage", which was refused the same
/// way, and nothing reached alice.)
#[tokio::test]
async fn a_chain_cut_off_between_two_bots_is_reported_to_the_person_once() {
    let script = format!(
        "{}{CHAIN}",
        r#"
[[rule]]
bot = "r"
match = "^question"
steps = [ { calls = [
  { tool = "SendToAgent", args = { agent = "a", text = "ask b about it" } },
  { tool = "SendMessage", args = { text = "asked a" } },
] } ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("r", "s", TOOLS)
        .bot("a", "s", TOOLS)
        .bot("b", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_hops = 4")
        .start()
        .await;
    let (status, sent) = host.send("r", "question for the bots", None).await;
    assert_eq!(status, 202, "{sent}");
    let dm = sent["session"].as_str().unwrap().to_owned();
    // b's two turns (hops 2 and 4) end
    let session = host
        .wait_get("/v1/bots/b/turns", |v| {
            let turns = v["turns"].as_array()?;
            (turns.len() == 2 && turns.iter().all(|t| t["status"] == "completed"))
                .then(|| turns[0]["session"].clone())
        })
        .await;
    let entries = host.entries(session.as_str().unwrap()).await;
    let refusals: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e["kind"] == "tool_result" && e["is_error"] == json!(true))
        .map(|e| (e["name"].as_str().unwrap(), e["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        refusals.iter().map(|r| r.0).collect::<Vec<_>>(),
        vec!["SendToAgent", "SendMessage"],
        "{entries:#?}"
    );
    for (tool, text) in &refusals {
        assert!(text.contains("hop budget of 4"), "{tool}: {text}");
        assert!(text.contains("Next step: end your turn"), "{tool}: {text}");
        assert!(!text.contains("answer the person"), "{tool}: {text}");
    }
    // alice is told, once for both refusals
    let es = host.entries(&dm).await;
    let notices: Vec<&Value> = es
        .iter()
        .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
        .collect();
    assert_eq!(notices.len(), 1, "{es:#?}");
    let text = notices[0]["text"].as_str().unwrap();
    assert!(
        text.contains("hop budget of 4") && text.contains("b could not send one more to a"),
        "{text}"
    );
    assert!(notices[0]["retry_turn"].is_null(), "{:#}", notices[0]);
    // the chain is over: a ran twice (hops 1 and 3) and r was not woken
    for (bot, n) in [("a", 2), ("r", 1)] {
        host.wait_get(&format!("/v1/bots/{bot}/turns"), |v| {
            let turns = v["turns"].as_array()?;
            turns
                .iter()
                .all(|t| t["status"] == "completed")
                .then(|| json!(turns.len()))
        })
        .await;
        let (_, turns) = host.get(&format!("/v1/bots/{bot}/turns"), TOKEN).await;
        assert_eq!(
            turns["turns"].as_array().unwrap().len(),
            n,
            "{bot}: {turns:#}"
        );
    }
    assert_eq!(deliveries(&es), vec!["asked a".to_owned()], "{es:#?}");
    host.shutdown().await;
}

/// A chain a routine sets off (r → a → b, cut off at b with a budget of 2)
/// is reported to r's owner in her conversation with r, where r's routine
/// messages go: once per run however many calls are refused. (Before, only
/// a chain a person's message started was reported; this one was cut off
/// with a log line nobody reads.)
#[tokio::test]
async fn a_chain_a_routine_set_off_is_reported_to_the_owner_once_per_run() {
    let script = format!(
        "{}{CHAIN}",
        r#"
[[rule]]
bot = "r"
steps = [ { tool = "SendToAgent", args = { agent = "a", text = "ask b about it" } } ]
"#
    );
    let host = TestFleet::new()
        .script("s", &script)
        .bot("a", "s", TOOLS)
        .bot("b", "s", TOOLS)
        .bot("r", "s", TOOLS)
        .runtime("debounce_ms = 0\nextract_memory = false\nmax_hops = 2")
        .start()
        .await;
    let routine = format!("{}/v1/bots/r/routines/ask", host.url);
    let body = json!({"cron": "* * * * * *", "timezone": "UTC", "prompt": "Ask around."});
    let resp = host
        .http
        .put(&routine)
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let dm = SessionKey {
        bot: BotId::new("r").unwrap(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    }
    .id()
    .to_string();
    let notices = |es: &[Value]| -> Vec<Value> {
        es.iter()
            .filter(|e| e["kind"] == "notice" && e["code"] == "hop_budget")
            .cloned()
            .collect()
    };
    let first = host.wait_for(&dm, |es| notices(es).first().cloned()).await;
    let text = first["text"].as_str().unwrap();
    assert!(
        text.contains("routine ask of r")
            && text.contains("hop budget of 2")
            && text.contains("b could not send one more to a"),
        "{text}"
    );
    // no more runs; those under way end
    let resp = host
        .http
        .delete(&routine)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    // each run's chain reached b once and was refused twice there: one
    // notice per run (read again while a run admitted before the delete
    // was still on its way to b)
    let all_done = |v: &Value| {
        let turns = v["turns"].as_array()?;
        turns
            .iter()
            .all(|t| t["status"] == "completed")
            .then(|| json!(turns.len()))
    };
    let mut settled = None;
    for _ in 0..10 {
        let runs = host.wait_get("/v1/bots/b/turns", all_done).await;
        for bot in ["r", "a"] {
            host.wait_get(&format!("/v1/bots/{bot}/turns"), all_done)
                .await;
        }
        let es = host.entries(&dm).await;
        if host.wait_get("/v1/bots/b/turns", all_done).await == runs {
            settled = Some((runs, es));
            break;
        }
    }
    let (runs, es) = settled.expect("runs went on after the routine was deleted");
    assert_eq!(json!(notices(&es).len()), runs, "{es:#?}");
    host.shutdown().await;
}
