//! Answers a server did not finish, though it said something: a finish
//! reason `error` or `abort` (vLLM's and SGLang's for a generation that
//! failed or was aborted on the server, with no `error` field), and a
//! stream whose body stays open after its finish reason without `[DONE]`.
//! Against the loopback server, through the provider and through a host.

use std::time::Duration;
use std::time::Instant;

use botfleet::model::FinishReason;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::model::Usage;
use pretty_assertions::assert_eq;
use serde_json::Value;

use super::openai_provider::complete;
use super::openai_provider::options;
use super::openai_provider::request;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::Endless;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// Regression: `finish_reason: "abort"` or `"error"` was taken as a
/// finished answer (`FinishReason::Other`): the cut text was the model's
/// reply. The attempt is retried as a broken answer, and the sink told
/// to start over.
#[tokio::test]
async fn an_answer_the_server_stopped_is_retried_not_taken_as_the_reply() {
    for stream in [true, false] {
        for reason in ["abort", "error"] {
            let server = OpenAiServer::builder()
                .reply(Reply::text("The answer is forty").finish(reason))
                .reply(Reply::text("The answer is 42."))
                .start()
                .await;
            let model = OpenAiModel::new(OpenAiOptions {
                stream,
                ..options(&server)
            })
            .unwrap();
            let (result, sink) = complete(&model, &request("x")).await;
            let response = result.unwrap_or_else(|e| panic!("{reason} {stream}: {e}"));
            assert_eq!(
                (response.text.as_str(), response.finish),
                ("The answer is 42.", FinishReason::Stop),
                "{reason}, stream {stream}"
            );
            assert_eq!(server.request_count(), 2, "{reason}, stream {stream}");
            assert_eq!(
                (sink.restarts, sink.text()),
                (1, "The answer is 42.".to_owned()),
                "{reason}, stream {stream}"
            );
            server.shutdown().await;
        }
    }
}

/// A server that stops every attempt: the call fails naming the finish
/// reason and, for a fleet provider, the provider and what to look at.
#[tokio::test]
async fn an_answer_stopped_on_every_attempt_fails_naming_the_reason() {
    for (reason, says) in [
        (
            "abort",
            "the server stopped generating the answer: it ended it with finish_reason \"abort\"",
        ),
        (
            "error",
            "the provider sent an error: it ended the answer with finish_reason \"error\"",
        ),
    ] {
        let server = OpenAiServer::builder()
            .responder(move |_| Reply::text("half").finish(reason))
            .start()
            .await;
        let model = OpenAiModel::new(OpenAiOptions {
            max_retries: 2,
            provider: Some("local".to_owned()),
            ..options(&server)
        })
        .unwrap();
        let (result, _) = complete(&model, &request("x")).await;
        let error = result.unwrap_err();
        let ModelError::AtProvider {
            provider, error, ..
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(provider, "local");
        let ModelError::StreamBroken { attempts, detail } = error.as_ref() else {
            panic!("{error:?}");
        };
        assert_eq!(*attempts, 3, "{reason}");
        assert!(detail.starts_with(says), "{reason}: {detail}");
        assert!(error.is_retryable(), "{reason}");
        assert_eq!(server.request_count(), 3, "{reason}");
        server.shutdown().await;
    }
}

/// Through a host: the aborted step leaves no trace (no assistant entry
/// with its cut text) and the turn goes on with the answer sent again.
#[tokio::test]
async fn a_turn_goes_on_past_an_aborted_answer() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("I think the ans").finish("abort"))
        .reply(Reply::tool_call(
            "c1",
            "SendMessage",
            r#"{"text":"It is 42."}"#,
        ))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("main", &server.base_url(), "max_retries = 1")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (session, end) = host.end_turn("r", "what is six times seven?").await;
    assert_eq!(end["status"], "completed", "{end}");
    let entries = host.entries(&session).await;
    assert_eq!(deliveries(&entries), ["It is 42."]);
    let said: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .map(|e| &e["text"])
        .filter(|t| t.as_str().is_some_and(|t| !t.is_empty()))
        .collect();
    assert_eq!(said, Vec::<&Value>::new(), "{entries:#?}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: a server that sent the finish reason and the usage chunk
/// but kept the body open without `[DONE]` held the call for `timeout`
/// (120 s by default, 60 here). The usage chunk ends it at once.
#[tokio::test]
async fn a_stream_left_open_after_its_usage_chunk_ends_at_once() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("All done.").usage(30, 4).without_done())
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        timeout: Duration::from_secs(60),
        ..options(&server)
    })
    .unwrap();
    let started = Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (response.text.as_str(), response.usage),
        (
            "All done.",
            Some(Usage {
                prompt_tokens: 30,
                completion_tokens: 4,
                cached_prompt_tokens: 0,
            })
        )
    );
    answered_once_within(server, started, 3).await;
}

