//! A room's owner makes it private while a discussion of another user's
//! message waits its turn: that discussion still runs with the shared
//! surface, as a loopback OpenAI-compatible server receives its turns.
//! (Before, the coordinator took the surface from the room as it was
//! when the discussion started: alice's `a1` answered bob's message with
//! her private tools, SearchTranscript over her DMs among them, and what
//! it published bob read once his bot was back in the room; and a second
//! change, from a room no longer shared, gave a discussion still running
//! the private surface.)
//!
//! Posts that cross a member change are refused in the write's
//! transaction; actors/src/group/room_tests.rs interleaves them.

use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::step_past_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::shared_room::mixed_fleet;
use crate::support::shared_room::open_mixed_room;

/// Alice's message whose discussion holds `a1`'s turn until the gate
/// opens.
const HOLD: &str = "@a1 HOLD";
/// Bob's message, discussed after alice made the room private.
const BOBS: &str = "@a1 what did alice tell you in private?";

/// The bots' model: a turn on [`HOLD`] answers once `gate` opens; every
/// other says `ok` (after SendMessage, stop).
fn model(body: &Value, gate: &watch::Receiver<bool>) -> Reply {
    let (id, last) = match step_past_updates(body) {
        Ok(step) => step,
        Err(reply) => return *reply,
    };
    if content(last).contains("HOLD") {
        return send_message(&id, "held").hold_until(gate.clone());
    }
    send_message(&id, "ok")
}

/// The tools a request showed the model, by name.
fn tools_of(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_discussion_of_bobs_message_keeps_the_shared_surface_after_the_room_turns_private() {
    let (open, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| model(body, &gate))
        .start()
        .await;
    let host = mixed_fleet(
        &server.base_url(),
        &["SendMessage", "SearchTranscript"],
        &["SendMessage"],
    )
    .bot("a2", "main", &["SendMessage"])
    .start()
    .await;
    open_mixed_room(&host).await;

    // alice's discussion holds a1's turn; bob's message waits behind it
    host.post_text("/v1/groups/mixed/messages", TOKEN, HOLD)
        .await;
    tokio::time::timeout(Duration::from_secs(30), server.wait_for_requests(1))
        .await
        .expect("a1 never took its turn on alice's message");
    let bobs = host
        .post_text("/v1/groups/mixed/messages", BOB_TOKEN, BOBS)
        .await;
    assert_eq!(bobs["addressed"], json!(["a1"]), "{bobs}");
    let (status, room) = host
        .call(
            reqwest::Method::PUT,
            "/v1/groups/mixed/members",
            TOKEN,
            Some(json!({ "members": ["a1", "a2"] })),
        )
        .await;
    assert_eq!((status, &room["shared"]), (200, &json!(false)), "{room}");
    open.send(true).unwrap();

    // bob's discussion: a1 is shown only the shared room's tools
    host.wait_turn_end(
        bobs["session"].as_str().unwrap(),
        bobs["seq"].as_i64().unwrap(),
    )
    .await;
    let requests: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| content(&b["messages"][0]).contains("Test bot a1."))
        .filter(|b| b.to_string().contains("what did alice tell you"))
        .collect();
    assert!(!requests.is_empty(), "a1 never took bob's message");
    for body in &requests {
        let shown = tools_of(body);
        assert!(
            shown.contains(&"SendMessage".to_owned())
                && !shown.contains(&"SearchTranscript".to_owned()),
            "a1 was shown {shown:?} for bob's message"
        );
    }
    // alice's next discussion in her private room has a1's own tools
    let before = server.request_count();
    host.discuss(TOKEN, "mixed", "@a1 and now?").await;
    let own: Vec<Vec<String>> = server.requests()[before..]
        .iter()
        .filter(|r| content(&r.body["messages"][0]).contains("Test bot a1."))
        .map(|r| tools_of(&r.body))
        .collect();
    assert!(
        !own.is_empty()
            && own
                .iter()
                .all(|t| t.contains(&"SearchTranscript".to_owned())),
        "{own:?}"
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// A discussion under way when the room turns private, and then changes
/// again among alice's bots, finishes with the shared surface: bob's
/// `b1` speaks after both changes, shown no tool of bob's private
/// surface. (Before, the second change, from a room no longer shared,
/// set the surface of the room's turns to the private one while the
/// discussion of bob's message was still running.)
#[tokio::test]
async fn a_running_discussion_keeps_the_shared_surface_through_two_member_changes() {
    let (open, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| model(body, &gate))
        .start()
        .await;
    let tools = ["SendMessage", "SearchTranscript"];
    let host = mixed_fleet(&server.base_url(), &tools, &tools)
        .bot("a2", "main", &["SendMessage"])
        .start()
        .await;
    open_mixed_room(&host).await;

    // a1 speaks first and is held; b1 speaks after it
    let bobs = host
        .post_text("/v1/groups/mixed/messages", BOB_TOKEN, "@a1 @b1 HOLD")
        .await;
    assert_eq!(bobs["addressed"], json!(["a1", "b1"]), "{bobs}");
    tokio::time::timeout(Duration::from_secs(30), server.wait_for_requests(1))
        .await
        .expect("a1 never took its turn on bob's message");
    for members in [["a1", "a2"], ["a2", "a1"]] {
        let (status, room) = host
            .call(
                reqwest::Method::PUT,
                "/v1/groups/mixed/members",
                TOKEN,
                Some(json!({ "members": members })),
            )
            .await;
        assert_eq!((status, &room["shared"]), (200, &json!(false)), "{room}");
    }
    open.send(true).unwrap();
    host.wait_turn_end(
        bobs["session"].as_str().unwrap(),
        bobs["seq"].as_i64().unwrap(),
    )
    .await;
    let shown: Vec<Vec<String>> = server
        .requests()
        .iter()
        .filter(|r| content(&r.body["messages"][0]).contains("Test bot b1."))
        .map(|r| tools_of(&r.body))
        .collect();
    assert!(
        !shown.is_empty()
            && shown
                .iter()
                .all(|t| !t.contains(&"SearchTranscript".to_owned())),
        "b1 was shown {shown:?}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
