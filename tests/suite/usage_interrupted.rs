//! Regression (QA): a person's new message that cut off a turn's first
//! model call while it streamed counted nothing of that call, in the
//! bot's usage or against its daily budget (a turn interrupted before it
//! stored anything ended without a write); the same cut in a later call
//! was counted. What the call streamed was made, and counts.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

#[tokio::test]
async fn a_first_call_cut_off_by_a_newer_message_counts() {
    let seen = Arc::new(AtomicUsize::new(0));
    // the first request streams a few words and stalls; later ones answer
    // with a SendMessage, and its result with "done"
    let server = OpenAiServer::builder()
        .responder(move |request| {
            if seen.fetch_add(1, SeqCst) == 0 {
                // the role and two pieces of text at once, then silence
                // with the body open (a model still thinking)
                return Reply::text("The first words of a long answer that goes on").stall_after(3);
            }
            let last = last_message(request).cloned().unwrap_or_default();
            if last["role"] == "tool" {
                Reply::text("done").usage(100, 10)
            } else {
                Reply::tool_call("send-1", "SendMessage", json!({"text": "ok"}).to_string())
                    .usage(100, 10)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (_, first) = host.send("r", "m1", None).await;
    let session = first["session"].as_str().unwrap().to_owned();
    // the first call streams; a newer message cuts it off
    server
        .wait_until(|body| body["stream"] == true && body.to_string().contains("m1"))
        .await;
    host.send("r", "m2", None).await;
    host.wait_for(&session, |es| {
        (deliveries(es) == ["ok"]
            && es
                .iter()
                .any(|e| e["kind"] == "turn_end" && e["status"] == "completed"))
        .then(|| json!(es))
    })
    .await;
    let usage = host
        .wait_get("/v1/bots", |v| {
            let r = v["bots"].as_array()?.iter().find(|b| b["id"] == "r")?;
            Some(r["usage"]["total"].clone())
        })
        .await;
    // the cut call, and the two of the turn over both messages
    assert_eq!(server.request_count(), 3);
    assert_eq!(usage["calls"], 3, "{usage:#}");
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!(
        completion > 20,
        "what the cut call streamed counts: {usage:#}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
