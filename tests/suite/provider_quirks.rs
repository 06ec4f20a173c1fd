//! Quirks of real OpenAI-compatible servers (tester H2), against the
//! loopback server: a `base_url` with a query (Azure OpenAI's
//! `?api-version=`), failures that name the provider, the URL and the
//! fix, transient failures that were not retried (HTTP 408, an empty or
//! cut-off JSON body), token counts that are not whole numbers, and a
//! thinking reviewer's verdict after its `<think>` block.

use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use botfleet::model::Usage;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::openai_provider::complete;
use super::openai_provider::options;
use super::openai_provider::request;
use super::openai_provider::serve;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

const API_VERSION: &str = "api-version=2024-10-21";

/// Runs `botfleet check-config` on the fleet file of `fleet`: (exit code,
/// stdout and stderr).
async fn check_config(fleet: &TestFleet) -> (i32, String) {
    let path = fleet.write();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_botfleet"))
        .arg("check-config")
        .arg("--fleet")
        .arg(&path)
        .env("RUST_LOG", "off")
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Regression (tester H2): a `base_url` with a query (Azure OpenAI's
/// `…/openai/deployments/NAME?api-version=…`) had `/chat/completions`
/// appended after the query, so the server got the path without it and a
/// query ending in `/chat/completions`. The path now ends in
/// `/chat/completions` and the query arrives as written; `check-config`
/// accepts it, and refuses a fragment, which is never sent.
#[tokio::test]
async fn a_base_url_with_a_query_keeps_it_after_the_path() {
    let server = OpenAiServer::builder()
        .reply(Reply::tool_call("c1", "SendMessage", r#"{"text": "hi"}"#))
        .reply(Reply::text(""))
        .start()
        .await;
    let base_url = format!("{}?{API_VERSION}", server.base_url());
    let fleet = TestFleet::new()
        .openai("azure", &base_url, "max_retries = 0")
        .bot("r", "azure", &["SendMessage"]);
    let (code, out) = check_config(&fleet).await;
    assert_eq!(code, 0, "{out}");
    let host = fleet.start().await;
    let (status, sent) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    host.wait_turn_end(
        sent["session"].as_str().unwrap(),
        sent["seq"].as_i64().unwrap(),
    )
    .await;
    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.path, format!("/v1/chat/completions?{API_VERSION}"));
    }
    let fleet = host.shutdown().await;

    // a fragment is never sent: refused, not silently dropped
    let fleet = fleet.openai("frag", &format!("{}#part", server.base_url()), "");
    let (code, out) = check_config(&fleet).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("frag") && out.contains("never sent"), "{out}");
    server.shutdown().await;
}

/// The text of the `turn_failed` notice of a message `text` sent to bot
/// `r` of `host`.
async fn failed_turn(host: &TestHost, text: &str) -> String {
    let (status, sent) = host.send("r", text, None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let seq = sent["seq"].as_i64().unwrap();
    host.wait_turn_end(&session, seq).await;
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .filter(|e| e["seq"].as_i64().is_some_and(|s| s > seq))
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    notice["text"].as_str().unwrap().to_owned()
}

/// Regression (tester H2): a provider's failures said "model endpoint
/// answered HTTP 401 after 1 attempt(s): …" and the like, naming neither
/// the provider, nor the URL, nor what to change; with several providers
/// the operator could not tell which one failed. Each now starts with
/// `providers.NAME (POST URL)` and names the fleet file's key to change.
#[tokio::test]
async fn a_failed_turn_names_the_provider_the_url_and_the_fix() {
    let server = OpenAiServer::builder()
        .fail_next(1, Reply::error(401, "Missing bearer authentication"))
        .fail_next(
            1,
            Reply::error(
                400,
                "Unrecognized request argument supplied: stream_options",
            ),
        )
        .fail_next(1, Reply::error(503, "overloaded"))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("local", &server.base_url(), "max_retries = 0")
        .bot("r", "local", &["SendMessage"])
        .start()
        .await;
    let place = format!(
        "providers.local (POST {}/chat/completions): ",
        server.base_url()
    );
    for (message, fix, failure) in [
        (
            "one",
            "set providers.local.api_key_env to the name of the environment variable",
            "HTTP 401",
        ),
        ("two", "set providers.local.stream = false", "HTTP 400"),
        (
            "three",
            "the server failed on every attempt (providers.local.max_retries = 0)",
            "HTTP 503",
        ),
    ] {
        let text = failed_turn(&host, message).await;
        assert!(
            text.contains(&place) && text.contains(fix) && text.contains(failure),
            "{text}"
        );
    }
    assert_eq!(server.request_count(), 3);
    host.shutdown().await;
    server.shutdown().await;
}

/// Regression (tester H2): HTTP 408 (a proxy or gateway that gave up
/// waiting) failed the call at once, where 429 and 5xx are retried.
#[tokio::test]
async fn a_408_is_retried() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .fail_next(2, Reply::error(408, "request timeout"))
            .reply(Reply::text("hello")),
    )
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "hello");
    assert_eq!(server.request_count(), 3);
    server.shutdown().await;
}

