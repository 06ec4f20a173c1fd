//! The OpenAI-compatible provider keeps its credentials out of what it
//! says. Regression: a base URL with userinfo
//! (`http://alice:hunter2pw@host/v1`) went whole into a 404's error text
//! (`POST http://alice:hunter2pw@…/chat/completions was not found`), which
//! reaches the transcript, the log and `GET /v1/turns/{turn}`. The request
//! still carries the credentials. Also: an error text cut inside an echoed
//! credential shows no start of it, and tool results are scrubbed of the
//! password in a provider's `base_url`.

use std::sync::Arc;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::Uri;
use axum::http::header::AUTHORIZATION;
use botfleet::model::ModelError;
use botfleet::model::OpenAiModel;
use botfleet::model::OpenAiOptions;

use serde_json::Value;
use serde_json::json;

use super::openai_edges::raw_server;
use super::openai_provider::complete;
use super::openai_provider::request;
use crate::support::fleet::TOKEN;
use crate::support::fleet::TestFleet;
use crate::support::fleet::TestHost;
use crate::support::openai_server::OpenAiServer;
use crate::support::openai_server::Reply;
use crate::support::openai_server::last_message;
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

/// Regression (QA): a credential in the base URL's query (`?api_key=…`,
/// as some gateways take it) was masked where the host shows the URL but
/// went in clear into the error of a connection that failed (reqwest's
/// "error sending request for url (…)") and into a server's answer
/// echoing its URI, so into the notice, the log and the transcript files.
#[tokio::test]
async fn a_credential_in_the_base_urls_query_is_hidden_in_every_error() {
    const QUERY_SECRET: &str = "query-secret-QA-777/x+y";
    let encoded = "query-secret-QA-777%2Fx%2By";
    // nothing listens on a port just freed
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let error = error_of(format!("http://{closed}/v1?api_key={encoded}"), None).await;
    let text = format!("{error} {error:?}");
    assert!(matches!(error, ModelError::Unreachable { .. }), "{error:?}");
    assert!(
        !text.contains(encoded) && !text.contains(QUERY_SECRET),
        "{text}"
    );

    let (address, _) = echoing_404().await;
    let error = error_of(format!("http://{address}/v1?key={encoded}"), None).await;
    let text = format!("{error} {error:?}");
    assert!(text.contains("no route"), "{text}");
    assert!(
        !text.contains(encoded) && !text.contains(QUERY_SECRET),
        "{text}"
    );
}

