//! `GET /v1/events` when a stream falls behind: the user is told to
//! re-fetch (`resync`), and not how many signals the host dropped. That
//! count was the host's (every user's signals share one queue): a user
//! whose own sessions never changed was told they "missed" the changes of
//! another user's sessions, which also told them how busy that user was.

use std::sync::mpsc;
use std::time::Duration;

use botfleet::client::Client;
use botfleet::client::ServerEvent;
use botfleet_memory::BotId;
use botfleet_memory::EntryId;
use botfleet_memory::EntryKind;
use botfleet_memory::Mutation;
use botfleet_memory::NewEntry;
use botfleet_memory::SessionKey;
use botfleet_memory::SessionKind;
use botfleet_memory::SessionRecord;
use botfleet_memory::UserId;
use futures::Stream;
use futures::StreamExt;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;

const ECHO: &str = r#"
[[rule]]
steps = [ { tool = "SendMessage", args = { text = "echo: {{input}}" } } ]
"#;

/// Sessions of bob's written at once: more signals than the host's queue
/// holds (4096).
const BOBS_SESSIONS: usize = 5_000;

/// Longest wait for one event.
const BOUND: Duration = Duration::from_secs(20);

async fn next(events: &mut (impl Stream<Item = ServerEvent> + Unpin)) -> ServerEvent {
    tokio::time::timeout(BOUND, events.next())
        .await
        .expect("no event in time")
        .expect("the stream ended")
}

/// A session of bob's bot `b` with bot `peer`, and a message in it.
fn bobs_session(peer: &str) -> [Mutation; 2] {
    let key = SessionKey {
        bot: BotId::new("b").unwrap(),
        kind: SessionKind::Agent,
        peer: peer.into(),
    };
    let id = key.id();
    [
        Mutation::EnsureSession(SessionRecord {
            id,
            key,
            owner: UserId::new("bob").unwrap(),
            epoch: 0,
            last_seq: 0,
            created_at: 0,
        }),
        Mutation::Append(Box::new(NewEntry {
            id: EntryId::new_v7(),
            session: id,
            author: peer.into(),
            turn: None,
            kind: EntryKind::UserMessage {
                text: "busy".into(),
            },
        })),
    ]
}

// one thread: while the test holds it, the host reads no signal
#[tokio::test(flavor = "current_thread")]
async fn a_stream_behind_is_told_to_resync_without_other_users_counts() {
    let host = TestFleet::new()
        .script("s", ECHO)
        .bot("a", "s", &["SendMessage"])
        .bot_of("b", "s", &["SendMessage"], "bob")
        .start()
        .await;
    let alice = Client::new(&host.url, TOKEN).unwrap();
    let mut events = alice.events().await.unwrap();
    assert_eq!(next(&mut events).await.event, "ready");

    // bob's sessions change while alice's stream reads nothing: the
    // thread that would read it waits here for the commit
    let batch: Vec<Mutation> = (0..BOBS_SESSIONS)
        .flat_map(|i| bobs_session(&format!("peer{i}")))
        .collect();
    let store = host.host.as_ref().unwrap().fleet.store();
    let write_blocking = |batch: Vec<Mutation>| {
        let (tx, rx) = mpsc::channel();
        store
            .write_then(
                batch,
                Box::new(move |result| {
                    let _ = tx.send(result.map(|_| ()));
                }),
            )
            .unwrap();
        rx.recv_timeout(Duration::from_secs(120))
            .expect("the write never committed")
            .unwrap();
    };
    write_blocking(batch);
    // a write is answered before its signals are sent; the next one, after
    write_blocking(bobs_session("peer0").into());

    // alice is told to re-fetch, and nothing of bob's volume
    let ev = next(&mut events).await;
    assert_eq!(ev.event, "resync", "{ev:?}");
    assert_eq!(ev.data, json!({}), "{ev:?}");

    // and the stream goes on with her own signals
    let (session, end) = host.end_turn("a", "hello").await;
    let last = end["seq"].as_i64().unwrap();
    loop {
        let ev = next(&mut events).await;
        assert_eq!(ev.event, "change", "{ev:?}");
        assert_eq!(ev.data["session"], session.as_str(), "{ev:?}");
        if ev.data["seq"].as_i64() == Some(last) {
            break;
        }
    }
    host.shutdown().await;
}
