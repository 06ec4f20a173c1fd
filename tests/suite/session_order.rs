//! Two bots' messages to one session that reach their bot in the other
//! order than they were committed, as an OpenAI-compatible server on
//! loopback receives the requests. Each sender routes what it admitted
//! after its own commit returns, so the later message can have its turn
//! first and the earlier one the turn after (tester H1, round 22: fan's
//! DM got c's reply, then r2's, 4 ms apart; r2's was answered first). The
//! second turn must see what the first said, and so must the turns after
//! it. (Before, its context stopped at its own input: the model was sent
//! the session without r2's message and without its own reply to it, and
//! the scripted model's call ids, made from the request's size, came out
//! the same in both turns; the tail kept in memory then left both out of
//! every later turn's request too, until it was next loaded.)
//!
//! The message committed first is written through the store, the way a
//! sender's commit lands, and reaches the bot only when it reads its inbox
//! again (the store is what a bot reads when an input comes out of order):
//! here after the later message's turn ended, the order H1 saw.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use botfleet::actors::FleetHandle;
use botfleet::actors::Runtime;
use botfleet::actors::user_message;
use botfleet::memory::AdmitOutcome;
use botfleet::memory::AdmitRequest;
use botfleet::memory::AdmittedRecord;
use botfleet::memory::BotId;
use botfleet::memory::BotRecord;
use botfleet::memory::EntryId;
use botfleet::memory::EntryKind;
use botfleet::memory::InputDigest;
use botfleet::memory::Mutation;
use botfleet::memory::MutationResult;
use botfleet::memory::NewEntry;
use botfleet::memory::Priority;
use botfleet::memory::SessionId;
use botfleet::memory::SessionKey;
use botfleet::memory::SessionKind;
use botfleet::memory::Store;
use botfleet::memory::TurnStatus;
use botfleet::model::Model;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

use crate::support::clocked::ClockedParts;
use crate::support::clocked::bot_record;
use crate::support::clocked::clocked_parts;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::user_texts;

/// A model that answers the newest message with SendMessage quoting it,
/// and stops after the result; each call has an id of its own.
fn model() -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    let calls = AtomicUsize::new(0);
    move |body: &Value| {
        if last_message(body).is_some_and(|m| m["role"] == "tool") {
            return Reply::text("");
        }
        let newest = user_texts(body).last().copied().unwrap_or("");
        let said = if newest.contains("c-note") {
            "answer to c"
        } else if newest.contains("r2-note") {
            "answer to r2"
        } else if newest.contains("b-note") {
            "answer to b"
        } else if newest.contains("fan out") {
            "answer to alice"
        } else {
            "answer to something else"
        };
        let n = calls.fetch_add(1, Ordering::SeqCst);
        Reply::tool_call(
            &format!("send-{n}"),
            "SendMessage",
            json!({ "text": said }).to_string(),
        )
    }
}

/// The admission of bot `from`'s message `text` to `fan`'s DM with alice
/// (where a reply to fan's SendToAgent from that DM goes).
fn message_from(from: &str, fan: &BotRecord, text: &str) -> AdmitRequest {
    let session = SessionKey {
        bot: fan.id.clone(),
        kind: SessionKind::Dm,
        peer: "alice".into(),
    };
    AdmitRequest {
        source: format!("bot:{from}"),
        nonce: EntryId::new_v7().to_string(),
        nonce_time_ms: None,
        digest: InputDigest::of_parts([b"agent_message".as_slice(), text.as_bytes()]),
        entry: NewEntry {
            id: EntryId::new_v7(),
            session: session.id(),
            author: from.to_owned(),
            turn: None,
            kind: EntryKind::AgentMessage {
                from: BotId::new(from).unwrap(),
                text: text.to_owned(),
                hop: 2,
                reply_session: None,
                chain: None,
                answers: false,
            },
        },
        session,
        owner: fan.owner.clone(),
        priority: Priority::Bot,
    }
}

