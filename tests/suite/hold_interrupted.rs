//! A steady stream of a person's messages to a bot whose turn takes a
//! tool step before its SendMessage step (`HOLD_AFTER_INTERRUPTED`,
//! actors/src/bot_inputs.rs). Regression (QA): each message interrupted
//! the running turn after its tool step, so no turn reached its
//! SendMessage, and the bot replied to 2 of 59 messages sent one every
//! 0.5 s. After three runs in a row were interrupted, the next run goes on
//! to its end and replies; the message that came meanwhile is the next
//! turn's, answered once.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use serde_json::json;
use tokio::sync::watch;

use super::hold_path::Gates;
use super::hold_path::bot_r;
use super::hold_path::send;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::openai_server::last_user_text;
use crate::support::process::poll;

/// The model: a person's message gets a Read call (`read-<n>`), a Read's
/// result a SendMessage "re: <the last line of the last user message>"
/// (`send-<n>`), a SendMessage's result the text "done". Even requests
/// (the SendMessage steps of the first runs) wait for their gate.
async fn two_step_model(held: usize) -> (OpenAiServer, Gates) {
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..held).map(|_| watch::channel(false)).unzip();
    let seen = Arc::new(AtomicUsize::new(0));
    let server = OpenAiServer::builder()
        .responder(move |request| {
            let n = seen.fetch_add(1, SeqCst) + 1;
            let last = last_message(request).cloned().unwrap_or_default();
            let answered = last["tool_call_id"].as_str().unwrap_or_default().to_owned();
            let reply = if answered.starts_with("send") {
                Reply::text("done")
            } else if answered.starts_with("read") {
                let said = last_user_text(request)
                    .and_then(|t| t.lines().last())
                    .unwrap_or("");
                Reply::tool_call(
                    &format!("send-{n}"),
                    "SendMessage",
                    json!({ "text": format!("re: {said}") }).to_string(),
                )
            } else {
                Reply::tool_call(&format!("read-{n}"), "Read", r#"{"path": "notes.txt"}"#)
            };
            let gate = if n.is_multiple_of(2) {
                receivers.get(n / 2 - 1)
            } else {
                None
            };
            match gate {
                Some(gate) => reply.hold_until(gate.clone()),
                None => reply,
            }
        })
        .start()
        .await;
    (server, Gates(senders))
}

#[tokio::test]
async fn a_turn_interrupted_three_times_in_a_row_is_let_reply() {
    let (server, gates) = two_step_model(4).await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Read"])
        .start()
        .await;
    let url = host.url.clone();
    // m1..m4: each comes while the run before waits for its SendMessage
    // step (its Read step done): three runs in a row end interrupted
    let mut session = String::new();
    for (i, text) in ["m1", "m2", "m3", "m4"].iter().enumerate() {
        (session, _) = send(&url, text).await;
        let want = 2 * (i + 1);
        if tokio::time::timeout(
            std::time::Duration::from_secs(20),
            server.wait_for_requests(want),
        )
        .await
        .is_err()
        {
            let seen: Vec<String> = server
                .requests()
                .iter()
                .map(|r| {
                    last_message(&r.body)
                        .map(ToString::to_string)
                        .unwrap_or_default()
                })
                .collect();
            panic!("{} of {want} requests came: {seen:#?}", seen.len());
        }
    }
    let running = bot_r(&url).await["running_turn"].clone();
    assert!(running.is_string(), "{running}");
    // m5 waits behind the fourth run instead of interrupting it
    let (_, m5) = send(&url, "m5").await;
    poll(20, async || {
        let r = bot_r(&url).await;
        if r["queued"] == 1 && r["running_turn"] == running {
            Ok(())
        } else {
            Err(format!("m5 not queued behind the fourth run: {r}"))
        }
    })
    .await;
    gates.open(4);
    let end = host.wait_turn_end(&session, m5).await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), ["re: m4", "re: m5"], "{entries:#?}");
    let interrupted = entries
        .iter()
        .filter(|e| e["kind"] == "turn_end" && e["status"] == "interrupted")
        .count();
    assert_eq!(interrupted, 3, "{entries:#?}");
    gates.open_all();
    host.shutdown().await;
    server.shutdown().await;
}
