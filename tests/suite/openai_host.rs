//! A host whose bots use an `openai` provider pointed at an OpenAI-compatible
//! server on loopback: the reply the model delivers through a SendMessage
//! tool call reaches the CLI, streaming and not.

use serde_json::Value;
use serde_json::json;

use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
use crate::support::process::cli;

/// Answers a user message with a SendMessage tool call quoting it, and a
/// tool result with a plain stop.
fn echo_model(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return Reply::text("").usage(100, 1);
    }
    let text = last["content"].as_str().unwrap_or("").to_owned();
    let args = json!({ "text": format!("model says: {text}") }).to_string();
    Reply::tool_call("call_1", "SendMessage", args)
        .usage(120, 9)
        .cached(64)
}

async fn roundtrip(stream: bool) {
    let server = OpenAiServer::builder()
        .arg_chunk_bytes(3)
        .responder(echo_model)
        .start()
        .await;
    let extra = format!("stream = {stream}\nmax_retries = 1");
    let host = TestFleet::new()
        .openai("main", &server.base_url(), &extra)
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(&["send", "r", "héllo wörld"], &host.url, TOKEN).await;
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert_eq!(out.trim(), "model says: héllo wörld");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "one step with the tool call, one after its result"
    );
    let first = &requests[0].body;
    assert_eq!(first["stream"], json!(stream));
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["tools"][0]["function"]["name"], "SendMessage");
    assert_eq!(first["messages"][0]["role"], "system");
    let second = &requests[1].body;
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    // the prefix of the second request is the whole first request
    let n = first["messages"].as_array().unwrap().len();
    assert_eq!(
        second["messages"].as_array().unwrap()[..n],
        first["messages"].as_array().unwrap()[..]
    );
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_provider_roundtrip_through_the_cli() {
    roundtrip(true).await;
}

#[tokio::test]
async fn non_streaming_provider_roundtrip_through_the_cli() {
    roundtrip(false).await;
}

#[tokio::test]
async fn a_provider_down_past_its_retries_fails_the_turn_visibly() {
    let server = OpenAiServer::builder()
        .fail_next(10, Reply::error(503, "overloaded"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 1")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (code, out, err) = cli(&["send", "r", "anyone there?"], &host.url, TOKEN).await;
    assert_eq!(code, 2, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("retry"), "{err}");
    let (_, transcript, _) = cli(&["transcript", "r"], &host.url, TOKEN).await;
    assert!(transcript.contains("anyone there?"), "{transcript}");
    assert!(
        transcript.contains("[turn_failed]") && transcript.contains("503"),
        "{transcript}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