/// Bot `fan` (SendMessage, SendToAgent) on a strict loopback server
/// answering with [`model`], on a clock set to the hour of H1's run.
struct Fan {
    server: OpenAiServer,
    _dir: tempfile::TempDir,
    fleet: FleetHandle,
    store: Store,
    fan: BotRecord,
}

impl Fan {
    async fn start() -> Self {
        let server = OpenAiServer::builder()
            .strict()
            .responder(model())
            .start()
            .await;
        let ClockedParts {
            dir,
            store,
            ws,
            mut settings,
            ..
        } = clocked_parts("2026-12-02T18:27:06Z");
        settings.extract_memory = false;
        let openai = OpenAiModel::new(OpenAiOptions {
            max_retries: 0,
            ..OpenAiOptions::new(server.base_url(), "test-model")
        })
        .unwrap();
        let models = HashMap::from([("main".to_owned(), Arc::new(openai) as Arc<dyn Model>)]);
        let rt = Runtime::new(store, models, ToolRegistry::builtin(), settings, ws);
        let fan = bot_record("fan", "main", &["SendMessage", "SendToAgent"]);
        let fleet = FleetHandle::start(rt, vec![fan.clone()]).await.unwrap();
        let store = fleet.store().clone();
        Self {
            server,
            _dir: dir,
            fleet,
            store,
            fan,
        }
    }
}

/// Admits `req` (routed) and waits until its turn completed.
async fn answered(fleet: &FleetHandle, store: &Store, req: AdmitRequest) -> AdmittedRecord {
    let sent = fleet.admit(req).await.unwrap();
    let AdmitOutcome::Accepted(admitted) = sent else {
        panic!("not admitted: {sent:?}");
    };
    assert_eq!(
        turn_end(store, admitted.session, admitted.seq).await,
        TurnStatus::Completed
    );
    admitted
}

/// c's message to alice's DM with `fan` committed through the store (not
/// routed: the bot learns of it only when it reads its inbox), then r2's
/// admitted and routed; once r2's turn completed, the bot is woken and
/// c's turn completes. c's record.
async fn c_then_r2(fleet: &FleetHandle, store: &Store, fan: &BotRecord) -> AdmittedRecord {
    let written = store
        .write(vec![Mutation::Admit(Box::new(message_from(
            "c", fan, "c-note",
        )))])
        .await
        .unwrap();
    let Some(MutationResult::Admitted(AdmitOutcome::Accepted(c))) = written.last() else {
        panic!("c's message not admitted: {written:?}");
    };
    let sent = fleet
        .admit(message_from("r2", fan, "r2-note"))
        .await
        .unwrap();
    let AdmitOutcome::Accepted(r2) = sent else {
        panic!("r2's message not admitted: {sent:?}");
    };
    assert!(c.seq < r2.seq && c.session == r2.session);
    assert_eq!(
        turn_end(store, r2.session, r2.seq).await,
        TurnStatus::Completed
    );
    // c's message reaches the bot now
    fleet.wake(fan.id.clone()).unwrap();
    assert_eq!(
        turn_end(store, c.session, c.seq).await,
        TurnStatus::Completed
    );
    c.clone()
}

/// Waits (on the store's change signals, 30 s at most) until a turn over
/// input `seq` of `session` ended; its status.
async fn turn_end(store: &Store, session: SessionId, seq: i64) -> TurnStatus {
    let mut changes = store.subscribe();
    loop {
        let entries = store.entries_after(session, 0, 1000).await.unwrap();
        let end = entries.iter().find_map(|e| match &e.kind {
            EntryKind::TurnEnd { status, inputs, .. } if inputs.contains(&seq) => Some(*status),
            _ => None,
        });
        if let Some(status) = end {
            return status;
        }
        tokio::time::timeout(Duration::from_secs(30), changes.recv())
            .await
            .expect("the turn ended within 30 s")
            .ok();
    }
}

