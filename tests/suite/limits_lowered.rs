//! A message accepted before `host.max_text_chars` was lowered, sent again
//! with its `Idempotency-Key`, is answered as its admission would be
//! (`duplicate`; `conflict` for another text), to a bot and to a room.
//! Regression (QA, 2026-12-05): it was refused as too long and told to
//! split the message, so a person following the advice sent an answered
//! message again, in pieces.

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo" } } ]
"#;

#[tokio::test]
async fn a_retry_of_a_message_accepted_before_the_limit_was_lowered_is_a_duplicate() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("r", "s", &["SendMessage"])
        .bot("q", "s", &["SendMessage"])
        .start()
        .await;
    let long = "x".repeat(150);
    let (status, sent) = host.send("r", &long, Some("k-bot")).await;
    assert_eq!(status, 202, "{sent}");
    host.wait_turn_end(
        sent["session"].as_str().unwrap(),
        sent["seq"].as_i64().unwrap(),
    )
    .await;
    let (status, room) = host.create_room(TOKEN, "den", &["r", "q"]).await;
    assert_eq!(status, 201, "{room}");
    let body = json!({ "text": long }).to_string();
    let (status, posted) = host
        .post_raw(
            "/v1/groups/den/messages",
            Some(TOKEN),
            Some("k-room"),
            body.clone(),
        )
        .await;
    assert_eq!(status, 202, "{posted}");

    let fleet = host.shutdown().await.host("max_text_chars = 100");
    fleet.write();
    let host = restart(fleet).await;
    // the same message again: the original record, not "split it"
    let (status, again) = host.send("r", &long, Some("k-bot")).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "duplicate", "{again}");
    assert_eq!(again["seq"], sent["seq"], "{again}");
    let (status, again) = host
        .post_raw("/v1/groups/den/messages", Some(TOKEN), Some("k-room"), body)
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "duplicate", "{again}");
    // another text under the key: the conflict names the original
    let (status, other) = host.send("r", &"y".repeat(150), Some("k-bot")).await;
    assert_eq!(status, 409, "{other}");
    // a new long message is still refused, with the advice
    let (status, new) = host.send("r", &long, Some("k-new")).await;
    assert_eq!(status, 400, "{new}");
    assert!(
        new["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the limit is 100: split it"),
        "{new}"
    );
    host.shutdown().await;
}
