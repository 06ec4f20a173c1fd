//! A provider's plain (`stream = false`) answers, seen through a running
//! host, read as robustly as streamed ones: tool calls that share an id
//! are each run, and a lone UTF-16 surrogate (in the text, or escaped in a
//! call's arguments, streamed or not) becomes U+FFFD instead of failing
//! the turn or the call.

use pretty_assertions::assert_eq;

use super::openai_faults::serve_completions;
use super::openai_outcomes::host;
use super::openai_outcomes::turn;
use crate::support::fleet::TestFleet;
use crate::support::fleet::deliveries;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// Regression: in a plain answer, two tool calls with one id were placed by
/// that id, as stream pieces are, and ran together into one SendMessage
/// whose arguments (`{"text":"first"}{"text":"second"}`) were refused.
/// Each is its own call: both are delivered, and the next request (to a
/// strict server, which refuses two calls of one id) shows them under two
/// ids, each answered.
#[tokio::test]
async fn two_calls_sharing_an_id_in_a_plain_answer_both_run() {
    let server = OpenAiServer::builder()
        .strict()
        .reply(
            Reply::tool_call("same", "SendMessage", r#"{"text":"first"}"#).and_tool_call(
                "same",
                "SendMessage",
                r#"{"text":"second"}"#,
            ),
        )
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = host(&server, false).await;
    let (entries, end) = turn(&host, "say two things").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(deliveries(&entries), ["first", "second"]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let messages = requests[1].messages();
    let calls = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["tool_calls"].as_array())
        .unwrap_or_else(|| panic!("{messages:#?}"));
    let sent: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["function"]["name"].as_str().unwrap(),
                c["function"]["arguments"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [
            ("SendMessage", r#"{"text":"first"}"#),
            ("SendMessage", r#"{"text":"second"}"#)
        ]
    );
    let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids[0], "same");
    assert_ne!(ids[1], "same");
    let answered: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ids);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression: a lone surrogate in a plain answer's text failed the turn
/// ("model response did not parse: response is not a chat completion
/// (unexpected end of hex escape …)"), while streamed it became U+FFFD.
/// It becomes U+FFFD here too, and the turn goes on to its end (answered
/// in text alone, without SendMessage, it delivers nothing).
#[tokio::test]
async fn a_lone_surrogate_in_a_plain_answers_text_becomes_a_replacement_character() {
    async fn answer() -> axum::response::Response {
        use axum::response::IntoResponse;
        let body = r#"{"id":"chatcmpl-test","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"note \ud800 x"},"finish_reason":"stop"}]}"#;
        ([("content-type", "application/json")], body).into_response()
    }
    let base_url = serve_completions(axum::routing::post(answer)).await;
    let host = TestFleet::new()
        .openai("main", &base_url, "stream = false\nmax_retries = 0")
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (entries, end) = turn(&host, "note it").await;
    assert_eq!(end["status"], "undelivered", "{end}");
    let said = entries
        .iter()
        .find(|e| e["kind"] == "assistant")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    assert_eq!(said["text"], "note \u{FFFD} x", "{said}");
    host.shutdown().await;
}

/// Regression: a lone surrogate escaped inside a call's arguments (JSON
/// text in a JSON string: `{"text":"a \ud800 b"}`) made them invalid JSON,
/// and the call was refused ("the arguments are not valid JSON (unexpected
/// end of hex escape …)"), streamed or not. It is U+FFFD, as in text, and
/// the message is delivered.
#[tokio::test]
async fn a_lone_surrogate_escaped_in_arguments_becomes_a_replacement_character() {
    for stream in [true, false] {
        let server = OpenAiServer::builder()
            .reply(Reply::tool_call(
                "c1",
                "SendMessage",
                r#"{"text":"a \ud800 b"}"#,
            ))
            .responder(|_| Reply::text(""))
            .start()
            .await;
        let host = host(&server, stream).await;
        let (entries, end) = turn(&host, "send it").await;
        assert_eq!(end["status"], "completed", "stream = {stream}: {end}");
        assert_eq!(
            deliveries(&entries),
            ["a \u{FFFD} b"],
            "stream = {stream}: {entries:#?}"
        );
        host.shutdown().await;
        server.shutdown().await;
    }
}
