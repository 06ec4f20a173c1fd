//! A model endpoint that answers with a redirect: the call follows none
//! and fails at once, naming where the server points and the `base_url`
//! to set. Regression (QA, 2026-12-05): a 307 to another host took the
//! provider's `headers` there (an `X-Api-Key` gateway credential; reqwest
//! drops only `Authorization` across hosts), and a 301 or 302 turned the
//! POST into a GET the server refused with a 405 that never mentioned
//! the redirect.

use std::sync::Arc;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;

use super::openai_provider::complete;
use super::openai_provider::request;

/// A server that records the headers of every request it gets.
async fn witness() -> (String, Arc<Mutex<Vec<HeaderMap>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let handler = move |headers: HeaderMap| {
        kept.lock().unwrap().push(headers);
        async { (StatusCode::OK, "{}") }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handler)).await });
    (address, seen)
}

/// A server that answers every request with `status` and `Location: to`.
async fn redirector(status: u16, to: String) -> String {
    let handler = move || {
        let to = to.clone();
        async move { (StatusCode::from_u16(status).unwrap(), [(LOCATION, to)], "") }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handler)).await });
    address
}

fn model(address: &str) -> OpenAiModel {
    OpenAiModel::new(OpenAiOptions {
        api_key: Some("sk-redirect-key-0123".into()),
        extra_headers: vec![("X-Api-Key".into(), "gw-redirect-secret-456".into())],
        ..OpenAiOptions::new(format!("http://{address}/v1"), "test-model")
    })
    .unwrap()
}

#[tokio::test]
async fn a_redirect_is_reported_not_followed() {
    let (other, seen) = witness().await;
    for status in [301, 302, 303, 307, 308] {
        let from = redirector(status, format!("http://{other}/v1/chat/completions")).await;
        let error = complete(&model(&from), &request("x")).await.0.unwrap_err();
        let ModelError::Http {
            status: answered,
            attempts,
            body,
        } = &error
        else {
            panic!("{status}: {error:?}");
        };
        assert_eq!((*answered, *attempts), (status, 1), "{body}");
        assert!(
            body.contains(&format!(
                "POST http://{from}/v1/chat/completions is redirected to \
                 http://{other}/v1/chat/completions"
            )) && body.contains("model calls follow no redirect")
                && body.contains(&format!("set base_url to \"http://{other}/v1\"")),
            "{status}: {body}"
        );
        assert!(
            !body.contains("sk-redirect") && !body.contains("gw-redirect"),
            "{body}"
        );
    }
    // nothing reached the other host, the credential headers least of all
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
}

/// A relative `Location` is resolved against the URL asked; one that is
/// not a chat completions URL gets the general advice, and credentials in
/// the target's userinfo are not shown.
#[tokio::test]
async fn a_redirects_target_is_resolved_and_shown_without_credentials() {
    let from = redirector(308, "/api/v2/chat/completions?x=1".into()).await;
    let error = complete(&model(&from), &request("x")).await.0.unwrap_err();
    let body = error.to_string();
    assert!(
        body.contains(&format!(
            "is redirected to http://{from}/api/v2/chat/completions?x=1"
        )) && body.contains(&format!("set base_url to \"http://{from}/api/v2?x=1\"")),
        "{body}"
    );
    let from = redirector(302, "https://bob:hunter2@login.example/sso".into()).await;
    let error = complete(&model(&from), &request("x")).await.0.unwrap_err();
    let body = error.to_string();
    assert!(
        body.contains("is redirected to https://***@login.example/sso")
            && body.contains("set base_url to the API root the server answers at")
            && !body.contains("hunter2"),
        "{body}"
    );
}

/// The `base_url` advised keeps the target's query (an Azure deployment's
/// `api-version`; QA: it was dropped, so the advice failed), a credential
/// in it shown as `***`; and a 304, no redirect, is reported as the error
/// status it is.
#[tokio::test]
async fn the_advice_keeps_the_query_and_a_304_is_no_redirect() {
    let from = redirector(
        302,
        "https://x.example/openai/deployments/D/chat/completions?api-version=2024-10-21&api-key=k-123"
            .into(),
    )
    .await;
    let body = complete(&model(&from), &request("x"))
        .await
        .0
        .unwrap_err()
        .to_string();
    assert!(
        body.contains(
            "set base_url to \"https://x.example/openai/deployments/D?api-version=2024-10-21&api-key=***\""
        ) && !body.contains("k-123"),
        "{body}"
    );
    let from = redirector(304, "/v1/chat/completions".into()).await;
    let error = complete(&model(&from), &request("x")).await.0.unwrap_err();
    let body = error.to_string();
    assert!(
        body.contains("HTTP 304 after 1 attempt(s): (an empty body)")
            && !body.contains("redirected"),
        "{body}"
    );
}
