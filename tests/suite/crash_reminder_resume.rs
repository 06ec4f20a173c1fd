//! A turn resumed after a SIGKILL still gets its delivery reminder when
//! an earlier reminder of another kind is in its transcript: the resume
//! took any reminder entry (the loop reminder here) for the delivery
//! one, and a model that then stopped without SendMessage ended the turn
//! `undelivered` with no reminder, where without the crash it was
//! reminded and replied (audit, 2026-12-07). Through the binary.

use crate::support::fleet::TestFleet;
use crate::support::process::free_port;

use super::crash::killed_when;

/// The first answer repeats itself (a loop: the loop reminder follows);
/// the next is slow text without a call (the kill lands in its wait);
/// the delivery reminder is answered with SendMessage.
const SCRIPT: &str = r#"
[[rule]]
match = "ended your turn without sending"
steps = [ { tool = "SendMessage", args = { text = "reply after the delivery reminder" } } ]

[[rule]]
match = "started repeating itself"
steps = [ { text = "thinking, sending nothing", delay_ms = 1500 } ]

[[rule]]
match = "^go"
steps = [ { text = "I will repeat this sentence forever. ", repeat = 500, chunk = 20 } ]
"#;

#[tokio::test]
async fn a_resumed_turn_is_reminded_to_deliver_after_a_loop_reminder() {
    let fleet = TestFleet::new()
        .script("s", SCRIPT)
        .bot("r", "s", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false");
    let path = fleet.write();
    let log = fleet.path().join("host.log");
    // killed once the loop reminder is stored, while the next model call
    // waits; the turn's end after the restart
    let (host, _, es) = killed_when(&path, free_port(), &log, "go", |es| {
        es.iter().any(|e| e["kind"] == "reminder")
    })
    .await;
    let end = es.iter().find(|e| e["kind"] == "turn_end").unwrap();
    assert_eq!(end["status"], "completed", "{es:#?}");
    let reminders: Vec<&str> = es
        .iter()
        .filter(|e| e["kind"] == "reminder")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(reminders.len(), 2, "the loop's and the delivery's: {es:#?}");
    let delivered: Vec<&str> = es
        .iter()
        .filter(|e| e["kind"] == "delivery")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(delivered, ["reply after the delivery reminder"], "{es:#?}");
    host.kill9().await;
}
