//! A member's turn of a discussion that ran with the shared surface (a
//! message of another user, in a room shared then) is not retried once
//! the room is no longer shared: the surface follows the discussion the
//! room runs now, so the retry ran the other user's message with the
//! owner's private tools (Shell here; audit, 2026-12-07). A turn of the
//! owner's own discussion is retried as before
//! (`group_replies::a_retried_member_turn_is_told_its_message_is_not_published`).

use serde_json::json;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const SCRIPT: &str = r#"
[[rule]]
bot = "a1"
match = "RUNSHELL"
steps = [
  { delay_ms = 60000, tool = "Shell", args = { command = "echo PRIVATE-SURFACE-RAN" } },
  { tool = "SendMessage", args = { text = "shell said: {{tool_result}}" } },
]

[[rule]]
steps = [ { tool = "SendMessage", args = { text = "{{bot}} says hi" } } ]
"#;

#[tokio::test]
async fn a_member_turn_of_a_shared_discussion_is_not_retried_with_private_tools() {
    let host = TestFleet::new()
        .script("s", SCRIPT)
        .bot("a1", "s", &["SendMessage", "Shell"])
        .bot("a2", "s", &["SendMessage"])
        .bot_of("b1", "s", &["SendMessage"], "bob")
        .bot_lines("shareable = true")
        .tables("[review]\nshell = \"off\"\n")
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (status, room) = host.create_room(TOKEN, "mix", &["a1", "b1"]).await;
    assert_eq!(status, 201, "{room}");
    // bob's message; a1's turn on it is cancelled while it waits
    let asked = host
        .post_text("/v1/groups/mix/messages", BOB_TOKEN, "@a1 RUNSHELL")
        .await;
    host.wait_running("a1").await;
    let (status, changed) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/mix/members",
            TOKEN,
            Some(json!({ "members": ["a1", "a2"] })),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    let (status, cancelled) = host
        .call(reqwest::Method::POST, "/v1/bots/a1/cancel", TOKEN, None)
        .await;
    assert_eq!(status, 200, "{cancelled}");
    host.wait_turn_end(
        asked["session"].as_str().unwrap(),
        asked["seq"].as_i64().unwrap(),
    )
    .await;
    // alice's own discussion now runs with the private surface
    host.discuss(TOKEN, "mix", "@a2 hi").await;
    let (status, turns) = host.get("/v1/bots/a1/turns", TOKEN).await;
    assert_eq!(status, 200, "{turns}");
    let cancelled = turns["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["status"] == "cancelled")
        .unwrap_or_else(|| panic!("no cancelled turn: {turns:#}"));
    let id = cancelled["id"].as_str().unwrap();
    let (status, refused) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{id}/retry"),
            TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("shared room's tools") && message.contains("post a new message"),
        "{message}"
    );
    host.shutdown().await;
}
