//! A room whose messages queue up while a discussion runs: each queued
//! message's discussion shows its members that message, however many
//! were posted after it. (The coordinator kept the room's 200 newest
//! public messages in memory, later messages included, and rendered a
//! member's input from them: with 200 messages posted behind one, the
//! members of its discussion were given an input without it, and
//! answered a question they were never shown; after a restart, the
//! first discussion resumed had the same fault. And a member was shown
//! the newest 20 new messages only: a message queued behind discussions
//! whose replies outnumbered that was left out of its own input.)

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

use super::groups::member_inputs;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::restart;
use crate::support::memory_model::content;
use crate::support::memory_model::send_message;
use crate::support::memory_model::without_updates;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// The message whose discussion holds the room while the others queue.
const FIRST: &str = "@a first topic: hold on";
/// The message queued behind it that the test follows.
const SECOND: &str = "@a second topic: what now?";
/// Messages queued after [`SECOND`]: as many as the coordinator kept.
const FILLERS: usize = 200;

/// The members' model: the input of [`FIRST`] is answered once `gate`
/// opens, any other input at once, each with one SendMessage; a turn
/// ends after it.
pub(super) fn model(body: &Value, gate: &watch::Receiver<bool>) -> Reply {
    let messages = without_updates(body);
    let Some(last) = messages.last() else {
        return Reply::error(400, "no messages");
    };
    if last["role"] == "tool" {
        return Reply::text("");
    }
    let id = format!("call_{}", messages.len());
    if content(last).contains("first topic") {
        return send_message(&id, "a on the first topic").hold_until(gate.clone());
    }
    send_message(&id, "a answers")
}

async fn post(host: &crate::support::fleet::TestHost, text: &str, key: &str) -> Value {
    let (status, answer) = host
        .post_raw(
            "/v1/groups/busy/messages",
            Some(TOKEN),
            Some(key),
            json!({ "text": text }).to_string(),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    answer
}

#[tokio::test]
async fn a_message_queued_behind_many_others_is_shown_to_its_members() {
    queued_behind_many(false).await;
}

#[tokio::test]
async fn a_message_queued_behind_many_others_is_shown_to_its_members_after_a_restart() {
    queued_behind_many(true).await;
}

/// [`SECOND`] and the [`FILLERS`] queue behind [`FIRST`]; with
/// `restarted`, the host stops while a's turn on [`FIRST`] runs and
/// starts again (the room's coordinator reads the timeline anew).
async fn queued_behind_many(restarted: bool) {
    let (open, gate) = watch::channel(false);
    let server = OpenAiServer::builder()
        .responder(move |body| model(body, &gate))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("a", "main", &["SendMessage"])
        .bot("b", "main", &["SendMessage"])
        .start()
        .await;
    host.client()
        .post_ok(
            "/v1/groups",
            &json!({"name": "busy", "members": ["a", "b"]}),
        )
        .await
        .unwrap();
    post(&host, FIRST, "first").await;
    // a's turn on the first message runs (held at the model)
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        server.wait_for_requests(1),
    )
    .await
    .expect("a's turn on the first message never reached the model");
    let second = post(&host, SECOND, "second").await;
    // messages that address nobody: their discussions end at once, after
    // the second's
    for i in 0..FILLERS {
        post(&host, &format!("@ghost filler {i}"), &format!("filler-{i}")).await;
    }
    open.send_replace(true);
    let host = if restarted {
        restart(host.shutdown().await).await
    } else {
        host
    };

    let session = second["session"].as_str().unwrap();
    let end = host
        .wait_turn_end(session, second["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["deliveries"], 1, "{end:#}");
    let inputs = member_inputs(&host, "a", "busy").await;
    assert_eq!(inputs.len(), 2, "{inputs:#?}");
    assert!(inputs[0].contains(FIRST), "{}", inputs[0]);
    // the second discussion's input shows its message, and none of the
    // messages posted after it
    assert!(inputs[1].contains(SECOND), "{}", inputs[1]);
    assert!(!inputs[1].contains("filler"), "{}", inputs[1]);
    // b was not addressed
    assert_eq!(
        member_inputs(&host, "b", "busy").await,
        Vec::<String>::new()
    );
    host.shutdown().await;
    server.shutdown().await;
}

/// The members' model for [`a_message_queued_behind_long_discussions_is_shown_to_its_member`]:
/// every input is answered with one SendMessage, the very first once
/// `gate` opens; a turn ends after it.
fn talker(body: &Value, gate: &watch::Receiver<bool>, first: &AtomicBool) -> Reply {
    let messages = without_updates(body);
    let Some(last) = messages.last() else {
        return Reply::error(400, "no messages");
    };
    if last["role"] == "tool" {
        return Reply::text("");
    }
    let reply = send_message(&format!("call_{}", messages.len()), "my view");
    if first.swap(false, Ordering::SeqCst) {
        return reply.hold_until(gate.clone());
    }
    reply
}

#[tokio::test]
async fn a_message_queued_behind_long_discussions_is_shown_to_its_member() {
    let (open, gate) = watch::channel(false);
    let first = AtomicBool::new(true);
    let server = OpenAiServer::builder()
        .responder(move |body| talker(body, &gate, &first))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("a", "main", &["SendMessage"])
        .bot("b", "main", &["SendMessage"])
        .bot("c", "main", &["SendMessage"])
        .start()
        .await;
    host.client()
        .post_ok(
            "/v1/groups",
            &json!({"name": "busy", "members": ["a", "b", "c"]}),
        )
        .await
        .unwrap();
    post(&host, "@a @b debate topic 1", "t1").await;
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        server.wait_for_requests(1),
    )
    .await
    .expect("a's turn on the first topic never reached the model");
    for i in 2..=4 {
        post(&host, &format!("@a @b debate topic {i}"), &format!("t{i}")).await;
    }
    let asked = post(&host, "@c summarize the four debates", "c").await;
    open.send_replace(true);

    // the four debates (six replies each) come after c's message: c is
    // shown it all the same
    let end = host
        .wait_turn_end(
            asked["session"].as_str().unwrap(),
            asked["seq"].as_i64().unwrap(),
        )
        .await;
    assert_eq!(end["deliveries"], 1, "{end:#}");
    let inputs = member_inputs(&host, "c", "busy").await;
    assert_eq!(inputs.len(), 1, "{inputs:#?}");
    assert!(
        inputs[0].contains("alice (person): @c summarize the four debates"),
        "{}",
        inputs[0]
    );
    host.shutdown().await;
    server.shutdown().await;
}