#[tokio::test]
async fn a_message_answered_after_a_later_one_sees_that_answer() {
    let Fan {
        server,
        _dir,
        fleet,
        store,
        fan,
    } = Fan::start().await;

    // alice's message starts the DM (fan sends to c and r2 from there, in
    // H1's run); the bot keeps the session's context in memory after it
    answered(
        &fleet,
        &store,
        user_message(&fan.owner, &fan, "fan out", None),
    )
    .await;

    // c's message is committed first, not routed; r2's after it, routed,
    // and answered; then c's reaches the bot and is answered
    c_then_r2(&fleet, &store, &fan).await;

    // and b's, routed in order, after both (the tail kept in memory after
    // c's turn used to leave r2's message and answer out too)
    let sent = fleet
        .admit(message_from("b", &fan, "b-note"))
        .await
        .unwrap();
    let AdmitOutcome::Accepted(b) = sent else {
        panic!("b's message not admitted: {sent:?}");
    };
    assert_eq!(
        turn_end(&store, b.session, b.seq).await,
        TurnStatus::Completed
    );

    let requests: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    for note in ["c-note", "b-note"] {
        let answering: Vec<&Value> = requests
            .iter()
            .filter(|b| {
                last_message(b).is_some_and(|m| m["role"] == "user")
                    && user_texts(b).last().is_some_and(|t| t.contains(note))
            })
            .collect();
        assert_eq!(answering.len(), 1, "{note}: {requests:#?}");
        let request = answering[0];
        // r2's message and the bot's answer to it come before
        let users = user_texts(request);
        let sent_before: Vec<&str> = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        assert!(
            users.iter().any(|t| t.contains("r2-note"))
                && sent_before.iter().any(|a| a.contains("answer to r2")),
            "the request answering {note} does not show r2-note and the answer to it: {request:#}"
        );
    }
    fleet.shutdown().await;
    server.shutdown().await;
}

/// The admission of bot `from`'s message `text` to its own conversation
/// with `fan` (a session other than alice's DM).
fn agent_message(from: &str, fan: &BotRecord, text: &str) -> AdmitRequest {
    let mut req = message_from(from, fan, text);
    req.session = SessionKey {
        bot: fan.id.clone(),
        kind: SessionKind::Agent,
        peer: from.to_owned(),
    };
    req.entry.session = req.session.id();
    req
}

/// Regression (round 22's f8 report, "left undone"): the later message's
/// turn read alice's DM from the store (the bot had no context of it in
/// memory), up to that message, and so also the earlier message, which no
/// turn had claimed yet: the model was sent c-note above r2-note, free to
/// answer both, and c-note's own turn then answered it again. A message
/// waiting in the inbox belongs to the turn that claims it.
#[tokio::test]
async fn a_reloaded_turn_leaves_out_an_earlier_message_still_waiting() {
    let Fan {
        server,
        _dir,
        fleet,
        store,
        fan,
    } = Fan::start().await;

    // z's message in another session wakes the bot; it has no context of
    // alice's DM in memory after that turn
    answered(&fleet, &store, agent_message("z", &fan, "z-note")).await;

    // c's message is committed first, not routed; r2's after it, routed,
    // and answered; then c's reaches the bot and is answered
    let c = c_then_r2(&fleet, &store, &fan).await;

    let requests: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    let answering_r2: Vec<&Value> = requests
        .iter()
        .filter(|b| user_texts(b).last().is_some_and(|t| t.contains("r2-note")))
        .collect();
    assert!(!answering_r2.is_empty(), "{requests:#?}");
    for request in answering_r2 {
        assert!(
            !user_texts(request).iter().any(|t| t.contains("c-note")),
            "r2-note's turn was shown c-note, which no turn had claimed: {request:#}"
        );
    }
    // each message answered once, by its own turn
    let entries = store.entries_after(c.session, 0, 1000).await.unwrap();
    let delivered: Vec<&str> = entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Delivery { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(delivered, ["answer to r2", "answer to c"], "{entries:#?}");
    fleet.shutdown().await;
    server.shutdown().await;
}