/// A key holding `/`, echoed by a server that writes JSON as PHP's
/// `json_encode` does (`/` as `\/`), is hidden too. (QA, 2026-12-05: the
/// turn's notice, the CLI and the log showed `bad key sk-qa\/Key…`.)
#[tokio::test]
async fn a_key_echoed_with_escaped_slashes_is_hidden() {
    const SLASHED: &str = "sk-qa/Key+With/Slashes==";
    let answer = |headers: HeaderMap| async move {
        let auth = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .replace('/', "\\/");
        (
            StatusCode::UNAUTHORIZED,
            format!(r#"{{"error":{{"message":"bad key in {auth}"}}}}"#),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let app = axum::Router::new().fallback(answer);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let error = error_of(format!("http://{address}/v1"), Some(SLASHED)).await;
    let text = format!("{error} {error:?}");
    assert!(text.contains("bad key in Bearer ***"), "{text}");
    assert!(!text.contains("Slashes"), "{text}");
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
    let (session, end) = host.end_turn("r", "hello").await;
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

/// The key whose start a cut error text used to show.
const CUT_KEY: &str = "sk-SUPERSECRETKEY123";
/// The environment variable holding [`CUT_KEY`].
const CUT_KEY_ENV: &str = "BOTFLEET_TEST_CUT_KEY";
const BOB_PASSWORD: &str = "hunter2pass";
/// `bob:hunter2pass` as basic auth sends it.
const BOB_BASIC: &str = "Ym9iOmh1bnRlcjJwYXNz";

/// Fails if `text` shows 4 chars or more from the start of a secret.
fn assert_no_start_of(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        for len in 4..=secret.len() {
            let start = &secret[..len];
            assert!(!text.contains(start), "{what} shows {start:?}: {text}");
        }
    }
}

/// Starts a host with `fleet`, [`CUT_KEY`] in its environment.
async fn start_with_key(fleet: TestFleet) -> TestHost {
    let path = fleet.write();
    let env = std::collections::HashMap::from([(CUT_KEY_ENV.to_owned(), CUT_KEY.to_owned())]);
    let running = botfleet::host::start(botfleet::host::HostOptions {
        fleet: Some(path),
        data_dir: None,
        listen: None,
        env: Some(env),
        ..Default::default()
    })
    .await
    .unwrap();
    TestHost {
        url: running.url(),
        host: Some(running),
        fleet,
        http: reqwest::Client::new(),
    }
}

/// Runs a turn of bot `r` at `base_url` (`extra` lines for its provider)
/// that fails; checks that its error holds `shown` and that neither the
/// turn, the transcript nor a search for `quokka` (a word next to the
/// credential) shows the start of one of `secrets`.
async fn a_failed_turn_shows_no_start_of(
    base_url: &str,
    extra: &str,
    shown: &str,
    secrets: &[&str],
) {
    let fleet = TestFleet::new()
        .openai("main", base_url, &format!("max_retries = 0\n{extra}"))
        .bot("r", "main", &["SendMessage"]);
    let host = start_with_key(fleet).await;
    let (session, end) = host.end_turn("r", "hello").await;
    assert_eq!(end["status"], "failed", "{end}");
    let turn = end["turn"].as_str().unwrap();
    let (_, v) = host.get(&format!("/v1/turns/{turn}"), TOKEN).await;
    let error = v["turn"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(shown), "{shown:?} not in {error}");
    assert_no_start_of(&v.to_string(), secrets, "the turn");
    let entries = serde_json::to_string(&host.entries(&session).await).unwrap();
    assert!(entries.contains(shown), "{entries}");
    assert_no_start_of(&entries, secrets, "the transcript");
    let found = host
        .wait_get("/v1/search?q=quokka", |v| {
            (v["total"].as_u64() >= Some(1)).then(|| v.clone())
        })
        .await;
    assert_no_start_of(&found.to_string(), secrets, "search");
    host.shutdown().await;
}

/// Regression: an error body was cut to 4096 bytes before it was cleaned
/// of credentials, so a cut inside the echoed key left `Bearer
/// sk-SUPERSECRETKE` (17 of its 20 chars) in the turn error, the
/// transcript, the search index and the log.
#[tokio::test]
async fn an_error_body_cut_inside_the_key_shows_no_start_of_it() {
    let (address, _) = raw_server(|auth| {
        // the key's bearer value crosses the 4096th byte
        let pad = "x".repeat(4072 - " quokka ".len());
        (400, "text/plain", format!("{pad} quokka {auth} tail"))
    })
    .await;
    a_failed_turn_shows_no_start_of(
        &format!("http://{address}/v1"),
        &format!("api_key_env = \"{CUT_KEY_ENV}\""),
        "quokka Bearer ***",
        &[CUT_KEY],
    )
    .await;
}

/// Regression: a streamed event that is not a chunk was quoted cut to
/// 200 bytes, then cleaned: a key echoed across the cut showed its start.
#[tokio::test]
async fn a_bad_stream_event_cut_inside_the_key_shows_no_start_of_it() {
    let (address, _) = raw_server(|auth| {
        // `{bad `, then 171 bytes, then the bearer value crosses byte 200
        let body = format!("data: {{bad {} quokka {auth}\n\n", "y".repeat(163));
        (200, "text/event-stream", body)
    })
    .await;
    a_failed_turn_shows_no_start_of(
        &format!("http://{address}/v1"),
        &format!("api_key_env = \"{CUT_KEY_ENV}\""),
        "quokka Bearer ***",
        &[CUT_KEY],
    )
    .await;
}

/// Regression: a body that is not a completion was quoted cut to 200
/// bytes, then cleaned: the basic-auth value echoed across the cut showed
/// its start (`Basic Ym9iOmh1bnRlcjJ`).
#[tokio::test]
async fn a_bad_body_cut_inside_the_basic_auth_shows_no_start_of_it() {
    let (address, _) = raw_server(|auth| {
        let body = format!("{{bad {} quokka {auth} tail", "z".repeat(163));
        (200, "application/json", body)
    })
    .await;
    a_failed_turn_shows_no_start_of(
        &format!("http://bob:{BOB_PASSWORD}@{address}/v1"),
        "stream = false",
        "quokka Basic ***",
        &[BOB_PASSWORD, BOB_BASIC],
    )
    .await;
}

/// Reads a copy of the fleet file, then says it did.
fn reads_the_fleet_file(request: &Value) -> Reply {
    let last = last_message(request).cloned().unwrap_or(Value::Null);
    match (last["role"].as_str(), last["tool_call_id"].as_str()) {
        (Some("user"), _) => Reply::tool_call(
            "c1",
            "Read",
            json!({ "path": "fleet-copy.toml" }).to_string(),
        ),
        (Some("tool"), Some("c1")) => Reply::tool_call(
            "c2",
            "SendMessage",
            json!({ "text": "read it" }).to_string(),
        ),
        _ => Reply::text(""),
    }
}

/// Regression: the host scrubbed tool results of the providers' keys but
/// not of the password in a provider's `base_url`, so a bot reading the
/// fleet file saw `http://bob:hunter2pass@…` in clear.
#[tokio::test]
async fn the_password_in_a_base_url_is_scrubbed_from_tool_results() {
    let server = OpenAiServer::builder()
        .responder(reads_the_fleet_file)
        .start()
        .await;
    // percent-encoded in the URL: `hunter2pass!`
    let base_url = server
        .base_url()
        .replace("http://", &format!("http://bob:{BOB_PASSWORD}%21@"));
    let fleet = TestFleet::new()
        .openai("main", &base_url, "max_retries = 0")
        .bot("r", "main", &["SendMessage", "Read"])
        // commands that may read the host's files: every bot's results are
        // scrubbed of the host's credentials (with isolated commands,
        // which cannot, they are not: suite::shell_limits)
        .runtime(
            "debounce_ms = 0\nidle_timeout_s = 300\nextract_memory = false\n\
             shell_sandbox = \"off\"\n",
        );
    let path = fleet.write();
    let basic = "Ym9iOmh1bnRlcjJwYXNzIQ=="; // bob:hunter2pass!
    std::fs::create_dir_all(fleet.path().join("data/workspace/alice")).unwrap();
    std::fs::write(
        fleet.path().join("data/workspace/alice/fleet-copy.toml"),
        format!(
            "{}\n# decoded = {BOB_PASSWORD}!\n# basic = {basic}\n",
            std::fs::read_to_string(&path).unwrap()
        ),
    )
    .unwrap();
    let host = fleet.start().await;
    let session = host.complete_turn("r", "read the fleet file").await;
    let entries = serde_json::to_string(&host.entries(&session).await).unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let received = requests[1]
        .messages()
        .last()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    for (what, text) in [("the transcript", &entries), ("the model", &received)] {
        // the tool read the file: what is around the credentials is there
        for part in [
            "http://bob:[redacted]@",
            "decoded = [redacted]",
            "basic = [redacted]",
        ] {
            assert!(text.contains(part), "{what} lacks {part:?}: {text}");
        }
        for secret in [BOB_PASSWORD, basic] {
            assert!(!text.contains(secret), "{what} shows {secret:?}: {text}");
        }
    }
    host.shutdown().await;
    server.shutdown().await;
}
