//! Quirks of real OpenAI-compatible servers, continued (round 22, F1),
//! against the loopback server: a whole (non-streamed) answer whose text
//! has a long run (a base64 blob, a row of zeros) keeps its tool calls,
//! while a streamed one still stops at the loop; the context-window
//! errors of LM Studio, SGLang, TGI and Gemini's OpenAI endpoint; and a
//! server that refuses `stream_options`.

use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;

use super::openai_outcomes::host;
use super::openai_outcomes::turn;
use super::openai_provider::complete;
use super::openai_provider::options;
use super::openai_provider::request;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;

/// A text the loop detector stops at: one character 256 times (a
/// zero-filled buffer, a base64 blob of zeros).
fn long_run() -> String {
    format!("The buffer is {}, as expected.", "0".repeat(256))
}

/// Regression (round 22, F1): a whole answer (`stream = false`) whose
/// text held a run of 256 zeros, with a valid SendMessage, was thrown
/// away as a loop: the call never ran, the loop reminder was sent, and
/// the turn ended undelivered. The answer is complete, so nothing is
/// saved by dropping it: the call runs, and the text is cut at the loop.
#[tokio::test]
async fn a_plain_answer_with_a_long_run_in_its_text_still_runs_its_calls() {
    let server = OpenAiServer::builder()
        .reply(
            Reply::tool_call("c1", "SendMessage", r#"{"text":"the buffer is fine"}"#)
                .with_text(long_run()),
        )
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, false).await;
    let (entries, end) = turn(&host, "check the buffer").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["the buffer is fine"]);
    assert!(
        entries.iter().all(|e| e["kind"] != "reminder"),
        "{entries:#?}"
    );
    // the step's text, cut at the loop: its start kept, the rest dropped
    let said = entries
        .iter()
        .find(|e| e["kind"] == "assistant")
        .and_then(|e| e["text"].as_str())
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert!(
        said.starts_with("The buffer is 000") && said.len() < long_run().len(),
        "{said}"
    );
    assert_eq!(server.request_count(), 2);
    host.shutdown().await;
    server.shutdown().await;
}

