//! A failure a server reports inside a stream as an `error:` line, as
//! llama.cpp's server does (`error: {"code": 500, "message": …}`, no
//! `data:`), is named by its message. Regression: the line was no event,
//! so the stream was read as one that "ended early, before the finish
//! reason and [DONE]", retried, and the turn failed without the server's
//! words. So is one sent as a `data:` event holding an error object
//! without the `error` wrapper (vLLM's `ErrorResponse`: `{"object":
//! "error", "message", "type", "code"}`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use serde_json::json;

use super::openai_edges::raw_server;
use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TestFleet;

const FAILURE: &str =
    r#"{"code": 500, "message": "slot 0: KV cache is full, quokka", "type": "server_error"}"#;

/// Some text, then the server's failure as llama.cpp writes it.
fn failing_stream() -> String {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "par"}}]});
    format!("data: {chunk}\n\nerror: {FAILURE}\n\n")
}

/// The error of a call (one retry) to a server that answers every
/// request with `stream` as an event stream, and how many requests it
/// got.
async fn failed_call(stream: fn() -> String) -> (ModelError, usize) {
    let (address, count) = raw_server(move |_| (200, "text/event-stream", stream())).await;
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 1,
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(50),
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    (result.unwrap_err(), count.load(Ordering::SeqCst))
}

#[tokio::test]
async fn an_error_line_in_a_stream_is_named_by_its_message() {
    let (error, count) = failed_call(failing_stream).await;
    let ModelError::StreamBroken { attempts, detail } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*attempts, 2);
    assert_eq!(
        detail,
        "the provider sent an error: slot 0: KV cache is full, quokka"
    );
    assert_eq!(count, 2);
}

/// Through the host: the turn's failure and its notice quote the server.
#[tokio::test]
async fn a_turn_failed_by_an_error_line_says_what_the_server_said() {
    let (address, _) = raw_server(|_| (200, "text/event-stream", failing_stream())).await;
    let host = TestFleet::new()
        .openai("main", &format!("http://{address}/v1"), "max_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "failed", "{end}");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("KV cache is full, quokka"),
        "{notice}"
    );
    host.shutdown().await;
}

/// A role chunk, then the server's failure as an unwrapped error object
/// (vLLM's `ErrorResponse` shape), then `[DONE]`.
fn unwrapped_error_stream() -> String {
    let role = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]});
    let error = json!({
        "object": "error",
        "message": "vLLM engine: CUDA out of memory, quokka",
        "type": "InternalServerError",
        "code": 500,
    });
    format!("data: {role}\n\ndata: {error}\n\ndata: [DONE]\n\n")
}

/// Regression (QA): the unwrapped error object was read as a chunk with
/// no choice, so the answer was empty: no retry, and the turn ended
/// `undelivered` with the server's words nowhere. It is the provider's
/// error now: retried, then the call fails quoting it.
#[tokio::test]
async fn an_unwrapped_error_object_in_a_stream_is_the_servers_error() {
    let (error, count) = failed_call(unwrapped_error_stream).await;
    assert!(
        error
            .to_string()
            .contains("vLLM engine: CUDA out of memory, quokka"),
        "{error:?}"
    );
    assert_eq!(count, 2, "{error:?}");
}