/// Regression (tester H2): a whole (non-streamed) completion whose body
/// was empty, or ended before its JSON did (a connection closed early),
/// failed the turn at once as "did not parse", where a broken stream is
/// retried. Both are a break in transit, and retried.
#[tokio::test]
async fn an_empty_or_cut_off_json_body_is_retried() {
    let cut = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hal"#;
    let (server, model) = serve(
        OpenAiServer::builder()
            .fail_next(1, Reply::raw(200, "application/json", ""))
            .fail_next(1, Reply::raw(200, "application/json", cut))
            .reply(Reply::text("hello")),
    )
    .await;
    let (result, recorder) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "hello");
    assert_eq!(server.request_count(), 3);
    assert_eq!(recorder.deltas.concat(), "hello");
    server.shutdown().await;

    // past the retries, the error says what broke
    let server = OpenAiServer::builder()
        .fail_next(10, Reply::raw(200, "application/json", cut))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        max_retries: 1,
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(error.is_retryable(), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("the answer's body ended after 112 bytes, before its JSON did"),
        "{error}"
    );
    assert_eq!(server.request_count(), 2);
    server.shutdown().await;
}

/// A completion with `usage` as the raw JSON `usage`, streamed (SSE) or
/// whole.
fn with_usage(usage: &str, stream: bool) -> Reply {
    if stream {
        let body = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"hi\"}}}}]}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{usage}}}\n\n\
             data: [DONE]\n\n"
        );
        Reply::raw(200, "text/event-stream", body)
    } else {
        let body = format!(
            "{{\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"hi\"}},\
             \"finish_reason\":\"stop\"}}],\"usage\":{usage}}}"
        );
        Reply::raw(200, "application/json", body)
    }
}

/// Regression (tester H2): a `usage` with a count that is not a whole
/// number (`12.0`) or is negative failed the whole turn ("model response
/// did not parse"), although the answer was complete. Usage is
/// accounting: a fraction is rounded, a negative count makes the usage
/// count as missing (the engine counts the tokens itself).
#[tokio::test]
async fn odd_token_counts_do_not_fail_the_answer() {
    let floats = r#"{"prompt_tokens":12.0,"completion_tokens":2.6,"total_tokens":14.6}"#;
    let negative = r#"{"prompt_tokens":-1,"completion_tokens":3,"total_tokens":2}"#;
    for stream in [true, false] {
        let (server, model) = serve(
            OpenAiServer::builder()
                .reply(with_usage(floats, stream))
                .reply(with_usage(negative, stream)),
        )
        .await;
        let (result, _) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("stream {stream}: {e}"));
        assert_eq!(response.text, "hi");
        assert_eq!(
            response.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 3,
                cached_prompt_tokens: 0,
            })
        );
        let (result, _) = complete(&model, &request("x")).await;
        let response = result.unwrap_or_else(|e| panic!("stream {stream}: {e}"));
        assert_eq!((response.text.as_str(), response.usage), ("hi", None));
        assert_eq!(server.request_count(), 2);
        server.shutdown().await;
    }
}

/// Regression (tester H2): a thinking reviewer served without a reasoning
/// parser writes `<think>…</think>` before its verdict; the verdict was
/// "not a valid verdict", so every action the rules allowed became an
/// approval whatever the reviewer decided. It is read after the block.
#[tokio::test]
async fn a_thinking_reviewers_verdict_is_read_after_its_reasoning() {
    let reviewer = OpenAiServer::builder()
        .responder(|_| {
            Reply::text(
                "<think>\nListing files is harmless, but {\"decision\": \"allow\"} is not \
                 mine to give here.\n</think>\n\n\
                 {\"decision\": \"deny\", \"reason\": \"no listings today\"}",
            )
        })
        .start()
        .await;
    let script = "[[rule]]\nmatch = \"^list\"\n\
                  steps = [ { tool = \"Shell\", args = { command = \"ls\" } } ]\n\n\
                  [[rule]]\nsteps = [ { tool = \"SendMessage\", args = { text = \"ok\" } } ]\n";
    let host = TestFleet::new()
        .script("s", script)
        .openai("rev", &reviewer.base_url(), "max_retries = 0")
        .bot("r", "s", &["SendMessage", "Shell"])
        .tables("[review]\nshell = \"enforce\"\nreviewer = \"rev\"\n")
        .start()
        .await;
    host.end_turn("r", "list the files").await;
    let (_, log) = host.get("/v1/bots/r/reviews", TOKEN).await;
    let log = log["reviews"].as_array().unwrap();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0]["decision"], "deny", "{log:#?}");
    assert_eq!(log[0]["reason"], "reviewer model: no listings today");
    let (_, pending) = host.get("/v1/approvals?status=pending", TOKEN).await;
    assert_eq!(pending["approvals"], json!([]), "{pending:#}");
    assert_eq!(reviewer.request_count(), 1);
    host.shutdown().await;
    reviewer.shutdown().await;
}
