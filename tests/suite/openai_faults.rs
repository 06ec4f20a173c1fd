//! Fault injection for the OpenAI-compatible provider: retries, HTTP errors,
//! broken streams, aborts and cancellation, against the loopback server.
//! The same faults seen through a running host are in
//! `openai_turn_faults.rs`.

use std::time::Duration;
use std::time::Instant;

use botfleet::model::FinishReason;
use botfleet::model::Model;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::openai_provider::Recorder;
use super::openai_provider::call;
use super::openai_provider::complete;
use super::openai_provider::model;
use super::openai_provider::options;
use super::openai_provider::request;
use super::openai_provider::serve;
use super::openai_provider::within;
use crate::support::openai_server::Endless;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

#[tokio::test]
async fn retries_429_then_succeeds() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .fail_next(2, Reply::error(429, "rate limited").retry_after("0"))
            .reply(Reply::text("finally")),
    )
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "finally");
    assert_eq!(server.request_count(), 3);
    let bodies: Vec<_> = server.requests().into_iter().map(|r| r.body).collect();
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "retries resend the same body"
    );
}

#[tokio::test]
async fn honours_retry_after() {
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(503, "warming up").retry_after("0.15"))
        .reply(Reply::text("up"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        backoff_max: Duration::from_secs(1),
        ..options(&server)
    })
    .unwrap();
    let started = Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "up");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 2);
}

