//! A failure a server reports inside a 200 answer (a stream's `error:`
//! line, as llama.cpp's server sends a prompt longer than its context; a
//! `data: {"error": …}` event; a whole answer that is `{"error": …}`) that
//! says the conversation outgrew the model's window, or that the account
//! is out of credit, ends the call at once with the error that says what
//! to change, as the same failure under an error status does.
//! Regression: it was read as an answer that "broke off", sent again
//! `max_retries` times (each failing the same way), and the turn failed
//! telling the operator to check the server's logs and the person to
//! retry, which fails the same way again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::openai_edges::raw_server;
use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TestFleet;

/// llama.cpp's server on a prompt longer than its context, streamed:
/// the answer has begun (200), so the failure comes as an `error:` line.
const LLAMA_OVERFLOW: &str = r#"{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5012,"n_ctx":4096}"#;

fn llama_overflow_stream() -> String {
    format!("error: {LLAMA_OVERFLOW}\n\n")
}

/// A provider for the server at `address`, with retries to spend.
fn provider(address: &str, stream: bool) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        max_retries: 3,
        stream,
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(20),
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap()
}

#[tokio::test]
async fn a_context_overflow_in_an_error_line_is_not_retried() {
    let (address, count) =
        raw_server(|_| (200, "text/event-stream", llama_overflow_stream())).await;
    let (result, _) = complete(&provider(&address, true), &request("x")).await;
    let error = result.unwrap_err();
    let ModelError::ContextOverflow { window, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*window, Some(4096));
    assert!(!error.is_retryable());
    assert!(
        error
            .to_string()
            .contains("the request exceeds the available context size"),
        "{error}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1, "not retried");
}

/// An `error` event after some text, in OpenAI's words; and a whole
/// answer that is the same error.
#[tokio::test]
async fn a_context_overflow_in_an_error_event_or_a_whole_answer_is_not_retried() {
    let error = json!({"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"});
    let text = json!({"choices": [{"index": 0, "delta": {"content": "par"}}]});
    let stream = format!("data: {text}\n\ndata: {}\n\n", json!({"error": error}));
    let whole = json!({"error": error}).to_string();
    for (stream, body, content_type) in [
        (true, stream, "text/event-stream"),
        (false, whole, "application/json"),
    ] {
        let (address, count) = raw_server(move |_| (200, content_type, body.clone())).await;
        let (result, _) = complete(&provider(&address, stream), &request("x")).await;
        let error = result.unwrap_err();
        let ModelError::ContextOverflow { window, .. } = &error else {
            panic!("stream {stream}: {error:?}");
        };
        assert_eq!(*window, Some(8192), "stream {stream}");
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "stream {stream}: not retried"
        );
    }
}

/// OpenRouter's word for an account without credit (its code 402) inside
/// a stream: not retried either.
#[tokio::test]
async fn an_account_out_of_credit_in_an_error_event_is_not_retried() {
    let event = json!({"error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits"}});
    let (address, count) =
        raw_server(move |_| (200, "text/event-stream", format!("data: {event}\n\n"))).await;
    let (result, _) = complete(&provider(&address, true), &request("x")).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ModelError::QuotaExhausted { status: None, .. }),
        "{error:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1, "not retried");
}

/// OpenAI's `insufficient_quota` inside a stream sent with 200: the turn's
/// error names no HTTP status the server never sent (QA round 32: it said
/// "HTTP 400").
#[tokio::test]
async fn an_account_out_of_quota_in_an_error_event_names_no_status() {
    let event = json!({"error": {"code": "insufficient_quota", "type": "insufficient_quota", "message": "You exceeded your current quota"}});
    let (address, count) =
        raw_server(move |_| (200, "text/event-stream", format!("data: {event}\n\n"))).await;
    let (result, _) = complete(&provider(&address, true), &request("x")).await;
    let error = result.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("out of quota or credit (said inside its answer)") && !text.contains("HTTP"),
        "{text}"
    );
    assert!(text.contains("You exceeded your current quota"), "{text}");
    assert_eq!(count.load(Ordering::SeqCst), 1, "not retried");
}

/// Through the host: the turn's notice says to lower `compact_at_tokens`
/// below the window, after one request.
#[tokio::test]
async fn a_turn_failed_by_an_overflow_in_a_stream_names_compact_at_tokens() {
    let (address, count) =
        raw_server(|_| (200, "text/event-stream", llama_overflow_stream())).await;
    let host = TestFleet::new()
        .openai("local", &format!("http://{address}/v1"), "max_retries = 2")
        .bot("r", "local", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "failed", "{end}");
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("context window")
            && text.contains("4096 tokens")
            && text.contains("providers.local.compact_at_tokens"),
        "{text}"
    );
    assert!(!text.contains("broke off"), "{text}");
    assert_eq!(count.load(Ordering::SeqCst), 1, "not retried");
    host.shutdown().await;
}