/// A streamed answer with its tool call complete *before* a looping text
/// (servers stream text first, so this is the rare order): the stream
/// still stops at the loop, and the call goes with the text, unrun; the
/// loop reminder follows and the model is asked again, as for any loop.
#[tokio::test]
async fn a_streamed_answer_stops_at_a_loop_even_after_a_complete_call() {
    let call = r#"{"id":"c1","type":"function","function":{"name":"SendMessage","arguments":"{\"text\":\"early\"}"}}"#;
    let body = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"tool_calls\":[{{\"index\":0,{}}}]}}}}]}}\n\n\
         data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n\
         data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\n\
         data: [DONE]\n\n",
        &call[1..call.len() - 1],
        long_run()
    );
    let server = OpenAiServer::builder()
        .reply(Reply::raw(200, "text/event-stream", body))
        .reply(Reply::tool_call("c2", "SendMessage", r#"{"text":"later"}"#))
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, true).await;
    let (entries, end) = turn(&host, "check the buffer").await;
    assert_eq!(end["status"], "completed", "{end}");
    // the early call never ran; the answer after the reminder did
    assert_eq!(deliveries(&entries), ["later"]);
    let reminders = entries.iter().filter(|e| e["kind"] == "reminder").count();
    assert_eq!(reminders, 1, "{entries:#?}");
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (round 22, F1): the context-window errors of LM Studio,
/// SGLang, TGI and Gemini's OpenAI endpoint were ordinary refusals ("the
/// server refused the request"), which named neither the window nor
/// `compact_at_tokens`. Each is a context overflow now, with its window,
/// not retried; another refusal of the same server stays what it is.
#[tokio::test]
async fn context_overflows_of_lm_studio_sglang_tgi_and_gemini_say_so() {
    let overflows = [
        (
            400,
            r#"{"error":"Trying to keep the first 6269 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
            Some(4096),
        ),
        (
            400,
            r#"{"object":"error","message":"The input (61709 tokens) is longer than the model's context length (40960 tokens).","type":"BadRequestError","param":null,"code":400}"#,
            Some(40960),
        ),
        (
            422,
            r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1512. Given: 30 `inputs` tokens and 3984 `max_new_tokens`","error_type":"validation"}"#,
            Some(1512),
        ),
        (
            400,
            r#"[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]"#,
            Some(1048576),
        ),
    ];
    for (status, body, expected) in overflows {
        let server = OpenAiServer::builder()
            .fail_next(1, Reply::raw(status, "application/json", body))
            .start()
            .await;
        let model = OpenAiModel::new(options(&server)).unwrap();
        let (result, _) = complete(&model, &request("x")).await;
        match result {
            Err(ModelError::ContextOverflow { window, .. }) => {
                assert_eq!(window, expected, "{body}");
            }
            other => panic!("{body}: {other:?}"),
        }
        assert_eq!(server.request_count(), 1, "{body}");
        server.shutdown().await;
    }
    let others = [
        (
            400,
            r#"[{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]"#,
        ),
        (
            422,
            r#"{"error":"Input validation error: `max_new_tokens` must be <= 4096. Given: 8192","error_type":"validation"}"#,
        ),
    ];
    for (status, body) in others {
        let server = OpenAiServer::builder()
            .fail_next(1, Reply::raw(status, "application/json", body))
            .start()
            .await;
        let model = OpenAiModel::new(options(&server)).unwrap();
        let (result, _) = complete(&model, &request("x")).await;
        assert!(
            matches!(result, Err(ModelError::Http { status: s, .. }) if s == status),
            "{body}: {result:?}"
        );
        server.shutdown().await;
    }
}

/// A server that refuses `stream_options` with a 400, as older vLLM and
/// TGI and some proxies do (`extra_forbidden`), and otherwise answers.
async fn refusing_stream_options() -> OpenAiServer {
    OpenAiServer::builder()
        .responder(|request| {
            if request.get("stream_options").is_some() {
                Reply::error(
                    400,
                    "Unrecognized request argument supplied: stream_options",
                )
            } else {
                Reply::text("hi").usage(7, 1)
            }
        })
        .start()
        .await
}

/// Regression (round 22, F1): `stream_options` could not be switched
/// off: against a server that refuses it the only way out was
/// `stream = false`. With `stream_usage = false` the request leaves it
/// out and still streams; the answer has no usage (the engine counts the
/// tokens). The refusal's advice names `stream_usage = false` first.
#[tokio::test]
async fn a_server_refusing_stream_options_answers_with_stream_usage_off() {
    let server = refusing_stream_options().await;
    let named = OpenAiOptions {
        provider: Some("old".to_owned()),
        max_retries: 0,
        ..options(&server)
    };
    let model = OpenAiModel::new(named.clone()).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let text = result.unwrap_err().to_string();
    let usage = text.find("set providers.old.stream_usage = false");
    let stream = text.find("set providers.old.stream = false");
    assert!(
        matches!((usage, stream), (Some(u), Some(s)) if u < s),
        "{text}"
    );

    let model = OpenAiModel::new(OpenAiOptions {
        stream_usage: false,
        ..named
    })
    .unwrap();
    let (result, sink) = complete(&model, &request("x")).await;
    let response = result.unwrap();
    assert_eq!((response.text.as_str(), response.usage), ("hi", None));
    assert_eq!(sink.text(), "hi");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["stream"], true);
    assert!(requests[1].body.get("stream_options").is_none());
    server.shutdown().await;
}

/// `providers.NAME.stream_usage = false` in the fleet file: a bot whose
/// server refuses `stream_options` answers, streamed, and its tokens are
/// counted by botfleet (the server sent no usage).
#[tokio::test]
async fn a_fleet_provider_with_stream_usage_off_works_against_such_a_server() {
    let server = OpenAiServer::builder()
        .responder(|request| {
            if request.get("stream_options").is_some() {
                Reply::error(
                    400,
                    "Unrecognized request argument supplied: stream_options",
                )
            } else if last_message(request).is_some_and(|m| m["role"] == "tool") {
                Reply::text("")
            } else {
                Reply::tool_call("c1", "SendMessage", r#"{"text":"hello"}"#).usage(7, 1)
            }
        })
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "old",
            &server.base_url(),
            "max_retries = 0\nstream_usage = false",
        )
        .bot("r", "old", &["SendMessage"])
        .start()
        .await;
    let (entries, end) = turn(&host, "hi").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["hello"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for r in &requests {
        assert_eq!(r.body["stream"], true);
        assert!(r.body.get("stream_options").is_none(), "{:#}", r.body);
    }
    let (_, bots) = host.get("/v1/bots", TOKEN).await;
    let today = bots["bots"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["id"] == "r"))
        .map(|b| &b["usage"]["today"])
        .unwrap_or_else(|| panic!("{bots:#}"));
    assert!(
        today["prompt_tokens"].as_u64().is_some_and(|n| n > 7)
            && today["completion_tokens"].as_u64().is_some_and(|n| n > 0),
        "{today:#}"
    );
    host.shutdown().await;
    server.shutdown().await;
}