/// Regression: a `Retry-After` held only the call it answered; the next
/// call of the same provider (another bot's turn, or the next turn once
/// this one gave up) went to the server at once and met the same 429.
#[tokio::test]
async fn a_retry_after_holds_the_next_call_of_the_provider_too() {
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(429, "slow down").retry_after("0.4"))
        .reply(Reply::text("later"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        // the told call gives up at once: only the next call can wait
        max_retries: 0,
        backoff_max: Duration::from_secs(1),
        ..options(&server)
    })
    .unwrap();
    let (first, _) = complete(&model, &request("x")).await;
    assert!(
        matches!(first, Err(ModelError::Http { status: 429, .. })),
        "{first:?}"
    );
    let started = Instant::now();
    let (second, _) = complete(&model, &request("y")).await;
    assert_eq!(second.unwrap().text, "later");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the next call went to the server {:?} after the 429",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_fails_at_once_naming_the_wait() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .fail_next(1, Reply::error(429, "quota exhausted").retry_after("3600")),
    )
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    let ModelError::WaitTooLong {
        status,
        attempts,
        wait,
        max_wait,
        body,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (*status, *attempts, *wait, *max_wait),
        (429, 1, Duration::from_secs(3600), Duration::from_millis(50))
    );
    assert!(body.contains("quota exhausted"), "{body}");
    let message = error.to_string();
    assert!(
        message.contains("HTTP 429") && message.contains("asked to wait 3600 s"),
        "{message}"
    );
    assert!(error.is_retryable());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn server_errors_exhaust_the_retries() {
    let (server, model) =
        serve(OpenAiServer::builder().fail_next(10, Reply::error(500, "boom inside"))).await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    let ModelError::Http {
        status,
        attempts,
        body,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!((*status, *attempts), (500, 5));
    assert!(body.contains("boom inside"), "{body}");
    assert!(
        error.to_string().contains("HTTP 500 after 5 attempt(s)"),
        "{error}"
    );
    assert_eq!(server.request_count(), 5);
}

/// Regression (QA, 2026-12-05): a summariser that did not answer was
/// tried `1 + max_retries` times (five by default) while a person's turn
/// waited for the compaction: 150 s for a reply. A summariser's call is
/// tried twice at most.
#[tokio::test]
async fn a_summarisers_call_is_retried_once() {
    let (server, model) =
        serve(OpenAiServer::builder().fail_next(10, Reply::error(500, "boom inside"))).await;
    let compact = botfleet::model::ModelRequest {
        purpose: botfleet::model::Purpose::Compact,
        ..request("x")
    };
    let (result, _) = complete(&model, &compact).await;
    let error = result.unwrap_err();
    assert!(
        matches!(
            error,
            ModelError::Http {
                status: 500,
                attempts: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_bad_request_is_not_retried_and_carries_the_message() {
    // (a context overflow is its own error: suite::openai_errors)
    let (server, model) = serve(OpenAiServer::builder().reply(Reply::error(
        400,
        "Invalid value for 'temperature': must be at most 2",
    )))
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    let ModelError::Http {
        status,
        attempts,
        body,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!((*status, *attempts), (400, 1));
    assert!(body.contains("Invalid value for 'temperature'"), "{body}");
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1);
}

/// Regression (QA, 2026-12-05): a server's error body went into the host
/// log and the turn's error as it was: a line break in it forged a log
/// line of its own, an escape sequence coloured the terminal, and a NUL
/// made `grep` take the log for a binary file. Control characters are
/// quoted escaped.
#[tokio::test]
async fn control_characters_of_an_error_body_are_quoted_escaped() {
    let (server, model) = serve(OpenAiServer::builder().reply(Reply::raw(
        400,
        "text/plain",
        "boom\n2026-12-05T00:00:00.000000Z  INFO botfleet::forged: FORGED\u{1b}[31mred\u{0}\n",
    )))
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    let shown = error.to_string();
    assert!(
        !shown.chars().any(char::is_control),
        "no control character: {shown:?}"
    );
    assert!(
        shown.contains(
            r"boom\n2026-12-05T00:00:00.000000Z  INFO botfleet::forged: FORGED\u{1b}[31mred\0"
        ),
        "{shown}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_endpoint_is_reported_after_the_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 2,
        backoff_base: Duration::from_millis(1),
        ..OpenAiOptions::new(format!("http://127.0.0.1:{port}/v1/"), "m")
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(
        matches!(&error, ModelError::Unreachable { attempts: 3, .. }),
        "{error:?}"
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_stream_cut_before_any_text_is_retried() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .reply(
                Reply::tool_call("c", "SendMessage", r#"{"text":"long enough to split"}"#)
                    .cut_after(3),
            )
            .reply(Reply::tool_call("c", "SendMessage", r#"{"text":"whole"}"#)),
    )
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(
        result.unwrap().tool_calls,
        vec![call("c", "SendMessage", r#"{"text":"whole"}"#)]
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_stream_cut_after_text_is_retried_and_the_sink_starts_over() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .reply(Reply::text("abcdefghijkl").cut_after(3))
            .reply(Reply::text("whole answer")),
    )
    .await;
    let mut sink = Recorder::default();
    let result = within(model.complete(&request("x"), &mut sink, &CancellationToken::new())).await;
    assert_eq!(result.unwrap().text, "whole answer");
    // "abcdefgh" went to the sink, then the restart, then the new answer
    assert_eq!(sink.restarts, 1);
    assert_eq!(sink.text(), "whole answer");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_stream_cut_after_the_finish_reason_is_complete() {
    // role, "ok", finish: the connection drops before usage and [DONE].
    let (server, model) =
        serve(OpenAiServer::builder().reply(Reply::text("ok").usage(3, 1).cut_after(3))).await;
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (response.text.as_str(), response.finish, response.usage),
        ("ok", FinishReason::Stop, None)
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn the_sink_can_abort_the_stream() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .text_chunk_chars(2)
            .reply(Reply::text("again and again and again and again").usage(1, 1)),
    )
    .await;
    let mut sink = Recorder {
        abort_on: Some("and again"),
        ..Recorder::default()
    };
    let result = within(model.complete(&request("x"), &mut sink, &CancellationToken::new())).await;
    assert_eq!(
        result,
        Err(ModelError::Aborted {
            reason: "saw \"and again\"".to_owned(),
            partial: "again and again ".to_owned(),
        })
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cancellation_while_streaming() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .chunk_delay(Duration::from_millis(5))
            .reply(Reply::text("a long answer that keeps going and going")),
    )
    .await;
    let cancel = CancellationToken::new();
    let mut sink = Recorder {
        cancel_on_first: Some(cancel.clone()),
        ..Recorder::default()
    };
    let result = within(model.complete(&request("x"), &mut sink, &cancel)).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(sink.deltas.len(), 1);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cancellation_while_waiting_for_the_response() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("too late").delay_headers(Duration::from_secs(60)))
        .start()
        .await;
    let model = model(&server);
    let cancel = CancellationToken::new();
    let call = {
        let cancel = cancel.clone();
        tokio::spawn(async move { model.complete(&request("x"), &mut (), &cancel).await })
    };
    within(server.wait_for_requests(1)).await;
    cancel.cancel();
    assert_eq!(within(call).await.unwrap(), Err(ModelError::Cancelled));
}

#[tokio::test]
async fn cancellation_during_backoff() {
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(503, "later"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        backoff_base: Duration::from_secs(60),
        backoff_max: Duration::from_secs(120),
        ..options(&server)
    })
    .unwrap();
    let cancel = CancellationToken::new();
    let call = {
        let cancel = cancel.clone();
        tokio::spawn(async move { model.complete(&request("x"), &mut (), &cancel).await })
    };
    within(server.wait_for_requests(1)).await;
    cancel.cancel();
    assert_eq!(within(call).await.unwrap(), Err(ModelError::Cancelled));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_cancelled_token_sends_nothing() {
    let (server, model) = serve(OpenAiServer::builder().reply(Reply::text("x"))).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = within(model.complete(&request("x"), &mut (), &cancel)).await;
    assert_eq!(result, Err(ModelError::Cancelled));
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_cut_json_body_is_retried() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("partial").cut_after(20))
        .reply(Reply::text("whole"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        stream: false,
        ..options(&server)
    })
    .unwrap();
    let (result, sink) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "whole");
    assert_eq!(sink.deltas, vec!["whole"]);
    assert_eq!(server.request_count(), 2);
}

/// Regression (QA): a whole (non-streamed) answer still coming, slowly,
/// when `timeout_s` (which bounds the whole answer then) ran out was said
/// to have stalled ("the server went silent"), which it never did.
#[tokio::test]
async fn a_whole_answer_slower_than_the_timeout_is_not_said_to_have_stalled() {
    let server = OpenAiServer::builder()
        .reply(Reply::endless(Endless::Text, Duration::from_millis(20)))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        stream: false,
        timeout: Duration::from_millis(300),
        max_retries: 0,
        provider: Some("slow".into()),
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains("whole answer took longer than providers.slow.timeout_s"),
        "{error}"
    );
    assert!(
        !error.contains("silent") && !error.contains("stalled"),
        "{error}"
    );
}

/// Options with small limits, so that the limit tests end fast.
fn bounded(server: &OpenAiServer, stream: bool) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        stream,
        call_timeout: Duration::from_millis(400),
        max_response_bytes: 16 * 1024,
        ..options(server)
    })
    .unwrap()
}

async fn assert_too_large(endless: Endless, stream: bool) {
    let server = OpenAiServer::builder()
        .reply(Reply::endless(endless, Duration::ZERO))
        .reply(Reply::text("never asked"))
        .start()
        .await;
    let model = bounded(&server, stream);
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert_eq!(
        error,
        ModelError::TooLarge { limit: 16 * 1024 },
        "{endless:?}"
    );
    assert_eq!(error.to_string(), "the model's answer passed 16384 bytes");
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1, "{endless:?}: not retried");
}

#[tokio::test]
async fn endless_tool_call_arguments_stop_at_the_size_cap() {
    assert_too_large(Endless::Arguments, true).await;
}

#[tokio::test]
async fn an_sse_line_without_end_stops_at_the_size_cap() {
    assert_too_large(Endless::Line, true).await;
}

#[tokio::test]
async fn an_endless_json_body_stops_at_the_size_cap() {
    assert_too_large(Endless::Text, false).await;
}

#[tokio::test]
async fn keep_alive_comments_do_not_extend_the_call_deadline() {
    let server = OpenAiServer::builder()
        .reply(Reply::endless(Endless::Comments, Duration::from_millis(10)))
        .start()
        .await;
    // each comment is well within the 10 s allowed silence
    let model = bounded(&server, true);
    let started = Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert_eq!(
        error,
        ModelError::TimedOut {
            limit: Duration::from_millis(400),
            attempts: 1
        }
    );
    assert_eq!(
        error.to_string(),
        "the model call took longer than 0.4 s (1 attempt(s))"
    );
    assert!(error.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_call_deadline_covers_the_retries_and_their_waits() {
    let server = OpenAiServer::builder()
        .fail_next(100, Reply::error(503, "busy"))
        .start()
        .await;
    // every wait before a retry (5 to 10 s) would end past the deadline
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 100,
        backoff_base: Duration::from_secs(10),
        backoff_max: Duration::from_secs(10),
        call_timeout: Duration::from_secs(5),
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    // the retry that would start past the deadline is not waited for:
    // the call fails at once with the attempt's error, which names the
    // cause (QA: "took longer than 0.4 s" named none)
    let ModelError::Http {
        status, attempts, ..
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!((status, attempts), (503, 1));
    assert_eq!(server.request_count(), 1);
    assert!(error.is_retryable());
}

/// The same for an endpoint that refuses connections: the error names
/// the refused connection and where, not a time-out (QA: "took longer
/// than 12 s (5 attempt(s))", advising a higher call_timeout_s).
#[tokio::test]
async fn a_refused_endpoint_past_the_call_deadline_says_so() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 1000,
        backoff_base: Duration::from_secs(10),
        backoff_max: Duration::from_secs(10),
        call_timeout: Duration::from_secs(5),
        api_key: Some("sk-test".to_owned()),
        ..OpenAiOptions::new(url, "m")
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Unreachable { .. }), "{error:?}");
    let text = error.to_string();
    assert!(!text.contains("took longer"), "{text}");
}

/// Regression: a body that ended cleanly before the finish reason and
/// `[DONE]` was reported as "model endpoint unreachable".
#[tokio::test]
async fn a_stream_that_ends_early_says_so() {
    use axum::response::IntoResponse;

    async fn answer() -> axum::response::Response {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
        ([("content-type", "text/event-stream")], body).into_response()
    }
    let base_url = serve_completions(axum::routing::post(answer)).await;
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 1,
        backoff_base: Duration::from_millis(1),
        ..OpenAiOptions::new(base_url, "test-model")
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the model's answer broke off after 2 attempt(s): the stream ended early, before the \
         finish reason and [DONE]"
    );
    assert!(error.is_retryable());
}

/// Serves `answer` as `/v1/chat/completions` on loopback, for a provider
/// whose wire shape the loopback server cannot produce; returns its base
/// URL.
pub(super) async fn serve_completions(answer: axum::routing::MethodRouter) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/v1/chat/completions", answer);
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A stream whose first answer carries a cut-off event after valid chunks
/// (`data: {"choices":[{…"content":"bro` then a blank line), and whose
/// later answers are whole when `heals`.
async fn serve_a_corrupt_event(
    heals: bool,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    serve_a_cut_event(heals, false).await
}

/// [`serve_a_corrupt_event`], with the cut-off event the first of the
/// answer when `first`.
async fn serve_a_cut_event(
    heals: bool,
    first: bool,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;

    use axum::response::IntoResponse;

    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let answer = move || {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            let chunk = |delta: &str| {
                format!(
                    "data: {{\"id\":\"x\",\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n"
                )
            };
            let mut body = if first && (n == 0 || !heals) {
                String::new()
            } else {
                chunk(r#"{"role":"assistant"}"#) + &chunk(r#"{"content":"hello "}"#)
            };
            if n == 0 || !heals {
                body.push_str(
                    "data: {\"id\": \"x\", \"choices\": [{\"index\": 0, \"delta\": {\"content\": \"bro\n\n",
                );
            } else {
                body.push_str(&chunk(r#"{"content":"world"}"#));
                body.push_str(
                    "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
                );
            }
            body.push_str("data: [DONE]\n\n");
            ([("content-type", "text/event-stream")], body).into_response()
        }
    };
    (serve_completions(axum::routing::post(answer)).await, calls)
}

/// A model of `base_url` with `max_retries`, its backoff 1 ms.
fn fast_model(base_url: String, max_retries: u32) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        max_retries,
        backoff_base: Duration::from_millis(1),
        ..OpenAiOptions::new(base_url, "test-model")
    })
    .unwrap()
}

/// Regression: one cut-off event in the middle of a valid stream failed
/// the turn at once, blaming `base_url` ("the answer is not an OpenAI chat
/// completion") and naming a field's type instead of the JSON that broke
/// off. It is a broken answer now: retried, and after the last attempt
/// reported as the server's corrupt event with JSON's own error.
#[tokio::test]
async fn a_corrupt_event_mid_stream_is_retried_as_a_broken_answer() {
    use std::sync::atomic::Ordering;

    let (base_url, calls) = serve_a_corrupt_event(true).await;
    let (result, _) = complete(&fast_model(base_url, 2), &request("x")).await;
    assert_eq!(result.unwrap().text, "hello world");
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let (base_url, calls) = serve_a_corrupt_event(false).await;
    let (result, _) = complete(&fast_model(base_url, 1), &request("x")).await;
    let error = result.unwrap_err();
    let said = error.to_string();
    assert!(
        said.contains("broke off after 2 attempt(s)")
            && said.contains("corrupt or cut-off event in the middle of the answer")
            && said.contains("not JSON: EOF while parsing a string")
            && !said.contains("neither a string"),
        "{said}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// Regression: the same cut-off event as the answer's first one failed
/// the turn at once, blaming `base_url` (soak, 2026-12-07), while one a
/// chunk later was retried. Retried now, as a broken answer.
#[tokio::test]
async fn a_cut_off_first_event_is_retried_as_a_broken_answer() {
    use std::sync::atomic::Ordering;

    let (base_url, calls) = serve_a_cut_event(true, true).await;
    let (result, _) = complete(&fast_model(base_url, 2), &request("x")).await;
    assert_eq!(result.unwrap().text, "hello world");
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let (base_url, calls) = serve_a_cut_event(false, true).await;
    let (result, _) = complete(&fast_model(base_url, 1), &request("x")).await;
    let said = result.unwrap_err().to_string();
    assert!(
        said.contains("broke off after 2 attempt(s)")
            && said.contains("corrupt or cut-off event at the start of the answer")
            && !said.contains("base_url"),
        "{said}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
