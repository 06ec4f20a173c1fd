//! Webhook delivery ids are taken as sent: the id is the idempotency key,
//! so one that could be confused with another (a control character in it)
//! is refused with a 400 naming the header and the rule, and admits
//! nothing.

use botfleet::api::sign_hook;
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;

const SECRET: &str = "a-hook-secret-of-some-length";

/// The model takes a note of what it saw, and does not reply.
const NOTE: &str = r#"
[[rule]]
steps = [ { text = "saw: {{input}}" } ]
"#;

async fn hooked_host() -> TestHost {
    TestFleet::new()
        .script("s", NOTE)
        .bot("r", "s", &["SendMessage"])
        .bot_lines(&format!(
            "[[bots.hooks]]\nname = \"gh\"\nsecret = \"{SECRET}\"\n"
        ))
        .start()
        .await
}

/// Posts a signed `body` to the hook with delivery id `delivery`.
async fn deliver(host: &TestHost, delivery: &str, body: &str) -> (u16, Value) {
    let signature = sign_hook(SECRET.as_bytes(), body.as_bytes());
    host.post_hook("/v1/hooks/r/gh", Some(delivery), Some(&signature), body)
        .await
}

/// Regression: the delivery id was trimmed and otherwise taken whole, so
/// `w\t1` was admitted as an id of its own. Now an id with a control
/// character is refused, naming the header and the rule, and a clean id
/// still works.
#[tokio::test]
async fn a_delivery_id_with_a_control_character_is_refused() {
    let host = hooked_host().await;
    let payload = r#"{"n":1}"#;
    let (status, body) = deliver(&host, "w\t1", payload).await;
    assert_eq!(status, 400, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("X-Botfleet-Delivery") && msg.contains("control characters"),
        "{body}"
    );
    // nothing was admitted: the same payload with a clean id is new
    let (status, body) = deliver(&host, "w1", payload).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "accepted", "{body}");
    let (status, body) = deliver(&host, "w1", payload).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "duplicate", "{body}");
    host.shutdown().await;
}
