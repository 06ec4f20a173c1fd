//! A duplicate post to a room (same `Idempotency-Key`, same text) answers
//! what the original answered: whom it addressed and which mentions
//! matched nobody, as they were when it was accepted. (Before, a
//! duplicate recomputed them from the room's members at the time of the
//! repeat: after a member left, it answered `addressed: []` and named the
//! member it had addressed as unknown.)

use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} speaks" } } ]
"#;

#[tokio::test]
async fn a_duplicate_room_post_answers_the_original_addressees_after_the_members_change() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("m1", "s", &["SendMessage"])
        .bot("m2", "s", &["SendMessage"])
        .bot("m3", "s", &["SendMessage"])
        .start()
        .await;
    let (status, room) = host
        .post_raw(
            "/v1/groups",
            Some(TOKEN),
            None,
            json!({"name": "r3", "members": ["m1", "m2", "m3"]}).to_string(),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let body = json!({"text": "@m3 @nobody hi"}).to_string();
    let post = || {
        host.post_raw(
            "/v1/groups/r3/messages",
            Some(TOKEN),
            Some("k1"),
            body.clone(),
        )
    };
    let (status, first) = post().await;
    assert_eq!(status, 202, "{first}");
    assert_eq!(first["addressed"], json!(["m3"]), "{first}");
    assert_eq!(first["unknown_mentions"], json!(["nobody"]), "{first}");
    assert_eq!(first["removed_mentions"], json!([]), "{first}");
    // the run ends (the coordinator rewrites its stored state as it goes)
    let session = first["session"].as_str().unwrap();
    host.wait_turn_end(session, first["seq"].as_i64().unwrap())
        .await;

    // m3 leaves the room
    let resp = host
        .http
        .put(format!("{}/v1/groups/r3/members", host.url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(json!({"members": ["m1", "m2"]}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);

    let (status, again) = post().await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["status"], "duplicate", "{again}");
    assert_eq!(again["seq"], first["seq"], "{again}");
    assert_eq!(again["addressed"], json!(["m3"]), "{again}");
    assert_eq!(again["unknown_mentions"], json!(["nobody"]), "{again}");
    assert_eq!(again["removed_mentions"], json!([]), "{again}");
    host.shutdown().await;
}