/// Regression: the same without usage asked for (`stream_usage = false`):
/// after the finish reason the body is awaited a few seconds, not
/// `timeout`, and the answer is taken as it is.
#[tokio::test]
async fn a_stream_left_open_after_its_finish_reason_ends_soon() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text":"hi"}"#).without_done())
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        timeout: Duration::from_secs(60),
        stream_usage: false,
        ..options(&server)
    })
    .unwrap();
    let started = Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (
            response.tool_calls.len(),
            response.tool_calls[0].arguments.as_str(),
            response.finish,
            response.usage
        ),
        (1, r#"{"text":"hi"}"#, FinishReason::ToolCalls, None)
    );
    answered_once_within(server, started, 15).await;
}

/// Regression: a whole answer (`stream = false`) whose body stayed open
/// after its JSON waited `timeout` for the end, then failed as stalled,
/// on every attempt. Its JSON whole, the end is awaited a few seconds.
#[tokio::test]
async fn a_whole_answer_left_open_after_its_json_is_taken() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("Here it is.").usage(9, 3).without_done())
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        timeout: Duration::from_secs(60),
        stream: false,
        ..options(&server)
    })
    .unwrap();
    let started = Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (
            response.text.as_str(),
            response.finish,
            response.usage.map(|u| u.completion_tokens)
        ),
        ("Here it is.", FinishReason::Stop, Some(3))
    );
    answered_once_within(server, started, 15).await;
}

/// The answer came within `secs` seconds of `started`, from one request
/// (not after `timeout`, nor by a retry); stops `server`.
/// Regression (QA, 2026-12-05): a finished answer followed by keep-alive
/// comments, with neither `[DONE]` nor the end of the body, was held until
/// the call's whole time ran out and failed, the answer lost: each comment
/// put off the short wait after the finish reason. The wait is counted
/// from the finish reason; the answer is taken as it came.
#[tokio::test]
async fn a_heartbeat_after_the_finish_reason_does_not_hold_the_answer() {
    let server = OpenAiServer::builder()
        .reply(Reply::endless(
            Endless::HeartbeatAfterFinish,
            Duration::from_millis(500),
        ))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        timeout: Duration::from_secs(60),
        call_timeout: Duration::from_secs(20),
        max_retries: 0,
        stream_usage: false,
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (
            response.tool_calls.len(),
            response.tool_calls[0].arguments.as_str()
        ),
        (1, r#"{"text": "hi"}"#)
    );
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}

