//! What `GET /v1/events` tells each user: `ready`, then the changes of
//! their own sessions up to the newest seq, and nothing of another user's
//! sessions (neither their ids nor their bots).

use std::time::Duration;

use botfleet::client::Client;
use botfleet::client::ServerEvent;
use futures::Stream;
use futures::StreamExt;

use crate::support::fleet::BOB_TOKEN;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// Longest wait for one event.
const BOUND: Duration = Duration::from_secs(20);

/// The next event of `events`, within [`BOUND`].
async fn next(events: &mut (impl Stream<Item = ServerEvent> + Unpin)) -> ServerEvent {
    tokio::time::timeout(BOUND, events.next())
        .await
        .expect("no event in time")
        .expect("the stream ended")
}

/// The events of `events` up to the first change of `session` at `seq`
/// or later, that one included.
async fn until_change(
    events: &mut (impl Stream<Item = ServerEvent> + Unpin),
    session: &str,
    seq: i64,
) -> Vec<ServerEvent> {
    let mut seen = Vec::new();
    loop {
        let ev = next(events).await;
        let reached = ev.event == "change"
            && ev.data["session"] == session
            && ev.data["seq"].as_i64().is_some_and(|s| s >= seq);
        seen.push(ev);
        if reached {
            return seen;
        }
    }
}

/// Alice's and bob's change streams, each past its `ready`.
async fn ready_streams(
    url: &str,
) -> (
    impl Stream<Item = ServerEvent> + Unpin + use<>,
    impl Stream<Item = ServerEvent> + Unpin + use<>,
) {
    let alice = Client::new(url, TOKEN).unwrap();
    let bob = Client::new(url, BOB_TOKEN).unwrap();
    let mut alice_events = alice.events().await.unwrap();
    let mut bob_events = bob.events().await.unwrap();
    assert_eq!(next(&mut alice_events).await.event, "ready");
    assert_eq!(next(&mut bob_events).await.event, "ready");
    (alice_events, bob_events)
}

#[tokio::test]
async fn each_user_is_signalled_their_own_sessions_only() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot_of("b", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let (mut alice_events, mut bob_events) = ready_streams(&host.url).await;

    let (a_session, a_end) = host.end_turn("a", "hello from alice").await;
    let a_last = a_end["seq"].as_i64().unwrap();
    let seen = until_change(&mut alice_events, &a_session, a_last).await;
    let mut last = 0;
    for ev in &seen {
        assert_eq!(ev.event, "change", "{seen:?}");
        assert_eq!(ev.data["session"], a_session.as_str(), "{seen:?}");
        assert_eq!(ev.data["bot"], "a", "{seen:?}");
        let seq = ev.data["seq"].as_i64().unwrap();
        assert!(seq > last, "seqs go up: {seen:?}");
        last = seq;
    }
    assert_eq!(last, a_last);

    // bob's stream, open all along, has his own change first
    let (b_end, _) = host.end_turn_as("b", BOB_TOKEN, "hello from bob").await;
    let b_session = b_end["session"].as_str().unwrap().to_owned();
    let seen = until_change(&mut bob_events, &b_session, b_end["seq"].as_i64().unwrap()).await;
    for ev in &seen {
        assert_eq!(ev.event, "change", "{seen:?}");
        assert_eq!(ev.data["session"], b_session.as_str(), "{seen:?}");
        assert_eq!(ev.data["bot"], "b", "{seen:?}");
    }
    host.shutdown().await;
}

/// A room's creation signals its owner (only) with its empty timeline at
/// seq 0, so that an open list of rooms learns of it (QA: the web page's
/// Rooms list showed a room created elsewhere only once navigated again).
#[tokio::test]
async fn a_new_room_is_signalled_to_its_owner_at_seq_0() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot("c", "s", &["SendMessage"])
        .bot_of("b", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let (mut alice_events, mut bob_events) = ready_streams(&host.url).await;

    let (status, room) = host
        .call(
            reqwest::Method::POST,
            "/v1/groups",
            TOKEN,
            Some(serde_json::json!({"name": "standup", "members": ["a", "c"]})),
        )
        .await;
    assert_eq!(status, 201, "{room}");
    let session = room["session"].as_str().expect("a session").to_owned();
    let ev = next(&mut alice_events).await;
    assert_eq!(ev.event, "change", "{ev:?}");
    assert_eq!(ev.data["session"], session.as_str(), "{ev:?}");
    assert_eq!(ev.data["seq"], 0, "{ev:?}");
    assert_eq!(ev.data["bot"], "standup", "{ev:?}");
    // and nothing of it to bob: his next signal is his own turn's
    let (b_end, _) = host.end_turn_as("b", BOB_TOKEN, "hello from bob").await;
    let b_session = b_end["session"].as_str().unwrap().to_owned();
    let seen = until_change(&mut bob_events, &b_session, b_end["seq"].as_i64().unwrap()).await;
    assert!(
        seen.iter()
            .all(|ev| ev.data["session"] == b_session.as_str()),
        "{seen:?}"
    );
    host.shutdown().await;
}

/// Regression (QA): a retry writes no entry, so the change stream said
/// nothing of the conversation until the retried turn stored its first
/// step: another tab of the page showed the bot idle, with no Stop,
/// through a slow first model call. The retry signals the session at its
/// latest seq at once.
#[tokio::test]
async fn a_retry_signals_its_conversation_at_once() {
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;

    use crate::support::openai_server::OpenAiServer;
    use crate::support::openai_server::Reply;

    let (open, gate) = tokio::sync::watch::channel(false);
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder(move |_| {
            // the first turn fails; the retried one waits for the gate
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Reply::error(400, "this test refuses the first call")
            } else {
                let args = serde_json::json!({ "text": "answered" }).to_string();
                Reply::tool_call("call_1", "SendMessage", args).hold_until(gate.clone())
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "first try").await;
    assert_eq!(end["status"], "failed", "{end}");
    let turn = end["turn"].as_str().unwrap().to_owned();
    let last = host
        .entries(&session)
        .await
        .last()
        .and_then(|e| e["seq"].as_i64())
        .unwrap();

    let client = Client::new(&host.url, TOKEN).unwrap();
    let mut events = client.events().await.unwrap();
    assert_eq!(next(&mut events).await.event, "ready");
    let (status, body) = host
        .call(
            reqwest::Method::POST,
            &format!("/v1/turns/{turn}/retry"),
            TOKEN,
            Some(serde_json::json!({})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // before the retried turn's model call answers (the gate is shut)
    until_change(&mut events, &session, last).await;
    open.send_replace(true);
    host.wait_delivery(&session, "answered").await;
    host.shutdown().await;
    server.shutdown().await;
}
