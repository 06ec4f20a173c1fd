//! A memory change inside an epoch goes into each request as a short
//! update; the turns after the change send it where the first of them
//! did, so each request still begins with the one before it (the prompt
//! cache's prefix). Put after each turn's own inputs, it left the turn
//! before's inputs without it in the next request, which differed from
//! the last from there on, at every turn until the next compaction (QA,
//! 2026-12-05).

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

/// `remember X` → Remember X in the log, then SendMessage; anything else
/// → SendMessage `ok`; after SendMessage's result, stop.
fn model(request: &Value) -> Reply {
    let Some(last) = last_message(request) else {
        return Reply::text("");
    };
    if last["role"] == "tool" {
        let content = last["content"].as_str().unwrap_or("");
        if content.starts_with("Remembered") {
            return Reply::tool_call("c2", "SendMessage", json!({"text": "noted"}).to_string());
        }
        return Reply::text("");
    }
    // the person's words, after the time line
    let text = last["content"].as_str().unwrap_or("");
    let said = text.split_once("\n\n").map_or(text, |(_, said)| said);
    match said.strip_prefix("remember ") {
        Some(fact) => Reply::tool_call(
            "c1",
            "Remember",
            json!({"text": fact, "layer": "log", "scope": "agent"}).to_string(),
        ),
        None => Reply::tool_call("c1", "SendMessage", json!({"text": "ok"}).to_string()),
    }
}

#[tokio::test]
async fn turns_after_a_memory_change_keep_the_requests_prefix() {
    let server = OpenAiServer::builder().responder(model).start().await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Remember"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let mut firsts = Vec::new();
    for text in ["one", "remember the sky is green", "three", "four", "five"] {
        firsts.push(server.request_count());
        let (_, end) = host.end_turn("r", text).await;
        assert_eq!(end["status"], "completed", "{end}");
    }
    let requests: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
    // the turns after the change carry the update…
    let three = &requests[firsts[2]];
    assert!(
        three.to_string().contains("the sky is green"),
        "no memory update: {three:#}"
    );
    // …and each request of theirs begins with the request before it
    for pair in requests[firsts[2]..].windows(2) {
        let a = pair[0]["messages"].as_array().unwrap();
        let b = pair[1]["messages"].as_array().unwrap();
        assert!(b.len() > a.len(), "{a:#?}\n{b:#?}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert_eq!(x, y, "message {i} differs:\n{a:#?}\n{b:#?}");
        }
    }
    host.shutdown().await;
    server.shutdown().await;
}