async fn answered_once_within(server: OpenAiServer, started: Instant, secs: u64) {
    assert!(
        started.elapsed() < Duration::from_secs(secs),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}

/// Regression (QA, 2026-12-05): a finish reason on every chunk — `""`
/// (Ollama, SGLang, LocalAI, KoboldCpp) or `"stop"` (some gateways) — was
/// taken as the end of the answer, so a stream reset in its middle was
/// used as it came: the first SendMessage delivered, the second run with
/// half its arguments. A `""` is no finish reason; a break after an
/// answer went on past a finish reason is a cut answer, retried.
#[tokio::test]
async fn a_stream_cut_after_an_interim_finish_reason_is_retried() {
    let whole = || {
        Reply::tool_call("ea", "SendMessage", r#"{"text": "part A"}"#)
            .and_tool_call("eb", "SendMessage", r#"{"text": "part B"}"#)
            .with_text("Sending two parts.")
    };
    for interim in ["", "stop"] {
        let server = OpenAiServer::builder()
            // role, text, call A, its arguments, call B: cut there
            .reply(whole().interim_finish(interim).cut_after(5))
            .reply(whole().interim_finish(interim))
            .start()
            .await;
        let model = OpenAiModel::new(options(&server)).unwrap();
        let (result, sink) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("{interim:?}: {e}"));
        let calls: Vec<(&str, &str)> = response
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("SendMessage", r#"{"text": "part A"}"#),
                ("SendMessage", r#"{"text": "part B"}"#)
            ],
            "{interim:?}"
        );
        assert_eq!(server.request_count(), 2, "{interim:?}");
        assert_eq!(sink.restarts, 1, "{interim:?}");
        server.shutdown().await;
    }
}

/// The same for a stream that stalls there (no more bytes, the body
/// open): after `timeout` the cut answer was taken as the whole, where a
/// reset at the same point was retried (audit, 2026-12-07).
#[tokio::test]
async fn a_stream_stalled_after_an_interim_finish_reason_is_retried() {
    let whole = || Reply::text("Here is part one. And part two.").interim_finish("stop");
    let server = OpenAiServer::builder()
        // role and two pieces of text, then silence
        .reply(whole().stall_after(3))
        .reply(whole())
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        timeout: Duration::from_secs(1),
        ..options(&server)
    })
    .unwrap();
    let (result, sink) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(response.text, "Here is part one. And part two.");
    assert_eq!(server.request_count(), 2);
    assert_eq!(sink.restarts, 1);
    server.shutdown().await;
}

/// Regression (QA): a gateway's `"stop"` on every chunk, the stream cut
/// before any chunk came without it (after the role chunk, or after the
/// first piece of text): the finish reason could not be told from an
/// interim one, and the cut answer (empty, or its first words) was taken
/// as the whole. It is retried; a stream cut after its last chunk that
/// added to it came without one still ends there (the next test).
#[tokio::test]
async fn a_stream_cut_before_any_chunk_without_an_interim_finish_is_retried() {
    for cut in [1, 2] {
        let server = OpenAiServer::builder()
            .reply(
                Reply::text("Here is part one.")
                    .interim_finish("stop")
                    .cut_after(cut),
            )
            .reply(Reply::text("Here is part one. And part two."))
            .start()
            .await;
        let model = OpenAiModel::new(options(&server)).unwrap();
        let (result, _) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("cut after {cut}: {e}"));
        assert_eq!(
            response.text, "Here is part one. And part two.",
            "cut after {cut}"
        );
        assert_eq!(server.request_count(), 2, "cut after {cut}");
        server.shutdown().await;
    }
}

/// A stream cut after its finish reason came on a chunk of its own (after
/// chunks without one): only the usage chunk and `[DONE]` were lost, and
/// the answer is used without another call.
#[tokio::test]
async fn a_stream_cut_after_its_own_finish_chunk_is_used() {
    let reply = Reply::text("Whole answer.");
    // role, the text in four chunks of four characters, the finish
    // chunk: cut there
    let server = OpenAiServer::builder()
        .reply(reply.cut_after(6))
        .start()
        .await;
    let model = OpenAiModel::new(options(&server)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(
        (response.text.as_str(), response.finish),
        ("Whole answer.", FinishReason::Stop)
    );
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}

/// A `""` on every chunk of a whole stream is no finish reason: the
/// answer ends at `[DONE]`, its reason inferred from its tool calls.
#[tokio::test]
async fn an_empty_finish_reason_on_every_chunk_is_no_finish_reason() {
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call("ea", "SendMessage", r#"{"text": "hi"}"#)
                .interim_finish("")
                .finish(""),
        )
        .start()
        .await;
    let model = OpenAiModel::new(options(&server)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}
