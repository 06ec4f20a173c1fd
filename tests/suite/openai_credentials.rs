//! The OpenAI-compatible provider keeps its credentials out of what it
//! says. Regression: a base URL with userinfo
//! (`http://alice:hunter2pw@host/v1`) went whole into a 404's error text
//! (`POST http://alice:hunter2pw@…/chat/completions was not found`), which
//! reaches the transcript, the log and `GET /v1/turns/{turn}`. The request
//! still carries the credentials.

use std::sync::Arc;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::Uri;
use axum::http::header::AUTHORIZATION;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;

use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::process::BIN;

const PASSWORD: &str = "hunter2pw";
/// `alice:hunter2pw` as basic auth sends it.
const BASIC: &str = "YWxpY2U6aHVudGVyMnB3";
const KEY: &str = "sk-test-do-not-show-0123456789";

/// A server that answers every request 404 with a body echoing the URI
/// and the `Authorization` header it got (as careless servers do); returns
/// its address and the headers received.
async fn echoing_404() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let answer = move |uri: Uri, headers: HeaderMap| {
        let auth = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        record.lock().unwrap().push(auth.clone());
        async move {
            (
                StatusCode::NOT_FOUND,
                format!("no route {uri}; you sent authorization {auth:?}"),
            )
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let app = axum::Router::new().fallback(answer);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, seen)
}

/// Fails if `text` shows a credential.
fn assert_no_credentials(text: &str) {
    for secret in [PASSWORD, "alice:", BASIC, KEY] {
        assert!(!text.contains(secret), "shows {secret:?}: {text}");
    }
}

/// The error of one call to the endpoint at `base_url`.
async fn error_of(base_url: String, api_key: Option<&str>) -> ModelError {
    let model = OpenAiModel::new(OpenAiOptions {
        api_key: api_key.map(str::to_owned),
        max_retries: 0,
        ..OpenAiOptions::new(base_url, "test-model")
    })
    .unwrap();
    assert_no_credentials(&format!("{model:?}"));
    let (result, _) = complete(&model, &request("x")).await;
    result.unwrap_err()
}

#[tokio::test]
async fn a_404_names_the_url_without_its_userinfo_and_hides_an_echoed_key() {
    let (address, seen) = echoing_404().await;

    // the userinfo goes out as basic auth and stays out of the error
    let error = error_of(format!("http://alice:{PASSWORD}@{address}/v1"), None).await;
    let text = error.to_string();
    assert!(
        matches!(error, ModelError::Http { status: 404, .. }),
        "{error:?}"
    );
    assert!(
        text.contains(&format!(
            "POST http://***@{address}/v1/chat/completions was not found"
        )),
        "{text}"
    );
    assert!(
        text.contains("you sent authorization \"Basic ***\""),
        "{text}"
    );
    assert_no_credentials(&text);
    assert_no_credentials(&format!("{error:?}"));

    // a key goes out as the bearer token; the body echoing it is cut out,
    // and the hint for a base URL without /v1 names it without userinfo
    let error = error_of(format!("http://alice:{PASSWORD}@{address}/api"), Some(KEY)).await;
    let text = error.to_string();
    assert!(
        text.contains(&format!(
            "base_url \"http://***@{address}/api\" usually ends in /v1"
        )),
        "{text}"
    );
    assert!(
        text.contains("you sent authorization \"Bearer ***\""),
        "{text}"
    );
    assert_no_credentials(&text);

    assert_eq!(
        *seen.lock().unwrap(),
        [format!("Basic {BASIC}"), format!("Bearer {KEY}")]
    );
}

#[tokio::test]
async fn a_failed_turn_and_check_config_show_no_userinfo() {
    let (address, _) = echoing_404().await;
    let fleet = TestFleet::new()
        .openai(
            "main",
            &format!("http://alice:{PASSWORD}@{address}/v1"),
            "max_retries = 0",
        )
        .bot("r", "main", &["SendMessage"]);
    let out = tokio::process::Command::new(BIN)
        .args(["check-config", "--fleet"])
        .arg(fleet.write())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("at http://***@{address}/v1")),
        "{said}"
    );
    assert_no_credentials(&said);

    let host = fleet.start().await;
    let (status, sent) = host.send("r", "hello", None).await;
    assert_eq!(status, 202, "{sent}");
    let session = sent["session"].as_str().unwrap().to_owned();
    let end = host
        .wait_turn_end(&session, sent["seq"].as_i64().unwrap())
        .await;
    assert_eq!(end["status"], "failed", "{end}");
    let turn = end["turn"].as_str().unwrap();
    let (_, v) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    let error = v["turn"]["error"].to_string();
    assert!(error.contains(&format!("http://***@{address}/v1")), "{v:#}");
    assert_no_credentials(&v.to_string());
    let entries = host.entries(&session).await;
    assert!(
        entries.iter().any(|e| e["code"] == "turn_failed"),
        "{entries:#?}"
    );
    assert_no_credentials(&serde_json::to_string(&entries).unwrap());
    host.shutdown().await;
}
