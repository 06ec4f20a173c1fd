//! An answer is read by what its body is, not by its content type alone.
//! Regression: a stream labelled `application/json` (Microsoft's Foundry
//! Local), `application/x-ndjson` (LitServe's OpenAI spec), `text/plain`
//! (proxies) or with an empty label failed every turn at once as "response is
//! not a chat completion (expected value at line 1 column 1): data: …";
//! a whole completion labelled `text/event-stream`, with `data: [DONE]`
//! after it (9router) or without, was retried and failed as an answer
//! that "held no choices" or a stream that "ended early"; so did a
//! stream with a byte order mark before it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use botfleet::model::FinishReason;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::openai_edges::raw_server;
use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// `chunks` as SSE events, then `[DONE]`.
fn events(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
        .collect()
}

/// A provider for the server at `address`, one retry.
fn provider(address: &str, stream: bool) -> OpenAiModel {
    provider_at(&format!("http://{address}/v1"), stream)
}

/// A provider for the server at `base_url`, one retry.
fn provider_at(base_url: &str, stream: bool) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        max_retries: 1,
        stream,
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(50),
        timeout: Duration::from_secs(10),
        ..OpenAiOptions::new(base_url, "test-model")
    })
    .unwrap()
}

#[tokio::test]
async fn a_stream_under_another_label_is_read_as_a_stream() {
    let body = events(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "he"}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "llo"}, "finish_reason": "stop"}]}),
    ]);
    // a keep-alive comment first, as OpenRouter sends, is SSE too
    let commented = format!(": PROCESSING\n\n{body}");
    for label in [
        "application/json",
        "application/x-ndjson",
        "text/plain; charset=utf-8",
        "",
    ] {
        for (stream, body) in [(true, body.clone()), (false, commented.clone())] {
            let (address, count) = raw_server(move |_| (200, label, body.clone())).await;
            let (result, sink) = complete(&provider(&address, stream), &request("x")).await;
            let response = result.unwrap_or_else(|e| panic!("{label:?} stream {stream}: {e}"));
            assert_eq!(
                (response.text.as_str(), response.finish),
                ("hello", FinishReason::Stop),
                "{label:?} stream {stream}"
            );
            // streamed to the sink delta by delta, as a labelled stream is
            assert_eq!(sink.deltas, ["he", "llo"], "{label:?} stream {stream}");
            assert_eq!(count.load(Ordering::SeqCst), 1, "{label:?} stream {stream}");
        }
    }
}

#[tokio::test]
async fn a_whole_completion_labelled_a_stream_is_read_whole() {
    let whole = json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]});
    for (stream, body) in [
        (true, format!("{whole}\n\ndata: [DONE]\n\n")),
        (false, format!("{whole}\ndata:[DONE]")),
        (true, whole.to_string()),
    ] {
        let shown = body.clone();
        let (address, count) = raw_server(move |_| (200, "text/event-stream", body.clone())).await;
        let (result, sink) = complete(&provider(&address, stream), &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("{shown:?}: {e}"));
        assert_eq!(
            (response.text.as_str(), response.finish),
            ("hello", FinishReason::Stop),
            "{shown:?}"
        );
        assert_eq!(sink.text(), "hello");
        assert_eq!(count.load(Ordering::SeqCst), 1, "{shown:?}");
    }
}

/// A UTF-8 byte order mark before the answer is dropped (an event stream
/// must ignore one; JSON may): it failed the first event as no field, so
/// the stream "held no choices", and a whole answer as no JSON.
#[tokio::test]
async fn a_byte_order_mark_before_the_answer_is_ignored() {
    let stream = events(&[json!({"choices": [{"index": 0,
        "delta": {"content": "hello"}, "finish_reason": "stop"}]})]);
    let whole = json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]});
    for (label, stream, body) in [
        ("text/event-stream", true, stream),
        ("application/json", false, whole.to_string()),
    ] {
        let body = format!("\u{feff}{body}");
        let (address, count) = raw_server(move |_| (200, label, body.clone())).await;
        let (result, _) = complete(&provider(&address, stream), &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(response.text, "hello", "{label}");
        assert_eq!(count.load(Ordering::SeqCst), 1, "{label}");
    }
}

/// A byte order mark split by the server's first writes (a piece ending
/// inside it) is dropped as a whole one is (audit: its first bytes read as
/// no field and no JSON, so the stream's first event, with a tool call's
/// name, was lost, and a whole answer failed at once).
#[tokio::test]
async fn a_byte_order_mark_split_across_writes_is_ignored() {
    let stream = events(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "SendMessage", "arguments": "{\"text\": \"hi\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let whole = json!({"choices": [{"index": 0, "message": {"role": "assistant",
        "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "SendMessage", "arguments": "{\"text\": \"hi\"}"}}]},
        "finish_reason": "tool_calls"}]});
    for (label, body) in [
        ("text/event-stream", stream),
        ("application/json", whole.to_string()),
    ] {
        for split in [1, 2] {
            let server = OpenAiServer::builder()
                .tcp_split(split)
                .reply(Reply::raw(200, label, format!("\u{feff}{body}")))
                .start()
                .await;
            let model = provider_at(&server.base_url(), label == "text/event-stream");
            let (result, _) = complete(&model, &request("x")).await;
            let response = result.unwrap_or_else(|e| panic!("{label}, split {split}: {e}"));
            let names: Vec<&str> = response
                .tool_calls
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(names, ["SendMessage"], "{label}, split {split}");
            assert_eq!(server.request_count(), 1, "{label}, split {split}");
            server.shutdown().await;
        }
    }
}

/// Through the host: a turn whose first answer is a tool call streamed
/// under `application/json` and whose second is a whole completion under
/// `text/event-stream` with `data: [DONE]` after it delivers and
/// completes, in one request each.
#[tokio::test]
async fn a_turn_is_answered_whatever_the_labels_say() {
    let call = events(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "SendMessage", "arguments": "{\"text\": \"pong\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let whole = json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]});
    let server = OpenAiServer::builder()
        .replies([
            Reply::raw(200, "application/json", call),
            Reply::raw(
                200,
                "text/event-stream",
                format!("{whole}\n\ndata: [DONE]\n\n"),
            ),
        ])
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 1")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "ping").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&host.entries(&session).await), ["pong"]);
    assert_eq!(server.request_count(), 2);
    host.shutdown().await;
}

/// A whole answer that is JSON but no chat completion, with neither
/// `choices` nor `error` (Ollama's native `/api/chat` answer, from a
/// `base_url` without `/v1`), is said to be the wrong API at once (QA: it
/// was retried as an answer that "held no choices", blamed on a proxy).
#[tokio::test]
async fn a_json_answer_without_choices_is_the_wrong_api_at_once() {
    let native = json!({"model": "llama3", "created_at": "2026-12-04T00:00:00Z",
        "message": {"role": "assistant", "content": "hi"}, "done": true})
    .to_string();
    let (address, count) = raw_server(move |_| (200, "application/json", native.clone())).await;
    let (result, _) = complete(&provider(&address, false), &request("x")).await;
    let error = result.expect_err("no chat completion").to_string();
    assert!(
        error.contains("not a chat completion (it has no `choices`)"),
        "{error}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1, "not retried: {error}");
}
