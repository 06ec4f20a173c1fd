//! A shared room whose owner was taken out of `[[users]]`: nobody could
//! close it, and the other members' owners could never take their bots
//! out of it. Now any user who sees it may close it; its members stay
//! the gone owner's to change, and the refusal says the room can be
//! closed instead.

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;

const SCRIPT: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "heard" } } ]
"#;

#[tokio::test]
async fn a_room_whose_owner_left_can_be_closed_by_a_members_owner() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage"])
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "both", &["a1", "b1"]).await;
    assert_eq!(
        (status, room["shared"].clone()),
        (201, json!(true)),
        "{room}"
    );
    // while alice is a user, the room is hers to close
    let (status, refused) = host
        .call(reqwest::Method::DELETE, "/v1/groups/both", BOB_TOKEN, None)
        .await;
    assert_eq!(status, 403, "{refused}");

    // alice leaves the host, her bot with her
    let fleet = host
        .shutdown()
        .await
        .without_bot("a1")
        .without_user("alice");
    fleet.write();
    let host = restart(fleet).await;
    let (status, refused) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/both/members",
            BOB_TOKEN,
            Some(json!({"members": ["b1"]})),
        )
        .await;
    assert_eq!(status, 403, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("alice is no longer a user of this host")
            && message.contains("you may close the room"),
        "{refused}"
    );
    let (status, closed) = host
        .call(reqwest::Method::DELETE, "/v1/groups/both", BOB_TOKEN, None)
        .await;
    assert_eq!(status, 200, "{closed}");
    assert!(closed["closed_at"].is_i64(), "{closed}");
    let (status, page) = host
        .call(
            reqwest::Method::GET,
            "/v1/groups/both/entries",
            BOB_TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    let entries = page["entries"].as_array().unwrap().clone();
    assert!(
        entries.iter().any(|e| e["code"] == "room_closed"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("bob closed this room"))),
        "{entries:#?}"
    );
    // and it takes no more messages
    let (status, v) = host
        .post_raw(
            "/v1/groups/both/messages",
            Some(BOB_TOKEN),
            Some("k1"),
            json!({"text": "anyone?"}).to_string(),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    host.shutdown().await;
}
