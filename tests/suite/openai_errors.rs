//! Errors of an OpenAI-compatible provider that say what to do, against
//! the loopback server: a conversation longer than the model's context
//! window names `compact_at_tokens`, an account out of quota is not
//! retried, a 429 that would be backed off past the call's deadline fails
//! at once, an HTML page in place of an answer names `base_url`. And what
//! every request carries: `User-Agent: botfleet/VERSION`, the key without
//! the whitespace around it, the fleet file's `headers`.

use std::time::Duration;

use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;
use pretty_assertions::assert_eq;

use super::openai_provider::complete;
use super::openai_provider::options;
use super::openai_provider::request;
use super::openai_provider::serve;
use crate::support::fleet::TestFleet;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;

/// OpenAI's answer to a conversation longer than the model's window.
const TOO_LONG: &str = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

/// OpenAI's answer when the account has no credit left.
const NO_QUOTA: &str = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;

/// Regression: a 400 `context_length_exceeded` failed the turn with a
/// notice quoting the body and nothing else, and with a retry that fails
/// the same way. The notice (and the turn's error) now says the context
/// outgrew the window and which key to lower, and the model client
/// reports it as its own error kind, not retried.
#[tokio::test]
async fn a_context_overflow_names_compact_at_tokens_in_the_turn_notice() {
    let server = OpenAiServer::builder()
        .fail_next(5, Reply::raw(400, "application/json", TOO_LONG))
        .start()
        .await;
    let host = TestFleet::new()
        .openai("local", &server.base_url(), "")
        .bot("r", "local", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let entries = host.entries(&session).await;
    let notice = entries
        .iter()
        .find(|e| e["kind"] == "notice" && e["code"] == "turn_failed")
        .unwrap_or_else(|| panic!("{entries:#?}"));
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("context window")
            && text.contains("8192 tokens")
            && text.contains("providers.local.compact_at_tokens")
            && text.contains("e.g. 6144"),
        "{text}"
    );
    assert_eq!(server.request_count(), 1, "not retried");
    host.shutdown().await;

    // the model client's own error kind, for the engine to act on
    let model = OpenAiModel::new(options(&server)).unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    let ModelError::ContextOverflow { status, window, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!((*status, *window), (400, Some(8192)));
    assert!(!error.is_retryable());
    server.shutdown().await;
}

/// Regression: a 429 `insufficient_quota` (the account is out of credit)
/// was retried like a rate limit, every retry failing the same way, and
/// ended as a retryable HTTP 429. It fails at the first answer, saying the
/// account is out of quota, and is not retryable.
#[tokio::test]
async fn an_account_out_of_quota_is_not_retried() {
    let (server, model) = serve(
        OpenAiServer::builder()
            .fail_next(2, Reply::raw(429, "application/json", NO_QUOTA))
            .reply(Reply::text("paid")),
    )
    .await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(
        matches!(
            error,
            ModelError::QuotaExhausted {
                status: Some(429),
                ..
            }
        ),
        "{error:?}"
    );
    assert!(!error.is_retryable());
    let message = error.to_string();
    assert!(message.contains("out of quota or credit"), "{message}");
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}

/// A 429 without `Retry-After` whose backoff would end past the call's
/// deadline fails at once as the 429 it is, rather than waiting out the
/// deadline and saying only that the call took too long.
#[tokio::test]
async fn a_rate_limit_backoff_past_the_deadline_fails_at_once() {
    let server = OpenAiServer::builder()
        .fail_next(5, Reply::error(429, "Rate limit reached for requests"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        rate_limit_backoff_base: Duration::from_secs(60),
        backoff_max: Duration::from_secs(120),
        call_timeout: Duration::from_secs(30),
        ..options(&server)
    })
    .unwrap();
    let started = std::time::Instant::now();
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(
        matches!(
            error,
            ModelError::Http {
                status: 429,
                attempts: 1,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(server.request_count(), 1);
    server.shutdown().await;
}

/// Regression: a 200 answer that was a web page (`base_url` pointing at
/// a web UI) failed with "response is not a chat completion" and a quote
/// of the page. It now says the endpoint answered HTML, names the URL and
/// says what `base_url` should be.
#[tokio::test]
async fn an_html_page_is_named_with_the_url_and_base_url() {
    let page = "<!DOCTYPE html>\n<html><head><title>Open WebUI</title></head><body></body></html>";
    let (server, model) =
        serve(OpenAiServer::builder().fail_next(1, Reply::raw(200, "text/html", page))).await;
    let (result, _) = complete(&model, &request("x")).await;
    let error = result.unwrap_err();
    assert!(matches!(error, ModelError::Config(_)), "{error:?}");
    let message = error.to_string();
    let url = format!("{}/chat/completions", server.base_url());
    assert!(
        message.contains("answered with an HTML page")
            && message.contains(&url)
            && message.contains("base_url"),
        "{message}"
    );
    assert_eq!(server.request_count(), 1, "not retried");
    server.shutdown().await;
}

/// Regression: requests carried no `User-Agent`, and a key with
/// whitespace around it went out as `Bearer  sk-abc `. Requests now say
/// `botfleet/VERSION` and send the key trimmed.
#[tokio::test]
async fn requests_carry_botfleet_as_user_agent_and_the_key_trimmed() {
    let server = OpenAiServer::builder()
        .reply(Reply::text("hi"))
        .start()
        .await;
    let model = OpenAiModel::new(OpenAiOptions {
        api_key: Some(" sk-abc \n".to_owned()),
        ..options(&server)
    })
    .unwrap();
    let (result, _) = complete(&model, &request("x")).await;
    assert_eq!(result.unwrap().text, "hi");
    let requests = server.requests();
    assert_eq!(
        requests[0].header("user-agent"),
        Some(concat!("botfleet/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-abc"));
    server.shutdown().await;
}

/// Regression: `extra_headers` could not be set from the fleet file. A
/// provider's `headers` table is sent with every request.
#[tokio::test]
async fn a_providers_headers_are_sent_with_every_request() {
    let server = OpenAiServer::builder()
        .responder(|_| Reply::text(""))
        .start()
        .await;
    let host = TestFleet::new()
        .openai(
            "main",
            &server.base_url(),
            r#"headers = { "X-Title" = "botfleet tests", "HTTP-Referer" = "https://example.test" }"#,
        )
        .bot("r", "main", &["SendMessage"])
        .start()
        .await;
    let (status, sent) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    host.wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r.header("x-title"), Some("botfleet tests"));
        assert_eq!(r.header("http-referer"), Some("https://example.test"));
        assert!(
            r.header("user-agent")
                .is_some_and(|a| a.starts_with("botfleet/"))
        );
    }
    host.shutdown().await;
    server.shutdown().await;
}
