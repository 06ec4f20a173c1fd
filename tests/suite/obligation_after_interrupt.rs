//! The delivery obligation belongs to the turn: a turn over a person's
//! message owes a reply even when an earlier turn, interrupted by that
//! message, replied to the message before it. Regression (QA,
//! 2026-12-05): a turn whose inputs were read back from the store (a
//! retry, or a restart before its first step was stored) counted the
//! interrupted turn's reply to the first message as an answer to both,
//! skipped the reminder and the `undelivered` notice, and ended
//! `completed` with nothing said to the newer message.

use serde_json::Value;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;

/// `first` is acknowledged, then the turn waits (an interrupt cuts the
/// wait short); everything else, the reminder included, gets only a note.
const SCRIPT: &str = r#"
[[rule]]
match = "^first"
steps = [
  { tool = "SendMessage", args = { text = "ack" } },
  { delay_ms = 60000, text = "still thinking" },
]

[[rule]]
steps = [ { text = "nope" } ]
"#;

fn ends_with(entries: &[Value], seq: i64) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| {
            e["kind"] == "turn_end"
                && e["inputs"]
                    .as_array()
                    .is_some_and(|a| a.contains(&seq.into()))
        })
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_retried_turn_owes_a_reply_to_the_message_that_interrupted_an_answered_one() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .start()
        .await;
    let (status, first) = host.send("r", "first", None).await;
    assert_eq!(status, 202, "{first}");
    let session = first["session"].as_str().unwrap().to_owned();
    host.wait_for(&session, |es| {
        deliveries(es)
            .contains(&"ack".to_owned())
            .then_some(Value::Null)
    })
    .await;
    let (status, second) = host.send("r", "second", None).await;
    assert_eq!(status, 202, "{second}");
    let seq = second["seq"].as_i64().unwrap();
    let ended = host.wait_turn_end(&session, seq).await;
    // the turn's own: reminded, then undelivered
    assert_eq!(ended["status"], "undelivered", "{ended:#}");
    let entries = host.entries(&session).await;
    let interrupted: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end" && e["status"] == "interrupted")
        .collect();
    assert!(
        interrupted.len() == 1 && interrupted[0]["deliveries"] == 1,
        "{entries:#?}"
    );
    let reminders = |es: &[Value]| es.iter().filter(|e| e["kind"] == "reminder").count();
    assert_eq!(reminders(&entries), 1, "{entries:#?}");

    // its retry reads its inputs back from the store: it owes the reply
    // as much, so it is reminded and ends undelivered again
    let turn = ended["turn"].as_str().unwrap();
    let (status, body) = host
        .post_raw(&format!("/v1/turns/{turn}/retry"), Some(TOKEN), None, "{}")
        .await;
    assert_eq!(status, 200, "{body}");
    let again = host
        .wait_for(&session, |es| {
            let ends = ends_with(es, seq);
            (ends.len() >= 2 && ends[ends.len() - 1]["turn"] != ended["turn"])
                .then(|| ends[ends.len() - 1].clone())
        })
        .await;
    assert_eq!(again["status"], "undelivered", "{again:#}");
    assert_eq!(reminders(&host.entries(&session).await), 2);
    host.shutdown().await;
}
