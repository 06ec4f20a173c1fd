//! What a model call that broke off or failed after its answer began
//! counts toward the turn's usage, and so toward its bot's daily budget:
//! the server made what it streamed. Regression (QA): an attempt the
//! provider sent again after it broke off, and an answer past the
//! provider's `max_response_bytes` (the runaway that limit is for), were
//! counted as nothing; the same runaway just under the limit was counted
//! in full and paused the bot.

use serde_json::Value;

use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// `n` words that never repeat (a repeated one would trip the loop
/// watch first).
fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{i} ")).collect()
}

/// A host whose bot `r` runs on `server` (the provider's `extra` lines),
/// and the `turn_end` of its turn for "hello".
async fn one_turn(server: &OpenAiServer, extra: &str) -> (TestHost, Value) {
    let host = TestFleet::new()
        .openai("main", &server.base_url(), extra)
        .bot("r", "main", &["SendMessage"])
        .runtime("debounce_ms = 0\nextract_memory = false")
        .start()
        .await;
    let (_, end) = host.end_turn("r", "hello").await;
    (host, end)
}

fn usage_of(end: &Value) -> (u64, u64) {
    let usage = &end["usage"];
    (
        usage["calls"].as_u64().unwrap_or_else(|| panic!("{end}")),
        usage["completion_tokens"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn a_broken_attempt_that_was_sent_again_counts_what_it_streamed() {
    let server = OpenAiServer::builder()
        // the role chunk, then 39 chunks of four characters: cut there
        .reply(Reply::text(words(200)).cut_after(40))
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text": "hi"}"#).usage(100, 10))
        .reply(Reply::text("").usage(100, 1))
        .start()
        .await;
    let (host, end) = one_turn(&server, "max_retries = 1").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (calls, completion) = usage_of(&end);
    // the broken attempt is a call, and its 156 characters are tokens
    assert_eq!(calls, 3, "{end}");
    assert!(completion >= 11 + 20, "{end}");
    assert_eq!(server.request_count(), 3);
    host.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_answer_past_max_response_bytes_counts_what_it_streamed() {
    let server = OpenAiServer::builder()
        .reply(Reply::text(words(1000)))
        .start()
        .await;
    let (host, end) = one_turn(&server, "max_retries = 0\nmax_response_bytes = 1024").await;
    assert_eq!(end["status"], "failed", "{end}");
    let (calls, completion) = usage_of(&end);
    // 1,024 bytes of "w0 w1 …" are some 400 tokens
    assert_eq!(calls, 1, "{end}");
    assert!(completion >= 150, "{end}");
    host.shutdown().await;
    server.shutdown().await;
}

/// The same runaway in what is never shown: a call's arguments, or a
/// thinking model's reasoning, past `max_response_bytes` (QA: both counted
/// nothing, no usage and no daily budget, though the text-only one did).
#[tokio::test]
async fn a_runaway_of_arguments_or_reasoning_counts_what_it_streamed() {
    let arguments = serde_json::json!({ "text": words(1000) }).to_string();
    for (what, reply) in [
        (
            "arguments",
            Reply::tool_call("c1", "SendMessage", &arguments),
        ),
        ("reasoning", Reply::text("done").reasoning(words(1000))),
    ] {
        let server = OpenAiServer::builder().reply(reply).start().await;
        let (host, end) = one_turn(&server, "max_retries = 0\nmax_response_bytes = 1024").await;
        assert_eq!(end["status"], "failed", "{what}: {end}");
        let (calls, completion) = usage_of(&end);
        assert_eq!(calls, 1, "{what}: {end}");
        assert!(completion >= 150, "{what}: {end}");
        host.shutdown().await;
        server.shutdown().await;
    }
}

/// A thinking model's answer that finished, from a server that reports no
/// usage: its reasoning is counted with its text, as a runaway's is (it
/// counted only the text, so the bot's daily budget never saw the
/// thinking).
#[tokio::test]
async fn a_finished_answers_reasoning_counts_without_usage() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text": "hi"}"#).reasoning(words(300)))
        .reply(Reply::text(""))
        .start()
        .await;
    let (host, end) = one_turn(&server, "max_retries = 0").await;
    assert_eq!(end["status"], "completed", "{end}");
    let (calls, completion) = usage_of(&end);
    assert_eq!(calls, 2, "{end}");
    // 300 words "wN " are some 600 tokens; the rest is a few
    assert!(completion >= 300, "{end}");
    host.shutdown().await;
    server.shutdown().await;
}
